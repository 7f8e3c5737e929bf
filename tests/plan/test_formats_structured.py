"""The structured plan readers: native YAML/JSON, .design/plan.json v2, Maestro phases JSON."""

from __future__ import annotations

import copy
import functools
import json
import math
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pytest_maestro.plan import (
    Assumption,
    Check,
    Files,
    Phase,
    PlanError,
    detect_format,
    formats,
    load_plan,
)
from pytest_maestro.plan.formats import design_v2, maestro_json, native
from pytest_maestro.plan.formats._json_lines import lines_under, scan_lines, shallow_lines
from pytest_maestro.plan.formats._schema_errors import SchemaValidator, inline_refs
from pytest_maestro.plan.formats._structured import parse_json
from pytest_maestro.plan.model import Plan
from pytest_maestro.plan.source import Source

from ..helpers import REPO

EXAMPLES = REPO / "example_plans"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def read(reader: object, path: Path) -> Plan:
    plan: Plan = reader.read(Source.read(path))  # type: ignore[attr-defined]
    return plan


def line_of(path: Path, needle: str, occurrence: int = 1) -> int:
    """1-based number of the line holding the n-th occurrence of ``needle``."""
    found = [n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    return found[occurrence - 1]


def error_of(reader: object, path: Path) -> str:
    with pytest.raises(PlanError) as info:
        read(reader, path)
    return str(info.value)


def detected(path: Path) -> str | None:
    """The first of the structured readers, in registry order, that claims the file."""
    source = Source.read(path)
    for reader in (design_v2, maestro_json, native):
        if reader.detect(source):
            return reader.NAME
    return None


# --- native ----------------------------------------------------------------------------------

EVERY_FIELD_YAML = """
    title: Every field
    root: ..
    context: |
      Ship the thing.
    tags: [demo, ci]
    phases:
      - id: setup
        name: Set up
        agent: builder
        model: sonnet
        files:
          create: [src/a.py]
          modify: [README.md]
          delete: [old.txt]
        reads: [docs/spec.md]
        run:
          - echo one
          - echo two
        acceptance:
          - criterion: a exists
            check: test -f src/a.py
          - prose only
          - check: python3 -c pass
        description: Do the setup.
        prompt: Be careful.
        parallel: false
        timeout: 30
        max_retries: 1
        estimate: 12.5
        tags: [fast]
        assumptions:
          - claim: python is there
            verify: python3 --version
            severity: warning
          - claim: nothing to verify
        fallback: try plan B
        rollback_triggers:
          - If the build breaks, STOP
        constraints:
          - no network
      - id: 2
        blocked_by: setup
        files: [src/a.py]
        run: make
"""

SETUP = Phase(
    id="setup",
    name="Set up",
    agent="builder",
    model="sonnet",
    files=Files(create=("src/a.py",), modify=("README.md",), delete=("old.txt",)),
    reads=("docs/spec.md",),
    run=("echo one", "echo two"),
    acceptance=(
        Check("a exists", "test -f src/a.py"),
        Check("prose only", None),
        Check("python3 -c pass", "python3 -c pass"),
    ),
    description="Do the setup.\n\nBe careful.",
    parallel=False,
    timeout=30.0,
    max_retries=1,
    estimate=12.5,
    tags=("fast",),
    assumptions=(
        Assumption("python is there", "python3 --version", "warning"),
        Assumption("nothing to verify", None, "blocking"),
    ),
    fallback="try plan B",
    rollback_triggers=("If the build breaks, STOP",),
    constraints=("no network",),
)
SECOND = Phase(
    id="2", name="2", blocked_by=("setup",), files=Files(modify=("src/a.py",)), run=("make",)
)


def test_native_yaml_reads_every_field(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.yaml", EVERY_FIELD_YAML)
    plan = read(native, path)
    assert (plan.format, plan.title, plan.root, plan.tags) == (
        "native",
        "Every field",
        "..",
        ("demo", "ci"),
    )
    assert plan.context == "Ship the thing."
    assert plan.phases == (
        _at(SETUP, line_of(path, "- id: setup")),
        _at(SECOND, line_of(path, "- id: 2")),
    )


def test_native_json_reads_the_same_plan_with_its_own_lines(tmp_path: Path) -> None:
    data = yaml.safe_load(textwrap.dedent(EVERY_FIELD_YAML))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data, indent=2))
    plan = read(native, path)
    assert plan.phases == (
        _at(SETUP, line_of(path, "{", 2)),  # the first "{" opens the document
        _at(SECOND, line_of(path, '"id": 2') - 1),
    )


def _at(phase: Phase, line: int) -> Phase:
    return replace(phase, line=line)


def test_native_defaults_and_nulls(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "plan.yml",
        """
        phases:
          - id: only
            reads:
            agent: ~
        """,
    )
    (phase,) = read(native, path).phases
    assert phase == Phase(id="only", name="only", line=2)
    assert phase.parallel is True


@pytest.mark.parametrize(
    "text",
    [
        '{"title": null, "phases": [{"id": "only", "reads": null, "agent": null,\n'
        ' "files": {"create": null}, "acceptance": [{"criterion": "c", "check": null}]}]}',
        # no null literal at all: the reader skips looking for nulls, and must still read it
        '{"phases": [{"id": "only", "acceptance": [{"criterion": "c"}], "name": "null"}]}',
    ],
)
def test_native_json_nulls_count_as_absent(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "plan.json", text)
    plan = read(native, path)
    (phase,) = plan.phases
    assert plan.title == ""
    assert (phase.id, phase.agent, phase.reads, phase.files) == ("only", None, (), Files())
    assert phase.acceptance == (Check("c"),)


def test_native_int_ids_and_single_dependency(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.json", '{"phases": [{"id": 1}, {"id": 2, "blocked_by": 1}]}')
    plan = read(native, path)
    assert plan.ids == ("1", "2")
    assert plan.phases[1].blocked_by == ("1",)
    assert [p.line for p in plan.phases] == [1, 1]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "  - id: a\n    blockd_by: [b]\n",
            "plan.yaml:3: phase 'a' has unknown field 'blockd_by' (did you mean 'blocked_by'?)",
        ),
        (
            "  - id: a\n    timeout: ten\n",
            "plan.yaml:3: phase 'a' field 'timeout' must be a number, got 'ten'",
        ),
        (
            "  - id: a\n    timeout: 0\n",
            "plan.yaml:3: phase 'a' field 'timeout' must be greater than 0, got 0",
        ),
        (
            "  - id: a\n    max_retries: -1\n",
            "plan.yaml:3: phase 'a' field 'max_retries' must be at least 0, got -1",
        ),
        (
            "  - id: a\n    max_retries: 1.5\n",
            "plan.yaml:3: phase 'a' field 'max_retries' must be an integer, got 1.5",
        ),
        (
            "  - id: a\n    parallel: maybe\n",
            "plan.yaml:3: phase 'a' field 'parallel' must be true or false, got 'maybe'",
        ),
        (
            "  - id: a\n    files: src/a.py\n",
            "plan.yaml:3: phase 'a' field 'files' must be a list of paths or a mapping with "
            "create, modify and delete lists, got 'src/a.py'",
        ),
        (
            "  - id: a\n    files: {creat: [x]}\n",
            "plan.yaml:3: phase 'a' has unknown field 'creat' in 'files' (did you mean 'create'?)",
        ),
        (
            "  - id: a\n    files: {create: x}\n",
            "plan.yaml:3: phase 'a' field 'files.create' must be a list of paths, got 'x'",
        ),
        (
            "  - id: a\n    acceptance: [5]\n",
            "plan.yaml:3: phase 'a' field 'acceptance[0]' must be a criterion (text) or a "
            "mapping with criterion and check, got 5",
        ),
        (
            "  - id: a\n    acceptance:\n      - criterion: 5\n",
            "plan.yaml:4: phase 'a' field 'acceptance[0].criterion' must be a string, got 5",
        ),
        (
            "  - id: a\n    assumptions:\n      - claim: x\n        severity: fatal\n",
            "plan.yaml:5: phase 'a' field 'assumptions[0].severity' must be one of 'blocking', "
            "'warning', got 'fatal'",
        ),
        (
            "  - id: a\n    blocked_by: [true]\n",
            "plan.yaml:3: phase 'a' field 'blocked_by[0]' must be a phase id (a string or an "
            "integer), got true",
        ),
        ("  - name: nameless\n", "plan.yaml:2: phase #1 is missing required field 'id'"),
        (
            "  - id: [1]\n",
            "plan.yaml:2: phase #1 field 'id' must be a phase id (a string or an integer), got a "
            "list",
        ),
        (
            "  - build\n",
            "plan.yaml:2: phase #1 must be a mapping of phase fields (id, name, run, ...), got "
            "'build'",
        ),
    ],
)
def test_native_errors_name_line_phase_and_field(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("phases:\n" + body)
    assert error_of(native, path) == f"{tmp_path}/{expected}"


def test_native_unknown_top_level_field(tmp_path: Path) -> None:
    path = write(tmp_path, "plan.yaml", "titel: x\nphases:\n  - id: a\n")
    message = error_of(native, path)
    assert message == f"{path}:1: unknown top-level field 'titel' (did you mean 'title'?)"


def test_native_error_in_json_points_at_the_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "plan.json",
        """
        {
          "phases": [
            {"id": "a"},
            {
              "id": "b",
              "estimate": "long"
            }
          ]
        }
        """,
    )
    assert (
        error_of(native, path)
        == f"{path}:6: phase 'b' field 'estimate' must be a number, got 'long'"
    )


def test_native_first_error_in_file_order_wins(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "plan.yaml",
        """
        phases:
          - id: a
            run: 5
          - id: b
            timeout: x
        """,
    )
    assert error_of(native, path).startswith(f"{path}:3: phase 'a' field 'run'")


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("plan.yaml", "phases:\n  - id: a\n    run: [echo\n  - id: b\n", ":4: YAML syntax error"),
        (
            "plan.json",
            '{"phases": [\n  {"id": "a"}\n  {"id": "b"}\n]}',
            ":3: JSON syntax error: Expecting ',' delimiter (column 3)",
        ),
        (
            "plan.yaml",
            "phases:\n  - id: a\n    run: x\n    run: y\n",
            ":4: duplicate key 'phases[0].run'",
        ),
        ("plan.json", '{"phases": [{"id": "a",\n "id": "b"}]}', ":2: duplicate key 'phases[0].id'"),
        (
            "plan.yaml",
            "phases: []\n---\nphases: []\n",
            ":2: YAML syntax error: but found another document (expected a single document in "
            "the stream)",
        ),
    ],
)
def test_syntax_errors_carry_the_line(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert error_of(native, path).startswith(f"{path}{expected}")


@pytest.mark.parametrize(
    ("name", "text", "found"),
    [
        (
            "package.json",
            '{"name": "x", "version": "1.0.0", "scripts": {}}',
            "a mapping with keys 'name', 'version', 'scripts'",
        ),
        (
            "docker-compose.yml",
            "services:\n  web:\n    image: nginx\n",
            "a mapping with keys 'services'",
        ),
        ("plan.yaml", "just a sentence\n", "a string"),
        ("plan.json", '["a", "b"]', "a list"),
        ("tasks.json", '{"tasks": []}', "a mapping with keys 'tasks'"),
    ],
)
def test_other_documents_are_not_plans(tmp_path: Path, name: str, text: str, found: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert detected(path) == "native"
    expected = native.NOT_A_PLAN.format(found=found)
    assert error_of(native, path) == f"{path}: {expected}"


@pytest.mark.parametrize("name", ["plan.yaml", "plan.json", "Planfile"])
def test_a_document_nested_past_the_stack_is_a_plan_error(tmp_path: Path, name: str) -> None:
    # libyaml's own composer recurses in C and would overflow the stack here, killing pytest.
    depth = 100_000
    path = write(tmp_path, name, "phases: " + "[" * depth + "]" * depth + "\n")
    if name == "plan.json":
        path.write_text('{"phases": ' + "[" * depth + "]" * depth + "}")
    kind = "JSON" if name == "plan.json" else "YAML"
    assert native.detect(Source.read(path)) is (name != "Planfile")
    assert error_of(native, path) == f"{path}: {kind} is nested too deeply"


def test_empty_yaml_is_an_empty_plan_error(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("# only a comment\n")
    assert error_of(native, path) == f"{path}: the plan is empty"


def test_native_detection(tmp_path: Path) -> None:
    no_suffix = write(tmp_path, "Planfile", '{"phases": [{"id": "a"}]}')
    yaml_no_suffix = write(tmp_path, "plan", "phases:\n  - id: a\n")
    markdown = write(tmp_path, "plan.md", "phases:\n  - id: a\n")
    other = write(tmp_path, "notes", '{"name": "x"}')
    assert native.detect(Source.read(no_suffix))
    assert native.detect(Source.read(yaml_no_suffix))
    assert not native.detect(Source.read(markdown))
    assert not native.detect(Source.read(other))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("plan.json", '{"schemaVersion": 2, "goal": "g", "tasks": [{"subject": "a"}]}'),
        ("Planfile", '[{"id": 1, "name": "a", "agent": "x", "parallel": false, "blocked_by": []}]'),
        ("Planfile", '{"phases": [{"id": "a"}]}'),
    ],
)
def test_detection_and_reading_decode_the_json_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str
) -> None:
    """The structured readers' detect, then the chosen one's read, share one decoded JSON."""
    decoded: list[str] = []
    loads = json.loads

    def counting_loads(text: str, **options: object) -> object:
        decoded.append(text)
        return loads(text, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(json, "loads", counting_loads)
    source = Source.read(write(tmp_path, name, text))
    plan = formats.reader(detect_format(source)).read(source)
    # (native's read also decodes its schema, once per process)
    assert plan.phases and decoded.count(source.text) == 1


def test_schema_is_valid_and_covers_the_documented_fields() -> None:
    schema = native.schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) == {
        "$schema", "title", "root", "context", "tags", "isolate_include", "phases",
    }  # fmt: skip
    assert set(schema["$defs"]["phase"]["properties"]) == {
        "id", "name", "agent", "model", "runtime", "blocked_by", "files", "reads", "run",
        "acceptance", "description", "prompt", "parallel", "timeout", "max_retries", "estimate",
        "tags", "assumptions", "fallback", "rollback_triggers", "constraints", "budget_usd",
        "review", "escalate_model",
    }  # fmt: skip
    shipped = REPO / "pytest_maestro" / "plan" / "native.schema.json"
    assert json.loads(shipped.read_text()) == schema


def test_example_native_plans_validate_against_the_schema() -> None:
    for path in sorted(EXAMPLES.glob("*.y*ml")):
        data = yaml.safe_load(path.read_text())
        assert list(Draft202012Validator(native.schema()).iter_errors(data)) == [], path


_IDS = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)
_PATHS = st.lists(st.from_regex(r"[a-z]{1,6}/[a-z]{1,6}\.py", fullmatch=True), max_size=3)


@st.composite
def native_plans(draw: st.DrawFn) -> list[dict[str, object]]:
    ids = draw(st.lists(_IDS, min_size=1, max_size=8, unique=True))
    phases: list[dict[str, object]] = []
    for index, phase_id in enumerate(ids):
        deps = draw(st.lists(st.sampled_from(ids[:index]), unique=True)) if index else []
        phases.append({"id": phase_id, "blocked_by": deps, "files": draw(_PATHS)})
    return phases


@settings(max_examples=40, deadline=None)
@given(phases=native_plans(), as_json=st.booleans())
def test_native_round_trip_keeps_ids_dependencies_files_and_lines(
    tmp_path_factory: pytest.TempPathFactory, phases: list[dict[str, object]], as_json: bool
) -> None:
    directory = tmp_path_factory.mktemp("prop")
    path = directory / ("plan.json" if as_json else "plan.yaml")
    dump = (
        json.dumps({"phases": phases}, indent=2)
        if as_json
        else yaml.safe_dump({"phases": phases}, sort_keys=False)
    )
    path.write_text(dump)
    plan = read(native, path)
    lines = dump.splitlines()
    for raw, phase in zip(phases, plan.phases, strict=True):
        assert (phase.id, list(phase.blocked_by), list(phase.files.modify)) == (
            raw["id"], raw["blocked_by"], raw["files"],
        )  # fmt: skip
        assert phase.line is not None
        id_line = lines[phase.line] if as_json else lines[phase.line - 1]
        assert (
            json.dumps(raw["id"]) in id_line
            if as_json
            else "id:" in id_line and str(raw["id"]) in id_line
        )


# --- design-v2 -------------------------------------------------------------------------------

DESIGN = {
    "schemaVersion": 2,
    "goal": "Add auth",
    "context": {
        "stack": "Next.js + Prisma",
        "conventions": "ESLint",
        "testCommand": "npm test",
        "buildCommand": "npm run build",
    },
    "progress": {"completedTasks": [], "surprises": [], "decisions": []},
    "tasks": [
        {
            "subject": "Setup auth module",
            "description": "Create the module the routes use.",
            "activeForm": "Setting up auth",
            "status": "pending",
            "result": None,
            "attempts": 0,
            "blockedBy": [],
            "metadata": {
                "type": "implementation",
                "files": {"create": ["src/auth.ts"], "modify": ["src/app.ts"]},
                "reads": ["src/config.ts"],
            },
            "agent": {
                "role": "backend engineer",
                "expertise": "JWT",
                "model": "sonnet",
                "approach": "Middleware first.",
                "priorArt": ["next-auth"],
                "contextFiles": [{"path": "src/app.ts", "reason": "entry point"}],
                "assumptions": [
                    {"claim": "app exists", "verify": "test -f src/app.ts", "severity": "blocking"},
                    {"claim": "node 18", "verify": "node --version", "severity": "warning"},
                ],
                "acceptanceCriteria": [
                    {"criterion": "Auth tests pass", "check": "npm test -- auth"},
                    {"criterion": "Reviewed by a human"},
                ],
                "rollbackTriggers": ["If X, STOP and return BLOCKED: reason"],
                "constraints": "no new dependencies",
                "fallback": "Use session-based auth instead",
            },
        },
        {
            "subject": "Done before",
            "status": "completed",
            "result": "ok",
            "blockedBy": [0],
            "metadata": {"files": {"create": [], "modify": ["src/app.ts"]}},
            "agent": {"role": "reviewer", "model": "haiku"},
        },
    ],
}


def test_design_v2_reads_every_field(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(DESIGN, indent=2))
    assert detected(path) == "design-v2"
    plan = read(design_v2, path)
    first, second = plan.phases
    assert (plan.format, plan.title, plan.root) == ("design-v2", "Add auth", None)
    assert plan.context == (
        "Goal: Add auth\nProject: Next.js + Prisma.\nConventions: ESLint.\n"
        "Test: npm test\nBuild: npm run build"
    )
    assert (first.id, first.name, first.model, first.tags) == (
        "0",
        "Setup auth module",
        "sonnet",
        ("implementation",),
    )
    assert first.files == Files(create=("src/auth.ts",), modify=("src/app.ts",))
    assert first.reads == ("src/config.ts",)
    assert first.acceptance == (
        Check("Auth tests pass", "npm test -- auth"),
        Check("Reviewed by a human"),
    )
    assert first.assumptions == (
        Assumption("app exists", "test -f src/app.ts", "blocking"),
        Assumption("node 18", "node --version", "warning"),
    )
    assert first.rollback_triggers == ("If X, STOP and return BLOCKED: reason",)
    assert first.constraints == ("no new dependencies",)
    assert first.fallback == "Use session-based auth instead"
    assert first.description == (
        "Create the module the routes use.\n\nRole: backend engineer with expertise in JWT\n\n"
        "Approach: Middleware first.\n\nApply: next-auth\n\n"
        "Read before implementing:\n- src/app.ts — entry point"
    )
    assert first.line == line_of(path, '"subject": "Setup auth module"') - 1
    # A completed task trimmed by the executor still loads.
    assert (second.id, second.blocked_by, second.model) == ("1", ("0",), "haiku")
    assert second.files.modify == ("src/app.ts",) and second.acceptance == ()


def test_design_v2_root_is_the_project_of_the_design_directory(tmp_path: Path) -> None:
    path = tmp_path / ".design" / "plan.json"
    path.parent.mkdir()
    path.write_text(json.dumps(DESIGN))
    assert read(design_v2, path).root == ".."


def _design(tmp_path: Path, **changes: object) -> Path:
    data = json.loads(json.dumps(DESIGN))
    for key, value in changes.items():
        if key.startswith("task1_"):
            data["tasks"][1][key.removeprefix("task1_")] = value
        else:
            data[key] = value
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"schemaVersion": 3},
            "schemaVersion 3 is not supported (this reader reads design plans of schemaVersion 2)",
        ),
        (
            {"schemaVersion": "2"},
            "schemaVersion '2' is not supported (this reader reads design plans of schemaVersion "
            "2)",
        ),
        (
            {"task1_blockedBy": [5]},
            "phase '1' blockedBy index 5 is out of range: the plan has 2 tasks (0-1)",
        ),
        (
            {"task1_blockedBy": "0"},
            "phase '1' field 'blockedBy' must be a list of task indices, got '0'",
        ),
        (
            {"task1_blockedBy": ["0"]},
            "phase '1' field 'blockedBy[0]' must be a task index (an integer), got '0'",
        ),
        (
            {"task1_blockedBy": [-1]},
            "phase '1' field 'blockedBy[0]' must be a task index (an integer), got -1",
        ),
        ({"task1_subject": 7}, "phase '1' field 'subject' must be a string, got 7"),
        ({"tasks": []}, "field 'tasks' must not be an empty list"),
    ],
)
def test_design_v2_errors(tmp_path: Path, changes: dict[str, object], expected: str) -> None:
    path = _design(tmp_path, **changes)
    message = error_of(design_v2, path)
    assert message.split(": ", 1)[1] == expected
    assert message.startswith(f"{path}:")


def test_design_v2_error_line_is_the_offending_value(tmp_path: Path) -> None:
    path = _design(tmp_path, task1_blockedBy=[0, 9])
    assert error_of(design_v2, path).startswith(f"{path}:{line_of(path, '9')}: phase '1'")


def test_design_v2_detection_is_specific(tmp_path: Path) -> None:
    native_json = write(tmp_path, "a.json", '{"phases": [{"id": "a"}]}')
    yaml_design = write(tmp_path, "b.yaml", "schemaVersion: 2\ntasks: []\n")
    assert not design_v2.detect(Source.read(native_json))
    assert not design_v2.detect(Source.read(yaml_design))


# --- maestro-json ----------------------------------------------------------------------------

MAESTRO_PHASE = {"name": "Build", "agent": "coder", "parallel": True, "blocked_by": []}


def test_maestro_create_session_input(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "session.json",
        """
        {
          "session_id": "s1",
          "task": "Add auth\\nwith tests",
          "phases": [
            {"id": 1, "name": "Foundation", "agent": "architect", "parallel": false,
             "blocked_by": [], "files": ["src/a.ts"]},
            {"id": "two", "name": "Review", "agent": "code_reviewer", "parallel": true,
             "blocked_by": [1], "kind": "review", "files_created": ["r.md"],
             "files_modified": ["src/a.ts", "src/b.ts"], "files_deleted": ["old.ts"],
             "extra": "ignored, as Maestro does"}
          ]
        }
        """,
    )
    assert detected(path) == "maestro-json"
    plan = read(maestro_json, path)
    assert (plan.format, plan.title, plan.context) == (
        "maestro-json",
        "Add auth",
        "Add auth\nwith tests",
    )
    assert plan.phases == (
        Phase(id="1", name="Foundation", line=5, agent="architect", parallel=False,
              files=Files(modify=("src/a.ts",))),
        Phase(id="two", name="Review", line=7, agent="code_reviewer", parallel=True,
              blocked_by=("1",), tags=("review",),
              files=Files(create=("r.md",), modify=("src/a.ts", "src/b.ts"), delete=("old.ts",))),
    )  # fmt: skip


def test_maestro_bare_list_and_validate_plan_wrapper(tmp_path: Path) -> None:
    bare = tmp_path / "phases.json"
    bare.write_text(json.dumps([{"id": 1}, {"id": 2, "blocked_by": [1]}], indent=2))
    wrapped = tmp_path / "validate.json"
    wrapped.write_text(
        json.dumps({"plan": {"phases": [{"id": 1}]}, "task_complexity": "simple"}, indent=2)
    )
    assert detected(bare) == detected(wrapped) == "maestro-json"
    plan = read(maestro_json, bare)
    assert [(p.id, p.name, p.blocked_by, p.parallel, p.line) for p in plan.phases] == [
        ("1", "1", (), False, 2),
        ("2", "2", ("1",), False, 5),
    ]
    assert read(maestro_json, wrapped).phases[0].line == 4


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"phases": [{"id": 1, **MAESTRO_PHASE}]}, "maestro-json"),
        ({"phases": [{"id": 1, "agent": "coder"}]}, "native"),  # not all of Maestro's fields
        ({"phases": [{"id": 1, **MAESTRO_PHASE, "run": "make"}]}, "native"),
        ({"phases": [{"id": 1, **MAESTRO_PHASE, "files": {"create": ["a"]}}]}, "native"),
        ({"title": "t", "phases": [{"id": 1, **MAESTRO_PHASE}]}, "native"),
        ({"task": "t", "phases": [{"id": 1}]}, "maestro-json"),
        ({"phases": [{"id": 1, "kind": "review"}]}, "maestro-json"),
        ([{"id": 1, "run": "make"}], "native"),
        ([], "native"),
    ],
)
def test_maestro_detection_rule(tmp_path: Path, document: object, expected: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document))
    assert detected(path) == expected


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ({"name": "x"}, "phase #1 is missing required field 'id'"),
        (
            {"id": 0},
            "phase #1 field 'id' must be a phase id (an integer from 1, or a string), got 0",
        ),
        (
            {"id": 1, "blocked_by": "1"},
            "phase '1' field 'blocked_by' must be a list or null, got '1'",
        ),
        ({"id": 1, "files": [""]}, "phase '1' field 'files[0]' must not be empty"),
        (
            {"id": 1, "kind": "deploy"},
            "phase '1' field 'kind' must be one of 'implementation', 'review', 'revision', "
            "'verification', null, got 'deploy'",
        ),
    ],
)
def test_maestro_errors(tmp_path: Path, phase: dict[str, object], expected: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps([phase]))
    assert error_of(maestro_json, path) == f"{path}:1: {expected}"


# --- example plans ---------------------------------------------------------------------------


def test_example_design_plan_loads_as_a_diamond() -> None:
    plan = load_plan(EXAMPLES / "design-plan.json")
    assert plan.format == "design-v2"
    assert [(p.id, p.blocked_by) for p in plan.phases] == [
        ("0", ()),
        ("1", ("0",)),
        ("2", ("0",)),
        ("3", ("1", "2")),
    ]
    assert all(p.acceptance and p.assumptions and p.rollback_triggers for p in plan.phases)


def test_example_maestro_phases_load() -> None:
    plan = load_plan(EXAMPLES / "maestro-phases.json")
    assert plan.format == "maestro-json"
    assert plan.ids == ("1", "2", "3", "4")
    assert plan.phase("4").blocked_by == ("2", "3")
    assert plan.phase("2").files.modify == ("tests/test_slug.py",)
    assert [p.parallel for p in plan.phases] == [False, True, True, False]


# --- robustness: any input gives a plan or a PlanError, never another exception ---------------

_KEYS = ["id", "phases", "tasks", "schemaVersion", "blocked_by", "blockedBy", "files", "run"]
_KEYS += ["acceptance", "agent", "subject", "metadata", "x"]
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(_KEYS), children, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    document=_JSON_VALUES | st.text(max_size=60),
    name=st.sampled_from(["plan.json", "plan.yaml", "plan"]),
)
def test_readers_raise_only_plan_errors(
    tmp_path_factory: pytest.TempPathFactory, document: object, name: str
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / name
    if isinstance(document, str) and name != "plan.json":
        text = document
    else:
        text = json.dumps(document) if name.endswith("json") else yaml.safe_dump(document)
    path.write_text(text)
    for reader in (native, design_v2, maestro_json):
        try:
            plan = reader.read(Source(path, text))
        except PlanError as error:
            assert "\n" not in str(error)
        else:
            assert plan.phases and all(isinstance(p.id, str) for p in plan.phases)


# --- schema validation: fastjsonschema's verdict, jsonschema's errors ----------------------------
# A plan fastjsonschema passes must pass jsonschema: it is never asked to explain it. A plan
# fastjsonschema refuses must have a jsonschema error to show.

SHIPPED = {
    "native": native.schema(),
    "design-v2": design_v2._PLAN,
    "maestro-json": maestro_json._PHASES,
}


def agrees(schema: Any, instance: Any) -> bool:
    """Whether fastjsonschema and jsonschema give the same verdict (returned: the verdict)."""
    expected = Draft202012Validator(schema).is_valid(instance)
    assert SchemaValidator(schema).is_valid(instance) is expected, (schema, instance)
    return expected


KEYWORD_CASES: list[tuple[dict[str, Any], Any, bool]] = [
    ({"type": "integer"}, 2.0, True),  # JSON Schema counts 2.0 as an integer
    ({"type": "integer"}, 2.5, False),
    ({"type": "integer"}, True, False),  # a boolean is not a number here, unlike in Python
    ({"type": "number"}, False, False),
    ({"type": "number"}, 1, True),
    ({"type": ["string", "null"]}, None, True),
    ({"type": ["string", "null"]}, 0, False),
    ({"type": "object"}, [], False),
    ({"type": "array"}, {}, False),
    ({"type": "boolean"}, 0, False),
    ({"enum": [1, "a"]}, True, False),  # true is not 1
    ({"enum": [True]}, 1, False),
    ({"enum": [1]}, 1.0, True),
    ({"enum": ["blocking", None]}, None, True),
    ({"const": False}, 0, False),
    ({"const": "x"}, "x", True),
    ({"minLength": 2}, 5, True),  # string keywords ignore other types
    ({"minLength": 2}, "é", False),  # code points, not bytes
    ({"maxLength": 1}, "ab", False),
    ({"minimum": 0}, -1, False),
    ({"minimum": 0}, math.nan, True),  # NaN fails every comparison, so it breaks no bound
    ({"exclusiveMinimum": 0}, 0, False),
    ({"exclusiveMinimum": 0}, math.nan, True),
    ({"maximum": 3}, 3, True),
    ({"exclusiveMaximum": 3}, 3, False),
    ({"minimum": 0}, "-1", True),
    ({"required": ["id"]}, {"name": 1}, False),
    ({"required": ["id"]}, ["id"], True),  # object keywords ignore other types
    ({"minProperties": 1}, {}, False),
    ({"maxProperties": 1}, {"a": 1, "b": 2}, False),
    ({"properties": {"a": {"type": "string"}}}, {"a": 1}, False),
    ({"properties": {"a": {"type": "string"}}}, {"b": 1}, True),
    ({"properties": {"a": True}, "additionalProperties": False}, {"a": 1, "b": 2}, False),
    ({"additionalProperties": {"type": "integer"}}, {"a": 1, "b": "x"}, False),
    ({"additionalProperties": {"type": "integer"}}, {1: 2}, True),  # a YAML int key
    ({"items": {"type": "string"}}, ["a", 1], False),
    ({"items": False}, [], True),
    ({"items": False}, [1], False),
    ({"minItems": 1}, [], False),
    ({"maxItems": 1}, [1, 2], False),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1, True),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1.5, False),
    ({"anyOf": []}, 1, False),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1, False),  # both match
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1.5, True),
    ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "a", False),
    ({"not": {"type": "string"}}, "a", False),
    ({"$defs": {"n": {"type": "integer"}}, "items": {"$ref": "#/$defs/n"}}, [1, "x"], False),
    ({"$defs": {"a/b": {"type": "integer"}}, "$ref": "#/$defs/a~1b"}, 1, True),
    ({"title": "t", "description": "d", "x-expected": "anything"}, object(), True),
]


@pytest.mark.parametrize(("schema", "instance", "valid"), KEYWORD_CASES)
def test_fast_check_agrees_with_jsonschema(schema: Any, instance: Any, valid: bool) -> None:
    assert agrees(schema, instance) is valid


def test_a_valid_plan_never_reaches_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("jsonschema was consulted for a valid plan")

    validator = SchemaValidator(native.schema())  # a new one: nothing cached
    monkeypatch.setattr(jsonschema, "Draft202012Validator", refuse)
    assert list(validator.iter_errors({"phases": [{"id": "a", "run": "make"}]})) == []
    with pytest.raises(AssertionError, match="consulted"):
        list(validator.iter_errors({"phases": [{"id": "a", "run": 3}]}))


def test_a_schema_s_defaults_are_not_written_into_the_plan() -> None:
    validator = SchemaValidator({"properties": {"a": {"default": 1}}})
    data: dict[str, Any] = {}
    assert list(validator.iter_errors(data)) == [] and data == {}


# documents one mutation away from valid, for the readers' schemas

FULL_PHASE = {
    "id": "build",
    "name": "Build",
    "agent": "coder",
    "model": "fast",
    "blocked_by": ["setup", 2],
    "files": {"create": ["src/a.py"], "modify": ["src/b.py"], "delete": []},
    "reads": ["README.md"],
    "run": ["make"],
    "acceptance": ["it builds", {"criterion": "tests pass", "check": "make test"}, {"check": None}],
    "description": "Build it.",
    "prompt": "Carefully.",
    "parallel": False,
    "timeout": 1.5,
    "max_retries": 0,
    "estimate": 0,
    "tags": ["core"],
    "assumptions": [{"claim": "make exists", "verify": None, "severity": "warning"}],
    "fallback": "Ask.",
    "rollback_triggers": ["tests fail"],
    "constraints": ["no new dependencies"],
}
BASES = {
    "native": {"title": "t", "root": ".", "context": "c", "tags": [], "phases": [FULL_PHASE]},
    "design-v2": json.loads((EXAMPLES / "design-plan.json").read_text()),
    "maestro-json": json.loads((EXAMPLES / "maestro-phases.json").read_text())["phases"],
}

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.floats(allow_infinity=False)
    | st.sampled_from(["", "x", "blocking", "warning", "src/a.py", "2"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["create", "check", "claim", "id", "zz"]), children)
    ),
    max_leaves=6,
)


def _mutate(data: st.DataObject, document: Any) -> Any:
    """Replace, delete or add one value somewhere in ``document`` (a copy)."""
    document = copy.deepcopy(document)
    parent: Any = None
    key: Any = None
    node = document
    while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
        parent = node
        key = data.draw(
            st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))
        )
        node = node[key]
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if parent is None:
        return data.draw(_VALUES) if action == "replace" else document
    if action == "replace":
        parent[key] = data.draw(_VALUES)
    elif action == "delete":
        del parent[key]
    elif isinstance(parent, dict):
        parent[data.draw(st.sampled_from(["idd", "zz", "name", "files"]))] = data.draw(_VALUES)
    else:
        parent.append(data.draw(_VALUES))
    return document


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_unmutated_bases_are_valid(name: str) -> None:
    assert agrees(SHIPPED[name], BASES[name])


@pytest.mark.parametrize("name", sorted(SHIPPED))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fast_check_agrees_on_mutated_plans(name: str, data: st.DataObject) -> None:
    reference, fast = _shipped_validators(name)
    instance = _mutate(data, BASES[name])
    assert fast.is_valid(instance) is reference.is_valid(instance), (name, instance)


@functools.cache
def _shipped_validators(name: str) -> tuple[Any, SchemaValidator]:
    """jsonschema's and the fast validator of a shipped schema, each built once: compiling the
    schema took nine tenths of an example. A built validator keeps nothing of what it checked."""
    return Draft202012Validator(SHIPPED[name]), SchemaValidator(SHIPPED[name])


# --- JSON lines: the shallow index, the lazy full scan, duplicate keys -------------------------
# The shallow index and the lazy scan must give exactly the lines of the token-by-token scan.

_JSON_KEYS = st.text(alphabet='ab"\\\n é', max_size=3)
_JSON_DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(_JSON_KEYS, children, max_size=3)
    ),
    max_leaves=15,
)


@settings(max_examples=300, deadline=None)
@given(
    document=_JSON_DOCUMENTS,
    indent=st.sampled_from([None, 0, 1, 2, "\t"]),
    separators=st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\n ")]),
)
def test_shallow_lines_are_the_full_scan_for_the_top_two_levels(
    document: object, indent: int | str | None, separators: tuple[str, str]
) -> None:
    text = "\n " + json.dumps(document, indent=indent, separators=separators) + "\n"
    every, duplicate = scan_lines(text)
    assert duplicate is None
    assert shallow_lines(text, levels=2) == {at: n for at, n in every.items() if len(at) <= 2}


def test_document_lines_reach_deep_paths_on_demand(tmp_path: Path) -> None:
    text = json.dumps({"phases": [{"id": "a"}, {"id": "b", "files": {"create": ["x"]}}]}, indent=1)
    document = parse_json(Source(tmp_path / "plan.json", text))
    lines = text.split("\n")
    assert lines[document.lines[("phases", 1)] - 1].strip() == "{"
    assert '"create"' in lines[document.lines[("phases", 1, "files", "create")] - 1]
    assert (
        document.line_of(("phases", 1, "files", "create", 0, "nowhere"))
        == (document.lines[("phases", 1, "files", "create", 0)])
    )
    assert dict(document.lines) == scan_lines(text)[0]
    under = lines_under(document.lines, ("phases", 1))
    assert under[("files",)] == document.lines[("phases", 1, "files")]
    assert ("files", "create", 0) in set(under)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"phases": [{"id": "a"}],\n "phases": []}', ":2: duplicate key 'phases'"),
        (
            '{"phases": [{"id": "a", "files": {"create": [],\n"create": []}}]}',
            ":2: duplicate key 'phases[0].files.create'",
        ),
        ('[{"a": {"b": 1}}, {"a": {"b": 1,\n\n "b": 2}}]', ":3: duplicate key '[1].a.b'"),
    ],
)
def test_duplicate_keys_at_any_depth_are_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "plan.json"
    with pytest.raises(PlanError) as info:
        parse_json(Source(path, text))
    assert str(info.value) == f"{path}{expected}"


def test_equal_keys_in_different_objects_are_not_duplicates(tmp_path: Path) -> None:
    text = '{"phases": [{"id": "a", "run": "x"}, {"id": "b", "run": "y"}]}'
    assert parse_json(Source(tmp_path / "plan.json", text)).data["phases"][1]["id"] == "b"


def test_the_fast_check_inlines_definitions_but_not_a_recursive_one() -> None:
    """fastjsonschema makes each ``$ref`` a call that formats the item's path first: the fast
    check gets the definitions inlined, with the keywords beside a ``$ref`` still applied (as
    draft 2020-12 reads them), except one that refers to itself (it would never end)."""
    schema = {
        "$defs": {
            "id": {"type": "string", "minLength": 1},
            "tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}},
        },
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"$ref": "#/$defs/id", "x-expected": "an id"}},
            "one": {"$ref": "#/$defs/id", "maxLength": 3},
            "tree": {"$ref": "#/$defs/tree"},
        },
    }
    inlined = inline_refs(schema)["properties"]
    assert inlined["ids"]["items"] == {
        "allOf": [{"type": "string", "minLength": 1}],
        "x-expected": "an id",
    }
    assert inlined["one"] == {"allOf": [{"type": "string", "minLength": 1}], "maxLength": 3}
    assert inlined["tree"] == {"type": "array", "items": {"$ref": "#/$defs/tree"}}
    for instance in ({"ids": ["a", ""]}, {"one": "abcd"}, {"tree": [[], [[1]]]}, {"ids": ["a"]}):
        agrees(schema, instance)
