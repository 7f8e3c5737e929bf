"""SIGKILL a parallel run at random moments: the session state never claims what did not happen."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_maestro.process import end_recorded_groups, record_group
from pytest_maestro.state import Status, read_session

from .helpers import write_plan

PHASES = 30
ROUNDS = 10


def _plan(pytester: pytest.Pytester) -> None:
    rng = random.Random(7)
    phases = []
    for n in range(PHASES):
        deps = sorted({f"p{rng.randrange(n)}" for _ in range(rng.randrange(3))}) if n else []
        # The marker is written last: a phase recorded completed must have reached it.
        run = [f"sleep {rng.uniform(0.1, 0.4):.2f}", f"echo done >> markers/p{n}"]
        phases.append({"id": f"p{n}", "run": run, "blocked_by": deps, "max_retries": 0})
    write_plan(pytester, phases)
    (pytester.path / "markers").mkdir()


def _runs(root: Path) -> dict[str, int]:
    return {m.name: len(m.read_text().split()) for m in (root / "markers").iterdir()}


def _wait_for_progress(root: Path, markers: int, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while sum(_runs(root).values()) <= markers and time.monotonic() < deadline:
        time.sleep(0.02)


def _completed(root: Path) -> set[str]:
    found = list((root / ".maestro").glob("plan-*.md"))
    if not found:
        return set()
    doc = read_session(found[0])  # parses, whatever moment the kill hit
    return {p.id for p in doc.phases.values() if p.status is Status.COMPLETED}


@pytest.mark.slow
def test_random_kills_lose_nothing_and_repeat_no_completed_phase(pytester: pytest.Pytester) -> None:
    _plan(pytester)
    rng = random.Random(2026)
    command = [sys.executable, "-m", "pytest", "--maestro", "plan.yaml", "-n", "2", "-q"]
    env = {**os.environ, "PYTEST_ADDOPTS": "-p no:hypothesispytest"}
    done_before: dict[str, int] = {}
    for _ in range(ROUNDS):
        run = subprocess.Popen(
            command,
            cwd=pytester.path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        # A random moment after the run made some progress, whatever the machine's speed.
        _wait_for_progress(pytester.path, sum(_runs(pytester.path).values()))
        time.sleep(rng.uniform(0.0, 0.4))
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        time.sleep(0.3)  # phase commands live in their own process groups: let them end
        runs = _runs(pytester.path)
        completed = _completed(pytester.path)
        assert all(runs.get(pid, 0) >= 1 for pid in completed), "completed but never ran"
        for pid, count in done_before.items():
            assert runs[pid] == count, f"{pid} was completed, yet ran again"
        done_before.update({pid: runs[pid] for pid in completed if pid not in done_before})
    result = subprocess.run(command, cwd=pytester.path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]
    runs = _runs(pytester.path)
    assert set(runs) == {f"p{n}" for n in range(PHASES)}
    assert _completed(pytester.path) == set(runs)
    for pid, count in done_before.items():
        assert runs[pid] == count, f"{pid} was completed, yet ran again"
    assert done_before, "no kill came late enough to find a completed phase"


@pytest.mark.slow
def test_next_run_ends_the_commands_a_killed_run_left_running(pytester: pytest.Pytester) -> None:
    # Commands lead their own sessions, so SIGKILL to pytest's group does not reach them; the
    # next run must end them before it runs their phase again, or two copies would write at once.
    run = ['echo "start $$" >> phase.log; sleep 2; echo "end $$" >> phase.log']
    write_plan(pytester, [{"id": "slow", "run": run, "max_retries": 0}])
    log = pytester.path / "phase.log"
    result = _kill_once_started_then_rerun(pytester.path, log)
    assert result.returncode == 0, result.stdout[-2000:]
    lines = log.read_text().split("\n")
    first, second = (line.split()[1] for line in lines if line.startswith("start"))
    _wait_until_ended(int(first))  # ended by the new run, else it writes its end and exits
    lines = log.read_text().split("\n")
    assert f"end {second}" in lines
    assert f"end {first}" not in lines, "the killed run's command ran on beside the new one"


def _wait_until_ended(pid: int, limit: float = 30.0) -> None:
    """Until the process has exited (a zombie has: it only waits to be reaped)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still runs after {limit} s")


def test_only_the_recorded_group_is_ended(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        groups = tmp_path / "phase.groups"
        groups.write_text(f"{sleeper.pid} 1\n")  # the same pid, another start time: reused
        assert end_recorded_groups(groups) == []
        assert sleeper.poll() is None and not groups.exists()
        record_group(groups, sleeper.pid)
        assert end_recorded_groups(groups) == [sleeper.pid]
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


def _kill_once_started_then_rerun(root: Path, started: Path) -> subprocess.CompletedProcess[str]:
    """Run the plan, SIGKILL pytest's process group once ``started`` exists, run it again."""
    command = [sys.executable, "-m", "pytest", "--maestro", "plan.yaml", "-q"]
    env = {**os.environ, "PYTEST_ADDOPTS": "-p no:hypothesispytest"}
    killed = subprocess.Popen(
        command,
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_files_of_an_interrupted_phase_are_restored_from_git(pytester: pytest.Pytester) -> None:
    root = pytester.path
    (root / "data.txt").write_text("original\n")
    (root / ".gitignore").write_text(".maestro/\nseen.log\nstarted\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    # The phase records what it finds, then leaves its file half-written when killed.
    run = [
        "cat data.txt >> seen.log",
        "echo half >> data.txt; touch started; sleep 1",
        "echo done >> data.txt",
    ]
    write_plan(pytester, [{"id": "edit", "run": run, "files": ["data.txt"], "max_retries": 0}])
    result = _kill_once_started_then_rerun(root, root / "started")
    assert result.returncode == 0, result.stdout[-2000:]
    # The rerun found the file as git had it, not as the killed attempt left it.
    assert (root / "seen.log").read_text() == "original\noriginal\n"
    assert (root / "data.txt").read_text() == "original\nhalf\ndone\n"
