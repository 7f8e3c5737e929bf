"""Orchestrator: one plan as one ``pytest --maestro`` run executes it, without pytest.

It holds what every process of the run shares (settings, plan, graph, project root, agents), the
run's :class:`RunState`, and, where reports arrive, the session state's :class:`Recorder`. It
answers how a phase runs (runtime, timeout, markers) and runs it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from .agents import AgentRegistry
from .plan import Phase, Plan
from .plan.errors import location
from .plan.graph import PlanGraph
from .prompt import build_prompt
from .recorder import Recorder
from .run import RunState
from .runner import PhaseOutcome, PhaseRunner, RunConfig
from .runtimes import AVAILABLE, get_runtime
from .settings import Settings


def marker_name(text: str) -> str:
    """A marker name usable with ``-m``: letters, digits and underscores."""
    name = re.sub(r"\W+", "_", text.strip()).strip("_").lower()
    return name if name and not name[0].isdigit() else f"_{name}"


class Orchestrator:
    def __init__(
        self,
        settings: Settings,
        plan: Plan,
        root: Path,
        *,
        agent_dirs: Iterable[Path],
        decides: bool,
        durations: dict[str, float] | None = None,
    ) -> None:
        self.settings = settings
        self.plan = plan
        self.plan_path = plan.path.resolve()
        self.graph = PlanGraph(plan)
        self.root = root
        self.state_dir = root / settings.state_dir
        self.agents = AgentRegistry.load(_unique(agent_dirs))
        self.run = RunState(
            plan,
            self.graph,
            decides=decides,
            durations=durations,
            breaker_threshold=settings.circuit_breaker,
        )
        self.recorder: Recorder | None = None  # the session state, where reports arrive

    # -- the session state ---------------------------------------------------------------------

    def open_state(self, parallel: bool) -> None:
        """Lock and resume the plan's session; StateError when it cannot be used."""
        recorder = Recorder.open(self.state_dir, self.plan, self.root, self.settings.fresh)
        self.recorder = recorder
        recorder.store.set_session(execution_mode="parallel" if parallel else "sequential")
        self.run.resume(
            {pid: when for pid in self.plan.ids if (when := recorder.completed_earlier(pid))}
        )

    def close_state(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None

    # -- phases --------------------------------------------------------------------------------

    def where(self, phase: Phase) -> str:
        return f"{location(self.plan.path, phase.line)}: phase {phase.id!r}"

    def unknown_agent(self) -> str | None:
        """The first phase's reference to an agent no directory defines, as an error line."""
        for phase in self.plan.phases:
            if phase.agent and self.agents.get(phase.agent) is None:
                return (
                    f"{self.where(phase)} names unknown agent {phase.agent!r}; "
                    f"available: {', '.join(self.agents.names())}"
                )
        return None

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

    def runtime_name(self, phase: Phase) -> str:
        agent = self.agents.get(phase.agent) if phase.agent else None
        return agent.runtime if agent else "shell"

    def agent_name(self, phase: Phase) -> str:
        return phase.agent or self.runtime_name(phase)

    def cannot_run(self, selected: Iterable[str]) -> str | None:
        """Why the first selected phase that cannot run at all cannot, or None: refused before
        anything runs rather than failed half-way through the plan."""
        for phase_id in selected:
            phase = self.plan.phase(phase_id)
            runtime = self.runtime_name(phase)
            if runtime not in AVAILABLE:
                return (
                    f"{self.where(phase)} needs runtime {runtime!r} (agent {phase.agent!r}), "
                    f"which this version does not provide; available: {', '.join(AVAILABLE)}"
                )
            if not phase.run and runtime == "shell":
                return f"{self.where(phase)} has nothing to run: give it 'run:' commands"
        return None

    def timeout(self, phase: Phase) -> float:
        """Seconds per attempt unless the phase sets its own: the agent's ``timeout_mins``,
        else ``--maestro-timeout``."""
        agent = self.agents.get(phase.agent) if phase.agent else None
        if agent is not None and agent.timeout_mins is not None:
            return agent.timeout_mins * 60
        return self.settings.timeout

    def phase_started(self, phase: Phase, worker: str | None = None) -> None:
        """On disk before the phase starts: a killed run leaves it in progress, to be reset."""
        if self.recorder is not None:
            self.recorder.started(phase, self.agent_name(phase), worker)

    def run_phase(self, phase: Phase) -> PhaseOutcome:
        config = RunConfig(
            plan=self.plan,
            root=self.root,
            log_dir=self.state_dir / "logs",
            timeout=self.timeout(phase),
            check_timeout=self.settings.check_timeout,
            max_retries=self.settings.max_retries,
        )
        runner = PhaseRunner(config, get_runtime(self.runtime_name(phase)), build_prompt)
        return runner.run(phase)


def _unique(paths: Iterable[Path]) -> list[Path]:
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())
