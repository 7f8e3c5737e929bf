"""Collection: the plan file is a pytest File, each phase an Item, and under
``--maestro-final-review`` the final review one more; see docs/architecture.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from .._compat import TerminalRepr, skip_at_item
from ..phase.facts import PhaseFacts, SkipReason, iso_time
from ..phase.outcome import PhaseOutcome
from ..plan import Phase
from ..review.final import FINAL_NAME
from ..review.verdict import Review
from ..run.orchestrator import Orchestrator
from ..state.model import Status, Tokens
from ..texts import os_error_text
from ..views.failure import failure_message, render_failure
from .final import failure_lines, review_facts
from .junit import attach_output

SYNC_NAME = "maestro-sync"
ORCHESTRATOR_KEY = pytest.StashKey[Orchestrator]()
OUTCOME_KEY = pytest.StashKey[PhaseOutcome]()
SKIP_KEY = pytest.StashKey[SkipReason]()
SYNC_KEY = pytest.StashKey["SyncItem"]()
FINAL_KEY = pytest.StashKey[tuple[Review, float, float]]()  # the review, its start and end


class PhaseFailed(Exception):
    def __init__(self, outcome: PhaseOutcome) -> None:
        super().__init__(outcome.status)
        self.outcome = outcome


class PlanFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        maestro = self.config.stash[ORCHESTRATOR_KEY]
        unknown = maestro.resolve.unknown_agent()
        if unknown is not None:
            raise self.CollectError(unknown)
        for phase_id in maestro.run.run_order():
            phase = maestro.plan.phase(phase_id)
            item = PhaseItem.from_parent(self, name=phase.id, phase=phase)
            for marker in maestro.resolve.markers(phase):
                item.add_marker(marker)
            yield item
        if maestro.settings.final_review:  # after every phase, in every process that collects
            yield FinalItem.from_parent(self, name=FINAL_NAME)
        if not maestro.run.decides:  # an xdist worker: see scheduler.py for why
            sync = SyncItem.from_parent(self, name=SYNC_NAME)
            self.config.stash[SYNC_KEY] = sync  # kept through any deselection
            yield sync


class PhaseItem(pytest.Item):
    def __init__(self, *, phase: Phase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.phase = phase

    @property
    def maestro(self) -> Orchestrator:
        return self.config.stash[ORCHESTRATOR_KEY]

    def setup(self) -> None:
        reason = self.maestro.run.why_not_run(self.phase.id)
        if reason is not None:
            self.stash[SKIP_KEY] = reason  # the report's facts say why, typed
            raise skip_at_item(reason.text)

    def runtest(self) -> None:
        outcome = self.maestro.run_phase(self.phase)  # which records its start
        self.stash[OUTCOME_KEY] = outcome
        attach_output(self.config, self, outcome)
        if not outcome.ok:
            raise PhaseFailed(outcome)

    def facts(self, report: pytest.TestReport) -> PhaseFacts | None:
        """What the controller must learn of the phase from this report, or None: no news."""
        outcome = self.stash.get(OUTCOME_KEY, None)
        ran = None if outcome is None else lambda worker: outcome_facts(outcome, worker)
        return item_facts(self, report, self.phase.id, ran)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, PhaseFailed):
            cwd = self.config.invocation_params.dir
            return render_failure(self.phase, excinfo.value.outcome, cwd)
        if isinstance(excinfo.value, OSError):  # the disk, not the phase: say so in one line
            error = excinfo.value
            return f"phase {self.phase.id!r} could not run: {os_error_text(error)}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        line = self.phase.line - 1 if self.phase.line else None
        return self.path, line, f"phase {self.phase.id}: {self.phase.name}"


class FinalFailed(Exception):
    def __init__(self, review: Review) -> None:
        super().__init__(review.problem)
        self.review = review


class FinalItem(pytest.Item):
    """The final review, run last: after every phase without xdist, and under it sent by the
    scheduler once every phase finished. Whether it runs is decided where the session is held
    (``Orchestrator.why_no_final_review``); a worker runs what it is sent."""

    @property
    def maestro(self) -> Orchestrator:
        return self.config.stash[ORCHESTRATOR_KEY]

    def setup(self) -> None:
        reason = self.maestro.why_no_final_review()
        if reason is not None:
            self.stash[SKIP_KEY] = reason
            raise skip_at_item(reason.text)

    def runtest(self) -> None:
        started = time.time()
        review = self.maestro.final_review()
        self.stash[FINAL_KEY] = (review, started, time.time())
        if not review.passed:
            raise FinalFailed(review)

    def facts(self, report: pytest.TestReport) -> PhaseFacts | None:
        """What the controller must learn of the final review from this report."""
        kept = self.stash.get(FINAL_KEY, None)
        ran = None if kept is None else lambda worker: review_facts(kept[0], worker, *kept[1:])
        return item_facts(self, report, FINAL_NAME, ran)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, FinalFailed):
            return "\n".join(failure_lines(excinfo.value.review, self.maestro.plan))
        if isinstance(excinfo.value, OSError):
            return f"the final review could not run: {os_error_text(excinfo.value)}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, 0, "final review"  # no line of its own: the plan's first


class SyncItem(pytest.Item):
    """A no-op item collected on xdist workers only; see ``scheduler.py`` for why it exists."""

    def runtest(self) -> None:  # never called: the protocol hook short-cuts it
        pass

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, SYNC_NAME


def item_facts(
    item: pytest.Item,
    report: pytest.TestReport,
    name: str,
    ran: Callable[[str], PhaseFacts] | None,
) -> PhaseFacts | None:
    """What the controller must learn of a phase or the final review (``name``) from one of its
    reports, or None: no news. ``ran`` gives the facts of what its call decided, on a worker,
    or is None when the call raised before it decided anything."""
    if report.when == "setup" and report.skipped:
        reason = item.stash.get(SKIP_KEY, None)
        if reason is None:  # skipped by something else than this plugin
            return PhaseFacts(name, Status.SKIPPED)
        return PhaseFacts.skipped(name, reason)
    if report.when == "call":
        worker = getattr(item.config, "workerinput", {}).get("workerid", "main")
        if ran is None:
            return PhaseFacts(
                name, Status.COMPLETED if report.passed else Status.FAILED, worker=worker
            )
        return ran(worker)
    # An error in teardown (a plugin's hook) is pytest's to report: the outcome was the call's,
    # already recorded, and a completed (paid) phase stays completed.
    if report.failed and report.when == "setup":  # it never ran
        return PhaseFacts(name, Status.FAILED)
    return None


def outcome_facts(outcome: PhaseOutcome, worker: str) -> PhaseFacts:
    tokens, handoff = outcome.tokens, outcome.handoff
    spent = any(a.tokens != Tokens() for a in outcome.attempts)
    last = outcome.attempts[-1].agent if outcome.attempts else None
    return PhaseFacts(
        outcome.phase_id,
        outcome.status,
        worker=worker,
        attempts=len([a for a in outcome.attempts if a.number]),
        started=iso_time(outcome.started),
        finished=iso_time(outcome.finished),
        duration=round(outcome.finished - outcome.started, 3),
        result=handoff.status_line or (last.message if last and last.text else None),
        failure=failure_message(outcome),
        tokens=replace(tokens, cost=round(tokens.cost, 6)) if spent else None,
        unverified=outcome.unverified or None,
        downstream=dict(handoff.downstream) or None,
        outside=list(outcome.outside) or None,
        warnings=list(outcome.warnings) or None,
        review=outcome.review.to_dict() if outcome.review is not None else None,
        remote=dict(outcome.remote) if outcome.remote is not None else None,
    )
