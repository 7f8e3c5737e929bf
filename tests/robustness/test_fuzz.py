"""Every plan reader, fed arbitrary text, arbitrary documents and mutated example plans, returns a
plan or raises ``PlanError`` with one line naming the file: never another exception, and never
slowly (each example has a deadline).

Only the public entry point is called, ``load_plan(path, format)``, once per format name and once
with the format detected. A plan that comes back is checked as validation promises: ids unique
and valid, every dependency a known phase other than itself.
"""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_maestro.numbers import WEEK
from pytest_maestro.plan import FORMAT_NAMES, Plan, PlanError, load_plan

from ..helpers import REPO

EXAMPLES = sorted((REPO / "example_plans").iterdir())
FORMATS: tuple[str | None, ...] = (None, *FORMAT_NAMES)
SUFFIXES = (".yaml", ".yml", ".json", ".md", ".txt", "")
_BAD_ID = re.compile(r"::|\[|\]|^\s|\s$")
SCALE = 1  # examples are tuned for about 10 s in all; raise this to search longer by hand


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples * SCALE,
        deadline=timedelta(milliseconds=500),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for path in EXAMPLES:  # every reader imported and warm before the first deadline
        read_every_way(path)
    return tmp_path_factory.mktemp("fuzz")


def read(path: Path, format: str | None) -> Plan | None:
    """The plan, or None after a proper PlanError; anything else fails the example."""
    try:
        plan = load_plan(path, format)
    except PlanError as error:
        text = str(error)
        assert len(text.splitlines()) == 1, text
        assert text.startswith(f"{path}:"), text
        return None
    assert isinstance(plan, Plan)
    ids = [phase.id for phase in plan.phases]
    assert ids and len(set(ids)) == len(ids), ids
    for phase in plan.phases:
        assert not _BAD_ID.search(phase.id), phase.id
        assert set(phase.blocked_by) <= set(ids) - {phase.id}, phase
        for number in (phase.timeout, phase.estimate, phase.budget_usd, phase.max_retries):
            assert number is None or (math.isfinite(number) and 0 <= number <= WEEK), phase
        texts = (*phase.run, *phase.files.all(), *phase.reads, phase.model or "")
        assert not any("\x00" in text for text in texts), phase
    assert "\x00" not in (plan.root or "")
    return plan


def read_every_way(path: Path) -> None:
    for format in FORMATS:
        read(path, format)


def write(directory: Path, suffix: str, content: str | bytes) -> Path:
    path = directory / f"plan{suffix}"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8", "surrogatepass"))
    return path


# -- arbitrary text ---------------------------------------------------------------------------

# Pieces of every format, so that random text also reaches the structure the readers look for.
_PIECES = [
    "\n",
    "  ",
    "- ",
    "* ",
    "1. ",
    "[ ] ",
    "# ",
    "## ",
    "### ",
    "## Phase 1: ",
    "## Phase 2",
    "### Agent: builder",
    "### Parallel: Yes",
    "### Files to Create",
    "### Dependencies",
    "- Blocked by: 1",
    "### T001: ",
    "### T002: ",
    "**Depends**: T001",
    "**File(s)**: ",
    "**Type**: Create",
    "**Acceptance**:",
    "### Task 1: ",
    "### Task 2: ",
    "**Files:**",
    "- Create: ",
    "Run: ",
    "Expected: PASS",
    "### Section 1: ",
    "**1/1**: ",
    "**1/2**: ",
    "**Depends**: 1/1",
    "**Files**: ",
    "**Verification**: ",
    "`a.py`",
    "`",
    "```",
    "```bash",
    "---",
    "phases:",
    "  - id: a",
    "    blocked_by: [a]",
    "    files: {create: [x]}",
    "    run: [true]",
    '{"phases": [',
    '{"id": 1, "name": "x", "agent": "a", "parallel": true, "blocked_by": []}',
    '{"schemaVersion": 2, "tasks": [{"subject": "s", "blockedBy": [0]}]}',
    "]}",
    "::",
    "..",
    "/",
    "&a",
    "*a",
    "!!",
    "\ufeff",
    "\r\n",
    "\x00",
    "2001-02-03",
    "\u2028",
    "\x85",
    "T1-T1000",
    "T001..T003",
    "Phase 1.1.1",
    ".nan",
    ".inf",
    "<<: *a",
    "? ",
    "!!binary ",
    "!!set ",
    "1:20:30",
    "0x1F",
    "~",
    "null",
    "NaN",
    "1e999",
    '"\\ud800"',
    # spec-kit, Kiro / cc-sdd / OpenSpec, Taskmaster, and what the CommonMark parser decides
    "- [ ] T001 ",
    "- [x] T002 [P] ",
    "[US1] ",
    "(depends on T001)",
    "T001 blocks T002",
    "**Checkpoint**: ",
    "- [ ] 1. ",
    "- [ ] 1.1 (P) ",
    "- [ ]* 1.2 ",
    "  - [~] 1.1.1 ",
    "  - _Depends: 1.1_",
    "  - Observable: `true`",
    "## 1. ",
    "### Step 1: ",
    "### Agent: coder, tester",
    "<!--",
    "-->",
    "<details>",
    "===",
    "    ",
    '{"master": {"tasks": [',
    '{"id": 1, "title": "t", "dependencies": [1], "subtasks": [',
    '{"id": 1, "dependencies": ["1.1", 2]}]}',
]
# Pieces that break a reader today, each with its test below: add them above once it passes.
KNOWN_BREAKERS = ["0000-00-00", "2001-02-30", "9" * 4400, '{"\\u000b": 1}']
plan_like_text = st.lists(st.sampled_from(_PIECES) | st.text(max_size=6), max_size=40).map("".join)


@fuzz(300)
@given(text=st.text(max_size=300) | plan_like_text, suffix=st.sampled_from(SUFFIXES))
def test_arbitrary_text_gives_a_plan_or_a_plan_error(scratch: Path, text: str, suffix: str) -> None:
    read_every_way(write(scratch, suffix, text))


@fuzz(100)
@given(data=st.binary(max_size=300), suffix=st.sampled_from(SUFFIXES))
def test_arbitrary_bytes_give_a_plan_or_a_plan_error(
    scratch: Path, data: bytes, suffix: str
) -> None:
    read_every_way(write(scratch, suffix, data))


# -- arbitrary documents ----------------------------------------------------------------------

_FIELDS = [
    "phases",
    "tasks",
    "schemaVersion",
    "id",
    "name",
    "subject",
    "agent",
    "blocked_by",
    "blockedBy",
    "files",
    "create",
    "modify",
    "delete",
    "reads",
    "run",
    "acceptance",
    "criterion",
    "check",
    "assumptions",
    "claim",
    "severity",
    "timeout",
    "estimate",
    "parallel",
    "tags",
    "root",
    "metadata",
    "title",
]
# Keys never break lines here: messages quote keys raw, a known defect with its own test below.
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
keys = st.sampled_from(_FIELDS) | st.text(
    st.characters(exclude_characters=_LINE_BREAKS, exclude_categories=["Cs"]), max_size=8
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["a", "b", "0", "1", "a::b", "../x", "/abs", "T001", "1/1"])
    # what reaches the OS or a wait: a NUL, NaN, infinities, absurd sizes
    | st.sampled_from(["a\x00b", float("nan"), float("inf"), -float("inf"), 10**20, 1e300])
)
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=20,
)
# A phase's fields hold scalars, lists of them, or mappings of them (files, acceptance, ...).
field_values = (
    scalars
    | st.lists(scalars, max_size=4)
    | st.dictionaries(keys, scalars | st.lists(scalars, max_size=3), max_size=4)
    | st.lists(st.dictionaries(keys, scalars, max_size=3), max_size=3)
)
phase_like = st.dictionaries(keys, field_values, max_size=6)
plan_like = st.one_of(
    st.fixed_dictionaries(
        {"phases": st.lists(phase_like, max_size=6)}, optional={"title": scalars}
    ),
    st.fixed_dictionaries(
        {"schemaVersion": st.just(2) | scalars, "tasks": st.lists(phase_like, max_size=6)}
    ),
    st.lists(phase_like, min_size=1, max_size=6),
    # Taskmaster: tasks (with subtasks) that have the id and title detection looks for
    st.fixed_dictionaries(
        {"tasks": st.lists(st.fixed_dictionaries({"id": scalars, "title": scalars}), max_size=4)}
    ),
    st.fixed_dictionaries(
        {
            "master": st.fixed_dictionaries(
                {
                    "tasks": st.lists(
                        st.fixed_dictionaries(
                            {"id": scalars, "title": scalars},
                            optional={
                                "dependencies": field_values,
                                "status": scalars,
                                "subtasks": st.lists(phase_like, max_size=3) | field_values,
                            },
                        ),
                        min_size=1,
                        max_size=4,
                    )
                }
            )
        }
    ),
)


@fuzz(150)
@given(document=documents | plan_like, suffix=st.sampled_from((".json", "", ".txt")))
def test_arbitrary_json_documents_give_a_plan_or_a_plan_error(
    scratch: Path, document: object, suffix: str
) -> None:
    read_every_way(write(scratch, suffix, json.dumps(document, indent=1)))


@fuzz(150)
@given(document=documents | plan_like, suffix=st.sampled_from((".yaml", ".yml", "")))
def test_arbitrary_yaml_documents_give_a_plan_or_a_plan_error(
    scratch: Path, document: object, suffix: str
) -> None:
    read_every_way(write(scratch, suffix, yaml.safe_dump(document, allow_unicode=True)))


# -- mutated example plans --------------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    """An example plan, with a few lines or bytes deleted, duplicated, moved or inserted."""
    path = draw(st.sampled_from(EXAMPLES))
    data = bytearray(path.read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        lines = data.splitlines(keepends=True)
        kind = draw(st.sampled_from(["delete", "duplicate", "move", "insert", "cut", "bytes"]))
        at = draw(st.integers(0, max(len(lines) - 1, 0)))
        span = draw(st.integers(1, 8))
        if kind == "delete":
            del lines[at : at + span]
        elif kind == "duplicate":
            lines[at:at] = lines[at : at + span]
        elif kind == "move":
            moved = lines[at : at + span]
            del lines[at : at + span]
            lines.insert(draw(st.integers(0, len(lines))), b"".join(moved))
        elif kind == "insert":
            piece = draw(st.sampled_from(_PIECES) | st.text(max_size=20))
            lines.insert(at, piece.encode("utf-8", "surrogatepass") + b"\n")
        data = bytearray(b"".join(lines))
        if kind == "cut":
            data = data[: draw(st.integers(0, len(data)))]
        elif kind == "bytes" and data:
            start = draw(st.integers(0, len(data) - 1))
            data[start : start + span] = draw(st.binary(max_size=span))
    return path.suffix, bytes(data)


# No deadline: an example reads a plan every way there is, which a busy machine makes slow.
@settings(fuzz(400), deadline=None)
@given(plan=mutated())
def test_mutated_example_plans_give_a_plan_or_a_plan_error(
    scratch: Path, plan: tuple[str, bytes]
) -> None:
    suffix, data = plan
    read_every_way(write(scratch, suffix, data))


def test_the_examples_are_plans(scratch: Path) -> None:
    """The mutations start from plans that read: what the fuzzer breaks was whole."""
    assert len(EXAMPLES) >= 7
    for path in EXAMPLES:
        assert read(path, None) is not None, path


# -- what the fuzzers found -------------------------------------------------------------------

FOUND = [
    pytest.param(
        ".yaml",
        "0000-00-00",
        id="yaml-timestamp-of-year-0",
    ),
    pytest.param(
        ".json",
        "9" * 4400,
        id="json-integer-of-4400-digits",
    ),
    pytest.param(
        ".yaml",
        "9" * 4400,
        id="yaml-integer-of-4400-digits",
    ),
    pytest.param(
        ".json",
        '{"phases": [{"id": "a", "\\u000b": 1}]}',
        id="unknown-field-with-a-vertical-tab",
    ),
]


@pytest.mark.parametrize(("suffix", "content"), FOUND)
def test_what_the_fuzzers_found_gives_a_plan_or_a_plan_error(
    scratch: Path, suffix: str, content: str
) -> None:
    read_every_way(write(scratch, suffix, content))


def test_no_known_breaker_is_among_the_pieces() -> None:
    """A breaker moves to the pieces when its test passes; until then it would fail at random."""
    assert not set(KNOWN_BREAKERS) & set(_PIECES)
