"""What a run shows while it runs: the header, and a line when a phase starts, retries, waits out a
rate limit and finishes, read from runs whose output is not a terminal (as in a CI log)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_maestro.phase.events import RETRY, STARTED, WAITING, PhaseEvent, duration_text
from pytest_maestro.phase.facts import PhaseFacts

from ..helpers import FAKES, assert_phases, phase, write_plan

WORKERS = {"sequential": [], "xdist": ["-n", "2"]}
CHECK = {"criterion": "the file exists", "check": "test -f nothing"}
# A whole progress line, as the controller writes it; nothing may be glued before or after.
LINE = re.compile(r"maestro \[(main|gw\d+)\] (\w+): (.+)")


def _chain(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            phase("a", "true"),
            phase("b", "true", blocked_by=["a"], max_retries=1, acceptance=[CHECK]),
            phase("c", "true", blocked_by=["b"]),
        ],
    )


def _events(lines: list[str]) -> list[tuple[str, str, str]]:
    """(worker, phase, what) of each progress line; every line that mentions one is whole."""
    found = []
    for line in lines:
        if "maestro [" in line:
            match = LINE.fullmatch(line)
            assert match is not None, f"garbled progress line: {line!r}"
            found.append((match[1], match[2], match[3]))
    return found


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS.keys())
def test_progress_lines_in_a_run_whose_output_is_not_a_terminal(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    _chain(pytester)
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", *workers)
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    out = result.stdout.lines
    assert not any("\x1b[" in line for line in out)  # plain: no colours, no cursor moves
    events = _events(out)
    said = [(phase_id, what) for _, phase_id, what in events]
    assert said[0] == ("a", "started (up to 3 attempts)")
    assert said[1][0] == "a" and re.fullmatch(r"completed in \d+\.\d\ds", said[1][1])
    assert said[2] == ("b", "started (up to 2 attempts)")
    why = ": check failed: the file exists"
    assert re.fullmatch(r"attempt 2 of 2 after \S+" + why, said[3][1])
    assert re.fullmatch(r"failed after 2 attempts in \S+" + why, said[4][1])
    assert len(said) == 5  # a skipped phase has no line: pytest reports it
    names = {worker for worker, _, _ in events}
    assert names == {"main"} if not workers else all(n.startswith("gw") for n in names)
    # The finish lines stand in for pytest's result letters: no letter is left on its own line.
    assert not [line for line in out if re.fullmatch(r"[.F]+", line.strip())]


# A plugin of the user's: it counts the test starts each process tells it of.
COUNTING_STARTS = """
WHO = ["controller"]

def pytest_configure(config):
    WHO[0] = getattr(config, "workerinput", {}).get("workerid", "controller")

def pytest_runtest_logstart(nodeid, location):
    with open("starts.txt", "a") as out:
        out.write(f"{WHO[0]} {nodeid}\\n")
"""


def test_other_plugins_see_one_start_per_phase(pytester: pytest.Pytester) -> None:
    """Progress events are no test starts: a plugin that counts starts sees pytest's own, one
    per phase in each process, and no more; and the progress lines are printed all the same."""
    _chain(pytester)
    pytester.makeconftest(COUNTING_STARTS)
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "2")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    assert len(_events(result.stdout.lines)) == 5
    starts = (pytester.path / "starts.txt").read_text().splitlines()
    by_controller = sorted(line.split()[1] for line in starts if line.startswith("controller "))
    assert by_controller == ["plan.yaml::a", "plan.yaml::b", "plan.yaml::c"]  # c: skipped there
    on_workers = sorted(line.split()[1] for line in starts if line.startswith("gw"))
    assert on_workers == ["plan.yaml::a", "plan.yaml::b"]


def _in_a_terminal(cwd: Path, *args: str) -> str:
    """What pytest writes when its output is a terminal (a pseudo-terminal here), as text."""
    pty = pytest.importorskip("pty")
    main, child = pty.openpty()
    argv = [sys.executable, "-m", "pytest", *args]
    # pytester turns colours off through the environment; the terminal alone decides here.
    env = {k: v for k, v in os.environ.items() if k not in ("PY_COLORS", "NO_COLOR", "FORCE_COLOR")}
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=child, stderr=child
    )
    os.close(child)
    chunks = []
    try:
        while select.select([main], [], [], 120)[0]:  # a guard against a hang, not a timing
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(main)
        proc.kill()
        proc.wait()
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS.keys())
def test_progress_lines_in_a_terminal_are_whole_and_coloured(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    _chain(pytester)
    text = _in_a_terminal(
        pytester.path, "--maestro", "plan.yaml", "-p", "no:cacheprovider", *workers
    )
    assert "\x1b[32mmaestro [" in text and "\x1b[31mmaestro [" in text  # finished: green, red
    # Colours, and the invisible progress reports (OSC 9;4) some pytest releases send terminals.
    plain = re.sub(r"\x1b\[[0-9;]*m|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)", "", text)
    # What the terminal shows of each line: the text after its last carriage return.
    assert len(_events([line.rsplit("\r", 1)[-1] for line in plain.split("\r\n")])) == 5
    assert "1 failed, 1 passed, 1 skipped" in plain


def test_quiet_runs_show_no_progress(pytester: pytest.Pytester) -> None:
    _chain(pytester)
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-q")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    assert _events(result.stdout.lines) == []


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS.keys())
def test_verbose_runs_keep_pytests_result_lines(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    _chain(pytester)
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-v", *workers)
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.re_match_lines_random([r".*\bplan.yaml::a\b.*PASSED|.*PASSED plan.yaml::a\b"])
    result.stdout.re_match_lines_random([r".*\bplan.yaml::b\b.*FAILED|.*FAILED plan.yaml::b\b"])
    result.stdout.re_match_lines([r"maestro \[\w+\] b: attempt 2 of 2 after "])
    assert len(_events(result.stdout.lines)) == 5


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS.keys())
def test_a_rate_limit_wait_is_a_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    state = pytester.path / "fake-state"
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_AGENT_STATE", str(state))
    (state / "running").mkdir(parents=True)
    (state / "running" / "held").write_text(str(os.getpid()))  # one call always "running"
    task = {"id": "p", "description": "FAKE:RATE_LIMIT_OVER=1", "reads": ["R"], "max_retries": 0}
    write_plan(pytester, [task])
    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "--maestro-runtime=codex", "--maestro-max-wait=1", *workers
    )
    result.assert_outcomes(failed=1)
    said = [what for _, _, what in _events(result.stdout.lines)]
    assert said[0] == "started"
    assert re.fullmatch(r"waiting 1\.00s for a rate limit after \S+: rate limited.*", said[1])
    assert said[2].startswith("failed in ") and "--maestro-max-wait" in said[2]


def test_the_header_says_what_the_run_will_do(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            phase("a", "true", estimate=5),
            phase("b", "true", estimate=1),
            phase("c", "true", blocked_by=["a", "b"], estimate=2),
            phase("d", "true", blocked_by=["c"]),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "plan.yaml::a")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "maestro: plan.yaml (native), root .",
            "maestro: 4 phases in 3 waves",
            "maestro: critical path a -> c -> d (3 phases, ~8.00s; 1 without an estimate, *)",
            "maestro: parallel-eligible: 2 of 4 phases; -n 2 would use them (this run without -n)",
            "maestro: runtimes: shell 4",
            "maestro: session .maestro/plan-*.md",
        ]
    )
    again = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "2")
    assert_phases(again, passed=3, earlier=1)
    again.stdout.fnmatch_lines(
        [
            "maestro: 4 phases in 3 waves: 1 completed in an earlier run, 3 to run",
            "*-n 2 would use them (this run -n 2)",
        ]
    )


def test_a_plan_without_parallelism_says_so(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true"), phase("b", "true", blocked_by=["a"])])
    result = pytester.runpytest("--maestro", "plan.yaml", "--co")
    result.stdout.fnmatch_lines(
        [
            "maestro: critical path a -> b (2 phases, no estimates yet)",
            "maestro: no phases can run side by side; -n would not help",
        ]
    )
    assert "maestro: session" not in result.stdout.str()  # --co opens no session


# -- the events themselves -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (PhaseEvent("a", STARTED, attempts=1, worker="gw0"), "maestro [gw0] a: started"),
        (
            PhaseEvent("a", RETRY, 75.0, 2, 3, "gw1", "check failed: x"),
            "maestro [gw1] a: attempt 2 of 3 after 1m15s: check failed: x",
        ),
        (
            PhaseEvent("a", WAITING, 3.0, 1, 3, "main", "rate limited", wait=12.4),
            "maestro [main] a: waiting 12s for a rate limit after 3.00s: rate limited",
        ),
    ],
)
def test_event_lines(event: PhaseEvent, line: str) -> None:
    assert event.line() == line
    assert PhaseEvent.from_wire(event.to_wire()) == event


def test_a_damaged_event_is_none() -> None:
    assert PhaseEvent.from_wire("{not json") is None
    assert PhaseEvent.from_wire('{"phase": "a", "kind": "exploded"}') is None
    assert PhaseEvent.from_wire('{"phase": "a", "kind": "started", "new": 1}') is None


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.25, "0.25s"), (12.4, "12s"), (185, "3m05s"), (3720, "1h02m")]
)
def test_durations_read_well(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_a_finish_without_a_duration_says_none_and_keeps_to_one_line() -> None:
    crash = PhaseFacts("a", "failed", worker="gw1", result="worker 'gw1' crashed\nTraceback:\n  x")
    line = PhaseEvent.finished(crash).line()
    assert line == "maestro [gw1] a: failed: worker 'gw1' crashed Traceback: x"
    long = PhaseEvent("a", RETRY, 1.0, 2, 3, "gw0", "x" * 500).line()
    assert len(long) < 300 and long.endswith("x…")
