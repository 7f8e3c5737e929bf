"""The watch that makes sure a review changed nothing: the tree before the review, what differs
after it, and everything that differs put back.

A reviewer runs in its CLI's read-only mode; this is the check that does not depend on the CLI.
Before the review, the content of the phase's declared files and of every file git reports
changed or new (the attempt's work and the user's uncommitted edits) is kept in memory, with
git's list of them. After it, a file differs when its content is not what was kept, or when git
reports a change the list did not have (a clean file edited, a new file). Such a file is put back
all or none, as a restore puts declared files back, what it replaces kept first: from the kept
content, from git's index for a file that was clean (then the index's content was the file's),
or removed for a file that was not there. Outside a git work tree only the declared files are
watched; in one, files git ignores are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..files.declared import OutsideRoot, inside, stays_inside
from ..files.putback import Restored, put_back, read
from ..git import GitError, changed_files, run_git

SAVE_LIMIT = 4 * 1024 * 1024  # bytes of a changed file whose content is kept to be put back


@dataclass(frozen=True)
class TreeGuard:
    root: Path
    saved: tuple[tuple[str, bytes | None], ...]  # path -> content before the review (None: absent)
    dirty: dict[str, tuple[int, int]] | None  # git's changed and new files then; None: no git
    ignored: tuple[str, ...]  # path prefixes never watched (the state dir, where its logs go)

    @classmethod
    def take(cls, root: Path, declared: Sequence[str], ignored: tuple[str, ...]) -> TreeGuard:
        dirty = changed_files(root)
        small = [
            path
            for path, (size, _) in (dirty or {}).items()
            if 0 <= size <= SAVE_LIMIT and not path.startswith(ignored)
        ]
        # A path that leads out of the root is not watched.
        paths = [path for path in dict.fromkeys([*declared, *small]) if stays_inside(root, path)]
        return cls(root, tuple((path, _content(root, path)) for path in paths), dirty, ignored)

    def changed(self) -> list[str]:
        """The files that differ from what they were when the guard was taken."""
        differ = {path for path, content in self.saved if _content(self.root, path) != content}
        now = changed_files(self.root) if self.dirty is not None else None
        if self.dirty is not None and now is not None:
            known = {path for path, _ in self.saved}
            then = self.dirty
            differ |= {p for p, sig in now.items() if p not in known and then.get(p) != sig}
            differ |= {p for p in then if p not in now and p not in known}  # back as in the index
        return sorted(path for path in differ if not path.startswith(self.ignored))

    def put_back(self, paths: Sequence[str], keep: Path) -> tuple[list[Restored], list[str]]:
        """``paths`` as they were, all or none (RestoreError), what each replaces kept under
        ``keep``; and those that cannot be (a large file git reported changed before: its
        content was not kept)."""
        saved = dict(self.saved)
        index = _in_index(self.root, [p for p in paths if p not in saved])
        contents: list[tuple[str, bytes | None]] = []
        lost: list[str] = []
        for path in paths:
            if path in saved:
                contents.append((path, saved[path]))
            elif self.dirty is not None and path in self.dirty:
                lost.append(path)  # changed before the review, and too large to have been kept
            else:
                contents.append((path, index.get(path)))
        return put_back(self.root, tuple(contents), keep), lost


def _content(root: Path, relative: str) -> bytes | None:
    try:
        return read(inside(root, relative))
    except OutsideRoot:  # it leads out of the root now: not what it was
        return None


def _in_index(root: Path, paths: list[str]) -> dict[str, bytes]:
    """The index's content of those ``paths`` git tracks (through its filters, as a checkout
    would write them)."""
    if not paths:
        return {}
    try:
        tracked = run_git(root, "ls-files", "-z", "--", *paths).decode().split("\0")
        return {
            path: run_git(root, "cat-file", "--filters", f":./{path}")
            for path in paths
            if path in tracked
        }
    except GitError:
        return {}
