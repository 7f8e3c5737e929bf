"""A review changes nothing: the tree before and after it compared, and what it changed put back,
all of it, what that replaces kept."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_maestro.review.guard import TreeGuard

from ..helpers import git_repo

IGNORED = (".maestro/",)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a committed file, an edit the user has not committed, and an untracked
    draft: each of them must come back as it was."""
    (tmp_path / "repo").mkdir()
    root = git_repo(tmp_path / "repo")
    (root / "clean.txt").write_text("committed\n")
    (root / "edited.txt").write_text("committed\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    (root / "edited.txt").write_text("the user's edit\n")
    (root / "draft.txt").write_text("a draft\n")
    (root / "out.txt").write_text("the attempt's work\n")  # declared
    return root


def test_a_review_that_changed_nothing_leaves_nothing_to_put_back(repo: Path) -> None:
    guard = TreeGuard.take(repo, ["out.txt"], IGNORED)
    (repo / ".maestro").mkdir()
    (repo / ".maestro" / "review.log").write_text("the reviewer's own log\n")  # not watched
    assert guard.changed() == []


def test_every_file_a_review_changed_is_named_and_put_back_as_it_was(
    repo: Path, tmp_path: Path
) -> None:
    before = {p.name: p.read_bytes() for p in repo.glob("*.txt")}
    guard = TreeGuard.take(repo, ["out.txt"], IGNORED)
    for name in ("clean.txt", "edited.txt", "draft.txt", "out.txt"):
        (repo / name).write_text("the reviewer's\n")
    (repo / "new.txt").write_text("made by the reviewer\n")
    changed = guard.changed()
    assert changed == ["clean.txt", "draft.txt", "edited.txt", "new.txt", "out.txt"]
    keep = tmp_path / "kept"
    done, lost = guard.put_back(changed, keep)
    assert lost == []
    assert {p.name: p.read_bytes() for p in repo.glob("*.txt")} == before
    assert not (repo / "new.txt").exists()
    assert (keep / "new.txt").read_text() == "made by the reviewer\n"  # kept, never thrown away
    assert sorted(r.path for r in done) == changed
    assert guard.changed() == []


def test_a_deleted_file_comes_back(repo: Path, tmp_path: Path) -> None:
    guard = TreeGuard.take(repo, [], IGNORED)
    (repo / "clean.txt").unlink()
    (repo / "edited.txt").unlink()
    assert guard.changed() == ["clean.txt", "edited.txt"]
    guard.put_back(guard.changed(), tmp_path / "kept")
    assert (repo / "clean.txt").read_text() == "committed\n"
    assert (repo / "edited.txt").read_text() == "the user's edit\n"


def test_a_large_file_changed_before_the_review_is_named_not_put_back(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pytest_maestro.review.guard.SAVE_LIMIT", 4)
    guard = TreeGuard.take(repo, [], IGNORED)
    (repo / "draft.txt").write_text("overwritten\n")
    assert guard.changed() == ["draft.txt"]
    _, lost = guard.put_back(["draft.txt"], tmp_path / "kept")
    assert lost == ["draft.txt"]


def test_outside_a_git_work_tree_the_declared_files_are_watched(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("work\n")
    guard = TreeGuard.take(tmp_path, ["out.txt", "gone.txt"], IGNORED)
    (tmp_path / "other.txt").write_text("not watched\n")
    assert guard.changed() == []
    (tmp_path / "gone.txt").write_text("made\n")
    (tmp_path / "out.txt").write_text("changed\n")
    assert guard.changed() == ["gone.txt", "out.txt"]
    guard.put_back(guard.changed(), tmp_path / ".kept")
    assert (tmp_path / "out.txt").read_text() == "work\n"
    assert not (tmp_path / "gone.txt").exists()
