"""What git shares among worktrees, put back after an isolated phase: its stash, branches and tags.

An agent in its worktree cannot check out a branch checked out in another worktree (git
refuses), but it can move one with ``git update-ref``, stash, check out one of the user's other
branches and commit there, or make branches. What its own worktree so left in refs the user
sees is kept under ``refs/maestro/`` and taken away. Its own, and only that: every phase starts
at a commit of its own, so what descends from it is the phase's work, and the worktree's HEAD
log names the branches it checked out. Branches the user makes or moves during the run, and
other phases' branches and stash entries, stay as they are; so does any branch checked out in
another worktree, unless this phase moved it onto its own work. A deleted branch comes back
only if it was the user's as the run started, and not onto a phase's work. So do the user's
tags and stash entries as the run started, when deleted or (tags) moved; a moved tag's new target
is kept. Restored stash entries go on top of the stash, so its order may differ from before.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..git import GitError, git_text, is_ancestor, rev, run_git, set_ref

Branches = dict[str, str]  # ref -> commit (for tags: the object it names)
Stash = tuple[tuple[str, str], ...]  # (entry's commit, its message), newest first
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
        return commit in self.created or is_ancestor(self.top, self.start, commit)

    def stashed(self, entry: str) -> bool:
        """The stash entry was made in this worktree: on its work, or after it started on a
        commit its HEAD was at (one of the user's branches it checked out)."""
        shown = git_text(self.top, "show", "-s", "--format=%P %ct", entry)
        parents, _, when = shown.rpartition(" ")
        on = parents.split()[0]
        return self.made(on) or (on in self.heads and int(when) >= self.since)


def refs_under(top: Path, prefix: str) -> Branches:
    out = git_text(top, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def branches(top: Path) -> Branches:
    return refs_under(top, "refs/heads/")


def stash_entries(top: Path) -> Stash:
    out = git_text(top, "stash", "list", "--format=%H %gs")
    return tuple((line.partition(" ")[0], line.partition(" ")[2]) for line in out.splitlines())


@dataclass(frozen=True)
class Users:
    """The user's branches, tags and stash entries as the run started: the only ones put back
    when gone (and, for tags, when moved)."""

    branches: Branches = field(default_factory=dict)
    tags: Branches = field(default_factory=dict)
    stash: Stash = ()

    KINDS = ("branches", "tags", "stash")

    @classmethod
    def read(cls, top: Path) -> Users:
        return cls(branches(top), refs_under(top, "refs/tags/"), stash_entries(top))

    def save(self, stem: Path) -> None:
        """As ``<stem>.branches.json``, ``<stem>.tags.json`` and ``<stem>.stash.json``."""
        stem.parent.mkdir(parents=True, exist_ok=True)
        for kind, data in zip(self.KINDS, (self.branches, self.tags, self.stash), strict=True):
            Path(f"{stem}.{kind}.json").write_text(json.dumps(data))

    @classmethod
    def load(cls, stem: Path) -> Users:
        """What ``save`` left; what is missing or unreadable as none."""
        found: list[object] = []
        for kind in cls.KINDS:
            try:
                found.append(json.loads(Path(f"{stem}.{kind}.json").read_text()))
            except (OSError, ValueError):
                found.append(None)
        names, tags, stash = found
        return cls(
            _names(names),
            _names(tags),
            tuple((str(e[0]), str(e[1])) for e in stash if isinstance(e, list) and len(e) == 2)
            if isinstance(stash, list)
            else (),
        )

    @classmethod
    def forget(cls, stem: Path) -> None:
        for kind in cls.KINDS:
            Path(f"{stem}.{kind}.json").unlink(missing_ok=True)

    def pin(self, top: Path, refs: str) -> None:
        """Hold what each of them names with a ref under ``refs``, for the run: no gc or
        reflog expiry in a worktree can then prune a deleted branch's commits or a cleared
        stash entry, and they can be put back. Pins a killed run left go first."""
        named = [
            *(
                f"heads/{branch_part(r.removeprefix('refs/heads/'))} {o}"
                for r, o in self.branches.items()
            ),
            *(
                f"tags/{branch_part(r.removeprefix('refs/tags/'))} {o}"
                for r, o in self.tags.items()
            ),
            *(f"stash/{n} {entry}" for n, (entry, _message) in enumerate(self.stash)),
        ]
        unpin(top, refs)
        lines = "".join(f"update {refs}/{line}\n" for line in named)
        run_git(top, "update-ref", "--stdin", stdin=lines.encode())


def unpin(top: Path, refs: str) -> None:
    """The pins under ``refs`` go."""
    pinned = git_text(top, "for-each-ref", "--format=delete %(refname)", refs + "/")
    if pinned:
        run_git(top, "update-ref", "--stdin", stdin=(pinned + "\n").encode())


def _names(data: object) -> Branches:
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def checked_out_elsewhere(top: Path, here: Path) -> set[str]:
    """Branches checked out in a worktree other than ``here``: the user's, another phase's."""
    found = set()
    for tree in git_text(top, "worktree", "list", "--porcelain").split("\n\n"):
        fields = dict(line.partition(" ")[::2] for line in tree.splitlines())
        if "branch" in fields and Path(fields.get("worktree", "")).resolve() != here.resolve():
            found.add(fields["branch"])
    return found


def put_back_branches(
    own: Own, here: Path, before: Branches, keep: Callable[[str, str], str], baseline: Baseline
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
                if ref in baseline.users.branches and not baseline.phase_work(own, old):
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
class Baseline:
    """What the whole run knows: the user's refs as it started, and its base commit (every
    phase's work descends from it)."""

    users: Users
    base: str | None

    def phase_work(self, own: Own, commit: str) -> bool:
        if own.made(commit):
            return True
        return self.base is not None and is_ancestor(own.top, self.base, commit)


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


def put_back_tags(own: Own, baseline: Baseline, keep: Callable[[str, str], str]) -> list[str]:
    """The user's tags as the run started, deleted or moved since, point where they did again;
    ``keep(what, object)`` keeps where a moved one pointed and says where. Tags made during the
    run stay as they are."""
    kept = []
    now = refs_under(own.top, "refs/tags/")
    for ref, old in sorted(baseline.users.tags.items()):
        new = now.get(ref)
        if new == old or baseline.phase_work(own, old):
            continue
        try:
            if new is not None:
                kept.append(keep("tag-" + ref.removeprefix("refs/tags/"), new))
            set_ref(own.top, ref, old, new or "0" * len(old))
        except GitError:
            continue  # changed again meanwhile: not undone
    return kept


def restash(top: Path, users: Stash) -> None:
    """The user's stash entries as the run started, gone from the stash since, are stored back
    with their messages, oldest first: on top of any made since."""
    now = set(git_text(top, "stash", "list", "--format=%H").split())
    for entry, message in reversed(users):
        if entry not in now:
            with contextlib.suppress(GitError):  # gone for good (pruned): nothing to store
                run_git(top, "stash", "store", "-m", message, entry)


def put_back(
    own: Own,
    here: Path,
    baseline: Baseline,
    before: Branches | None,
    keep: Callable[[str, str], str],
) -> list[str]:
    """All of the above for the worktree ``here`` (``own``: what it did; ``before``: its
    branches as it started, None if unknown), each whatever another's failure; where what was
    taken away is kept."""
    kept: list[str] = []
    with contextlib.suppress(GitError):
        kept += unstash(own, keep)
    with contextlib.suppress(GitError):
        restash(own.top, baseline.users.stash)
    if before is not None:
        kept += put_back_branches(own, here, before, keep, baseline)
    with contextlib.suppress(GitError):
        kept += put_back_tags(own, baseline, keep)
    return kept


def keeper(top: Path, refs: str, stem: str) -> Callable[[str, str], str]:
    """``keep(what, commit)``: the commit kept as ``<refs>/<stem>-<what>-<stamp>``."""

    def keep(what: str, commit: str) -> str:
        ref = f"{refs}/{stem}-{branch_part(what)}-{stamp()}"
        set_ref(top, ref, commit)
        return ref

    return keep
