"""Skips (and refusals) the controller reports itself, for phases it never sends to a worker.

A phase the controller knows must not run (a dependency failed, an earlier run completed it, the
circuit breaker doomed it), or a final review that must not, gets the setup and teardown reports
a worker would have sent, as xdist does for a crashed item, so that the terminal, JUnit, ``--lf``
and the session state see it like any other skipped phase. A phase no worker of a mixed pool
can run is failed so, with the one line that says why.
"""

from __future__ import annotations

import time

import pytest

from ..phase.facts import PhaseFacts, SkipReason, iso_time
from ..plan import Plan
from ..review.final import FINAL_NAME
from ..state import Status
from .nodeids import phase_id


def report_skip(config: pytest.Config, plan: Plan, nodeid: str, reason: SkipReason) -> None:
    name = phase_id(nodeid)
    line, location = _where(plan, name)
    longrepr = (str(plan.path), line, f"Skipped: {reason.text}")
    setup = pytest.TestReport(nodeid, location, {}, "skipped", longrepr, "setup")
    PhaseFacts.skipped(name, reason).attach(setup)
    _report(config, nodeid, location, setup)


def report_refused(config: pytest.Config, plan: Plan, nodeid: str, text: str) -> None:
    """A phase no worker can run, failed on the controller with the reports a worker would
    have sent, its failure the one line that says why."""
    name = phase_id(nodeid)
    _, location = _where(plan, name)
    facts = PhaseFacts(
        name, Status.FAILED, result=text, failure=text, finished=iso_time(time.time())
    )
    setup = pytest.TestReport(nodeid, location, {}, "passed", None, "setup")
    call = pytest.TestReport(nodeid, location, {}, "failed", text, "call")
    facts.attach(call)
    _report(config, nodeid, location, setup, call)


def _where(plan: Plan, name: str) -> tuple[int, tuple[str, int, str]]:
    """The phase's line in the plan (0: none), and its report's location."""
    if name == FINAL_NAME:  # the final review: no phase, no line but the plan's first
        line, title = 1, "final review"
    else:
        phase = plan.phase(name)
        line, title = phase.line or 0, f"phase {phase.id}: {phase.name}"
    return line, (str(plan.path), max(line - 1, 0), title)


def _report(
    config: pytest.Config, nodeid: str, location: tuple[str, int, str], *reports: pytest.TestReport
) -> None:
    """The item's start, ``reports``, a passed teardown and its finish, as a worker sends them."""
    hook = config.hook
    hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
    for report in reports:
        hook.pytest_runtest_logreport(report=report)
    teardown = pytest.TestReport(nodeid, location, {}, "passed", None, "teardown")
    hook.pytest_runtest_logreport(report=teardown)
    hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
