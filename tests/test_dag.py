"""One graph: the plan's graph is built once, by validation, and passed around."""

from __future__ import annotations

from pathlib import Path

from pytest_maestro.plan import load_graph, load_plan

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
