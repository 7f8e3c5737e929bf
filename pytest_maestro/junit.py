"""Phase facts in the JUnit XML file (DESIGN §7), written only by the controller.

xunit2 (pytest's default) allows no ``<properties>`` inside a testcase, so per-phase facts go in
the testsuite's properties as ``maestro.<phase id>.<fact>``; under ``junit_family=xunit1`` each
testcase also gets them as ``maestro.<fact>``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
from _pytest.junitxml import LogXML, xml_key

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
)


def _xml(config: pytest.Config) -> LogXML | None:
    return config.stash.get(xml_key, None)


def record_phase(
    config: pytest.Config, report: pytest.TestReport, facts: Mapping[str, Any]
) -> None:
    xml = _xml(config)
    if xml is None:
        return
    phase = facts["phase"]
    # A phase reported twice (a failed teardown after its call) keeps its latest facts.
    prefix = f"maestro.{phase}."
    xml.global_properties = [(k, v) for k, v in xml.global_properties if not k.startswith(prefix)]
    known = [(fact, facts[fact]) for fact in PHASE_FACTS if facts.get(fact) is not None]
    for fact, value in known:
        xml.add_global_property(prefix + fact, value)
    if xml.family == "xunit1":
        reporter = xml.node_reporter(report)
        for fact, value in known:
            reporter.add_property(f"maestro.{fact}", str(value))


def record_session(config: pytest.Config, plan: Plan, outcomes: Mapping[str, str]) -> None:
    xml = _xml(config)
    if xml is None:
        return
    counts = Counter(outcomes.values())
    xml.add_global_property("maestro.plan", str(plan.path))
    xml.add_global_property("maestro.format", plan.format)
    xml.add_global_property("maestro.phases", len(plan.phases))
    for status in ("completed", "failed", "blocked", "skipped"):
        xml.add_global_property(f"maestro.{status}", counts.get(status, 0))
