"""Who reviews which phase, and how, answered without side effects: the review mode a phase
gets, the reviewer agent, its runtime, model and timeout, and why a phase's review cannot run.

A phase's ``review:`` beats its agent's, which beats ``--maestro-review``; the last applies
only to phases an agent CLI runs (a shell phase's verdict is its own commands'). The reviewer is
``--maestro-reviewer``'s agent, else the built-in ``reviewer``; it runs on its own ``runtime:``,
else on the phase's, and on its own ``model:``, else, on the phase's runtime, on the phase's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ..plan import Phase
from ..review.final import FINAL_MODE, FINAL_NAME
from ..runtimes import Runtime
from ..runtimes.agents import Agent, AgentRegistry
from ..settings import Settings

if TYPE_CHECKING:  # a run that reviews nothing imports none of the review loop
    from ..phase.review import Reviewer

DEFAULT_REVIEWER = "reviewer"  # runtimes/builtin_agents/reviewer.md


class Resolves(Protocol):
    """What the reviewers ask of the ``Resolver`` about the phase under review."""

    def where(self, phase: Phase) -> str: ...

    def defined_agent(self, phase: Phase) -> Agent | None: ...

    def runtime_name(self, phase: Phase) -> str | None: ...

    def model(self, phase: Phase) -> str | None: ...

    def timeout(self, phase: Phase) -> float: ...


class Reviewers:
    def __init__(
        self,
        settings: Settings,
        agents: Callable[[], AgentRegistry],
        runtimes: Mapping[str, Runtime],
        resolve: Resolves,
    ) -> None:
        self.settings = settings
        self._agents = agents  # read when a reviewer is first asked for, as the resolver's are
        self.runtimes = runtimes
        self.resolve = resolve
        self.name = settings.reviewer or DEFAULT_REVIEWER

    @property
    def agents(self) -> AgentRegistry:
        return self._agents()

    def mode(self, phase: Phase) -> str:
        """``none``, ``spec`` or ``spec+quality``."""
        if phase.review:
            return phase.review
        agent = self.resolve.defined_agent(phase)
        if agent is not None and agent.review:
            return agent.review
        runs_on = self.resolve.runtime_name(phase)
        return "none" if runs_on in (None, "shell") else self.settings.review

    def runtime_name(self, phase: Phase) -> str | None:
        """The reviewer's runtime: its own, else the phase's agent CLI's (None: neither)."""
        agent = self.agents.get(self.name)
        if agent is not None and agent.runtime:
            return agent.runtime
        name = self.resolve.runtime_name(phase)
        return None if name == "shell" else name

    def reviewer(self, phase: Phase) -> Reviewer | None:
        """Who reviews the phase, or None: it is not reviewed. ``refusal`` said no to any that
        cannot be reviewed before the run started."""
        mode = self.mode(phase)
        if mode == "none":  # asked of every phase: the agent definitions are read only now
            return None
        agent = self.agents.get(self.name)
        name = self.runtime_name(phase)
        if agent is None or name is None or name not in self.runtimes:
            return None
        same = name == self.resolve.runtime_name(phase)
        model = agent.model or (self.resolve.model(phase) if same else None)
        if agent.timeout_mins is not None:
            timeout = agent.timeout_mins * 60
        else:
            timeout = phase.timeout if phase.timeout is not None else self.resolve.timeout(phase)
        from ..phase.review import Reviewer

        return Reviewer(mode, agent, self.runtimes[name], model, timeout)

    def refusal(self, phase: Phase) -> str | None:
        """Why the phase's review cannot run, in one line; None when it can (or none is due)."""
        mode = self.mode(phase)
        if mode == "none":
            return None
        where = f"{self.resolve.where(phase)} is reviewed ({mode})"
        agent = self.agents.get(self.name)
        if agent is None:
            return f"{where}, but {self._unknown()}"
        name = self.runtime_name(phase)
        if name is None:
            return (
                f"{where}, but its reviewer {agent.name!r} names no runtime and the phase runs "
                "on shell: give the reviewer agent a runtime: (one with a read-only mode)"
            )
        return self._runtime_refusal(where, agent, name)

    # -- the final review ----------------------------------------------------------------------

    def final_runtime_name(self, phases: Iterable[Phase]) -> str | None:
        """The final reviewer's runtime: its own, else the run's (``final_model`` says)."""
        agent = self.agents.get(self.name)
        if agent is not None and agent.runtime:
            return agent.runtime
        return self._run_runtime(phases)

    def _run_runtime(self, phases: Iterable[Phase]) -> str | None:
        """The runtime the run's agents run on: ``--maestro-runtime``, else the first phase's
        that runs on an agent CLI; None: only shell phases."""
        if self.settings.runtime and self.settings.runtime != "shell":
            return self.settings.runtime
        names = (self.resolve.runtime_name(phase) for phase in phases)
        return next((name for name in names if name not in (None, "shell")), None)

    def final_reviewer(self, phases: Sequence[Phase]) -> Reviewer | None:
        """Who makes the final review, on which model: ``--maestro-final-review-model``, else
        on the run's runtime ``--maestro-escalate-model`` (the most capable model the run
        names), else the reviewer's own ``model:``, else on the run's runtime
        ``--maestro-model``; else the CLI's default. None: it cannot be (``final_refusal``)."""
        agent = self.agents.get(self.name)
        name = self.final_runtime_name(phases)
        if agent is None or name is None or name not in self.runtimes:
            return None
        same = name == self._run_runtime(phases)
        settings = self.settings
        model = settings.final_review_model or (settings.escalate_model if same else None)
        model = model or agent.model or (settings.model if same else None)
        minutes = agent.timeout_mins
        timeout = minutes * 60 if minutes is not None else settings.timeout
        from ..phase.review import Reviewer

        return Reviewer(FINAL_MODE, agent, self.runtimes[name], model, timeout)

    def final_refusal(self, phases: Sequence[Phase], where: str) -> str | None:
        """Why the final review cannot run, in one line; None when it can. ``where``: the
        plan, as errors name it."""
        clash = next((p for p in phases if p.id == FINAL_NAME), None)
        if clash is not None:
            return (
                f"{self.resolve.where(clash)} has the final review's name "
                "(--maestro-final-review adds an item of that name): rename the phase"
            )
        head = f"{where}: --maestro-final-review"
        agent = self.agents.get(self.name)
        if agent is None:
            return f"{head}: {self._unknown()}"
        name = self.final_runtime_name(phases)
        if name is None:
            return (
                f"{head}: its reviewer {agent.name!r} names no runtime and no phase runs on an "
                "agent CLI: give the reviewer agent a runtime: (one with a read-only mode)"
            )
        return self._runtime_refusal(head, agent, name)

    def _unknown(self) -> str:
        return (
            f"--maestro-reviewer names unknown agent {self.name!r}; "
            f"available: {', '.join(self.agents.names())}"
        )

    def _runtime_refusal(self, head: str, agent: Agent, name: str) -> str | None:
        runtime = self.runtimes.get(name)
        if runtime is None:
            return (
                f"{head}, but its reviewer {agent.name!r} needs runtime {name!r}, which no "
                f"installed plugin provides; available: {', '.join(sorted(self.runtimes))}"
            )
        if not getattr(runtime, "read_only", ""):
            return (
                f"{head}, but its reviewer {agent.name!r} would run on {name!r}, which has no "
                f"read-only mode; a reviewer runs on {', '.join(self.read_only_runtimes())}"
            )
        return None

    def read_only_runtimes(self) -> list[str]:
        return sorted(n for n, r in self.runtimes.items() if getattr(r, "read_only", ""))
