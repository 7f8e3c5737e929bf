"""render(plan, fmt): the JSON shape, Mermaid that parses, and the text report's content."""

from __future__ import annotations

import gc
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_maestro.plan.graph import PlanGraph
from pytest_maestro.plan.model import Check, Files, Phase, Plan
from pytest_maestro.views.analysis import FORMATS, analysis_dict, mermaid_id, mermaid_label, render

from ..helpers import ANALYSIS_KEYS, ANALYSIS_PHASE_KEYS


def sample_plan() -> Plan:
    """Two branches sharing a file, a read/write overlap, a redundant dependency, a serial tail."""
    return Plan(
        path=Path("plans/sample.yaml"),
        format="native",
        phases=(
            Phase(
                id="1.1",
                name="Parser",
                line=4,
                agent="coder",
                files=Files(create=("src/parser.py",), modify=("src/shared.py",)),
                acceptance=(Check("parses", "python -m pytest tests/test_parser.py"),),
                run=("make parser",),
                estimate=3,
            ),
            Phase(
                id="1.2",
                name="Renderer",
                line=11,
                files=Files(modify=("src/shared.py",)),
                estimate=1,
            ),
            Phase(
                id="task-3",
                name="Docs",
                line=17,
                reads=("src/parser.py",),
                acceptance=(Check("docs read well"),),
                estimate=1,
            ),
            Phase(
                id="T004",
                name="Index",
                line=22,
                blocked_by=("1.1", "1.2"),
                files=Files(create=("src/index.py",), delete=("old.py",)),
                estimate=1,
            ),
            Phase(
                id="end",
                name='Release "v1" <final>',
                line=30,
                blocked_by=("T004", "1.1"),
                parallel=False,
                estimate=1,
            ),
        ),
    )


# -- json ----------------------------------------------------------------------------------------


def test_json_has_exactly_the_documented_shape() -> None:
    data = json.loads(render(sample_plan(), "json"))
    assert list(data) == ANALYSIS_KEYS
    assert data["plan"] == str(Path("plans/sample.yaml"))
    assert data["format"] == "native"
    for phase in data["phases"]:
        assert list(phase) == ANALYSIS_PHASE_KEYS
        assert list(phase["files"]) == ["create", "modify", "delete"]
        assert all(isinstance(v, list) for v in phase["files"].values())
        assert isinstance(phase["line"], int)
        for criterion in phase["acceptance"]:
            assert list(criterion) == ["criterion", "check"]
    for chunk in data["chunks"]:
        assert list(chunk) == ["wave", "phases", "files"]
        assert isinstance(chunk["wave"], int)
    assert list(data["profile"]) == [
        "total_phases",
        "parallel_eligible",
        "batches",
        "sequential_only",
        "max_width",
    ]
    assert all(isinstance(line, str) for line in data["warnings"])


def test_json_values() -> None:
    data = json.loads(render(sample_plan(), "json"))
    first = data["phases"][0]
    assert first["agent"] == "coder"
    assert first["files"] == {
        "create": ["src/parser.py"],
        "modify": ["src/shared.py"],
        "delete": [],
    }
    assert first["acceptance"] == [
        {"criterion": "parses", "check": "python -m pytest tests/test_parser.py"}
    ]
    assert first["run"] == ["make parser"]
    assert data["phases"][1]["agent"] is None
    assert data["phases"][2]["acceptance"] == [{"criterion": "docs read well", "check": None}]
    assert data["phases"][4]["blocked_by"] == ["T004", "1.1"]
    assert data["waves"] == [["1.1", "1.2", "task-3"], ["T004"], ["end"]]
    assert data["chunks"] == [
        {
            "wave": 1,
            "phases": ["1.1", "1.2", "task-3"],
            "files": ["src/parser.py", "src/shared.py"],
        },
        {"wave": 2, "phases": ["T004"], "files": ["old.py", "src/index.py"]},
        {"wave": 3, "phases": ["end"], "files": []},
    ]
    assert data["critical_path"] == ["1.1", "T004", "end"]
    assert data["profile"] == {
        "total_phases": 5,
        "parallel_eligible": 0,
        "batches": 0,
        "sequential_only": 5,
        "max_width": 1,
    }
    assert len(data["warnings"]) == 3
    where = f"{Path('plans/sample.yaml')}:30"
    assert data["warnings"][0] == (
        f"{where}: phase 'end' dependency on '1.1' is redundant (implied through 'T004')"
    )


def test_json_text_matches_analysis_dict() -> None:
    plan = sample_plan()
    assert json.loads(render(plan, "json")) == analysis_dict(plan, PlanGraph(plan))


def test_json_keeps_reader_warnings_and_does_not_repeat_graph_warnings() -> None:
    plan = sample_plan()
    data = json.loads(render(plan, "json"))
    validated = Plan(
        path=plan.path,
        format=plan.format,
        phases=plan.phases,
        warnings=("plans/sample.yaml:2: unknown field 'foo'", *data["warnings"]),
    )
    again = json.loads(render(validated, "json"))
    assert again["warnings"] == list(validated.warnings)


# -- mermaid -------------------------------------------------------------------------------------

NODE = re.compile(r'^ {4}(?P<id>[A-Za-z][A-Za-z0-9_]*)\["(?P<label>[^"]*)"\]$')
EDGE = re.compile(r"^ {2}(?P<src>[A-Za-z][A-Za-z0-9_]*) --> (?P<dst>[A-Za-z][A-Za-z0-9_]*)$")


def awkward_plan() -> Plan:
    ids = ["1.2", "task-3", "T001", "end", "a b (c)", "é-ü", "1_2"]
    phases = [Phase(id=ids[0], name='Set "db" <up> & #1 `x` | y')]
    phases += [Phase(id=pid, name=pid, blocked_by=(ids[0],)) for pid in ids[1:]]
    return Plan(path=Path("plan.md"), format="tasklist", phases=tuple(phases))


def test_mermaid_is_well_formed_for_awkward_ids() -> None:
    lines = render(awkward_plan(), "mermaid").splitlines()
    assert lines[0] == "flowchart TD"
    nodes = {m["id"]: m["label"] for m in map(NODE.match, lines) if m}
    assert len(nodes) == 7  # "1.2" and "1_2" stay distinct
    assert all(node not in {"end", "graph", "subgraph"} for node in nodes)
    edges = [(m["src"], m["dst"]) for m in map(EDGE.match, lines) if m]
    assert len(edges) == 6
    assert all(src in nodes and dst in nodes for src, dst in edges)
    opened = sum(1 for line in lines if line.lstrip().startswith("subgraph "))
    assert opened == 2
    assert sum(1 for line in lines if line.strip() == "end") == opened
    every_line = re.compile(
        r"^(flowchart TD|  subgraph wave\d+\[\"Wave \d+\"\]|  end|  classDef .*|  class .*)$"
    )
    assert all(NODE.match(line) or EDGE.match(line) or every_line.match(line) for line in lines)


@given(st.lists(st.text(min_size=1), min_size=1, max_size=5, unique=True), st.text())
def test_mermaid_lines_stay_well_formed_for_any_text(ids: list[str], name: str) -> None:
    phases = [Phase(id=pid, name=name, blocked_by=tuple(ids[:i])) for i, pid in enumerate(ids)]
    lines = render(Plan(Path("p.md"), "native", tuple(phases)), "mermaid").splitlines()
    nodes = [m["id"] for m in map(NODE.match, lines) if m]
    assert len(nodes) == len(set(nodes)) == len(ids)
    edges = [m for m in map(EDGE.match, lines) if m]
    assert len(edges) == len(ids) * (len(ids) - 1) // 2


def test_mermaid_labels_escape_quotes_and_markup() -> None:
    label = mermaid_label('Set "db" <up> & #1 `x` | y')
    assert label == "Set #quot;db#quot; #lt;up#gt; #amp; #35;1 #96;x#96; #124; y"
    assert mermaid_label("a\nb  c") == "a b c"
    assert len(mermaid_label("x" * 500)) == 80


def test_mermaid_ids_are_unique_and_valid() -> None:
    assert mermaid_id(0, "1.2") != mermaid_id(1, "1_2")
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", mermaid_id(3, "a b (c) é"))


def test_mermaid_marks_the_critical_path() -> None:
    lines = render(sample_plan(), "mermaid").splitlines()
    assert "  class p0_1_1,p3_T004,p4_end critical" in lines


# -- text ----------------------------------------------------------------------------------------


def test_text_shows_waves_chunks_proof_profile_and_warnings() -> None:
    plan = Plan(
        path=Path("plan.yaml"),
        format="native",
        phases=(
            Phase(id="a", name="A", files=Files(modify=("src/a.py",))),
            Phase(id="b", name="B", files=Files(modify=("src/b.py",))),
            Phase(id="c", name="C", blocked_by=("a", "b"), files=Files(modify=("src/a.py",))),
            Phase(id="d", name="D", blocked_by=("a", "c"), parallel=False),
        ),
    )
    text = render(plan, "text")
    assert "## Parallel Execution Analysis" in text
    assert "**4 chunks across 3 waves.**" in text
    assert "### Wave 1 (parallel)" in text
    assert "| A | a | `src/a.py` | None |" in text
    assert "| B | b | `src/b.py` | None |" in text
    assert "### Wave 2 (after Wave 1, one chunk)" in text
    assert "| C | c | `src/a.py` | Chunk A, Chunk B |" in text
    assert "| D | d (not parallel) | - | Chunk A, Chunk C |" in text
    assert "> Chunk A files: `{src/a.py}`" in text
    assert "> Intersection: `∅`" in text
    assert "a -> c -> d (3 phases; no estimates given)" in text
    assert (
        "total_phases: 4  parallel_eligible: 2  batches: 1  sequential_only: 2  max_width: 2"
    ) in text
    assert "**Recommended**: -n 2" in text
    assert "- plan.yaml: phase 'd' dependency on 'a' is redundant (implied through 'c')" in text


def test_text_for_a_chain_recommends_no_xdist() -> None:
    plan = Plan(
        path=Path("plan.yaml"),
        format="native",
        phases=(Phase(id="a", name="A", estimate=2.5), Phase(id="b", name="B", blocked_by=("a",))),
    )
    text = render(plan, "text")
    assert "Non-intersection proof" not in text  # one chunk per wave: nothing to prove
    assert "a -> b (3.5 s estimated)" in text
    assert "no -n (no two phases can run at the same time)" in text
    assert "## Warnings" not in text


def test_unknown_format_is_refused() -> None:
    assert FORMATS == ("text", "json", "mermaid")
    with pytest.raises(ValueError, match="unknown analysis format 'yaml'"):
        render(sample_plan(), "yaml")


@pytest.mark.parametrize("fmt", [*FORMATS, "yaml"])
def test_rendering_leaves_the_garbage_collector_as_it_found_it(fmt: str) -> None:
    # render pauses the collector for speed; it must come back on, even after an error, and
    # must stay off for a caller who turned it off.
    was_enabled = gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            try:
                render(sample_plan(), fmt)
            except ValueError:
                assert fmt == "yaml"
            assert gc.isenabled() is enabled
    finally:
        gc.enable() if was_enabled else gc.disable()
