"""What ``--maestro-fresh`` moves out of its way: whatever in the state dir has a shape this tool
never gives it (a directory where its lock, ledger or session file belongs, a file where its
archive or logs belong, the state dir itself a file). Nothing is deleted: each goes into
``archive/`` under a name no later move reuses, and a line says where.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from .paths import SessionPaths


def move_aside(paths: SessionPaths) -> list[str]:
    """Move what has the wrong shape into ``archive/``; one line for each move. OSError when
    the file system refuses a move."""
    state_dir, stamp = paths.state_dir, datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    lines: list[str] = []
    if os.path.lexists(state_dir) and not state_dir.is_dir():
        held = state_dir.with_name(f".{state_dir.name}-{stamp}.moving")  # for a moment
        os.replace(state_dir, held)
        state_dir.mkdir()
        lines.append(_into_archive(state_dir, held, state_dir, stamp, "a file, not a directory"))
    if not state_dir.is_dir():
        return lines
    archive = paths.archive
    if os.path.lexists(archive) and not archive.is_dir():
        held = state_dir / f".archive-{stamp}.moving"
        os.replace(archive, held)
        lines.append(_into_archive(state_dir, held, archive, stamp, "not a directory"))
    for path in paths.files():
        if os.path.lexists(path) and not path.is_file():
            lines.append(_into_archive(state_dir, path, path, stamp, "not a regular file"))
    for path in taken_folders(paths):
        lines.append(_into_archive(state_dir, path, path, stamp, "not a directory"))
    return lines


def taken_folders(paths: SessionPaths) -> list[Path]:
    """The shared folders whose name something else than a directory has."""
    return [path for path in paths.folders() if os.path.lexists(path) and not path.is_dir()]


def _into_archive(state_dir: Path, path: Path, was: Path, stamp: str, what: str) -> str:
    target = into_archive(state_dir / "archive", path, was.name, "moved-aside", stamp)
    return f"--maestro-fresh moved aside {was} ({what}), kept as {target}"


def into_archive(archive: Path, path: Path, name: str, kind: str, stamp: str = "") -> Path:
    """``path`` moved (renamed: no space needed) into ``archive`` as ``<name>-<UTC time>.<kind>``,
    never over an earlier one; where it went. OSError when the file system refuses."""
    stamp = stamp or datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    archive.mkdir(parents=True, exist_ok=True)
    target = archive / f"{name}-{stamp}.{kind}"
    count = 1
    while os.path.lexists(target):  # never over an earlier one
        count += 1
        target = archive / f"{name}-{stamp}-{count}.{kind}"
    os.replace(path, target)
    return target
