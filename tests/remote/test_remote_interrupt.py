"""Ctrl-C to the controller of a run with remote workers (``--tx popen//chdir=DIR``, each
directory standing for a host): xdist's teardown and the process-group rules end what ran
there, and the user's tree is as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..helpers import phase
from ..robustness.test_safety import gone, marked, marker  # noqa: F401 - a fixture
from .test_remote_phases import hosts, make_project, run_env, tree

pytestmark = pytest.mark.slow


def working_in(directories: list[Path]) -> list[int]:
    """Live processes whose working directory is in one of ``directories``: on those hosts."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(proc / "cwd"))
            state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except (OSError, ValueError):
            continue
        if state != "Z" and any(cwd.is_relative_to(d) for d in directories):
            found.append(int(proc.name))
    return found


def test_ctrl_c_mid_phase_ends_everything_on_the_hosts_and_leaves_the_tree_as_it_was(
    tmp_path: Path,
    marker: str,  # noqa: F811 - the fixture
) -> None:
    started = tmp_path / "started"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(600)' {marker}"
    plan = [
        phase(
            "long",
            f"echo halfway > a.txt; echo edit >> app.txt; touch {started}; {sleeper}",
            files={"create": ["a.txt"], "modify": ["app.txt"]},
        ),
        phase("after", "echo b > b.txt", files={"create": ["b.txt"]}, blocked_by=["long"]),
    ]
    root = make_project(tmp_path / "p", plan)
    before = tree(root)
    options = hosts(tmp_path / "hosts", 2)
    env = run_env()
    command = [sys.executable, "-m", "pytest", "--maestro", "plan.yaml", "-p", "no:cacheprovider"]
    run = subprocess.Popen(
        [*command, *options],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a signal to the test's own group must not reach it
    )
    deadline = time.monotonic() + 120
    while not started.exists():
        assert time.monotonic() < deadline and run.poll() is None, "the phase never started"
        time.sleep(0.05)
    assert marked(marker), "the phase's command is not running on its host"
    assert working_in([tmp_path / "hosts"]), "no worker on the hosts"
    os.kill(run.pid, signal.SIGINT)  # Ctrl-C, to the controller alone
    out, _ = run.communicate(timeout=120)
    assert run.returncode != 0, out
    assert gone(marker), "the phase's command outlived the run on its host"
    deadline = time.monotonic() + 15
    while working_in([tmp_path / "hosts"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not working_in([tmp_path / "hosts"]), "a process still runs on a host"
    assert tree(root) == before, out  # nothing of the phase came back
    assert "Traceback" not in out
