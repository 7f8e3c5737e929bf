"""A killed run's review loop goes on where it stood: ``pytest --maestro … --maestro-review`` with
the fake CLIs of tests/fakes first on PATH, the run SIGKILLed mid-loop, then run again.

The fakes' records (FAKE_AGENT_STATE/calls.jsonl) say which calls each run made: a resumed loop
makes only the rounds that were left, in the implementer's session, and a passed review is not
asked for again."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..helpers import write_plan
from .test_review_run import RUN, calls, greeting, session

REVIEWED = (*RUN, "--maestro-runtime=claude", "--maestro-review=spec")


pytestmark = pytest.mark.usefixtures("fakes")  # tests/phase/conftest.py


def _command(*options: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *REVIEWED, *options]


def _kill_in_round(root: Path, fakes: Path, number: int, options: tuple[str, ...]) -> None:
    """Run the plan with the implementer hanging in fix round ``number``; SIGKILL pytest's
    process group (xdist's workers with it) once that call began, and the hung call."""
    env = {**os.environ, "FAKE_AGENT_HANG_ROUND": str(number)}
    run = subprocess.Popen(
        _command(*options),
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        hung = _wait_for(fakes, lambda c: not c["review"] and c["round"] == number)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    with contextlib.suppress(ProcessLookupError):  # it leads a session of its own
        os.kill(hung["pid"], signal.SIGKILL)


def _wait_for(fakes: Path, found: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = [c for c in calls(fakes) if found(c)]
        if match:
            return match[0]
        time.sleep(0.05)
    raise AssertionError(f"no such call: {calls(fakes)}")


def _session_id(root: Path) -> str:
    """The implementer's CLI session, from its first reply (claude's last line)."""
    reply = (root / ".maestro" / "logs" / "greet.attempt-1.reply").read_text()
    return str(json.loads(reply.splitlines()[-1])["session_id"])


def _rounds(root: Path) -> list[dict[str, Any]]:
    summary = json.loads((root / ".maestro" / "summary.json").read_text())
    [row] = summary["phases"]
    return list(row["review"]["rounds"])


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), ("-n", "2")], ids=["in-order", "n2"])
def test_a_run_killed_in_fix_round_3_goes_on_at_round_3_in_the_recorded_session(
    pytester: pytest.Pytester, fakes: Path, options: tuple[str, ...]
) -> None:
    root = pytester.path
    write_plan(pytester, [greeting("FAKE:REVIEW_UNMET_UNTIL_ROUND=3")])
    _kill_in_round(root, fakes, 3, options)
    made = calls(fakes)
    assert [(c["review"], c["round"]) for c in made] == [
        (False, 0), (True, 0), (False, 1), (True, 1), (False, 2), (True, 2), (False, 3),
    ]  # fmt: skip
    recorded = _session_id(root)

    result = pytester.runpytest_subprocess(*REVIEWED, *options)

    result.assert_outcomes(passed=1)
    again = calls(fakes)[len(made) :]
    # Round 3 again, in the session the killed run's rounds went on with; then its review: no
    # first attempt, no review of it, no rounds 1 and 2.
    assert [(c["review"], c["round"]) for c in again] == [(False, 3), (True, 3)]
    argv = again[0]["argv"]
    assert argv[argv.index("--resume") + 1] == recorded
    result.stdout.fnmatch_lines(
        [
            "*after a killed run: phase 'greet': its files stay as fix round 2's review saw "
            "them, for its review loop to go on*"
        ]
    )
    log = (root / ".maestro" / "logs" / "greet.log").read_text()
    assert "--- goes on with a killed run's review loop after fix round 2's review" in log
    assert f"=== attempt 1, fix round 3: resumes session {recorded} ===" in log
    # The rounds the killed run made are the phase's, as the review before them.
    assert [(r["round"], r["outcome"]) for r in _rounds(root)] == [
        (1, "failed, 1/2 criteria met"),
        (2, "failed, 1/2 criteria met"),
        (3, "passed, 2/2 criteria met"),
    ]
    greet = session(pytester).phases["greet"]
    assert greet.review["passed"] is True and not greet.unverified
    assert (root / "out.txt").read_text() == "hello\n"
    assert not list((root / ".maestro" / "preimages").iterdir())  # gone with the completion


# SIGKILLs pytest once the phase's call is over and its report made, before the session has
# it: the review passed, the completion is not recorded.
KILL_AFTER_CALL = """
import os, signal, pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    if call.when == "call" and os.path.exists("kill-now"):
        os.unlink("kill-now")
        os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
def test_a_review_that_passed_before_the_kill_is_not_made_again(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    root = pytester.path
    write_plan(pytester, [greeting("FAKE:REVIEW_UNMET_UNTIL_ROUND=1")])
    pytester.makeconftest(KILL_AFTER_CALL)
    (root / "kill-now").touch()
    killed = pytester.runpytest_subprocess(*REVIEWED)
    assert killed.ret == -signal.SIGKILL
    made = calls(fakes)
    assert [(c["review"], c["round"]) for c in made] == [
        (False, 0), (True, 0), (False, 1), (True, 1),
    ]  # fmt: skip

    result = pytester.runpytest_subprocess(*REVIEWED)

    result.assert_outcomes(passed=1)
    assert calls(fakes) == made  # neither the implementer nor the reviewer asked again
    result.stdout.fnmatch_lines(
        ["*greet*completed  1 *passed after 1 fix round, 2/2 criteria met*"]
    )
    greet = session(pytester).phases["greet"]
    assert greet.review["passed"] is True and len(greet.review["rounds"]) == 1
    assert greet.result.startswith("COMPLETED:")  # the implementer's handoff, from the record
    assert (root / "out.txt").read_text() == "hello\n"


# Between the killed run and the next: what is changed, and the options of the next run.


def _edit_file(pytester: pytest.Pytester) -> tuple[str, ...]:
    (pytester.path / "out.txt").write_text("the user's edit\n")
    return REVIEWED


def _change_phase(pytester: pytest.Pytester) -> tuple[str, ...]:
    write_plan(pytester, [greeting("FAKE:REVIEW_UNMET_UNTIL_ROUND=3\nSay it warmly.")])
    return REVIEWED


def _corrupt(pytester: pytest.Pytester) -> tuple[str, ...]:
    [record] = (pytester.path / ".maestro" / "preimages").glob("*.greet.loop.json")
    record.write_text('{"version": 1, "phase": "gr')
    return REVIEWED


def _hand_edit(pytester: pytest.Pytester) -> tuple[str, ...]:
    [record] = (pytester.path / ".maestro" / "preimages").glob("*.greet.loop.json")
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "attempt": "often"}))
    return REVIEWED


def _no_review(pytester: pytest.Pytester) -> tuple[str, ...]:
    return (*RUN, "--maestro-runtime=claude")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("between", "line"),
    [
        (_edit_file, "after a killed run: phase 'greet': its review loop starts over: out.txt "
         "changed since fix round 2's review"),
        (_change_phase, "after a killed run: phase 'greet': its review loop starts over: the "
         "phase changed since fix round 2's review"),
        (_corrupt, "after a killed run: phase 'greet': its review loop starts over: it is not "
         "JSON: *"),
        (_hand_edit, "after a killed run: phase 'greet': its review loop starts over: it cannot "
         "be read: field 'attempt' must be a whole number*, got 'often'"),
        (_no_review, "phase 'greet': warning: the review loop a killed run left starts over: it "
         "is not reviewed now"),
    ],
    ids=["file-edited", "phase-changed", "corrupt", "hand-edited", "not-reviewed"],
)  # fmt: skip
def test_a_loop_that_cannot_go_on_starts_over_saying_why_in_one_line(
    pytester: pytest.Pytester,
    fakes: Path,
    between: Callable[[pytest.Pytester], tuple[str, ...]],
    line: str,
) -> None:
    root = pytester.path
    write_plan(pytester, [greeting("FAKE:REVIEW_UNMET_UNTIL_ROUND=3")])
    _kill_in_round(root, fakes, 3, ())
    made = calls(fakes)
    options = between(pytester)

    result = pytester.runpytest_subprocess(*options)

    result.assert_outcomes(passed=1)
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([line])
    again = calls(fakes)[len(made) :]
    assert (again[0]["review"], again[0]["round"]) == (False, 0)  # a first attempt, afresh
    assert "--resume" not in again[0]["argv"]
    assert (root / "out.txt").read_text() == "hello\n"  # put back first, then made again
    [kept] = (root / ".maestro" / "replaced" / "greet").glob("*-interrupted/out.txt")
    assert kept.read_text() == ("the user's edit\n" if between is _edit_file else "hello\n")
