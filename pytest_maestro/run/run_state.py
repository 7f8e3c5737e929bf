"""RunState: what this run knows and decides about its phases, without pytest.

Outcomes so far, the selection, why a phase may not run, the circuit breaker's verdict and the
run order. The pytest hooks and the xdist scheduler both read and change it through its methods
only, so every rule about a phase's fate is written once and testable without a session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..phase.facts import PhaseFacts, SkipKind, SkipReason
from ..plan.graph import PlanGraph
from ..state.model import Status
from .breaker import breaker_verdict, doomed_by_failures

DEFAULT_DURATION = 1.0  # seconds, for a phase never measured nor estimated
_SAID = {Status.FAILED: "failed", Status.BLOCKED: "was blocked", Status.SKIPPED: "was skipped"}


class RunState:
    def __init__(
        self,
        graph: PlanGraph,
        *,
        decides: bool = True,
        durations: Mapping[str, float] | None = None,
        breaker_threshold: float = 0.0,
    ) -> None:
        self.graph = graph
        self.plan = graph.plan
        # Only the controller (or the one process without xdist) decides; a worker runs what
        # it is sent, trusting the controller that sent it.
        self.decides = decides
        self.breaker_threshold = breaker_threshold
        self.outcomes: dict[str, Status] = {}  # phase id -> status in this run
        self.selected: frozenset[str] = frozenset(graph.ids)
        self.earlier: dict[str, str] = {}  # phase id -> when it completed in an earlier run
        # Seconds each phase took when it last completed (pytest's cache keeps them across runs).
        self.durations: dict[str, float] = dict(durations or {})
        self.resumed = 0  # phases not run because an earlier run completed them
        self.skipped_after_failure: set[str] = set()  # phase ids, for --lf
        self.stop_reason: str | None = None  # set once the circuit breaker trips
        # Why the selection was refused before any phase ran (``Resolver.refusal``): such a run
        # leaves the outputs of the last one as they were.
        self.refused: str | None = None
        self.final = False  # the final review is selected
        self.final_status: Status | None = None  # what its report said, once one came

    # -- what runs, in which order -------------------------------------------------------------

    def select(self, ids: Iterable[str]) -> None:
        self.selected = frozenset(ids)

    def resume(self, earlier: Mapping[str, str]) -> None:
        """Phases an earlier run completed (definition unchanged), with when they completed."""
        self.earlier = dict(earlier)

    def run_order(self) -> list[str]:
        """Topological order, the phase with the longest remaining path first among the ready.

        Measured durations count only where the plan gives no estimate."""
        estimated = {p.id for p in self.plan.phases if p.estimate is not None}
        measured = {p: s for p, s in self.durations.items() if p not in estimated}
        return self.graph.critical_order(measured)

    def topological(self, ids: Iterable[str]) -> list[str]:
        """``ids`` in written order, moved only where a dependency must come first."""
        return self.graph.written_order(ids)

    def keep_order(self, ids: list[str]) -> list[str]:
        """``ids`` in the given order (pytest's, e.g. ``--ff``) where dependencies allow it."""
        return self.graph.stable_order(ids)

    def duration(self, phase_id: str) -> float:
        """Expected seconds: the plan's estimate, else the last measured run, else 1."""
        estimate = self.plan.phase(phase_id).estimate
        if estimate is not None:
            return estimate
        return self.durations.get(phase_id, DEFAULT_DURATION)

    # -- whether a phase may run ---------------------------------------------------------------

    def why_not_run(self, phase_id: str, scheduled: bool = False) -> SkipReason | None:
        """Why a phase must not run now, or None.

        ``scheduled``: under xdist the scheduler starts a phase only after its dependencies, so
        one that has not run yet is not a reason; run in order, it already ran.
        """
        if not self.decides:
            return None
        phase = self.plan.phase(phase_id)
        if phase.done:
            return SkipReason.done()
        earlier = self.earlier.get(phase_id)
        if earlier is not None:
            return SkipReason.earlier(earlier)
        for dep in phase.blocked_by:
            status = self.outcomes.get(dep)
            if status is Status.COMPLETED or self.plan.phase(dep).done:
                continue
            if status is not None:
                return SkipReason.dependency(dep, status)
            if dep not in self.selected:
                if dep in self.earlier:
                    continue
                return SkipReason.not_selected(dep)
            if not scheduled:
                return SkipReason.not_run_yet(dep)
        return None

    def completed(self, phase_id: str) -> bool:
        return self.outcomes.get(phase_id) is Status.COMPLETED

    def why_no_final_review(self, passed: str | None = None) -> SkipReason | None:
        """Why the final review must not run now, or None. It reviews the plan as a whole, so
        every phase must have completed: in this run, in an earlier one, or in the plan itself.
        ``passed``: when a final review passed that still holds (no phase ran since)."""
        if not self.decides:
            return None
        unfinished = [
            (pid, self.outcomes.get(pid))
            for pid in self.plan.ids
            if not self.plan.phase(pid).done
            and self.outcomes.get(pid) is not Status.COMPLETED
            and pid not in self.earlier  # it stays completed, whatever this run reported of it
        ]
        for wanted in (Status.FAILED, Status.BLOCKED, Status.SKIPPED):
            for pid, status in unfinished:
                if status is wanted:
                    return SkipReason(SkipKind.DEPENDENCY, f"phase {pid!r} {_SAID[status]}", pid)
        for pid, _ in unfinished:
            if pid not in self.selected:
                text = f"phase {pid!r} was not selected and has not completed"
                return SkipReason(SkipKind.NOT_SELECTED, text, pid)
        if unfinished:
            return SkipReason.stopped(f"phase {unfinished[0][0]!r} did not run")
        if passed is not None:
            return SkipReason(SkipKind.EARLIER, f"passed in an earlier run at {passed}")
        return None

    # -- what happened -------------------------------------------------------------------------

    def record(self, facts: PhaseFacts) -> None:
        """A report's news of a phase. A later report of a phase (its teardown failed after the
        call passed) replaces what an earlier one said."""
        done = facts.skip is not None and facts.skip.kind is SkipKind.DONE
        self.outcomes[facts.phase] = Status.COMPLETED if done else facts.status
        if facts.skip is not None:
            if facts.skip.kind is SkipKind.EARLIER:
                self.resumed += 1
            if facts.skip.after_failure:
                self.skipped_after_failure.add(facts.phase)
        if facts.status is Status.COMPLETED and facts.duration is not None:
            self.durations[facts.phase] = facts.duration

    def breaker_verdict(self) -> str | None:
        """The reason to stop the session now, or None; remembered once given."""
        if self.stop_reason is None:
            self.stop_reason = breaker_verdict(
                self.graph, self.selected, self.outcomes, self.breaker_threshold
            )
        return self.stop_reason

    def doomed(self) -> list[str]:
        """Selected phases that failures doomed and that nothing has reported yet, in order."""
        doomed = doomed_by_failures(self.graph, self.outcomes) & self.selected
        return self.topological(doomed - self.outcomes.keys())
