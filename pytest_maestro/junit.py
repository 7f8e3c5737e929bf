"""Phase facts in the JUnit XML file, written only by the controller.

xunit2 (pytest's default) allows no ``<properties>`` inside a testcase, so per-phase facts go in
the testsuite's properties as ``maestro.<phase id>.<fact>``; under ``junit_family=xunit1`` each
testcase also gets them as ``maestro.<fact>``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from ._compat import junit_suite
from .facts import PhaseFacts
from .plan import Plan

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
    "cost",
    "unverified",
)


def record_phase(
    config: pytest.Config, report: pytest.TestReport, facts: PhaseFacts, agent: str, wave: int
) -> None:
    suite = junit_suite(config)
    if suite is None:
        return
    values: dict[str, Any] = {"agent": agent, "wave": wave, **facts.to_wire()}
    known = [(fact, values[fact]) for fact in PHASE_FACTS if values.get(fact) is not None]
    # A phase reported twice (a failed teardown after its call) keeps its latest facts.
    suite.replace_properties(f"maestro.{facts.phase}.", known)
    if suite.family == "xunit1":
        for fact, value in known:
            suite.add_testcase_property(report, f"maestro.{fact}", str(value))


def record_session(config: pytest.Config, plan: Plan, outcomes: Mapping[str, str]) -> None:
    suite = junit_suite(config)
    if suite is None:
        return
    counts = Counter(outcomes.values())
    suite.add_property("maestro.plan", str(plan.path))
    suite.add_property("maestro.format", plan.format)
    suite.add_property("maestro.phases", len(plan.phases))
    for status in ("completed", "failed", "blocked", "skipped"):
        suite.add_property(f"maestro.{status}", counts.get(status, 0))
