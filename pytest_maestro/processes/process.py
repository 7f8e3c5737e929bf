"""Run one command in its own process group, output to a log file, with a timeout for the tree."""

from __future__ import annotations

import contextlib
import functools
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from io import FileIO
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Protocol

from .leftovers import RunningRecord, SessionWatch, boot_ticks, group_alive, signal_group
from .reaping import children, end_left
from .streams import Tee

# Seconds between SIGTERM and SIGKILL when a timeout ends a process group.
KILL_GRACE = 2.0
# Seconds between two looks, while a command runs, for sessions its processes made.
WATCH_EVERY = 1.0
# poll() takes its timeout in milliseconds as a C int (about 24 days): wait a day at a time.
POLL_SLICE = 86_400.0
# What one attempt of a phase may leave in its log; the middle of more is cut (--maestro-log-limit).
LOG_LIMIT = 10 * 1024 * 1024
# What a failure report reads back of a command's output: its last bytes, lines cut short.
TAIL_BYTES = 64 * 1024
LINE_LIMIT = 500


class LineFeed(Protocol):
    """Reads a command's standard output line by line: ``line`` on the thread that copies it,
    ``flush`` on the thread that waits for the command, every ``WATCH_EVERY`` seconds."""

    def line(self, raw: bytes) -> None: ...

    def flush(self) -> None: ...


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
        # What may wait until the phase's first command runs, and is done while it does: the
        # process only waits then (on a machine of two cores, the command has the other).
        self.meanwhile: list[Callable[[], object]] = []

    def run_meanwhile(self) -> None:
        """What waits for a command to run, done now, once."""
        calls, self.meanwhile = self.meanwhile, []
        for call in calls:
            call()

    @classmethod
    @contextlib.contextmanager
    def hold(
        cls, path: Path, record: RunningRecord | None = None, limit: int = LOG_LIMIT
    ) -> Iterator[PhaseLog]:
        """Empty the log at ``path`` and hold it open while the context lasts. A new log is
        the file the running record's process made ahead (``make_spare``), renamed."""
        new = record is not None and _take_spare(record.spare, path)
        # Not truncated when new: ext4 starts writing back a file truncated on open at its close.
        with _open_log(path, 0 if new else os.O_TRUNC) as out:
            held = cls._held[path] = cls(path, out, record, limit)
            try:
                yield held
            finally:
                del cls._held[path]

    @classmethod
    def held(cls, path: Path) -> PhaseLog | None:
        return cls._held.get(path)

    def write_line(self, text: str) -> None:
        self.out.write(text.encode("utf-8", "replace") + b"\n")

    def begin_attempt(self) -> None:
        self.attempt_start = self.out.tell()

    def room_from(self, offset: int) -> int:
        """What a command whose output starts at ``offset`` may keep: what its attempt has left
        of the limit, and never less than the tail a failure report reads."""
        return max(TAIL_BYTES, self.limit - (offset - self.attempt_start))


# Spare files this process made and has not renamed into a log yet. Creating a file costs ext4
# on a virtual disk a quarter of a millisecond or more (as much as the rest of a trivial phase's
# bookkeeping), renaming one a tenth of that: a process that runs phases makes its next log while
# a command runs, when it only waits. A killed run's spare goes with its running record.
_spares: set[Path] = set()


def make_spare(spare: Path) -> None:
    if spare in _spares:
        return
    try:
        fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # an earlier process of that number left it, with what in it
        with contextlib.suppress(OSError):
            spare.unlink()
        return
    except OSError:  # the log is created as it opens, as without a spare
        return
    os.close(fd)
    _spares.add(spare)


def _take_spare(spare: Path, path: Path) -> bool:
    """The spare renamed to ``path``, when there is one and no log there yet (an old log is
    emptied in place); whether it was."""
    if spare not in _spares or os.path.lexists(path):
        return False
    _spares.discard(spare)
    try:
        os.rename(spare, path)
    except OSError:  # gone (removed by hand): the log is created as it opens
        return False
    return True


def _open_log(path: Path, flags: int = 0) -> FileIO:
    """``path`` open for appending, unbuffered: the commands write to the same file description."""
    flags |= os.O_WRONLY | os.O_CREAT | os.O_APPEND
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:  # the first log in this directory
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o644)
    return open(fd, "ab", buffering=0)


def environment() -> dict[str, str]:
    """A copy of ``os.environ`` as it is now."""
    data = getattr(os.environ, "_data", None)  # CPython's bytes under the text (POSIX)
    if os.name != "posix" or not isinstance(data, dict):
        return dict(os.environ)
    return dict(map(_decoded, data.items()))


# Copying ``os.environ`` decodes every name and value (a microsecond each) at every phase, and
# few change from one phase to the next: each (name, value) is decoded once.
@functools.lru_cache(maxsize=4096)
def _decoded(item: tuple[bytes, bytes]) -> tuple[str, str]:
    return os.fsdecode(item[0]), os.fsdecode(item[1])


@functools.lru_cache(maxsize=64)
def program(name: str, path: str | None) -> str | None:
    """The file ``name`` runs, looked up on ``path`` (a command's PATH) as ``execvpe`` would, once
    per run: given none, ``Popen`` joins the name to every entry and the new process tries each
    in turn, failing on every one before the right one (a tenth of a spawn where ten entries
    come first). None, so that ``Popen`` looks for itself, for a name with a slash, where none
    is found, and where an entry is relative: that one resolves in the command's directory."""
    if os.name != "posix" or not path or "/" in name:
        return None
    if not all(os.path.isabs(entry) for entry in path.split(os.pathsep)):
        return None
    return shutil.which(name, path=path)


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
    stderr_file: Path | None = None,
    hopeless: Callable[[bytes], bool] | None = None,
    feed: LineFeed | None = None,
) -> ProcessResult:
    """Run ``argv``; its stdout and stderr are appended to ``log``.

    ``stdin_file`` is read as its standard input (a file, not a pipe: a command that never reads
    it cannot block us). With ``stdout_file`` and ``stderr_file`` (an agent CLI), each stream also
    goes to its own file, apart: the reply is the CLI's standard output alone, its diagnostics
    its standard error alone; the log has both, in the order they came. ``hopeless`` reads the
    standard output as it comes: when it says the command cannot get anywhere, the command's group
    is ended then, not at the timeout. ``feed`` (with the files apart) reads each line of the
    standard output as it comes (an agent's tool calls).

    The command leads a new session (and so a new process group): on timeout the whole group gets
    SIGTERM, then SIGKILL, so nothing it started outlives it. Output goes to a file, not a pipe, so
    a background grandchild holding the pipe open cannot hang us. Where ``log`` is held open
    (``PhaseLog.hold``), the output goes through that handle and the group is recorded in the
    held log's running record.
    """
    with contextlib.ExitStack() as files:
        source = files.enter_context(stdin_file.open("rb")) if stdin_file else None
        target = files.enter_context(stdout_file.open("wb")) if stdout_file else None
        errors = files.enter_context(stderr_file.open("wb")) if stderr_file else None
        held = PhaseLog.held(log)
        if held is not None:
            out, record = held.out, held.record
        else:
            out, record = files.enter_context(_open_log(log)), None
        apart = (target, errors) if target and errors else None
        meanwhile = held.run_meanwhile if held is not None and held.meanwhile else None
        result = _run(
            argv,
            cwd=cwd,
            env=env,
            timeout=timeout,
            out=out,
            record=record,
            stdin=stdin,
            header=header,
            log=log,
            source=source,
            apart=apart,
            hopeless=hopeless,
            feed=feed,
            meanwhile=meanwhile,
        )
        room = LOG_LIMIT if held is None else held.room_from(result.log_offset)
        cut_middle(log, result.log_offset, out.tell(), room)
        return result


def _run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    out: FileIO,
    record: RunningRecord | None,
    stdin: bytes | None,
    header: str | None,
    log: Path,
    source: BinaryIO | None,
    apart: tuple[BinaryIO, BinaryIO] | None,
    hopeless: Callable[[bytes], bool] | None,
    feed: LineFeed | None,
    meanwhile: Callable[[], object] | None,
) -> ProcessResult:
    """``run_process`` once its files are open: ``out`` the log's handle, ``record`` the held
    log's running record, ``source`` the standard input's file, ``apart`` the two streams'."""
    if header:
        out.write(header.encode() + b"\n")
    offset = out.tell()
    if record is not None:
        env = record.with_token(env)
    started = time.monotonic()
    before = boot_ticks()
    ours = children()  # what becomes ours after this, the command left
    proc = _spawn(
        argv,
        cwd=cwd,
        env=env,
        stdin=source or (subprocess.PIPE if stdin is not None else subprocess.DEVNULL),
        stdout=subprocess.PIPE if apart else out,
        stderr=subprocess.PIPE if apart else subprocess.STDOUT,
        start_new_session=True,
    )
    tee = None
    if apart is not None:
        assert proc.stdout is not None and proc.stderr is not None
        streams = [(proc.stdout, [out, apart[0]]), (proc.stderr, [out, apart[1]])]
        lines = feed.line if feed is not None else None
        tee = Tee(streams, hopeless, lambda: signal_group(proc.pid, signal.SIGTERM), lines)
    ticks: list[Callable[[], object]] = [feed.flush] if feed is not None and tee else []
    if record is not None:
        record.add_group(proc.pid, before, boot_ticks())
        ticks.insert(0, SessionWatch(proc.pid, ours, record, before))
        make_spare(record.spare)  # while the command runs
    watch = (lambda: [tick() for tick in ticks]) if ticks else None
    timed_out = False
    try:
        if meanwhile is not None:
            meanwhile()
        if stdin is not None:
            _feed(proc, stdin)
        wait(proc, timeout, watch)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
    except BaseException:
        try:
            kill_group(proc)  # KeyboardInterrupt, pytest's own timeout: leave nothing behind
        finally:
            if tee is not None:
                tee.ended.set()
            end_left(ours)
        raise
    if group_alive(proc.pid):  # what it left running in the background is its own, and ends
        kill_group(proc)
    left = end_left(ours)  # and so is what left its group
    if tee is not None:  # after the leftovers: none of them holds a pipe open any more
        tee.finish()
    if left:
        out.write(f"--- ended {len(left)} process(es) the command left running\n".encode())
    duration = time.monotonic() - started
    return ProcessResult(tuple(argv), proc.returncode, timed_out, duration, log, offset)


def _spawn(argv: Sequence[str], env: Mapping[str, str], **how: Any) -> subprocess.Popen[bytes]:
    """``Popen`` of ``argv`` with the file its name runs found once (``program``). Should that
    file fail to start (gone since, or no program: the new process would have tried the next
    entry), ``Popen`` looks again as it would have, and starts what it finds or says why not."""
    found = program(argv[0], env.get("PATH")) if argv else None
    if found is not None:
        try:
            return subprocess.Popen(list(argv), executable=found, env=env, **how)
        except OSError:  # nothing started: Popen reaps a child whose exec failed
            program.cache_clear()
    return subprocess.Popen(list(argv), env=env, **how)


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


def wait(
    proc: subprocess.Popen[bytes], timeout: float, tick: Callable[[], object] | None = None
) -> None:
    """``proc.wait(timeout)`` that returns as soon as the process exits; ``tick`` (if any) is
    called every ``WATCH_EVERY`` seconds meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = max(0.0, deadline - time.monotonic())
        if tick is None or remaining <= WATCH_EVERY:
            _wait(proc, remaining)
            return
        try:
            _wait(proc, WATCH_EVERY)
            return
        except subprocess.TimeoutExpired:
            tick()


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> None:
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
    signal_group(proc.pid, signal.SIGTERM)
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE)
    finally:
        signal_group(proc.pid, signal.SIGKILL)  # what ignored SIGTERM or outlived the leader
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
