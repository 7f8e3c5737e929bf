"""Where a phase's files go in the state dir: its log, its pre-images, and the content a restore
replaces, under names no later run reuses. See docs/architecture.md, "Running a phase"."""

from __future__ import annotations

import itertools
import os
from datetime import datetime, timezone
from pathlib import Path

from .declared import file_stem


def log_path(log_dir: Path, phase_id: str) -> Path:
    return log_dir / f"{file_stem(phase_id)}.log"


def preimage_path(log_dir: Path, session: str, phase_id: str) -> Path:
    """Where a phase's declared files are kept as they were before its first attempt: named
    after the session too, since two plans that run at once in one root may share phase ids."""
    return log_dir.parent / "preimages" / f"{session}.{file_stem(phase_id)}.tar"


def replaced_dir(log_dir: Path, phase_id: str, why: str) -> Path:
    """A directory, not there yet, that no other call names, in this run or any other: where a
    restore keeps what it replaces. Its name says when (UTC), which process, and ``why`` (the
    attempt, an interrupted run, a merge), so names sort by time."""
    base = log_dir.parent / "replaced" / file_stem(phase_id)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    while True:  # the process and its counter set it apart from any name made at that moment
        path = base / f"{stamp}-{os.getpid()}-{next(_REPLACED)}-{why}"
        if not os.path.lexists(path):
            return path


_REPLACED = itertools.count(1)  # replaced_dir's names within one process


def keep_preimage(log_dir: Path, session: str, phase_id: str) -> Path | None:
    """The phase's pre-images moved where no run overwrites them (a rename: no space needed)."""
    preimage = preimage_path(log_dir, session, phase_id)
    kept = replaced_dir(log_dir, phase_id, "pre-images") / f"{file_stem(phase_id)}.tar"
    try:
        kept.parent.mkdir(parents=True)
        os.replace(preimage, kept)
    except OSError:
        return None
    return kept
