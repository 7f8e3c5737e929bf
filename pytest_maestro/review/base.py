"""The base a final review's change is taken from, and that change.

In a git work tree the base is the work tree as it was (tracked changes and untracked files
that are not ignored), written through a temporary index as isolated runs snapshot theirs, so
the user's index, branch and files stay as they are; a commit of it is kept under
``refs/maestro/<session>/final-base``, where git's garbage collection leaves it, for as long as
the session lives (a fresh session's base replaces it). The change is ``git diff`` from it to a
snapshot of the work tree now: every file, not only declared ones, since a final review judges
what the run did as a whole.

Outside a git work tree the base is the content of the plan's declared files, kept beside the
session (``<session>.base``); the change is theirs alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..files.declared import FileSnapshot, stays_inside
from ..files.putback import RestoreError
from ..git import GitError, commit_tree, git_text, rev, run_git, set_ref, snapshot_tree
from ..isolation.shared_refs import ref_part
from ..state.paths import SessionPaths
from .diff import attempt_diff

FILES = "files"  # the base of a project outside git: its declared files, saved


class BaseError(Exception):
    """The base cannot be taken: one line for the user."""


@dataclass(frozen=True)
class RunBase:
    root: Path
    paths: SessionPaths
    declared: tuple[str, ...]  # every phase's declared files, for a project outside git

    @property
    def ref(self) -> str:
        return f"refs/maestro/{ref_part(self.paths.name)}/final-base"

    @property
    def saved(self) -> Path:
        """Where the declared files are kept outside git."""
        return self.paths.final_base

    def take(self) -> str:
        """The base as it is now: a commit id, or ``FILES``; BaseError when it cannot be."""
        top = self._top()
        if top is None:
            paths = [p for p in self.declared if stays_inside(self.root, p)]
            try:
                FileSnapshot.of(self.root, paths).save(self.saved)
            except OSError as exc:
                raise BaseError(f"cannot keep the final review's base: {exc}") from None
            return FILES
        try:
            head = rev(top, "HEAD")
            message = "pytest-maestro: the session's base, for its final review"
            base = commit_tree(top, self._tree(top), (head,) if head else (), message)
            set_ref(top, self.ref, base)
        except (GitError, OSError) as exc:
            raise BaseError(f"cannot snapshot the work tree {top}: {exc}") from None
        return base

    def change(self, base: str) -> str:
        """The unified diff from ``base`` to the work tree now; a line that says why when it
        cannot be had (the base is gone), for the reviewer to judge the files as they are."""
        if base == FILES:
            try:
                before = FileSnapshot.load(self.root, self.saved)
            except RestoreError as exc:  # damaged, or the disk refused the read
                return f"# the base of the change: {exc}: no diff\n"
            if before is None:
                return f"# the base of the change ({self.saved}) is gone: no diff\n"
            return attempt_diff(self.root, before, ())
        top = self._top()
        try:
            if top is None:
                raise GitError("rev-parse", f"{self.root} is no longer in a git work tree")
            now = self._tree(top)
            state = self.paths.state_dir.relative_to(self.root).as_posix()
            out = run_git(
                self.root, "diff", "--no-color", "--no-renames", "--relative",
                base, now, "--", ".", f":(exclude){state}",
            )  # fmt: skip
        except (GitError, OSError, ValueError) as exc:
            return f"# the change since the base {base[:12]} cannot be shown: {exc}\n"
        return out.decode("utf-8", "replace")

    def _top(self) -> Path | None:
        try:
            return Path(git_text(self.root, "rev-parse", "--show-toplevel")).resolve()
        except GitError:
            return None

    def _tree(self, top: Path) -> str:
        index = git_text(top, "rev-parse", "--path-format=absolute", "--git-path", "index")
        scratch = self.paths.state_dir / "worktrees" / f"{self.paths.name}.final.index"
        return snapshot_tree(top, Path(index), scratch)


def declared_files(phases: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    """Every phase's declared files, once each, in order."""
    return tuple(dict.fromkeys(path for files in phases for path in files))
