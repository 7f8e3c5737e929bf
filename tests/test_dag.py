"""One graph: the plan's graph is built once, by validation, and passed around."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_maestro.plan import load_graph, load_plan

from .helpers import phase, write_plan

# -- one graph, passed around ----------------------------------------------------------------------


def test_validation_hands_back_the_graph_it_built(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(
        "phases:\n"
        "  - {id: a, name: A, files: {modify: [x.py]}}\n"
        "  - {id: b, name: B, files: {modify: [x.py]}}\n"
        "  - {id: c, name: C, blocked_by: [a, b]}\n"
    )
    graph = load_graph(path)
    assert graph.plan == load_plan(path)
    assert graph.plan.warnings == tuple(graph.warnings())  # the graph's warnings, attached
    assert graph.waves() == [["a", "b"], ["c"]]


def test_aliases_keep_the_graph_or_its_dependency_structure(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(
        "phases:\n"
        "  - {id: a, name: A, files: {modify: [x.py]}}\n"
        "  - {id: b, name: B, files: {modify: [link.py]}}\n"
    )
    graph = load_graph(path)
    assert graph.with_aliases({}) is graph  # a root without symlinks: the validated graph
    aliased = graph.with_aliases({"link.py": "x.py"})
    assert aliased.dag is graph.dag and aliased.plan is graph.plan
    assert graph.conflicting("a") == frozenset()
    assert aliased.conflicting("a") == {"b"}  # the files' answers are computed again


COUNTING_CONFTEST = """
from pathlib import Path

from pytest_maestro.plan import graph

BUILT = []
_init = graph.PlanGraph.__init__


def _counting(self, plan, *args, **kwargs):
    if kwargs.get("dag") is None:  # a graph built, not one sharing another's structure
        BUILT.append(plan.ids)
    _init(self, plan, *args, **kwargs)


graph.PlanGraph.__init__ = _counting


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        Path("builds.txt").write_text(str(len(BUILT)))
"""


@pytest.mark.parametrize(
    "runner", [["-p", "no:xdist"], pytest.param(["-n", "2"], marks=pytest.mark.slow)]
)
def test_a_run_builds_the_plans_graph_once_more_than_validation(
    pytester: pytest.Pytester, runner: list[str]
) -> None:
    """Only validation builds the run's graph; the session state's fingerprints of the phases
    (``state/resume.py``) build one of their own. Nothing builds one per phase: not the run order,
    the circuit breaker, the doomed phases, nor the scheduler as phases finish."""
    write_plan(
        pytester,
        [
            phase("a", "false"),
            phase("b", "true", blocked_by=["a"]),
            phase("c", "true", blocked_by=["b"]),
            phase("d", "true"),
            phase("e", "true", blocked_by=["d"]),
        ],
    )
    pytester.makeconftest(COUNTING_CONFTEST)
    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "-p", "no:cacheprovider", *runner
    )
    assert result.parseoutcomes()["failed"] == 1  # then the breaker stops what it dooms
    assert (pytester.path / "builds.txt").read_text() == "2"
