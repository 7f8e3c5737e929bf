"""Seeing a run through pytest: the terminal summary, the Markdown report, summary.json, the live
session file and ``--maestro-status`` beside a running plan."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.state.document import parse_session
from pytest_maestro.state.journal import read_journal
from pytest_maestro.views.markdown_report import gantt_time
from pytest_maestro.views.outputs import REPORT_MARKER
from pytest_maestro.views.rows import parse_time

from ..helpers import phase, write_plan

FLOW_NODE = re.compile(r'^  (p\d+_\w+)\["([^"]*)"\]:::(\w+)$')
GANTT_TASK = re.compile(
    r"^  ([^:]+?) :(?:(?:done|active|crit), )?(p\d+_\w+), ([\d\- :.]+), ([\d\- :.]+)$"
)

PLAN = [
    phase("a", "true"),
    phase("b", "sleep 0.2", blocked_by=["a"]),
    phase("c", "sleep 0.3", blocked_by=["a"]),
    phase("bad", "false", max_retries=0),
    phase("after-bad", "true", blocked_by=["bad"]),
]


def _mermaid(text: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"```mermaid\n(.*?)```", text, re.S)]


def _gantt_time(text: str) -> float:
    moment = parse_time(text.replace(" ", "T") + "Z")
    assert moment is not None
    return moment.timestamp()


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["in-order", "n2"])
def test_report_summary_and_step_summary_tell_the_same_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: tuple[str, ...]
) -> None:
    write_plan(pytester, PLAN)
    step = pytester.path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    args = (
        "--maestro",
        "plan.yaml",
        "--maestro-report",
        "out/report.md",
        "--maestro-circuit-breaker=0",
    )
    (pytester.path / "out").mkdir()
    result = pytester.runpytest_subprocess(*args, *workers)
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    summary = json.loads((pytester.path / ".maestro" / "summary.json").read_text())
    text = (pytester.path / "out" / "report.md").read_text()
    flow, gantt = _mermaid(text)
    _check_flowchart(flow)
    _check_gantt(gantt, {p["id"]: p for p in summary["phases"]}, distributed=bool(workers))
    _check_summary_json(summary)
    _check_terminal_summary(result)
    # GitHub's step summary: the same report, appended, less the file's marker line
    marker, report = text.split("\n", 1)
    assert marker == REPORT_MARKER
    assert step.read_text() == "earlier step\n" + report
    # the session file's body holds the report too
    session = next((pytester.path / ".maestro").glob("plan-*.md")).read_text()
    assert "\n".join(flow) in session and "| bad | failed | 1 |" in session


def _check_flowchart(flow: list[str]) -> None:
    """A node per phase, its status as class."""
    nodes = {m[2].split(":")[0]: m[3] for line in flow if (m := FLOW_NODE.match(line))}
    assert nodes == {
        "a": "completed",
        "b": "completed",
        "c": "completed",
        "bad": "failed",
        "after-bad": "skipped",
    }


def _check_gantt(gantt: list[str], phases: dict[str, Any], distributed: bool) -> None:
    """One task per phase that ran, at its real times, in its worker's section."""
    section, tasks = "", {}
    for line in gantt:
        if line.startswith("  section "):
            section = line.split(" ", 3)[3]
        elif m := GANTT_TASK.match(line):
            tasks[m[1]] = (section, _gantt_time(m[3]), _gantt_time(m[4]))
    assert sorted(tasks) == ["a", "b", "bad", "c"]
    for pid, (worker, start, end) in tasks.items():
        recorded = phases[pid]
        assert worker == recorded["worker"] == (worker if distributed else "main")
        assert abs(start - parse_time(recorded["start"]).timestamp()) < 0.001  # type: ignore[union-attr]
        assert abs(end - parse_time(recorded["finish"]).timestamp()) < 0.001  # type: ignore[union-attr]
        assert end >= start
    assert tasks["b"][1] >= tasks["a"][2] and tasks["c"][1] >= tasks["a"][2]


def _check_summary_json(summary: dict[str, Any]) -> None:
    """Maestro's dispatch fields, then ours."""
    assert {k: summary[k] for k in ("batch_status", "total_agents", "succeeded", "failed")} == {
        "batch_status": "partial_failure",
        "total_agents": 4,
        "succeeded": 3,
        "failed": 1,
    }
    assert {a["phase"]: a["exit_code"] for a in summary["agents"]} == {
        "a": 0,
        "b": 0,
        "c": 0,
        "bad": 1,
    }
    phases = {p["id"]: p for p in summary["phases"]}
    assert phases["bad"]["error"] == "command exited 1: false"
    assert phases["after-bad"]["error"] == "dependency 'bad' failed"
    assert summary["wall_time_seconds"] >= 0.3


def _check_terminal_summary(result: pytest.RunResult) -> None:
    """The table, the totals, the path as it ran, where things are."""
    result.stdout.fnmatch_lines(
        [
            "*- maestro -*",
            "phase*status*attempts*duration*agent*worker*tokens*cost*unverified*note",
            "a *completed*1*",
            "bad *failed*1*command exited 1: false",
            "after-bad *skipped*dependency 'bad' failed",
            "5 phases: 3 completed, 1 failed, 1 skipped; tokens 0 in, 0 out, 0 cached; cost $0",
            "wall time * against * of phase time (*x)",
            "critical path as it ran: a -> c (*s)",
            "logs: .maestro/logs",
            "session: .maestro/plan-*.md",
            "summary: .maestro/summary.json",
            "report: out/report.md",
            "step summary: step-summary.md",
        ]
    )


def test_a_report_that_cannot_be_written_is_one_line(pytester: pytest.Pytester) -> None:
    # Its folder was free as the run began; a phase made a file of that name meanwhile.
    write_plan(pytester, [phase("a", "mkdir -p out && touch out/dir")])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-report", "out/dir/r.md")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["could not write the report out/dir/r.md: Not a directory"])
    assert "Traceback" not in result.stdout.str()


class ThreadsSeen:
    """A plugin that notes the threads alive whenever a phase's report arrives."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def pytest_runtest_logreport(self) -> None:
        self.names.update(t.name for t in threading.enumerate())


# What the session file says of phase 'a': the opening fold wrote it pending, so 'in_progress'
# or 'completed' there before the run ends is the live view's doing.
A_SEEN_LIVE = "grep -A3 '^- id: a$' .maestro/plan-*.md | grep -Eq 'status: (in_progress|completed)'"


def test_the_live_view_writes_while_the_run_lives_and_no_thread_outlives_it(
    pytester: pytest.Pytester,
) -> None:
    write_plan(pytester, [phase("a", "sleep 1.5"), phase("b", A_SEEN_LIVE, blocked_by=["a"])])
    seen = ThreadsSeen()
    pytester.runpytest("--maestro", "plan.yaml", plugins=[seen]).assert_outcomes(passed=2)
    assert "maestro-snapshot" in seen.names
    assert [t.name for t in threading.enumerate() if t.name == "maestro-snapshot"] == []


# -- beside a running plan -----------------------------------------------------------------------

HELD = [
    phase("a", "true"),
    phase("bad", "false", max_retries=0),
    phase("after-bad", "true", blocked_by=["bad"]),
    # holds the run open until the test creates 'go'
    phase("hold", "while [ ! -f go ]; do sleep 0.05; done", blocked_by=["a"]),
]


@pytest.fixture
def held_run(pytester: pytest.Pytester) -> Iterator[subprocess.Popen[bytes]]:
    """A real run under -n 2, held open by phase 'hold' until 'go' exists."""
    write_plan(pytester, HELD)
    command = [sys.executable, "-m", "pytest", "--maestro", "plan.yaml", "-n", "2", "-q"]
    run = subprocess.Popen(
        [*command, "--maestro-circuit-breaker=0"],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield run
    finally:
        (pytester.path / "go").touch()
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()


def _journal_statuses(state: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for journal in state.glob("plan-*.journal"):
        for entry in read_journal(journal)[0]:
            if entry.get("op") == "record":
                found[entry["phase"]] = entry["status"]
    return found


def _snapshot_statuses(state: Path) -> dict[str, str]:
    """What the Markdown file alone says, without its journal: what `cat` sees."""
    for path in state.glob("plan-*.md"):
        doc = parse_session(path.read_text(encoding="utf-8"), str(path))
        return {p.id: p.status.value for p in doc.phases.values()}
    return {}


def _wait(condition: object, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


HELD_STATUSES = {"a": "completed", "bad": "failed", "after-bad": "skipped", "hold": "in_progress"}


@pytest.mark.slow
def test_the_session_file_tells_the_truth_while_the_run_lives(
    pytester: pytest.Pytester, held_run: subprocess.Popen[bytes]
) -> None:
    state = pytester.path / ".maestro"
    _wait(lambda: _journal_statuses(state) == HELD_STATUSES, "the journal to hold every phase")
    # The run is held open: no fold at its end can have written this; the live view did.
    _wait(lambda: _snapshot_statuses(state) == HELD_STATUSES, "the session file to catch up")
    text = next(state.glob("plan-*.md")).read_text()
    flow = _mermaid(text)[0]
    assert any(line.endswith(":::in_progress") and '"hold' in line for line in flow)
    assert held_run.poll() is None, "the run ended: the test proves nothing"


@pytest.mark.slow
def test_status_beside_a_running_plan_and_after_it(
    pytester: pytest.Pytester, held_run: subprocess.Popen[bytes]
) -> None:
    state = pytester.path / ".maestro"
    _wait(lambda: _journal_statuses(state) == HELD_STATUSES, "the journal to hold every phase")
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "--maestro-status")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "maestro: * session *: running (pid *",
            "phase*status*attempts*duration*agent*note",
            "a *completed*",
            "bad *failed*command exited 1: false",
            "after-bad *skipped*dependency 'bad' failed",
            "hold *in_progress*",
        ]
    )
    data = json.loads(
        pytester.runpytest_subprocess(
            "--maestro", "plan.yaml", "--maestro-status=json"
        ).stdout.str()
    )
    assert {p["id"]: p["status"] for p in data["phases"]} == HELD_STATUSES
    assert data["running"].startswith(f"pid {held_run.pid} ")
    assert held_run.poll() is None, "the run ended: the test proves nothing"
    (pytester.path / "go").touch()
    assert held_run.wait(timeout=60) == 1  # 'bad' failed
    after = pytester.runpytest_subprocess("--maestro", "plan.yaml", "--maestro-status=json")
    assert after.ret == 1
    done = json.loads(after.stdout.str())
    assert done["running"] is None and done["phases"][-1]["status"] == "completed"


def test_status_is_zero_when_every_phase_completed(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true"), phase("b", "true", blocked_by=["a"])])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=2)
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-status")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["maestro: plan (plan.yaml), session *: completed", "a *completed*1*"]
    )


def test_status_before_any_run_is_one_line(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true")])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-status")
    assert result.ret == 1
    assert result.stdout.lines == [
        f"maestro: no session of plan.yaml in {pytester.path / '.maestro'} yet: nothing has run"
    ]
    assert not (pytester.path / ".maestro").exists()  # read-only
    data = json.loads(
        pytester.runpytest("--maestro", "plan.yaml", "--maestro-status=json").stdout.str()
    )
    assert [(p["id"], p["status"]) for p in data["phases"]] == [("a", "pending")]


def test_a_corrupt_session_is_one_line_for_status(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true")])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    session = next((pytester.path / ".maestro").glob("plan-*.md"))
    session.write_text("---\nphases: [\n---\n")
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-status")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in result.stderr.lines if line]  # one line
    assert line.startswith(f"ERROR: {session}: frontmatter is not YAML or JSON: "), line
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_status_needs_the_plan(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--maestro-status")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines == ["ERROR: --maestro-status needs the plan: --maestro PLAN"]


def test_a_gantt_time_is_utc_to_the_millisecond_whatever_the_zone() -> None:
    """Mermaid reads ``GANTT_FORMAT``: a moment in another zone is written in UTC, its
    microseconds cut (not rounded) to milliseconds."""
    east = timezone(timedelta(hours=5, minutes=30))
    moment = datetime(2026, 11, 27, 8, 30, 1, 999_999, tzinfo=east)
    assert gantt_time(moment) == "2026-11-27 03:00:01.999"
    whole = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert gantt_time(whole) == "2026-01-02 03:04:05.000"
