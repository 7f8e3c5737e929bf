"""How each phase of a plan runs, answered without side effects: its runtime, agent, model,
timeout and markers, its reviewer (``reviewers.py``), the warnings the plan's agents call for, and
why a selection cannot run at all. Every process of a run asks the same ``Resolver`` and gets
the same answers."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path

from ..plan import Phase
from ..plan.errors import location
from ..plan.graph import PlanGraph
from ..runtimes import Runtime
from ..runtimes.agents import Agent, AgentRegistry, generic_agent, normalise
from ..runtimes.cli import ignored_field_lines
from ..settings import Settings
from .reviewers import Reviewers


def marker_name(text: str) -> str:
    """A marker name usable with ``-m``: letters, digits and underscores."""
    name = re.sub(r"\W+", "_", text.strip()).strip("_").lower()
    return name if name and not name[0].isdigit() else f"_{name}"


class Resolver:
    def __init__(
        self,
        settings: Settings,
        graph: PlanGraph,
        root: Path,
        agent_dirs: Sequence[Path],
        runtimes: Mapping[str, Runtime],
    ) -> None:
        self.settings = settings
        self.graph = graph
        self.plan = graph.plan
        self.root = root
        self.agent_dirs = agent_dirs  # where agent definitions are looked for, first found first
        self.runtimes = runtimes
        self.reviewers = Reviewers(settings, lambda: self.agents, runtimes, self)

    @cached_property
    def agents(self) -> AgentRegistry:
        """The agent definitions, read when a phase's agent is first asked for: a plan whose
        phases name none (an xdist worker running its commands) reads none. PlanError names a
        malformed one."""
        return AgentRegistry.load(self.agent_dirs)

    def where(self, phase: Phase) -> str:
        return f"{location(self.plan.path, phase.line)}: phase {phase.id!r}"

    def defined_agent(self, phase: Phase) -> Agent | None:
        """The definition of the phase's agent, if some directory or the built-ins have it."""
        return self.agents.get(phase.agent) if phase.agent else None

    def agent(self, phase: Phase) -> Agent | None:
        """The phase's agent: its definition, else a generic role of its name."""
        if not phase.agent:
            return None
        return self.defined_agent(phase) or generic_agent(phase.agent)

    def unknown_agent(self) -> str | None:
        """An error line for a shell phase naming an agent no directory defines: a typo, which
        would lose the agent's timeout."""
        for phase in self.plan.phases:
            if phase.agent and self.defined_agent(phase) is None and self._shell(phase):
                names = self.agents.names()
                close = difflib.get_close_matches(phase.agent, names, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                return (
                    f"{self.where(phase)} names unknown agent {phase.agent!r}; "
                    f"{hint}available: {', '.join(names)}"
                )
        return None

    def _shell(self, phase: Phase) -> bool:
        return self.runtime_name(phase) == "shell"

    def warnings(self) -> list[str]:
        """What users should know of the plan's agents: those no directory defines, which LLM
        phases play as a generic role of their name, and fields their runtime is not given."""
        generic: dict[str, str] = {}  # normalised name -> as first written
        for phase in self.plan.phases:
            if phase.agent and self.defined_agent(phase) is None and not self._shell(phase):
                generic.setdefault(normalise(phase.agent), phase.agent)
        lines = []
        if generic:
            looked = ", ".join(str(d) for d in self.agents.searched) or "nowhere"
            lines.append(
                f"agents defined nowhere, played by a generic role of their name: "
                f"{', '.join(generic.values())} (looked in {looked}, then the built-ins)"
            )
        uses = ((self.defined_agent(p), self.runtime_name(p) or "") for p in self.plan.phases)
        return lines + ignored_field_lines((a, n, self.runtimes.get(n)) for a, n in uses if a)

    def markers(self, phase: Phase) -> list[str]:
        names = [f"wave_{self.graph.wave(phase.id)}"]
        if phase.agent:
            names.append(marker_name(phase.agent))
        names += [marker_name(tag) for tag in (*self.plan.tags, *phase.tags)]
        return names

    def marker_lines(self) -> Iterator[str]:
        names = {m for phase in self.plan.phases for m in self.markers(phase)}
        for name in sorted(names):
            yield f"{name}: pytest-maestro phase marker (agent, wave or tag)"

    def runtime_name(self, phase: Phase) -> str | None:
        """The phase's own runtime, else its agent's, else ``--maestro-runtime``, else ``shell``
        when it has ``run:`` commands; None: nothing can run it."""
        agent = self.defined_agent(phase)
        for runtime in (phase.runtime, agent.runtime if agent else None, self.settings.runtime):
            if runtime:
                return runtime
        return "shell" if phase.run else None

    def agent_name(self, phase: Phase) -> str:
        return phase.agent or self.runtime_name(phase) or "none"

    def refusal(self, selected: Iterable[str], final: bool = False) -> str | None:
        """Why the first selected phase that cannot run at all cannot, or None: refused before
        anything runs rather than failed half-way through the plan. ``final``: the final
        review is selected too."""
        if final:
            refused = self.reviewers.final_refusal(self.plan.phases, location(self.plan.path))
            if refused is not None:
                return refused
        needs_consent: dict[str, Runtime] = {}
        for phase_id in selected:
            phase = self.plan.phase(phase_id)
            if phase.done:  # skipped: it needs nothing to run it
                continue
            name = self.runtime_name(phase)
            if name is None:
                return (
                    f"{self.where(phase)} has nothing to run: give it 'run:' commands, or an "
                    f"agent CLI to hand it to (--maestro-runtime: {', '.join(self.llm_runtimes())})"
                )
            runtime = self.runtimes.get(name)
            if runtime is None:
                whose = f"agent {phase.agent!r}" if phase.agent else "--maestro-runtime"
                return (
                    f"{self.where(phase)} needs runtime {name!r} ({whose}), which no installed "
                    f"plugin provides; available: {', '.join(sorted(self.runtimes))}"
                )
            if name == "shell" and not phase.run:
                agent = self.defined_agent(phase)
                why = (
                    f"its agent {agent.name!r} ({agent.path}) says runtime: shell, which runs "
                    "'run:' commands"
                    if agent and agent.runtime == "shell" and agent.path
                    else "shell runs 'run:' commands"
                )
                return (
                    f"{self.where(phase)} has nothing to run: {why}; give it 'run:' commands, "
                    "or an agent whose runtime is an agent CLI"
                )
            review = self.reviewers.refusal(phase)
            if review is not None:
                return review
            if runtime.autonomy and edits(phase) and not self.settings.autonomous:
                needs_consent.setdefault(name, runtime)
        if needs_consent:
            allows = "; ".join(f"{n}: {r.autonomy}" for n, r in needs_consent.items())
            return (
                f"phases go to agent CLIs ({', '.join(needs_consent)}) that can change files and "
                f"run commands in {self.root}: run with --maestro-autonomous to let them do so "
                f"without asking ({allows})"
            )
        return None

    def llm_runtimes(self) -> list[str]:
        return sorted(name for name, runtime in self.runtimes.items() if runtime.autonomy)

    def timeout(self, phase: Phase) -> float:
        """Seconds per attempt unless the phase sets its own: the agent's ``timeout_mins``,
        else ``--maestro-timeout``."""
        agent = self.defined_agent(phase)
        if agent is not None and agent.timeout_mins is not None:
            return agent.timeout_mins * 60
        return self.settings.timeout

    def model(self, phase: Phase) -> str | None:
        """The phase's model, else its agent's, else ``--maestro-model``."""
        agent = self.agent(phase)
        return phase.model or (agent.model if agent else None) or self.settings.model


def edits(phase: Phase) -> bool:
    """Whether a phase may change files: it declares some to write, or declares no files at
    all (formats without file lists). Only one that declares reads and no writes is read-only."""
    return bool(phase.files.writes) or not phase.reads
