"""Putting a phase's declared files back as they were: all of them or none, what each replaces
kept first; a path the restore must not replace is left as it is, its old content kept.

See docs/architecture.md, "The flow of one phase from plan to JUnit"."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..texts import os_error_text, shown

Contents = tuple[tuple[str, bytes | None], ...]  # declared path -> its content (None: absent)


class RestoreError(OSError):
    """A restore that could not be done as a whole: nothing of it was written. An OSError, so
    that what catches a disk's errors catches this one too."""


@dataclass(frozen=True)
class Restored:
    """A declared file put back, or ``left`` as it is (why). ``kept``: where the content it
    replaced went; for a file left, where its content from before the phase went."""

    path: str
    kept: Path | None
    left: str | None = None
    removed: bool = False  # absent before the phase: the file it made is gone again

    def line(self, cwd: Path) -> str:
        if self.left is not None:
            line = f"not put back {self.path}: {self.left}, left as it is"
            if self.kept is None:  # it was absent before the phase
                return line
            return f"{line} (its content from before the phase is kept at {shown(self.kept, cwd)})"
        what = f"removed {self.path}, absent before" if self.removed else f"restored {self.path}"
        if self.kept is None:
            return what
        return f"{what} (the content it replaced is kept at {shown(self.kept, cwd)})"


@dataclass(frozen=True)
class _Step:
    relative: str
    target: Path  # the real path, inside the root
    content: bytes | None
    present: bool  # something is there now, to keep before it is replaced


def put_back(root: Path, contents: Contents, keep: Path) -> list[Restored]:
    """Put each declared file back to its content in ``contents``, the ones that differ only.
    What is there now is copied under ``keep`` (at the same relative path) before anything is
    written. RestoreError, with nothing of the user's tree changed, when a step fails."""
    real_root = root.resolve()
    steps: list[_Step] = []
    done: list[Restored] = []
    for relative, content in contents:
        target = (root / relative).resolve()
        why = _cannot(real_root, target, content)
        if why is not None:
            kept = None if content is None else _write(keep / relative, content, relative)
            done.append(Restored(relative, kept, why))
        elif read(target) != content:
            steps.append(_Step(relative, target, content, os.path.lexists(target)))
    staged = _stage(steps, keep)
    _commit(steps, staged, keep)
    return [*done, *(_restored(step, keep) for step in steps)]


def _restored(step: _Step, keep: Path) -> Restored:
    kept = keep / step.relative if step.present else None
    return Restored(step.relative, kept, removed=step.content is None)


def read(path: Path) -> bytes | None:
    """A file's content; None when absent, not a regular file or unreadable."""
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def _cannot(root: Path, target: Path, content: bytes | None) -> str | None:
    """Why ``target`` must be left as it is: what is there is not the file it was (a folder the
    user may have put there, a link out of the root), and replacing it could lose work."""
    if not target.is_relative_to(root):
        return "it now leads outside the project root"
    if target.is_dir():
        return None if content is None else "it is now a directory"
    for folder in target.parents:
        if folder == root or not folder.is_relative_to(root):
            break
        if os.path.lexists(folder) and not folder.is_dir():
            return f"its folder {folder.relative_to(root)} is now a file"
    return None


def _write(path: Path, content: bytes, relative: str) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    except OSError as exc:
        error = f"cannot keep the old content of {relative}: {os_error_text(exc)}"
        raise RestoreError(error) from None
    return path


def _stage(steps: list[_Step], keep: Path) -> dict[str, Path]:
    """Each file's current content copied under ``keep``, each new content written beside its
    file; on any error, the staged files removed and RestoreError."""
    staged: dict[str, Path] = {}
    try:
        for step in steps:
            if step.present:
                kept = keep / step.relative
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(step.target, kept, follow_symlinks=False)
            if step.content is not None:
                step.target.parent.mkdir(parents=True, exist_ok=True)
                fd, name = tempfile.mkstemp(
                    prefix=f".{step.target.name}.",
                    suffix=".maestro-restore.tmp",
                    dir=step.target.parent,
                )
                staged[step.relative] = Path(name)
                with open(fd, "wb") as handle:
                    handle.write(step.content)
    except OSError as exc:
        _unstage(staged)
        raise RestoreError(f"cannot put back {step.relative}: {os_error_text(exc)}") from None
    return staged


def _commit(steps: list[_Step], staged: dict[str, Path], keep: Path) -> None:
    """Every staged file renamed into place (a rename is whole: never a half-written file); an
    error undoes the ones done, from their kept copies."""
    done: list[_Step] = []
    try:
        for step in steps:
            if step.content is None:
                step.target.unlink()
            else:
                os.replace(staged.pop(step.relative), step.target)
            done.append(step)
    except OSError as exc:
        _unstage(staged)
        for step in reversed(done):
            with contextlib.suppress(OSError):
                if step.present:
                    shutil.copy2(keep / step.relative, step.target, follow_symlinks=False)
                else:
                    step.target.unlink()
        raise RestoreError(f"cannot put back {step.relative}: {os_error_text(exc)}") from None


def _unstage(staged: dict[str, Path]) -> None:
    for path in staged.values():
        with contextlib.suppress(OSError):
            path.unlink()


def keep_aside(path: Path, kept: Path) -> Path | None:
    """``path`` moved to ``kept``, in a folder not there yet, where no run overwrites it (a
    rename: no space needed); None when it cannot be."""
    try:
        kept.parent.mkdir(parents=True)
        os.replace(path, kept)
    except OSError:
        return None
    return kept
