"""What git shares among worktrees, on real repositories: a phase takes back only the branches
and stash entries its own worktree made, never another phase's nor the user's, and the user's
tags and stash entries it removed or moved come back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_maestro.isolation import worktree as isolate
from pytest_maestro.isolation.shared_refs import keeper
from pytest_maestro.isolation.worktree import Isolation
from pytest_maestro.state import SessionPaths

from .test_isolate import git, init_repo, kept_refs
from .test_isolate_merge import iso  # noqa: F401  (the fixture)


def stash_list(root: Path) -> list[str]:
    return git(root, "stash", "list", "--format=%H").split()


def test_phases_side_by_side_take_back_only_their_own_branches_and_stash(
    iso: Isolation,  # noqa: F811
) -> None:
    a = iso.open("a", slot="a")
    b = iso.open("b", slot="b")  # from the same merged results as a
    git(a.path, "checkout", "-q", "-b", "feat")
    (a.path / "wip.txt").write_text("a's work in progress\n")
    git(a.path, "stash", "-q", "-u")
    git(a.path, "branch", "a-mark")  # made, not checked out
    feat = git(iso.root, "rev-parse", "feat")
    [entry] = stash_list(iso.root)
    b.release()
    assert git(iso.root, "rev-parse", "feat") == feat  # a has it checked out still
    assert git(iso.root, "rev-parse", "a-mark") == feat
    assert stash_list(iso.root) == [entry]
    assert [r for r in kept_refs(iso.root) if "/kept/" in r] == []  # none under b's name
    a.release()
    assert git(iso.root, "branch", "--list", "feat", "a-mark") == ""
    assert stash_list(iso.root) == []
    kept = git(iso.root, "for-each-ref", "--format=%(objectname) %(refname)", "refs/maestro/")
    mine = sorted(line.split()[0] for line in kept.splitlines() if "/kept/a-" in line)
    assert mine == sorted([feat.strip(), feat.strip(), entry])
    iso.finish()


def test_the_users_branch_and_stash_changes_during_a_phase_stay(
    iso: Isolation,  # noqa: F811
) -> None:
    space = iso.open("p", slot="w")
    git(space.path, "checkout", "-q", "-b", "phase-branch")  # the phase's own: taken back
    user = iso.root
    git(user, "branch", "x")
    moved = git(user, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "the user's").strip()
    git(user, "branch", "-f", "develop", moved)
    git(user, "stash", "-q")  # the user's staged and uncommitted edits, stashed meanwhile
    stashed = stash_list(user)
    users = git(user, "for-each-ref", "refs/heads/").splitlines()
    space.release()
    left = git(user, "for-each-ref", "refs/heads/").splitlines()
    assert left == [line for line in users if not line.endswith("/phase-branch")]
    assert len(left) == len(users) - 1  # x and develop's move stay; the phase's branch went
    assert git(user, "rev-parse", "develop").strip() == moved
    assert stash_list(user) == stashed
    [kept] = [r for r in kept_refs(user) if "/kept/" in r]
    assert "/kept/p-phase-branch-" in kept
    iso.finish()


def test_kept_branch_names_never_collide(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    commit = git(
        tmp_path, "commit-tree", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "-m", "empty"
    ).strip()
    keep = keeper(tmp_path, "refs/maestro/s/kept", "p")
    refs = [keep(name, commit) for name in ("a/b", "a_b", "a%2Fb", "a/b")]
    assert len(set(refs)) == 4
    assert "p-a%2Fb-" in refs[0] and "p-a_b-" in refs[1] and "p-a%252Fb-" in refs[2]
    listed = git(tmp_path, "for-each-ref", "--format=%(refname)", "refs/maestro/").split()
    assert sorted(listed) == sorted(refs)


def test_a_stash_entry_pushed_while_one_is_kept_is_never_the_one_dropped(
    iso: Isolation,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    space = iso.open("p", slot="w")
    (space.path / "wip.txt").write_text("the phase's work in progress\n")
    git(space.path, "stash", "-q", "-u")
    [phase_entry] = stash_list(iso.root)

    def keeper_meanwhile(top: Path, refs: str, stem: str) -> Callable[[str, str], str]:
        keep = keeper(top, refs, stem)

        def keep_meanwhile(what: str, commit: str) -> str:
            if len(stash_list(iso.root)) == 1:
                git(iso.root, "stash", "-q")  # the user stashes in that very moment
            return keep(what, commit)

        return keep_meanwhile

    monkeypatch.setattr(isolate, "keeper", keeper_meanwhile)
    space.release()
    [users] = stash_list(iso.root)
    assert users != phase_entry
    assert git(iso.root, "show", "-s", "--format=%s", users).startswith("WIP on main")
    kept = git(iso.root, "for-each-ref", "--format=%(objectname)", "refs/maestro/").split()
    assert phase_entry in kept
    iso.finish()


def test_taking_back_waits_for_a_merge_under_way(iso: Isolation) -> None:  # noqa: F811
    space = iso.open("p", slot="w")
    (space.path / "wip.txt").write_text("the phase's work in progress\n")
    git(space.path, "stash", "-q", "-u")
    merging = iso.lock("merge")
    merging.acquire()
    released = threading.Thread(target=space.release)
    try:
        released.start()
        time.sleep(0.5)
        assert released.is_alive()
        assert len(stash_list(iso.root)) == 1
    finally:
        merging.release()
        released.join(30)
    assert stash_list(iso.root) == []
    iso.finish()


def test_a_stash_drop_that_fails_still_lets_the_branches_be_taken_back(
    iso: Isolation,  # noqa: F811
) -> None:
    space = iso.open("p", slot="w")
    (space.path / "wip.txt").write_text("the phase's work in progress\n")
    git(space.path, "stash", "-q", "-u")
    git(space.path, "branch", "phase-branch")
    held = iso.common / "refs" / "stash.lock"  # another git process holds the stash
    held.write_text("")
    try:
        space.release()
    finally:
        held.unlink()
    assert git(iso.root, "branch", "--list", "phase-branch") == ""
    assert len(stash_list(iso.root)) == 1  # not dropped, but kept
    assert any("/kept/p-phase-branch-" in ref for ref in kept_refs(iso.root))
    assert any("/kept/p-stash-0-" in ref for ref in kept_refs(iso.root))
    iso.finish()


def test_another_phases_branch_taken_back_meanwhile_stays_gone(
    iso: Isolation,  # noqa: F811
) -> None:
    b = iso.open("b", slot="b")
    git(b.path, "branch", "b-branch")
    a = iso.open("a", slot="a")  # as it opens, b-branch is there
    b.release()
    assert git(iso.root, "branch", "--list", "b-branch") == ""
    a.release()
    assert git(iso.root, "branch", "--list", "b-branch") == ""
    assert [r for r in kept_refs(iso.root) if "/kept/a-" in r] == []
    iso.finish()


def test_a_branch_the_user_deletes_stays_deleted_and_one_a_phase_deletes_comes_back(
    iso: Isolation,  # noqa: F811
) -> None:
    git(iso.root, "branch", "x")  # made during the run
    space = iso.open("p", slot="w")
    git(iso.root, "branch", "-D", "x")
    develop = git(iso.root, "rev-parse", "develop")
    git(space.path, "branch", "-D", "develop")
    space.release()
    assert git(iso.root, "branch", "--list", "x") == ""
    assert git(iso.root, "rev-parse", "develop") == develop
    iso.finish()


def test_the_users_checked_out_branch_moved_onto_the_phases_work_goes_back(
    iso: Isolation,  # noqa: F811
) -> None:
    space = iso.open("p", slot="w")
    main = git(iso.root, "rev-parse", "main").strip()
    (space.path / "phase.txt").write_text("the phase's\n")
    git(space.path, "add", "phase.txt")
    git(space.path, "commit", "-qm", "the phase's commit")
    work = git(space.path, "rev-parse", "HEAD").strip()
    git(space.path, "update-ref", "refs/heads/main", "HEAD")
    space.release()
    assert git(iso.root, "rev-parse", "main").strip() == main
    assert git(iso.root, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    kept = git(iso.root, "for-each-ref", "--format=%(objectname) %(refname)", "refs/maestro/")
    assert f"{work} refs/maestro/{iso.refs.split('/')[-1]}/kept/p-main-" in kept
    iso.finish()


@pytest.fixture
def users_iso(tmp_path: Path) -> Isolation:
    """A run started on a repository with two stash entries and two tags of the user's."""
    root = tmp_path / "repo"
    root.mkdir()
    init_repo(root)
    git(root, "stash", "-q", "-m", "the user's first")
    (root / "app.txt").write_text("app v3\n")
    git(root, "stash", "-q", "-m", "the user's second")
    git(root, "tag", "v1")
    git(root, "tag", "-a", "v2", "-m", "a release")
    (root / ".maestro").mkdir()
    (root / ".maestro" / ".gitignore").write_text("*\n")
    isolation = Isolation.for_root(root, SessionPaths(root / ".maestro", "plan-0000000b"))
    assert isolation.start() == []
    return isolation


def stash_messages(root: Path) -> list[str]:
    return git(root, "stash", "list", "--format=%H %gs").splitlines()


def test_the_users_stash_entries_an_agent_clears_come_back(users_iso: Isolation) -> None:
    run, user = users_iso, users_iso.root
    before = stash_messages(user)
    assert len(before) == 2
    space = run.open("p", slot="w")
    git(space.path, "stash", "clear")
    (user / "app.txt").write_text("app v4\n")
    git(user, "stash", "-q", "-m", "the user's, made during the run")
    [during] = stash_messages(user)
    space.release()
    assert stash_messages(user) == [*before, during]  # the user's come back on top
    run.finish()


@pytest.mark.parametrize(
    "command", [("tag", "-d", "v1"), ("tag", "-f", "v1", "HEAD"), ("tag", "-f", "v2", "HEAD")]
)
def test_the_users_tags_an_agent_deletes_or_moves_stay_as_they_were(
    users_iso: Isolation, command: tuple[str, ...]
) -> None:
    run, user = users_iso, users_iso.root
    tags = git(user, "for-each-ref", "--format=%(refname) %(objectname)", "refs/tags/")
    space = run.open("p", slot="w")
    git(space.path, *command)
    moved = git(user, "for-each-ref", "--format=%(objectname)", f"refs/tags/{command[-2]}")
    git(user, "tag", "v3")  # the user's, made during the run: stays
    v3 = git(user, "rev-parse", "v3").strip()
    space.release()
    now = git(user, "for-each-ref", "--format=%(refname) %(objectname)", "refs/tags/")
    assert now == tags + f"refs/tags/v3 {v3}\n"
    kept = git(user, "for-each-ref", "--format=%(objectname) %(refname)", "refs/maestro/")
    if command[1] == "-f":
        prefix = f"refs/maestro/{run.refs.split('/')[-1]}/kept/p-tag-{command[2]}-"
        assert f"{moved.strip()} {prefix}" in kept
    else:
        assert "/kept/" not in kept
    run.finish()


def test_the_shared_config_changed_during_a_phase_goes_back_even_after_a_crash(
    iso: Isolation,  # noqa: F811
) -> None:
    config = iso.common / "config"
    users = config.read_bytes()
    first = iso.open("first", slot="w")
    git(first.path, "config", "alias.st", "status")
    [line] = first.release()
    assert config.read_bytes() == users
    assert line.startswith(".git/config changed while the phase ran: put back, ")
    second = iso.open("second", slot="x")
    git(second.path, "config", "core.editor", "agent-editor")
    [note] = iso.finish()  # its process died: the run's end puts the config back
    assert note.startswith("phase 'second': .git/config changed while the phase ran: put back")
    assert config.read_bytes() == users
    kept = sorted((iso.paths.state_dir / "kept").glob("*config*"))
    assert [p.name.split("-config-")[0] for p in kept] == ["first", "second"]
