"""Run one command in its own process group, output to a log file, with a timeout for the tree."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Seconds between SIGTERM and SIGKILL when a timeout ends a process group.
KILL_GRACE = 2.0
# poll() takes its timeout in milliseconds as a C int (about 24 days): wait a day at a time.
POLL_SLICE = 86_400.0


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
        return self.output().rstrip("\n").split("\n")[-lines:] if self.output().strip() else []


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
    a background grandchild holding the pipe open cannot hang us.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as files:
        out = files.enter_context(log.open("ab"))
        source = files.enter_context(stdin_file.open("rb")) if stdin_file else None
        target = files.enter_context(stdout_file.open("wb")) if stdout_file else out
        if header:
            out.write(header.encode() + b"\n")
            out.flush()
        offset = out.tell()
        started = time.monotonic()
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=source or (subprocess.PIPE if stdin is not None else subprocess.DEVNULL),
            stdout=target,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        record_group(groups_file(log), proc.pid)
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
        duration = time.monotonic() - started
    return ProcessResult(tuple(argv), proc.returncode, timed_out, duration, log, offset)


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
    """SIGTERM the group, give it a moment, then SIGKILL whatever of it is left."""
    _signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE)
    _signal_group(proc.pid, signal.SIGKILL)  # children that ignored SIGTERM or outlived the leader
    proc.wait()


# -- groups a killed run left behind ------------------------------------------------------------
#
# Commands lead sessions of their own so that a timeout can end their whole tree, which also puts
# them out of reach of a signal to pytest's process group: a run killed with SIGKILL leaves them
# running. Each group is recorded beside its phase's log, so that the next run of the plan can end
# what a phase it resets still has running before it restores that phase's files.


def groups_file(log: Path) -> Path:
    return log.with_suffix(".groups")


def record_group(path: Path, pid: int) -> None:
    with path.open("a") as out:
        out.write(f"{pid} {_start_ticks(pid)}\n")


def end_recorded_groups(path: Path) -> list[int]:
    """SIGKILL the process groups recorded in ``path`` that still exist; the pgids ended.

    A pid is not reused while a group of that id exists, so a live member of group N belongs to
    the recorded group unless N's leader is alive with another start time (N was reused after
    the group ended). Where start times cannot be read, a live leader is left alone.
    """
    ended: list[int] = []
    try:
        lines = path.read_text().split("\n")
    except OSError:
        return ended
    for line in lines:
        pid_text, _, ticks = line.partition(" ")
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        now = _start_ticks(pid)
        if now is not None and now != ticks:
            continue  # reused: the leader is another process now
        if now is None and _exists(pid):
            continue  # alive, but its start time is unknown: not ours to kill
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            ended.append(pid)
    path.unlink(missing_ok=True)
    return ended


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22; the name may hold spaces


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
