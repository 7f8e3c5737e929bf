"""Orchestrator: one plan as one ``pytest --maestro`` run executes it, without pytest.

It composes what every process of the run shares: the settings, the plan's graph, the project
root, the ``Resolver`` (how each phase runs), the ``RunState`` (what the run knows and decides)
and the ``Lifecycle`` (the session, isolation, budget and outputs); and it runs a phase. What a
process does depends on its ``Role``, said once where the run starts.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..phase.events import Progress
from ..phase.facts import SkipReason
from ..phase.outcome import Attempt, PhaseOutcome
from ..phase.runner import PhaseRunner, RunConfig
from ..plan import Phase
from ..plan.graph import PlanGraph
from ..plan.paths import real_paths
from ..review.final import FinalRecord
from ..review.verdict import Review
from ..runtimes import AgentResult, Runtime
from ..settings import Settings
from ..state import SessionPaths, StateError, Status, fingerprints, read_session
from ..texts import os_error_text
from .lifecycle import Lifecycle
from .resolver import Resolver
from .run_state import RunState

if TYPE_CHECKING:
    # Only an agent CLI's phase has a prompt, only a reviewed phase a review step, only a
    # final review its step: a run of commands imports none of them.
    from ..phase.prompt import PromptContext, SessionContext
    from ..phase.review import PhaseReview, Reviewer
    from ..remote.worker import RemoteWorker  # only a remote worker has one


class Role(enum.Enum):
    """Which process of a run this is."""

    SOLE = "sole"  # no xdist: it decides, and runs the phases one at a time
    CONTROLLER = "controller"  # xdist's controller: it decides, and runs no phase
    WORKER = "worker"  # an xdist worker: it runs the phases it is sent, beside other workers

    @property
    def decides(self) -> bool:
        """It receives every report: it keeps the session, judges the run, prints progress."""
        return self is not Role.WORKER


class Orchestrator:
    def __init__(
        self,
        settings: Settings,
        graph: PlanGraph,
        root: Path,
        *,
        agent_dirs: Iterable[Path],
        role: Role,
        runtimes: Mapping[str, Runtime],
        durations: dict[str, float] | None = None,
        remote: RemoteWorker | None = None,
    ) -> None:
        self.settings = settings
        self.remote = remote  # a remote worker's link to its controller: phases run remote
        self.plan = plan = graph.plan
        self.plan_path = plan.path.resolve()
        self.root = root
        self.role = role
        # Symlinks inside the root resolved: two names of one file are one to the scheduler.
        declared = (path for phase in plan.phases for path in (*phase.files.all(), *phase.reads))
        self.graph = graph.with_aliases(real_paths(root, declared))
        self.paths = SessionPaths.for_plan(root / settings.state_dir, plan, root)
        self.resolve = Resolver(settings, self.graph, root, _unique(agent_dirs), dict(runtimes))
        if role.decides:  # a worker reads them when a phase first names an agent
            self.resolve.agents  # noqa: B018 - raises PlanError for a malformed definition here
        self.run = RunState(
            self.graph,
            decides=role.decides,
            durations=durations,
            breaker_threshold=settings.circuit_breaker,
        )
        self.life = Lifecycle(settings, self.graph, root, self.paths, self.run)
        self.progress: Progress | None = None  # told when a phase starts, retries, waits
        # Told of a phase completed, at its report, before the end is synced: the xdist
        # scheduler, on the controller, which starts what the phase held back.
        self.completed: Callable[[str], None] | None = None

    def phase_started(self, phase: Phase, worker: str | None = None) -> None:
        """The phase in progress in the session, not synced: where a crash would leave files
        to put back, the runner's running record holds the start on disk before it runs."""
        self.life.phase_started(phase, self.resolve.agent_name(phase), worker)

    def run_phase(self, phase: Phase) -> PhaseOutcome:
        if self.remote is not None:
            return self.run_remote(self.remote, phase)
        config = self.run_config(phase)
        if not config.agent_cli:  # a phase's own commands read no prompt: none is built
            return self.runner(config, phase, None).run(phase)
        context = self.prompt_context(phase)
        outcome = self.runner(config, phase, context).run(phase)
        return dataclasses.replace(outcome, warnings=(*outcome.warnings, *context.warnings))

    def run_remote(self, remote: RemoteWorker, phase: Phase) -> PhaseOutcome:
        """On a remote worker: the phase in the work tree its start brings, its result with it
        (see ``remote/``); a start that cannot be had fails it in one line naming the host."""
        from ..remote import RemoteError
        from ..remote.home import phase_logs

        started = time.time()
        try:
            start, space = remote.open(phase.id)
        except RemoteError as exc:
            attempt = Attempt(0, AgentResult(Status.FAILED, str(exc)))
            log = self.paths.log(phase.id)
            return PhaseOutcome(phase.id, Status.FAILED, (attempt,), log, started, time.time())
        config = dataclasses.replace(
            self.run_config(phase),
            root=space.root,
            isolation=None,
            concurrent_files=frozenset(),  # a work tree of its own
            disposable=True,
            scope=space.problems,
        )
        context = None
        if config.agent_cli:  # the session as the controller handed it over
            from ..phase.prompt import SessionContext

            given = SessionContext(start.session_id, start.dependencies, (), start.final_findings)
            context = self.prompt_context(phase, given)
        outcome = self.runner(config, phase, context).run(phase)
        megabyte = 1024 * 1024
        logs = phase_logs(self.paths.logs, phase.id, int(self.settings.log_limit * megabyte))
        result = space.result(phase, int(self.settings.remote_diff_limit * megabyte), logs)
        return dataclasses.replace(outcome, remote=result.to_dict())

    def runner(self, config: RunConfig, phase: Phase, context: PromptContext | None) -> PhaseRunner:
        """A runner of the phase on its runtime; ``context``: its prompt's, None for commands."""
        name = self.resolve.runtime_name(phase)
        assert name is not None, "Resolver.refusal refuses a phase without a runtime"
        runtime = self.resolve.runtimes[name]
        if context is None:
            return PhaseRunner(config, runtime, _no_prompt)
        from ..phase.prompt import prompter

        return PhaseRunner(config, runtime, prompter(context, self.paths.log(phase.id)))

    def run_config(self, phase: Phase) -> RunConfig:
        """How the phase runs here, in the project root (a worktree when isolated)."""
        agent_cli = self.resolve.runtime_name(phase) != "shell"  # a command's exit code is proof
        review = self.review(phase)
        return RunConfig(
            plan=self.plan,
            root=self.root,
            paths=self.paths,
            timeout=self.resolve.timeout(phase),
            check_timeout=self.settings.check_timeout,
            max_retries=self.settings.max_retries,
            agent=self.resolve.agent(phase),
            model=self.resolve.model(phase),
            autonomous=self.settings.autonomous,
            agent_cli=agent_cli,
            strict_files=self.settings.strict_files,
            max_wait=self.settings.max_wait,
            budget=self.life.budget,
            ignored=self._ignored,
            # In a worktree of its own, no change is another phase's.
            concurrent_files=self.concurrent_files(phase)
            if agent_cli and self.life.isolation is None
            else frozenset(),
            log_limit=int(self.settings.log_limit * 1024 * 1024),
            isolation=self.life.isolation,
            progress=self.progress,
            plan_path=self.plan_path,
            slots=self.life.slots,
            review=review,
            # What a loop record a killed run left must match, for a reviewed phase only.
            definition=self.definitions[phase.id] if review is not None else "",
            # In the session, where this process holds it (without xdist; with it, the
            # scheduler records the start as it sends the phase).
            started=functools.partial(self.phase_started, phase)
            if self.life.recorder is not None
            else None,
        )

    @functools.cached_property
    def _ignored(self) -> tuple[str, ...]:
        """What a phase's changes never include: the state dir, relative to the root."""
        return (self.paths.state_dir.relative_to(self.root).as_posix() + "/",)

    @functools.cached_property
    def definitions(self) -> dict[str, str]:
        """Each phase's fingerprint, as the session keeps it (``state.fingerprints``)."""
        return fingerprints(self.graph)

    def review(self, phase: Phase) -> PhaseReview | None:
        """The phase's review step, or None: it is not reviewed."""
        reviewer = self.resolve.reviewers.reviewer(phase)
        if reviewer is None:
            return None
        implementer = self.resolve.runtime_name(phase)
        return dataclasses.replace(
            self._review_step(reviewer),
            rounds=self.settings.review_rounds,
            implementer=self.resolve.runtimes.get(implementer) if implementer else None,
            escalate=phase.escalate_model or self.settings.escalate_model,
        )

    def _review_step(self, reviewer: Reviewer) -> PhaseReview:
        """A review by ``reviewer`` as this run makes every call: its budget, slots and waits."""
        ignored = (self.paths.state_dir.relative_to(self.root).as_posix() + "/",)
        from ..phase.review import PhaseReview

        return PhaseReview(
            reviewer,
            self.plan,
            self.paths,
            self.settings.max_wait,
            self.life.budget,
            self.life.slots,
            ignored,
        )

    def why_no_final_review(self) -> SkipReason | None:
        """Why the final review must not run now (asked where the session is held), or None."""
        return self.run.why_no_final_review(self.life.final_passed())

    def final_review(self) -> Review:
        """The final review of the run's change, in this process (a worker's under xdist):
        the session's base and the phases' results read from the session file, as a worker
        reads its dependencies' results."""
        reviewer = self.resolve.reviewers.final_reviewer(self.plan.phases)
        base = self.life.base
        assert reviewer is not None and base is not None, "refused before anything ran"
        try:
            doc = read_session(self.paths.snapshot)
        except (OSError, StateError) as exc:
            why = os_error_text(exc) if isinstance(exc, OSError) else str(exc)
            return Review(reviewer.mode, reviewer.name, failure=f"cannot read the session: {why}")
        results = {pid: state.result for pid, state in doc.phases.items() if state.result}
        ask = self._review_step(reviewer)
        from ..phase.final import FinalStep

        step = FinalStep.of(ask, self.root, base, self.plan_path, self.progress)
        return step(FinalRecord.from_mapping(doc.final_review), results)

    def concurrent_files(self, phase: Phase) -> frozenset[str]:
        """Files declared by phases that may run beside this one (on other xdist workers): a
        change to them is theirs, not this phase's."""
        if self.role is Role.SOLE:  # phases run one at a time
            return frozenset()
        return frozenset(
            path
            for other in self.plan.phases
            if other.id != phase.id and self.graph.may_run_concurrently(phase.id, other.id)
            for path in other.files.all()
        )

    def prompt_context(self, phase: Phase, session: SessionContext | None = None) -> PromptContext:
        """The agent, the session and what the phase's dependencies handed on: ``session``
        where the controller handed it over (a remote worker), else read from the session file
        (a worker reads it too: the controller wrote them before sending it)."""
        from ..phase.prompt import PromptContext, SessionContext

        if session is None:
            session = SessionContext.read(self.plan, phase, self.paths.snapshot)
        return PromptContext(
            self.plan,
            self.resolve.agent(phase),
            session.session_id,
            session.dependencies,
            wave=self.graph.wave(phase.id),
            runtime=self.resolve.runtime_name(phase) or "agent",
            warnings=session.warnings,
            final_findings=session.final_findings,
        )


def _no_prompt(phase: Phase, attempt: int, previous: Attempt | None) -> str:
    return ""


def _unique(paths: Iterable[Path]) -> list[Path]:
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())
