"""Where everything of a plan's session lives in the state dir, spelled out once: the session's
own files, and the folders every session in the state dir shares (logs, pre-images, what a
restore replaces, worktrees, kept work, the archive). See docs/architecture.md, "Session state"."""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..plan.model import Plan

RECORD_SUFFIX = ".running"  # a running record: ``logs/<session>.<pid>.running``
SPARE_SUFFIX = ".spare"  # beside it, the file its process's next log will be (``processes``)
SUMMARY = "summary.json"  # the last run's summary, whichever plan it ran
PACING = "pacing.json"
FOLDERS = ("logs", "preimages", "replaced", "worktrees", "kept", "archive")


@dataclass(frozen=True)
class SessionPaths:
    state_dir: Path
    name: str  # ``<plan stem>-<hash of the plan's path in the root>``

    @classmethod
    def for_plan(cls, state_dir: Path, plan: Plan, root: Path) -> SessionPaths:
        rel = plan_relpath(plan, root)
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(rel).stem) or "plan"
        return cls(state_dir, f"{stem}-{hashlib.sha256(rel.encode()).hexdigest()[:8]}")

    # -- the session's own files ---------------------------------------------------------------

    @property
    def snapshot(self) -> Path:
        return self.state_dir / f"{self.name}.md"

    @property
    def journal(self) -> Path:
        return self.state_dir / f"{self.name}.journal"

    @property
    def lock(self) -> Path:
        return self.state_dir / f"{self.name}.lock"

    @property
    def info(self) -> Path:
        return self.state_dir / f"{self.name}.info"

    @property
    def spend(self) -> Path:
        """The run's spend ledger, shared by its processes."""
        return self.state_dir / f"{self.name}.spend"

    @property
    def final_base(self) -> Path:
        """The final review's base outside git: the declared files' content (``review/base.py``)."""
        return self.state_dir / f"{self.name}.base"

    @property
    def summary(self) -> Path:
        return self.state_dir / SUMMARY

    @property
    def pacing(self) -> Path:
        """The account's call slots, shared by every run in the state dir (``phase/slots.py``)."""
        return self.state_dir / PACING

    def files(self) -> tuple[Path, ...]:
        """The files this tool keeps in the state dir for this session."""
        own = (self.snapshot, self.journal, self.lock, self.info, self.spend, self.final_base)
        return (*own, self.summary, self.pacing, self.state_dir / ".gitignore")

    def folders(self) -> tuple[Path, ...]:
        """The folders every session in the state dir shares."""
        return tuple(self.state_dir / folder for folder in FOLDERS)

    # -- the shared folders --------------------------------------------------------------------

    @property
    def archive(self) -> Path:
        return self.state_dir / "archive"

    @functools.cached_property  # asked for at every phase
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def worktrees(self) -> Path:
        """The session's worktrees, one folder each; beside it the session's own files."""
        return self.state_dir / "worktrees" / self.name

    @property
    def kept(self) -> Path:
        """Patches of work kept rather than thrown away (a worktree's, a shared config)."""
        return self.state_dir / "kept"

    def shared_lock(self, name: str) -> Path:
        """The file of a lock every run in this state dir shares (``isolation/locks.py``)."""
        return self.state_dir / "worktrees" / f".{name}.lock"

    # -- a phase's files -----------------------------------------------------------------------

    def log(self, phase_id: str) -> Path:
        return self._phase_file(phase_id, ".log")

    def _phase_file(self, phase_id: str, suffix: str) -> Path:
        key = (self.state_dir, self.name, phase_id, suffix)
        path = _NAMED.get(key)
        if path is None:
            if len(_NAMED) >= _NAMED_MAX:
                _NAMED.clear()
            stem = file_stem(phase_id)
            if suffix == ".log":
                path = self.logs / f"{stem}.log"
            else:  # named after the session too: two plans that run at once may share ids
                path = self.preimages / f"{self.name}.{stem}{suffix}"
            _NAMED[key] = path
        return path

    @functools.cached_property  # asked for at every phase
    def preimages(self) -> Path:
        return self.state_dir / "preimages"

    def preimage(self, phase_id: str) -> Path:
        """Where a phase's declared files are kept as they were before its first attempt: named
        after the session too, since two plans that run at once in one root may share ids."""
        return self._phase_file(phase_id, ".tar")

    def loop_record(self, phase_id: str) -> Path:
        """Where a reviewed phase's loop stood after its last review (``phase/loop_record.py``):
        beside its pre-images, which it needs and with which it goes."""
        return self._phase_file(phase_id, ".loop.json")

    def kept_preimage(self, phase_id: str) -> Path:
        """Where a phase's pre-images go when they could not be put back: a name no run reuses,
        so that the next run of the phase saves its own."""
        return self.replaced(phase_id, "pre-images") / f"{file_stem(phase_id)}.tar"

    def replaced(self, phase_id: str, why: str) -> Path:
        """A directory, not there yet, that no other call names, in this run or any other: where
        a restore keeps what it replaces. Its name says when (UTC), which process, and ``why``
        (the attempt, an interrupted run, a merge), so names sort by time."""
        base = self.state_dir / "replaced" / file_stem(phase_id)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        while True:  # the process and its counter set it apart from any name made at that moment
            path = base / f"{stamp}-{os.getpid()}-{next(_REPLACED)}-{why}"
            if not os.path.lexists(path):
                return path

    def running_record(self, pid: int) -> Path:
        """The record of process ``pid`` running phases of this session."""
        return _record(self.logs, self.name, pid)

    def running_records(self) -> list[Path]:
        """This session's running records, whichever process left them."""
        prefix = f"{self.name}."
        found = []
        for path in self.logs.glob(f"*{RECORD_SUFFIX}"):
            pid = path.name[len(prefix) : -len(RECORD_SUFFIX)]
            # Not another plan's, nor what is no file: a record is one this tool wrote.
            if path.name.startswith(prefix) and pid.isascii() and pid.isdigit() and path.is_file():
                found.append(path)
        return found


# The files of the phases running now, named once: each is asked for several times a phase, by
# the runner and the recorder, and joining a ``Path`` costs microseconds.
_NAMED: dict[tuple[Path, str, str, str], Path] = {}
_NAMED_MAX = 256
_REPLACED = itertools.count(1)  # replaced names within one process


@functools.lru_cache(maxsize=16)  # a process asks for its own at every phase
def _record(logs: Path, name: str, pid: int) -> Path:
    return logs / f"{name}.{pid}{RECORD_SUFFIX}"


@functools.lru_cache(maxsize=4096)  # every phase's files are named from it, several a phase
def file_stem(phase_id: str) -> str:
    """A file name for a phase's log and pre-images: its id where that is safe, else a safe
    form with a short hash, so distinct ids never share a file (``a b``, ``a_b``, ``a/b``)."""
    safe = re.sub(r"[^\w.-]+", "_", phase_id).lstrip(".")[:100]
    if safe == phase_id:
        return safe
    return f"{safe}-{hashlib.sha256(phase_id.encode()).hexdigest()[:10]}"


def plan_relpath(plan: Plan, root: Path) -> str:
    """The session key: the plan file's real path (symlinks resolved) relative to the project's
    real root, with forward slashes; the same whichever directory pytest was started from and
    however the plan was named (relative, absolute, through a link). A plan outside the root is
    keyed by its real absolute path."""
    real_plan, real_root = plan.path.resolve(), root.resolve()
    if real_plan.is_relative_to(real_root):
        return real_plan.relative_to(real_root).as_posix()
    return real_plan.as_posix()
