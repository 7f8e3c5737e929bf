"""Agent calls paced by the account, end to end: real xdist workers against a stand-in claude
whose account (tests/fakes/account/claude) allows k calls at once, shared by every process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.phase.agent_call import call_agent
from pytest_maestro.phase.slots import AccountSlots
from pytest_maestro.plan import Phase
from pytest_maestro.runtimes.base import AgentRequest, AgentResult
from pytest_maestro.scheduling.pacing import CLEAN, LIMITED, KeyState, Pacer
from pytest_maestro.state import SessionPaths
from pytest_maestro.state.model import Status

from ..helpers import FAKES, write_plan

ACCOUNT = FAKES / "account"

pytestmark = pytest.mark.slow


@pytest.fixture
def account(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{ACCOUNT}{os.pathsep}{os.environ['PATH']}")
    home = pytester.path / "account"
    monkeypatch.setenv("ACCOUNT_DIR", str(home))
    monkeypatch.setenv("ACCOUNT_SECONDS", "1")
    return home


def events(home: Path) -> list[dict[str, Any]]:
    path = home / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def phases(count: int) -> list[dict[str, Any]]:
    return [{"id": f"p{n}", "name": f"Phase {n}", "reads": ["R"]} for n in range(count)]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "--maestro-runtime=claude", "-p", "no:randomly", *args
    )


def test_a_refusal_teaches_every_worker_the_accounts_limit(
    pytester: pytest.Pytester, account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCOUNT_CONCURRENT", "2")
    write_plan(pytester, phases(6))
    result = run(pytester, "-n", "4")
    result.assert_outcomes(passed=6)
    seen = events(account)
    arrivals = [e for e in seen if e["event"] != "end"]
    refused = [e for e in arrivals if e["event"] == "refused"]
    assert {e["attempt"] for e in arrivals} == {"1"}  # a refusal burns no attempt
    # The first calls of the 4 workers may race to the account: those over 2 are refused. From
    # then on every worker knows: no call arrives while 2 run, so none is refused again.
    assert 1 <= len(refused) <= 2
    later = [e for e in arrivals if e["t"] > refused[-1]["t"]]
    assert later and all(e["running"] < 2 for e in later), later
    result.stdout.fnmatch_lines(["*waiting for a slot of the account after*"])
    summary = json.loads((pytester.path / ".maestro" / "summary.json").read_text())
    assert summary["account_wait_seconds"] > 0
    result.stdout.fnmatch_lines(["phases waited * for the account (rate limits, call slots)"])
    logs = (pytester.path / ".maestro" / "logs" / f"{refused[0]['phase']}.log").read_text()
    assert "--- waiting for a slot: " in logs


def test_the_option_caps_calls_from_the_start(
    pytester: pytest.Pytester, account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCOUNT_CONCURRENT", "2")
    write_plan(pytester, phases(5))
    result = run(pytester, "-n", "4", "--maestro-max-concurrent-calls=claude=2,codex=1")
    result.assert_outcomes(passed=5)
    arrivals = [e for e in events(account) if e["event"] != "end"]
    assert [e["event"] for e in arrivals] == ["start"] * 5
    assert max(e["running"] for e in arrivals) == 1  # never a third call on its way


def test_a_spent_quota_blocks_the_remaining_calls_at_once(
    pytester: pytest.Pytester, account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCOUNT_QUOTA_AFTER", "1")
    monkeypatch.setenv("ACCOUNT_SECONDS", "0.2")
    write_plan(pytester, phases(6))
    result = run(pytester, "-n", "2", "--maestro-max-concurrent-calls=claude=1")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 1 and outcomes.get("failed") == 5
    arrivals = [e["event"] for e in events(account) if e["event"] != "end"]
    assert arrivals == ["start", "quota"]  # the rest never reached the account
    result.stdout.fnmatch_lines(["*quota spent: *hit your limit*resets 3pm (UTC)*"])
    result.stdout.fnmatch_lines(["*no further claude call is made this run*"])


def test_the_shell_is_never_paced(pytester: pytest.Pytester, account: Path) -> None:
    shell = [{"id": f"s{n}", "name": f"S {n}", "run": ["true"]} for n in range(3)]
    write_plan(pytester, shell)
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-max-concurrent-calls=shell=1")
    result.assert_outcomes(passed=3)
    assert not (pytester.path / ".maestro" / "pacing.json").read_text().count('"shell"')


# -- the shared file: crashes and damage -------------------------------------------------------


def test_a_slot_held_by_a_process_that_died_is_reclaimed(tmp_path: Path) -> None:
    slots = AccountSlots(SessionPaths(tmp_path, "s"), {"claude": 1})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    held = KeyState(held={"gone": dead.pid}, queue=[("gone too", dead.pid)])
    data = {"version": 1, "keys": Pacer({"claude": held}).to_dict(), "waited": {}}
    (tmp_path / "pacing.json").write_text(json.dumps(data))
    got = slots.acquire("claude", None, 1.0)
    assert got.ticket is not None and got.waited == 0.0
    assert slots.notes == []  # read, not started afresh
    state = json.loads((tmp_path / "pacing.json").read_text())["keys"]["claude"]
    assert list(state["held"]) == [got.ticket] and state["queue"] == []


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "{",
        "[1, 2]",
        '{"version": 1, "keys": {"x": 1}}',
        # A wait no clock ends (json reads NaN): the run's summary would say "waited nan".
        '{"version": 1, "keys": {}, "waited": {"s": NaN}}',
        '{"version": 1, "keys": {}, "waited": {"s": 1' + "0" * 400 + "}}",  # past any float
        "\udcff\udcfe{",  # not UTF-8: bytes 0xff 0xfe, as the file holds them
    ],
)
def test_a_damaged_file_is_started_afresh_in_one_line(tmp_path: Path, garbage: str) -> None:
    (tmp_path / "pacing.json").write_bytes(garbage.encode(errors="surrogateescape"))
    slots = AccountSlots(SessionPaths(tmp_path, "s"))
    got = slots.acquire("claude", None, 1.0)
    assert got.ticket is not None
    [note] = slots.notes
    assert "could not be read" in note and "\n" not in note
    [kept] = (tmp_path / "archive").iterdir()  # the damaged file is kept, not overwritten
    assert kept.read_text(errors="surrogateescape") == garbage and f"kept as {kept}" in note
    slots.release(got.key, got.ticket, CLEAN)
    assert json.loads((tmp_path / "pacing.json").read_text())["version"] == 1


def test_a_wait_past_its_bound_gives_up_its_place(tmp_path: Path) -> None:
    slots = AccountSlots(SessionPaths(tmp_path, "s"), {"claude": 1})
    held = slots.acquire("claude", None, 1.0)
    assert held.ticket is not None
    heard: list[tuple[float | None, str]] = []
    got = slots.acquire("claude", None, 0.2, lambda wait, why: heard.append((wait, why)))
    assert got.ticket is None and got.blocked is None and got.waited >= 0.2
    assert heard == [(None, "1 claude calls in flight, as many as the account allows now")]
    slots.release(held.key, held.ticket, LIMITED)  # a refused call waits at the head again
    state = json.loads((tmp_path / "pacing.json").read_text())["keys"]["claude"]
    assert [entry[0] for entry in state["queue"]] == [held.ticket] and state["held"] == {}
    slots.cancel(held.ticket)
    state = json.loads((tmp_path / "pacing.json").read_text())["keys"]["claude"]
    assert state["queue"] == []


def test_a_wait_given_up_between_two_reads_of_the_clock_frees_its_place(tmp_path: Path) -> None:
    # The clock read under the lock is within the bound, the one after it past: the call gives
    # up only on a read under the lock, so its place never stays queued behind it.
    ticks = iter(i * 0.15 for i in range(1000))
    slots = AccountSlots(
        SessionPaths(tmp_path, "s"), {"claude": 1}, clock=lambda: next(ticks), sleep=lambda _: None
    )
    held = slots.acquire("claude", None, 1.0)
    assert held.ticket is not None
    got = slots.acquire("claude", None, 0.2)
    assert got.ticket is None and got.blocked is None and got.waited >= 0.2
    state = json.loads((tmp_path / "pacing.json").read_text())["keys"]["claude"]
    assert state["queue"] == [] and list(state["held"]) == [held.ticket]


def test_the_option_comes_from_the_flag_repeated_the_environment_or_the_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plan(pytester, [{"id": "s", "run": ["true"]}])
    bad = pytester.runpytest("--maestro", "plan.yaml", "--maestro-max-concurrent-calls=claude")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(
        ["ERROR: --maestro-max-concurrent-calls: 'claude' is not RUNTIME=N with N a whole number*"]
    )
    pytester.makeini("[pytest]\nmaestro_max_concurrent_calls = claude=2\n")
    monkeypatch.setenv("MAESTRO_MAX_CONCURRENT_CALLS", "codex=x")
    bad = pytester.runpytest("--maestro", "plan.yaml")
    bad.stderr.fnmatch_lines(["ERROR: environment MAESTRO_MAX_CONCURRENT_CALLS: 'codex=x' is*"])
    monkeypatch.delenv("MAESTRO_MAX_CONCURRENT_CALLS")
    good = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-max-concurrent-calls=claude=1",
        "--maestro-max-concurrent-calls", "codex=2",
    )  # fmt: skip
    good.assert_outcomes(passed=1)


# -- call_agent with the slots, in one process ----------------------------------------------------


class Scripted:
    """A runtime answering from a list of results, one a call."""

    name = "gemini"
    autonomy = "--yolo"

    def __init__(self, *results: AgentResult) -> None:
        self.results = list(results)
        self.calls = 0

    def run(self, request: AgentRequest) -> AgentResult:
        self.calls += 1
        return self.results.pop(0)


def request(tmp_path: Path, model: str | None = "gemini-2.5-pro") -> AgentRequest:
    phase = Phase("p", "P")
    return AgentRequest(phase, "do it", 1, tmp_path, {}, 60.0, tmp_path / "p.log", model=model)


DONE = AgentResult(Status.COMPLETED, "COMPLETED: done")


def test_a_limit_the_cli_says_is_per_model_is_counted_per_model(tmp_path: Path) -> None:
    slots = AccountSlots(SessionPaths(tmp_path, "s"))
    limited = AgentResult(
        Status.FAILED,
        "rate limited: Quota exceeded for metric requests_per_minute, model: gemini-2.5-pro",
        limited=True,
        retry_after=0.1,
    )
    lines: list[str] = []
    call = call_agent(
        Scripted(limited, DONE), request(tmp_path), max_wait=5, ask_again=False,
        note=lines.append, slots=slots,
    )  # fmt: skip
    assert call.result.ok and call.calls == 2 and call.waited > 0
    keys = json.loads((tmp_path / "pacing.json").read_text())["keys"]
    assert keys["gemini"]["per_model"] and "gemini (gemini-2.5-pro)" in keys
    assert all(not key["queue"] and not key["held"] for key in keys.values())  # none left
    waits = [line for line in lines if line.startswith("--- waiting for a slot: ")]
    [wait] = waits
    assert wait.startswith("--- waiting for a slot: no gemini (gemini-2.5-pro) call before 0.")
    assert slots.waited() == pytest.approx(call.waited)


def test_a_quota_spent_in_one_phase_blocks_the_next_without_a_call(tmp_path: Path) -> None:
    slots = AccountSlots(SessionPaths(tmp_path, "s"))
    quota = AgentResult(Status.BLOCKED, "quota spent: daily quota", quota_spent=True)
    first = call_agent(
        Scripted(quota), request(tmp_path), max_wait=5, ask_again=False,
        note=lambda line: None, slots=slots,
    )  # fmt: skip
    assert first.result.quota_spent and first.calls == 1
    runtime = Scripted(DONE)
    second = call_agent(
        runtime, request(tmp_path), max_wait=5, ask_again=False, note=lambda line: None,
        slots=slots,
    )  # fmt: skip
    assert runtime.calls == 0 and second.calls == 0
    assert second.result.status is Status.BLOCKED
    assert second.result.message == (
        "quota spent: daily quota (no further gemini call is made this run)"
    )


def test_slots_another_process_keeps_locked_are_one_line_naming_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """filelock says only that its lock could not be acquired, after a minute's silence: the
    line says whose slots, who may hold them, and which file is the lock."""
    import filelock

    from pytest_maestro.phase import slots as slots_module

    monkeypatch.setattr(slots_module, "LOCK_TIMEOUT", 0.1)
    slots = AccountSlots(SessionPaths(tmp_path, "s"))
    lock = tmp_path / ".pacing.json.lock"
    with filelock.FileLock(str(lock)), pytest.raises(TimeoutError) as held:
        slots.acquire("claude", None, 1.0)
    said = str(held.value)
    assert said.startswith(f"the account's call slots ({tmp_path / 'pacing.json'}) stayed locked")
    # The kernel frees the lock of a process that ended: one that holds it still is alive.
    assert "stayed locked 0.1 s by another process" in said and "remove" not in said
    assert said.endswith(f"the lock is {lock}") and "\n" not in said
    got = slots.acquire("claude", None, 1.0)  # free again: taken, and let go
    assert got.ticket is not None


def test_a_call_the_slots_lock_keeps_waiting_says_so_once_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's hold on the slots' lock is said on the phase's line after a moment,
    not after a minute's silence; the call takes its slot once the lock is let go."""
    import threading

    import filelock

    from pytest_maestro.phase import slots as slots_module

    monkeypatch.setattr(slots_module, "LOCK_NOTICE", 0.05)
    slots = AccountSlots(SessionPaths(tmp_path, "s"))
    lock = filelock.FileLock(str(tmp_path / ".pacing.json.lock"), thread_local=False)
    lock.acquire()
    letting_go = threading.Timer(0.5, lock.release)
    letting_go.start()
    heard: list[tuple[float | None, str]] = []
    got = slots.acquire("claude", None, 5.0, waiting=lambda s, why: heard.append((s, why)))
    letting_go.join()
    assert got.ticket is not None and not lock.is_locked
    assert heard == [
        (
            None,
            f"another process holds {tmp_path / '.pacing.json.lock'}, the lock of the "
            "account's call slots (at most 60 s)",
        )
    ]
