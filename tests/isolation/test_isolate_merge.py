"""Worktrees and merge-back on real repositories, driven directly: phases that ran side by side
from the same start, what each may bring back, and who a conflict is with."""

from __future__ import annotations

import os
import subprocess
import time
import warnings
from pathlib import Path

import pytest

from pytest_maestro.files import swap
from pytest_maestro.files.declared import FileSnapshot, remove_tree
from pytest_maestro.isolation import IsolationError
from pytest_maestro.isolation.merge import merge_back, scope
from pytest_maestro.isolation.worktree import Isolation, Workspace
from pytest_maestro.plan import Files, Phase
from pytest_maestro.state import SessionPaths

from ..robustness.test_disk_full import _can_mount_tmpfs as can_mount_tmpfs
from ..robustness.test_disk_full import on_small_disk
from .test_isolate import git, init_repo, user_state, worktrees

LINES = "".join(f"line {n}\n" for n in range(1, 11))


@pytest.fixture
def iso(tmp_path: Path) -> Isolation:
    root = tmp_path / "repo"
    root.mkdir()
    init_repo(root)
    (root / "lines.txt").write_text(LINES)
    (root / ".maestro").mkdir()
    (root / ".maestro" / ".gitignore").write_text("*\n")
    isolation = Isolation.for_root(root, SessionPaths(root / ".maestro", "plan-0000000a"))
    assert isolation.start() == []
    return isolation


def merge(iso: Isolation, space_phase: tuple[Workspace, Phase]) -> str | None:
    """Merge a phase's worktree back; why it was refused, or None."""
    space, phase = space_phase
    pre = iso.paths.state_dir / "preimages" / f"{phase.id}.tar"
    replaced = iso.paths.state_dir / "replaced" / phase.id
    return merge_back(space, phase, space.snapshot(), pre, replaced).refused


def test_phases_started_together_merge_line_by_line_or_name_each_other(iso: Isolation) -> None:
    top = Phase("top", "Edit the top", files=Files(modify=("lines.txt",)))
    bottom = Phase("bottom", "Edit the bottom", files=Files(modify=("lines.txt",)))
    clash = Phase("clash", "Edit the top too", files=Files(modify=("lines.txt",)))
    spaces = {p.id: (iso.open(p.id, slot=p.id), p) for p in (top, bottom, clash)}
    for pid, old, new in (
        ("top", "line 1\n", "line 1 by top\n"),
        ("bottom", "line 10\n", "line 10 by bottom\n"),
        ("clash", "line 1\n", "line 1 by clash\n"),
    ):
        target = spaces[pid][0].root / "lines.txt"
        target.write_text(target.read_text().replace(old, new))
    before = user_state(iso.root)
    assert merge(iso, spaces["top"]) is None
    assert merge(iso, spaces["bottom"]) is None  # both changed the file: lines apart merge
    assert merge(iso, spaces["clash"]) == "lines.txt conflicts with phase 'top'"
    want = LINES.replace("line 1\n", "line 1 by top\n").replace("line 10\n", "line 10 by bottom\n")
    assert (iso.root / "lines.txt").read_text() == want
    assert user_state(iso.root) == before  # branch, index, other edits: as they were
    (spaces["top"][0].root / "junk.txt").write_text("left behind\n")
    for space, _ in spaces.values():
        space.release()
    # The next phase starts from both results, in a worktree used before: cleaned, moved on.
    later = iso.open("later", slot="top")
    assert (later.root / "lines.txt").read_text() == want
    assert not (later.root / "junk.txt").exists()
    later.release()
    assert iso.finish() == []
    assert worktrees(iso.root) == [str(iso.root)]


def test_only_declared_paths_come_back_and_a_format_without_files_brings_all() -> None:
    declared = Phase("d", "d", files=Files(create=("src/new.py",), modify=("docs",)))
    changed = ["sub/src/new.py", "sub/docs/a.md", "sub/other.txt", "elsewhere.txt"]
    assert scope(declared, changed, "sub/") == (
        ["sub/src/new.py", "sub/docs/a.md"],
        ["other.txt", "elsewhere.txt"],
    )
    undeclared = Phase("u", "u")
    assert scope(undeclared, changed, "sub/") == (changed[:3], ["elsewhere.txt"])
    reader = Phase("r", "r", reads=("docs",))  # declares files, writes none
    assert scope(reader, ["sub/docs/a.md"], "sub/") == ([], ["docs/a.md"])


def test_a_merge_saves_pre_images_a_killed_run_puts_back(iso: Isolation) -> None:
    phase = Phase("p", "p", files=Files(modify=("app.txt",)))
    space = iso.open("p")
    (space.root / "app.txt").write_text("by the phase\n")
    users = (iso.root / "app.txt").read_text()
    assert merge(iso, (space, phase)) is None
    assert (iso.root / "app.txt").read_text() == "by the phase\n"
    saved = FileSnapshot.load(iso.root, iso.paths.state_dir / "preimages" / "p.tar")
    assert saved is not None and saved.contents == (("app.txt", users.encode()),)
    space.remove()


def test_a_project_root_below_the_top_of_the_repository(tmp_path: Path) -> None:
    init_repo(tmp_path)
    root = tmp_path / "pkg"
    (root / ".maestro").mkdir(parents=True)
    (root / ".maestro" / ".gitignore").write_text("*\n")
    (root / "mod.txt").write_text("untracked module\n")
    iso = Isolation.for_root(root, SessionPaths(root / ".maestro", "plan-0000000b"))
    iso.start()
    space = iso.open("p")
    assert space.root == space.path / "pkg"
    assert (space.root / "mod.txt").read_text() == "untracked module\n"
    (space.root / "mod.txt").write_text("changed\n")
    (space.path / "app.txt").write_text("outside the root\n")
    phase = Phase("p", "p", files=Files(modify=("mod.txt",)))
    assert merge(iso, (space, phase)) == ("changed files outside its declared ones: app.txt")
    (space.path / "app.txt").write_text((tmp_path / "app.txt").read_text())
    assert merge(iso, (space, phase)) is None
    assert (root / "mod.txt").read_text() == "changed\n"
    space.remove()
    assert iso.finish() == []
    assert git(tmp_path, "for-each-ref", "refs/maestro/") == ""


def test_opening_without_a_base_is_one_line(iso: Isolation) -> None:
    iso.finish()
    with pytest.raises(
        IsolationError, match=r"^the run's base \(refs/maestro/.*/merged\) is missing$"
    ):
        iso.open("p")


def test_a_reused_worktree_moves_on_without_moving_a_branch_its_last_phase_took(
    iso: Isolation,
) -> None:
    develop = git(iso.root, "rev-parse", "develop")
    first = iso.open("first", slot="w")
    git(first.path, "checkout", "-q", "develop")  # HEAD now names one of the user's branches
    (first.path / "app.txt").write_text("agent\n")
    git(first.path, "commit", "-qam", "agent")
    agents = git(first.path, "rev-parse", "HEAD")
    git(first.path, "branch", "agents-own")
    first.release()
    assert git(iso.root, "rev-parse", "develop") == develop  # put back as it was
    assert "agents-own" not in git(iso.root, "branch")
    refs = git(iso.root, "for-each-ref", "--format=%(objectname) %(refname)", "refs/maestro/")
    kept = [line.split()[0] for line in refs.splitlines() if "/kept/" in line]
    assert kept == [agents.strip()] * 2  # both kept: develop's move and the new branch
    second = iso.open("second", slot="w")
    assert git(iso.root, "rev-parse", "develop") == develop
    assert git(second.path, "rev-parse", "HEAD").strip() == second.start
    assert git(second.path, "status", "--porcelain") == ""
    second.release()
    iso.finish()


def test_a_reused_worktree_forgets_what_the_last_phase_left_under_way(iso: Isolation) -> None:
    first = iso.open("first", slot="w")
    wt = first.path
    (wt / "app.txt").write_text("theirs\n")
    git(wt, "commit", "-qam", "theirs")
    theirs = git(wt, "rev-parse", "HEAD").strip()
    git(wt, "reset", "-q", "--hard", "HEAD~1")
    (wt / "app.txt").write_text("mine\n")
    git(wt, "commit", "-qam", "mine")
    picked = subprocess.run(["git", "cherry-pick", theirs], cwd=wt, capture_output=True)
    assert picked.returncode != 0 and first.busy()  # a cherry-pick left in conflict
    first.release()
    second = iso.open("second", slot="w")
    assert not second.busy()
    assert git(wt, "rev-parse", "HEAD").strip() == second.start
    assert git(wt, "status", "--porcelain") == ""
    second.release()
    iso.finish()


def test_commits_in_the_users_own_worktrees_during_a_phase_stay(iso: Isolation) -> None:
    own = iso.root.parent / "own-worktree"
    git(iso.root, "worktree", "add", "-q", "-b", "feature", str(own))
    space = iso.open("p", slot="w")
    (own / "app.txt").write_text("the user's work elsewhere\n")
    git(own, "commit", "-qam", "the user's commit")
    feature = git(iso.root, "rev-parse", "feature")
    space.release()
    assert git(iso.root, "rev-parse", "feature") == feature
    iso.finish()
    assert worktrees(iso.root) == [str(iso.root), str(own)]


def test_a_result_of_thousands_of_files_with_long_names_comes_back(iso: Isolation) -> None:
    # More bytes of paths than one command line takes (2 MB on Linux): 2,400 paths of 1,000.
    folder = "gen/" + "/".join(["d" * 200] * 4)
    names = [f"{folder}/{n:05d}{'f' * 180}.txt" for n in range(2400)]
    space = iso.open("many", slot="many")
    (space.root / folder).mkdir(parents=True)
    for name in names:
        (space.root / name).write_text(name[-12:])
    phase = Phase("many", "Generate", files=Files(create=("gen",)))
    assert merge(iso, (space, phase)) is None
    written = sorted(p.name for p in (iso.root / folder).iterdir())
    assert written == sorted(name.rsplit("/", 1)[1] for name in names)
    assert (iso.root / names[-1]).read_text() == names[-1][-12:]
    space.remove()


def test_a_worktree_s_read_only_parts_go_without_a_warning(tmp_path: Path) -> None:
    cache = tmp_path / "wt" / "cache"
    cache.mkdir(parents=True)
    (cache / "entry").write_text("cached\n")
    os.chmod(cache / "entry", 0o400)
    os.chmod(cache, 0o500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # onerror is deprecated from Python 3.12 on
        remove_tree(tmp_path / "wt")
    assert not (tmp_path / "wt").exists()


def _rewrite_in_place_within_the_checkout_s_second(space: Workspace, name: str) -> bool:
    """Rewrite ``name`` in place, at the same size, in the second its checkout wrote it (the
    stat data git keeps cannot tell the two apart); False when the second turned meanwhile."""
    target = space.root / name
    checked_out = target.stat().st_mtime_ns // 10**9
    with open(target, "r+b") as handle:  # the same inode: no rename gives it away
        rewritten = handle.read().replace(b"v1", b"v2")
        handle.seek(0)
        handle.write(rewritten)
    return target.stat().st_mtime_ns // 10**9 == checked_out


def _next_second() -> None:
    time.sleep(1.05 - time.time() % 1)


def test_a_same_size_rewrite_in_the_checkout_s_second_is_in_the_snapshot(iso: Isolation) -> None:
    # Racy git: the worktree's index holds stat data as of its checkout; its copy must not pass
    # for one written later, or the rewrite looks unchanged.
    for _ in range(3):
        space = iso.open("bump", slot="w")
        if _rewrite_in_place_within_the_checkout_s_second(space, "app.txt"):
            break
    _next_second()
    phase = Phase("bump", "Bump the version")
    assert space.changed(space.snapshot()) == ["app.txt"]
    assert merge(iso, (space, phase)) is None
    assert (iso.root / "app.txt").read_text() == "app v2\nthe user's uncommitted edit\n"
    space.remove()
    iso.finish()


def test_the_base_takes_a_same_size_edit_the_users_index_does_not_know(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    init_repo(root)
    for _ in range(3):
        (root / "app.txt").write_text("app v1\n")
        git(root, "add", "app.txt")  # the index records app.txt's stat data in this second
        with open(root / "app.txt", "r+b") as handle:
            handle.write(b"app v2\n")
        if (
            os.stat(root / "app.txt").st_mtime_ns // 10**9
            == os.stat(root / ".git" / "index").st_mtime_ns // 10**9
        ):
            break
    _next_second()
    iso = Isolation.for_root(root, SessionPaths(root / ".maestro", "plan-0000000c"))
    iso.start()
    assert git(root, "show", f"{iso.base_ref}:app.txt") == "app v2\n"
    iso.finish()


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_an_edit_to_a_file_git_was_told_not_to_look_at_is_in_the_snapshot(
    iso: Isolation, flag: str
) -> None:
    space = iso.open("hide", slot="w")
    git(space.path, "update-index", flag, "app.txt")
    (space.root / "app.txt").write_text("edited where git does not look\n")
    assert space.changed(space.snapshot()) == ["app.txt"]
    space.remove()
    iso.finish()


def test_a_merge_back_never_undoes_the_users_uncommitted_work_unless_declared_deleted(
    iso: Isolation,
) -> None:
    space = iso.open("p", slot="w")
    (space.root / "notes.txt").unlink()  # untracked as the run started
    git(space.path, "checkout", "main", "--", "app.txt")  # as the user's HEAD has it
    (space.root / "staged.txt").write_text("the phase's own version\n")  # changed: its to make
    whole = Phase("p", "p")
    assert merge(iso, (space, whole)) == (
        "would undo the user's uncommitted or untracked work: app.txt, notes.txt"
    )
    assert (iso.root / "notes.txt").exists()
    declared = Phase("p", "p", files=Files(delete=("notes.txt",), modify=("staged.txt",)))
    git(space.path, "checkout", space.start, "--", "app.txt")
    assert merge(iso, (space, declared)) is None
    assert not (iso.root / "notes.txt").exists()
    assert (iso.root / "staged.txt").read_text() == "the phase's own version\n"
    space.remove()
    iso.finish()


FULL_DISK_MERGE = r"""
import json, os, subprocess, sys
from pathlib import Path

def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout

os.mkdir("repo")
os.chdir("repo")
git("init", "-q", "-b", "main")
git("config", "user.email", "u@example.com")
git("config", "user.name", "U")
Path("a.txt").write_text("a v1\n")
Path("b.txt").write_text("b v1\n")
git("add", ".")
git("commit", "-qm", "start")
Path("a.txt").write_text("a v1\nthe user's uncommitted edit\n")
fill = '"$MAESTRO_PROJECT_ROOT/../fill"'
Path("plan.yaml").write_text(json.dumps({"phases": [{
    "id": "p", "max_retries": 0, "files": {"modify": ["a.txt", "b.txt"]},
    "run": [
        "echo 'a by the phase' > a.txt",
        "head -c 300000 /dev/urandom > b.txt",
        "git add -A",  # its objects are in the store before the disk fills
        f"head -c 100000000 /dev/zero > {fill} 2>/dev/null; truncate -s -60K {fill}",
    ],
}]}))
done = subprocess.run(
    [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml",
     "--maestro-isolate=worktree"], capture_output=True, text=True)
a, b = Path("a.txt").read_text(), Path("b.txt").read_text()
stray = [str(p) for p in Path(".").glob("*.tmp")] + [str(p) for p in Path(".").glob(".*.tmp")]
os.unlink("../fill")
kept = git("for-each-ref", "--format=%(refname)", "refs/maestro/").split()
print(json.dumps({"code": done.returncode, "out": done.stdout + done.stderr, "a": a, "b": b,
                  "stray": stray, "kept": kept}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not can_mount_tmpfs(), reason="needs Linux user and mount namespaces")
def test_a_merge_back_the_disk_cannot_take_writes_nothing(tmp_path: Path) -> None:
    seen = on_small_disk(tmp_path, FULL_DISK_MERGE, size="3m")
    assert seen["code"] == 1, seen["out"]
    assert "not merged back: " in seen["out"] and "No space left on device" in seen["out"]
    assert seen["a"] == "a v1\nthe user's uncommitted edit\n", seen["out"]
    assert seen["b"] == "b v1\n"
    assert seen["stray"] == []
    assert any("/kept/p-" in ref for ref in seen["kept"]), seen["out"]


def test_a_merge_back_that_fails_midway_puts_back_what_it_wrote(
    iso: Isolation, monkeypatch: pytest.MonkeyPatch
) -> None:
    phase = Phase("p", "p", files=Files(modify=("app.txt", "lines.txt")))
    space = iso.open("p", slot="w")
    (space.root / "app.txt").write_text("app by the phase\n")
    (space.root / "lines.txt").write_text("lines by the phase\n")
    users = {name: (iso.root / name).read_text() for name in ("app.txt", "lines.txt")}
    renames = []
    real_replace = os.replace

    def full_on_the_second(source: str | Path, target: str | Path) -> None:
        renames.append(target)
        if len(renames) == 2:
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(swap.os, "replace", full_on_the_second)
    with pytest.raises(OSError, match="No space left"):
        merge(iso, (space, phase))
    monkeypatch.undo()
    assert {name: (iso.root / name).read_text() for name in users} == users
    assert not list(iso.root.glob(".*.tmp"))
    merged = iso.paths.state_dir / "replaced" / "p"
    assert not merged.exists()  # put back whole: nothing of the user's is only there
    assert merge(iso, (space, phase)) is None
    assert (iso.root / "app.txt").read_text() == "app by the phase\n"
    # What a merge replaces is kept, under a name the next merge does not reuse.
    assert (merged / "app.txt").read_text() == users["app.txt"]
    space.release()
    again = iso.open("p", slot="w")
    (again.root / "app.txt").write_text("app by the phase, again\n")
    assert merge(iso, (again, phase)) is None
    assert (merged.with_name("p-2") / "app.txt").read_text() == "app by the phase\n"
    assert (merged / "app.txt").read_text() == users["app.txt"]
    again.remove()
    iso.finish()


def test_swapping_in_puts_back_a_deleted_file_and_takes_away_a_new_one_on_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = tmp_path / "tree"
    top.mkdir()
    (top / "gone.txt").write_text("the user's, to be deleted\n")
    (top / "link").symlink_to("gone.txt")
    (top / "last.txt").write_text("the user's last\n")
    changes = [
        swap.Change("gone.txt", swap.DELETE),
        swap.Change("link", swap.DELETE),
        swap.Change("new/dir/made.txt", "100644", b"made\n"),
        swap.Change("last.txt", "100755", b"#!/bin/sh\n"),
    ]
    real_replace = os.replace

    def fail_on_last(source: str | Path, target: str | Path) -> None:
        if Path(target).name == "last.txt":
            raise OSError(5, "Input/output error")
        real_replace(source, target)

    monkeypatch.setattr(swap.os, "replace", fail_on_last)
    with pytest.raises(OSError, match="Input/output"):
        swap.swap_in(top, changes, tmp_path / "kept")
    monkeypatch.undo()
    assert sorted(p.name for p in top.iterdir()) == ["gone.txt", "last.txt", "link"]
    assert (top / "gone.txt").read_text() == "the user's, to be deleted\n"
    assert os.readlink(top / "link") == "gone.txt"
    assert not (tmp_path / "kept").exists()
    kept = swap.swap_in(top, changes, tmp_path / "kept")
    assert kept == tmp_path / "kept"
    assert sorted(p.name for p in top.iterdir()) == ["last.txt", "new"]
    assert os.access(top / "last.txt", os.X_OK)
    assert (kept / "gone.txt").read_text() == "the user's, to be deleted\n"
    assert os.readlink(kept / "link") == "gone.txt"
    assert (kept / "last.txt").read_text() == "the user's last\n"
