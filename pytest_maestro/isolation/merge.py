"""Merge-back: a passed isolated phase's result brought into the user's work tree.

Its result is the diff from the commit its worktree started at to the tree it left. Only the
files it declares may change (a phase of a format that declares none brings its whole diff);
results come back one at a time under a lock, each on top of the ones merged before. A path that
another phase changed since this one started, or that the user edited during the run, is a
conflict: the phase fails, its work kept, and nothing of it is written. The user's branch and
index are never touched: files are written in the work tree, and the merged results are recorded
on the run's own ref. See docs/architecture.md, "Isolated phases".
"""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..files.declared import FileSnapshot, shown
from ..files.swap import DELETE, Change, swap_in
from ..git import (
    Entry,
    GitError,
    blobs,
    commit_tree,
    entries,
    git_text,
    hash_bytes,
    hash_files,
    rev,
    run_git,
    set_ref,
)
from ..plan import Phase
from .locks import held
from .worktree import Workspace

DELETED: Entry = (DELETE, "0" * 40)


@dataclass(frozen=True)
class Merged:
    """What a merge did: the paths written (from the project root), or why it refused."""

    paths: tuple[str, ...] = ()
    refused: str | None = None
    kept: Path | None = None  # where what the written files replaced is kept

    def line(self, cwd: Path) -> str:
        """What the merge wrote, for the phase's log."""
        line = f"merged back: {', '.join(self.paths) or 'no changes'}"
        if self.kept is not None:
            line += f" (what they replaced is kept in {shown(self.kept, cwd)})"
        return line


def scope(phase: Phase, changed: list[str], prefix: str) -> tuple[list[str], list[str]]:
    """The changed paths (from the top) that may come back, and those outside what the phase
    declares (from the root; from the top when outside the root)."""
    declared = phase.files.writes
    whole = not declared and not phase.reads  # a format that declares no files
    inside: list[str] = []
    outside: list[str] = []
    for path in changed:
        relative = path[len(prefix) :] if path.startswith(prefix) else None
        ok = relative is not None and (whole or any(_under(relative, d) for d in declared))
        (inside if ok else outside).append(path if ok else (relative or path))
    return inside, outside


def _under(path: str, declared: str) -> bool:
    declared = declared.rstrip("/")
    return path == declared or path.startswith(declared + "/")


def merge_back(
    space: Workspace, phase: Phase, tree: str, preimages: Path, replaced: Path
) -> Merged:
    """Bring ``tree``'s changes in the declared files back into the user's work tree, all or
    none. ``preimages``: where the files it replaces are saved first, for a kill meanwhile;
    ``replaced``: where what they held is kept."""
    iso = space.isolation
    paths, outside = scope(phase, space.changed(tree), iso.prefix)
    if outside:
        return Merged(refused="changed files outside its declared ones: " + ", ".join(outside))
    if not paths:
        return Merged()
    undone = undoes(space, phase, paths, tree)
    if undone:
        return Merged(refused=UNDOES + ", ".join(undone))
    with held(iso.lock("merge")):
        merged = rev(iso.top, iso.merged_ref)
        if merged is None:
            return Merged(refused=f"the run's merged results ({iso.merged_ref}) are missing")
        new, conflicts = _combine(space, paths, tree, merged)
        if conflicts:
            return Merged(refused="; ".join(conflicts))
        edited = _user_edits(iso.top, list(new), entries(iso.top, merged, list(new)))
        if edited:
            return Merged(
                refused="conflicts with the user's edits during the run: " + ", ".join(edited)
            )
        commit = _commit(space, merged, new, phase)
        relative = [p[len(iso.prefix) :] for p in new]
        # A kill in the middle of writing puts these back at the next run, like any pre-image.
        before = FileSnapshot.of(iso.root, relative)
        before.save(preimages)
        kept = swap_in(  # the files and the merged results move on together, or neither
            iso.top,
            _changes(iso.top, new),
            replaced,
            lambda: set_ref(iso.top, iso.merged_ref, commit, merged),
        )
    return Merged(tuple(relative), kept=kept)


UNDOES = "would undo the user's uncommitted or untracked work: "


def undoes(space: Workspace, phase: Phase, paths: list[str], tree: str) -> list[str]:
    """Of ``paths`` (from the top), those whose change in ``tree`` takes away work the user had
    not committed as the run started (the base differs there from the HEAD it was made on):
    put back as HEAD has it, or deleted; from the root. ``git reset --hard``, ``checkout -f``
    or ``clean`` in a worktree look so. A ``delete`` the phase declares is its own to make."""
    iso = space.isolation
    base = rev(iso.top, iso.base_ref)
    dirty = _uncommitted(iso.top, base) if base else frozenset()
    paths = [p for p in paths if p in dirty]
    if not paths:
        return []
    head = rev(iso.top, f"{base}^")  # none: the repository had no commit
    at_head = entries(iso.top, head, paths) if head else {}
    after = entries(iso.top, tree, paths)
    undone = []
    for path in paths:
        relative = path[len(iso.prefix) :]
        if after.get(path) not in (None, at_head.get(path)):
            continue  # changed, not undone
        if after.get(path) is None and any(_under(relative, d) for d in phase.files.delete):
            continue
        undone.append(relative)
    return undone


@functools.lru_cache(maxsize=8)
def _uncommitted(top: Path, base: str) -> frozenset[str]:
    """Paths (from the top) where the run's base differs from the HEAD it was made on: the
    user's uncommitted and untracked work as the run started. A commit never changes: cached."""
    out = run_git(top, "diff-tree", "-r", "-z", "--root", "--no-commit-id", "--name-only", base)
    return frozenset(os.fsdecode(p) for p in out.split(b"\0") if p)


def _combine(
    space: Workspace, paths: list[str], tree: str, merged: str
) -> tuple[dict[str, Entry], list[str]]:
    """The entry each path gets, and the conflicts: a path another phase changed since this one
    started, unless both changes merge cleanly line by line."""
    top = space.isolation.top
    before = entries(top, space.start, paths)
    after = entries(top, tree, paths)
    now = entries(top, merged, paths)
    new: dict[str, Entry] = {}
    conflicts: list[str] = []
    for path in paths:
        mine, theirs, base = after.get(path), now.get(path), before.get(path)
        if "160000" in (e[0] for e in (mine, theirs, base) if e):
            conflicts.append(f"{path} is a submodule: its changes are not brought back")
        elif theirs == base:
            new[path] = mine or DELETED
        elif theirs == mine:
            continue  # the same change is in already
        else:
            clean = _merge_text(top, path, base, theirs, mine)
            if clean is None:
                who = _who(space, merged, path, base, mine)
                conflicts.append(f"{path} conflicts with {who}")
            else:
                new[path] = clean
    return new, conflicts


def _merge_text(
    top: Path, path: str, base: Entry | None, theirs: Entry | None, mine: Entry | None
) -> Entry | None:
    """Both sides changed ``path``: a clean line-by-line merge, or None."""
    if base is None or theirs is None or mine is None or base[0] == "120000":
        return None
    if mine[0] != theirs[0]:
        return None
    contents = {
        name: run_git(top, "cat-file", "blob", oid)
        for name, oid in (("base", base[1]), ("theirs", theirs[1]), ("mine", mine[1]))
    }
    with tempfile.TemporaryDirectory() as scratch:
        files = []
        for name in ("theirs", "base", "mine"):
            file = Path(scratch) / name
            file.write_bytes(contents[name])
            files.append(str(file))
        try:  # its exit is the number of conflicts: any is no merge
            merged = run_git(top, "merge-file", "-p", "-q", *files)
        except GitError:
            return None
    return (mine[0], hash_bytes(top, merged))


def _who(space: Workspace, merged: str, path: str, base: Entry | None, mine: Entry | None) -> str:
    """The phase whose merged result ``path``'s change cannot be merged with: of the results
    merged since ``space`` started, the first one that alone would conflict."""
    top = space.isolation.top
    log = git_text(
        top, "log", "--reverse", "--format=%H%n%B%x1e", f"{space.start}..{merged}", "--", path
    )
    last = None
    for record in filter(None, (r.strip() for r in log.split("\x1e"))):
        commit, *body = record.splitlines()
        phase = next((line[7:] for line in body if line.startswith("Phase: ")), None)
        last = phase or last
        theirs = entries(top, commit, [path]).get(path)
        if theirs != mine and _merge_text(top, path, base, theirs, mine) is None:
            return _named(phase)
    return _named(last)


def _named(phase: str | None) -> str:
    return f"phase {phase!r}" if phase else "a phase merged since it started"


def _user_edits(top: Path, paths: list[str], current: dict[str, Entry]) -> list[str]:
    """Paths whose file in the work tree is not what the merged results hold: the user changed,
    created or deleted it during the run."""
    files = [
        p for p in paths if p in current and (top / p).is_file() and not (top / p).is_symlink()
    ]
    hashed = hash_files(top, files)
    return [p for p in paths if not _same(top, p, current.get(p), hashed)]


def _same(top: Path, path: str, want: Entry | None, hashed: dict[str, str]) -> bool:
    full = top / path
    if want is None:
        return not os.path.lexists(full)
    if want[0] == "120000":
        return full.is_symlink() and hash_bytes(top, os.fsencode(os.readlink(full))) == want[1]
    if path not in hashed:
        return False
    executable = bool(full.stat().st_mode & 0o100)
    return hashed[path] == want[1] and executable == (want[0] == "100755")


def _commit(space: Workspace, merged: str, new: dict[str, Entry], phase: Phase) -> str:
    """A commit on the merged results with ``new`` applied: the next worktrees start there."""
    top = space.isolation.top
    scratch = space.path.with_name(space.path.name + ".merge-index")
    env = {"GIT_INDEX_FILE": str(scratch)}
    try:
        run_git(top, "read-tree", merged, env=env)
        info = "".join(f"{mode} {oid}\t{path}\0" for path, (mode, oid) in new.items())
        run_git(top, "update-index", "-z", "--index-info", env=env, stdin=os.fsencode(info))
        tree = git_text(top, "write-tree", env=env)
    finally:
        scratch.unlink(missing_ok=True)
    message = f"{phase.id}: {phase.name}\n\nPhase: {phase.id}\n"
    return commit_tree(top, tree, (merged,), message)


def _changes(top: Path, new: dict[str, Entry]) -> list[Change]:
    """The entries to write, with their contents (through the paths' smudge filters)."""
    contents = blobs(top, [(oid, path) for path, (mode, oid) in new.items() if mode != DELETE])
    return [Change(path, mode, contents.get(path, b"")) for path, (mode, _oid) in new.items()]
