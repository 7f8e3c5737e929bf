"""A mixed pool on real xdist workers: a worker whose PATH lacks an agent CLI (the stand-in
claude of tests/fakes) says so at its start, and the scheduler gives its phases to a worker
that has it; a phase no worker can run fails in one line naming each worker and what it lacks.
Remote workers (``popen//chdir=``) and local ones (``popen``) alike."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from ..helpers import FAKES, phase
from .test_remote_phases import make_project, run, tree

pytestmark = pytest.mark.slow

AGENT = "---\nname: coder\nruntime: claude\n---\nYou are the coder of this project.\n"
PLAN = [
    *(
        phase(f"s{n}", f"sleep 1; echo s{n} > s{n}.txt", files={"create": [f"s{n}.txt"]})
        for n in range(3)
    ),
    {"id": "a1", "name": "Agent one", "description": "do it", "reads": ["R"], "agent": "coder"},
    {
        "id": "a2",
        "name": "Agent two",
        "description": "then this",
        "reads": ["R"],
        "agent": "coder",
        "blocked_by": ["s0"],
    },
]


@pytest.fixture
def fake_claude(monkeypatch: pytest.MonkeyPatch) -> str:
    """The stand-in CLIs on the controller's PATH; returns a PATH without them."""
    without = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{without}")
    return without


def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "p", PLAN)
    (root / "agents").mkdir()
    (root / "agents" / "coder.md").write_text(AGENT)
    return root


def workers(root: Path) -> dict[str, str | None]:
    summary = json.loads((root / ".maestro" / "summary.json").read_text())
    return {row["id"]: row["worker"] for row in summary["phases"]}


@pytest.mark.parametrize("kind", ["remote", "local"])
def test_a_worker_without_the_cli_gets_none_of_its_phases(
    tmp_path: Path, fake_claude: str, kind: str
) -> None:
    root = project(tmp_path)
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    away = {"remote": f"//chdir={tmp_path / 'A'}", "local": ""}[kind]
    lacking = {"remote": f"//chdir={tmp_path / 'B'}", "local": ""}[kind]
    result = run(
        root,
        "-d",
        "--tx",
        f"popen{away}",
        "--tx",
        f"popen{lacking}//env:PATH={fake_claude}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    ran = workers(root)
    assert ran["a1"] == ran["a2"] == "gw0", ran
    assert "gw1" in ran.values(), ran  # it ran what it could
    assert (root / "s2.txt").read_text() == "s2\n"


def test_a_phase_no_worker_can_run_fails_in_one_line_and_nothing_of_it_runs(
    tmp_path: Path, fake_claude: str
) -> None:
    root = project(tmp_path)
    before = tree(root)
    result = run(root, "-d", "--tx", f"2*popen//env:PATH={fake_claude}")
    assert result.returncode == 1, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("phase 'a1'"))
    assert line.startswith("phase 'a1' needs claude, which no worker has: gw0 on ")
    assert "gw0 on" in line and "gw1 on" in line
    assert line.count("no claude on its PATH") == 2
    assert "Traceback" not in result.stdout + result.stderr
    assert "3 passed" in result.stdout and "2 failed" in result.stdout
    assert not list((root / ".maestro" / "logs").glob("a1.*"))  # never started anywhere
    after = tree(root)
    for n in range(3):
        assert after.pop(f"s{n}.txt")[2] == f"s{n}\n".encode()
    assert after == before


def test_an_override_keeps_a_worker_from_the_phases_of_a_runtime_it_does_not_list(
    tmp_path: Path, fake_claude: str
) -> None:
    root = project(tmp_path)
    result = run(root, "-n", "2", "--maestro-worker-runtimes", "gw1:shell")
    assert result.returncode == 0, result.stdout + result.stderr
    ran = workers(root)
    assert ran["a1"] == ran["a2"] == "gw0", ran


def test_overrides_that_leave_a_phase_to_no_worker_refuse_the_run_before_it_starts(
    tmp_path: Path, fake_claude: str
) -> None:
    root = project(tmp_path)
    result = run(root, "-n", "2", "--maestro-worker-runtimes=popen:shell")
    assert result.returncode == 4, result.stdout + result.stderr
    err = result.stdout + result.stderr
    assert "phase 'a1' needs claude, which no worker has: --maestro-worker-runtimes gives " in err
    assert "Traceback" not in err
    assert not (root / "s0.txt").exists()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("gw0=claude", "is not WORKER:RUNTIME,RUNTIME (e.g. gw0:claude,shell or ssh=me@build1"),
        ("gw7:shell", "names 'gw7', which is no worker of this run: gw0 (popen), gw1 (popen)"),
        ("gw0:clade", "gw0: no runtime 'clade'; available: claude, codex"),
    ],
)
def test_a_malformed_override_is_one_line(tmp_path: Path, value: str, says: str) -> None:
    root = project(tmp_path)
    result = run(root, "-n", "2", "--maestro-worker-runtimes", value)
    assert result.returncode == 4, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and says in errors[0], result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_a_local_worker_whose_rootdir_is_not_the_controllers_runs_nothing(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path / "p", PLAN[:3])
    # A worker started in a copy of the project (a container with the tree elsewhere): its
    # phases would change the copy, not the user's tree.
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    wrapper = tmp_path / "elsewhere.sh"
    wrapper.write_text(f'#!/bin/sh\ncd {copy} && exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    result = run(root, "-d", "--tx", "popen", "--tx", f"popen//python={wrapper}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(workers(root).values()) == {"gw0"}
    assert f"worker gw1 on {socket.gethostname()} runs no phase: its rootdir {copy} is not " in (
        result.stdout
    )
    assert not list(copy.glob("s*.txt"))
