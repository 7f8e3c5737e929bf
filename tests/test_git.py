"""git.py on real repositories: what changed, commits of exactly a phase's files, the one runner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_maestro.git import (
    GitError,
    changed_files,
    changed_since,
    commit,
    dirty,
    is_work_tree,
    run_git,
    succeeds,
)

from .helpers import git_repo


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git_repo(tmp_path)
    (tmp_path / "kept.txt").write_text("kept\n")
    (tmp_path / "old.txt").write_text("old\n")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "start")
    return tmp_path


def test_commit_takes_exactly_the_phase_files_and_leaves_the_users_staged_work(repo: Path) -> None:
    (repo / "new.txt").write_text("new\n")
    (repo / "old.txt").unlink()
    (repo / "kept.txt").write_text("the user's edit\n")
    git(repo, "add", "kept.txt")  # staged by the user, not part of the phase
    said = commit(repo, ("new.txt", "old.txt", "never.txt"), "p1: Add new")
    assert said.startswith("committed ")
    assert git(repo, "log", "-1", "--format=%s").strip() == "p1: Add new"
    assert git(repo, "show", "--name-status", "--format=", "HEAD").split() == [
        "A", "new.txt", "D", "old.txt",
    ]  # fmt: skip
    assert git(repo, "diff", "--cached", "--name-only").split() == ["kept.txt"]


def test_nothing_to_commit_is_said_not_failed(repo: Path) -> None:
    assert commit(repo, ("kept.txt",), "p: nothing") == "not committed: its files did not change"
    assert commit(repo, ("ghost.txt",), "p: ghost") == "not committed: none of its files exists"


def test_outside_a_work_tree(tmp_path: Path) -> None:
    assert not is_work_tree(tmp_path)
    assert changed_files(tmp_path) is None
    assert commit(tmp_path, ("a",), "p").startswith("not committed: ")


def test_changed_since_sees_new_edited_and_deleted_files_but_not_ignored_ones(repo: Path) -> None:
    (repo / "dirty.txt").write_text("before\n")  # already dirty before the phase
    before = changed_files(repo)
    assert before is not None and set(before) == {"dirty.txt"}
    (repo / "made.txt").write_text("x\n")
    (repo / "old.txt").unlink()
    (repo / "ignored").mkdir()
    (repo / "ignored" / "cache").write_text("x\n")
    (repo / ".maestro").mkdir()
    (repo / ".maestro" / "log").write_text("x\n")
    assert changed_since(repo, before, ignore=(".maestro/",)) == ["made.txt", "old.txt"]
    (repo / "dirty.txt").write_text("after, longer\n")
    assert "dirty.txt" in changed_since(repo, before)


def test_dirty_names_each_declared_path_git_reports_from_a_root_below_the_top(repo: Path) -> None:
    sub = repo / "sub"
    (sub / "folder").mkdir(parents=True)
    for name in ("same.txt", "edited.txt", "staged.txt", "gone.txt", "a b.txt", "moved.txt"):
        (sub / name).write_text(f"{name}\n")
    (repo / "edited.txt").write_text("at the top\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "sub")
    (sub / "edited.txt").write_text("edited\n")
    (sub / "staged.txt").write_text("staged\n")
    git(sub, "add", "staged.txt")
    (sub / "gone.txt").unlink()
    (sub / "folder" / "new.txt").write_text("new\n")
    (sub / "a b.txt").write_text("spaced\n")
    git(sub, "mv", "moved.txt", "renamed.txt")
    (sub / "*.txt").write_text("a name that is a glob\n")
    (sub / "ignored").mkdir()
    (sub / "ignored" / "x").write_text("x\n")  # ignored: no change git reports
    (repo / ".gitignore").write_text("ignored/\n")
    asked = (
        "same.txt", "edited.txt", "staged.txt", "gone.txt", "folder", "a b.txt", "moved.txt",
        "renamed.txt", "*.txt", "ignored/x", "absent.txt",
    )  # fmt: skip
    assert dirty(sub, asked) == {
        "edited.txt", "staged.txt", "gone.txt", "folder", "a b.txt", "moved.txt", "renamed.txt",
        "*.txt",
    }  # fmt: skip
    (sub / "*.txt").unlink()  # a literal name: it stands for no other file
    assert dirty(sub, ("*.txt", "same.txt")) == set()


def test_dirty_outside_a_work_tree_is_empty(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    assert dirty(tmp_path, ("a.txt",)) == set()


def test_a_failed_git_call_names_its_command_past_global_options(repo: Path) -> None:
    with pytest.raises(GitError, match=r"^git cat-file: .*bad") as failed:
        run_git(repo, "-c", "core.fsmonitor=false", "cat-file", "blob", "bad")
    assert "bad" in failed.value.reason
    assert succeeds(repo, "cat-file", "-e", "HEAD") and not succeeds(repo, "cat-file", "-e", "bad")
