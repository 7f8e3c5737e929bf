"""What a command leaves running when it ends, however it left its process group.

A process that calls ``setsid`` or leads a group of its own (job control, ``process_group=0``),
and one that empties its environment, is out of reach of a signal to the command's group and of
any mark we gave it. What it cannot leave is its ancestry: the process that runs commands is the
*child subreaper* of what it starts (Linux, ``PR_SET_CHILD_SUBREAPER``), so whatever loses its
parent becomes our child instead of init's. When a command ends (and its leader has been
waited for), every process it left is a child of ours that was not one before it started, or a
descendant of one: those are ended and reaped. Elsewhere only the command's group is ended.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# prctl options (linux/prctl.h).
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
# How long ending a command's leftovers may wait for them to go (a process in the kernel's
# uninterruptible sleep does not die at once); what is still there after it is left.
END_WITHIN = 5.0


def set_subreaper(on: bool = True) -> bool:
    """Make this process the child subreaper of its descendants (or stop); whether it could."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):  # not Linux, or no prctl
        return False


@contextlib.contextmanager
def subreaper() -> Iterator[bool]:
    """This process is the child subreaper of its descendants while the context lasts (whether
    it could be, within); then it is no longer, unless it was before."""
    was = is_subreaper()
    became = was or set_subreaper(True)
    try:
        yield became
    finally:
        if became and not was:
            set_subreaper(False)


def is_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return flag.value != 0


def children() -> frozenset[int]:
    """Our children, as the kernel lists them for the main thread: orphans given to us come to
    it, as do the commands it starts. Empty where the list cannot be read. About 10 µs."""
    try:
        fd = os.open(f"/proc/self/task/{os.getpid()}/children", os.O_RDONLY)
    except OSError:
        return frozenset()
    try:
        return frozenset(int(pid) for pid in os.read(fd, 1 << 16).split())
    except OSError:
        return frozenset()
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str  # "Z" for a zombie
    start: int  # clock ticks since boot


def processes() -> dict[int, ProcessInfo]:
    """Every process we can see, from ``/proc`` (Linux); empty elsewhere. About a millisecond
    for a hundred processes: read only when something is known to be left."""
    found: dict[int, ProcessInfo] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit():
            info = process(int(entry))
            if info is not None:
                found[info.pid] = info
    return found


def process(pid: int) -> ProcessInfo | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()  # the name before it may hold anything
    state, ppid, pgid, sid = fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3])
    return ProcessInfo(pid, ppid, pgid, sid, state, int(fields[19]))


def descendants(roots: Iterable[int], table: dict[int, ProcessInfo]) -> set[int]:
    """``roots`` and every process of ``table`` whose chain of parents leads to one of them."""
    below: dict[int, list[int]] = {}
    for info in table.values():
        below.setdefault(info.ppid, []).append(info.pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += below.get(pid, ())
    return found


def end_left(before: frozenset[int]) -> list[int]:
    """End and reap what a command left: our children that were not ours ``before`` it started
    and all they started; the pids ended. Nothing but one read of our children list when it
    left nothing.

    Each round kills every process of those trees at once (SIGKILL: their command has ended,
    and a daemon has no more claim to a grace than the command's group had), then reaps what
    has come to us: a killed process's children come to us as it dies, and are ended in the
    next round, so a process forking meanwhile does not get away.
    """
    ended: list[int] = []
    new = children() - before
    if not new:
        return ended
    deadline = time.monotonic() + END_WITHIN
    pending: set[int] = set()
    while (new or pending) and time.monotonic() < deadline:
        if new:
            table = processes()
            tree = descendants(new, table) - pending
            for pid in tree:
                if table.get(pid) is None or table[pid].state != "Z":
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
            ended += sorted(pid for pid in tree if pid in table and table[pid].state != "Z")
            pending |= tree
        for pid in children() - before:
            if _reaped(pid):
                pending.discard(pid)
        pending = {pid for pid in pending if os.path.exists(f"/proc/{pid}")}
        new = (children() - before) - pending
        if pending and not new:
            time.sleep(0.001)
    return ended


def reap(pids: Iterable[int]) -> None:
    """Reap those of ``pids`` that have ended: children of ours that no ``Popen`` owns."""
    for pid in pids:
        _reaped(pid)


def _reaped(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # someone else reaped it
        return True
    return done == pid
