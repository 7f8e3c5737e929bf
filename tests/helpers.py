"""Shared helpers for black-box tests: write a native plan, run pytest on it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

# Where the test tree's shared files are, for a test module in any folder of tests/.
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAKES = TESTS / "fakes"
FIXTURES = TESTS / "fixtures"

# The keys of `--maestro-analyze=json` and of each of its phases, in order: scripts rely on them.
ANALYSIS_KEYS = [
    "plan",
    "format",
    "phases",
    "waves",
    "chunks",
    "critical_path",
    "profile",
    "warnings",
]
ANALYSIS_PHASE_KEYS = [
    "id",
    "name",
    "agent",
    "blocked_by",
    "files",
    "reads",
    "acceptance",
    "run",
    "line",
]


def write_plan(pytester: pytest.Pytester, phases: list[dict[str, Any]], **top: Any) -> Path:
    """A native YAML plan ``plan.yaml`` in the pytester directory."""
    path = pytester.path / "plan.yaml"
    path.write_text(yaml.safe_dump({**top, "phases": phases}, sort_keys=False))
    return path


def phase(pid: str, *run: str, **fields: Any) -> dict[str, Any]:
    return {"id": pid, "run": list(run), **fields}


def assert_phases(result: pytest.RunResult, *, earlier: int = 0, **outcomes: int) -> None:
    """``assert_outcomes`` for a maestro run, which also counts the phases an earlier run
    completed: the summary line says "N already completed" for them."""
    result.assert_outcomes(**outcomes)
    counts = result.parseoutcomes()  # "5 already completed" parses as {"already": 5}
    assert counts.get("already", 0) == earlier, counts


def git_repo(root: Path) -> Path:
    """``root`` made a new git repository whose commits have an author; returns it."""
    for args in (
        ["init", "-q"],
        ["config", "user.email", "t@example.com"],
        ["config", "user.name", "T"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root
