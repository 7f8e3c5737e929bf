"""Run one command in its own process group, output to a log file, with a timeout for the tree."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from io import FileIO
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, ClassVar

from .state.journal import fsync_dir

# Seconds between SIGTERM and SIGKILL when a timeout ends a process group.
KILL_GRACE = 2.0
# poll() takes its timeout in milliseconds as a C int (about 24 days): wait a day at a time.
POLL_SLICE = 86_400.0
# What one attempt of a phase may leave in its log; the middle of more is cut (--maestro-log-limit).
LOG_LIMIT = 10 * 1024 * 1024
# What a failure report reads back of a command's output: its last bytes, lines cut short.
TAIL_BYTES = 64 * 1024
LINE_LIMIT = 500


@dataclass(frozen=True)
class ProcessResult:
    argv: tuple[str, ...]
    exit_code: int  # negative: killed by that signal
    timed_out: bool
    duration: float
    log: Path
    log_offset: int  # where this command's output starts in the log

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def output(self, limit: int | None = None) -> str:
        """What the command wrote to the log (its last ``limit`` bytes, when given)."""
        with self.log.open("rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            start = self.log_offset if limit is None else max(self.log_offset, end - limit)
            handle.seek(start)
            return handle.read().decode("utf-8", "replace")

    def tail(self, lines: int = 20) -> list[str]:
        """The output's last lines, from its last bytes only, each cut to a readable length:
        a report never carries a 50 MB line, and reading it costs no more memory."""
        text = self.output(TAIL_BYTES).rstrip("\n")
        if not text.strip():
            return []
        return [
            line if len(line) <= LINE_LIMIT else line[: LINE_LIMIT - 1] + "…"
            for line in text.split("\n")[-lines:]
        ]


class PhaseLog:
    """A phase's log, open from the phase's start to its end, and the running record its commands'
    process groups go to.

    ``run_process`` given the path of a log held open here writes through this one handle: a phase
    opens its log once, not once for each command and header. Runtimes get only the path
    (``AgentRequest.log``) and reach the open log through it.
    """

    _held: ClassVar[dict[Path, PhaseLog]] = {}

    def __init__(
        self, path: Path, out: FileIO, record: RunningRecord | None, limit: int = LOG_LIMIT
    ) -> None:
        self.path = path
        self.out = out
        self.record = record
        self.limit = limit  # bytes per attempt
        self.attempt_start = 0  # where the current attempt's output starts in the log

    @classmethod
    @contextlib.contextmanager
    def hold(
        cls, path: Path, record: RunningRecord | None = None, limit: int = LOG_LIMIT
    ) -> Iterator[PhaseLog]:
        """Empty the log at ``path`` and hold it open while the context lasts."""
        with _open_log(path, os.O_TRUNC) as out:
            held = cls._held[path] = cls(path, out, record, limit)
            try:
                yield held
            finally:
                del cls._held[path]

    @classmethod
    def held(cls, path: Path) -> PhaseLog | None:
        return cls._held.get(path)

    def write_line(self, text: str) -> None:
        self.out.write(text.encode() + b"\n")

    def begin_attempt(self) -> None:
        self.attempt_start = self.out.tell()

    def room_from(self, offset: int) -> int:
        """What a command whose output starts at ``offset`` may keep: what its attempt has left
        of the limit, and never less than the tail a failure report reads."""
        return max(TAIL_BYTES, self.limit - (offset - self.attempt_start))


def _open_log(path: Path, flags: int = 0) -> FileIO:
    """``path`` open for appending, unbuffered: the commands write to the same file description."""
    flags |= os.O_WRONLY | os.O_CREAT | os.O_APPEND
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:  # the first log in this directory
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o644)
    return open(fd, "ab", buffering=0)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    log: Path,
    stdin: bytes | None = None,
    header: str | None = None,
    stdin_file: Path | None = None,
    stdout_file: Path | None = None,
) -> ProcessResult:
    """Run ``argv``; its stdout and stderr are appended to ``log``.

    ``stdin_file`` is read as its standard input (a file, not a pipe: a command that never reads
    it cannot block us); ``stdout_file``, when given, receives its standard output alone (an
    agent CLI's JSON), while its standard error still goes to ``log``.

    The command leads a new session (and so a new process group): on timeout the whole group gets
    SIGTERM, then SIGKILL, so nothing it started outlives it. Output goes to a file, not a pipe, so
    a background grandchild holding the pipe open cannot hang us. Where ``log`` is held open
    (``PhaseLog.hold``), the output goes through that handle and the group is recorded in the
    held log's running record.
    """
    with contextlib.ExitStack() as files:
        source = files.enter_context(stdin_file.open("rb")) if stdin_file else None
        target = files.enter_context(stdout_file.open("wb")) if stdout_file else None
        held = PhaseLog.held(log)
        if held is not None:
            out, record = held.out, held.record
        else:
            out, record = files.enter_context(_open_log(log)), None
        result = _run(argv, cwd, env, timeout, out, record, stdin, header, log, source, target)
        room = LOG_LIMIT if held is None else held.room_from(result.log_offset)
        cut_middle(log, result.log_offset, out.tell(), room)
        return result


def _run(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    out: FileIO,
    record: RunningRecord | None,
    stdin: bytes | None,
    header: str | None,
    log: Path,
    source: BinaryIO | None = None,
    target: BinaryIO | None = None,
) -> ProcessResult:
    if header:
        out.write(header.encode() + b"\n")
    offset = out.tell()
    started = time.monotonic()
    before = boot_ticks()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=source or (subprocess.PIPE if stdin is not None else subprocess.DEVNULL),
        stdout=target or out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    if record is not None:
        record.add_group(proc.pid, before, boot_ticks())
    timed_out = False
    try:
        if stdin is not None:
            _feed(proc, stdin)
        wait(proc, timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
    except BaseException:
        kill_group(proc)  # KeyboardInterrupt, pytest's own timeout: leave nothing behind
        raise
    if _group_alive(proc.pid):  # what it left running in the background is its own, and ends
        kill_group(proc)
    duration = time.monotonic() - started
    return ProcessResult(tuple(argv), proc.returncode, timed_out, duration, log, offset)


def cut_middle(log: Path, start: int, end: int, limit: int) -> int:
    """Bound what one command left in ``log`` (bytes ``start`` to ``end``, the end of the file)
    to ``limit``: a tenth from its start and the rest from its end are kept, with a line saying
    how much was cut between. Copied in chunks: memory stays flat however much was printed.
    Returns the bytes cut."""
    size = end - start
    if size <= limit:
        return 0
    head = limit // 10
    tail = limit - head
    cut = size - head - tail
    note = (
        f"\n[... {cut} bytes cut here: this command printed {size}, the log keeps its first "
        f"{head} and last {tail} (--maestro-log-limit bounds each attempt) ...]\n"
    ).encode()
    fd = os.open(log, os.O_RDWR)
    try:
        at = start + head
        os.pwrite(fd, note, at)
        write, read = at + len(note), end - tail
        while read < end:
            chunk = os.pread(fd, min(1024 * 1024, end - read), read)
            os.pwrite(fd, chunk, write)
            read += len(chunk)
            write += len(chunk)
        os.ftruncate(fd, write)
    finally:
        os.close(fd)
    return cut


def wait(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """``proc.wait(timeout)`` that returns as soon as the process exits.

    ``Popen.wait`` with a timeout polls at 0, 1, 3, 7, 15, 31 ms ... and then every 50 ms, so the
    end of a command is seen up to as long again after it happened, at most 50 ms later: about
    25 ms on every command of a second or more, which the phases that wait for it wait too. A
    pidfd (Linux 5.3+) becomes readable the moment the process exits; elsewhere Popen polls.
    """
    pidfd = _pidfd(proc.pid)
    if pidfd is not None:
        try:
            if not _readable(pidfd, timeout):
                raise subprocess.TimeoutExpired(proc.args, timeout)
        finally:
            os.close(pidfd)
    proc.wait(timeout=timeout)  # immediate once the pidfd said it exited: only reaps


def _readable(fd: int, timeout: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if poller.poll(max(0.0, min(remaining, POLL_SLICE)) * 1000):
            return True
        if remaining <= POLL_SLICE:
            return False


def _pidfd(pid: int) -> int | None:
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(pid)
    except OSError:  # kernel before 5.3, or a sandbox that forbids the call
        return None
    return fd


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except BrokenPipeError:  # the command did not read its input: not our failure
        pass


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group, give it a moment, then SIGKILL whatever of it is left: also when a
    second Ctrl-C cuts the moment short."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE)
    finally:
        _signal_group(proc.pid, signal.SIGKILL)  # what ignored SIGTERM or outlived the leader
        proc.wait()


class interrupted_by:
    """Within it, the given signals (SIGTERM, SIGHUP) interrupt the main thread as Ctrl-C does,
    so a cancelled CI job or a closed terminal ends the commands' groups the same way; then
    ``on_signal`` (if any) runs first. Outside the main thread it does nothing."""

    def __init__(
        self, signals: Iterable[signal.Signals], on_signal: Callable[[], object] | None = None
    ) -> None:
        self.signals = tuple(signals)
        self.on_signal = on_signal
        self.previous: dict[signal.Signals, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if self.on_signal is not None:
            self.on_signal()
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    def __enter__(self) -> interrupted_by:
        for sig in self.signals:
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except (ValueError, OSError):  # not the main thread, or not this platform
                break
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, handler)
        self.previous.clear()


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
        if _group_alive(pid):
            ended.append(pid)
    if grace > 0:
        for pid in ended:
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_group_alive(pid) for pid in ended):
            time.sleep(0.05)
    for pid in ended:
        _signal_group(pid, signal.SIGKILL)
    return ended


def _group_alive(pgid: int) -> bool:
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


def _signal_group(pgid: int, sig: signal.Signals) -> None:
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
