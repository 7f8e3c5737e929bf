"""Review gates end to end: ``pytest --maestro … --maestro-review`` with the fake CLIs of
tests/fakes first on PATH, which answer a review prompt as a reviewer does (_fake_reviewer.py)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.state import read_session

from ..helpers import assert_phases, git_repo, write_plan

pytestmark = pytest.mark.usefixtures("fakes")  # tests/phase/conftest.py


def calls(state: Path) -> list[dict[str, Any]]:
    path = state / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def reviews(state: Path) -> list[dict[str, Any]]:
    return [call for call in calls(state) if call["review"]]


def session(pytester: pytest.Pytester) -> Any:
    [snapshot] = (pytester.path / ".maestro").glob("plan-*.md")
    return read_session(snapshot)


def properties(pytester: pytest.Pytester) -> dict[str, str]:
    tree = ET.parse(pytester.path / "out.xml")
    return {p.get("name", ""): p.get("value", "") for p in tree.iter("property")}


def greeting(task: str = "", out: str = "out.txt", **fields: Any) -> dict[str, Any]:
    """A phase that writes ``out``, checked by a command, with two criteria in prose."""
    return {
        "id": "greet",
        "name": "Greet",
        "description": f"FAKE:EDIT {out}=hello\n{task}",
        "files": {"create": [out]},
        "acceptance": [
            {"criterion": f"{out} says hello", "check": f"grep -q hello {out}"},
            "the greeting is friendly",
            "nothing else is written",
        ],
        **fields,
    }


RUN = ("--maestro", "plan.yaml", "--maestro-autonomous", "--junitxml=out.xml")


def test_a_phase_whose_checks_pass_but_that_misses_a_criterion_fails_on_review(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    write_plan(pytester, [greeting("FAKE:REVIEW_UNMET=2", max_retries=0)])
    result = pytester.runpytest(
        *RUN, "--maestro-runtime=claude", "--maestro-review=spec", "--maestro-review-rounds=0"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "phase 'greet' (Greet) failed after 1 attempt",
            "attempt 1: review by reviewer (claude), spec: failed, 1/2 criteria met",
            "    criterion 1 met: the greeting is friendly (out.txt:1)",
            "    criterion 2 not met: nothing else is written (nothing in the change does it)",
            "its declared files were put back as they were before it began:",
        ]
    )
    assert not (pytester.path / "out.txt").exists()  # a failed attempt's work is put back
    [review] = reviews(fakes)
    # Read-only, whatever --maestro-autonomous says: offered only tools that read.
    assert review["argv"][-6:] == [
        "--tools", "Read,Grep,Glob", "--allowedTools", "Read,Grep,Glob", "--permission-mode",
        "dontAsk",
    ]  # fmt: skip
    [case] = ET.parse(pytester.path / "out.xml").iter("testcase")
    failure = case.find("failure")
    assert failure is not None
    message = "review: criterion 2 not met: nothing else is written (nothing in the change does it)"
    assert failure.get("message") == message
    assert "criterion 1 met: the greeting is friendly" in (failure.text or "")
    props = properties(pytester)
    assert props["maestro.greet.review"] == "failed, 1/2 criteria met"
    assert props["maestro.greet.criterion.2"].startswith("not met: nothing else is written")
    state = session(pytester).phases["greet"]
    assert state.status.value == "failed" and state.review["passed"] is False


def test_without_fix_rounds_the_next_attempt_hears_the_findings_and_passes_reviewed(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    task = "FAKE:REVIEW_UNMET_FIRST\nFAKE:REVIEW_MINOR out.txt:1: could say whom it greets"
    write_plan(pytester, [greeting(task, max_retries=1)])
    result = pytester.runpytest(
        *RUN, "--maestro-runtime=codex", "--maestro-review=spec+quality",
        "--maestro-report=report.md", "--maestro-review-rounds=0",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    logs = pytester.path / ".maestro" / "logs"
    second = (logs / "greet.attempt-2.prompt.md").read_text()
    assert (
        "## The previous attempt failed\n"
        "review by reviewer (codex), spec+quality: failed, 1/2 criteria met, 1 minor\n"
        "    criterion 1 not met: the greeting is friendly (nothing in the change does it)\n"
    ) in second
    assert [(c["attempt"], c["review"]) for c in calls(fakes)] == [
        (1, False), (1, True), (2, False), (2, True),
    ]  # fmt: skip
    result.stdout.fnmatch_lines(
        [
            "*greet*completed*passed, 2/2 criteria met, 1 minor*",
            "phase 'greet': review passed with 1 minor finding: "
            "[minor] out.txt:1: could say whom it greets",
        ]
    )
    props = properties(pytester)
    assert props["maestro.greet.reviewed"] == "True" and "maestro.greet.unverified" not in props
    report = (pytester.path / "report.md").read_text()
    assert "## Reviews\n\n### greet: passed, 2/2 criteria met, 1 minor\n" in report
    assert "- met: the greeting is friendly (`out.txt:1`)" in report
    summary = json.loads((pytester.path / ".maestro" / "summary.json").read_text())
    [row] = summary["phases"]
    assert row["reviewed"] is True and row["review"]["findings"][0]["severity"] == "minor"
    diff = (logs / "greet.attempt-2.review.diff").read_text()
    assert diff == "--- /dev/null\n+++ b/out.txt\n@@ -0,0 +1 @@\n+hello\n"


def test_a_phase_no_command_checks_is_reviewed_not_unverified(pytester: pytest.Pytester) -> None:
    phase = {"id": "p", "description": "Explain the code.", "reads": ["R"], "acceptance": ["clear"]}
    write_plan(pytester, [phase])
    # A reviewer only reads: it needs no --maestro-autonomous, which a read-only phase lacks.
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-runtime=gemini", "--maestro-review=spec"
    )
    result.assert_outcomes(passed=1)
    assert "passed unverified" not in result.stdout.str()
    state = session(pytester).phases["p"]
    assert not state.unverified and state.review["criteria"][0]["met"] is True


def test_an_answer_outside_the_shape_is_asked_for_once_more_then_fails_the_review(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    write_plan(
        pytester,
        [
            greeting("FAKE:REVIEW_MALFORMED", id="never", max_retries=0),
            greeting("FAKE:REVIEW_MALFORMED_ONCE", id="second", out="o2.txt"),
        ],
    )
    result = pytester.runpytest(*RUN, "--maestro-runtime=claude", "--maestro-review=spec")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "attempt 1: review by reviewer (claude), spec: failed: the reviewer's answer is not "
            "in the shape asked for, twice: no ```json block in the answer",
        ]
    )
    asked = [c["phase_id"] for c in reviews(fakes)]
    assert asked.count("never") == 2 and asked.count("second") == 2
    logs = pytester.path / ".maestro" / "logs"
    again = (logs / "second.attempt-1.review-2.prompt.md").read_text()
    assert "## Your previous answer could not be read\nno ```json block in the answer." in again


def test_a_reviewer_that_writes_fails_the_review_and_the_tree_is_put_back(
    pytester: pytest.Pytester,
) -> None:
    root = git_repo(pytester.path)
    (root / ".gitignore").write_text(".maestro/\n")
    (root / "README").write_text("the user's\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    (root / "notes.txt").write_text("the user's draft\n")
    task = "FAKE:REVIEW_WRITE README=rewritten\nFAKE:REVIEW_WRITE notes.txt=gone"
    write_plan(pytester, [greeting(task, max_retries=0)])
    result = pytester.runpytest(*RUN, "--maestro-runtime=codex", "--maestro-review=spec")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "maestro: reviews: spec by reviewer (codex) 1",  # said before anything runs
            "*review failed: the reviewer changed files: README, notes.txt (put back)",
        ]
    )
    assert (root / "README").read_text() == "the user's\n"
    assert (root / "notes.txt").read_text() == "the user's draft\n"
    [kept] = (root / ".maestro" / "replaced" / "greet").glob("*-review")
    assert (kept / "README").read_text() == "rewritten\n"  # what it wrote, kept
    log = (root / ".maestro" / "logs" / "greet.log").read_text()
    assert "--- restored README (the content it replaced is kept at" in log


def test_a_resumed_run_keeps_a_passed_review_and_does_not_review_again(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    write_plan(pytester, [greeting()])
    args = (*RUN, "--maestro-runtime=claude", "--maestro-review=spec")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert len(reviews(fakes)) == 1
    again = pytester.runpytest(*args)
    assert_phases(again, earlier=1)
    assert len(reviews(fakes)) == 1  # not reviewed again
    again.stdout.fnmatch_lines(["greet*completed earlier*passed, 2/2 criteria met*"])
    status = pytester.runpytest("--maestro", "plan.yaml", "--maestro-status=json")
    [row] = json.loads(status.stdout.str())["phases"]
    assert row["reviewed"] is True


def test_reviews_count_against_the_budget_and_none_past_it_fails(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    costly = "FAKE:TOKENS in=10 out=5 cost=0.4"
    write_plan(
        pytester,
        [
            greeting(costly, id="a", budget_usd=0.5, max_retries=0),
            greeting(costly, id="b", out="b.txt", blocked_by=["a"]),
        ],
    )
    result = pytester.runpytest(*RUN, "--maestro-runtime=claude", "--maestro-review=spec")
    # a: its attempt spends $0.4 of its $0.5, its review $0.4 more: reviewed, past its budget.
    result.assert_outcomes(passed=2)
    assert round(session(pytester).phases["a"].tokens.cost, 6) == 0.8
    write_plan(pytester, [greeting(costly, id="c", out="c.txt", budget_usd=0.3, max_retries=0)])
    spent = pytester.runpytest(*RUN, "--maestro-runtime=claude", "--maestro-review=spec")
    spent.assert_outcomes(failed=1)  # its attempt spent its budget: no review, never a pass
    spent.stdout.fnmatch_lines(["*review failed: no review: the phase's budget of $0.3 is spent*"])


def test_review_none_and_an_agent_s_review_beat_the_option(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    agents = pytester.path / "agents"
    agents.mkdir()
    (agents / "careful.md").write_text(
        "---\nname: careful\nruntime: claude\nreview: spec\n---\nA coder.\n"
    )
    write_plan(
        pytester,
        [
            greeting(id="skipped", review="none", out="a.txt"),
            greeting(id="by-agent", agent="careful", out="b.txt"),
            {"id": "shell", "runtime": "shell", "run": ["true"], "acceptance": ["ok"]},
        ],
    )
    result = pytester.runpytest(*RUN, "--maestro-runtime=codex")
    result.assert_outcomes(passed=3)
    assert [c["phase_id"] for c in reviews(fakes)] == ["by-agent"]
    forced = pytester.runpytest(
        *RUN, "--maestro-runtime=codex", "--maestro-review=spec", "--maestro-fresh"
    )
    forced.assert_outcomes(passed=3)  # a shell phase's verdict is its commands'
    assert [c["phase_id"] for c in reviews(fakes)][1:] == ["by-agent"]


@pytest.mark.parametrize(
    ("args", "plan_fields", "line"),
    [
        (
            ["--maestro-reviewer=nobody"],
            {},
            "ERROR: plan.yaml:*: phase 'greet' is reviewed (spec), but --maestro-reviewer names "
            "unknown agent 'nobody'; available: *",
        ),
        (
            ["--maestro-reviewer=copilot"],
            {},
            "ERROR: plan.yaml:*: phase 'greet' is reviewed (spec), but its reviewer 'copilot' "
            "would run on 'copilot', which has no read-only mode; a reviewer runs on claude, "
            "codex, gemini, opencode",
        ),
        (
            [],
            {"review": "strict"},
            "ERROR: plan.yaml:*: phase 'greet' field 'review' must be one of 'none', 'spec', "
            "'spec+quality', got 'strict'",
        ),
        (
            ["--maestro-review=strict"],
            {},
            "*argument --maestro-review: invalid choice: 'strict' (choose from 'none', 'spec', "
            "'spec+quality')",
        ),
    ],
    ids=["unknown-reviewer", "no-read-only", "bad-plan-value", "bad-option"],
)
def test_a_review_that_cannot_run_is_refused_in_one_line_before_anything_runs(
    pytester: pytest.Pytester, fakes: Path, args: list[str], plan_fields: dict[str, Any], line: str
) -> None:
    write_plan(pytester, [greeting(**plan_fields)])
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-runtime=claude", "--maestro-autonomous",
        "--maestro-review=spec", *args,
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line])
    assert "Traceback" not in result.stderr.str()
    assert calls(fakes) == []


def test_a_shell_phase_reviewed_needs_a_reviewer_with_a_runtime(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [{"id": "s", "run": ["true"], "review": "spec"}])
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: plan.yaml:*: phase 's' is reviewed (spec), but its reviewer 'reviewer' names "
            "no runtime and the phase runs on shell: give the reviewer agent a runtime: *"
        ]
    )


def test_a_failed_review_is_fixed_in_a_resumed_round_and_passes(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    write_plan(pytester, [greeting("FAKE:REVIEW_UNMET_UNTIL_ROUND=1")])
    result = pytester.runpytest(
        *RUN, "--maestro-runtime=claude", "--maestro-review=spec", "--maestro-report=report.md"
    )
    result.assert_outcomes(passed=1)
    first, review, fix, again = calls(fakes)
    assert [c["review"] for c in (first, review, fix, again)] == [False, True, False, True]
    logs = pytester.path / ".maestro" / "logs"
    reply = json.loads((logs / "greet.attempt-1.reply").read_text().splitlines()[-1])
    assert fix["argv"][5:7] == ["--resume", reply["session_id"]]  # its own session, resumed
    prompt = (logs / "greet.attempt-1.round-1.prompt.md").read_text()
    assert prompt.startswith("Fix round: 1\n\n## What the review of your work found\n")
    assert "criterion 1 not met: the greeting is friendly" in prompt
    assert "FAKE:EDIT" not in prompt  # the session knows its task: only the findings
    assert (
        "## What the last review found"
        in (logs / "greet.attempt-1.round-1.review.prompt.md").read_text()
    )
    result.stdout.fnmatch_lines(["greet*completed  1 *passed after 1 fix round, 2/2 criteria met*"])
    summary = json.loads((pytester.path / ".maestro" / "summary.json").read_text())
    [rounds] = [row["review"]["rounds"] for row in summary["phases"]]
    assert [r["how"].split()[:2] for r in rounds] == [["resumes", "session"]]
    assert rounds[0]["outcome"] == "passed, 2/2 criteria met"
    assert "- fix round 1 (resumes session " in (pytester.path / "report.md").read_text()
    assert session(pytester).phases["greet"].attempts == 1  # rounds are no attempts


def test_round_4_starts_afresh_on_the_escalation_model(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    write_plan(pytester, [greeting("FAKE:REVIEW_UNMET_UNTIL_ROUND=4", escalate_model="big")])
    result = pytester.runpytest(*RUN, "--maestro-runtime=codex", "--maestro-review=spec")
    result.assert_outcomes(passed=1)
    fixes = [c["argv"] for c in calls(fakes) if not c["review"]][1:]
    assert len(fixes) == 4
    threads = {argv[argv.index("resume") + 1] for argv in fixes[:3]}
    assert len(threads) == 1  # rounds 1-3 go on with the one session
    assert "resume" not in fixes[3] and fixes[3][fixes[3].index("--model") + 1] == "big"
    log = (pytester.path / ".maestro" / "logs" / "greet.log").read_text()
    assert "=== attempt 1, fix round 4: afresh on model big ===" in log


def test_spent_rounds_fail_the_phase_without_another_attempt(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    write_plan(pytester, [greeting("FAKE:REVIEW_UNMET=1", max_retries=2)])
    result = pytester.runpytest(
        *RUN, "--maestro-runtime=opencode", "--maestro-review=spec", "--maestro-review-rounds=2"
    )
    result.assert_outcomes(failed=1)
    assert len(calls(fakes)) == 6  # the attempt and its review, then two rounds and theirs
    result.stdout.fnmatch_lines(
        [
            "phase 'greet' (Greet) failed after 1 attempt",
            "attempt 1: review by reviewer (opencode), spec: failed after 2 fix rounds, "
            "1/2 criteria met",
        ]
    )
    log = (pytester.path / ".maestro" / "logs" / "greet.log").read_text()
    assert "fix round 1: resumes session ses_" in log
    # Each round goes on with the attempt's opencode session (--session), as opencode says.
    implementer = [c["argv"] for c in calls(fakes) if not c["review"]]
    sessions = {argv[argv.index("--session") + 1] for argv in implementer[1:]}
    assert len(sessions) == 1 and "--session" not in implementer[0], implementer


@pytest.mark.slow
def test_reviews_and_rounds_under_xdist(pytester: pytest.Pytester, fakes: Path) -> None:
    """Two phases on two workers: one passes after a fix round, the other misses a criterion
    to the last round; the controller records both reviews."""
    write_plan(
        pytester,
        [
            greeting("FAKE:REVIEW_UNMET=1", id="misses", max_retries=0),
            greeting("FAKE:REVIEW_UNMET_UNTIL_ROUND=1", id="fixed", out="other.txt"),
        ],
    )
    result = pytester.runpytest_subprocess(
        *RUN, "--maestro-runtime=claude", "--maestro-review=spec", "--maestro-review-rounds=1",
        "-n", "2",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED plan.yaml::misses - review: criterion 1 not met: *"])
    assert {c["phase_id"] for c in calls(fakes)} == {"misses", "fixed"}
    phases = session(pytester).phases
    assert phases["misses"].review["passed"] is False
    assert len(phases["misses"].review["rounds"]) == 1
    assert phases["fixed"].review["passed"] is True and not phases["fixed"].unverified
    props = properties(pytester)
    assert props["maestro.misses.criterion.1"].startswith("not met: the greeting is friendly")
    assert props["maestro.fixed.reviewed"] == "True"
    assert props["maestro.fixed.review"] == "passed after 1 fix round, 2/2 criteria met"


def test_an_isolated_phase_is_reviewed_in_its_worktree(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    root = git_repo(pytester.path)
    (root / ".gitignore").write_text(".maestro/\n")
    (root / "README").write_text("the user's\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    write_plan(
        pytester,
        [
            greeting("FAKE:REVIEW_UNMET_UNTIL_ROUND=1"),
            greeting("FAKE:REVIEW_WRITE README=rewritten", id="writes", out="w.txt", max_retries=0),
        ],
    )
    result = pytester.runpytest(
        *RUN, "--maestro-runtime=claude", "--maestro-review=spec", "--maestro-isolate=worktree"
    )
    result.assert_outcomes(passed=1, failed=1)
    assert (root / "out.txt").read_text() == "hello\n"  # fixed in a round, then merged back
    assert not (root / "w.txt").exists()
    assert (root / "README").read_text() == "the user's\n"
    result.stdout.fnmatch_lines(
        [
            "attempt 1: review by reviewer (claude), spec: failed: the reviewer changed files: "
            "README (put back)",
            "attempt 1: its work is kept as refs/maestro/*",
        ]
    )
