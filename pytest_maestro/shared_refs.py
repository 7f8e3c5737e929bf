"""What git shares among worktrees, put back after an isolated phase: its stash and branches.

An agent in its worktree cannot move the branch checked out in the user's (git refuses), but
it can stash, check out one of the user's other branches and commit there, or make branches.
Whatever it so left in refs the user sees is kept under ``refs/maestro/`` and taken away.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .git import GitError, git_text, rev, run_git, set_ref

Branches = dict[str, str]  # ref -> commit


def branches(top: Path, ours: Path) -> Branches:
    """The repository's branches, but those checked out in a work tree not under ``ours``: the
    user's main one or their own worktrees. Their moves are the user's (no worktree of a phase
    can make them: git refuses to check a branch out twice)."""
    out = git_text(top, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    found = dict(line.split(" ", 1) for line in out.splitlines() if line)
    for tree in git_text(top, "worktree", "list", "--porcelain").split("\n\n"):
        fields = dict(line.partition(" ")[::2] for line in tree.splitlines())
        where = Path(fields.get("worktree", "")).resolve()
        if "branch" in fields and not where.is_relative_to(ours.resolve()):
            found.pop(fields["branch"], None)
    return found


def put_back_branches(
    top: Path, ours: Path, before: Branches, keep: Callable[[str, str], str]
) -> list[str]:
    """Branches made or moved since ``before`` go back as they were; ``keep(what, commit)``
    keeps each new commit and says where. Where they were kept, as refs."""
    kept = []
    now = branches(top, ours)
    for ref, commit in now.items():
        if before.get(ref) == commit:
            continue
        kept.append(keep(ref.removeprefix("refs/heads/"), commit))
        old = before.get(ref)
        if old is None:
            run_git(top, "update-ref", "-d", ref, commit)
        else:
            run_git(top, "update-ref", ref, old, commit)
    for ref, commit in before.items():
        if ref not in now:  # deleted by the phase
            run_git(top, "update-ref", ref, commit, "0" * len(commit))
    return kept


def unstash(top: Path, start: str, keep: Callable[[str, str], str]) -> list[str]:
    """git shares the stash among worktrees: entries stashed on top of ``start`` (a worktree's,
    never the user's) leave the user's stash list, kept by ``keep``."""
    kept: list[str] = []
    while (entry := rev(top, "refs/stash")) is not None:
        try:
            run_git(top, "merge-base", "--is-ancestor", start, entry + "^1")
        except GitError:
            break  # the user's own entry: left alone
        kept.append(keep(f"stash-{len(kept)}", entry))
        run_git(top, "stash", "drop", "--quiet")
    return kept


def keeper(top: Path, refs: str, stem: str) -> Callable[[str, str], str]:
    """``keep(what, commit)``: the commit kept as ``<refs>/<stem>-<what>-<time>``."""

    def keep(what: str, commit: str) -> str:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        ref = f"{refs}/{stem}-{what.replace('/', '_')}-{stamp}"
        set_ref(top, ref, commit)
        return ref

    return keep
