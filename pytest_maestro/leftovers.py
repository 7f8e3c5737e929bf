"""What a phase's commands leave running: the running record of the phase and the process groups
its commands lead, which a killed run leaves for the next one to end, and processes that left
their group (``setsid``), found by a token in their environment."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .reaping import process
from .state.journal import fsync_dir

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
RECORD_SUFFIX = ".running"

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

    def add_group(self, pgid: int, started_after: int | None, started_before: int | None) -> None:
        window = "" if started_after is None else f" {started_after} {started_before}"
        line = f"{pgid}{window}\n".encode()
        os.pwrite(self._fd, line + b"\0", self._end)
        self._end += len(line)

    def clear(self) -> None:
        os.pwrite(self._fd, b"\0", 0)
        self._end = 0


def running_record_path(log_dir: Path, session: str, pid: int) -> Path:
    """The record of process ``pid`` running phases of the plan whose session is ``session``."""
    return log_dir / f"{session}.{pid}{RECORD_SUFFIX}"


def running_records(log_dir: Path, session: str) -> list[Path]:
    """The running records of the plan whose session is ``session``, whichever process left them."""
    prefix = f"{session}."
    return [
        path
        for path in log_dir.glob(f"*{RECORD_SUFFIX}")
        if path.name.startswith(prefix)
        and path.name[len(prefix) : -len(RECORD_SUFFIX)].isdigit()  # not another plan's
    ]


def record_owner(path: Path) -> int | None:
    """The pid of the process whose running record ``path`` is."""
    pid = path.name[: -len(RECORD_SUFFIX)].rsplit(".", 1)[-1]
    return int(pid) if pid.isdigit() else None


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
    groups: tuple[str, ...]  # "PGID [STARTED_AFTER STARTED_BEFORE]"


def read_running_record(path: Path) -> LeftRunning:
    try:
        text = path.read_bytes().split(b"\0", 1)[0].decode("utf-8", "replace")
    except OSError:
        return LeftRunning(path, None, ())
    first, _, rest = text.partition("\n")
    try:
        phase = json.loads(first) if first else None
    except ValueError:  # a write the kill cut short
        phase = None
    groups = tuple(line for line in rest.split("\n") if line)
    return LeftRunning(path, phase if isinstance(phase, str) else None, groups)


def end_groups(groups: Iterable[str], grace: float = 0.0) -> list[int]:
    """End the recorded process groups that still exist (SIGTERM, ``grace`` seconds, SIGKILL;
    at once with SIGKILL when ``grace`` is 0); the pgids ended.

    A pid is not reused while a group of that id exists, so a live member of group N belongs to
    the recorded group unless N's leader is alive and started outside the recorded window (N was
    reused after the group ended). Where start times cannot be read, a live leader is left alone.
    """
    ended: list[int] = []
    for line in groups:
        pid_text, *window_text = line.split()[:3] or [""]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        window = [int(t) for t in window_text if t.isdigit()]
        now = _start_ticks(pid)
        if now is not None and not (window and window[0] <= now <= window[-1]):
            continue  # reused: the leader is another process now (or unknown as ours)
        if now is None and _exists(pid):
            continue  # alive, but its start time is unknown: not ours to kill
        if group_alive(pid):
            ended.append(pid)
    if grace > 0:
        for pid in ended:
            signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(group_alive(pid) for pid in ended):
            time.sleep(0.05)
    for pid in ended:
        signal_group(pid, signal.SIGKILL)
    return ended


def group_alive(pgid: int) -> bool:
    return _answers(os.killpg, pgid)


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[-1].split()[19])  # field 22; the name may hold spaces


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


# -- processes that left their group -----------------------------------------------------------
#
# A process that calls setsid() leaves its group, and no signal to the group reaches it. Its
# environment still holds what it inherited, so an attempt's own token in the environment finds
# it (on Linux, for the user's own processes, through /proc).

ATTEMPT_TOKEN = "MAESTRO_ATTEMPT_TOKEN"


def escaped(token: str) -> list[int]:
    """Live processes (not zombies) whose environment holds this attempt's token."""
    needle = f"{ATTEMPT_TOKEN}={token}".encode() + b"\0"
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes() and _state(entry) != "Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _state(entry: Path) -> str:
    return entry.joinpath("stat").read_text().rsplit(")", 1)[-1].split()[0]


def end_escaped(token: str) -> list[int]:
    """SIGKILL what left the attempt's groups; the pids ended."""
    ended = escaped(token)
    for pid in ended:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return ended
