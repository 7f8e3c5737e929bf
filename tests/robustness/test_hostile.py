"""Hostile input: every plan, agent file and session file that is broken, malicious or absurd
ends the run with one clear line, a non-zero exit, no traceback, and nothing written outside the
state dir.

Each case is a file built here (not a fixture file): its name, its content (text, bytes, or a
function that builds it) and the one error line expected, as a pattern (``*`` is the only
wildcard). Plans run in-process, with ``--maestro PLAN`` and with ``--maestro-analyze``. The cases
that could hang or exhaust memory (``/dev/zero``, a FIFO, huge plans, alias bombs, regular
expressions that backtrack) run in a subprocess with limits on CPU time, wall time and address
space, and their peak memory is measured.

A case marked ``xfail(strict=True)`` is a known defect: the reason says what happens today, and
the mark must go once it is fixed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from pytest_maestro.plan import not_a_plan

from ..helpers import REPO

NO_PHASES = not_a_plan()

STATE_DIR = ".maestro"
MAX_LINE = 500  # one clear line: a user reads it whole
USAGE = int(pytest.ExitCode.USAGE_ERROR)
ERROR_CODES = (int(pytest.ExitCode.INTERRUPTED), USAGE)  # a collection error, a usage error

Builder = Callable[[Path], None]  # writes the file at the path it is given, and what it needs


@dataclass(frozen=True)
class Case:
    id: str
    name: str  # the file, relative to the test's directory
    content: str | bytes | Builder
    error: str  # the one error line (after "ERROR: "), ``*`` matching anything
    xfail: str | None = None  # what happens today, for a known defect

    def param(self) -> object:
        marks = [pytest.mark.xfail(strict=True, reason=self.xfail)] if self.xfail else []
        return pytest.param(self, id=self.id, marks=marks)


def params(cases: list[Case]) -> list[object]:
    assert len({case.id for case in cases}) == len(cases)
    return [case.param() for case in cases]


def write(directory: Path, case: Case) -> Path:
    path = directory / case.name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(case.content, bytes):
        path.write_bytes(case.content)
    elif isinstance(case.content, str):
        path.write_text(case.content, encoding="utf-8")
    else:
        case.content(path)
    return path


# -- what a run must and must not do ----------------------------------------------------------


def matches(text: str, pattern: str) -> bool:
    """``pattern`` with ``*`` for any text and every other character literal (``[`` too)."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), text, re.S) is not None


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_COLLECT_HEADER = re.compile(r"^_+ ERROR collecting .+ _+$")


def error_lines(stdout: str, stderr: str) -> list[str]:
    """Each error the run reported: ``ERROR:`` lines, and the message of each collection error."""
    found = [
        line.removeprefix("ERROR: ")
        for line in (*stdout.splitlines(), *stderr.splitlines())
        if line.startswith("ERROR: ")
    ]
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        if _COLLECT_HEADER.match(line):
            body = []
            for after in lines[index + 1 :]:
                if after.startswith(("=", "_")):
                    break
                if after.strip():
                    body.append(after)
            found.append("\n".join(body))
    return found


def assert_one_clear_error(ret: int, stdout: str, stderr: str, pattern: str) -> str:
    output = stdout + "\n" + stderr
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-3000:]
    assert ret in ERROR_CODES, f"exit code {ret}\n{output[-3000:]}"
    errors = error_lines(stdout, stderr)
    assert len(errors) == 1, f"{len(errors)} errors: {errors}\n{output[-3000:]}"
    [line] = errors
    assert "\n" not in line, line
    assert not _CONTROL.search(line), f"a control character (a terminal escape?): {line!r}"
    assert len(line) <= MAX_LINE, f"a {len(line)}-character error line: {line[:300]}..."
    if ret == USAGE:  # nothing else on stderr: no second line of the same message
        others = [x for x in stderr.splitlines() if x.strip() and not x.startswith("ERROR: ")]
        assert not others, others
    assert matches(line, pattern), f"{line!r}\ndoes not match\n{pattern!r}"
    return line


def outside_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file, directory and link under ``root`` except the state dir's, with what would
    change if it were written: size, modification time, mode. Nothing is opened (FIFOs)."""
    found: dict[str, tuple[int, int, int]] = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != STATE_DIR]
        for name in (*dirs, *files):
            path = Path(directory, name)
            info = path.lstat()
            is_dir = path.is_dir() and not path.is_symlink()
            found[str(path.relative_to(root))] = (
                0 if is_dir else info.st_size,
                0 if is_dir else info.st_mtime_ns,
                info.st_mode,
            )
    return found


def run_in_process(pytester: pytest.Pytester, *args: str) -> tuple[int, str, str]:
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    return int(result.ret), result.stdout.str(), result.stderr.str()


def assert_refused(pytester: pytest.Pytester, case: Case, *args: str) -> str:
    before = outside_state(pytester.path)
    line = assert_one_clear_error(*run_in_process(pytester, *args), case.error)
    assert outside_state(pytester.path) == before
    return line


# -- plans --------------------------------------------------------------------------------------


def _json(data: object) -> str:
    return json.dumps(data, indent=2)


def _one_phase_json(**fields: object) -> str:
    return _json({"phases": [{"id": "a", **fields}]})


def _design(*tasks: object, version: object = 2) -> str:
    return _json({"schemaVersion": version, "goal": "g", "tasks": list(tasks)})


def _maestro_phase(pid: object, **fields: object) -> dict[str, object]:
    return {"id": pid, "name": "x", "agent": "coder", "parallel": True, "blocked_by": [], **fields}


def _cycle(length: int) -> str:
    phases = [{"id": f"p{i}", "blocked_by": [f"p{(i + 1) % length}"]} for i in range(length)]
    return _json({"phases": phases})


def _truncated(example: str, fraction: float) -> Builder:
    def build(path: Path) -> None:
        text = (REPO / "example_plans" / example).read_text(encoding="utf-8")
        path.write_text(text[: int(len(text) * fraction)], encoding="utf-8")

    return build


def _absolute_into_test_dir(path: Path) -> None:
    """A plan that would create a file by its absolute path, inside the test's directory."""
    target = path.parent / "absolute-target.txt"
    plan = {"phases": [{"id": "a", "files": {"create": [str(target)]}, "run": [f"touch {target}"]}]}
    path.write_text(yaml.safe_dump(plan))


def _directory(path: Path) -> None:
    path.mkdir()


DIGITS = "1" * 5000  # past Python's limit on int() of a string (4300 digits)
TASKS = "# Tasks\n\n"
NOT_A_PLAN = (
    "not a plan: expected a 'phases' list (native or Maestro phases JSON), 'tasks' with "
    "'schemaVersion' (design-v2) or 'tasks' with 'title' (taskmaster), found "
)
BAD_ID = "invalid phase id*"

PLAN_CASES = [
    # --- YAML: syntax, truncation, tags, anchors -----------------------------------------------
    Case(
        "yaml-truncated-in-a-string",
        "plan.yaml",
        'phases:\n  - id: a\n    run: "ec',
        "plan.yaml:3: YAML syntax error: found unexpected end of stream*",
    ),
    Case(
        "yaml-truncated-in-a-flow-list",
        "plan.yaml",
        "phases:\n  - id: a\n    files:\n      create: [a.py,\n",
        "plan.yaml:5: YAML syntax error: *",
    ),
    Case(
        "yaml-bad-indentation",
        "plan.yaml",
        "phases:\n  - id: a\n   run: [make]\n",
        "plan.yaml:3: YAML syntax error: *",
    ),
    Case(
        "yaml-tab-indentation",
        "plan.yaml",
        "phases:\n\t- id: a\n",
        "plan.yaml:2: YAML syntax error: found character '\\t' that cannot start any token*",
    ),
    Case(
        "yaml-python-object-tag",
        "plan.yaml",
        "phases:\n  - id: !!python/object/apply:os.system ['touch pwned']\n",
        "plan.yaml:2: YAML error: could not determine a constructor for the tag "
        "'tag:yaml.org,2002:python/object/apply:os.system'",
    ),
    Case(
        "yaml-python-name-tag",
        "plan.yaml",
        "phases: !!python/name:os.system\n",
        "plan.yaml:1: YAML error: could not determine a constructor for the tag *python/name*",
    ),
    Case(
        "yaml-local-tag",
        "plan.yaml",
        "phases:\n  - id: !shell a\n",
        "plan.yaml:2: YAML error: could not determine a constructor for the tag '!shell'",
    ),
    Case(
        "yaml-set-tag",
        "plan.yaml",
        "phases: !!set {a, b}\n",
        "plan.yaml:1: field 'phases' must be a list, got *",
    ),
    Case(
        "yaml-binary-tag-as-id",
        "plan.yaml",
        "phases:\n  - id: !!binary aGVsbG8=\n",
        "plan.yaml:2: phase #1 field 'id' must be a phase id (a string or an integer), got *",
    ),
    Case(
        "yaml-timestamp-as-timeout",
        "plan.yaml",
        "phases:\n  - id: a\n    timeout: 2001-12-14t21:59:43.10-05:00\n",
        "plan.yaml:3: phase 'a' field 'timeout' must be a number, got '2001-12-14 21:59:43*'",
    ),
    Case(
        "yaml-recursive-anchor",
        "plan.yaml",
        "phases: &p\n  - id: a\n    tags: *p\n",
        "plan.yaml:1: YAML syntax error: an alias refers to the value that holds it",
    ),
    Case(
        "yaml-merge-of-a-scalar",
        "plan.yaml",
        "phases:\n  - <<: 5\n    id: a\n",
        "plan.yaml:2: YAML error: expected a mapping or list of mappings for merging*",
    ),
    Case(
        "yaml-list-as-key",
        "plan.yaml",
        "? [a, b]\n: 1\nphases:\n  - id: a\n",
        "plan.yaml:1: YAML error: found unhashable key",
    ),
    Case(
        "yaml-nested-too-deeply",
        "plan.yaml",
        "phases:\n" + "".join("  " * i + "- \n" for i in range(2000)),
        "plan.yaml: YAML is nested too deeply",
    ),
    Case(
        "yaml-kubernetes-documents",
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Service\n",
        "pod.yaml:3: YAML syntax error: but found another document*",
    ),
    Case(
        "yaml-github-workflow",
        "ci.yml",
        "name: CI\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n",
        "ci.yml: " + NOT_A_PLAN + "a mapping with keys 'name', *'jobs'",
    ),
    Case(
        "yaml-impossible-date",
        "plan.yaml",
        "phases:\n  - id: a\n    estimate: 2024-02-30\n",
        "plan.yaml:3: *",
    ),
    Case(
        "yaml-integer-of-5000-digits",
        "plan.yaml",
        f"phases:\n  - id: {DIGITS}\n",
        "plan.yaml:2: *",
    ),
    Case(
        "yaml-phases-a-mapping",
        "plan.yaml",
        "phases:\n  moon: full\n",
        "plan.yaml:1: field 'phases' must be a list, got a mapping",
    ),
    Case(
        "yaml-id-a-list",
        "plan.yaml",
        "phases:\n  - id: [a, b]\n",
        "plan.yaml:2: phase #1 field 'id' must be a phase id (a string or an integer), got a list",
    ),
    Case(
        "yaml-binary-file",
        "plan.yaml",
        bytes(range(256)),
        "plan.yaml:*: not UTF-8 text",
    ),
    Case("yaml-empty-file", "plan.yaml", "", "plan.yaml: the plan is empty"),
    Case("yaml-only-a-comment", "plan.yaml", "# to do\n", "plan.yaml: the plan is empty"),
    # --- JSON ----------------------------------------------------------------------------------
    Case(
        "json-truncated",
        "plan.json",
        '{"phases": [{"id": "a", "run": ["ec',
        "plan.json:1: JSON syntax error: Unterminated string starting at (column 33)",
    ),
    Case(
        "json-trailing-comma",
        "plan.json",
        '{"phases": [\n  {"id": "a"},\n]}\n',
        "plan.json:3: JSON syntax error: Expecting value (column 1)",
    ),
    Case(
        "json-single-quotes",
        "plan.json",
        "{'phases': []}",
        "plan.json:1: JSON syntax error: Expecting property name enclosed in double quotes*",
    ),
    Case(
        "json-nested-too-deeply",
        "plan.json",
        "[" * 100_000,
        "plan.json: JSON is nested too deeply",
    ),
    Case(
        "json-integer-of-5000-digits",
        "plan.json",
        '{"phases": [{"id": ' + DIGITS + "}]}",
        "plan.json:1: *",
    ),
    Case(
        "json-nan-timeout",
        "plan.json",
        '{"phases": [{"id": "a", "timeout": NaN}]}',
        "plan.json:1: phase 'a' field 'timeout' *",
    ),
    Case(
        "json-lone-surrogate-id",
        "plan.json",
        '{"phases": [{"id": "\\ud800"}]}',
        "plan.json:1: *",
    ),
    Case(
        "json-a-number",
        "plan.json",
        "42",
        "plan.json: " + NOT_A_PLAN + "a number",
    ),
    Case("json-null", "plan.json", "null", "plan.json: the plan is empty"),
    Case(
        "json-empty-file",
        "plan.json",
        "",
        "plan.json:1: JSON syntax error: Expecting value (column 1)",
    ),
    Case(
        "json-only-a-bom",
        "plan.json",
        "\ufeff",
        "plan.json:1: JSON syntax error: Expecting value (column 1)",
    ),
    Case(
        "json-a-json-schema",
        "schema.json",
        _json({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}),
        "schema.json: " + NOT_A_PLAN + "a mapping with keys '$schema', 'type'",
    ),
    Case(
        "json-a-notebook",
        "notebook.json",
        _json({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
        "notebook.json: " + NOT_A_PLAN + "a mapping with keys 'cells', *",
    ),
    Case(
        "json-unknown-field-with-a-newline",
        "plan.json",
        _one_phase_json(**{"run\nall": True}),
        "plan.json:5: phase 'a' has unknown field 'run\\nall'*",
    ),
    Case(
        "json-unknown-field-with-a-terminal-escape",
        "plan.json",
        _one_phase_json(**{"\x1b[2J": True}),
        "plan.json:5: phase 'a' has unknown field '\\x1b[2J'*",
    ),
    Case(
        "json-phases-of-strings",
        "plan.json",
        _json({"phases": ["build", "test"]}),
        "plan.json:3: phase #1 must be a mapping of phase fields (id, name, run, ...), got 'build'",
    ),
    # --- phase ids -------------------------------------------------------------------------------
    Case(
        "id-with-double-colon",
        "plan.json",
        _one_phase_json(id="a::b"),
        "plan.json:3: phase 'a::b' " + BAD_ID,
    ),
    Case(
        "id-with-bracket",
        "phases.json",
        _json([_maestro_phase("a[1")]),
        "phases.json:2: phase 'a[1' " + BAD_ID,
    ),
    Case(
        "id-with-newline",
        "plan.yaml",
        'phases:\n  - id: "build\\nall"\n',
        "plan.yaml:2: phase 'build\\nall' " + BAD_ID,
    ),
    Case(
        "id-with-terminal-escape",
        "plan.json",
        _one_phase_json(id="a\x1bc"),
        "plan.json:3: phase 'a\\x1bc' " + BAD_ID,
    ),
    Case(
        "id-with-nul",
        "phases.json",
        _json([_maestro_phase("a\x00b")]),
        "phases.json:2: phase 'a\\x00b' " + BAD_ID,
    ),
    Case(
        "id-empty",
        "plan.json",
        _one_phase_json(id=""),
        "plan.json:4: phase #1 field 'id' must be a phase id (a string or an integer), got ''",
    ),
    Case(
        "id-a-boolean",
        "plan.yaml",
        "phases:\n  - id: yes\n",
        "plan.yaml:2: phase #1 field 'id' must be a phase id (a string or an integer), got true",
    ),
    Case(
        "id-a-float",
        "phases.json",
        _json([_maestro_phase(1.5)]),
        "phases.json:3: phase #1 field 'id' must be a phase id*, got 1.5",
    ),
    # --- paths -----------------------------------------------------------------------------------
    Case(
        "path-absolute-posix",
        "plan.yaml",
        _absolute_into_test_dir,
        "plan.yaml:2: phase 'a' file '/*/absolute-target.txt' is absolute; "
        "plan paths are relative to the project root",
    ),
    Case(
        "path-absolute-windows",
        "tasks.md",
        TASKS + "### T001: x\n**File(s)**: `C:\\Windows\\win.ini`\n**Depends**: None\n",
        "tasks.md:3: phase 'T001' file 'C:\\\\Windows\\\\win.ini' is absolute*",
    ),
    Case(
        "path-unc-share",
        "plan.json",
        _one_phase_json(reads=["//server/share/secret"]),
        "plan.json:3: phase 'a' file '//server/share/secret' is absolute*",
    ),
    Case(
        "path-dotdot-superpowers",
        "plan.md",
        "# X Implementation Plan\n\n### Task 1: a\n**Files:**\n- Modify: `src/../../etc/hosts`\n",
        "plan.md:3: phase 'task-1' file 'src/../../etc/hosts' leaves the project root ('..')",
    ),
    Case(
        "path-dotdot-maestro-md",
        "plan.md",
        "## Phase 1: x\n\n### Agent: builder\n\n### Files to Modify\n- `../../.bashrc`\n",
        "plan.md:1: phase '1' file '../../.bashrc' leaves the project root ('..')",
    ),
    Case(
        "path-dotdot-design-v2",
        "plan.json",
        _design({"subject": "a", "metadata": {"files": {"create": ["../x"]}}}),
        "plan.json:5: phase '0' file '../x' leaves the project root ('..')",
    ),
    # --- cycles ----------------------------------------------------------------------------------
    Case(
        "cycle-of-1-tasklist",
        "tasks.md",
        TASKS + "### T001: a\n**Depends**: T001\n",
        "tasks.md:3: phase 'T001' depends on itself",
    ),
    Case(
        "cycle-of-1-design-v2",
        "plan.json",
        _design({"subject": "a", "blockedBy": [0]}),
        "plan.json:5: phase '0' depends on itself",
    ),
    Case(
        "cycle-of-1-maestro-json",
        "phases.json",
        _json([_maestro_phase(1, blocked_by=[1])]),
        "phases.json:2: phase '1' depends on itself",
    ),
    Case(
        "cycle-of-2-steps",
        "steps.md",
        "### Section 1: x\n*   [ ] **1/1**: a\n    *   **Depends**: 1/2\n"
        "*   [ ] **1/2**: b\n    *   **Depends**: 1/1\n",
        "steps.md:2: phase '1.1' dependency cycle: 1.1 -> 1.2 -> 1.1",
    ),
    Case(
        "cycle-of-1000",
        "plan.json",
        _cycle(1000),
        "plan.json:3: phase 'p0' dependency cycle of 1000 phases: p0 -> p999 -> *",
    ),
    # --- Markdown formats ------------------------------------------------------------------------
    Case(
        "maestro-md-duplicate-phase",
        "plan.md",
        "## Phase 1: x\n\n### Agent: builder\n\n## Phase 1: y\n\n### Agent: builder\n",
        "plan.md:5: phase '1' duplicate phase id (first defined at line 1)",
    ),
    Case(
        "maestro-md-dependency-of-5000-digits",
        "plan.md",
        f"## Phase 1: x\n\n### Agent: builder\n\n### Dependencies\n- Blocked by: {DIGITS}\n",
        "plan.md:1: phase '1' depends on unknown phase '111*'",
    ),
    Case(
        "tasklist-unknown-dependency",
        "tasks.md",
        TASKS + "### T001: a\n**Depends**: T999\n",
        "tasks.md:3: phase 'T001' depends on unknown phase 'T999'",
    ),
    Case(
        "tasklist-range-of-5000-digits",
        "tasks.md",
        TASKS + f"### T001: a\n**Depends**: T{DIGITS}-T2\n",
        "tasks.md:3: phase 'T001' depends on unknown phase 'T111*…'",
    ),
    Case(
        "superpowers-truncated-example",
        "plan.md",
        _truncated("superpowers-plan.md", 0.02),
        "plan.md: " + NO_PHASES,
    ),
    Case(
        "markdown-meeting-notes",
        "notes.md",
        "# Meeting notes\n\nWe talked about the weather.\n",
        "notes.md: " + NO_PHASES,
    ),
    Case(
        "markdown-unclosed-fence",
        "tasks.md",
        TASKS + "```\n### T001: a\n",
        "tasks.md: " + NO_PHASES,
    ),
    Case(
        "markdown-binary",
        "plan.md",
        b"\x00\x01\x02 # Plan \xff\xfe",
        "plan.md:1: not UTF-8 text",
    ),
    Case(
        "markdown-nul-bytes",
        "plan.md",
        "# Plan\x00\x00\n\x00\n",
        "plan.md: " + NO_PHASES,
    ),
    Case("markdown-whitespace", "plan.md", "  \n\t\n\n", "plan.md: the plan is empty"),
    # --- design-v2 and Maestro phases JSON -------------------------------------------------------
    Case(
        "design-v2-schema-version-a-string",
        "plan.json",
        _design({"subject": "a"}, version="2"),
        "plan.json:2: schemaVersion '2' is not supported*",
    ),
    Case(
        "design-v2-tasks-a-mapping",
        "plan.json",
        _json({"schemaVersion": 2, "goal": "g", "tasks": {"a": 1}}),
        "plan.json:4: field 'tasks' must be a list, got a mapping",
    ),
    Case(
        "design-v2-tasks-of-strings",
        "plan.json",
        _design("a", "b"),
        "plan.json:5: phase '0' must be a task object, got 'a'",
    ),
    Case(
        "design-v2-blocked-by-a-boolean",
        "plan.json",
        _design({"subject": "a"}, {"subject": "b", "blockedBy": [True]}),
        "plan.json:11: phase '1' field 'blockedBy[0]' must be a task index (an integer), got true",
    ),
    Case(
        "maestro-json-name-a-number",
        "phases.json",
        _json([_maestro_phase(1, name=5)]),
        "phases.json:4: phase '1' field 'name' must be a string or null, got 5",
    ),
    Case(
        "maestro-json-phases-of-lists",
        "phases.json",
        _json([[1, 2]]),
        "phases.json: " + NOT_A_PLAN + "a list",
    ),
    # --- a NUL written as an escape, in what reaches the OS; numbers out of bounds ------------
    Case(
        "nul-in-a-run-command",
        "plan.yaml",
        'phases:\n  - id: a\n    run: ["echo a\\0b"]\n',
        "plan.yaml:2: phase 'a' field 'run' holds a NUL character: 'echo a\\x00b'",
    ),
    Case(
        "nul-in-a-check-json",
        "plan.json",
        '{"phases": [{"id": "a", "run": ["true"], '
        '"acceptance": [{"criterion": "c", "check": "test \\u0000"}]}]}',
        "plan.json:1: phase 'a' field 'acceptance' holds a NUL character: 'test \\x00'",
    ),
    Case(
        "nul-in-an-assumption",
        "plan.yaml",
        'phases:\n  - id: a\n    run: [echo]\n    assumptions: [{claim: c, verify: "t\\0"}]\n',
        "plan.yaml:2: phase 'a' field 'assumptions' holds a NUL character: 't\\x00'",
    ),
    Case(
        "nul-in-a-declared-path",
        "plan.yaml",
        'phases:\n  - id: a\n    run: [echo]\n    files: ["x\\0y"]\n',
        "plan.yaml:2: phase 'a' field 'files' holds a NUL character: 'x\\x00y'",
    ),
    Case(
        "nul-in-a-model",
        "plan.yaml",
        'phases:\n  - id: a\n    run: [echo]\n    model: "m\\0"\n',
        "plan.yaml:2: phase 'a' field 'model' holds a NUL character: 'm\\x00'",
    ),
    Case(
        "nul-in-the-root",
        "plan.yaml",
        'root: "x\\0y"\nphases:\n  - id: a\n    run: [echo]\n',
        "plan.yaml: field 'root' holds a NUL character: 'x\\x00y'",
    ),
    Case(
        "max-retries-past-any-sense",
        "plan.yaml",
        "phases:\n  - id: a\n    run: [echo]\n    max_retries: 99999999999999999999\n",
        "plan.yaml:2: phase 'a' field 'max_retries' must be a whole number >= 0 and <= 100, "
        "got 99999999999999999999",
    ),
    Case(
        "max-retries-of-400-digits",
        "plan.yaml",
        "phases:\n  - id: a\n    run: [echo]\n    max_retries: 1" + "0" * 400 + "\n",
        "plan.yaml:2: phase 'a' field 'max_retries' must be a whole number >= 0 and <= 100, "
        "got a whole number of 401 digits",
    ),
    Case(
        "timeout-past-a-week",
        "plan.json",
        '{"phases": [{"id": "a", "run": ["true"], "timeout": 1e300}]}',
        "plan.json:1: phase 'a' field 'timeout' must be a number > 0 and <= 604800, got 1e+300",
    ),
    # --- not a file ------------------------------------------------------------------------------
    Case("a-directory", "plan.yaml", _directory, "plan.yaml: is a directory, not a plan file"),
]


@pytest.mark.parametrize("case", params(PLAN_CASES))
def test_a_hostile_plan_gets_one_clear_error(pytester: pytest.Pytester, case: Case) -> None:
    write(pytester.path, case)
    assert_refused(pytester, case, "--maestro", case.name)
    assert_refused(pytester, case, "--maestro", case.name, "--maestro-analyze")


def test_a_missing_plan_gets_one_clear_error(pytester: pytest.Pytester) -> None:
    case = Case("missing", "plan.yaml", "", "nowhere.yaml: plan file not found")
    assert_refused(pytester, case, "--maestro", "nowhere.yaml")
    assert_refused(pytester, case, "--maestro", "nowhere.yaml", "--maestro-analyze")


def test_there_are_forty_hostile_plans_in_every_format() -> None:
    assert len(PLAN_CASES) >= 40
    suffixes = {Path(case.name).suffix for case in PLAN_CASES}
    assert {".yaml", ".yml", ".json", ".md"} <= suffixes


# -- agent definitions ----------------------------------------------------------------------------

AGENT_PLAN = "phases:\n  - id: a\n    agent: builder\n    run: [echo a]\n"
AGENT = "agents/builder.md"


def _agent(front: str, body: str = "You build.\n") -> str:
    return f"---\n{front}---\n{body}"


_LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, name in itertools.pairwise("abcde")
)

AGENT_CASES = [
    Case(
        "agent-yaml-syntax",
        AGENT,
        _agent("name: [builder\n"),
        AGENT + ":*: invalid agent definition: *expected ',' or ']'*",
    ),
    Case(
        "agent-python-object-tag",
        AGENT,
        _agent("name: !!python/object/apply:os.system ['touch pwned']\n"),
        AGENT + ":2: invalid agent definition: could not determine a constructor for the tag "
        "'tag:yaml.org,2002:python/object/apply:os.system'",
    ),
    Case(
        "agent-timeout-mins-text",
        AGENT,
        _agent("name: builder\ntimeout_mins: ten\n"),
        AGENT + "*: agent 'builder': timeout_mins must be a number, got 'ten'",
    ),
    Case(
        "agent-timeout-mins-nan",
        AGENT,
        _agent("name: builder\ntimeout_mins: .nan\n"),
        AGENT + "*: agent 'builder': timeout_mins *",
    ),
    Case(
        "agent-max-turns-fraction",
        AGENT,
        _agent("name: builder\nmax_turns: 1.5\n"),
        AGENT + "*: agent 'builder': max_turns must be a whole number > 0, got 1.5",
    ),
    Case(
        "agent-max-turns-of-5000-digits",
        AGENT,
        _agent(f"name: builder\nmax_turns: {DIGITS}\n"),
        AGENT + "*: invalid agent definition: *Exceeds the limit (4300 digits)*",
    ),
    Case(
        "agent-env-a-list",
        AGENT,
        _agent("name: builder\nenv: [A, B]\n"),
        AGENT + "*: agent 'builder': env must be a mapping of names to values, got ['A', 'B']",
    ),
    Case(
        "agent-env-value-a-mapping",
        AGENT,
        _agent("name: builder\nenv:\n  TOKEN: {from: vault}\n"),
        AGENT + "*: agent 'builder': env*TOKEN*",
    ),
    Case(
        "agent-env-name-with-equals",
        AGENT,
        _agent('name: builder\nenv: {"A=B": x}\n'),
        AGENT + "*: agent 'builder': env name 'A=B' is not a variable name "
        "(letters, digits and _, not first a digit)",
    ),
    Case(
        "agent-env-name-empty",
        AGENT,
        _agent('name: builder\nenv: {"": x}\n'),
        AGENT + "*: agent 'builder': env name '' is not a variable name *",
    ),
    Case(
        "agent-env-value-with-nul",
        AGENT,
        _agent('name: builder\nenv: {TOKEN: "a\\0b"}\n'),
        AGENT + "*: agent 'builder': env TOKEN holds a NUL character: 'a\\x00b'",
    ),
    Case(
        "agent-command-argument-with-nul",
        AGENT,
        _agent('name: builder\ncommand: [run, "--x=\\0"]\n'),
        AGENT + "*: agent 'builder': command holds a NUL character: '--x=\\x00'",
    ),
    Case(
        "agent-model-with-nul",
        AGENT,
        _agent('name: builder\nmodel: "m\\0"\n'),
        AGENT + "*: agent 'builder': model holds a NUL character: 'm\\x00'",
    ),
    Case(
        "agent-timeout-mins-past-a-week",
        AGENT,
        _agent("name: builder\ntimeout_mins: 1.0e+12\n"),
        AGENT
        + "*: agent 'builder': timeout_mins must be a number > 0 and <= 10080, got 1000000000000.0",
    ),
    Case(
        "agent-max-turns-past-any-sense",
        AGENT,
        _agent("name: builder\nmax_turns: 99999999999999999999\n"),
        AGENT + "*: agent 'builder': max_turns must be a whole number >= 1 and <= 100000, "
        "got 99999999999999999999",
    ),
    Case(
        "agent-command-text",
        AGENT,
        _agent("name: builder\ncommand: claude -p\n"),
        AGENT + "*: agent 'builder': command must be a list of arguments, got 'claude -p'",
    ),
    Case(
        "agent-command-a-mapping",
        AGENT,
        _agent("name: builder\ncommand: {run: claude}\n"),
        AGENT + "*: agent 'builder': command must be a list of text, got {'run': 'claude'}",
    ),
    Case(
        "agent-name-a-mapping",
        AGENT,
        _agent("name: {first: builder}\n"),
        AGENT + "*: invalid agent definition: name must be text, got {'first': 'builder'}",
    ),
    Case(
        "agent-binary",
        AGENT,
        b"\x00\xff\xfe\x00binary",
        AGENT + "*: invalid agent definition: *UTF-8*",
    ),
    Case(
        "agent-frontmatter-a-list",
        AGENT,
        _agent("- name: builder\n- timeout_mins: 5\n"),
        AGENT + "*: *",
    ),
    Case(
        "agent-frontmatter-unclosed",
        AGENT,
        "---\nname: builder\ntimeout_mins: 5\n\nYou build.\n",
        AGENT + "*: *",
    ),
    Case(
        "agent-alias-bomb",
        AGENT,
        _agent("a: &a [x, x, x, x, x, x, x, x, x]\n" + _LAUGHS + "tools: *e\n"),
        AGENT + "*: agent 'builder': tools must be a list of text*",
    ),
]


@pytest.mark.parametrize("case", params(AGENT_CASES))
def test_a_hostile_agent_file_gets_one_clear_error(pytester: pytest.Pytester, case: Case) -> None:
    (pytester.path / "plan.yaml").write_text(AGENT_PLAN)
    write(pytester.path, case)
    assert_refused(pytester, case, "--maestro", "plan.yaml")


# -- session state ----------------------------------------------------------------------------

SESSION_PLAN = (
    "phases:\n  - id: a\n    run: [echo a]\n  - id: b\n    blocked_by: [a]\n    run: [echo b]\n"
)
Damage = Callable[[Path, Path], None]  # (snapshot, journal)


def _journal(entry: str) -> Damage:
    def damage(snapshot: Path, journal: Path) -> None:
        journal.write_text(entry + "\n")

    return damage


def _front(old: str, new: str) -> Damage:
    def damage(snapshot: Path, journal: Path) -> None:
        text = snapshot.read_text(encoding="utf-8")
        assert re.search(old, text, re.M), old
        snapshot.write_text(re.sub(old, new, text, count=1, flags=re.M), encoding="utf-8")

    return damage


def _replace(content: bytes) -> Damage:
    def damage(snapshot: Path, journal: Path) -> None:
        snapshot.write_bytes(content)

    return damage


def _snapshot_a_directory(snapshot: Path, journal: Path) -> None:
    snapshot.unlink()
    snapshot.mkdir()


def _journal_a_directory(snapshot: Path, journal: Path) -> None:
    journal.unlink(missing_ok=True)
    journal.mkdir()


@dataclass(frozen=True)
class Damaged:
    id: str
    damage: Damage
    file: str  # the suffix of the file the message must name
    words: str = "*"  # what the message says of the damage, naming the field
    xfail: str | None = None

    def param(self) -> object:
        marks = [pytest.mark.xfail(strict=True, reason=self.xfail)] if self.xfail else []
        return pytest.param(self, id=self.id, marks=marks)


SESSION_CASES = [
    Damaged(
        "journal-unknown-status",
        _journal('{"seq": 99, "op": "record", "phase": "a", "status": "exploded"}'),
        ".journal",
        "entry 99: field 'status' must be one of pending, *, got 'exploded'",
    ),
    Damaged(
        "journal-record-without-status",
        _journal('{"seq": 99, "op": "record", "phase": "a"}'),
        ".journal",
        "entry 99: field 'status' is missing",
    ),
    Damaged(
        "journal-facts-a-list",
        _journal('{"seq": 99, "op": "record", "phase": "a", "status": "failed", "facts": [1]}'),
        ".journal",
        "entry 99: field 'facts' must be a mapping, got [1]",
    ),
    Damaged(
        "journal-tokens-text",
        _journal(
            '{"seq": 99, "op": "record", "phase": "a", "status": "failed", '
            '"facts": {"tokens": "many"}}'
        ),
        ".journal",
        "entry 99: field 'tokens' must be a mapping, got 'many'",
    ),
    Damaged(
        "journal-files-a-number",
        _journal(
            '{"seq": 99, "op": "record", "phase": "a", "status": "failed", '
            '"facts": {"files_created": 5}}'
        ),
        ".journal",
        "entry 99: field 'files_created' must be a list of text, got 5",
    ),
    Damaged(
        "journal-session-fields-a-list",
        _journal('{"seq": 99, "op": "session", "fields": [1, 2]}'),
        ".journal",
        "entry 99: field 'fields' must be a mapping, got [1, 2]",
    ),
    Damaged(
        "session-phases-text",
        _front(r"^phases:\n", "phases: all of them\nold_phases:\n"),
        ".md",
        "field 'phases' must be a list of mappings, got 'all of them'",
    ),
    Damaged(
        "session-phase-unknown-status",
        _front(r"status: completed\n  agents", "status: exploded\n  agents"),
        ".md",
        "phase 'a': field 'status' must be one of pending, *, got 'exploded'",
    ),
    Damaged(
        "session-phase-without-id",
        _front(r"^- id: a$", "- ident: a"),
        ".md",
        "phase 1: field 'id' is missing",
    ),
    Damaged(
        "session-journal-seq-text",
        _front(r"^journal_seq: \d+$", "journal_seq: many"),
        ".md",
        "field 'journal_seq' must be a whole number >= 0*, got 'many'",
    ),
    Damaged(
        "session-token-usage-a-list",
        _front(r"^token_usage:$", "token_usage: [1, 2]\nold_usage:"),
        ".md",
        "field 'token_usage' must be a mapping, got [1, 2]",
    ),
    Damaged(
        "session-attempts-text",
        _front(r"attempts: 1$", "attempts: often"),
        ".md",
        "phase 'a': field 'attempts' must be a whole number >= 0*, got 'often'",
    ),
    Damaged(
        "session-errors-a-number",
        _front(r"errors: \[\]$", "errors: 5"),
        ".md",
        "phase 'a': field 'errors' must be a list of mappings, got 5",
    ),
    Damaged(
        "session-without-frontmatter",
        _replace(b"# my notes\n"),
        ".md",
    ),
    Damaged(
        "session-binary",
        _replace(b"---\n\xff\xfe\x00\n---\n"),
        ".md",
    ),
    Damaged(
        "session-frontmatter-a-list",
        _replace(b"---\n- a\n- b\n---\n"),
        ".md",
    ),
    Damaged(
        "session-a-directory",
        _snapshot_a_directory,
        ".md",
    ),
    Damaged(
        "journal-a-directory",
        _journal_a_directory,
        ".journal",
    ),
    Damaged(
        "session-cost-nan",
        _front(r"^  total_output: 0$", "  total_output: 0\n  total_cost: .nan"),
        ".md",
        "field 'total_cost' must be a number >= 0*, got nan",
    ),
    Damaged(
        "session-attempts-negative",
        _front(r"attempts: 1$", "attempts: -3"),
        ".md",
        "phase 'a': field 'attempts' must be a whole number >= 0*, got -3",
    ),
    Damaged(
        "session-phase-a-list",
        _front(r"^- id: a$", "- [a, b]\n- id: a"),
        ".md",
        "phase 1: must be a mapping, got ['a', 'b']",
    ),
]


def _damaged_session(pytester: pytest.Pytester, case: Damaged) -> Path:
    """Run the plan once, then damage its session; the damaged file."""
    (pytester.path / "plan.yaml").write_text(SESSION_PLAN)
    ret, stdout, _ = run_in_process(pytester, "--maestro", "plan.yaml")
    assert ret == 0, stdout
    [snapshot] = (pytester.path / STATE_DIR).glob("plan-*.md")
    journal = snapshot.with_suffix(".journal")
    case.damage(snapshot, journal)
    return snapshot.with_suffix(case.file)


@pytest.mark.parametrize("case", [case.param() for case in SESSION_CASES])
def test_a_damaged_session_gets_one_line_naming_the_file_and_the_way_out(
    pytester: pytest.Pytester, case: Damaged
) -> None:
    damaged = _damaged_session(pytester, case)
    before = outside_state(pytester.path)
    ret, stdout, stderr = run_in_process(pytester, "--maestro", "plan.yaml")
    assert_one_clear_error(ret, stdout, stderr, f"*{damaged.name}*{case.words}*--maestro-fresh*")
    assert outside_state(pytester.path) == before


@pytest.mark.parametrize("case", [case.param() for case in SESSION_CASES])
def test_maestro_status_tells_a_damaged_session_in_one_line_as_a_run_does(
    pytester: pytest.Pytester, case: Damaged
) -> None:
    damaged = _damaged_session(pytester, case)
    before = outside_state(pytester.path)
    ret, stdout, stderr = run_in_process(pytester, "--maestro", "plan.yaml", "--maestro-status")
    assert_one_clear_error(ret, stdout, stderr, f"*{damaged.name}*{case.words}*")
    assert outside_state(pytester.path) == before


@pytest.mark.parametrize("case", SESSION_CASES, ids=[case.id for case in SESSION_CASES])
def test_maestro_fresh_gets_past_a_damaged_session_and_keeps_it(
    pytester: pytest.Pytester, case: Damaged
) -> None:
    damaged = _damaged_session(pytester, case)
    kept = damaged.read_bytes() if damaged.is_file() else None
    ret, stdout, stderr = run_in_process(pytester, "--maestro", "plan.yaml", "--maestro-fresh")
    assert ret == 0, stdout + stderr
    assert "2 passed" in stdout
    if kept is not None:  # the damaged file is archived, not lost
        archived = list((pytester.path / STATE_DIR / "archive").glob(f"*{damaged.suffix}"))
        assert [path.read_bytes() for path in archived] == [kept]


# What this tool keeps in its state dir, each given the wrong shape: a directory where a file
# belongs, a file where a directory belongs, and the state dir itself a file.
WRONG_SHAPES = [
    "{name}.lock",
    "{name}.info",
    "{name}.spend",
    "{name}.journal",
    "summary.json",
    "pacing.json",
    ".gitignore",
    "archive",
    "logs",
    "preimages",
    "replaced",
    "",
]


@pytest.mark.parametrize("where", WRONG_SHAPES, ids=[w or "the-state-dir" for w in WRONG_SHAPES])
def test_maestro_fresh_recovers_from_any_shape_of_state_dir_and_keeps_what_it_moves(
    pytester: pytest.Pytester, where: str
) -> None:
    (pytester.path / "plan.yaml").write_text(SESSION_PLAN)
    ret, stdout, _ = run_in_process(pytester, "--maestro", "plan.yaml")
    assert ret == 0, stdout
    state = pytester.path / STATE_DIR
    [snapshot] = state.glob("plan-*.md")
    path = state / where.format(name=snapshot.stem) if where else state
    if where in ("", "archive", "logs", "preimages", "replaced"):  # a file, not a directory
        shutil.rmtree(path, ignore_errors=True)
        path.write_text("in the way\n")
    else:
        path.unlink(missing_ok=True)
        path.mkdir()
        (path / "kept.txt").write_text("in the way\n")
    ret, stdout, stderr = run_in_process(pytester, "--maestro", "plan.yaml", "--maestro-fresh")
    assert ret == 0, stdout + stderr
    assert "2 passed" in stdout
    assert "Traceback" not in stdout + stderr
    moved = [line for line in stdout.splitlines() if "moved aside" in line]
    assert len(moved) == 1, stdout
    kept = [
        p for p in (state / "archive").rglob("*") if p.is_file() and p.read_text() == "in the way\n"
    ]
    assert len(kept) == 1, sorted((state / "archive").rglob("*"))
    assert kept[0].relative_to(pytester.path).parts[0] == STATE_DIR
    # and the next run, without --maestro-fresh, uses the state dir as it is now
    ret, stdout, stderr = run_in_process(pytester, "--maestro", "plan.yaml")
    assert ret == 0, stdout + stderr


# -- the command line -------------------------------------------------------------------------


def test_analyze_without_a_plan_is_a_usage_error(pytester: pytest.Pytester) -> None:
    ret, stdout, stderr = run_in_process(pytester, "--maestro-analyze")
    assert_one_clear_error(ret, stdout, stderr, "*--maestro-analyze*--maestro*")
    assert ret == USAGE


def test_a_declared_file_behind_a_symlink_out_of_the_root_is_never_touched(
    pytester: pytest.Pytester,
) -> None:
    project, outside = pytester.path / "project", pytester.path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "pyproject.toml").write_text("")
    (outside / "secret.txt").write_text("secret\n")
    (project / "out").symlink_to(outside)
    plan = {
        "phases": [
            {"id": "a", "files": {"modify": ["out/secret.txt"]}, "run": ["echo x > out/secret.txt"]}
        ]
    }
    (project / "plan.yaml").write_text(yaml.safe_dump(plan))
    before = outside_state(pytester.path)
    result = pytester.runpytest("-p", "no:cacheprovider", "--maestro", "project/plan.yaml")
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["phase 'a' (a) was blocked", "declared file 'out/secret.txt' resolves outside the *"]
    )
    assert outside_state(pytester.path) == before
    assert (outside / "secret.txt").read_text() == "secret\n"


# -- bounded: what could hang or exhaust memory runs in a subprocess under limits ---------------

CPU_SECONDS = 2  # of CPU time, whatever the load: pytest refuses a plan in about 0.4 s
WALL_SECONDS = 3  # for what blocks without using CPU (a FIFO)
ADDRESS_SPACE = 1 << 30  # a MemoryError rather than the machine's memory
PEAK_RSS_MB = 256  # pytest alone peaks at about 40 MB
SIZE_WORDS = re.compile(r"(?i)too (?:large|big|long)|limit|\d+ ?[KMG]i?B\b|bytes")


@dataclass(frozen=True)
class Run:
    ret: int | None  # None: ended by a signal
    ended_by: str | None  # what ended it, when a signal did
    stdout: str
    stderr: str
    peak_rss_mb: float
    cpu: float
    wall: float


# The limits are set by the child itself, before pytest starts: a preexec_fn would run Python
# between fork and exec, which is unsafe in a process with threads (an xdist worker).
# Its peak memory is its own VmHWM, written at exit to the file PEAK_RSS_FILE names: the child's
# rusage keeps the high-water mark of the process it was forked from (a worker that has grown).
_LIMITED_PYTEST = """
import atexit, os, resource, runpy, sys
cpu, memory = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind

@atexit.register
def peak():
    with open("/proc/self/status") as status, open(os.environ["PEAK_RSS_FILE"], "w") as out:
        out.write("".join(line for line in status if line.startswith("VmHWM:")))

sys.argv = ["pytest", *sys.argv[3:]]
runpy.run_module("pytest", run_name="__main__", alter_sys=True)
"""


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MAESTRO_", "COV_"))}
    env["HOME"] = str(home)  # no user's ~/.claude/agents
    return env


def run_bounded(cwd: Path, args: list[str], logs: Path) -> Run:
    """``python -m pytest ARGS`` in ``cwd`` under CPU, wall-time and memory limits."""
    command = [
        sys.executable,
        "-c",
        _LIMITED_PYTEST,
        str(CPU_SECONDS),
        str(ADDRESS_SPACE),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",
        "-p",
        "no:anyio",
        "--assert=plain",
        *args,
    ]
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
        child = subprocess.Popen(
            command,
            cwd=cwd,
            env={**_environment(cwd), "PEAK_RSS_FILE": str(logs / "peak")},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    killer = threading.Timer(WALL_SECONDS, _kill_group, (child.pid,))
    killer.start()
    try:
        # Wait without reaping: until wait4 below, the pid cannot name another process.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    finally:
        killer.cancel()
        killer.join()
    _kill_group(child.pid)  # anything it left behind
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    ended_by = None
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        ended_by = {
            signal.SIGXCPU: f"the {CPU_SECONDS} s CPU limit",
            signal.SIGKILL: f"the {WALL_SECONDS} s wall-time limit",
        }.get(number, signal.Signals(number).name)
    return Run(
        ret=None if ended_by else child.returncode,
        ended_by=ended_by,
        stdout=(logs / "stdout").read_text(errors="replace"),
        stderr=(logs / "stderr").read_text(errors="replace"),
        peak_rss_mb=_peak_kb(logs / "peak", usage.ru_maxrss) / 1024,
        cpu=usage.ru_utime + usage.ru_stime,
        wall=time.monotonic() - started,
    )


def _peak_kb(path: Path, otherwise: int) -> int:
    """The VmHWM the child wrote as it exited (kB), else its rusage's figure."""
    words = path.read_text().split() if path.exists() else []
    return int(words[1]) if len(words) > 1 else otherwise


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _fifo(name: str) -> Callable[[Path], list[str]]:
    def build(directory: Path) -> list[str]:
        os.mkfifo(directory / name)
        return ["--maestro", name, "--maestro-analyze"]

    return build


def _file(name: str, content: Callable[[], str]) -> Callable[[Path], list[str]]:
    def build(directory: Path) -> list[str]:
        (directory / name).write_text(content(), encoding="utf-8")
        return ["--maestro", name, "--maestro-analyze"]

    return build


def _fifo_agent(directory: Path) -> list[str]:
    (directory / "plan.yaml").write_text(AGENT_PLAN)
    (directory / "agents").mkdir()
    os.mkfifo(directory / AGENT)
    return ["--maestro", "plan.yaml"]


def _alias_bomb() -> str:
    """Nine levels of nine aliases each: 387 million references in 1 kB (billion laughs)."""
    levels = "abcdefghi"
    text = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
        for previous, name in itertools.pairwise(levels)
    )
    return text + "phases:\n  - id: a\n    tags: *i\n"


@dataclass(frozen=True)
class Limited:
    id: str
    build: Callable[[Path], list[str]]  # writes the input, returns pytest's arguments
    error: str | None  # the one error line; None: a plan is fine too, if read in bounded time
    size_limit: bool = False  # the error must say that the input is too big
    xfail: str | None = None

    def param(self) -> object:
        marks = [pytest.mark.xfail(strict=True, reason=self.xfail)] if self.xfail else []
        return pytest.param(self, id=self.id, marks=marks)


LIMITED_CASES = [
    # Two controls: the limits leave room for pytest to refuse a plan, or to analyse one.
    Limited(
        "control-a-syntax-error",
        _file("plan.yaml", lambda: "phases: [\n"),
        "plan.yaml:2: YAML syntax error: *",
    ),
    Limited(
        "control-a-plan",
        _file("plan.yaml", lambda: "phases:\n  - id: a\n  - id: b\n    blocked_by: [a]\n"),
        None,
    ),
    Limited(
        "dev-zero",
        lambda directory: ["--maestro", "/dev/zero", "--maestro-analyze"],
        "/dev/zero: *",
    ),
    Limited(
        "fifo",
        _fifo("plan.yaml"),
        "plan.yaml: *",
    ),
    Limited(
        "plan-of-50-mb",
        _file("big.json", lambda: _one_phase_json(description="x" * 50_000_000)),
        "big.json: *",
        size_limit=True,
    ),
    Limited(
        "field-of-10-mb",
        _file("field.json", lambda: _one_phase_json(name="x" * 10_000_000)),
        "field.json*: *",
        size_limit=True,
    ),
    Limited(
        "phases-100000",
        _file("many.json", lambda: _json({"phases": [{"id": f"p{i}"} for i in range(100_000)]})),
        "many.json*: *",
    ),
    Limited(
        "yaml-alias-bomb",
        _file("bomb.yaml", _alias_bomb),
        "bomb.yaml*: *",
    ),
    Limited(
        "markdown-heading-of-100000-spaces",
        _file("tasks.md", lambda: TASKS + "### T001: a" + " " * 100_000 + "x\n**Depends**: None\n"),
        None,
    ),
    Limited(
        "markdown-100000-backticks",
        _file("tasks.md", lambda: TASKS + "### T001: a\n**File(s)**: " + "`" * 100_000 + "\n"),
        None,
    ),
    Limited(
        "agent-file-a-fifo",
        _fifo_agent,
        AGENT + ": *",
    ),
]


@pytest.mark.skipif(sys.platform != "linux", reason="/dev/zero, FIFOs and rlimits as on Linux")
@pytest.mark.parametrize("case", [case.param() for case in LIMITED_CASES])
def test_what_could_hang_or_exhaust_memory_is_refused_in_bounded_time_and_memory(
    tmp_path: Path, case: Limited
) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "pyproject.toml").write_text("")
    args = case.build(work)
    before = outside_state(work)
    run = run_bounded(work, args, tmp_path / "logs")
    assert run.ended_by is None, (
        f"ended by {run.ended_by} after {run.cpu:.1f} s of CPU, {run.wall:.1f} s\n"
        + run.stderr[-2000:]
    )
    assert run.peak_rss_mb < PEAK_RSS_MB
    assert run.ret is not None
    if case.error is not None or run.ret != 0:
        line = assert_one_clear_error(run.ret, run.stdout, run.stderr, case.error or "*")
        if case.size_limit:
            assert SIZE_WORDS.search(line), line
    else:  # read: the analysis is printed
        assert run.stdout.startswith("Plan: "), run.stdout[:500] + run.stderr[-2000:]
    assert outside_state(work) == before


# -- pytest's cache ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    ['{"a": "soon", "b": NaN}', '{"a": [1], "b": -Infinity}', "[1, 2]", '{"a": 1e999}'],
    ids=["text-and-nan", "list-and-infinity", "a-list", "overflow"],
)
def test_measured_durations_that_are_not_durations_are_left_out(
    pytester: pytest.Pytester, content: str
) -> None:
    """The durations pytest's cache keeps order the next run's phases: a hand-edited or damaged
    cache orders them as if unmeasured, and the run goes on."""
    (pytester.path / "plan.yaml").write_text(SESSION_PLAN)
    assert pytester.runpytest("--maestro", "plan.yaml").ret == 0
    [cached] = (pytester.path / ".pytest_cache" / "v" / "maestro" / "durations").iterdir()
    cached.write_text(content)
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-fresh")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, output
    assert "Traceback" not in output and "INTERNALERROR" not in output
