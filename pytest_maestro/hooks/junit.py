"""Phases in the JUnit XML file: facts as properties, a short failure message, the phase's output.

xunit2 (pytest's default) allows no ``<properties>`` inside a testcase, so per-phase facts go in
the testsuite's properties as ``maestro.<phase id>.<fact>``; under ``junit_family=xunit1`` each
testcase also gets them as ``maestro.<fact>``. Only the controller writes the file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from .._compat import TerminalRepr, junit_suite
from ..phase.facts import PhaseFacts
from ..phase.outcome import PhaseOutcome
from ..plan import Plan
from ..review.verdict import Review
from ..state.model import Status, Tokens, unpriced_text
from ..views.failure import phase_output

PHASE_FACTS = (
    "status",
    "agent",
    "attempts",
    "wave",
    "worker",
    "started",
    "finished",
    "tokens_in",
    "tokens_out",
    "premium_requests",
    "cost",
    "cost_estimated",
    "unpriced",
    "unverified",
    "reviewed",
    "review",
    "sent_back",
)
# junit_logging values that put captured standard output in <system-out>.
LOGS_STDOUT = ("system-out", "out-err", "all")


def record_phase(
    config: pytest.Config,
    report: pytest.TestReport,
    facts: PhaseFacts,
    agent: str,
    wave: int | None,
    sent_back: tuple[str, ...] = (),
) -> None:
    """``wave`` is None for the final review, and ``sent_back`` the phases it failed."""
    shorten_failure(report, facts)
    suite = junit_suite(config)
    if suite is None:
        return
    values: dict[str, Any] = {"agent": agent, "wave": wave, **facts.to_wire()}
    values["sent_back"] = ", ".join(sent_back) or None
    if facts.tokens is not None:
        values.update(token_facts(facts.tokens))
    review = Review.from_mapping(facts.review) if facts.review is not None else None
    values.update(review_facts(review, facts.ok))
    known = [(fact, values[fact]) for fact in PHASE_FACTS if values.get(fact) is not None]
    known += criterion_facts(review)
    # A phase reported twice (a failed teardown after its call) keeps its latest facts.
    suite.replace_properties(f"maestro.{facts.phase}.", known)
    if suite.family == "xunit1":
        for fact, value in known:
            suite.add_testcase_property(report, f"maestro.{fact}", str(value))


def token_facts(tokens: Tokens) -> dict[str, Any]:
    """A phase's usage as properties: tokens, premium requests (copilot), the cost (unless no
    table priced it) and whether it is an estimate, the models no table prices."""
    facts: dict[str, Any] = {"tokens_in": tokens.input, "tokens_out": tokens.output}
    if tokens.premium_requests:
        facts["premium_requests"] = tokens.premium_requests
    if tokens.cost or not tokens.unpriced:
        facts["cost"] = tokens.cost
    if tokens.estimated:
        facts["cost_estimated"] = True
    if tokens.unpriced:
        facts["unpriced"] = unpriced_text(tokens.unpriced)
    return facts


def review_facts(review: Review | None, completed: bool) -> dict[str, Any]:
    """A review as properties: what it came to (``passed, 3/3 criteria met``), and ``reviewed``
    for a phase that completed with every prose criterion judged met."""
    if review is None:
        return {"review": None}
    return {"review": review.outcome, "reviewed": (completed and review.passed) or None}


def criterion_facts(review: Review | None) -> list[tuple[str, str]]:
    """Each criterion's verdict as a property of its own: ``criterion.2`` = ``not met: …``."""
    if review is None or review.verdict is None:
        return []
    return [(f"criterion.{c.number}", c.line.split(" ", 2)[2]) for c in review.verdict.criteria]


def record_session(config: pytest.Config, plan: Plan, outcomes: Mapping[str, str]) -> None:
    suite = junit_suite(config)
    if suite is None:
        return
    counts = Counter(outcomes.values())
    suite.add_property("maestro.plan", str(plan.path))
    suite.add_property("maestro.format", plan.format)
    suite.add_property("maestro.phases", len(plan.phases))
    for status in (Status.COMPLETED, Status.FAILED, Status.BLOCKED, Status.SKIPPED):
        suite.add_property(f"maestro.{status}", counts.get(status, 0))


@dataclass(frozen=True)
class Crash:
    """Where and why, in one line: what a JUnit ``<failure message>`` and pytest's short summary
    read from a report's ``longrepr.reprcrash``."""

    path: str
    lineno: int
    message: str


class PhaseFailure(TerminalRepr):
    """A failed phase's report: the full text for the terminal and the JUnit body, and a one-line
    message (which check failed, or the agent's status line) for ``<failure message>``."""

    def __init__(self, text: str, crash: Crash) -> None:
        self.text = text
        self.reprcrash = crash

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line)


def shorten_failure(report: pytest.TestReport, facts: PhaseFacts) -> None:
    """Give a failed phase's report its one-line message. Done on the controller: the text is
    all an xdist worker's report brings of the failure."""
    if report.failed and facts.failure and isinstance(report.longrepr, str):
        path, line, _ = report.location
        report.longrepr = PhaseFailure(report.longrepr, Crash(path, (line or 0) + 1, facts.failure))


def attach_output(config: pytest.Config, item: pytest.Item, outcome: PhaseOutcome) -> None:
    """The phase's output as the call's captured standard output, where ``junit_logging`` puts
    that in ``<system-out>``: pytest writes it there, and shows it with a failure."""
    if config.getoption("xmlpath", None) and config.getini("junit_logging") in LOGS_STDOUT:
        item.add_report_section("call", "stdout", phase_output(outcome))
