"""git.py on real repositories: what changed, and commits of exactly a phase's files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_maestro.git import changed_files, changed_since, commit, is_work_tree

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
