"""What a reviewer is shown: the attempt's change as a unified diff, and the prompt around it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pytest_maestro.files.declared import FileSnapshot
from pytest_maestro.plan import Check, Files, Phase, Plan
from pytest_maestro.review.diff import attempt_diff
from pytest_maestro.review.prompt import (
    HEAD,
    INLINE_DIFF,
    ReviewBrief,
    ask_again,
    prose_criteria,
    review_prompt,
)
from pytest_maestro.runtimes.agents import Agent

from ..helpers import git_repo


def test_the_diff_shows_each_declared_file_against_its_content_before_the_phase(
    tmp_path: Path,
) -> None:
    (tmp_path / "kept.txt").write_text("same\n")
    (tmp_path / "old.txt").write_text("one\ntwo\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    (tmp_path / "blob.bin").write_bytes(b"\0\1")
    declared = ["kept.txt", "old.txt", "gone.txt", "new.txt", "blob.bin"]
    before = FileSnapshot.of(tmp_path, declared)
    (tmp_path / "old.txt").write_text("one\n2\n")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "new.txt").write_text("hello")  # no newline at the end
    (tmp_path / "blob.bin").write_bytes(b"\0\2\3")
    diff = attempt_diff(tmp_path, before, ())
    assert "kept.txt" not in diff
    assert "--- a/old.txt\n+++ b/old.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n" in diff
    assert "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" in diff
    assert "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n" in diff
    assert "Binary file blob.bin changed (2 bytes -> 3 bytes)\n" in diff


def test_a_file_changed_outside_the_declared_ones_is_shown_against_git_s_head(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path)
    (root / "tracked.txt").write_text("a\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    (root / "tracked.txt").write_text("b\n")
    (root / "stray.txt").write_text("new\n")
    diff = attempt_diff(root, FileSnapshot.of(root, []), ["tracked.txt", "stray.txt"])
    assert "# tracked.txt: changed outside the declared files\n" in diff
    assert "-a\n+b\n" in diff
    assert "# stray.txt: changed outside the declared files\n--- /dev/null\n" in diff


def test_outside_git_such_a_file_is_only_named(tmp_path: Path) -> None:
    (tmp_path / "stray.txt").write_text("new\n")
    diff = attempt_diff(tmp_path, FileSnapshot.of(tmp_path, []), ["stray.txt"])
    assert diff == "# stray.txt: changed outside the declared files\n"


PHASE = Phase(
    "core",
    "Count words",
    description="Write the counter.",
    files=Files(create=("core.py",)),
    acceptance=(Check("it imports", "python -c 'import core'"), Check("it counts"), Check("fast")),
    constraints=("no dependencies",),
)
PLAN = Plan(Path("plan.yaml"), "native", (PHASE,), title="Words")
AGENT = Agent("reviewer", instructions="You are a sceptical reviewer.")


def brief(diff: str, mode: str = "spec") -> ReviewBrief:
    return ReviewBrief(PLAN, PHASE, mode, AGENT, "COMPLETED: done", diff, Path("p.review.diff"))


def test_the_prompt_numbers_the_prose_criteria_and_asks_for_the_shape() -> None:
    assert prose_criteria(PHASE) == ("it counts", "fast")
    prompt = review_prompt(brief("--- a/core.py\n+++ b/core.py\n"))
    assert prompt.startswith(f"{HEAD} core (Count words): spec\nAgent: reviewer\n")
    assert "You are a sceptical reviewer." in prompt
    assert "## Criteria to judge\n1. it counts\n2. fast\n" in prompt
    assert "## Checked already (these commands passed)\n- it imports: `python" in prompt
    assert "## The implementer's report (its claims, unverified)\nCOMPLETED: done" in prompt
    assert "```diff\n--- a/core.py\n+++ b/core.py\n```" in prompt
    assert "- create: core.py" in prompt and "- no dependencies" in prompt
    assert '"criteria": [' in prompt and "code quality" not in prompt
    assert "code quality" in review_prompt(brief("x", "spec+quality"))


def test_a_large_change_is_read_from_its_file() -> None:
    prompt = review_prompt(brief("+x\n" * INLINE_DIFF))
    assert "Read it in p.review.diff" in prompt and "+x\n+x" not in prompt
    assert "changed no file it declares" in review_prompt(brief(""))


def test_asked_again_the_reviewer_hears_what_was_wrong() -> None:
    again = ask_again("the prompt\n", "no ```json block in the answer")
    assert again.startswith("the prompt\n")
    assert "## Your previous answer could not be read\nno ```json block" in again
