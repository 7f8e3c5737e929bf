"""The final review's reports: what its item (``FinalItem``, in ``collect.py``) reports (its
facts, carried as a phase's are, its one-line failure, its failure in full), and what the process
that decides does with them (``FinalReports``: the verdict into the session, JUnit, ``--lf``'s
memory). See docs/architecture.md, "The final review"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from ..phase.facts import PhaseFacts, SkipKind, SkipReason, iso_time
from ..plan import Plan
from ..review.final import FINAL_NAME, named_phases
from ..review.verdict import Review
from ..run.orchestrator import Orchestrator
from ..state.model import Status, Tokens, now
from . import junit
from .skips import report_skip


def review_facts(review: Review, worker: str, started: float, finished: float) -> PhaseFacts:
    tokens = review.tokens
    return PhaseFacts(
        FINAL_NAME,
        Status.COMPLETED if review.passed else Status.FAILED,
        worker=worker,
        attempts=1,
        started=iso_time(started),
        finished=iso_time(finished),
        duration=round(finished - started, 3),
        result=review.outcome,
        failure=None if review.passed else one_line_failure(review),
        tokens=replace(tokens, cost=round(tokens.cost, 6)) if tokens != Tokens() else None,
        review=review.to_dict(),
    )


def one_line_failure(review: Review) -> str:
    """``final review: [blocking] x.py:3: what (phases a, b)``: the first blocking finding, or
    why the review gave no verdict."""
    problem = review.problem or "failed"
    return "final " + problem if problem.startswith("review") else problem


def failure_lines(review: Review, plan: Plan) -> list[str]:
    """The failed final review in full, and what happens next."""
    if review.failure is not None:
        return [f"final review by {review.reviewer} failed: {review.failure}"]
    lines = [f"final review by {review.reviewer}: {review.outcome}", *review.lines()[1:]]
    named = named_phases(review, plan.ids)
    if named:
        lines.append(
            f"sent back to work: {', '.join(named)} (the next run runs them again, told these "
            "findings; --lf runs them and the final review)"
        )
    return lines


class FinalReports:
    """The final review's news, where the session is held."""

    def __init__(self, config: pytest.Config, maestro: Orchestrator) -> None:
        self.config = config
        self.maestro = maestro
        self.nodeid: str | None = None
        self.sent_back: tuple[str, ...] = ()  # the phases a failed verdict reset
        self.after_failure = False  # skipped because a phase failed in this run

    def reported(self, report: pytest.TestReport, facts: PhaseFacts) -> None:
        run = self.maestro.run
        self.nodeid = report.nodeid
        run.final_status = facts.status
        if not run.decides:
            return
        if facts.skip is not None:
            self.after_failure = facts.skip.after_failure
        elif report.when == "call" and facts.review is not None:
            review = Review.from_mapping(facts.review)
            if review is not None:
                at = facts.finished or now()
                self.sent_back = self.maestro.life.final_finished(review, facts.started, at)
        reviewer = self.maestro.resolve.reviewers.name
        junit.record_phase(self.config, report, facts, reviewer, None, self.sent_back)

    def unrun(self) -> SkipReason | None:
        """Why the final review, selected and never reported, did not run (a ``STOPPED``
        reason: the run stopped first); None when it reported, or is not selected."""
        run = self.maestro.run
        if not run.decides or not run.final or run.final_status is not None:
            return None
        return self.maestro.why_no_final_review() or SkipReason.stopped("")

    def report_skip(self, nodeid: str, reason: SkipReason, why: str) -> None:
        """Report it skipped, as the phases a stop left are: ``why`` the run stopped."""
        if reason.kind is SkipKind.STOPPED:
            reason = SkipReason.stopped(why)
        report_skip(self.config, self.maestro.plan, nodeid, reason)

    def rerun(self, nodeid_of: Callable[[str], str | None]) -> list[str]:
        """What ``--lf`` must run again beside what failed: the phases a failed final review
        sent back, and the final review when a failure in this run skipped it."""
        ids = [nodeid_of(phase_id) for phase_id in self.sent_back]
        if self.after_failure:
            ids.append(self.nodeid)
        return [nodeid for nodeid in ids if nodeid is not None]
