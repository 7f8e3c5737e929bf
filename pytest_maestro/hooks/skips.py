"""Skips the controller reports itself, for phases it never sends to a worker.

A phase the controller knows must not run (a dependency failed, an earlier run completed it, the
circuit breaker doomed it), or a final review that must not, gets the setup and teardown reports
a worker would have sent, as xdist does for a crashed item, so that the terminal, JUnit, ``--lf``
and the session state see it like any other skipped phase.
"""

from __future__ import annotations

import pytest

from ..phase.facts import PhaseFacts, SkipReason
from ..plan import Plan
from ..review.final import FINAL_NAME
from .nodeids import phase_id


def report_skip(config: pytest.Config, plan: Plan, nodeid: str, reason: SkipReason) -> None:
    name = phase_id(nodeid)
    if name == FINAL_NAME:  # the final review: no phase, no line but the plan's first
        line, title = 1, "final review"
    else:
        phase = plan.phase(name)
        line, title = phase.line or 0, f"phase {phase.id}: {phase.name}"
    location = (str(plan.path), max(line - 1, 0), title)
    longrepr = (str(plan.path), line, f"Skipped: {reason.text}")
    facts = PhaseFacts.skipped(name, reason)
    hook = config.hook
    hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
    setup = pytest.TestReport(nodeid, location, {}, "skipped", longrepr, "setup")
    facts.attach(setup)
    hook.pytest_runtest_logreport(report=setup)
    teardown = pytest.TestReport(nodeid, location, {}, "passed", None, "teardown")
    hook.pytest_runtest_logreport(report=teardown)
    hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
