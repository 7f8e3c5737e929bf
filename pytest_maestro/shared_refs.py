"""What git shares among worktrees, put back after an isolated phase: its stash and branches.

An agent in its worktree cannot check out a branch checked out in another worktree (git
refuses), but it can move one with ``git update-ref``, stash, check out one of the user's other
branches and commit there, or make branches. What its own worktree so left in refs the user
sees is kept under ``refs/maestro/`` and taken away. Its own, and only that: every phase starts
at a commit of its own, so what descends from it is the phase's work, and the worktree's HEAD
log names the branches it checked out. Branches the user makes or moves during the run, and
other phases' branches and stash entries, stay as they are; so does any branch checked out in
another worktree, unless this phase moved it onto its own work. A deleted branch comes back
only if it was the user's as the run started, and not onto a phase's work.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .git import GitError, git_text, rev, run_git, set_ref

Branches = dict[str, str]  # ref -> commit
MOVED_TO = re.compile(r"^checkout: moving from .+ to (\S+)$")
MOVED_ONLY = ("checkout:", "reset:", "rebase (start)", "rebase (finish)", "rebase: fast-forward")

_counter = itertools.count(1)


def stamp() -> str:
    """A name part no other keep shares: the time, the process and a count within it."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}-{next(_counter)}"


def ref_part(text: str) -> str:
    """``text`` as one component of a ref name (git refuses ``..``, a leading dot, ``.lock``)."""
    return re.sub(r"\.\.+", "_", re.sub(r"[^\w.-]+", "_", text)).lstrip(".") or "_"


def branch_part(name: str) -> str:
    """A branch's name as one ref component, apart from every other: ``a/b`` is ``a%2Fb``,
    never ``a_b`` (a branch's name is a valid ref already, but for its slashes)."""
    return name.replace("%", "%25").replace("/", "%2F")


@dataclass(frozen=True)
class Own:
    """What one worktree did since its phase started at ``start`` (a commit of its own)."""

    top: Path
    start: str
    heads: frozenset[str]  # commits its HEAD was at
    created: frozenset[str]  # of those, the ones it came to by making them (commit, merge…)
    checked_out: frozenset[str]  # branches (``refs/heads/…``) it checked out
    since: int  # when the phase started: its start's commit time

    @classmethod
    def read(cls, top: Path, worktree: Path, log: Path, start: str) -> Own:
        """From the worktree's HEAD log (``log``), from where HEAD came to ``start`` on."""
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        # Each line: "<old> <new> <who> <when>\t<what>".
        entries = [(line.split(" ", 2)[1:2], line.partition("\t")[2]) for line in lines]
        first = next((i for i, (new, _) in enumerate(entries) if new == [start]), len(entries))
        heads, created, names = {start}, set(), set()
        for new, message in entries[first:]:
            heads.update(new)
            if moved := MOVED_TO.match(message):
                names.add("refs/heads/" + moved.group(1))
            elif message and not message.startswith(MOVED_ONLY):
                created.update(new)
        with contextlib.suppress(GitError):  # none: detached
            names.add(git_text(worktree, "symbolic-ref", "-q", "HEAD"))
        since = int(git_text(top, "show", "-s", "--format=%ct", start))
        return cls(top, start, frozenset(heads), frozenset(created), frozenset(names), since)

    def made(self, commit: str) -> bool:
        """``commit`` is the phase's work: the worktree made it, or it descends from the
        phase's start."""
        if commit in self.created:
            return True
        try:
            run_git(self.top, "merge-base", "--is-ancestor", self.start, commit)
        except GitError:
            return False
        return True

    def stashed(self, entry: str) -> bool:
        """The stash entry was made in this worktree: on its work, or after it started on a
        commit its HEAD was at (one of the user's branches it checked out)."""
        shown = git_text(self.top, "show", "-s", "--format=%P %ct", entry)
        parents, _, when = shown.rpartition(" ")
        on = parents.split()[0]
        return self.made(on) or (on in self.heads and int(when) >= self.since)


def branches(top: Path) -> Branches:
    out = git_text(top, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def checked_out_elsewhere(top: Path, here: Path) -> set[str]:
    """Branches checked out in a worktree other than ``here``: the user's, another phase's."""
    found = set()
    for tree in git_text(top, "worktree", "list", "--porcelain").split("\n\n"):
        fields = dict(line.partition(" ")[::2] for line in tree.splitlines())
        if "branch" in fields and Path(fields.get("worktree", "")).resolve() != here.resolve():
            found.add(fields["branch"])
    return found


def put_back_branches(
    own: Own, here: Path, before: Branches, keep: Callable[[str, str], str], run: Run
) -> list[str]:
    """Branches the worktree ``here`` made or moved since ``before`` go back as they were;
    ``keep(what, commit)`` keeps each new commit and says where. Where they were kept."""
    top, kept = own.top, []
    now, elsewhere = branches(top), checked_out_elsewhere(top, here)
    for ref in sorted(set(now) | set(before)):
        old, new = before.get(ref), now.get(ref)
        if old == new:
            continue
        try:
            if new is None:  # deleted: the user's comes back; a phase's was kept by its taker
                assert old is not None
                if ref in run.users and not run.phase_work(own, old):
                    set_ref(top, ref, old, "0" * len(old))
            elif own.made(new) or (ref in own.checked_out and ref not in elsewhere):
                kept.append(keep(ref.removeprefix("refs/heads/"), new))
                if old is None:
                    run_git(top, "update-ref", "-d", ref, new)
                else:
                    set_ref(top, ref, old, new)
        except GitError:
            continue  # changed again meanwhile: not undone
    return kept


@dataclass(frozen=True)
class Run:
    """What the whole run knows: the user's branches as it started, and its base commit
    (every phase's work descends from it)."""

    users: Branches
    base: str | None

    def phase_work(self, own: Own, commit: str) -> bool:
        if own.made(commit):
            return True
        if self.base is None:
            return False
        try:
            run_git(own.top, "merge-base", "--is-ancestor", self.base, commit)
        except GitError:
            return False
        return True


STASH_MISSES = 5  # times the stash may change under a drop before the rest is left as it is


def unstash(own: Own, keep: Callable[[str, str], str]) -> list[str]:
    """git shares the stash among worktrees: the entries this one made leave the stash list,
    kept by ``keep``; the user's and other phases' stay. Each entry is dropped by its number
    only if that number still names it, just before the drop."""
    kept: dict[str, str] = {}  # entry -> where kept
    known: dict[str, bool] = {}  # entry -> made here
    misses = 0
    while misses < STASH_MISSES:
        entries = git_text(own.top, "stash", "list", "--format=%H").split()
        for entry in entries:
            if entry not in known:
                known[entry] = own.stashed(entry)
        mine = [n for n, entry in enumerate(entries) if known[entry]]
        if not mine:
            break
        n = mine[-1]  # the oldest: dropping it leaves the newer ones' numbers
        entry = entries[n]
        if entry not in kept:
            kept[entry] = keep(f"stash-{n}", entry)
        name = f"stash@{{{n}}}"
        if rev(own.top, name) != entry:
            misses += 1  # the stash changed meanwhile: read it again
            continue
        run_git(own.top, "stash", "drop", "--quiet", name)
    return list(kept.values())


def keeper(top: Path, refs: str, stem: str) -> Callable[[str, str], str]:
    """``keep(what, commit)``: the commit kept as ``<refs>/<stem>-<what>-<stamp>``."""

    def keep(what: str, commit: str) -> str:
        ref = f"{refs}/{stem}-{branch_part(what)}-{stamp()}"
        set_ref(top, ref, commit)
        return ref

    return keep
