"""What a restore replaces is kept, under a name no later run reuses; a failed phase ends with
its declared files as they were before it began; a restore that cannot be done as a whole
changes nothing and says so in one line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from pytest_maestro.runner import replaced_dir

from .helpers import git_repo, write_plan

KEPT = re.compile(r"kept at (\S+?)\)?$", re.M)


def _user_edit(root: Path, name: str = "data.txt") -> Path:
    """A committed file that holds the user's uncommitted edit: git cannot give it back."""
    git_repo(root)
    (root / ".gitignore").write_text(".maestro/\n")
    (root / name).write_text("committed\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, capture_output=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True, capture_output=True)
    (root / name).write_text("the user's edit\n")
    return root / name


def _always_fails(pytester: pytest.Pytester, run: str, **fields: object) -> None:
    check = {"criterion": "never passes", "check": "false"}
    phase = {"id": "edit", "run": [run], "acceptance": [check], "max_retries": 1, **fields}
    write_plan(pytester, [phase])


def test_no_run_overwrites_what_an_earlier_run_kept(pytester: pytest.Pytester) -> None:
    # Each attempt writes something unique; every restore keeps what it replaces. After two runs
    # of the failing phase, everything any restore kept is still there, each in its own place.
    root = pytester.path
    _user_edit(root)
    _always_fails(pytester, "date +%s%N >> data.txt", files=["data.txt"])
    named: list[Path] = []
    for _ in range(2):
        pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(failed=1)
        log = (root / ".maestro" / "logs" / "edit.log").read_text()
        named += [root / where for where in KEPT.findall(log)]
    assert len(named) == 2  # a restore a run, before attempt 2
    assert len(set(named)) == 2
    contents = [path.read_text() for path in named]
    assert len(set(contents)) == 2, contents
    assert all(path.is_relative_to(root / ".maestro" / "replaced" / "edit") for path in named)


def test_replaced_dir_never_names_one_place_twice(tmp_path: Path) -> None:
    logs = tmp_path / ".maestro" / "logs"
    first = replaced_dir(logs, "p", "merge")
    first.mkdir(parents=True)
    second = replaced_dir(logs, "p", "merge")
    assert second != first and not second.exists()
    assert first.parent == second.parent == tmp_path / ".maestro" / "replaced" / "p"
    assert first.name.endswith("-merge") and re.match(r"\d{8}T\d{6}", first.name)
