"""An agent CLI's standard output and standard error: apart for reading, together in the log."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

from pytest_maestro.processes.process import run_process
from pytest_maestro.processes.streams import LINE_LIMIT, Tee
from pytest_maestro.runtimes.replies import trailing_json_object

INTERLEAVED = "echo out1; sleep 0.1; echo err1 >&2; sleep 0.1; echo out2; sleep 0.1; echo err2 >&2"


def run(tmp_path: Path, script: str, timeout: float = 10) -> tuple[str, str, str, float]:
    started = time.monotonic()
    run_process(
        ["bash", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=timeout,
        log=tmp_path / "p.log",
        stdout_file=tmp_path / "out",
        stderr_file=tmp_path / "err",
    )
    texts = [(tmp_path / name).read_text() for name in ("out", "err", "p.log")]
    return texts[0], texts[1], texts[2], time.monotonic() - started


def test_stdout_and_stderr_are_read_apart_and_logged_together_in_order(tmp_path: Path) -> None:
    out, err, log, _ = run(tmp_path, INTERLEAVED)
    assert (out, err) == ("out1\nout2\n", "err1\nerr2\n")
    assert log == "out1\nerr1\nout2\nerr2\n"


def test_a_process_that_escapes_holding_the_pipes_does_not_hold_the_phase(tmp_path: Path) -> None:
    out, _, _, took = run(tmp_path, "echo reply; setsid sleep 8 & echo done")
    assert out == "reply\ndone\n"
    assert took < 5, f"waited {took:.1f}s for a pipe an escaped process held"


def test_the_json_object_that_ends_a_stderr_of_warnings_is_found() -> None:
    stderr = 'Warning: no colours\nat x (file.js:1)\n{\n  "error": {"code": 41}\n}\n'
    assert trailing_json_object(stderr) == {"error": {"code": 41}}
    assert trailing_json_object("no json {here}") is None
    assert trailing_json_object('{"a": 1}\n{"b": 2}') == {"b": 2}


def _tee(chunks: list[bytes], lines: object) -> tuple[bytes, bytes]:
    """What the log and the reply get when a command prints ``chunks``; ``lines`` reads each
    line of it and may write to the log."""
    read, write = os.pipe()
    log, reply = io.BytesIO(), io.BytesIO()
    stream = os.fdopen(read, "rb", buffering=0)

    def note(line: bytes) -> None:
        if callable(lines):
            lines(line)
        log.write(b"> " + line)

    tee = Tee([(stream, [log, reply])], lines=note)
    for chunk in chunks:
        os.write(write, chunk)
    os.close(write)
    tee.finish()
    return log.getvalue(), reply.getvalue()


def test_the_copy_hands_on_whole_lines_and_its_notes_land_between_them() -> None:
    log, reply = _tee([b'{"a":', b'1}\n{"b"', b":2}\n{", b"}\nlast"], None)
    assert reply == b'{"a":1}\n{"b":2}\n{}\nlast'
    assert log == b'{"a":1}\n> {"a":1}\n{"b":2}\n> {"b":2}\n{}\n> {}\nlast> last'


def test_a_line_too_long_to_read_is_copied_unread_and_a_failing_reader_is_set_aside() -> None:
    long = b"x" * (LINE_LIMIT + 10)
    log, reply = _tee([long, b"y\nz\n"], None)
    assert reply == long + b"y\nz\n" and log.endswith(b"z\n> z\n")
    assert log.startswith(b"x" * LINE_LIMIT)  # copied on as it came, before its end was seen

    def fails(line: bytes) -> None:
        raise ValueError(line)

    log, reply = _tee([b"a\nb\n"], fails)
    assert reply == b"a\nb\n" and log == b"a\nb\n"


class Lines:
    """A feed that notes each line, and on which thread each call came."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.threads: set[str] = set()
        self.flushes = 0

    def line(self, raw: bytes) -> None:
        self.lines.append(raw)
        self.threads.add(threading.current_thread().name)

    def flush(self) -> None:
        self.flushes += 1
        assert threading.current_thread() is threading.main_thread()


def test_a_feed_reads_each_line_on_the_copy_thread_and_flushes_on_the_waiting_one(
    tmp_path: Path,
) -> None:
    feed = Lines()
    run_process(
        ["bash", "-c", "printf 'a\\nb'; sleep 0.2; printf 'c\\n'; sleep 1.1; echo d"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=10,
        log=tmp_path / "p.log",
        stdout_file=tmp_path / "out",
        stderr_file=tmp_path / "err",
        feed=feed,
    )
    assert feed.lines == [b"a\n", b"bc\n", b"d\n"]
    assert feed.threads == {"maestro-tee"} and feed.flushes >= 1
    assert (tmp_path / "out").read_text() == "a\nbc\nd\n"
