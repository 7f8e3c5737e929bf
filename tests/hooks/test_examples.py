"""The quickstart as a new user runs it: in a git checkout, under -n 4, leaving it clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..helpers import REPO, assert_phases


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def run_pytest(cwd: Path, *args: str) -> pytest.RunResult:
    """pytest in a subprocess in ``cwd``; pytester's own runs leave files in the checkout."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args], cwd=cwd, capture_output=True, text=True
    )
    lines = done.stdout.splitlines(), done.stderr.splitlines()
    return pytest.RunResult(done.returncode, *lines, time.monotonic() - start)


@pytest.mark.slow
def test_quickstart_runs_every_phase_and_leaves_the_checkout_clean(
    pytester: pytest.Pytester,
) -> None:
    checkout = pytester.path / "checkout"
    for part in ("example_plans", "agents"):
        shutil.copytree(REPO / part, checkout / part)
    shutil.copy(REPO / ".gitignore", checkout / ".gitignore")
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")

    plan = "example_plans/quickstart.yaml"
    result = run_pytest(checkout, "--maestro", plan, "-n", "4")
    result.assert_outcomes(passed=8)
    assert git(checkout, "status", "--porcelain") == ""
    work = checkout / "scratch" / "quickstart"
    assert "3 the" in (work / "report.md").read_text()

    # A changed phase runs again with what depends on it, and the plan still passes.
    path = checkout / plan
    path.write_text(path.read_text().replace("Added the wordstats", "Added the new wordstats"))
    result = run_pytest(checkout, "--maestro", plan, "-n", "4", "-rA")
    assert_phases(result, passed=3, earlier=5)
    result.stdout.fnmatch_lines_random(["PASSED*::cli", "PASSED*::run-tests", "PASSED*::report"])
