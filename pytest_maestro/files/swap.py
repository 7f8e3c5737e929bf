"""All or nothing: a merge-back's files staged beside their targets, then renamed into place.

Every file is first written under a temporary name next to its target: the one step that needs
room on the disk. What each target holds is then kept (a hard link where the file system allows
one, so a full disk cannot refuse it; a copy elsewhere), and only then is each staged file renamed
over its target, or the target deleted. An error at any step puts back, from the kept copies, what
was renamed or deleted, and removes what was staged: the tree is as it was, and what it held stays
kept as well. See docs/architecture.md, "Isolated phases".
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DELETE = "0"  # the mode of a change that deletes its path


@dataclass(frozen=True)
class Change:
    """What one path (from ``top``) becomes: ``content`` with git's ``mode``, or deleted."""

    path: str
    mode: str
    content: bytes = b""


def swap_in(
    top: Path, changes: list[Change], keep: Path, then: Callable[[], None] = lambda: None
) -> Path | None:
    """Apply ``changes`` under ``top``, then call ``then``, all or none; what they replace is
    kept under ``keep`` (or a fresh sibling, if it is taken), at the same relative paths.
    Where it was kept; None when nothing was replaced. On any error, the tree is put back and
    the error raised."""
    staged: dict[str, Path] = {}
    made: list[Path] = []  # directories staging created, to remove if it fails
    done: list[Change] = []
    kept: dict[str, Path] = {}
    keep = _fresh(keep)
    try:
        for change in changes:
            if change.mode != DELETE:
                staged[change.path] = _stage(top / change.path, change, made)
        for change in changes:
            target = top / change.path
            if os.path.lexists(target):
                kept[change.path] = _keep(target, keep / change.path)
        for change in changes:
            target = top / change.path
            if change.mode == DELETE:
                if os.path.lexists(target):
                    target.unlink()
            else:
                os.replace(staged[change.path], target)
                del staged[change.path]
            done.append(change)
        then()
    except BaseException:
        if _put_back(top, done, kept):  # the tree is as it was: nothing to keep
            for path in kept.values():
                path.unlink()
            _prune(keep)
        for tmp in staged.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty: nothing of the user's goes
        raise
    return keep if kept else None


def _fresh(keep: Path) -> Path:
    """``keep``, or a sibling no earlier merge used: kept content is never overwritten."""
    candidate, n = keep, 1
    while os.path.lexists(candidate):
        n += 1
        candidate = keep.with_name(f"{keep.name}-{n}")
    return candidate


def _stage(target: Path, change: Change, made: list[Path]) -> Path:
    """The change's content under a temporary name beside ``target``."""
    if target.is_dir() and not target.is_symlink():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
    missing = [p for p in reversed(target.parents) if not os.path.lexists(p)]
    for folder in missing:
        folder.mkdir()
        made.append(folder)
    tmp = target.with_name(f".{target.name}.maestro-merge.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    if change.mode == "120000":
        os.symlink(os.fsdecode(change.content), tmp)
    else:
        try:
            with open(tmp, "xb") as handle:
                handle.write(change.content)
                handle.flush()
            os.chmod(tmp, 0o755 if change.mode == "100755" else 0o644)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return tmp


def _keep(target: Path, kept: Path) -> Path:
    """What ``target`` holds, kept at ``kept``: linked (its content is never written to again,
    only replaced), else copied."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(target, kept, follow_symlinks=False)
    except OSError:
        shutil.copy2(target, kept, follow_symlinks=False)
    return kept


def _put_back(top: Path, done: list[Change], kept: dict[str, Path]) -> bool:
    """Undo ``done``, last first: each target as its kept copy has it, or gone if it had none.
    Linking the copy back needs no room on the disk. Whether every one went back."""
    whole = True
    for change in reversed(done):
        target = top / change.path
        try:
            if change.path not in kept:
                target.unlink(missing_ok=True)
                continue
            tmp = target.with_name(f".{target.name}.maestro-undo.tmp")
            tmp.unlink(missing_ok=True)
            try:
                os.link(kept[change.path], tmp, follow_symlinks=False)
            except OSError:
                shutil.copy2(kept[change.path], tmp, follow_symlinks=False)
            os.replace(tmp, target)
        except OSError:
            whole = False  # its kept copy stays where it is
    return whole


def _prune(keep: Path) -> None:
    """Remove ``keep``'s empty directories, itself included."""
    if keep.is_dir():
        for folder in sorted((p for p in keep.rglob("*") if p.is_dir()), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        with contextlib.suppress(OSError):
            keep.rmdir()
