"""Malformed plans end the run with one clear line — file, line, phase — and never a traceback.

Every case is checked twice: through ``load_plan`` (the exact message) and through the pytest
command line (``--maestro plan --maestro-analyze``: a non-zero exit and the same line), run in
this process; one case also through a pytest process of its own.
"""

from __future__ import annotations

import gc
import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_maestro.plan import PlanError, load_plan, not_a_plan, paused_gc
from pytest_maestro.plan.validate import _may_be_absolute

from ..helpers import REPO


@dataclass(frozen=True)
class Case:
    id: str
    name: str  # file name of the plan
    content: str | bytes
    message: str  # what follows the plan's path in the error line


def _json(data: object) -> str:
    return json.dumps(data, indent=2)


def _design(tasks: list[dict[str, object]], version: object = 2) -> str:
    return _json({"schemaVersion": version, "goal": "g", "tasks": tasks})


CASES = [
    Case(
        "yaml-syntax",
        "plan.yaml",
        "phases:\n  - id: a\n    run: [echo\n  - id: b\n",
        ":4: YAML syntax error: expected ',' or ']', but got ':' (while parsing a flow sequence)",
    ),
    Case(
        "json-syntax",
        "plan.json",
        '{"phases": [\n  {"id": "a"}\n  {"id": "b"}\n]}\n',
        ":3: JSON syntax error: Expecting ',' delimiter (column 3)",
    ),
    Case(
        "wrong-type",
        "plan.yaml",
        "phases:\n  - id: build\n    run: make\n    timeout: ten\n",
        ":4: phase 'build' field 'timeout' must be a number, got 'ten'",
    ),
    Case(
        "unknown-field",
        "plan.yaml",
        "phases:\n  - id: a\n  - id: b\n    blockd_by: [a]\n",
        ":4: phase 'b' has unknown field 'blockd_by' (did you mean 'blocked_by'?)",
    ),
    Case(
        "unknown-top-level-field",
        "plan.yaml",
        "title: t\nphase:\n  - id: a\nphases:\n  - id: b\n",
        ":2: unknown top-level field 'phase' (did you mean 'phases'?)",
    ),
    Case(
        "missing-id",
        "plan.yaml",
        "phases:\n  - id: a\n  - name: Second\n    run: make\n",
        ":3: phase #2 is missing required field 'id'",
    ),
    Case(
        "cycle",
        "plan.yaml",
        "phases:\n  - id: a\n    blocked_by: c\n  - id: b\n    blocked_by: a\n"
        "  - id: c\n    blocked_by: b\n",
        ":2: phase 'a' dependency cycle: a -> b -> c -> a",
    ),
    Case(
        "self-dependency",
        "plan.yaml",
        "phases:\n  - id: a\n    blocked_by: a\n",
        ":2: phase 'a' depends on itself",
    ),
    Case(
        "dangling-dependency",
        "plan.yaml",
        "phases:\n  - id: a\n  - id: b\n    blocked_by: [a, z]\n",
        ":3: phase 'b' depends on unknown phase 'z'",
    ),
    Case(
        "duplicate-id",
        "plan.json",
        _json({"phases": [{"id": 1}, {"id": "1"}]}),
        ":6: phase '1' duplicate phase id (first defined at line 3)",
    ),
    Case(
        "absolute-path",
        "plan.yaml",
        "phases:\n  - id: a\n    files:\n      create: [/etc/passwd]\n",
        ":2: phase 'a' file '/etc/passwd' is absolute; plan paths are relative to the project root",
    ),
    Case(
        "dotdot-path",
        "plan.yaml",
        "phases:\n  - id: a\n    reads: [../secret.txt]\n",
        ":2: phase 'a' file '../secret.txt' leaves the project root ('..')",
    ),
    Case("empty-document", "plan.yaml", "", ": the plan is empty"),
    Case(
        "yaml-scalar",
        "plan.yaml",
        "just a sentence, not a plan\n",
        ": not a plan: expected a 'phases' list (native or Maestro phases JSON), 'tasks' with "
        "'schemaVersion' (design-v2) or 'tasks' with 'title' (taskmaster), found a string",
    ),
    Case(
        "markdown-without-phases",
        "plan.md",
        "# Meeting notes\n\nWe talked about the weather.\n",
        ": " + not_a_plan(),
    ),
    Case(
        "other-json-schema",
        "package.json",
        _json({"name": "web", "version": "1.0.0", "scripts": {"test": "jest"}}),
        ": not a plan: expected a 'phases' list (native or Maestro phases JSON), 'tasks' with "
        "'schemaVersion' (design-v2) or 'tasks' with 'title' (taskmaster), found a mapping "
        "with keys 'name', 'version', 'scripts'",
    ),
    Case(
        "other-yaml-schema",
        "docker-compose.yml",
        "services:\n  web:\n    image: nginx\n",
        ": not a plan: expected a 'phases' list (native or Maestro phases JSON), 'tasks' with "
        "'schemaVersion' (design-v2) or 'tasks' with 'title' (taskmaster), found a mapping "
        "with keys 'services'",
    ),
    Case(
        "design-v2-schema-version-3",
        "plan.json",
        _design([{"subject": "a"}], version=3),
        ":2: schemaVersion 3 is not supported (this reader reads design plans of schemaVersion 2)",
    ),
    Case(
        "design-v2-bad-blockedby-index",
        "plan.json",
        _design([{"subject": "a"}, {"subject": "b", "blockedBy": [0, 4]}]),
        ":12: phase '1' blockedBy index 4 is out of range: the plan has 2 tasks (0-1)",
    ),
    Case(
        "design-v2-blockedby-not-a-list",
        "plan.json",
        _design([{"subject": "a"}, {"subject": "b", "blockedBy": "0"}]),
        ":10: phase '1' field 'blockedBy' must be a list of task indices, got '0'",
    ),
    Case(
        "design-v2-no-tasks",
        "plan.json",
        _design([]),
        ":4: field 'tasks' must not be an empty list",
    ),
    Case(
        "not-utf8",
        "plan.yaml",
        b"phases:\n  - id: caf\xe9\n",
        ":2: not UTF-8 text",
    ),
    Case(
        "id-with-colons",
        "plan.yaml",
        "phases:\n  - id: a::b\n",
        ":2: phase 'a::b' invalid phase id: it must be non-empty and contain no '::', '[', ']' or "
        "control characters",
    ),
    Case(
        "empty-phases",
        "plan.yaml",
        "title: nothing to do\nphases: []\n",
        ":2: field 'phases' must not be an empty list",
    ),
    Case(
        "phases-not-a-list",
        "plan.yaml",
        "phases: build everything\n",
        ":1: field 'phases' must be a list, got 'build everything'",
    ),
    Case(
        "two-yaml-documents",
        "plan.yaml",
        "phases:\n  - id: a\n---\nphases:\n  - id: b\n",
        ":3: YAML syntax error: but found another document "
        "(expected a single document in the stream)",
    ),
    Case(
        "duplicate-yaml-key",
        "plan.yaml",
        "phases:\n  - id: a\n    run: make\n    run: make test\n",
        ":4: duplicate key 'phases[0].run'",
    ),
    Case(
        "bad-severity",
        "plan.yaml",
        "phases:\n  - id: a\n    assumptions:\n      - claim: db up\n        severity: fatal\n",
        ":5: phase 'a' field 'assumptions[0].severity' must be one of 'blocking', 'warning', "
        "got 'fatal'",
    ),
    Case(
        "maestro-blocked-by-not-a-list",
        "phases.json",
        _json([{"id": 1, "name": "a", "agent": "coder", "parallel": True, "blocked_by": 0}]),
        ":7: phase '1' field 'blocked_by' must be a list or null, got 0",
    ),
    Case(
        "json-list-of-strings",
        "plan.json",
        _json(["build", "test"]),
        ": not a plan: expected a 'phases' list (native or Maestro phases JSON), 'tasks' with "
        "'schemaVersion' (design-v2) or 'tasks' with 'title' (taskmaster), found a list",
    ),
]


def _write(directory: Path, case: Case) -> Path:
    path = directory / case.name
    if isinstance(case.content, bytes):
        path.write_bytes(case.content)
    else:
        path.write_text(case.content, encoding="utf-8")
    return path


def test_there_are_at_least_twenty_distinct_cases() -> None:
    assert len({case.id for case in CASES}) == len(CASES) >= 20
    assert len({case.content for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_load_plan_gives_the_one_line_error(tmp_path: Path, case: Case) -> None:
    path = _write(tmp_path, case)
    with pytest.raises(PlanError) as info:
        load_plan(path)
    assert str(info.value) == f"{path}{case.message}"
    assert "\n" not in str(info.value)


def _plugin_args() -> list[str]:
    """Load the plugin with ``-p`` only when it is not installed as a pytest11 entry point."""
    installed = any(
        entry.value == "pytest_maestro.plugin"
        for entry in importlib.metadata.entry_points(group="pytest11")
    )
    return [] if installed else ["-p", "pytest_maestro.plugin"]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_command_line_reports_the_error_without_traceback(
    pytester: pytest.Pytester, case: Case
) -> None:
    if importlib.util.find_spec("pytest_maestro.plugin") is None:
        pytest.skip("the pytest plugin is not written yet")
    path = _write(pytester.path, case)
    result = pytester.runpytest(*_plugin_args(), "--maestro", str(path), "--maestro-analyze")
    _assert_the_one_line(result, case)


def test_command_line_in_a_process_of_its_own_reports_the_error_without_traceback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cases above run pytest in this process; one goes through a pytest of its own, as a
    # user's command line does: its exit status and what reaches its stderr.
    if importlib.util.find_spec("pytest_maestro.plugin") is None:
        pytest.skip("the pytest plugin is not written yet")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    [case] = [case for case in CASES if case.id == "yaml-syntax"]
    path = _write(pytester.path, case)
    result = pytester.runpytest_subprocess(
        *_plugin_args(), "--maestro", str(path), "--maestro-analyze"
    )
    _assert_the_one_line(result, case)


def _assert_the_one_line(result: pytest.RunResult, case: Case) -> None:
    output = result.stdout.str() + "\n" + result.stderr.str()
    assert result.ret != 0
    # The plugin may print the path as given or relative to the rootdir; the rest is exact.
    assert f"{case.name}{case.message}" in output
    assert "Traceback" not in output


@pytest.mark.parametrize("case", CASES[:3], ids=[case.id for case in CASES[:3]])
def test_a_failed_load_turns_the_garbage_collector_back_on(tmp_path: Path, case: Case) -> None:
    # load_plan pauses the collector for speed (paused_gc); an error must not leave it off.
    assert gc.isenabled()
    with pytest.raises(PlanError):
        load_plan(_write(tmp_path, case))
    assert gc.isenabled()


def test_paused_gc_keeps_a_caller_s_choice() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block must not turn it on under the outer one
    assert gc.isenabled()


@pytest.mark.parametrize("closed", [False, True], ids=["chain", "cycle"])
def test_a_long_chain_written_backwards_is_validated_without_recursion(
    tmp_path: Path, closed: bool
) -> None:
    # Each phase depends on the one written after it, so validation must look for a cycle.
    size = 10_000
    phases = [{"id": f"p{i}", "blocked_by": [f"p{i + 1}"]} for i in range(size - 1)]
    phases.append({"id": f"p{size - 1}", "blocked_by": ["p0"] if closed else []})
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"phases": phases}, indent=0))
    if not closed:
        assert load_plan(path).phases[0].blocked_by == ("p1",)
        return
    with pytest.raises(PlanError) as error:
        load_plan(path)
    first = " -> ".join(["p0", "p9999", "p9998", "p9997", "p9996", "p9995"])
    last = " -> ".join(["p4", "p3", "p2", "p1", "p0"])
    assert str(error.value) == (
        f"{path}:3: phase 'p0' dependency cycle of {size} phases: {first} -> … (9990 more) … -> "
        + last
    )


_PATH_TEXT = st.text(alphabet="/\\:.aC ?", max_size=8)


@given(_PATH_TEXT)
def test_the_absolute_path_prefilter_never_misses_an_absolute_path(path: str) -> None:
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute():
        assert _may_be_absolute(path)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/passwd", "file '/etc/passwd' is absolute"),
        ("C:\\src\\a.py", "file 'C:\\\\src\\\\a.py' is absolute"),
        ("c:/src/a.py", "file 'c:/src/a.py' is absolute"),
        ("//server/share/a.py", "file '//server/share/a.py' is absolute"),
        ("src/../../a.py", "file 'src/../../a.py' leaves the project root"),
        ("src\\..\\a.py", "file 'src\\\\..\\\\a.py' leaves the project root"),
    ],
)
def test_absolute_and_escaping_paths_are_refused(tmp_path: Path, path: str, message: str) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"phases": [{"id": "a", "files": {"modify": [path]}}]}))
    with pytest.raises(PlanError, match=re.escape(message)):
        load_plan(plan)


@pytest.mark.parametrize("path", ["C:", "a:b", "..a/b", "a..b", "./a", "x/:y", "C:relative"])
def test_paths_that_only_look_odd_are_accepted(tmp_path: Path, path: str) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"phases": [{"id": "a", "reads": [path]}]}))
    # in normal form: one spelling per file
    assert load_plan(plan).phases[0].reads == ("a" if path == "./a" else path,)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("estimate", 0, None),
        ("estimate", -1, "field 'estimate' must be a number >= 0 and <= 604800, got -1"),
        ("timeout", 0.5, None),
        ("timeout", float("inf"), "field 'timeout' must be a number > 0 and <= 604800, got inf"),
        ("timeout", 604801, "field 'timeout' must be a number > 0 and <= 604800, got 604801"),
        (
            "budget_usd",
            float("nan"),
            "field 'budget_usd' must be a number > 0 and <= 1e+06, got nan",
        ),
        ("max_retries", 100, None),
        ("max_retries", 101, "field 'max_retries' must be a whole number >= 0 and <= 100, got 101"),
        ("max_retries", -1, "field 'max_retries' must be a whole number >= 0 and <= 100, got -1"),
    ],
)
def test_numbers_of_a_phase_are_finite_and_in_range(
    tmp_path: Path, field: str, value: float, error: str | None
) -> None:
    from pytest_maestro.plan.model import Phase, Plan
    from pytest_maestro.plan.validate import validate

    plan = Plan(tmp_path / "p.yaml", "native", (Phase("a", "A", line=2, **{field: value}),))
    if error is None:
        assert getattr(validate(plan).plan.phases[0], field) == value
        return
    with pytest.raises(PlanError) as raised:
        validate(plan)
    assert str(raised.value) == f"{tmp_path / 'p.yaml'}:2: phase 'a' {error}"
