"""What git shares among worktrees, on real repositories: a phase takes back only the branches
and stash entries its own worktree made, never another phase's nor the user's."""

from __future__ import annotations

from pathlib import Path

from pytest_maestro.isolate import Isolation
from pytest_maestro.shared_refs import keeper

from .test_isolate import git, kept_refs
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
