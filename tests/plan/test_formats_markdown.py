"""The Markdown plan readers (maestro-md, superpowers, tasklist, steps) on small fixture plans."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_maestro.plan import PlanError, detect_format, load_plan
from pytest_maestro.plan.formats import maestro_md, steps, superpowers, tasklist
from pytest_maestro.plan.formats import markdown as md
from pytest_maestro.plan.model import Check, Plan
from pytest_maestro.plan.source import Source

from ..helpers import REPO

MARKDOWN_READERS = (maestro_md, tasklist, steps, superpowers)
READER = {reader.NAME: reader for reader in MARKDOWN_READERS}
EXAMPLES = REPO / "example_plans"


def write(tmp_path: Path, text: str, name: str = "plan.md") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def load(tmp_path: Path, text: str) -> Plan:
    return load_plan(write(tmp_path, text))


def line_of(text: str, start: str) -> int:
    """The 1-based line of the fixture (as written to disk) that starts with ``start``."""
    lines = textwrap.dedent(text).lstrip("\n").split("\n")
    return next(n for n, line in enumerate(lines, 1) if line.startswith(start))


def deps(plan: Plan) -> dict[str, tuple[str, ...]]:
    return {phase.id: phase.blocked_by for phase in plan.phases}


def claimed_by(text: str) -> list[str]:
    return [
        reader.NAME for reader in MARKDOWN_READERS if reader.detect(Source(Path("plan.md"), text))
    ]


# --- maestro-md ------------------------------------------------------------------------------

MAESTRO = """
---
title: "Billing Export Implementation Plan"
status: "approved"
---

# Ignored heading title

## Plan Overview

Export invoices nightly.

## Phase 1: Schema

### Objective
Add the export table.

### Agent: builder
### Parallel: No

### Files to Create

- `db/export.sql` — the table
- `db/seed.py:10-20` — seed data

### Files to Modify

- `db/models.py:40-72` — the model

### Files to Delete

- `db/legacy_export.sql`

### Implementation Details

Use a partial index.

### Validation

- `python -m pytest tests/test_schema.py -q` passes
- The table has a primary key
- Verify `ExportRow` is exported
```bash
ruff check db
# a comment is not a command
```

### Dependencies

- Blocked by: None
- Blocks: 2

---

## Phase 2: Exporter

### Agent: builder
### Parallel: Yes

### Files to Create

- `billing/export.py`

### Dependencies

- Blocked by: 1

## Phase 3: Docs

### Agent: writer

### Dependencies

- Blocked by: Phase 1, Phase 2

## File Inventory

| # | File | Phase |
"""


def test_maestro_md_reads_every_part_of_a_phase(tmp_path: Path) -> None:
    plan = load(tmp_path, MAESTRO)
    assert plan.format == "maestro-md"
    assert plan.title == "Billing Export Implementation Plan"
    assert "Export invoices nightly." in plan.context
    first = plan.phase("1")
    assert (first.name, first.line, first.agent, first.parallel) == (
        "Schema",
        line_of(MAESTRO, "## Phase 1"),
        "builder",
        False,
    )
    assert first.files.create == ("db/export.sql", "db/seed.py")
    assert first.files.modify == ("db/models.py",)
    assert first.files.delete == ("db/legacy_export.sql",)
    assert first.acceptance == (
        Check(
            "`python -m pytest tests/test_schema.py -q` passes",
            "python -m pytest tests/test_schema.py -q",
        ),
        Check("The table has a primary key", None),
        Check("Verify `ExportRow` is exported", None),
        Check("ruff check db", "ruff check db"),
    )
    assert first.description.startswith("### Objective\nAdd the export table.")
    assert "Use a partial index." in first.description
    assert "Blocked by" not in first.description
    assert deps(plan) == {"1": (), "2": ("1",), "3": ("1", "2")}
    assert plan.phase("2").parallel is True
    assert plan.phase("3").agent == "writer"


def test_maestro_md_template_placeholders_count_as_not_filled_in(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        ## Phase 1: <Phase Name>

        ### Objective
        [Clear, measurable statement]

        ### Agent: <agent-name>
        ### Parallel: <Yes/No>

        ### Files to Create

        - `path/to/file` — [Purpose]

        ### Validation

        - [Commands to run and expected outcomes]

        ### Dependencies

        - Blocked by: [Phase IDs or "None"]
        """,
    )
    phase = plan.phase("1")
    assert (phase.name, phase.agent, phase.parallel, phase.blocked_by) == (
        "Phase 1",
        None,
        True,
        (),
    )
    assert phase.files.create == ("path/to/file",)
    assert phase.acceptance == ()


def test_maestro_md_bad_parallel_value_is_a_one_line_error(tmp_path: Path) -> None:
    path = write(tmp_path, "## Phase 4: Load\n\n### Agent: builder\n### Parallel: Maybe\n")
    with pytest.raises(PlanError) as raised:
        load_plan(path)
    message = str(raised.value)
    assert message == f"{path}:1: phase '4' '### Parallel:' must be Yes or No, not 'Maybe'"


def test_maestro_md_unreadable_dependency_names_the_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "## Phase 1: A\n\n### Agent: builder\n\n## Phase 2: B\n\n### Dependencies\n\n"
        "- Blocked by: the schema work\n",
    )
    with pytest.raises(PlanError, match=r":9: phase '2' cannot read the dependencies 'the schema"):
        load_plan(path)


def test_maestro_md_invalid_frontmatter_is_a_plan_error(tmp_path: Path) -> None:
    path = write(tmp_path, "---\ntitle: [unclosed\n---\n## Phase 1: A\n\n### Agent: builder\n")
    with pytest.raises(PlanError, match=r"plan\.md:\d+: invalid YAML frontmatter"):
        load_plan(path)


@pytest.mark.parametrize(
    ("front", "message"),
    [
        (
            "title: [unclosed",
            ":2: invalid YAML frontmatter: expected ',' or ']', but got '<stream end>'",
        ),
        (
            "\n\nstatus: ok\ntitle: a: b",
            ":5: invalid YAML frontmatter: mapping values are not allowed here",
        ),
        (
            "title: x\nnote: \x07",
            ":3: invalid YAML frontmatter: special characters are not allowed",
        ),
        ("a: " + "[" * 5000 + "]" * 5000, ":2: invalid YAML frontmatter: nested too deeply"),
    ],
)
def test_frontmatter_errors_name_the_line_of_the_file(
    tmp_path: Path, front: str, message: str
) -> None:
    path = tmp_path / "plan.md"
    path.write_text(f"---\n{front}\n---\n## Phase 1: A\n\n### Agent: builder\n")
    with pytest.raises(PlanError) as error:
        load_plan(path)
    assert str(error.value) == f"{path}{message}"


def test_frontmatter_title_and_the_context_after_it(tmp_path: Path) -> None:
    text = (
        "---\r\ntitle: Plan T\r\n---\r\n\r\nGoal text.\r\n\r\n## Phase 1: A\r\n\r\n### Agent: b\r\n"
    )
    path = tmp_path / "plan.md"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    plan = load_plan(path)
    assert (plan.title, plan.context) == ("Plan T", "Goal text.")
    # a rule that opens a document without a closing one is no frontmatter
    path.write_text("---\n\n# Heading\n\n## Phase 1: A\n\n### Agent: b\n")
    assert load_plan(path).title == "Heading"


# --- superpowers -----------------------------------------------------------------------------

SUPERPOWERS = """
# Feature Implementation Plan

**Goal:** Add a feature.

---

## Phase 1: Core

### Task 1: Parser

**Files:**
- Create: `src/parser.py`
- Modify: `src/cli.py:12-40`
- Test: `tests/test_parser.py`
- Reference: `docs/grammar.md` (lines 1-20)

**Step 1: Write the failing test**

Create `tests/test_parser.py` with one test.

**Step 2: Run test to verify it fails**

Run: `pytest tests/test_parser.py -v`
Expected: FAIL with "No module named parser"

**Step 3: Run test to verify it passes**

Run: `pytest tests/test_parser.py -v`
Expected: PASS

### Task 2: Printer

**Files:**
- Modify: `src/printer.py`
- Test: `tests/test_printer.py`

**Step 1: Add a test for the new layout**

**Step 2: Run it**

Run: `pytest tests/test_printer.py`
Expected: 3 passed

## Phase 2: Verification

### Task 3: Smoke test

**Files:**
- Test: `scripts/smoke.sh`

**Step 1: Run the smoke script**

Run:
```bash
bash scripts/smoke.sh
echo done
```
Expected: exits 0

## Success Criteria

- [ ] all done
"""


def test_superpowers_reads_tasks_under_groups(tmp_path: Path) -> None:
    plan = load(tmp_path, SUPERPOWERS)
    assert plan.format == "superpowers"
    assert plan.title == "Feature Implementation Plan"
    assert plan.context.startswith("**Goal:** Add a feature.")
    assert plan.ids == ("task-1", "task-2", "task-3")
    assert deps(plan) == {"task-1": (), "task-2": ("task-1",), "task-3": ("task-2",)}
    assert [p.tags for p in plan.phases] == [("phase-1",), ("phase-1",), ("phase-2",)]
    assert [p.line for p in plan.phases] == [
        line_of(SUPERPOWERS, f"### Task {n}:") for n in (1, 2, 3)
    ]
    parser = plan.phase("task-1")
    assert parser.name == "Parser"
    # the task says it creates the test file; line ranges are stripped
    assert parser.files.create == ("src/parser.py", "tests/test_parser.py")
    assert parser.files.modify == ("src/cli.py",)
    assert parser.reads == ("docs/grammar.md",)
    assert "Create `tests/test_parser.py` with one test." in parser.description


def test_superpowers_test_file_roles(tmp_path: Path) -> None:
    plan = load(tmp_path, SUPERPOWERS)
    # a task that writes tests modifies its test file; a task that only runs one reads it
    assert plan.phase("task-2").files.modify == ("src/printer.py", "tests/test_printer.py")
    assert plan.phase("task-3").files.all() == ()
    assert plan.phase("task-3").reads == ("scripts/smoke.sh",)


def test_superpowers_only_passing_runs_are_checks(tmp_path: Path) -> None:
    plan = load(tmp_path, SUPERPOWERS)
    # the FAIL run is a TDD red step; the same command expected to PASS is the check, once
    assert [c.check for c in plan.phase("task-1").acceptance] == ["pytest tests/test_parser.py -v"]
    assert plan.phase("task-1").acceptance[0].criterion.endswith("expected: PASS")
    assert [c.check for c in plan.phase("task-2").acceptance] == ["pytest tests/test_printer.py"]
    assert [c.check for c in plan.phase("task-3").acceptance] == [
        "bash scripts/smoke.sh\necho done"
    ]


def test_superpowers_last_task_ends_at_a_closing_section(tmp_path: Path) -> None:
    plan = load(tmp_path, SUPERPOWERS)
    assert "Success Criteria" not in plan.phase("task-3").description


def test_superpowers_repeated_numbers_are_qualified_by_group(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        # Plan

        ## Chunk 1: Storage

        ### Task 1: Tables
        ### Task 2: Queries

        ## Chunk 2: API

        ### Task 1: Routes
        """,
    )
    assert plan.ids == ("task-1.1", "task-1.2", "task-2.1")
    assert deps(plan)["task-2.1"] == ("task-1.2",)
    assert plan.phase("task-2.1").tags == ("chunk-2",)


def test_superpowers_level_two_tasks_without_groups(tmp_path: Path) -> None:
    plan = load(tmp_path, "# Plan\n\n## Task 1: One\n\nDo it.\n\n## Task 2 — Two\n\nThen this.\n")
    assert plan.format == "superpowers"
    assert [(p.id, p.name, p.tags) for p in plan.phases] == [
        ("task-1", "One", ()),
        ("task-2", "Two", ()),
    ]
    assert plan.phase("task-1").description == "Do it."


@pytest.mark.parametrize(
    ("expected", "passes"),
    [
        ("PASS", True),
        ("All tests pass", True),
        ("5 passed, 0 failed", True),
        ("No output (success)", True),
        ("exits with code 0", True),
        ("FAIL with ImportError", False),
        ("Test FAILS because the function is missing", False),
        ("fails: module not found", False),
        ("The test should fail", False),
        ("File exists", False),
        ("Shows list of skills", False),
        ("", False),
    ],
)
def test_expected_text_that_says_the_command_passes(expected: str, passes: bool) -> None:
    assert md.says_passes(expected) is passes


# --- tasklist --------------------------------------------------------------------------------

TASKLIST = """
# Tasks: Sample

## Task Format

```
### T[NNN]: [Task Title]
**Depends**: T[NNN]
```

## Phase 1: Setup

### T001: Create package
**File(s)**: `pkg/__init__.py`
**Type**: Create
**Depends**: None
**Acceptance**:
- [x] Package imports
- [ ] `python -m pytest tests/test_pkg.py -q` passes
- [ ] `Config` passes validation

### T002: Remove legacy module
**File(s)**: `pkg/legacy.py`, `pkg/legacy_utils.py`
**Type**: Delete
**Depends on:** T001
**Acceptance**:
- [ ] `grep -r legacy pkg` returns nothing

## Phase 2: Features

### T003: Wire config
**File(s)**: `pkg/config.py:10-30`

### T004: Release
**File(s)**: `CHANGELOG.md`
**Type**: Modify (changelog)
**Depends**: T001..T003
"""


def test_tasklist_reads_fields_and_dependencies(tmp_path: Path) -> None:
    plan = load(tmp_path, TASKLIST)
    assert plan.format == "tasklist"
    assert plan.ids == ("T001", "T002", "T003", "T004")
    # T003 has no Depends field: it follows the task written before it
    assert deps(plan) == {
        "T001": (),
        "T002": ("T001",),
        "T003": ("T002",),
        "T004": ("T001", "T002", "T003"),
    }
    assert plan.phase("T001").files.create == ("pkg/__init__.py",)
    assert plan.phase("T002").files.delete == ("pkg/legacy.py", "pkg/legacy_utils.py")
    assert plan.phase("T003").files.modify == ("pkg/config.py",)  # no Type: modify
    assert plan.phase("T004").files.modify == ("CHANGELOG.md",)
    assert [p.tags for p in plan.phases] == [("phase-1",), ("phase-1",), ("phase-2",), ("phase-2",)]
    assert [p.line for p in plan.phases] == [line_of(TASKLIST, f"### T00{n}") for n in range(1, 5)]


def test_tasklist_ids_in_other_digits_range_as_written(tmp_path: Path) -> None:
    """A range written in another script's digits names its tasks in those digits, as their
    headings do; one that mixes scripts is no range, and says so rather than guess."""
    arabic = "".join(chr(0x0660 + n) for n in range(10))
    ids = [f"T00{n}".translate(str.maketrans("0123456789", arabic)) for n in range(1, 5)]
    text = "# Tasks\n\n" + "".join(f"### {i}: Task {n}\n\n" for n, i in enumerate(ids, 1))
    text = text.replace("Task 4\n\n", f"Task 4\n**Depends**: {ids[0]}..{ids[2]}\n\n")
    assert deps(load(tmp_path, text))[ids[3]] == tuple(ids[:3])
    mixed = text.replace(f"{ids[0]}..{ids[2]}", f"T001..{ids[2]}")
    with pytest.raises(PlanError, match="T001"):
        load(tmp_path, mixed)


def test_tasklist_acceptance_criteria_are_prose_unless_a_command_passes(tmp_path: Path) -> None:
    plan = load(tmp_path, TASKLIST)
    assert plan.phase("T001").acceptance == (
        Check("Package imports", None),
        Check(
            "`python -m pytest tests/test_pkg.py -q` passes",
            "python -m pytest tests/test_pkg.py -q",
        ),
        Check("`Config` passes validation", None),
    )
    # a command whose criterion is not "it passes" stays prose: exit 0 would not prove it
    assert plan.phase("T002").acceptance == (Check("`grep -r legacy pkg` returns nothing", None),)


def test_tasklist_format_example_in_a_code_fence_is_not_a_task(tmp_path: Path) -> None:
    fenced_only = "# Tasks\n\n```\n### T001: Example\n**Depends**: None\n```\n"
    assert claimed_by(fenced_only) == []
    plan = load(tmp_path, TASKLIST)
    assert "T[NNN]" not in plan.ids
    assert "### T[NNN]: [Task Title]" in plan.context


def test_tasklist_bulleted_fields(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        ### T010: One
        - **Files**: `a.py`
        - **Agent**: `tester`
        - **Type**: Create
        - **Acceptance**:
          - [ ] `make check` succeeds
          - [ ] Reviewed
        - **Depends**: None

        ### T011: Two
        - **Depends**: T010
        """,
    )
    assert plan.phase("T010").files.create == ("a.py",)
    assert [p.agent for p in plan.phases] == ["tester", None]
    assert [c.check for c in plan.phase("T010").acceptance] == ["make check", None]
    assert deps(plan) == {"T010": (), "T011": ("T010",)}


def test_tasklist_unreadable_dependency_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "### T001: One\n**Depends**: the database task\n")
    with pytest.raises(PlanError, match=r"plan\.md:2: phase 'T001' cannot read the dependencies"):
        load_plan(path)


# --- steps -----------------------------------------------------------------------------------

STEPS = """
# Implementation Plan

## 6. Step-by-Step Implementation Strategy

### Phase 1: Types
*   [ ] **Step 1**: Create the types module.
    *   **Intent**: Types first.
    *   **Depends**: None
    *   **Files**: `src/types.ts`
    *   **Verification**: `npx tsc --noEmit`
*   [ ] **Step 2**: Parser.
    *   **Depends**: Step 1
    *   **Files**: `src/parser.ts:1-80`, `src/parser.test.ts` (new)
    *   **Verification**: Test fails as expected.

### Phase 2: Wiring
*   [x] **Step 3**: Renderer.
    *   **Files**: `src/renderer.ts`
*   [ ] **Step 4**: Wire it up.
    *   **Depends**: Step 2, Step 3
    *   **Files**: (none — verification only)
    *   **Verification**:
        *   `npm test` passes
        *   The demo renders

## 10. Final Verification Checklist
*   [ ] **Linter**: `npm run lint` pass?
"""


def test_steps_reads_step_bullets_and_their_fields(tmp_path: Path) -> None:
    plan = load(tmp_path, STEPS)
    assert plan.format == "steps"
    assert plan.ids == ("step-1", "step-2", "step-3", "step-4")
    # Step 3 declares no Depends: it follows the step written before it
    assert deps(plan) == {
        "step-1": (),
        "step-2": ("step-1",),
        "step-3": ("step-2",),
        "step-4": ("step-2", "step-3"),
    }
    assert [p.line for p in plan.phases] == [
        line_of(STEPS, f"*   [{' x'[n == 3]}] **Step {n}**") for n in range(1, 5)
    ]
    assert [p.tags for p in plan.phases] == [("phase-1",), ("phase-1",), ("phase-2",), ("phase-2",)]
    assert plan.phase("step-1").files.create == ("src/types.ts",)  # the action says Create
    assert plan.phase("step-2").files.modify == ("src/parser.ts",)
    assert plan.phase("step-2").files.create == ("src/parser.test.ts",)  # marked (new)
    assert plan.phase("step-4").files.all() == ()
    assert plan.phase("step-1").name == "Create the types module."
    assert "**Intent**: Types first." in plan.phase("step-1").description


def test_steps_verification_commands_and_prose(tmp_path: Path) -> None:
    plan = load(tmp_path, STEPS)
    assert plan.phase("step-1").acceptance == (Check("`npx tsc --noEmit`", "npx tsc --noEmit"),)
    assert plan.phase("step-2").acceptance == (Check("Test fails as expected.", None),)
    assert plan.phase("step-3").acceptance == ()
    assert plan.phase("step-4").acceptance == (
        Check("`npm test` passes", "npm test"),
        Check("The demo renders", None),
    )


def test_steps_slash_ids_become_dotted(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        ### Section 1: Core
        *   [ ] **1/1**: Model.
            *   **Depends**: None
            *   **Files**: `m.py`
        *   [ ] **1/2**: View.
            *   **Agent**: builder
            *   **Files**: `v.py`
        ### Section 2: Glue
        *   [ ] **2/1**: Controller.
            *   **Depends**: 1/1, 1/2
            *   **Files**: `c.py`
        """,
    )
    assert plan.ids == ("1.1", "1.2", "2.1")
    assert [p.agent for p in plan.phases] == [None, "builder", None]
    assert deps(plan) == {"1.1": (), "1.2": ("1.1",), "2.1": ("1.1", "1.2")}
    assert plan.phase("2.1").tags == ("section-2",)


def test_steps_parallel_handoff_example(tmp_path: Path) -> None:
    """A parallel hand-off plan: two independent chains of steps, each depending on the last."""
    plan = load(
        tmp_path,
        """
        - [ ] **Step 1**: Login form.
          - **Depends**: None
          - **Files**: `src/auth/login.ts`
        - [ ] **Step 2**: Login test.
          - **Depends**: Step 1
          - **Files**: `src/auth/login.test.ts`
        - [ ] **Step 3**: Login errors.
          - **Depends**: Step 2
          - **Files**: `src/auth/login.ts`, `src/auth/login.test.ts`
        - [ ] **Step 4**: Register form.
          - **Depends**: None
          - **Files**: `src/auth/register.ts`
        - [ ] **Step 5**: Register test.
          - **Depends**: Step 4
          - **Files**: `src/auth/register.ts`, `src/auth/register.test.ts`
        """,
    )
    assert deps(plan) == {
        "step-1": (),
        "step-2": ("step-1",),
        "step-3": ("step-2",),
        "step-4": (),
        "step-5": ("step-4",),
    }
    chunk_a = set().union(*(plan.phase(f"step-{n}").files.writes for n in (1, 2, 3)))
    chunk_b = set().union(*(plan.phase(f"step-{n}").files.writes for n in (4, 5)))
    assert chunk_a == {"src/auth/login.ts", "src/auth/login.test.ts"}
    assert chunk_b == {"src/auth/register.ts", "src/auth/register.test.ts"}


def test_steps_does_not_claim_superpowers_checkbox_steps() -> None:
    text = "### Task 1: Parser\n\n- [ ] **Step 1:** Write the failing test\n"
    assert claimed_by(text) == ["superpowers"]


# --- every reader ----------------------------------------------------------------------------

FIXTURES = {
    "maestro-md": MAESTRO,
    "superpowers": SUPERPOWERS,
    "tasklist": TASKLIST,
    "steps": STEPS,
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_fixture_is_claimed_by_exactly_its_reader(name: str) -> None:
    assert claimed_by(textwrap.dedent(FIXTURES[name])) == [name]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_crlf_and_bom_read_like_plain_text(tmp_path: Path, name: str) -> None:
    text = textwrap.dedent(FIXTURES[name]).lstrip("\n")
    plain = tmp_path / "plain.md"
    plain.write_text(text, encoding="utf-8")
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    expected, actual = load_plan(plain), load_plan(crlf)
    assert actual.format == name
    assert actual.phases == expected.phases
    assert (actual.title, actual.context) == (expected.title, expected.context)
    # the readers also cope with raw text that did not go through read_text
    raw = "\ufeff" + text.replace("\n", "\r\n")
    assert [p.blocked_by for p in READER[name].read(Source(crlf, raw)).phases] == [
        p.blocked_by for p in expected.phases
    ]


@pytest.mark.parametrize(
    ("text", "phase_id", "name", "path"),
    [
        (
            "## Phase 1: Überarbeitung — café\n\n### Agent: builder\n\n### Files to Create\n\n"
            "- `docs/résumé.md`\n",
            "1",
            "Überarbeitung — café",
            "docs/résumé.md",
        ),
        (
            "### Task 1: 日本語のタスク\n\n**Files:**\n- Create: `文書/説明.md`\n",
            "task-1",
            "日本語のタスク",
            "文書/説明.md",
        ),
        (
            "### T001: Ñandú\n**File(s)**: `src/ñandú.py`\n**Type**: Create\n",
            "T001",
            "Ñandú",
            "src/ñandú.py",
        ),
        (
            "- [ ] **Step 1**: Créer le module\n  - **Files**: `src/é.py`\n",
            "step-1",
            "Créer le module",
            "src/é.py",
        ),
    ],
)
def test_non_ascii_text_is_kept(
    tmp_path: Path, text: str, phase_id: str, name: str, path: str
) -> None:
    plan = load(tmp_path, text)
    assert plan.phase(phase_id).name == name
    assert plan.phase(phase_id).files.all() == (path,)


@pytest.mark.parametrize(
    "text",
    [
        "# Notes\n\nJust prose, with a list:\n\n- one\n- two\n",
        "# Design\n\n## Phase 1: Context\n\nPhases of a skill, not of a plan.\n",
        "```markdown\n## Phase 1: X\n### Agent: builder\n### Task 1: Y\n- [ ] **Step 1**: Z\n```\n",
        "### Step 1: Setup\n\n**Step 2: Run**\n",
    ],
)
def test_documents_without_phases_are_refused(tmp_path: Path, text: str) -> None:
    assert claimed_by(text) == []
    path = write(tmp_path, text)
    with pytest.raises(PlanError) as raised:
        load_plan(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: no phases found")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ("src/app.py:12-40", "src/app.py"),
        ("src/app.py:7", "src/app.py"),
        ("src/app.py#L3-L9", "src/app.py"),
        ("'src/app.py'", "src/app.py"),
        ("<path>", None),
        ("None", None),
        ("two words", None),
    ],
)
def test_clean_path(raw: str, path: str | None) -> None:
    assert md.clean_path(raw) == path


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("`npm test` passes", "npm test"),
        ("`pytest`", "pytest"),
        ("Run `tox`", "tox"),
        ("All pass: `python -m pytest -q`", "python -m pytest -q"),
        ("`./scripts/check.sh`", "./scripts/check.sh"),
        ("Verify `UserService` is exported", None),
        ("The table has a key", None),
    ],
)
def test_command_in_verification_text(text: str, command: str | None) -> None:
    assert md.command_in(text) == command


_label = st.text(st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=60, deadline=None)
@given(number=st.from_regex(r"[0-9]{1,3}(/[0-9]{1,2})?", fullmatch=True), title=_label)
def test_phase_ids_are_safe_node_ids(number: str, title: str) -> None:
    title = title.replace("\n", " ").replace("\r", " ")
    documents = [
        f"## Phase {number.replace('/', '.')}: {title}\n\n### Agent: builder\n",
        f"### Task {number.split('/')[0]}: {title}\n",
        f"### T{number.split('/')[0]}: {title}\n",
        f"- [ ] **{number}**: {title}\n",
        f"- [ ] **Step {number.split('/')[0]}**: {title}\n",
    ]
    for text in documents:
        for reader in MARKDOWN_READERS:
            source = Source(Path("p.md"), text)
            if not reader.detect(source):
                continue
            for phase in reader.read(source).phases:
                assert phase.id
                assert "::" not in phase.id
                assert "[" not in phase.id
                assert "]" not in phase.id
                assert "/" not in phase.id


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "## Phase 1: A",
                "### Agent: builder",
                "### Dependencies",
                "- Blocked by: 1",
                "### Task 2: B",
                "**Files:**",
                "- Create: `a.py:1-2`",
                "Run: `pytest`",
                "Expected: PASS",
                "### T003: C",
                "**Depends**: T003",
                "**Acceptance**:",
                "- [ ] ok",
                "- [ ] **Step 1**: D",
                "  - **Depends**: Step 1",
                "```",
                "",
                "text `x`",
            ]
        ),
        max_size=25,
    )
)
def test_readers_fail_only_with_plan_errors(lines: list[str]) -> None:
    text = "\n".join(lines)
    for reader in MARKDOWN_READERS:
        source = Source(Path("p.md"), text)
        if reader.detect(source):
            try:
                reader.read(source)
            except PlanError as error:
                assert "\n" not in str(error)


# --- example plans ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "format", "count"),
    [
        ("maestro-plan.md", "maestro-md", 5),
        ("superpowers-plan.md", "superpowers", 4),
        ("tasklist.md", "tasklist", 5),
        ("steps.md", "steps", 5),
    ],
)
def test_example_plans_load(name: str, format: str, count: int) -> None:
    path = EXAMPLES / name
    assert detect_format(Source.read(path)) == format
    plan = load_plan(path)
    assert len(plan.phases) == count
    assert plan.warnings == ()
    assert any(check.check for phase in plan.phases for check in phase.acceptance)


def test_example_plans_dependencies() -> None:
    assert deps(load_plan(EXAMPLES / "maestro-plan.md")) == {
        "1": (),
        "2": ("1",),
        "3": ("1",),
        "4": ("2", "3"),
        "5": ("3",),
    }
    assert deps(load_plan(EXAMPLES / "tasklist.md"))["T004"] == ("T002", "T003")
    assert deps(load_plan(EXAMPLES / "steps.md"))["3.1"] == ("2.1", "2.2")
    assert deps(load_plan(EXAMPLES / "superpowers-plan.md"))["task-4"] == ("task-3",)


def test_a_source_splits_its_lines_once_for_every_reader() -> None:
    # every reader's detect, then the chosen one's read, gets the same Source and its one split;
    # another Source, even of an equal text, splits anew, so nothing is shared between files.
    source = Source(Path("p.md"), "# T\r\n```\n### Task 1: x\n```\nafter\n")
    assert source.lines is source.lines
    assert [(line.text, line.in_fence) for line in source.lines] == [
        ("# T", False),
        ("```", True),
        ("### Task 1: x", True),
        ("```", True),
        ("after", False),
        ("", False),
    ]
    other = Source(Path("p.md"), "".join(list(source.text)))
    assert other.lines == source.lines and other.lines is not source.lines


# --- shapes seen in real plans ---------------------------------------------------------------


def test_maestro_md_bracketed_dependency_lists(tmp_path: Path) -> None:
    # Maestro plans write "- Blocked by: [2]"; a bracketed list of ids is not a placeholder.
    plan = load(
        tmp_path,
        """
        ## Phase 1: Features
        ### Agent: `data_engineer`
        ### Dependencies
        - Blocked by: None
        - Blocks: [2]

        ## Phase 2: Splits
        ### Agent: `data_engineer`
        ### Dependencies
        - Blocked by: [1]

        ## Phase 3: Review
        ### Agent: `code_reviewer`
        ### Dependencies
        - Blocked by: [1, 2]
        """,
    )
    assert deps(plan) == {"1": (), "2": ("1",), "3": ("1", "2")}


@pytest.mark.parametrize(
    ("text", "placeholder"),
    [
        ("[2]", False),
        ("[4, 5]", False),
        ("[T001, T002]", False),
        ("[Phase 1, Phase 2]", False),
        ('[Phase IDs or "None"]', True),
        ("[Critical Item 1]", True),
        ("<agent-name>", True),
    ],
)
def test_bracketed_id_lists_are_not_placeholders(text: str, placeholder: bool) -> None:
    assert md.is_placeholder(text) is placeholder


def test_tasklist_bare_paths_separated_by_semicolons(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        ### T001: Recover stopped runs
        **File(s)**: scripts/run.mjs; scripts/status.mjs as needed; existing helpers in src/.
        **Type**: Modify
        **Depends**: None

        ### T002: Publish
        **File(s)**: CHANGELOG.md; VERSION; a smoke fixture when the verify stage requires it.
        **Type**: Modify
        **Depends**: T001
        """,
    )
    files = {phase.id: phase.files.modify for phase in plan.phases}
    assert files == {
        "T001": ("scripts/run.mjs", "scripts/status.mjs"),
        "T002": ("CHANGELOG.md", "VERSION"),
    }


@pytest.mark.parametrize(
    ("value", "paths"),
    [
        ("src/a.py, src/b.py", ["src/a.py", "src/b.py"]),
        ("src/a.py; src/b.py as applicable", ["src/a.py", "src/b.py"]),
        ("Dockerfile (new), Makefile", ["Dockerfile", "Makefile"]),
        ("existing affected command tests", []),
        ("`src/a.py` and `src/b.py`", ["src/a.py", "src/b.py"]),
    ],
)
def test_paths_in_values(value: str, paths: list[str]) -> None:
    assert md.paths_in(value) == paths


def test_superpowers_run_lines_share_the_expected_below_them(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        ### Task 1: Harden the lookup

        **Files:**
        - Modify: `src/lookup.ts`

        - [x] **Step 1: Verify RED**

        Run: `npm test -- src/lookup.test.ts`

        Expected: FAIL because the projection is not exported.

        - [x] **Step 2: Verify and deliver**

        Run: `npm test`

        Run: `npx tsc --noEmit`

        Expected: all commands exit zero.

        - [x] **Step 3: Look at it**

        Run: `npm run dev`
        Open the page and check it by eye.

        Run: `npm run lint`
        Expected: PASS
        """,
    )
    checks = [check.check for check in plan.phases[0].acceptance]
    assert checks == ["npm test", "npx tsc --noEmit", "npm run lint"]


@pytest.mark.parametrize(
    ("expected", "passes"),
    [("all commands exit zero.", True), ("exits with code 0", True), ("exit 1", False)],
)
def test_expected_exit_zero_passes(expected: str, passes: bool) -> None:
    assert md.says_passes(expected) is passes


def test_superpowers_file_role_stops_where_the_prose_begins(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        ### Task 1: Publish the site

        **Files:**
        - Modify: `.gitignore` only if generated `out/` or credentials are not already excluded.
        - Create: `scripts/export.mjs`, `scripts/check.mjs` (new)
        - Modify: `src/app/page.tsx:1-5` (add import of `HeroAnimation`)
        """,
    )
    files = plan.phases[0].files
    assert files.modify == (".gitignore", "src/app/page.tsx")
    assert files.create == ("scripts/export.mjs", "scripts/check.mjs")


def test_tasklist_verify_type_reads_its_files(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        ### T001: Regenerate docs
        **File(s)**: `man/app.1`
        **Type**: Modify / Verify
        **Depends**: None

        ### T002: Smoke test in a real browser
        **File(s)**: `tests/fixtures/frames.html`
        **Type**: Verify (no file changes expected)
        **Depends**: T001
        """,
    )
    first, second = plan.phases
    assert (first.files.modify, first.reads) == (("man/app.1",), ())
    assert (second.files.modify, second.reads) == ((), ("tests/fixtures/frames.html",))


def test_steps_numbered_anew_under_each_phase_heading(tmp_path: Path) -> None:
    plan = load(
        tmp_path,
        """
        # Test migration

        ### Phase 1: Baseline
        *   [ ] **Step 1**: Collect the sample documents.
        *   [ ] **Step 2**: Run the legacy tool on them.

        ### Phase 2: Port
        *   [ ] **Step 1**: Port the geometry helpers.
            *   **Depends**: None
        *   [ ] **Step 2**: Test the helpers.
            *   **Depends**: Step 1
        """,
    )
    assert deps(plan) == {
        "step-1.1": (),
        "step-1.2": ("step-1.1",),
        "step-2.1": (),
        "step-2.2": ("step-2.1",),
    }


def test_a_maestro_phase_with_several_agents(tmp_path: Path) -> None:
    """``### Agent: coder, tester`` was refused as one unknown agent named "coder, tester"."""
    plan = load(
        tmp_path,
        """
        # Plan

        ## Phase 1: Build

        ### Agent: coder, tester

        ### Files to Create
        - `src/a.py`
        """,
    )
    phase = plan.phase("1")
    assert phase.agent == "coder"
    assert phase.constraints == ("This phase is shared with tester: leave their part to them.",)


def test_step_headings_with_depends_lines(tmp_path: Path) -> None:
    text = """
        # Plan

        ## Phase 1: Base

        ### Step 1: Create the module

        **Files**: `src/a.py` (new)
        **Verification**: `python -m pytest tests` passes

        ### Step 2: Wire it

        **Depends**: Step 1
        **Files**:
        - `src/b.py`

        ### Step 3: Docs

        **Depends**: None
        """
    plan = load(tmp_path, text)
    assert plan.format == "steps"
    assert deps(plan) == {"step-1": (), "step-2": ("step-1",), "step-3": ()}
    assert plan.phase("step-2").line == line_of(text, "### Step 2")
    assert plan.phase("step-2").files.modify == ("src/b.py",)
    assert plan.phase("step-1").files.create == ("src/a.py",)
    assert plan.phase("step-1").acceptance[0].check == "python -m pytest tests"
    assert plan.phase("step-3").tags == ("phase-1",)
