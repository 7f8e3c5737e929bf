"""Where a plan's session lives, who holds it, and where an old one is archived."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ..numbers import PID
from ..texts import one_line
from .journal import atomic_write, fsync_dir
from .model import StateError, now
from .paths import SessionPaths

if TYPE_CHECKING:  # filelock imports asyncio: imported by acquire, which only the process that
    # decides calls, not by whatever needs process_exists
    import filelock


class SessionBusy(StateError):
    """Another process holds this plan's session."""


def prepare_dir(state_dir: Path) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError), (state_dir / ".gitignore").open("x") as ignore:
        ignore.write("*\n")


def acquire(paths: SessionPaths, plan: str) -> filelock.BaseFileLock:
    import filelock

    lock = filelock.FileLock(str(paths.lock), timeout=0)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        holder = holder_of(paths) or "pid unknown"
        raise SessionBusy(f"plan {plan} is already running ({holder})") from None
    try:
        atomic_write(paths.info, json.dumps({"pid": os.getpid(), "since": now(), "plan": plan}))
    except BaseException:
        lock.release()
        raise
    return lock


def holder_of(paths: SessionPaths, *, alive: bool = False) -> str | None:
    """Who holds the session, as its info file names them: ``pid N since T``; None when no
    file (or no readable one) says so, or when ``alive`` and that process has ended (a killed
    run left the file)."""
    try:
        info = json.loads(paths.info.read_text(encoding="utf-8"))
        pid, since = info["pid"], info.get("since", "?")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if type(pid) is not int or not PID.holds(pid) or not isinstance(since, str):
        return None  # not what this tool writes: it names no one
    if alive and not process_exists(pid):
        return None
    return f"pid {pid} since {one_line(since)}"


def process_exists(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0 asks; not on Windows, where it is assumed)."""
    if os.name == "nt":
        return True
    if not PID.holds(pid):  # os.kill would raise OverflowError, or signal a group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def release(paths: SessionPaths, lock: filelock.BaseFileLock) -> None:
    with contextlib.suppress(OSError):
        paths.info.unlink()
    lock.release()


def archive(paths: SessionPaths) -> Path | None:
    """Move the session (snapshot and journal) to ``archive/<name>-<timestamp>.*``."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    archived = None
    with contextlib.suppress(FileNotFoundError):
        if paths.journal.stat().st_size == 0:  # nothing the snapshot does not hold
            paths.journal.unlink()
    for source in (paths.snapshot, paths.journal):
        if source.exists():
            paths.archive.mkdir(exist_ok=True)
            target = paths.archive / f"{paths.name}-{stamp}{source.suffix}"
            os.replace(source, target)
            archived = archived or target
    if archived is not None:
        fsync_dir(paths.archive)
        fsync_dir(paths.state_dir)
    return archived
