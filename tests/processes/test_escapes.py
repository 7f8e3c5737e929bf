"""Whatever a phase's commands start ends with them, however it tried to get away: a session of its
own (``setsid``), an empty environment (``env -i``), a process group of its own (job control);
and whatever stops the run (its end, Ctrl-C, SIGTERM, SIGHUP, kill -9) leaves none of it running.
Each leftover carries a marker in its command line, looked up in ``/proc`` after the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_maestro.processes.leftovers import (
    RunningRecord,
    boot_ticks,
    end_groups,
    read_running_record,
    record_owner,
)
from pytest_maestro.processes.reaping import children, end_left, is_subreaper, subreaper

from ..helpers import FAKES
from ..robustness.test_safety import gone, marked

PY = sys.executable


def sleeper(marker: str) -> str:
    """A Python that says it is ready (the file ``ready``), then sleeps: ``marker`` in its argv."""
    code = "open('ready', 'w').close(); import time; time.sleep(600)"
    return f'{PY} -c "{code}" {marker}'


@pytest.fixture
def marker() -> Iterator[str]:
    """A mark for the leftovers' command lines; whatever carries it when the test ends is
    killed, so a failing test leaves nothing behind."""
    mark = f"maestro-test-{uuid.uuid4().hex}"
    yield mark
    for pid in marked(mark):
        os.kill(pid, signal.SIGKILL)


WAIT_READY = "while [ ! -e ready ]; do sleep 0.02; done"


def daemon(marker: str, how: str) -> str:
    """A bash command that leaves a marked process behind, out of its process group, and returns
    once it runs."""
    if how == "setsid":
        start = f"setsid {sleeper(marker)} &"
    elif how == "setsid-env-i":  # no token of ours in its environment
        start = f"setsid env -i {sleeper(marker)} &"
    elif how == "set-m":  # job control: the job leads a group of its own in the same session
        start = f"set -m; {sleeper(marker)} &"
    else:  # a Python that starts it in a group of its own
        code = (
            "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
            "\\\"open('ready', 'w').close(); import time; time.sleep(600)\\\", "
            f"'{marker}'], process_group=0)"
        )
        start = f'{PY} -c "{code}"'
    return f"{start} {WAIT_READY}" if start.endswith("&") else f"{start}; {WAIT_READY}"


def write(root: Path, phases: list[dict[str, Any]]) -> None:
    (root / "plan.yaml").write_text(yaml.safe_dump({"phases": phases}))


AGENT = ["--maestro-runtime=claude", "--maestro-autonomous"]


@pytest.fixture
def fake_clis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")


def agent_phase(task: str, **fields: Any) -> dict[str, Any]:
    return {"id": "agent", "name": "Agent", "description": task, "files": [], **fields}


@pytest.mark.usefixtures("fake_clis")
@pytest.mark.parametrize("how", ["setsid", "setsid-env-i"])
def test_a_daemon_an_agent_starts_ends_with_its_call(
    pytester: pytest.Pytester, marker: str, how: str
) -> None:
    write(pytester.path, [agent_phase(f"FAKE:SHELL {daemon(marker, how)}")])
    result = pytester.runpytest("--maestro", "plan.yaml", *AGENT)
    result.assert_outcomes(passed=1)
    assert (pytester.path / "ready").exists(), "the daemon never started"
    assert gone(marker, within=2), "a daemon the agent started outlived its call"


@pytest.mark.parametrize("how", ["setsid", "set-m", "process-group"])
@pytest.mark.parametrize("where", ["run", "check", "assumption"])
def test_what_a_command_starts_out_of_its_group_ends_with_it(
    pytester: pytest.Pytester, marker: str, how: str, where: str
) -> None:
    command = daemon(marker, how)
    phase: dict[str, Any] = {"id": "p", "run": [command if where == "run" else "true"]}
    if where == "check":
        phase["acceptance"] = [{"criterion": "a server answers", "check": command}]
    if where == "assumption":
        phase["assumptions"] = [{"claim": "a server runs", "verify": command}]
    # The next command sees whether the leftover still runs.
    phase["run"].append(f"sleep 0.2; ! pgrep -f '[{marker[0]}]{marker[1:]}'")
    write(pytester.path, [{**phase, "max_retries": 0}])
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert (pytester.path / "ready").exists(), "the leftover never started"
    result.assert_outcomes(passed=1)
    assert gone(marker, within=2), f"what the {where} command started outlived it"


@pytest.mark.slow
def test_a_command_that_times_out_leaves_nothing_behind(
    pytester: pytest.Pytester, marker: str
) -> None:
    command = f"{daemon(marker, 'setsid')}; sleep 600"
    # Time enough for the daemon to start on a busy machine.
    write(pytester.path, [{"id": "p", "run": [command], "timeout": 2, "max_retries": 0}])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(failed=1)
    assert (pytester.path / "ready").exists(), "the daemon never started"
    assert gone(marker, within=2), "the daemon outlived its command's timeout"


# -- stops --------------------------------------------------------------------------------------


def start(root: Path, *options: str) -> subprocess.Popen[str]:
    """pytest in the background, leading a session of its own (so a kill of its group reaches
    it and nothing of the test); returns once its phase's daemon is ready."""
    process = subprocess.Popen(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml", *options],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (root / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (root / "ready").exists(), "the daemon never started"
    return process


def hanging_agent(marker: str, how: str = "setsid") -> dict[str, Any]:
    """An agent that starts a daemon, then works on until it is stopped; only the first time."""
    command = f"if rm first 2>/dev/null; then {daemon(marker, how)}; sleep 600; fi"
    return agent_phase(f"FAKE:SHELL {command}", max_retries=0)


@pytest.mark.slow
@pytest.mark.usefixtures("fake_clis")
@pytest.mark.parametrize(
    ("sig", "options"),
    [
        # SIGTERM and SIGHUP stop one process as Ctrl-C does (robustness/test_safety.py).
        pytest.param(signal.SIGINT, (), id="ctrl-c"),
        # A worker's daemon without our token in its environment.
        pytest.param(signal.SIGTERM, ("-n", "2"), id="sigterm-n2"),
    ],
)
def test_a_stopped_run_ends_the_daemon_its_agent_started(
    tmp_path: Path, marker: str, sig: signal.Signals, options: tuple[str, ...]
) -> None:
    (tmp_path / "first").touch()
    write(tmp_path, [hanging_agent(marker, "setsid-env-i" if options else "setsid")])
    run = start(tmp_path, *AGENT, *options)
    os.kill(run.pid, sig)
    run.communicate(timeout=60)
    assert gone(marker, within=5), f"the agent's daemon outlived a run stopped by {sig.name}"


def _recorded(root: Path, how: str, within: float) -> bool:
    """Whether, within a time, a running record names a session besides the commands' groups
    (``setsid``), or the command's group (whose session holds a job in a group of its own)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for path in (root / ".maestro" / "logs").glob("*.running"):
            lines = read_running_record(path).groups
            if any(line.startswith("s") or how != "setsid" for line in lines):
                return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
@pytest.mark.usefixtures("fake_clis")
@pytest.mark.parametrize(
    ("how", "options"),
    [pytest.param("setsid", (), id="setsid"), pytest.param("set-m", ("-n", "2"), id="set-m-n2")],
)
def test_the_next_run_ends_the_daemon_a_killed_run_s_agent_left(
    tmp_path: Path, marker: str, options: tuple[str, ...], how: str
) -> None:
    (tmp_path / "first").touch()
    write(tmp_path, [hanging_agent(marker, how)])
    run = start(tmp_path, *AGENT, *options)
    # A kill before the runner has seen the daemon leaves it running (the README says so).
    _recorded(tmp_path, how, within=5)
    os.killpg(run.pid, signal.SIGKILL)
    run.communicate(timeout=60)
    assert marked(marker), "the kill itself ended the daemon: the test proves nothing"
    again = subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml", *AGENT],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stdout[-2000:]
    assert gone(marker, within=5), "the killed run's daemon outlived the next run"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGHUP], ids=["sighup"])  # SIGTERM: the same path
def test_a_worker_told_to_stop_starts_no_other_attempt(
    tmp_path: Path, marker: str, sig: signal.Signals
) -> None:
    # Each attempt notes itself, then works until stopped: a stopped run notes one attempt.
    command = f"echo $MAESTRO_ATTEMPT >> attempts; {sleeper(marker)}"
    write(tmp_path, [{"id": "long", "run": [command], "max_retries": 2}])
    run = start(tmp_path, "-n", "2")
    os.kill(run.pid, sig)  # the controller alone, as a cancelled CI job's runner may
    out, _ = run.communicate(timeout=60)
    time.sleep(0.5)  # a worker that went on would have started its next attempt by now
    assert (tmp_path / "attempts").read_text() == "1\n", out[-3000:]
    assert " failed" not in out, out[-3000:]
    assert f"maestro: phase 'long' was interrupted (stopped by {sig.name})" in out, out[-3000:]
    assert gone(marker, within=5)


def test_a_recorded_group_s_session_and_token_reach_what_left_the_group(
    tmp_path: Path, marker: str
) -> None:
    # What the next run reads of a killed run's record: the command's group (it leads its
    # session: a job of its own group is in it), and the command's token in the environment.
    job = f"set -m; {sleeper(marker)} & wait"
    before = boot_ticks()
    command = subprocess.Popen(["bash", "-c", job], cwd=tmp_path, start_new_session=True)
    after = boot_ticks()
    token = uuid.uuid4().hex
    escaped = subprocess.Popen(
        ["bash", "-c", f"exec {sleeper(marker)}"],
        cwd=tmp_path,
        start_new_session=True,
        env={**os.environ, "MAESTRO_COMMAND_TOKEN": token},
    )
    try:
        deadline = time.monotonic() + 10
        while len(marked(marker)) < 3 and time.monotonic() < deadline:  # bash, job, escaped
            time.sleep(0.02)
        [job_pid] = [pid for pid in marked(marker) if pid not in (command.pid, escaped.pid)]
        assert os.getpgid(job_pid) != command.pid, "the job is in the command's group"
        ended = end_groups([f"{command.pid} {before} {after}", f"t{token}"])
        assert ended == sorted([command.pid, escaped.pid])
        assert escaped.wait(timeout=10) == -signal.SIGKILL
        assert command.wait(timeout=10) == -signal.SIGKILL
        assert gone(marker, within=5)
    finally:
        for process in (command, escaped):
            process.kill()
            process.wait()


def test_a_run_inside_another_s_command_keeps_the_outer_token(tmp_path: Path, marker: str) -> None:
    # A phase that runs pytest --maestro: the inner run's commands carry the outer command's
    # token beside their own, so a kill of the outer run still finds what the inner one left.
    with RunningRecord(tmp_path / "plan-1.1.running") as record:
        record.start("p")
        env = record.with_token({**os.environ, "MAESTRO_COMMAND_TOKEN": "0123456789abcdef"})
    outer, inner = env["MAESTRO_COMMAND_TOKEN"].split(":")
    assert outer == "0123456789abcdef"
    assert read_running_record(tmp_path / "plan-1.1.running").groups == (f"t{inner}",)
    escaped = subprocess.Popen(
        ["bash", "-c", f"exec {sleeper(marker)}"], cwd=tmp_path, start_new_session=True, env=env
    )
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert end_groups([f"t{outer}"]) == [escaped.pid]
        assert escaped.wait(timeout=10) == -signal.SIGKILL
    finally:
        escaped.kill()
        escaped.wait()


@pytest.mark.slow
def test_what_ends_on_its_own_while_a_command_runs_is_reaped(pytester: pytest.Pytester) -> None:
    # A short job that leaves its group comes to the runner when its parent goes, and dies: a
    # zombie of the runner's until reaped, which must not wait for the command's end.
    zombies = "ps -o stat= --ppid $PPID | grep -c Z"
    # Up to 2 s for the runner to reap it, while the command still runs.
    reaped = f"for _ in $(seq 40); do test $({zombies}) = 0 && break; sleep 0.05; done"
    command = f"(setsid true &); sleep 0.3; {zombies} > before; {reaped}; {zombies} > after || true"
    write(pytester.path, [{"id": "p", "run": [command], "max_retries": 0}])
    # In a process of its own: in this one, another test's children would be counted too.
    pytester.runpytest_subprocess("--maestro", "plan.yaml").assert_outcomes(passed=1)
    assert (pytester.path / "before").read_text() == "1\n", "no zombie: the test proves nothing"
    assert (pytester.path / "after").read_text() == "0\n"


@pytest.mark.slow
def test_a_crashed_worker_s_daemon_is_ended(tmp_path: Path, marker: str) -> None:
    (tmp_path / "first").touch()
    command = f"{daemon(marker, 'setsid')}; sleep 600"
    write(tmp_path, [{"id": "p", "run": [command], "max_retries": 0}])
    run = start(tmp_path, "-n", "2")
    assert _recorded(tmp_path, "setsid", within=10), "the daemon's session was never recorded"
    [record] = (tmp_path / ".maestro" / "logs").glob("*.running")
    worker = record_owner(record)
    assert worker is not None
    os.kill(worker, signal.SIGKILL)
    out, _ = run.communicate(timeout=120)
    assert "1 failed" in out, out[-2000:]
    assert gone(marker, within=5), "the crashed worker's daemon ran on"


# A plugin that kills the process it is loaded in (an xdist worker, or pytest itself) the instant
# a command has started, before its runner could record anything about it.
DIE_AFTER_SPAWN = """
import os, signal

def pytest_configure(config):
    if os.environ["DIE_IN"] != ("worker" if hasattr(config, "workerinput") else "main"):
        return
    from pytest_maestro.processes import process

    spawn = process._spawn

    def spawn_then_die(*args, **kwargs):
        started = spawn(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return started

    process._spawn = spawn_then_die
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["worker", "main"])
def test_a_command_started_the_instant_before_a_kill_is_ended(
    tmp_path: Path, marker: str, where: str
) -> None:
    (tmp_path / "die_after_spawn.py").write_text(DIE_AFTER_SPAWN)
    (tmp_path / "first").touch()
    once = f"if rm first 2>/dev/null; then {sleeper(marker)}; fi"  # the next run's is quick
    write(tmp_path, [{"id": "p", "run": [once], "max_retries": 0}])
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "DIE_IN": where}
    options = ["-n", "2"] if where == "worker" else []
    command = [PY, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml"]
    run = subprocess.run(
        [*command, "-p", "die_after_spawn", *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if where == "worker":  # the controller ends what the crashed worker's phase started
        assert "1 failed" in run.stdout, run.stdout[-2000:]
    else:  # nothing is left to end it but the next run of the plan
        assert run.returncode == -signal.SIGKILL
        assert marked(marker), "the kill ended the command: the test proves nothing"
        again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stdout[-2000:]
    assert gone(marker, within=5), "a command started the instant before the kill ran on"


def test_a_double_fork_comes_to_the_subreaper_and_is_ended_and_reaped(
    tmp_path: Path, marker: str
) -> None:
    assert not is_subreaper()
    with subreaper() as became:
        assert became and is_subreaper()
        before = children()
        # The middle process ends at once: its child comes to us, in a session of its own.
        subprocess.run(["bash", "-c", f"(setsid {sleeper(marker)} &); {WAIT_READY}"], cwd=tmp_path)
        [orphan] = children() - before
        assert marked(marker) == [orphan]
        assert end_left(before) == [orphan]
        assert not Path(f"/proc/{orphan}").exists(), "ended but not reaped"
        assert children() == before
    assert not is_subreaper()
