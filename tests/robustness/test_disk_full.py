"""A disk that fills up mid-run: one line, the summary still prints, the session stays consistent.

Each test runs a driver script on a real, small tmpfs mounted in a user and mount namespace of its
own (``unshare``), so the disk really fills: no write of the tool is faked. The driver prints
what it saw as JSON, since the mount ends with the namespace.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ..helpers import REPO


def _can_mount_tmpfs() -> bool:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return False
    probe = ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


pytestmark = pytest.mark.skipif(
    not _can_mount_tmpfs(), reason="needs Linux user and mount namespaces to mount a small tmpfs"
)


def on_small_disk(tmp_path: Path, driver: str, size: str = "600k") -> dict[str, Any]:
    """Run ``driver`` (Python) with its working directory on a fresh tmpfs of ``size``; return
    the JSON object it prints last."""
    mount = tmp_path / "disk"
    mount.mkdir()
    (tmp_path / "driver.py").write_text(textwrap.dedent(driver))
    shell = 'mount -t tmpfs -o size="$1" tmpfs "$2" && cd "$2" && exec "$3" "$4"'
    command = ["unshare", "-rm", "sh", "-c", shell, "sh", size, str(mount)]
    done = subprocess.run(
        [*command, sys.executable, str(tmp_path / "driver.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            "PYTHONPATH": str(REPO),
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "PYTEST_ADDOPTS": os.environ.get("PYTEST_ADDOPTS", ""),  # the lean inner runs
            # The run's bytecode cache (conftest.py), off the small disk.
            **{k: v for k, v in os.environ.items() if k == "PYTHONPYCACHEPREFIX"},
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


PLAN = """\
phases:
  - id: a
    run: ["echo a > a.txt"]
  - id: fill
    blocked_by: [a]
    run: ["head -c 3000000 /dev/zero > fill || true"]
  - id: c
    blocked_by: [fill]
    run: ["echo c > c.txt"]
  - id: d
    blocked_by: [c]
    run: ["true"]
"""

RUN_TWICE = f"""
import json, os, subprocess, sys
from pathlib import Path
from pytest_maestro.state import read_session

open("plan.yaml", "w").write({PLAN!r})
args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml", "-rA"]
args += sys.argv[1:] if len(sys.argv) > 1 else []
args += os.environ.get("EXTRA", "").split()

def statuses():
    (snapshot,) = Path(".maestro").glob("plan-*.md")
    return {{p.id: p.status.value for p in read_session(snapshot).phases.values()}}

step = os.path.join(os.environ["HOME"], "step-summary.md")  # on a disk with room
full = subprocess.run(args, capture_output=True, text=True, env={{**os.environ,
                      "GITHUB_STEP_SUMMARY": step}})
after_full = statuses()
os.unlink("fill")
freed = subprocess.run(args, capture_output=True, text=True)
print(json.dumps({{
    "full": [full.returncode, full.stdout + full.stderr], "after_full": after_full,
    "step": open(step).read() if os.path.exists(step) else None,
    "freed": [freed.returncode, freed.stdout + freed.stderr], "after_freed": statuses(),
    "c": open("c.txt").read(),
}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_disk_that_fills_mid_run_fails_the_phase_in_one_line_and_loses_nothing(
    tmp_path: Path, workers: list[str]
) -> None:
    driver = RUN_TWICE.replace('os.environ.get("EXTRA", "")', repr(" ".join(workers)))
    seen = on_small_disk(tmp_path, driver)

    code, output = seen["full"]
    assert code == 1
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    assert "FAILED plan.yaml::c - phase 'c' could not run: No space left on device" in output
    # The summary still prints, and says the snapshot lags its journal and why.
    assert "1 failed, 2 passed, 1 skipped" in output
    assert "cannot rewrite session" in output and "its journal keeps every change" in output
    # A fold the disk refused still leaves the run's outputs: the table, and what has room.
    assert "phase  status     attempts" in output
    assert re.search(r"^c +failed ", output, re.M), output
    assert re.search(r"^(summary: |could not write the summary )", output, re.M), output
    assert seen["step"] is not None and "| c | failed | - |" in seen["step"]
    # Read back, the session says what happened: the journal held what the snapshot lacked.
    assert seen["after_full"] == {
        "a": "completed",
        "fill": "completed",
        "c": "failed",
        "d": "skipped",
    }

    code, output = seen["freed"]
    assert code == 0, output
    assert "2 passed, 2 already completed" in output
    assert seen["after_freed"] == dict.fromkeys(("a", "fill", "c", "d"), "completed")
    assert seen["c"] == "c\n"


STORE = """
import json, os
from pathlib import Path
from pytest_maestro.plan.graph import PlanGraph
from pytest_maestro.plan.model import Phase, Plan
from pytest_maestro.state import SessionStore, SessionUnwritable, Status, read_session

plan = Plan(Path("plan.yaml"), "native", tuple(Phase(f"p{i}", f"p{i}") for i in range(4000)))
root = Path.cwd()
store = SessionStore.open(root / ".maestro", PlanGraph(plan), root)
store.record("p0", Status.IN_PROGRESS)  # the journal has its space ahead before the disk fills
recorded, error = ["p0"], None
with open("fill", "wb") as filler:  # the rest of the disk, bar nothing
    try:
        while True:
            filler.write(bytes(65536)); filler.flush()
    except OSError:
        pass
for phase in plan.phases[1:]:
    try:
        store.record(phase.id, Status.IN_PROGRESS)
    except SessionUnwritable as exc:
        error = str(exc)
        break
    recorded.append(phase.id)
try:
    store.record("p3999", Status.IN_PROGRESS)  # refused too, not written behind a torn line
    again = None
except SessionUnwritable as exc:
    again = str(exc)
try:
    store.close()
    closed = None
except Exception as exc:
    closed = f"{type(exc).__name__}: {exc}"
os.unlink("fill")
(snapshot,) = Path(".maestro").glob("plan-*.md")
doc = read_session(snapshot)
in_progress = [p.id for p in doc.phases.values() if p.status is Status.IN_PROGRESS]
print(json.dumps({"recorded": recorded, "error": error, "again": again, "closed": closed,
                  "in_progress": in_progress}))
"""


def test_a_journal_the_disk_cannot_take_stops_taking_changes_and_keeps_those_it_took(
    tmp_path: Path,
) -> None:
    seen = on_small_disk(tmp_path, STORE, size="4m")
    assert len(seen["recorded"]) > 1, "the disk filled before the journal's space ahead"
    assert len(seen["recorded"]) < 4000, "the journal never outgrew its space"
    assert seen["error"].startswith("cannot write session journal ")
    assert "(No space left on device)" in seen["error"]
    assert seen["again"] == seen["error"]
    assert seen["closed"].startswith("StateError: cannot rewrite session "), seen["closed"]
    # Every change the store said it took is there when the session is read again; no other.
    assert seen["in_progress"] == seen["recorded"]
