"""The final review end to end: ``pytest --maestro … --maestro-final-review`` with the fake CLIs
of tests/fakes first on PATH, whose reviewer answers the final review's prompt with findings
naming phases (_fake_reviewer.py, the FAKE:FINAL_ markers)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.state import Tokens, read_session

from ..helpers import assert_phases, git_repo, write_plan

pytestmark = pytest.mark.usefixtures("fakes")  # tests/phase/conftest.py


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    """The project a git work tree with one commit, its state dir ignored."""
    root = git_repo(pytester.path)
    (root / ".gitignore").write_text(".maestro/\n")
    (root / "README").write_text("the project\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    return root


def calls(state: Path) -> list[dict[str, Any]]:
    path = state / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def finals(state: Path) -> list[dict[str, Any]]:
    return [call for call in calls(state) if call["phase_id"] == "final-review"]


def session(pytester: pytest.Pytester) -> Any:
    [snapshot] = (pytester.path / ".maestro").glob("plan-*.md")
    return read_session(snapshot)


def writes(pid: str, text: str = "", **fields: Any) -> dict[str, Any]:
    """A phase whose agent writes ``<pid>.txt``, with ``text`` in its task (markers)."""
    return {
        "id": pid,
        "name": pid.upper(),
        "description": f"FAKE:EDIT {pid}.txt={pid} done\n{text}",
        "files": {"create": [f"{pid}.txt"]},
        "acceptance": [f"{pid}.txt says it is done"],
        **fields,
    }


RUN = (
    "--maestro", "plan.yaml", "--maestro-runtime=claude", "--maestro-autonomous",
    "--maestro-final-review", "--junitxml=out.xml",
)  # fmt: skip


def test_the_final_review_runs_last_on_the_whole_change_and_passes(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    write_plan(pytester, [writes("a"), writes("b", blocked_by=["a"])], title="Greeter")
    result = pytester.runpytest(*RUN, "-v", "--maestro-report=report.md")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*plan.yaml::a PASSED*", "*plan.yaml::b PASSED*", "*plan.yaml::final-review PASSED*"]
    )
    assert [c["phase_id"] for c in calls(fakes)] == ["a", "b", "final-review"]
    logs = repo / ".maestro" / "logs"
    prompt = (logs / "final-review.attempt-1.review.prompt.md").read_text()
    assert prompt.startswith("Final review of plan Greeter: 2 phases\n")
    assert "### a: A\n" in prompt and "- criterion: b.txt says it is done" in prompt
    assert "The ids: a, b." in prompt
    diff = (logs / "final-review.attempt-1.review.diff").read_text()
    assert "+++ b/a.txt\n@@ -0,0 +1 @@\n+a done\n" in diff and "+b done" in diff
    assert ".maestro" not in diff
    # read-only, whatever --maestro-autonomous says
    assert finals(fakes)[0]["argv"][-2:] == ["--permission-mode", "dontAsk"]
    doc = session(pytester)
    record = doc.final_review
    assert record["review"]["passed"] is True and record["base"]
    # Its spend is the session's too: the token usage adds it, under its reviewer.
    spent = Tokens.from_mapping(record["review"]["tokens"], "tokens")
    assert spent.input > 0 and doc.by_agent["reviewer (claude)"] == spent
    phases = sum((state.tokens for state in doc.phases.values()), Tokens())
    assert doc.tokens == phases + spent
    result.stdout.fnmatch_lines(["final-review  completed  1 *reviewer (claude)*passed*"])
    summary = json.loads((repo / ".maestro" / "summary.json").read_text())
    assert summary["final_review"]["status"] == "completed"
    [case] = [
        c for c in ET.parse(repo / "out.xml").iter("testcase") if c.get("name") == "final-review"
    ]
    assert case.find("failure") is None
    assert "| final-review | completed |" in (repo / "report.md").read_text()


def test_a_failed_final_review_names_phases_and_lf_reruns_them_told_the_findings(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    finding = "FAKE:FINAL_BLOCKING_FIRST a,c a.txt:1: a and c disagree on the greeting"
    write_plan(pytester, [writes("a", finding), writes("b"), writes("c", blocked_by=["a"])])
    first = pytester.runpytest(*RUN)
    first.assert_outcomes(passed=3, failed=1)
    line = "final review: [blocking] a.txt:1: a and c disagree on the greeting (phases a, c)"
    first.stdout.fnmatch_lines(
        [
            "final review by reviewer (claude): failed, 1 blocking",
            "    [blocking] a.txt:1: a and c disagree on the greeting (phases a, c)",
            "sent back to work: a, c (the next run runs them again, *",
            "FAILED plan.yaml::final-review - final review: ?blocking? a.txt:1: *",
        ]
    )
    [case] = [
        c for c in ET.parse(repo / "out.xml").iter("testcase") if c.get("name") == "final-review"
    ]
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == line
    props = {p.get("name"): p.get("value") for p in ET.parse(repo / "out.xml").iter("property")}
    assert props["maestro.final-review.sent_back"] == "a, c"
    lastfailed = json.loads((repo / ".pytest_cache/v/cache/lastfailed").read_text())
    assert sorted(lastfailed) == ["plan.yaml::a", "plan.yaml::c", "plan.yaml::final-review"]

    again = pytester.runpytest(*RUN, "--lf", "-v")
    again.assert_outcomes(passed=3, deselected=1)
    again.stdout.fnmatch_lines(
        [
            "*plan.yaml::a PASSED*",
            "*plan.yaml::c PASSED*",
            "*plan.yaml::final-review PASSED*",
            "phase 'a' runs again: the final review found: ?blocking? a.txt:1: *",
        ]
    )
    assert [c["phase_id"] for c in calls(fakes)][4:] == ["a", "c", "final-review"]
    prompt = (repo / ".maestro" / "logs" / "c.attempt-1.prompt.md").read_text()
    assert (
        "## What the final review of the run found in this phase's work\n"
        "[blocking] a.txt:1: a and c disagree on the greeting (phases a, c)\n"
    ) in prompt
    assert session(pytester).final_review["review"]["passed"] is True


def test_skipped_with_the_reason_when_a_phase_failed_and_lf_runs_both(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    checked = {"criterion": "it is fixed", "check": "test -e fixed"}
    write_plan(pytester, [writes("a"), writes("b", max_retries=0, acceptance=[checked])])
    result = pytester.runpytest(*RUN, "-rs", "--maestro-circuit-breaker=0")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [1] plan.yaml:1: phase 'b' failed"])
    assert finals(fakes) == []
    lastfailed = json.loads((repo / ".pytest_cache/v/cache/lastfailed").read_text())
    assert sorted(lastfailed) == ["plan.yaml::b", "plan.yaml::final-review"]
    (repo / "fixed").touch()
    again = pytester.runpytest(*RUN, "--lf", "-v")
    again.assert_outcomes(passed=2, deselected=1)
    again.stdout.fnmatch_lines(["*plan.yaml::b PASSED*", "*plan.yaml::final-review PASSED*"])


def test_a_resumed_run_does_not_redo_a_passed_final_review_but_reviews_new_work(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    write_plan(pytester, [writes("a")])
    pytester.runpytest(*RUN).assert_outcomes(passed=2)
    resumed = pytester.runpytest(*RUN, "-rs")
    assert_phases(resumed, earlier=2)  # the phase, and the final review that passed
    assert len(finals(fakes)) == 1
    write_plan(pytester, [writes("a"), writes("b")])  # a new phase: new work to review
    grown = pytester.runpytest(*RUN)
    assert_phases(grown, passed=2, earlier=1)
    assert len(finals(fakes)) == 2
    diff = (repo / ".maestro" / "logs" / "final-review.attempt-1.review.diff").read_text()
    assert "+a done" in diff and "+b done" in diff  # the session's whole change, from its base


def test_a_final_review_naming_a_phase_the_plan_lacks_is_asked_again_then_fails(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    write_plan(pytester, [writes("a", "FAKE:FINAL_BLOCKING nosuch x.py:1: wrong")])
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "final review by reviewer (claude) failed: the reviewer's answer is not in the shape "
            "asked for, twice: finding 1 names phase 'nosuch', which the plan lacks",
        ]
    )
    assert len(finals(fakes)) == 2
    assert session(pytester).phases["a"].status.value == "completed"  # nothing sent back


def test_outside_git_the_change_is_the_declared_files(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    (pytester.path / "a.txt").write_text("before\n")
    write_plan(pytester, [{**writes("a"), "files": {"modify": ["a.txt"]}}])
    pytester.runpytest(*RUN).assert_outcomes(passed=2)
    diff = (pytester.path / ".maestro" / "logs" / "final-review.attempt-1.review.diff").read_text()
    assert diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-before\n+a done\n"
    assert list((pytester.path / ".maestro").glob("plan-*.base"))


def test_the_model_is_the_final_review_model_else_the_escalation_model(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    write_plan(pytester, [writes("a")])
    result = pytester.runpytest(*RUN, "--maestro-escalate-model=big")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["maestro: final review by reviewer (claude) on model big, once every phase passed"]
    )
    argv = finals(fakes)[-1]["argv"]
    assert argv[argv.index("--model") + 1] == "big"
    pytester.runpytest(
        *RUN, "--maestro-fresh", "--maestro-escalate-model=big", "--maestro-final-review-model=huge"
    ).assert_outcomes(passed=2)
    argv = finals(fakes)[-1]["argv"]
    assert argv[argv.index("--model") + 1] == "huge"


def test_deselected_by_k_it_does_not_run(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    write_plan(pytester, [writes("a")])
    pytester.runpytest(*RUN, "-k", "not final").assert_outcomes(passed=1, deselected=1)
    assert finals(fakes) == []


@pytest.mark.parametrize(
    ("args", "phase_id", "line"),
    [
        (
            [],
            "final-review",
            "ERROR: plan.yaml:*: phase 'final-review' has the final review's name "
            "(--maestro-final-review adds an item of that name): rename the phase",
        ),
        (
            ["--maestro-reviewer=copilot"],
            "a",
            "ERROR: plan.yaml: --maestro-final-review, but its reviewer 'copilot' would run on "
            "'copilot', which has no read-only mode; a reviewer runs on claude, *",
        ),
    ],
    ids=["its-name-taken", "no-read-only"],
)
def test_a_final_review_that_cannot_run_is_refused_in_one_line(
    pytester: pytest.Pytester, fakes: Path, args: list[str], phase_id: str, line: str
) -> None:
    write_plan(pytester, [writes(phase_id)])
    result = pytester.runpytest(*RUN, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line])
    assert "Traceback" not in result.stderr.str()
    assert calls(fakes) == []


@pytest.mark.slow
def test_under_xdist_it_runs_once_every_phase_finished(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    """Three phases side by side on two workers, one slow: the final review starts only after
    the last of them finished, on a worker of its own."""
    write_plan(
        pytester,
        [writes("a", "FAKE:SLEEP=1.5"), writes("b", "FAKE:SLEEP=0.3"), writes("c")],
    )
    result = pytester.runpytest_subprocess(*RUN, "-n", "2")
    result.assert_outcomes(passed=4)
    summary = json.loads((repo / ".maestro" / "summary.json").read_text())
    last = max(row["finish"] for row in summary["phases"])
    assert summary["final_review"]["start"] > last
    assert [c["phase_id"] for c in calls(fakes)][-1] == "final-review"
    assert session(pytester).final_review["review"]["passed"] is True


@pytest.mark.slow
def test_under_xdist_lf_after_a_failed_final_review_reruns_the_named_phases(
    pytester: pytest.Pytester, repo: Path, fakes: Path
) -> None:
    finding = "FAKE:FINAL_BLOCKING_FIRST b b.txt:1: b is wrong"
    write_plan(pytester, [writes("a"), writes("b", finding), writes("c", "FAKE:FAIL_FIRST")])
    first = pytester.runpytest_subprocess(*RUN, "-n", "2", "--maestro-max-retries=1")
    first.assert_outcomes(passed=3, failed=1)
    again = pytester.runpytest_subprocess(*RUN, "-n", "2", "--lf")
    again.assert_outcomes(passed=2)
    assert sorted(c["phase_id"] for c in calls(fakes)[-2:]) == ["b", "final-review"]
