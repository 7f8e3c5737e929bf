"""The locks every run in one state dir shares for its isolated phases: ``create`` (git's
worktree bookkeeping is shared) and ``merge`` (one result into the user's tree, or one put-back
of what git shares, at a time). See docs/architecture.md, "Isolated phases"."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import filelock

LOCK_TIMEOUT = 300.0  # seconds to wait for another process's worktree creation or merge


def state_lock(path: Path) -> filelock.BaseFileLock:
    path.parent.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(path), timeout=LOCK_TIMEOUT)


@contextlib.contextmanager
def held(lock: filelock.BaseFileLock) -> Iterator[None]:
    """``lock`` held; a wait past ``LOCK_TIMEOUT`` is a ``TimeoutError`` in one line."""
    try:
        lock.acquire()
    except filelock.Timeout:
        raise TimeoutError(f"waited {LOCK_TIMEOUT:g}s for {lock.lock_file}") from None
    try:
        yield
    finally:
        lock.release()
