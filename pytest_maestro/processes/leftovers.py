"""What a phase's commands leave running when the run is killed: the running record of the phase,
the process groups its commands lead, the sessions their processes made (``setsid``) and the
token in each command's environment, which a killed run leaves for the next one to end."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ..numbers import PID
from ..state.journal import fsync_dir
from ..state.paths import RECORD_SUFFIX, SPARE_SUFFIX
from .reaping import children, descendants, process, processes, reap

# -- what a killed run left running ------------------------------------------------------------
#
# Commands lead sessions of their own so that a timeout can end their whole tree, which also puts
# them out of reach of a signal to pytest's process group: a run killed with SIGKILL leaves them
# running. Each process that runs phases keeps a running record: the phase it runs and the groups
# its commands lead. The next run of the plan reads the records a killed run left: their phases
# were interrupted, and what their groups still run is ended before those phases run again.

# A record overwrites the start of a file already written with zeros: its size does not change, so
# syncing it flushes the data without a file-system journal commit (on ext4 some 0.1 ms, not 3).
RECORD_SIZE = 4096
# Each command runs with a token of its own in the environment, named in the record before it
# starts: a process the record names no group of (the run was killed in the instant after the
# command started, or the process left the group within the second before) still carries the
# token, unless it emptied its environment. Tokens of runs inside another's commands add up,
# separated by colons.
COMMAND_TOKEN = "MAESTRO_COMMAND_TOKEN"
_TOKEN_ENTRY = f"\0{COMMAND_TOKEN}=".encode()

# fdatasync flushes the data and the size a write changed, without the rest of the inode.
_sync_data = getattr(os, "fdatasync", os.fsync)
# A process's start time in /proc is in clock ticks of the boot-time clock (Linux).
_BOOT_CLOCK: int | None = getattr(time, "CLOCK_BOOTTIME", None)
_NS_PER_TICK = 1_000_000_000 // os.sysconf("SC_CLK_TCK") if _BOOT_CLOCK is not None else 0


def boot_ticks() -> int | None:
    """Now, in the clock and unit of a process's start time in ``/proc/PID/stat``; None elsewhere.

    A command's start lies between the ticks before and after ``Popen``: recording those two
    costs no read of ``/proc``, which waits for the new process's ``exec`` (about a millisecond).
    """
    if _BOOT_CLOCK is None:
        return None
    return time.clock_gettime_ns(_BOOT_CLOCK) // _NS_PER_TICK


class RunningRecord:
    """The running record of one process: the phase it runs, and the process groups it leads.

    ``start`` is on disk when it returns, before the phase runs anything: whatever the controller
    managed to record, the next run finds the phase interrupted. Groups are only written: they
    outlive a killed run, not a machine that went down. ``clear`` says the phase ended; it is not
    synced either: a record the disk lost makes the next run take a phase that ended for
    interrupted (unless the session has it completed), which costs a rerun, never a phase wrongly
    taken for done.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.spare = spare_log(path)
        self._end = 0  # where the next group line goes
        flags = os.O_RDWR | os.O_CREAT
        try:
            self._fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, flags, 0o644)
        if os.fstat(self._fd).st_size < RECORD_SIZE:  # new: zeros first, and the name on disk
            os.pwrite(self._fd, bytes(RECORD_SIZE), 0)
            os.fsync(self._fd)
            fsync_dir(path.parent)

    def __enter__(self) -> RunningRecord:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        os.close(self._fd)

    def start(self, phase_id: str, durable: bool = True) -> None:
        """Record the phase; on disk when it returns if ``durable``. Without it the record
        still outlives a killed run (the kernel has it), only not a machine that goes down,
        after which no process of the run is left to end anyway."""
        line = (json.dumps(phase_id) + "\n").encode()
        os.pwrite(self._fd, line + b"\0", 0)  # the zero ends the record: older lines follow it
        self._end = len(line)
        if durable:
            _sync_data(self._fd)

    def add_group(
        self, pgid: int, started_after: int | None, started_before: int | None, kind: str = ""
    ) -> None:
        """A group a command leads (and the session: it leads one), or with ``kind`` "s" a
        session one of its processes made; its leader started within the window."""
        window = "" if started_after is None else f" {started_after} {started_before}"
        line = f"{kind}{pgid}{window}\n".encode()
        os.pwrite(self._fd, line + b"\0", self._end)
        self._end += len(line)

    def with_token(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with a new token in it, recorded here before the command it is for starts: a
        kill in the instant after the start, before the command's group is recorded, still
        leaves its process findable, and so does one that left the group in the second before."""
        token = secrets.token_hex(8)
        line = f"t{token}\n".encode()
        os.pwrite(self._fd, line + b"\0", self._end)
        self._end += len(line)
        outer = env.get(COMMAND_TOKEN)  # a run inside another's command: its token stays too
        return {**env, COMMAND_TOKEN: f"{outer}:{token}" if outer else token}

    def clear(self) -> None:
        os.pwrite(self._fd, b"\0", 0)
        self._end = 0


class SessionWatch:
    """Called by ``run_process`` once a second while a command runs. The sessions the
    command's processes make (``setsid``) go to the running record as they are seen: a run
    killed with SIGKILL runs no code to end them, the next run ends what the record names.
    (Job control needs none: it stays in the command's session.) What came to us and ended
    meanwhile is reaped: an agent that daemonises many short jobs leaves no zombies piling up.
    """

    def __init__(self, leader: int, ours: frozenset[int], record: RunningRecord, after: int | None):
        self.leader, self.ours, self.record, self.after = leader, ours, record, after
        self.seen = {leader, os.getsid(0)}

    def __call__(self) -> None:
        orphans = children() - self.ours - {self.leader}  # the leader is its Popen's to reap
        reap(orphans)
        table = processes()
        below = descendants({self.leader} | orphans, table)
        for sid in sorted({table[pid].sid for pid in below if pid in table} - self.seen):
            self.seen.add(sid)
            self.record.add_group(sid, self.after, boot_ticks(), kind="s")


def record_owner(path: Path) -> int | None:
    """The pid of the process whose running record ``path`` is."""
    return _pid(path.name[: -len(RECORD_SUFFIX)].rsplit(".", 1)[-1])


def _pid(text: str) -> int | None:
    """The number ``text`` writes, if it may be a process id: a record's line past any (a
    damaged or hostile record) names none."""
    number = _number(text)
    return number if number is not None and PID.holds(number) else None


def _number(text: str) -> int | None:
    """The whole number ``text`` writes in ASCII digits ("²".isdigit(), but int("²") fails), if
    it is one a record holds (a process id, a clock tick: 20 digits at most; int() refuses
    some thousands of digits with a ValueError)."""
    return int(text) if len(text) <= 20 and text.isascii() and text.isdigit() else None


def tell_owners(paths: Iterable[Path], sig: signal.Signals) -> list[int]:
    """Send ``sig`` to the processes whose running records these are, if they are our children
    (an xdist controller's workers; not a process of another run, nor a pid reused); the pids
    told."""
    told: list[int] = []
    for path in paths:
        pid = record_owner(path)
        info = process(pid) if pid is not None else None
        if info is not None and info.ppid == os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(info.pid, sig)
                told.append(info.pid)
    return told


@dataclass(frozen=True)
class LeftRunning:
    """What a running record says: the phase its process was running, and the groups it led."""

    path: Path
    phase: str | None
    groups: tuple[str, ...]  # "[s]ID [STARTED_AFTER STARTED_BEFORE]"


@functools.lru_cache(maxsize=16)  # its process asks at every phase
def spare_log(record: Path) -> Path:
    """Where the process of the running record ``record`` makes its next log ahead."""
    return record.with_suffix(SPARE_SUFFIX)


def read_running_record(path: Path) -> LeftRunning:
    try:
        text = path.read_bytes().split(b"\0", 1)[0].decode("utf-8", "replace")
    except OSError:
        return LeftRunning(path, None, ())
    first, _, rest = text.partition("\n")
    try:
        phase = json.loads(first) if first else None
    except (ValueError, RecursionError):  # a write the kill cut short, or not one of ours
        phase = None
    groups = tuple(line for line in rest.split("\n") if line)
    return LeftRunning(path, phase if isinstance(phase, str) else None, groups)


def end_groups(groups: Iterable[str], grace: float = 0.0) -> list[int]:
    """End what still runs of the recorded process groups and sessions (SIGTERM, ``grace``
    seconds, SIGKILL; at once with SIGKILL when ``grace`` is 0); the ids ended.

    A line ``PGID [AFTER BEFORE]`` names a command's group, which leads a session of its own
    too: what it put in groups of its own (job control) is in that session. ``sSID [AFTER
    BEFORE]`` names a session a process of the command made (``setsid``), seen while it ran.
    A pid is not reused while a group or session of that id exists, so a live member of N
    belongs to the recorded one unless N's leader is alive and started outside the recorded
    window (N was reused after it ended). Where start times cannot be read, a live leader is
    left alone.
    """
    lines = list(groups)
    ids = {pid for line in lines if (pid := _recorded_id(line)) is not None}
    tokens = [line[1:] for line in lines if line.startswith("t") and line[1:].isalnum()]
    found = _members(ids, tokens) if ids or tokens else {}
    if grace > 0 and found:
        for pid in found:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _members(ids, tokens):
            time.sleep(0.05)
    for _ in range(2 if found else 0):  # twice: what forked meanwhile
        for pid in _members(ids, tokens):
            _signal(pid, signal.SIGKILL)
    return sorted(set(found.values()))


def _recorded_id(line: str) -> int | None:
    """The group or session id a record's line names, if it may still be the recorded one."""
    head, *window_text = line.split()[:3] or [""]
    pid = _pid(head[1:] if head.startswith("s") else head)
    if pid is None:
        return None
    if pid in (os.getpgid(0), os.getsid(0)):
        return None  # never our own
    window = [n for n in map(_number, window_text) if n is not None]
    now = _start_ticks(pid)
    if now is not None and not (window and window[0] <= now <= window[-1]):
        return None  # reused: the leader is another process now (or unknown as ours)
    if now is None and _exists(pid):
        return None  # alive, but its start time is unknown: not ours to kill
    return pid


def _members(ids: set[int], tokens: Iterable[str] = ()) -> dict[int, int]:
    """Live processes (not zombies) in a group or session of ``ids``, or with one of ``tokens``
    in their environment: pid -> its group or session id."""
    wanted = frozenset(token.encode() for token in tokens)
    found: dict[int, int] = {}
    for info in processes().values():
        if info.state == "Z" or info.pid == os.getpid():
            continue
        if info.sid in ids or info.pgid in ids:
            found[info.pid] = info.sid if info.sid in ids else info.pgid
        # Not one in uninterruptible sleep: reading its environment can wait as long as it does.
        elif wanted and info.state != "D" and not wanted.isdisjoint(_tokens(info.pid)):
            found[info.pid] = info.sid
    return found


def _tokens(pid: int) -> list[bytes]:
    """The command tokens in the process's environment."""
    try:
        environment = b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or another user's
        return []
    start = environment.find(_TOKEN_ENTRY)
    if start < 0:
        return []
    start += len(_TOKEN_ENTRY)
    end = environment.find(b"\0", start)
    return environment[start : end if end >= 0 else None].split(b":")


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def group_alive(pgid: int) -> bool:
    return _answers(os.killpg, pgid)


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None."""
    info = process(pid)
    return None if info is None else info.start


def _exists(pid: int) -> bool:
    return _answers(os.kill, pid)


def _answers(send: Callable[[int, int], None], target: int) -> bool:
    """Whether a process (``os.kill``) or group (``os.killpg``) exists: signal 0 tests it."""
    try:
        send(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, and is someone else's
        return True
    return True


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
