"""A phase's log: made ahead, while the last command ran, as the running record's spare."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_maestro.processes.leftovers import RunningRecord
from pytest_maestro.processes.process import PhaseLog, run_process

from ..helpers import write_plan


def command(log: PhaseLog, script: str) -> None:
    run_process(["bash", "-c", script], cwd=log.path.parent, env={}, timeout=10, log=log.path)


def test_a_new_log_is_the_file_made_while_the_last_command_ran(tmp_path: Path) -> None:
    with RunningRecord(tmp_path / "s.1.running") as record:
        with PhaseLog.hold(tmp_path / "p1.log", record) as first:
            command(first, "echo one")
        spare = os.stat(record.spare)  # made, empty, while `echo one` ran
        assert spare.st_size == 0
        with PhaseLog.hold(tmp_path / "p2.log", record) as second:
            command(second, "echo two")
        assert os.stat(tmp_path / "p2.log").st_ino == spare.st_ino
        assert os.stat(record.spare).st_ino != spare.st_ino  # the next one's, made anew
    assert (tmp_path / "p1.log").read_text() == "one\n"
    assert (tmp_path / "p2.log").read_text() == "two\n"


def test_an_old_log_is_emptied_in_place_and_the_spare_kept(tmp_path: Path) -> None:
    old = tmp_path / "p2.log"
    old.write_text("an earlier run's output\n")
    with RunningRecord(tmp_path / "s.1.running") as record:
        with PhaseLog.hold(tmp_path / "p1.log", record) as first:
            command(first, "true")
        spare = os.stat(record.spare).st_ino
        inode = os.stat(old).st_ino
        with PhaseLog.hold(old, record) as again:
            command(again, "echo now")
        assert os.stat(old).st_ino == inode
        assert os.stat(record.spare).st_ino == spare  # still there for the next new log
    assert old.read_text() == "now\n"


def test_a_spare_an_earlier_process_of_that_number_left_is_not_taken(tmp_path: Path) -> None:
    with RunningRecord(tmp_path / "s.1.running") as record:
        record.spare.write_text("left by another process once numbered so\n")
        with PhaseLog.hold(tmp_path / "p1.log", record) as first:
            command(first, "true")
        assert not record.spare.exists()  # removed, not made: the next log is created
        with PhaseLog.hold(tmp_path / "p2.log", record) as second:
            command(second, "echo two")
    assert (tmp_path / "p2.log").read_text() == "two\n"


def test_a_run_removes_the_spares_the_last_run_left(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [{"id": f"p{n}", "run": ["true"]} for n in range(3)])
    logs = pytester.path / ".maestro" / "logs"
    for _ in range(3):
        pytester.runpytest_subprocess("--maestro", "plan.yaml", "--maestro-fresh").assert_outcomes(
            passed=3
        )
        # one per process that ran phases: the last run's, while the earlier runs' are gone
        assert len(list(logs.glob("*.spare"))) == 1
    assert sorted(p.name for p in logs.glob("*.log")) == ["p0.log", "p1.log", "p2.log"]
