"""Phases selected by node id, as tests are: ``pytest --maestro plan.yaml plan.yaml::p3``."""

from __future__ import annotations

import pytest

from ..helpers import phase, write_plan

PHASES = [
    phase("p1", "touch p1.ran"),
    phase("p2", "touch p2.ran", blocked_by=["p1"]),
    phase("p3", "touch p3.ran"),
]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_node_id_runs_exactly_that_phase(pytester: pytest.Pytester, workers: int) -> None:
    write_plan(pytester, PHASES)
    args = ["--maestro", "plan.yaml", "plan.yaml::p3"]
    result = (
        pytester.runpytest_subprocess(*args, "-n", str(workers))
        if workers
        else pytester.runpytest(*args)
    )
    result.assert_outcomes(passed=1)
    assert sorted(p.name for p in pytester.path.glob("*.ran")) == ["p3.ran"]


def test_node_ids_run_in_dependency_order_and_an_unselected_dependency_skips(
    pytester: pytest.Pytester,
) -> None:
    write_plan(pytester, PHASES)
    both = pytester.runpytest("--maestro", "plan.yaml", "plan.yaml::p2", "plan.yaml::p1", "-v")
    both.assert_outcomes(passed=2)
    both.stdout.fnmatch_lines(["plan.yaml::p1 PASSED*", "plan.yaml::p2 PASSED*"])
    alone = pytester.runpytest("--maestro", "plan.yaml", "plan.yaml::p2", "--maestro-fresh", "-rs")
    alone.assert_outcomes(skipped=1)
    alone.stdout.fnmatch_lines(["*dependency 'p1' was not selected and has not completed*"])


def test_collect_only_lists_the_named_phases(pytester: pytest.Pytester) -> None:
    write_plan(pytester, PHASES)
    result = pytester.runpytest(
        "--maestro", "plan.yaml", f"{pytester.path}/plan.yaml::p2", "--co", "-q"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["plan.yaml::p2", "1 test collected*"])
