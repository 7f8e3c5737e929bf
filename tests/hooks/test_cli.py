"""The command line: --maestro-analyze's formats, --maestro-format, --maestro-root and the pytest
options that act on phases (--maxfail, --durations), plus the plan's warnings in a run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_maestro.plan import FORMAT_NAMES, PlanError, load_plan

from ..helpers import ANALYSIS_KEYS, ANALYSIS_PHASE_KEYS, phase, write_plan

# b and c after a; d after b and c, and after a again (redundant: implied through b).
DIAMOND = [
    phase("a", "touch a.ran a.txt", files={"create": ["a.txt"]}, estimate=1),
    phase("b", "touch b.ran; echo b >> a.txt", blocked_by=["a"], files={"modify": ["a.txt"]}),
    phase("c", "touch c.ran; rm -f old.txt", blocked_by=["a"], files={"delete": ["old.txt"]}),
    phase(
        "d",
        "touch d.ran",
        blocked_by=["b", "c", "a"],
        reads=["r.md"],
        acceptance=[{"criterion": "ran", "check": "test -f d.ran"}, {"criterion": "prose"}],
    ),
]

# A Maestro Markdown plan whose tasks are also tasklist headings: maestro-md is detected first.
AMBIGUOUS_MD = """# Plan

## Phase 1: Setup

### Agent
coder

### T001: Make the file
**Depends**: none

### T002: Check it
**Depends**: T001
"""

TASKLIST_MD = """# Plan

### T001: Make the file
**Depends**: none
"""


@pytest.fixture(autouse=True)
def _no_maestro_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MAESTRO_AGENT_TIMEOUT", "MAESTRO_MAX_RETRIES", "MAESTRO_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)


def analyze_json(pytester: pytest.Pytester, plan: str, *args: str) -> dict[str, object]:
    result = pytester.runpytest("--maestro", plan, "--maestro-analyze=json", *args)
    assert result.ret == 0, result.stderr.str()
    document = json.loads(result.stdout.str())
    assert isinstance(document, dict)
    return document


# -- --maestro-analyze -------------------------------------------------------------------------


def test_analyze_json_has_the_documented_keys_and_runs_nothing(pytester: pytest.Pytester) -> None:
    write_plan(pytester, DIAMOND)
    document = analyze_json(pytester, "plan.yaml")
    assert list(document) == ANALYSIS_KEYS
    phases = document["phases"]
    assert isinstance(phases, list)
    assert [p["id"] for p in phases] == ["a", "b", "c", "d"]
    for entry in phases:
        assert list(entry) == ANALYSIS_PHASE_KEYS
        assert list(entry["files"]) == ["create", "modify", "delete"]
    assert [p["files"] for p in phases[:3]] == [
        {"create": ["a.txt"], "modify": [], "delete": []},
        {"create": [], "modify": ["a.txt"], "delete": []},
        {"create": [], "modify": [], "delete": ["old.txt"]},
    ]
    assert (phases[3]["blocked_by"], phases[3]["reads"]) == (["b", "c", "a"], ["r.md"])
    assert phases[3]["acceptance"] == [
        {"criterion": "ran", "check": "test -f d.ran"},
        {"criterion": "prose", "check": None},
    ]
    assert phases[0]["run"] == ["touch a.ran a.txt"]
    assert (document["format"], document["waves"]) == ("native", [["a"], ["b", "c"], ["d"]])
    # Nothing ran, and no session was started.
    assert not list(pytester.path.glob("*.ran"))
    assert not (pytester.path / ".maestro").exists()


def test_analyze_mermaid_draws_one_edge_per_dependency(pytester: pytest.Pytester) -> None:
    write_plan(pytester, DIAMOND)
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-analyze=mermaid")
    assert result.ret == 0
    lines = result.stdout.lines
    assert lines[0] == "flowchart TD"
    declared = (re.fullmatch(r'\s*(\w+)\["([^:"]+): [^"]*"\]', line) for line in lines)
    nodes = {m.group(2): m.group(1) for m in declared if m}
    assert set(nodes) == {"a", "b", "c", "d"}
    phase_of = {node: pid for pid, node in nodes.items()}
    edges = [
        (phase_of[m.group(1)], phase_of[m.group(2)])
        for m in (re.fullmatch(r"\s*(\w+) --> (\w+)", line) for line in lines)
        if m
    ]
    assert sorted(edges) == [("a", "b"), ("a", "c"), ("a", "d"), ("b", "d"), ("c", "d")]
    assert not list(pytester.path.glob("*.ran"))


def test_analyze_text_is_the_default(pytester: pytest.Pytester) -> None:
    write_plan(pytester, DIAMOND)
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-analyze")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["Plan: plan.yaml (native, 4 phases)", "## Critical path", "a -> b -> d *"]
    )
    assert not list(pytester.path.glob("*.ran"))


# -- --maestro-format --------------------------------------------------------------------------


def test_forcing_native_on_markdown_is_a_one_line_error(pytester: pytest.Pytester) -> None:
    (pytester.path / "plan.md").write_text(TASKLIST_MD)
    for extra in ([], ["--maestro-analyze"]):
        result = pytester.runpytest("--maestro", "plan.md", "--maestro-format", "native", *extra)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        errors = [line for line in result.stderr.lines if line.strip()]
        assert len(errors) == 1, errors
        assert errors[0].startswith("ERROR: plan.md:")
        assert "Traceback" not in result.stdout.str() + result.stderr.str()
    # Detected, the same file reads as a task list.
    assert analyze_json(pytester, "plan.md")["format"] == "tasklist"


def test_forcing_an_unknown_format_lists_the_known_ones(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "touch a.ran")])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-format", "yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--maestro-format: invalid choice: 'yaml' (choose from*"])
    line = next(line for line in result.stderr.lines if "invalid choice" in line)
    assert all(f"'{name}'" in line for name in FORMAT_NAMES)
    pytester.makeini("[pytest]\nmaestro_format = yaml\n")
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: ini maestro_format: 'yaml' is not one of " + ", ".join(FORMAT_NAMES)]
    )
    assert not (pytester.path / "a.ran").exists()


def test_forced_format_reads_an_ambiguous_file(pytester: pytest.Pytester) -> None:
    (pytester.path / "plan.md").write_text(AMBIGUOUS_MD)
    detected = analyze_json(pytester, "plan.md")
    assert detected["format"] == "maestro-md"
    forced = analyze_json(pytester, "plan.md", "--maestro-format", "tasklist")
    assert forced["format"] == "tasklist"
    phases = forced["phases"]
    assert isinstance(phases, list)
    assert [(p["id"], p["blocked_by"]) for p in phases] == [("T001", []), ("T002", ["T001"])]
    # The ini key forces it too, and the command line beats the ini key.
    pytester.makeini("[pytest]\nmaestro_format = tasklist\n")
    assert analyze_json(pytester, "plan.md")["format"] == "tasklist"
    assert analyze_json(pytester, "plan.md", "--maestro-format=maestro-md")["format"] == (
        "maestro-md"
    )


def test_load_plan_with_a_format(tmp_path: Path) -> None:
    ambiguous = tmp_path / "plan.md"
    ambiguous.write_text(AMBIGUOUS_MD)
    assert load_plan(ambiguous).format == "maestro-md"
    forced = load_plan(ambiguous, format="tasklist")
    assert (forced.format, forced.ids) == ("tasklist", ("T001", "T002"))
    maestro = tmp_path / "phases.json"
    maestro.write_text(json.dumps({"phases": [{"id": 1, "name": "Build", "agent": "coder"}]}))
    assert load_plan(maestro, format="native").format == "native"

    markdown = tmp_path / "tasks.md"
    markdown.write_text(TASKLIST_MD)
    with pytest.raises(PlanError) as native:
        load_plan(markdown, format="native")
    assert str(native.value).startswith(f"{markdown}:")
    assert "\n" not in str(native.value)
    with pytest.raises(PlanError, match=r"unknown plan format 'yaml'; known: native, ") as unknown:
        load_plan(markdown, format="yaml")
    assert all(name in str(unknown.value) for name in FORMAT_NAMES)


# -- pytest's options on phases ----------------------------------------------------------------


@pytest.mark.parametrize("maxfail", [1, 2])
def test_maxfail_stops_after_that_many_failed_phases(
    pytester: pytest.Pytester, maxfail: int
) -> None:
    # Independent phases; the estimates put them in this order.
    write_plan(
        pytester,
        [
            phase("first", "touch first.ran", "false", max_retries=0, estimate=4),
            phase("second", "touch second.ran", "false", max_retries=0, estimate=3),
            phase("third", "touch third.ran", estimate=2),
        ],
    )
    args = ("--maestro", "plan.yaml", f"--maxfail={maxfail}", "--maestro-circuit-breaker=0", "-rs")
    result = pytester.runpytest(*args)
    # Every phase is accounted for: those the stop left unrun are skipped, saying why.
    result.assert_outcomes(failed=maxfail, skipped=3 - maxfail)
    result.stdout.fnmatch_lines(
        [f"SKIPPED * not run: the run stopped (stopping after {maxfail} failures)"]
    )
    ran = sorted(path.stem for path in pytester.path.glob("*.ran"))
    assert ran == sorted(["first", "second"][:maxfail])


def test_durations_lists_each_phase(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("quick", "true"), phase("slow", "sleep 0.3")])
    result = pytester.runpytest("--maestro", "plan.yaml", "--durations=0", "-vv")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*slowest durations*", "*s call * plan.yaml::slow"])
    # The sleep is measured: at least its 0.3 s (a loaded machine may take longer, never less).
    slow = re.search(r"^(\d+\.\d+)s call +plan\.yaml::slow$", result.stdout.str(), re.MULTILINE)
    assert slow is not None and float(slow[1]) >= 0.3
    result.stdout.fnmatch_lines(["*s call * plan.yaml::quick"])


# -- warnings ----------------------------------------------------------------------------------


def test_plan_warnings_are_shown_and_the_run_still_passes(pytester: pytest.Pytester) -> None:
    write_plan(pytester, DIAMOND)
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*maestro plan warnings*",
            "plan.yaml:*: phase 'd' dependency on 'a' is redundant (implied through '*')",
        ]
    )


def test_a_plan_without_warnings_shows_no_warnings_section(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true"), phase("b", "true", blocked_by=["a"])])
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(passed=1 + 1)
    assert "maestro plan warnings" not in result.stdout.str()


# -- the project root --------------------------------------------------------------------------

WHERE = "root: ../work\nphases:\n  - id: a\n    run: pwd > where.txt\n"


def where(directory: Path) -> str:
    return (directory / "where.txt").read_text().strip()


@pytest.mark.parametrize("source", ["cli", "ini"])
def test_root_option_beats_the_plan_s_root(pytester: pytest.Pytester, source: str) -> None:
    (pytester.path / "plans").mkdir()
    (pytester.path / "plans" / "p.yaml").write_text(WHERE)
    (pytester.path / "other").mkdir()
    if source == "cli":
        args = ["--maestro-root", "other"]
    else:
        pytester.makeini("[pytest]\nmaestro_root = other\n")
        args = []
    result = pytester.runpytest("--maestro", "plans/p.yaml", *args)
    result.assert_outcomes(passed=1)
    other = (pytester.path / "other").resolve()
    assert where(other) == str(other)
    result.stdout.fnmatch_lines(["maestro: plans/p.yaml (native), root other"])
    assert not (pytester.path / "work").exists()
    assert (other / ".maestro").is_dir()


def test_a_root_option_naming_no_directory_is_refused(pytester: pytest.Pytester) -> None:
    (pytester.path / "p.yaml").write_text(WHERE)
    result = pytester.runpytest("--maestro", "p.yaml", "--maestro-root", "typo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: project root */typo (--maestro-root) is not a directory"])
    assert not (pytester.path / "typo").exists()


def test_without_root_phases_run_in_pytest_s_rootdir(pytester: pytest.Pytester) -> None:
    (pytester.path / "plans").mkdir()
    (pytester.path / "plans" / "p.yaml").write_text(WHERE.replace("root: ../work\n", ""))
    project = pytester.path / "project"
    project.mkdir()
    result = pytester.runpytest("--maestro", "plans/p.yaml", "--rootdir", str(project))
    result.assert_outcomes(passed=1)
    assert where(project) == str(project.resolve())
    assert not (pytester.path / "where.txt").exists()
    assert not (pytester.path / "plans" / "where.txt").exists()
