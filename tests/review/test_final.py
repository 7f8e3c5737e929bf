"""The final review's pure parts: its prompt, reading its answer, what it sends back to work,
its record in the session; its base and change against a real git work tree and outside one;
and when RunState lets it run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.phase.facts import PhaseFacts, SkipKind, SkipReason
from pytest_maestro.plan.graph import PlanGraph
from pytest_maestro.plan.model import Check, Files, Phase, Plan
from pytest_maestro.review.base import FILES, RunBase
from pytest_maestro.review.final import (
    FinalBrief,
    FinalRecord,
    final_prompt,
    findings_for,
    named_phases,
    read_final_reply,
)
from pytest_maestro.review.prompt import INLINE_DIFF
from pytest_maestro.review.verdict import Finding, ReplyError, Review, Verdict
from pytest_maestro.run.run_state import RunState
from pytest_maestro.runtimes.agents import Agent
from pytest_maestro.state.model import Status, Tokens
from pytest_maestro.state.paths import SessionPaths

from ..helpers import git_repo

IDS = ("a", "b", "c")


def answer(*findings: dict[str, Any]) -> str:
    return f"Checked.\n\n```json\n{json.dumps({'findings': list(findings)})}\n```\n"


def test_an_answer_s_findings_name_phases_once_each() -> None:
    text = answer(
        {"severity": "blocking", "where": "x.py:3", "issue": "wrong", "phases": ["b", "a", "b"]},
        {"severity": "minor", "issue": "could be shorter"},
    )
    verdict = read_final_reply(text, IDS)
    assert verdict.criteria == ()
    assert verdict.findings == (
        Finding("blocking", "wrong", "x.py:3", ("b", "a")),
        Finding("minor", "could be shorter"),
    )
    assert verdict.findings[0].line == "[blocking] x.py:3: wrong (phases b, a)"


@pytest.mark.parametrize(
    ("finding", "said"),
    [
        ({"severity": "blocking", "issue": "x"}, "blocking finding 1 names no phase"),
        ({"severity": "blocking", "issue": "x", "phases": []}, "blocking finding 1 names no phase"),
        (
            {"severity": "minor", "issue": "x", "phases": ["z"]},
            "finding 1 names phase 'z', which the plan lacks",
        ),
        (
            {"severity": "blocking", "issue": "x", "phases": "a"},
            "its JSON findings[0].phases must be array",
        ),
        ({"severity": "fatal", "issue": "x"}, "its JSON findings[0].severity must be one of*"),
    ],
)
def test_an_answer_outside_the_shape_is_one_line(finding: dict[str, Any], said: str) -> None:
    with pytest.raises(ReplyError) as error:
        read_final_reply(answer(finding), IDS)
    assert "\n" not in str(error.value)
    assert error.match(said.replace("*", ".*").replace("[", r"\[").replace("]", r"\]"))


def test_no_json_block_is_outside_the_shape() -> None:
    with pytest.raises(ReplyError, match="no ```json block"):
        read_final_reply("Looks fine.", IDS)


def _review(*findings: Finding, failure: str | None = None) -> Review:
    verdict = None if failure else Verdict((), findings)
    return Review("final", "reviewer (claude)", verdict, failure, tokens=Tokens(10, 2))


def test_a_failed_review_sends_back_the_phases_its_blocking_findings_name_in_plan_order() -> None:
    review = _review(
        Finding("blocking", "one", phases=("c",)),
        Finding("minor", "two", phases=("b",)),
        Finding("blocking", "three", phases=("a", "c")),
    )
    assert not review.passed and review.outcome == "failed, 2 blocking, 1 minor"
    assert named_phases(review, IDS) == ("a", "c")
    assert findings_for(review, "c") == (
        "[blocking] one (phases c)",
        "[blocking] three (phases a, c)",
    )
    assert findings_for(review, "b") == ()  # a minor finding sends nothing back
    assert named_phases(_review(Finding("minor", "x", phases=("a",))), IDS) == ()
    assert named_phases(_review(failure="the reviewer's call failed"), IDS) == ()


def test_a_record_round_trips_and_a_hand_edited_one_reads_as_empty() -> None:
    review = _review(Finding("blocking", "x", "f.py:1", ("b",)))
    record = FinalRecord("abc123", "2026-01-01T00:00:00Z", review, "t0", "t1")
    again = FinalRecord.from_mapping(json.loads(json.dumps(record.to_dict())))
    assert again == record and not again.passed
    assert FinalRecord.from_mapping({"base": "abc"}) == FinalRecord("abc", None)
    assert FinalRecord.from_mapping(["not", "a", "mapping"]) == FinalRecord()
    assert FinalRecord.from_mapping({"review": {"mode": 3}}).review is None


def test_the_prompt_lists_every_phase_its_criteria_and_the_ids_and_shows_or_names_the_change(
    tmp_path: Path,
) -> None:
    phases = (
        Phase("a", "Parse", description="Parse the flags.", files=Files(create=("cli.py",)),
              acceptance=(Check("-v prints the version", "cli -v"), Check("help is clear"))),
        Phase("b", "Help", description="x" * 3000),
    )  # fmt: skip
    plan = Plan(tmp_path / "plan.md", "native", phases, title="CLI")
    brief = FinalBrief(
        plan, Agent("reviewer", instructions="Be sceptical."), {"a": "COMPLETED: parsed"},
        "+added\n", tmp_path / "d.diff", "2026-01-01T00:00:00Z",
    )  # fmt: skip
    prompt = final_prompt(brief)
    assert prompt.startswith("Final review of plan CLI: 2 phases\nAgent: reviewer\n\nBe sceptical.")
    assert "### a: Parse\nParse the flags.\nFiles: create cli.py\n" in prompt
    assert "- criterion: -v prints the version (checked: `cli -v`)\n" in prompt
    assert "- criterion: help is clear\nIts agent reported: COMPLETED: parsed" in prompt
    assert "[... 1000 more characters ...]" in prompt
    assert "since 2026-01-01T00:00:00Z; also in" in prompt and "```diff\n+added\n```" in prompt
    assert "The ids: a, b." in prompt
    big = final_prompt(FinalBrief(plan, Agent("r"), {}, "+" * (INLINE_DIFF + 1), Path("d"), "x"))
    assert "Read it in d (" in big and "+" * 100 not in big


def _commit(root: Path, message: str, *paths: str) -> None:
    subprocess.run(["git", "add", "-A", "--", *paths], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", message], cwd=root, check=True)


def test_in_git_the_base_is_a_snapshot_kept_by_a_ref_and_the_change_is_every_file(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path)
    (root / ".gitignore").write_text(".maestro/\n")
    (root / "kept.txt").write_text("same\n")
    (root / "old.txt").write_text("old\n")
    _commit(root, "start")
    (root / "draft.txt").write_text("the user's, uncommitted\n")  # in the base: not a change
    paths = SessionPaths(root / ".maestro", "plan-12345678")
    base = RunBase(root, paths, ("old.txt",))
    taken = base.take()
    ref = subprocess.run(["git", "rev-parse", base.ref], cwd=root, capture_output=True, text=True)
    assert ref.stdout.strip() == taken
    (root / "old.txt").write_text("new\n")
    (root / "new.txt").write_text("made\n")
    # As --maestro-commit does: HEAD moves, the base does not.
    _commit(root, "a phase committed", "old.txt", "new.txt")
    (root / ".maestro").mkdir(exist_ok=True)
    (root / ".maestro" / "noise").write_text("state\n")
    change = base.change(taken)
    assert "+++ b/new.txt" in change and "-old\n+new" in change
    assert "draft.txt" not in change and "kept.txt" not in change and ".maestro" not in change
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True)
    assert status.stdout == b"?? draft.txt\n"  # the user's index and files as they were
    assert base.change("0" * 40).startswith("# the change since the base 000000000000 cannot")


def test_outside_git_the_base_is_the_declared_files(tmp_path: Path) -> None:
    paths = SessionPaths(tmp_path / ".maestro", "plan-12345678")
    (tmp_path / "a.txt").write_text("before\n")
    base = RunBase(tmp_path, paths, ("a.txt", "b.txt", "../outside"))
    assert base.take() == FILES and paths.final_base.is_file()
    (tmp_path / "a.txt").write_text("after\n")
    (tmp_path / "b.txt").write_text("made\n")
    change = base.change(FILES)
    assert "-before\n+after\n" in change and "+++ b/b.txt\n@@ -0,0 +1 @@\n+made\n" in change
    paths.final_base.unlink()
    assert base.change(FILES).startswith("# the base of the change")


def _state(*phases: Phase) -> RunState:
    return RunState(PlanGraph(Plan(Path("plan.yaml"), "native", phases)))


def test_the_final_review_waits_for_every_phase_and_names_the_first_that_did_not_pass() -> None:
    run = _state(Phase("a", "A"), Phase("b", "B"), Phase("c", "C"), Phase("d", "D", done=True))
    run.select(["a", "b", "c"])
    run.record(PhaseFacts("a", Status.COMPLETED))
    run.record(PhaseFacts.skipped("c", SkipReason.dependency("b", Status.FAILED)))
    run.record(PhaseFacts("b", Status.FAILED))
    reason = run.why_no_final_review()
    assert reason == SkipReason(SkipKind.DEPENDENCY, "phase 'b' failed", "b")
    assert reason is not None and reason.after_failure  # --lf runs it with the failed phase
    run.record(PhaseFacts("b", Status.COMPLETED))
    assert run.why_no_final_review() == SkipReason(
        SkipKind.DEPENDENCY, "phase 'c' was skipped", "c"
    )
    run.record(PhaseFacts("c", Status.COMPLETED))
    assert run.why_no_final_review() is None  # d is done in the plan


def test_an_unselected_phase_must_have_completed_earlier_and_a_passed_review_holds() -> None:
    run = _state(Phase("a", "A"), Phase("b", "B"))
    run.select(["a"])
    run.record(PhaseFacts("a", Status.COMPLETED))
    reason = run.why_no_final_review()
    assert reason is not None and reason.kind is SkipKind.NOT_SELECTED and not reason.after_failure
    run.resume({"b": "2026-01-01T00:00:00Z"})
    assert run.why_no_final_review() is None
    passed = run.why_no_final_review("2026-01-02T00:00:00Z")
    assert passed == SkipReason(
        SkipKind.EARLIER, "passed in an earlier run at 2026-01-02T00:00:00Z"
    )
    assert passed.status is Status.COMPLETED  # counted "already completed"
    stopped = _state(Phase("a", "A"))
    assert stopped.why_no_final_review() == SkipReason.stopped("phase 'a' did not run")
    assert _state(Phase("a", "A")).why_no_final_review() is not None
    worker = RunState(PlanGraph(Plan(Path("p"), "native", (Phase("a", "A"),))), decides=False)
    assert worker.why_no_final_review() is None  # the controller decided
