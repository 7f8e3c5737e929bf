"""An agent CLI's standard output and standard error: apart for reading, together in the log."""

from __future__ import annotations

import time
from pathlib import Path

from pytest_maestro.process import run_process
from pytest_maestro.runtimes.cli import trailing_json_object

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
