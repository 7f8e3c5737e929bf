"""SIGKILL a parallel run at random moments: the session state never claims what did not happen."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_maestro.processes.leftovers import (
    RunningRecord,
    boot_ticks,
    end_groups,
    read_running_record,
)
from pytest_maestro.state import Status, read_session
from pytest_maestro.state.document import parse_session, render
from pytest_maestro.state.journal import read_journal

from ..helpers import git_repo, write_plan

PHASES = 30
ROUNDS = 6  # each a -n 2 run killed at a random moment after it made progress


def _plan(pytester: pytest.Pytester) -> None:
    rng = random.Random(7)
    phases = []
    for n in range(PHASES):
        deps = sorted({f"p{rng.randrange(n)}" for _ in range(rng.randrange(3))}) if n else []
        # The marker is written last: a phase recorded completed must have reached it.
        run = [f"sleep {rng.uniform(0.05, 0.2):.2f}", f"echo done >> markers/p{n}"]
        phases.append({"id": f"p{n}", "run": run, "blocked_by": deps, "max_retries": 0})
    write_plan(pytester, phases)
    (pytester.path / "markers").mkdir()


def _runs(root: Path) -> dict[str, int]:
    return {m.name: len(m.read_text().split()) for m in (root / "markers").iterdir()}


def _wait_for_progress(root: Path, markers: int, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while sum(_runs(root).values()) <= markers and time.monotonic() < deadline:
        time.sleep(0.02)


def _wait_for_leftovers(root: Path, limit: float = 10.0) -> None:
    """Until no process works in ``root``: the commands of a killed run, which lead process
    groups of their own, run on after it until they end."""
    deadline = time.monotonic() + limit
    while _working_in(root) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _working_in(root), "a killed run's command ran on"


def _working_in(root: Path) -> list[int]:
    """The processes whose working directory is ``root``, but this one (pytester's is)."""
    found, real, me = [], root.resolve(), str(os.getpid())
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        with contextlib.suppress(OSError):
            if cwd.parent.name != me and cwd.readlink() == real:
                found.append(int(cwd.parent.name))
    return found


def _completed(root: Path) -> set[str]:
    found = list((root / ".maestro").glob("plan-*.md"))
    if not found:
        return set()
    doc = read_session(found[0])  # parses, whatever moment the kill hit
    return {p.id for p in doc.phases.values() if p.status is Status.COMPLETED}


def _pytest(*options: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "--maestro", "plan.yaml", "-q", *options]


def _start(root: Path, command: list[str]) -> subprocess.Popen[bytes]:
    """pytest in the background, leading a session of its own: its group is what is killed."""
    return subprocess.Popen(
        command,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _finish(root: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """pytest to the end, as the run after the kills."""
    return subprocess.run(command, cwd=root, capture_output=True, text=True)


@pytest.mark.slow
def test_random_kills_lose_nothing_and_repeat_no_completed_phase(pytester: pytest.Pytester) -> None:
    _plan(pytester)
    rng = random.Random(2026)
    command = _pytest("-n", "2")
    done_before: dict[str, int] = {}
    for _ in range(ROUNDS):
        run = _start(pytester.path, command)
        # A random moment after the run made some progress, whatever the machine's speed.
        _wait_for_progress(pytester.path, sum(_runs(pytester.path).values()))
        time.sleep(rng.uniform(0.0, 0.2))
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        _wait_for_leftovers(pytester.path)  # commands lead their own groups: let them end
        runs = _runs(pytester.path)
        completed = _completed(pytester.path)
        assert all(runs.get(pid, 0) >= 1 for pid in completed), "completed but never ran"
        for pid, count in done_before.items():
            assert runs[pid] == count, f"{pid} was completed, yet ran again"
        done_before.update({pid: runs[pid] for pid in completed if pid not in done_before})
    result = _finish(pytester.path, command)
    assert result.returncode == 0, result.stdout[-2000:]
    runs = _runs(pytester.path)
    assert set(runs) == {f"p{n}" for n in range(PHASES)}
    assert _completed(pytester.path) == set(runs)
    for pid, count in done_before.items():
        assert runs[pid] == count, f"{pid} was completed, yet ran again"
    assert done_before, "no kill came late enough to find a completed phase"


# How a run is killed: with or without -n, and whether the controller's own record of the phase's
# start reached the disk. It does not wait for that record: the phase's runner (a worker under -n)
# has its own on disk before the phase runs anything, and the next run must find the phase by it.
KILLS = [
    pytest.param((), False, id="in-order"),
    pytest.param(("-n", "2"), False, id="n2"),
    pytest.param((), True, id="in-order-start-unrecorded"),
    pytest.param(("-n", "2"), True, id="n2-start-unrecorded"),
]


@pytest.mark.parametrize(
    ("options", "lose_start"),
    [*KILLS, pytest.param(("-n", "2", "--maestro-fresh"), False, id="n2-then-fresh")],
)
@pytest.mark.slow
def test_next_run_ends_the_commands_a_killed_run_left_running(
    pytester: pytest.Pytester, options: tuple[str, ...], lose_start: bool
) -> None:
    # Commands lead their own sessions, so SIGKILL to pytest's group does not reach them; the
    # next run must end them before it runs their phase again, or two copies would write at once.
    # The killed run's command would sleep a minute; the next run's does not sleep.
    run = [
        'if rm first 2>/dev/null; then d=60; else d=0; fi; echo "start $$" >> phase.log; '
        'sleep $d; echo "end $$" >> phase.log'
    ]
    write_plan(pytester, [{"id": "slow", "run": run, "max_retries": 0}])
    (pytester.path / "first").touch()
    log = pytester.path / "phase.log"
    result = _kill_once_started_then_rerun(pytester.path, log, options, lose_start)
    first, second = (line.split()[1] for line in log.read_text().split("\n") if "start" in line)
    try:
        assert result.returncode == 0, result.stdout[-2000:]
        assert f"end {second}" in log.read_text().split("\n")
        assert _ended(int(first)), "the killed run's command ran on beside the new one"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(first), signal.SIGKILL)


def _ended(pid: int, within: float = 10.0) -> bool:
    """Whether ``pid`` is gone or a zombie, once or within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def test_only_the_recorded_group_is_ended(tmp_path: Path) -> None:
    before = boot_ticks()
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    after = boot_ticks()
    try:
        assert end_groups([f"{sleeper.pid} 1 1"]) == []  # the same pid, started earlier: reused
        assert end_groups([f"{sleeper.pid}"]) == []  # its start unknown: left alone
        assert sleeper.poll() is None
        with RunningRecord(tmp_path / "x.running") as record:
            record.start("phase")
            record.add_group(sleeper.pid, before, after)
        left = read_running_record(tmp_path / "x.running")
        assert left.phase == "phase"
        assert end_groups(left.groups) == [sleeper.pid]
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_running_record_holds_only_what_runs_now(tmp_path: Path) -> None:
    path = tmp_path / "x.running"
    with RunningRecord(path) as record:
        record.start("first phase")
        record.add_group(101, 5, 6)
        record.add_group(102, 7, 7)
        assert read_running_record(path).groups == ("101 5 6", "102 7 7")
        record.clear()
        assert read_running_record(path).phase is None
        record.start("second")  # shorter than what it overwrites
        record.add_group(103, None, None)
    left = read_running_record(path)
    assert (left.phase, left.groups) == ("second", ("103",))
    with RunningRecord(path) as again:  # opened again: the file is not made anew
        assert read_running_record(path).phase == "second"
        again.start("third")
    assert read_running_record(path).phase == "third"


def _kill_once_started_then_rerun(
    root: Path, started: Path, options: tuple[str, ...] = (), lose_start: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the plan, SIGKILL pytest's process group once ``started`` exists, run it again.

    ``lose_start``: before the second run, take out of the journal the records of phases starting,
    which the controller does not sync: as if the machine had gone down before they reached
    the disk.
    """
    command = _pytest(*options)
    killed = _start(root, command)
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    # A command can write before its runner has recorded its group: a kill in that instant leaves
    # it to run on (a limit the README's Safety section states). Kill once the record holds it.
    while not _groups_recorded(root) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    if lose_start:
        _lose_records_of_starts(root)
    return _finish(root, command)


def _groups_recorded(root: Path) -> bool:
    records = (root / ".maestro" / "logs").glob("*.running")
    return any(read_running_record(path).groups for path in records)


def _lose_records_of_starts(root: Path) -> None:
    (journal,) = (root / ".maestro").glob("plan-*.journal")
    kept = [
        entry
        for entry in read_journal(journal)[0]
        if not (entry.get("op") == "record" and entry.get("status") == "in_progress")
    ]
    assert len(kept) < len(read_journal(journal)[0]), "no start was recorded"
    journal.write_text("".join(json.dumps(entry) + "\n" for entry in kept))
    # The session file is rewritten while the run lives: take the start out of it too.
    snapshot = _snapshot(root)
    doc = parse_session(snapshot.read_text(encoding="utf-8"), str(snapshot))
    for pid, state in doc.phases.items():
        if state.status is Status.IN_PROGRESS:
            doc.phases[pid] = replace(state, status=Status.PENDING, started=None, worker=None)
    snapshot.write_text(render(doc), encoding="utf-8")
    assert not any(
        p.status is Status.IN_PROGRESS for p in read_session(_snapshot(root)).phases.values()
    )


def _snapshot(root: Path) -> Path:
    (found,) = (root / ".maestro").glob("plan-*.md")
    return found


@pytest.mark.parametrize(
    ("options", "lose_start"),
    [*KILLS, pytest.param(("--maestro-fresh",), False, id="then-fresh")],
)
@pytest.mark.slow
def test_files_of_an_interrupted_phase_are_restored_from_their_pre_images(
    pytester: pytest.Pytester, options: tuple[str, ...], lose_start: bool
) -> None:
    root = pytester.path
    (root / "data.txt").write_text("original\n")
    (root / ".gitignore").write_text(".maestro/\nseen.log\nstarted\nfirst\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    (root / "data.txt").write_text("the user's edit\n")  # uncommitted: git cannot give it back
    # The phase records what it finds, then leaves its file half-written when killed: the
    # killed run's command works on a second; the next run's does not wait.
    run = [
        "cat data.txt >> seen.log",
        "echo half >> data.txt; touch started; if rm first 2>/dev/null; then sleep 1; fi",
        "echo done >> data.txt",
    ]
    write_plan(pytester, [{"id": "edit", "run": run, "files": ["data.txt"], "max_retries": 0}])
    (root / "first").touch()
    result = _kill_once_started_then_rerun(root, root / "started", options, lose_start)
    assert result.returncode == 0, result.stdout[-2000:]
    # The rerun found the file as the user left it, not as git has it nor as the killed attempt
    # left it; and the half-written content was kept, not thrown away.
    assert (root / "seen.log").read_text() == "the user's edit\nthe user's edit\n"
    assert (root / "data.txt").read_text() == "the user's edit\nhalf\ndone\n"
    [kept] = (root / ".maestro" / "replaced" / "edit").glob("*-interrupted/data.txt")
    assert kept.read_text() == "the user's edit\nhalf\n"
    assert (
        "after a killed run: phase 'edit': restored data.txt (the content it replaced is kept at"
        in (result.stdout)
    )


def _killed_mid_edit(pytester: pytest.Pytester) -> tuple[Path, list[str], Path]:
    """A run killed while its phase 'edit' has half-written data.txt: the root, the command to
    run it again, and the phase's pre-images."""
    root = pytester.path
    (root / "data.txt").write_text("the user's text\n")
    run = ["echo half >> data.txt; touch started; if rm first 2>/dev/null; then sleep 30; fi"]
    write_plan(pytester, [{"id": "edit", "run": run, "files": ["data.txt"], "max_retries": 0}])
    (root / "first").touch()
    command = _pytest("-p", "no:hypothesispytest")
    killed = _start(root, command)
    deadline = time.monotonic() + 30
    while not (root / "started").exists() or not _groups_recorded(root):
        assert time.monotonic() < deadline, "the phase never started"
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)  # its command sleeps on: the next run ends it
    killed.wait()
    (preimage,) = (root / ".maestro" / "preimages").glob("*.tar")
    return root, command, preimage


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(os.urandom(10240), id="garbage"),
        pytest.param(None, id="manifest-of-a-list"),
    ],
)
def test_pre_images_that_cannot_be_read_are_kept_and_said_not_skipped(
    pytester: pytest.Pytester, damage: bytes | None
) -> None:
    """The files of a killed phase whose pre-images are damaged stay as the kill left them, and
    the run says so, file by file, with where the damaged pre-images went: they were skipped,
    silently, and deleted."""
    root, command, preimage = _killed_mid_edit(pytester)
    if damage is None:
        with tarfile.open(preimage, "w") as tar:
            manifest = json.dumps(["data.txt"]).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
    else:
        preimage.write_bytes(damage)
    damaged = preimage.read_bytes()
    result = _finish(root, command)
    assert result.returncode == 0, result.stdout[-2000:]
    [said] = [line for line in result.stdout.splitlines() if "not put back data.txt" in line]
    assert f"its pre-images {preimage.name} cannot be read (" in said
    assert said.endswith(".tar)") and "left as it is (its content from before" in said
    (kept,) = (root / ".maestro" / "replaced" / "edit").glob("*-pre-images/edit.tar")
    assert kept.read_bytes() == damaged
    # Run again over the file as the kill left it, its half-done line and all.
    assert (root / "data.txt").read_text() == "the user's text\nhalf\nhalf\n"


def test_pre_images_the_disk_will_not_read_stop_the_run_and_stay_for_the_next(
    pytester: pytest.Pytester,
) -> None:
    """Not damage but a read that failed (here a folder in the tar's place): the run stops in
    one line, as after any restore that cannot be done, and nothing is moved or run."""
    root, command, preimage = _killed_mid_edit(pytester)
    preimage.unlink()
    preimage.mkdir()
    result = _finish(root, command)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-2000:]
    [said] = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert f"phase 'edit', left half-done by a killed run: its pre-images {preimage.name}" in said
    assert "cannot be read now:" in said and preimage.is_dir()
    assert (root / "data.txt").read_text() == "the user's text\nhalf\n"  # nothing ran


@pytest.mark.slow
def test_random_kills_keep_the_user_s_edit_and_completed_work_in_one_shared_file(
    pytester: pytest.Pytester,
) -> None:
    # Every phase of a chain appends to the file the user is editing (uncommitted), in two
    # steps, so a kill can leave half a phase's work in it. However the runs are killed, the
    # end is the user's edit, then each phase's work exactly once: restores come from the
    # pre-images (git would bring back the committed text and drop the user's edit and the
    # completed phases' work), and no completed phase runs again.
    root = git_repo(pytester.path)
    (root / ".gitignore").write_text(".maestro/\nplan.yaml\n")
    (root / "shared.txt").write_text("committed\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    (root / "shared.txt").write_text("the user's edit\n")
    rng = random.Random(11)
    phases = []
    for n in range(8):
        run = [
            f"echo p{n}-half >> shared.txt; sleep {rng.uniform(0.05, 0.3):.2f}",
            f"echo p{n} >> shared.txt",
        ]
        deps = [f"p{n - 1}"] if n else []
        phases.append({"id": f"p{n}", "run": run, "blocked_by": deps, "files": ["shared.txt"]})
    write_plan(pytester, phases)
    command = _pytest()
    for _ in range(6):
        run = _start(root, command)
        seen = (root / "shared.txt").read_text()
        deadline = time.monotonic() + 30
        while (root / "shared.txt").read_text() == seen and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        _wait_for_leftovers(root)  # the killed command's own group: it must not write later
    result = _finish(root, command)
    assert result.returncode == 0, result.stdout[-2000:]
    expected = "the user's edit\n" + "".join(f"p{n}-half\np{n}\n" for n in range(8))
    assert (root / "shared.txt").read_text() == expected
    kept = list((root / ".maestro" / "replaced").glob("*/*-interrupted/shared.txt"))
    assert kept, "no kill left a half-done phase: the test proved nothing"


# A conftest that SIGKILLs pytest once the phase named by KILL_AFTER has run,
# before its report reaches the session: the phase's work is done, the session does not have it.
KILL_AFTER_RUN = """
import os, signal, pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    if call.when == "call" and item.name == "p0" and os.path.exists("kill-now"):
        os.unlink("kill-now")
        os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize(
    "options", [(), ("--maestro-isolate=worktree",)], ids=["plain", "isolated"]
)
@pytest.mark.slow
def test_a_kill_after_a_phase_ran_before_the_session_has_it_runs_it_once_more_not_twice(
    pytester: pytest.Pytester, options: tuple[str, ...]
) -> None:
    # The phase's pre-images (isolated: those its merge-back took) must outlive its end until
    # the session has it completed: the next run puts its files back, then runs it again;
    # without them, its work lands twice.
    root = git_repo(pytester.path)
    (root / "shared.txt").write_text("the user's edit\n")
    pytester.makeconftest(KILL_AFTER_RUN)
    (root / "kill-now").touch()
    phases = [
        {"id": "p0", "run": ["echo p0 >> shared.txt"], "files": ["shared.txt"]},
        {
            "id": "p1",
            "run": ["echo p1 >> shared.txt"],
            "files": ["shared.txt"],
            "blocked_by": ["p0"],
        },
    ]
    write_plan(pytester, phases)
    command = _pytest("-p", "no:cacheprovider", *options)
    _finish(root, command)  # killed after p0 ran
    assert not (root / "kill-now").exists()
    # Meanwhile another plan in the same root, with a phase of the same id, runs to its end:
    # what it saves and drops of its phase's pre-images are not the first plan's.
    (root / "other.yaml").write_text(
        "phases: [{id: p0, run: ['echo other >> other.txt'], files: [other.txt]}]\n"
    )
    assert _finish(root, [*command[:4], "other.yaml", *command[5:]]).returncode == 0
    result = _finish(root, command)
    assert result.returncode == 0, result.stdout[-2000:]
    assert (root / "shared.txt").read_text() == "the user's edit\np0\np1\n"
    assert not list((root / ".maestro" / "preimages").iterdir())
