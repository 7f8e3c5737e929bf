"""What a run leaves to read, across runs: where the report may go, what a refused run leaves
alone, what ``batch_status`` says of a run that did not do it all, and the files' permissions."""

from __future__ import annotations

import json
import os
import re
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pytest_maestro.state.model import PhaseState, SessionDoc, Status
from pytest_maestro.views.outputs import (
    MERMAID_LIMIT,
    REPORT_MARKER,
    STEP_SUMMARY_LIMIT,
    write_outputs,
)
from pytest_maestro.views.rows import view
from pytest_maestro.views.summary import summary_dict, summary_json

from ..helpers import phase, write_plan

PLAN = [phase("a", "true"), phase("b", "true", blocked_by=["a"])]


def _summary(pytester: pytest.Pytester) -> dict[str, object]:
    data: dict[str, object] = json.loads((pytester.path / ".maestro" / "summary.json").read_text())
    return data


def test_a_report_inside_the_state_dir_is_refused_in_one_line(pytester: pytest.Pytester) -> None:
    write_plan(pytester, PLAN)
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-report", ".maestro/report.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line] == [
        "ERROR: --maestro-report .maestro/report.md is inside the state dir .maestro, which "
        "holds only the session's own files: write the report elsewhere"
    ]
    assert not (pytester.path / ".maestro" / "report.md").exists()
    # the state dir is still the tool's own: the next run uses it
    pytester.runpytest("--maestro", "plan.yaml", "--maestro-report", "report.md").assert_outcomes(
        passed=2
    )
    assert (pytester.path / "report.md").is_file()


@pytest.mark.parametrize(
    ("report", "content", "why"),
    [
        ("plan.yaml", None, "is the plan"),
        ("./plan-link.yaml", None, "is the plan"),
        ("notes.md", "# my notes\n", "holds a file this tool did not write"),
        ("report.md", "an earlier report by hand\n", "holds a file this tool did not write"),
    ],
    ids=["the-plan", "the-plan-through-a-link", "notes", "a-hand-written-report"],
)
def test_a_report_over_the_plan_or_a_users_file_is_refused_in_one_line(
    pytester: pytest.Pytester, report: str, content: str | None, why: str
) -> None:
    plan = write_plan(pytester, [phase("a", "touch ran.txt")])
    (pytester.path / "plan-link.yaml").symlink_to("plan.yaml")
    if content is not None:
        (pytester.path / report).write_text(content)
    before = (pytester.path / report).read_bytes()
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-report", report)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if line]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ERROR: --maestro-report {report} {why}"), lines
    assert (pytester.path / report).read_bytes() == before
    assert plan.is_file()
    assert not (pytester.path / "ran.txt").exists()


def test_a_report_in_folders_not_there_yet_is_written_there(pytester: pytest.Pytester) -> None:
    """As pytest's --junitxml makes its folders: not found out after the run, as a report
    that could not be written."""
    write_plan(pytester, [phase("a", "true")])
    report = pytester.path / "out" / "ci" / "report.md"
    ran = pytester.runpytest("--maestro", "plan.yaml", "--maestro-report", "out/ci/report.md")
    ran.assert_outcomes(passed=1)
    assert "could not write" not in ran.stdout.str()
    assert report.read_text().startswith(REPORT_MARKER)


def test_a_report_this_tool_wrote_is_rewritten_and_an_empty_file_taken(
    pytester: pytest.Pytester,
) -> None:
    write_plan(pytester, PLAN)
    (pytester.path / "report.md").write_text("")
    args = ("--maestro", "plan.yaml", "--maestro-report", "report.md", "--maestro-fresh")
    pytester.runpytest(*args).assert_outcomes(passed=2)
    first = (pytester.path / "report.md").read_text()
    assert "| a | completed | 1 |" in first
    pytester.runpytest(*args).assert_outcomes(passed=2)
    assert (pytester.path / "report.md").read_text() != first  # a new run's report


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["in-order", "n2"])
def test_a_refused_run_leaves_the_last_runs_outputs_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: tuple[str, ...]
) -> None:
    write_plan(pytester, PLAN)
    step = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    args = ("--maestro", "plan.yaml", "--maestro-report", "report.md", *workers)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)
    files = [pytester.path / "report.md", pytester.path / ".maestro" / "summary.json", step]
    before = [path.read_text() for path in files]
    assert "| a | completed | 1 |" in before[0]
    refused = pytester.runpytest_subprocess(*args, "--maestro-runtime", "nope")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "which no installed plugin provides" in refused.stdout.str() + refused.stderr.str()
    assert [path.read_text() for path in files] == before
    assert "- maestro -" not in refused.stdout.str()


def test_batch_status_is_success_only_when_every_phase_completed(
    pytester: pytest.Pytester,
) -> None:
    write_plan(pytester, PLAN)
    before = pytester.runpytest("--maestro", "plan.yaml", "--maestro-status=json")
    assert json.loads(before.stdout.str())["batch_status"] == "pending"
    pytester.runpytest("--maestro", "plan.yaml", "plan.yaml::a").assert_outcomes(passed=1)
    assert _summary(pytester)["batch_status"] == "incomplete"  # b was not selected
    status = pytester.runpytest("--maestro", "plan.yaml", "--maestro-status=json")
    assert (json.loads(status.stdout.str())["batch_status"], status.ret) == ("incomplete", 1)
    pytester.runpytest("--maestro", "plan.yaml")
    assert _summary(pytester)["batch_status"] == "success"


TASKS = {
    "alpha": {"tasks": [{"id": 1, "title": "one"}]},
    "beta": {"tasks": [{"id": 1, "title": "x"}, {"id": 2, "title": "y", "dependencies": [1]}]},
}


def test_status_reads_the_tag_it_is_given(pytester: pytest.Pytester) -> None:
    (pytester.path / "tasks.json").write_text(json.dumps(TASKS))
    args = ("--maestro", "tasks.json", "--maestro-tag", "beta")
    result = pytester.runpytest(*args, "--maestro-status=json")
    assert result.ret == 1, result.stderr.str()
    data = json.loads(result.stdout.str())
    assert [(p["id"], p["name"]) for p in data["phases"]] == [("1", "x"), ("2", "y")]
    text = pytester.runpytest(*args, "--maestro-status")
    assert text.ret == 1
    text.stdout.fnmatch_lines(["maestro: no session of tasks.json in * yet: nothing has run"])


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_outputs_keep_a_files_mode_and_new_ones_get_the_umasks(
    pytester: pytest.Pytester,
) -> None:
    write_plan(pytester, PLAN)
    report = pytester.path / "report.md"
    pytester.runpytest("--maestro", "plan.yaml", "--maestro-report", "report.md", "--maestro-fresh")
    report.chmod(0o640)
    pytester.runpytest("--maestro", "plan.yaml", "--maestro-report", "report.md", "--maestro-fresh")
    assert "| a | completed | 1 |" in report.read_text()
    assert stat.S_IMODE(report.stat().st_mode) == 0o640
    summary = pytester.path / ".maestro" / "summary.json"
    assert stat.S_IMODE(summary.stat().st_mode) == 0o666 & ~_umask()
    other = pytester.path / "new.md"
    pytester.runpytest("--maestro", "plan.yaml", "--maestro-report", "new.md")
    assert stat.S_IMODE(other.stat().st_mode) == 0o666 & ~_umask()


def _big_session(phases: int) -> SessionDoc:
    """A run of ``phases`` phases on four workers, each waiting for the one before."""
    doc = SessionDoc("s1", "Big", "plan.yaml", "2026-03-01T11:00:00Z", "", run_started=_at(0))
    for i in range(phases):
        pid = f"phase-{i:05d}"
        doc.phases[pid] = PhaseState(
            pid,
            f"Phase number {i} with a name long enough to matter",
            status=Status.COMPLETED,
            started=_at(i + 1),
            completed=_at(i + 2),
            worker=f"gw{i % 4}",
            attempts=1,
            blocked_by=(f"phase-{i - 1:05d}",) if i else (),
        )
    return doc


def _at(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)


def test_the_step_summary_of_a_big_plan_stays_within_what_github_takes(tmp_path: Path) -> None:
    doc = _big_session(15_000)
    step = tmp_path / "step.md"
    step.write_text("x" * 300_000 + "\n")  # what the step wrote before
    env = {"GITHUB_STEP_SUMMARY": str(step)}
    written = write_outputs(doc, doc.phases, tmp_path / "summary.json", tmp_path / "report.md", env)
    assert written.problems == () and written.step_summary == step
    appended = step.read_text()[300_001:]
    assert step.stat().st_size <= STEP_SUMMARY_LIMIT
    assert "```mermaid" not in appended
    assert re.search(r"^The flowchart \(\d+ characters\) is left out here", appended, re.M)
    assert re.search(r"^The Gantt chart \(\d+ characters\) is left out here", appended, re.M)
    kept = re.findall(r"^\| phase-\d+ \| completed \|", appended, re.M)
    assert 5_000 < len(kept) < 15_000
    assert f"{15_000 - len(kept)} more phases left out here" in appended
    # the report itself keeps it all
    report = (tmp_path / "report.md").read_text()
    assert report.count("```mermaid") == 2
    assert len(re.findall(r"^\| phase-\d+ \| completed \|", report, re.M)) == 15_000


def test_a_step_summary_keeps_the_diagrams_that_render(tmp_path: Path) -> None:
    doc = _big_session(300)
    step = tmp_path / "step.md"
    written = write_outputs(
        doc, doc.phases, tmp_path / "summary.json", None, {"GITHUB_STEP_SUMMARY": str(step)}
    )
    assert written.step_summary == step
    text = step.read_text()
    assert text.count("```mermaid") == 2 and "left out" not in text
    assert all(len(block) < MERMAID_LIMIT for block in re.findall(r"```mermaid.*?```", text, re.S))


def test_the_summary_says_what_summary_dict_says_a_line_per_phase(tmp_path: Path) -> None:
    doc = _big_session(30)
    doc.phases["phase-00003"] = PhaseState("phase-00003", 'a "quoted" näme\nover two lines')
    run = view(doc, T0 + timedelta(hours=1), doc.phases, done=["phase-00001"])
    text = summary_json(run)
    assert json.loads(text) == json.loads(json.dumps(summary_dict(run)))
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}"
    phases = [line for line in lines if line.startswith('    {"id": "phase-')]
    assert len(phases) == 30  # each phase on a line of its own, whole
    assert all(json.loads(line.rstrip(",")) for line in phases)
    assert "näme" in text  # as written, not escaped
