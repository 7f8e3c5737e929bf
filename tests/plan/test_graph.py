"""PlanGraph: hand-built plans with known answers, and properties on random DAGs."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_maestro.plan.graph import _PAIRWISE_DEPS, PlanGraph, Profile, wave_overlap
from pytest_maestro.plan.model import Files, Phase, Plan
from pytest_maestro.plan.ownership import chunk_label


def make_phase(
    pid: str,
    deps: Sequence[str] = (),
    *,
    writes: Sequence[str] = (),
    reads: Sequence[str] = (),
    estimate: float | None = None,
    parallel: bool = True,
    line: int | None = None,
) -> Phase:
    return Phase(
        id=pid,
        name=pid.upper(),
        line=line,
        blocked_by=tuple(deps),
        files=Files(modify=tuple(writes)),
        reads=tuple(reads),
        estimate=estimate,
        parallel=parallel,
    )


def make_plan(*phases: Phase) -> Plan:
    return Plan(path=Path("plan.yaml"), format="native", phases=phases)


def diamond() -> PlanGraph:
    return PlanGraph(
        make_plan(
            make_phase("a", writes=["a.py"]),
            make_phase("b", ["a"], writes=["b.py"]),
            make_phase("c", ["a"], writes=["c.py"]),
            make_phase("d", ["b", "c"], writes=["d.py"]),
        )
    )


# -- order and waves -------------------------------------------------------------------------------


def test_diamond_waves_and_order() -> None:
    graph = diamond()
    assert graph.waves() == [["a"], ["b", "c"], ["d"]]
    assert [graph.wave(pid) for pid in "abcd"] == [1, 2, 2, 3]
    assert graph.topological_order() == ["a", "b", "c", "d"]


def test_topological_order_keeps_written_order_among_ready_phases() -> None:
    graph = PlanGraph(make_plan(make_phase("z", ["y"]), make_phase("x"), make_phase("y")))
    assert graph.topological_order() == ["x", "y", "z"]


def test_critical_order_starts_the_longest_branch_first() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("short", estimate=1),
            make_phase("long", estimate=1),
            make_phase("tail", ["long"], estimate=5),
        )
    )
    assert graph.topological_order() == ["short", "long", "tail"]
    assert graph.critical_order() == ["long", "tail", "short"]


def test_chain_has_one_phase_per_wave_and_nothing_concurrent() -> None:
    graph = PlanGraph(make_plan(make_phase("1"), make_phase("2", ["1"]), make_phase("3", ["2"])))
    assert graph.waves() == [["1"], ["2"], ["3"]]
    assert not graph.may_run_concurrently("1", "3")
    assert graph.depends_on("3", "1")
    assert not graph.depends_on("1", "3")
    assert graph.profile() == Profile(
        total_phases=3, parallel_eligible=0, batches=0, sequential_only=3, max_width=1
    )
    assert graph.recommended_workers() == 1


def test_independent_branches_may_run_concurrently_across_waves() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("a1"),
            make_phase("a2", ["a1"]),
            make_phase("b1"),
        )
    )
    assert graph.may_run_concurrently("a2", "b1")  # waves 2 and 1, still independent
    assert graph.may_run_concurrently("b1", "a1")
    assert not graph.may_run_concurrently("a1", "a2")
    assert not graph.may_run_concurrently("a1", "a1")


def test_duplicate_dependency_counts_once() -> None:
    graph = PlanGraph(make_plan(make_phase("a"), make_phase("b", ["a", "a"])))
    assert graph.succs[0] == (1,)
    assert graph.warnings() == []


def test_unknown_dependency_and_cycle_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown phase 'nope'"):
        PlanGraph(make_plan(make_phase("a", ["nope"])))
    cyclic = PlanGraph(make_plan(make_phase("a", ["b"]), make_phase("b", ["a"])))
    with pytest.raises(ValueError, match="cycle"):
        cyclic.topological_order()


def test_dependency_cycle_names_the_whole_cycle_dependencies_first() -> None:
    assert diamond().dependency_cycle() is None
    graph = PlanGraph(
        make_plan(
            make_phase("free"),
            make_phase("a", ["c"]),
            make_phase("b", ["a", "free"]),
            make_phase("c", ["b"]),
        )
    )
    assert graph.dependency_cycle() == ["a", "b", "c", "a"]
    reordered = PlanGraph(make_plan(*(graph.plan.phase(pid) for pid in ("c", "free", "b", "a"))))
    assert reordered.dependency_cycle() == ["c", "a", "b", "c"]


def test_dependency_cycle_of_a_long_chain_does_not_recurse() -> None:
    size = 20_000  # deeper than any recursion limit
    chain = [make_phase(str(i), [str(i + 1)]) for i in range(size - 1)]
    graph = PlanGraph(make_plan(*chain, make_phase(str(size - 1), ["0"])))
    cycle = graph.dependency_cycle()
    assert cycle is not None and len(cycle) == size + 1 and cycle[0] == cycle[-1]


def test_stable_order_keeps_the_given_order_where_dependencies_allow() -> None:
    graph = diamond()
    assert graph.stable_order(["c", "b"]) == ["c", "b"]  # independent: as given
    assert graph.stable_order(["d", "c", "a", "b"]) == ["a", "c", "b", "d"]
    # only dependencies among the given phases order them: d reaches a through b and c
    assert graph.stable_order(["d", "a"]) == ["d", "a"]
    assert graph.stable_order(["b", "d"]) == ["b", "d"]
    assert graph.stable_order(["d", "b"]) == ["b", "d"]
    assert graph.stable_order([]) == []


def test_descendants_follow_dependents_transitively() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("a"),
            make_phase("b", ["a"]),
            make_phase("c", ["b"]),
            make_phase("x"),
            make_phase("y", ["x", "c"]),
        )
    )
    assert graph.descendants(["a"]) == {"b", "c", "y"}
    assert graph.descendants(["b", "c"]) == {"c", "y"}
    assert graph.descendants(["y"]) == set()
    assert graph.descendants(["x"]) == {"y"}


# -- files: conflicts and chunks -----------------------------------------------------------------


def test_write_write_conflict_between_concurrent_phases_only() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("a", writes=["src/a.py"]),
            make_phase("b", writes=["src/a.py"]),
            make_phase("c", ["a", "b"], writes=["src/a.py"]),
        )
    )
    found = {(c.writer, c.other, c.path, c.kind) for c in graph.conflicts()}
    assert found == {("a", "b", "src/a.py", "write")}  # c depends on both: no conflict
    assert graph.conflicting("a") == {"b"}
    assert graph.conflicting("c") == frozenset()


def test_read_write_conflict_but_no_read_read_conflict() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("writer", writes=["spec.md"]),
            make_phase("reader", reads=["spec.md"]),
            make_phase("reader2", reads=["spec.md"]),
        )
    )
    found = {(c.writer, c.other, c.kind) for c in graph.conflicts()}
    assert found == {("writer", "reader", "read"), ("writer", "reader2", "read")}
    assert graph.conflicting("reader") == {"writer"}
    [wave] = graph.chunks()
    assert [chunk.phases for chunk in wave] == [("writer", "reader", "reader2")]


def test_readers_of_one_file_stay_in_separate_chunks() -> None:
    graph = PlanGraph(
        make_plan(make_phase("a", reads=["doc.md"]), make_phase("b", reads=["doc.md"]))
    )
    [wave] = graph.chunks()
    assert [chunk.phases for chunk in wave] == [("a",), ("b",)]
    assert [chunk.reads for chunk in wave] == [("doc.md",), ("doc.md",)]
    assert wave_overlap(wave) == frozenset()
    assert graph.conflicts() == []


def test_chunks_merge_transitively_and_carry_their_files() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("1", writes=["x"]),
            make_phase("2", writes=["y"]),
            make_phase("3", writes=["x", "z"]),
            make_phase("4", writes=["z", "y"]),
            make_phase("5", writes=["w"]),
            make_phase("6", ["1", "5"], writes=["x"]),
        )
    )
    wave1, wave2 = graph.chunks()
    assert [(c.label, c.phases, c.files) for c in wave1] == [
        ("A", ("1", "2", "3", "4"), ("x", "y", "z")),
        ("B", ("5",), ("w",)),
    ]
    assert [(c.label, c.phases, c.depends_on) for c in wave2] == [("C", ("6",), ("A", "B"))]


def test_wave_overlap_reports_a_shared_file() -> None:
    graph = PlanGraph(make_plan(make_phase("a", writes=["x"]), make_phase("b", writes=["y"])))
    [wave] = graph.chunks()
    assert wave_overlap(wave) == frozenset()
    broken = [wave[0], type(wave[1])(1, "B", ("b",), ("y",), ("x",), ())]
    assert wave_overlap(broken) == {"x"}


def test_chunk_labels_continue_past_z() -> None:
    assert [chunk_label(n) for n in (0, 25, 26, 27, 701, 702)] == [
        "A",
        "Z",
        "AA",
        "AB",
        "ZZ",
        "AAA",
    ]


# -- profile -------------------------------------------------------------------------------------


def test_profile_of_diamond() -> None:
    assert diamond().profile() == Profile(
        total_phases=4, parallel_eligible=2, batches=1, sequential_only=2, max_width=2
    )
    assert diamond().recommended_workers() == 2


def test_parallel_false_phases_are_sequential_only() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("a"),
            make_phase("b", parallel=False),
            make_phase("c"),
            make_phase("d", parallel=False),
            make_phase("e"),
        )
    )
    assert graph.profile() == Profile(
        total_phases=5, parallel_eligible=3, batches=1, sequential_only=2, max_width=3
    )


def test_a_lone_parallel_phase_is_not_eligible() -> None:
    graph = PlanGraph(make_plan(make_phase("a"), make_phase("b", parallel=False)))
    assert graph.profile().parallel_eligible == 0
    assert graph.profile().max_width == 1


def test_phases_sharing_a_file_count_as_one_lane() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("a", writes=["x"]),
            make_phase("b", writes=["x"]),
            make_phase("c", writes=["x"]),
        )
    )
    assert graph.profile() == Profile(
        total_phases=3, parallel_eligible=0, batches=0, sequential_only=3, max_width=1
    )


def test_recommended_workers_is_capped() -> None:
    graph = PlanGraph(make_plan(*(make_phase(f"p{i}") for i in range(20))))
    assert graph.profile().max_width == 20
    assert graph.recommended_workers() == 8
    assert graph.recommended_workers(cap=3) == 3


# -- critical path -------------------------------------------------------------------------------


def test_critical_path_follows_estimates() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("a", estimate=1),
            make_phase("b", ["a"], estimate=10),
            make_phase("c", ["a"], estimate=2),
            make_phase("d", ["b", "c"], estimate=1),
            make_phase("e", estimate=11),
        )
    )
    assert graph.critical_path() == ["a", "b", "d"]
    assert graph.path_duration(graph.critical_path()) == 12
    assert graph.remaining_path("a") == 12
    assert graph.remaining_path("c") == 3
    assert graph.remaining_path("e") == 11


def test_durations_override_estimates() -> None:
    plan = make_plan(
        make_phase("a", estimate=1),
        make_phase("b", ["a"], estimate=10),
        make_phase("c", ["a"], estimate=2),
    )
    measured = {"b": 0.5}
    assert PlanGraph(plan).critical_path(measured) == ["a", "c"]
    assert PlanGraph(plan, durations=measured).critical_path() == ["a", "c"]
    assert PlanGraph(plan, durations=measured).remaining_path("a") == 3
    assert PlanGraph(plan).remaining_paths(measured) == {"a": 3, "b": 0.5, "c": 2}


def test_missing_or_invalid_estimates_default_to_one() -> None:
    plan = make_plan(
        make_phase("a"),
        make_phase("b", ["a"], estimate=-3),
        make_phase("c", ["b"], estimate=math.nan),
    )
    graph = PlanGraph(plan)
    assert [graph.duration(p) for p in "abc"] == [1.0, 1.0, 1.0]
    assert graph.critical_path() == ["a", "b", "c"]


# -- warnings ------------------------------------------------------------------------------------


def test_redundant_dependency_warning_names_the_path() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("a", line=3),
            make_phase("b", ["a"], line=7),
            make_phase("c", ["a", "b"], line=12),
        )
    )
    assert graph.redundant_dependencies() == [("c", "a", "b")]
    assert graph.warnings() == [
        "plan.yaml:12: phase 'c' dependency on 'a' is redundant (implied through 'b')"
    ]


def test_overlap_warning_for_concurrent_writers() -> None:
    graph = PlanGraph(
        make_plan(
            make_phase("x", writes=["src/a.py", "src/b.py"], line=2),
            make_phase("y", writes=["src/a.py", "src/b.py"], line=9),
            make_phase("z", ["x", "y"], writes=["src/a.py"], line=20),
        )
    )
    assert graph.warnings() == [
        "plan.yaml:9: phases 'x' and 'y' may run at the same time and both write "
        "'src/a.py', 'src/b.py'; they will not be run concurrently"
    ]


def test_overlap_warning_for_reader_and_writer() -> None:
    graph = PlanGraph(make_plan(make_phase("r", reads=["cfg"]), make_phase("w", writes=["cfg"])))
    assert graph.warnings() == [
        "plan.yaml: phases 'r' and 'w' may run at the same time and 'w' writes 'cfg' which "
        "'r' reads; they will not be run concurrently"
    ]


def test_many_overlaps_end_in_one_summary_line() -> None:
    graph = PlanGraph(make_plan(*(make_phase(f"p{i}", writes=["shared.py"]) for i in range(30))))
    warnings = graph.warnings()
    pairs = 30 * 29 // 2
    assert len(warnings) == 21
    assert warnings[-1].startswith(f"plan.yaml: and {pairs - 20} more file overlaps")
    assert len(graph.conflicts()) == pairs


# -- properties on random DAGs -------------------------------------------------------------------

FILES = ["f0", "f1", "f2", "f3", "f4", "f5"]


@st.composite
def random_plans(draw: st.DrawFn, max_phases: int = 9, max_deps: int = 3) -> Plan:
    """A random DAG: each phase may depend on any earlier one, then the written order is shuffled
    so that dependencies also point forwards in the document."""
    count = draw(st.integers(1, max_phases))
    phases = []
    for i in range(count):
        deps = draw(st.lists(st.integers(0, max(i - 1, 0)), max_size=max_deps)) if i else []
        phases.append(
            make_phase(
                f"p{i}",
                [f"p{d}" for d in deps],
                writes=draw(st.lists(st.sampled_from(FILES), max_size=2)),
                reads=draw(st.lists(st.sampled_from(FILES), max_size=2)),
                estimate=draw(st.integers(0, 5)),
                parallel=draw(st.booleans()),
            )
        )
    return make_plan(*draw(st.permutations(phases)))


def brute_reach(plan: Plan) -> dict[str, set[str]]:
    """All transitive dependencies of every phase, by repeated expansion."""
    deps = {p.id: set(p.blocked_by) for p in plan.phases}
    changed = True
    while changed:
        changed = False
        for pid, found in deps.items():
            grown = found.union(*(deps[d] for d in found))
            if grown != found:
                deps[pid], changed = grown, True
    return deps


def all_paths(plan: Plan) -> list[list[str]]:
    succs: dict[str, list[str]] = {p.id: [] for p in plan.phases}
    for phase in plan.phases:
        for dep in set(phase.blocked_by):
            succs[dep].append(phase.id)
    paths: list[list[str]] = []

    def extend(path: list[str]) -> None:
        paths.append(path)
        for nxt in succs[path[-1]]:
            extend([*path, nxt])

    for pid in succs:
        extend([pid])
    return paths


@settings(max_examples=100, deadline=None)
@given(random_plans())
def test_waves_and_order_respect_dependencies(plan: Plan) -> None:
    graph = PlanGraph(plan)
    waves = graph.waves()
    assert sorted(itertools.chain(*waves)) == sorted(plan.ids)
    wave_of = {pid: n for n, wave in enumerate(waves, start=1) for pid in wave}
    for order in (graph.topological_order(), graph.critical_order()):
        position = {pid: i for i, pid in enumerate(order)}
        assert sorted(order) == sorted(plan.ids)
        for phase in plan.phases:
            for dep in phase.blocked_by:
                assert position[dep] < position[phase.id]
    for phase in plan.phases:
        assert all(wave_of[dep] < wave_of[phase.id] for dep in phase.blocked_by)
        # the wave is the earliest possible: one more than the latest dependency
        expected = max((wave_of[d] for d in phase.blocked_by), default=0) + 1
        assert wave_of[phase.id] == expected == graph.wave(phase.id)


@settings(max_examples=100, deadline=None)
@given(random_plans(), st.data())
def test_stable_order_and_descendants_match_brute_force(plan: Plan, data: st.DataObject) -> None:
    graph = PlanGraph(plan)
    reach = brute_reach(plan)
    chosen = data.draw(st.lists(st.sampled_from(plan.ids), unique=True))
    order = graph.stable_order(chosen)
    # brute force: again and again, the first phase as given whose chosen dependencies are placed
    expected: list[str] = []
    waiting = list(chosen)
    while waiting:
        ready = next(
            pid
            for pid in waiting
            if all(d in expected or d not in chosen for d in plan.phase(pid).blocked_by)
        )
        expected.append(ready)
        waiting.remove(ready)
    assert order == expected
    assert graph.descendants(chosen) == {pid for pid in plan.ids if reach[pid] & set(chosen)}


@settings(max_examples=100, deadline=None)
@given(random_plans())
def test_may_run_concurrently_matches_brute_force(plan: Plan) -> None:
    graph = PlanGraph(plan)
    reach = brute_reach(plan)
    for a, b in itertools.product(plan.ids, repeat=2):
        expected = a != b and a not in reach[b] and b not in reach[a]
        assert graph.may_run_concurrently(a, b) == expected
        assert graph.depends_on(a, b) == (b in reach[a])


@settings(max_examples=100, deadline=None)
@given(random_plans())
def test_conflicts_match_brute_force(plan: Plan) -> None:
    graph = PlanGraph(plan)
    expected = set()
    for a, b in itertools.combinations(plan.phases, 2):
        if not graph.may_run_concurrently(a.id, b.id):
            continue
        shared_writes = a.files.writes & b.files.writes
        read_write = (a.files.writes & set(b.reads)) | (b.files.writes & set(a.reads))
        for path in shared_writes | read_write:
            expected.add(frozenset((a.id, b.id, path)))
    found = [frozenset((c.writer, c.other, c.path)) for c in graph.conflicts()]
    assert len(found) == len(set(found))  # each conflict once
    assert set(found) == expected
    for phase in plan.phases:
        partners = {pid for pair in expected if phase.id in pair for pid in pair} - {phase.id}
        partners -= set(FILES)
        assert graph.conflicting(phase.id) == partners


@settings(max_examples=100, deadline=None)
@given(random_plans())
def test_chunks_partition_each_wave_into_disjoint_file_sets(plan: Plan) -> None:
    graph = PlanGraph(plan)
    for wave, chunks in zip(graph.waves(), graph.chunks(), strict=True):
        members = [pid for chunk in chunks for pid in chunk.phases]
        assert sorted(members) == sorted(wave)  # every phase in exactly one chunk
        for one, other in itertools.combinations(chunks, 2):
            assert not set(one.files) & set(other.files)
            assert not set(one.files) & set(other.reads)
            assert not set(one.reads) & set(other.files)
        assert wave_overlap(chunks) == frozenset()
        for chunk in chunks:
            phases = [plan.phase(pid) for pid in chunk.phases]
            assert set(chunk.files) == set().union(*(p.files.writes for p in phases))


@settings(max_examples=100, deadline=None)
@given(random_plans(max_phases=8))
def test_critical_path_is_a_longest_real_path(plan: Plan) -> None:
    graph = PlanGraph(plan)
    path = graph.critical_path()
    for dep, phase in itertools.pairwise(path):
        assert dep in plan.phase(phase).blocked_by
    cost = {p.id: float(p.estimate or 0) for p in plan.phases}
    longest = max(sum(cost[pid] for pid in candidate) for candidate in all_paths(plan))
    assert graph.path_duration(path) == longest
    for phase in plan.phases:
        from_here = [c for c in all_paths(plan) if c[0] == phase.id]
        assert graph.remaining_path(phase.id) == max(sum(cost[p] for p in c) for c in from_here)


@settings(max_examples=100, deadline=None)
@given(random_plans())
def test_redundant_dependencies_are_implied(plan: Plan) -> None:
    check_redundant_dependencies(plan)


@settings(max_examples=40, deadline=None)
@given(random_plans(max_phases=30, max_deps=25))
def test_redundant_dependencies_of_phases_with_many_dependencies(plan: Plan) -> None:
    # more than graph._PAIRWISE_DEPS dependencies take the other branch of the search
    check_redundant_dependencies(plan)


def test_redundant_dependencies_of_a_phase_with_many_dependencies() -> None:
    phases = [make_phase(f"p{i}", [f"p{j}" for j in range(i)]) for i in range(25)]
    graph = PlanGraph(make_plan(*phases))
    assert len(phases[-1].blocked_by) > _PAIRWISE_DEPS
    found = graph.redundant_dependencies()
    assert len(found) == sum(range(1, 24))  # all but each phase's direct predecessor
    assert [item for item in found if item[0] == "p24"][:2] == [
        ("p24", "p0", "p1"),
        ("p24", "p1", "p2"),
    ]
    check_redundant_dependencies(make_plan(*phases))


def check_redundant_dependencies(plan: Plan) -> None:
    graph = PlanGraph(plan)
    reach = brute_reach(plan)
    found = {(phase, dep) for phase, dep, _ in graph.redundant_dependencies()}
    for phase, dep, through in graph.redundant_dependencies():
        assert through in plan.phase(phase).blocked_by
        assert dep in reach[through]
    expected = {
        (p.id, d)
        for p in plan.phases
        for d in set(p.blocked_by)
        if any(d in reach[o] for o in set(p.blocked_by) - {d})
    }
    assert found == expected


def test_many_redundant_dependencies_end_in_one_summary_line() -> None:
    # every phase depends on all earlier ones: all but the direct predecessor are redundant
    phases = [make_phase(f"p{i}", [f"p{j}" for j in range(i)]) for i in range(10)]
    graph = PlanGraph(make_plan(*phases))
    redundant = sum(range(1, 9))
    assert len(graph.redundant_dependencies()) == redundant
    warnings = graph.warnings()
    assert len(warnings) == 21
    assert warnings[-1] == f"plan.yaml: and {redundant - 20} more redundant dependencies"
