"""The repository's shared ``.git/config``, as an isolated phase found it, put back when it ends.

Every worktree of a repository reads and writes one config file: an agent's ``git config`` in its
worktree changes the user's (its identity, hooks, aliases, remotes). A copy taken as the phase
starts is put back when it is over, or when the run's end or the next run cleans up after a killed
process; the version it replaces is kept under a name no one reuses, and the phase's log says so.

Not ``extensions.worktreeConfig``: with it a plain ``git config`` still writes the shared file
(only ``git config --worktree`` writes a worktree's own), and turning it on changes the
repository's format for every tool that reads it, after the run too.
See docs/architecture.md, "Isolated phases".
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..files.declared import shown


def save_config(common: Path, copy: Path) -> None:
    """The shared config (``common``: the repository's git directory) as it is, at ``copy``."""
    shutil.copyfile(common / "config", copy)


def put_back_config(common: Path, copy: Path, keep: Path) -> str | None:
    """If the shared config is not what ``copy`` holds, keep it at ``keep`` and put the copy
    back, taking git's own lock on it; what was done, in one line (None: it had not changed)."""
    try:
        was = copy.read_bytes()
    except FileNotFoundError:
        return None  # no phase's copy: nothing to compare with
    config = common / "config"
    now = config.read_bytes() if config.exists() else None
    if now == was:
        return None
    if now is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_bytes(now)
    lock = config.with_name("config.lock")
    try:  # git's lock: a git process writing the config meanwhile fails, or makes this wait
        handle = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return f".git/config changed while the phase ran, and a git process holds {lock.name}"
    try:
        try:
            os.write(handle, was)
            os.fsync(handle)
        finally:
            os.close(handle)
        os.replace(lock, config)
    except BaseException:
        lock.unlink(missing_ok=True)  # git's lock must not outlive a failed write
        raise
    kept = (
        f"the changed one kept at {shown(keep, Path.cwd())}" if now is not None else "it was gone"
    )
    return f".git/config changed while the phase ran: put back, {kept}"
