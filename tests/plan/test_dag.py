"""One DAG kernel and one graph: the plan's graph is built once, by validation, and passed
around; what ``WavePolicy`` runs is what ``--maestro-analyze`` prints.

The policies and ``PlanGraph`` both answer order, waves and conflict groups from ``plan.dag``;
the drift tests hold the scheduler's view (jobs built as the xdist scheduler builds them) to the
analysis, on the example plans and on random DAGs, so the two cannot drift apart.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_maestro.plan import load_graph, load_plan
from pytest_maestro.plan.dag import Dag, DependencyCycle
from pytest_maestro.plan.graph import PlanGraph
from pytest_maestro.plan.model import Files, Phase, Plan
from pytest_maestro.scheduling.jobs import JobGraph, plan_jobs
from pytest_maestro.scheduling.policy import WavePolicy
from pytest_maestro.scheduling.simulation import simulate

from ..helpers import REPO, phase, write_plan

EXAMPLES = sorted((REPO / "example_plans").iterdir())
FILES = ["f0", "f1", "f2", "f3", "src", "src/a.py"]

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
def test_a_run_builds_the_plans_graph_once(pytester: pytest.Pytester, runner: list[str]) -> None:
    """Only validation builds the run's graph; the session state's fingerprints of the phases
    (``state/resume.py``) use it too. Nothing builds one per phase: not the run order, the
    circuit breaker, the doomed phases, nor the scheduler as phases finish."""
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
    assert (pytester.path / "builds.txt").read_text() == "1"


# -- WavePolicy runs what the analysis prints ------------------------------------------------------


def scheduled(graph: PlanGraph) -> WavePolicy:
    """The ``WavePolicy`` the xdist scheduler starts for a run of every phase."""
    jobs = plan_jobs(graph, graph.written_order(graph.ids), graph.duration)
    return WavePolicy(jobs, max_running=4)


def check_waves_match_the_analysis(graph: PlanGraph) -> None:
    layout = scheduled(graph).layout
    # the same phases in the same waves; inside a wave, the order the jobs were given
    assert [set(wave) for wave in layout.waves] == [set(wave) for wave in graph.waves()]
    for wave, solo in zip(graph.waves(), layout.solo, strict=True):
        assert set(solo) == {pid for pid in wave if not graph.plan.phase(pid).parallel}
    analysed = [{frozenset(chunk.phases) for chunk in wave} for wave in graph.chunks()]
    ran = [{frozenset(chunk) for chunk in wave} for wave in layout.chunks]
    if all(phase.parallel for phase in graph.plan.phases):
        assert ran == analysed
    # a phase with parallel: false runs alone, so it joins no chunk and may split the one the
    # analysis shows it in: every chunk the policy runs lies inside one the analysis prints
    for chunks, analysed_chunks in zip(ran, analysed, strict=True):
        for chunk in chunks:
            assert any(chunk <= other for other in analysed_chunks), chunk


def check_barriers_fall_between_the_analysed_waves(graph: PlanGraph) -> None:
    jobs = plan_jobs(graph, graph.written_order(graph.ids), graph.duration)
    slots = simulate(WavePolicy, jobs, workers=3).slots
    waves = graph.waves()
    for before, after in itertools.pairwise(waves):
        assert max(slots[pid].finish for pid in before) <= min(slots[pid].start for pid in after)


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_wave_policy_runs_the_waves_and_chunks_the_analysis_prints(path: Path) -> None:
    graph = load_graph(path)
    check_waves_match_the_analysis(graph)
    check_barriers_fall_between_the_analysed_waves(graph)


@st.composite
def random_plans(draw: st.DrawFn) -> Plan:
    """A random DAG (each phase may depend on any earlier one) written in a shuffled order, so
    dependencies point forwards too; files shared often, a folder holding a file among them."""
    count = draw(st.integers(1, 12))
    phases = []
    for i in range(count):
        deps = draw(st.sets(st.integers(0, max(i - 1, 0)), max_size=3)) if i else set()
        phases.append(
            Phase(
                id=f"p{i}",
                name=f"P{i}",
                blocked_by=tuple(f"p{d}" for d in sorted(deps)),
                files=Files(modify=tuple(draw(st.sets(st.sampled_from(FILES), max_size=2)))),
                reads=tuple(draw(st.sets(st.sampled_from(FILES), max_size=2))),
                estimate=draw(st.sampled_from([None, 0.5, 1.0, 3.0])),
                parallel=draw(st.integers(0, 4)) > 0,
            )
        )
    shuffled = tuple(draw(st.permutations(phases)))
    return Plan(path=Path("plan.yaml"), format="native", phases=shuffled)


@settings(max_examples=150, deadline=None)
@given(random_plans())
def test_wave_policy_runs_the_analysed_waves_of_random_dags(plan: Plan) -> None:
    graph = PlanGraph(plan)
    check_waves_match_the_analysis(graph)
    check_barriers_fall_between_the_analysed_waves(graph)


@settings(max_examples=100, deadline=None)
@given(random_plans())
def test_the_policies_longest_chain_is_the_analysed_critical_path(plan: Plan) -> None:
    graph = PlanGraph(plan)
    jobs = plan_jobs(graph, graph.written_order(graph.ids), graph.duration)
    chain = max(JobGraph(jobs).remaining_paths())
    assert chain == pytest.approx(graph.path_duration(graph.critical_path()))


# -- the kernel ------------------------------------------------------------------------------------


def test_the_kernel_orders_a_subset_and_names_what_a_cycle_leaves_unordered() -> None:
    dag = Dag.build(["a", "b", "c", "d"], [(), (0,), (3,), (1,)])
    assert dag.order == [0, 1, 3, 2]
    assert dag.waves == [[0], [1], [3], [2]]
    assert dag.sort({2: 0, 0: 1}) == [2, 0]  # no dependency among them: the key decides
    assert dag.descendants([1]) == {3, 2}
    cyclic = Dag.build(["a", "b", "c"], [(1,), (0,), ()])
    with pytest.raises(DependencyCycle, match=r"cycle among: a, b$"):
        _ = cyclic.order
    assert cyclic.cycle() == [0, 1, 0]
