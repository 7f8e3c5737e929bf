"""RunState and PhaseFacts without pytest: a phase's fate decided from typed values alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_maestro.phase.facts import PhaseFacts, SkipKind, SkipReason
from pytest_maestro.plan.graph import PlanGraph
from pytest_maestro.plan.model import Phase, Plan
from pytest_maestro.run.run_state import RunState
from pytest_maestro.runtimes.base import AgentResult
from pytest_maestro.state.model import Status


def state(*phases: Phase, threshold: float = 0.5, decides: bool = True) -> RunState:
    plan = Plan(Path("plan.yaml"), "native", phases)
    return RunState(PlanGraph(plan), decides=decides, breaker_threshold=threshold)


def chain() -> RunState:
    """a -> b -> c, and d alone."""
    return state(
        Phase("a", "A"),
        Phase("b", "B", blocked_by=("a",)),
        Phase("c", "C", blocked_by=("b",)),
        Phase("d", "D"),
    )


@pytest.mark.parametrize(
    "facts",
    [
        PhaseFacts("p", "completed", worker="gw0", attempts=2, started="t0", finished="t1"),
        PhaseFacts("p", "failed", result="worker 'gw1' crashed"),
        PhaseFacts.skipped("p", SkipReason.dependency("a", "blocked")),
        PhaseFacts.skipped("p", SkipReason.earlier("2026-01-01T00:00:00Z")),
        PhaseFacts("p", "completed", duration=1.25, attempts=0),
    ],
)
def test_facts_survive_the_wire(facts: PhaseFacts) -> None:
    wire = facts.to_wire()
    assert all(isinstance(v, (str, int, float, list)) for v in wire.values())
    assert PhaseFacts.from_wire(wire) == facts
    assert type(PhaseFacts.from_wire(wire).status) is Status


def test_facts_ride_on_a_report_and_a_report_without_them_has_none() -> None:
    report = pytest.TestReport("plan.yaml::p", ("plan.yaml", 0, "p"), {}, "passed", None, "call")
    assert PhaseFacts.of(report) is None
    PhaseFacts("p", "completed", worker="gw3").attach(report)
    assert PhaseFacts.of(report) == PhaseFacts("p", "completed", worker="gw3")


@pytest.mark.parametrize(
    ("reason", "status", "after_failure"),
    [
        (SkipReason.earlier("t"), "completed", False),
        (SkipReason.dependency("a", "failed"), "skipped", True),
        (SkipReason.dependency("a", "skipped"), "skipped", True),
        (SkipReason.not_selected("a"), "skipped", False),
        (SkipReason.not_run_yet("a"), "skipped", True),
    ],
)
def test_a_skip_kind_decides_status_and_rerun(
    reason: SkipReason, status: str, after_failure: bool
) -> None:
    assert (reason.status, reason.after_failure) == (status, after_failure)


def test_a_dependency_that_failed_names_itself_and_its_status() -> None:
    run = chain()
    run.record(PhaseFacts("a", "blocked"))
    reason = run.why_not_run("b")
    assert reason == SkipReason(SkipKind.DEPENDENCY, "dependency 'a' was blocked", "a")


def test_phases_completed_earlier_are_skipped_and_satisfy_deselected_dependents() -> None:
    run = chain()
    run.resume({"a": "2026-01-01T00:00:00Z"})
    run.select(["b", "c"])
    earlier = run.why_not_run("a")
    assert earlier is not None and earlier.kind is SkipKind.EARLIER
    assert "2026-01-01T00:00:00Z" in earlier.text
    assert run.why_not_run("b") is None  # 'a' is not selected but completed earlier


def test_a_deselected_dependency_that_never_completed_stops_its_dependent() -> None:
    run = chain()
    run.select(["b"])
    assert run.why_not_run("b") == SkipReason.not_selected("a")


def test_in_order_a_dependency_not_run_yet_is_a_reason_but_not_when_scheduled() -> None:
    run = chain()
    assert run.why_not_run("b") == SkipReason.not_run_yet("a")
    assert run.why_not_run("b", scheduled=True) is None


def test_a_worker_decides_nothing() -> None:
    run = state(Phase("a", "A"), Phase("b", "B", blocked_by=("a",)), decides=False)
    run.record(PhaseFacts("a", "failed"))
    assert run.why_not_run("b") is None


def test_recording_counts_resumed_phases_durations_and_skips_after_failure() -> None:
    run = chain()
    run.record(PhaseFacts.skipped("a", SkipReason.earlier("t")))
    run.record(PhaseFacts("d", "completed", duration=2.5))
    run.record(PhaseFacts("b", "failed", duration=9.0))
    run.record(PhaseFacts.skipped("c", SkipReason.dependency("b", "failed")))
    assert run.resumed == 1
    assert run.durations == {"d": 2.5}  # a failed run measures nothing
    assert run.skipped_after_failure == {"c"}
    assert run.outcomes == {"a": "completed", "d": "completed", "b": "failed", "c": "skipped"}


def test_the_breaker_trips_once_and_names_the_doomed_in_order() -> None:
    run = state(
        Phase("root", "R"),
        *(Phase(f"x{n}", "X", blocked_by=("root",)) for n in range(3)),
        Phase("free", "F"),
    )
    assert run.breaker_verdict() is None
    run.record(PhaseFacts("root", "failed"))
    verdict = run.breaker_verdict()
    assert verdict is not None and "3 of 4 pending" in verdict and "'root'" in verdict
    run.record(PhaseFacts("free", "failed"))
    assert run.breaker_verdict() == verdict  # remembered, not judged again
    assert run.doomed() == ["x0", "x1", "x2"]
    run.record(PhaseFacts.skipped("x1", SkipReason.dependency("root", "failed")))
    assert run.doomed() == ["x0", "x2"]  # what was reported is not doomed twice


def test_durations_prefer_the_plan_estimate_then_the_measure_then_one_second() -> None:
    plan_phases = (Phase("a", "A", estimate=30.0), Phase("b", "B"), Phase("c", "C"))
    run = state(*plan_phases)
    run.record(PhaseFacts("a", "completed", duration=5.0))
    run.record(PhaseFacts("b", "completed", duration=7.0))
    assert [run.duration(p) for p in "abc"] == [30.0, 7.0, 1.0]


def test_keep_order_moves_only_what_a_dependency_forces() -> None:
    run = chain()
    assert run.keep_order(["d", "c", "a", "b"]) == ["d", "a", "b", "c"]
    assert run.topological(["c", "d", "a"]) == ["a", "c", "d"]


def test_a_status_travels_as_a_status_whatever_a_runtime_of_another_plugin_says() -> None:
    said = AgentResult("completed", "COMPLETED: done")
    assert said.status is Status.COMPLETED and said.ok
    assert PhaseFacts("p", "blocked").status is Status.BLOCKED
    with pytest.raises(ValueError, match="completed, failed or blocked, not 'done'"):
        AgentResult("done", "it is done")
    with pytest.raises(ValueError, match="not 'pending'"):
        AgentResult(Status.PENDING, "a result is never pending")
