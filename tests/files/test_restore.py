"""What a restore replaces is kept, under a name no later run reuses; a failed phase ends with
its declared files as they were before it began; a restore that cannot be done as a whole
changes nothing and says so in one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_maestro.processes.leftovers import read_running_record
from pytest_maestro.state import SessionPaths

from ..helpers import git_repo, write_plan
from ..robustness.test_disk_full import _can_mount_tmpfs as can_mount_tmpfs
from ..robustness.test_disk_full import on_small_disk

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


def test_a_failed_phase_ends_with_its_files_as_before_and_its_last_output_kept_and_named(
    pytester: pytest.Pytester,
) -> None:
    root = pytester.path
    data = _user_edit(root)
    run = "echo attempt$MAESTRO_ATTEMPT >> data.txt; echo new$MAESTRO_ATTEMPT > made.txt"
    _always_fails(pytester, run, files={"modify": ["data.txt"], "create": ["made.txt"]})
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1)
    assert data.read_text() == "the user's edit\n"  # not attempt 2's output, nor git's
    assert not (root / "made.txt").exists()
    assert not list((root / ".maestro" / "preimages").glob("*"))  # dropped once files are back
    log = (root / ".maestro" / "logs" / "edit.log").read_text()
    kept = {Path(where).name: root / where for where in KEPT.findall(log.split("=== attempt 2")[1])}
    assert kept["data.txt"].read_text() == "the user's edit\nattempt2\n"
    assert kept["made.txt"].read_text() == "new2\n"
    assert "attempt-2" in kept["data.txt"].parent.name
    report = result.stdout.str()
    assert "its declared files were put back as they were before it began" in report
    assert f"kept at {kept['data.txt'].relative_to(root)}" in report


def test_a_file_the_phase_made_a_folder_keeps_the_user_s_edit_and_says_where(
    pytester: pytest.Pytester,
) -> None:
    # The pre-image is the only copy of the user's edit: it must outlive the phase even when
    # the file cannot be put back, and the report must say where it went.
    root = pytester.path
    _user_edit(root)
    _always_fails(
        pytester, "rm data.txt; mkdir data.txt; touch data.txt/inside", files=["data.txt"]
    )
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert (root / "data.txt" / "inside").exists()  # a folder is never replaced
    [line] = [line for line in out.splitlines() if "not put back data.txt" in line]
    assert "it is now a directory" in line
    where = KEPT.search(line)
    assert where is not None, line
    assert (root / where.group(1)).read_text() == "the user's edit\n"
    assert not list(root.rglob("*.maestro-restore*"))


def test_a_phase_that_links_its_folder_out_of_the_root_fails_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    root = pytester.path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "data.txt").write_text("the user's edit\n")
    move = "mv sub ../moved && ln -s ../moved sub"
    plan = root / "plan.yaml"
    plan.write_text(
        f"phases: [{{id: edit, files: [sub/data.txt], max_retries: 0, run: ['{move}']}}]\n"
    )
    result = pytester.runpytest("--maestro", str(plan), "--maestro-root", str(root))
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Traceback" not in out and "OutsideRoot" not in out, out
    assert "attempt 1: declared file 'sub/data.txt' now leads outside the project root" in out
    assert (pytester.path / "moved" / "data.txt").read_text() == "the user's edit\n"
    [kept] = (root / ".maestro" / "replaced" / "edit").glob("*-attempt-1/sub/data.txt")
    assert kept.read_text() == "the user's edit\n"


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
    assert len(named) == 4  # two restores a run: before attempt 2, after it
    assert len(set(named)) == 4
    contents = [path.read_text() for path in named]
    assert len(set(contents)) == 4, contents
    assert all(path.is_relative_to(root / ".maestro" / "replaced" / "edit") for path in named)


def test_a_replaced_folder_is_never_named_twice(tmp_path: Path) -> None:
    paths = SessionPaths(tmp_path / ".maestro", "plan-00000000")
    first = paths.replaced("p", "merge")
    first.mkdir(parents=True)
    second = paths.replaced("p", "merge")
    assert second != first and not second.exists()
    assert first.parent == second.parent == tmp_path / ".maestro" / "replaced" / "p"
    assert first.name.endswith("-merge") and re.match(r"\d{8}T\d{6}", first.name)


def _kill_once_started(root: Path) -> None:
    """Run the plan, SIGKILL pytest's process group once the phase has started and its runner
    has recorded the command's group (the next run ends that group, then restores)."""
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    records = root / ".maestro" / "logs"
    while time.monotonic() < deadline and not (
        (root / "started").exists()
        and any(read_running_record(path).groups for path in records.glob("*.running"))
    ):
        time.sleep(0.02)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()


def _made_a_folder(root: Path) -> str:
    (root / "sub" / "data.txt").unlink()
    (root / "sub" / "data.txt").mkdir()
    (root / "sub" / "data.txt" / "mine.txt").write_text("the user's new file\n")
    return "it is now a directory"


def _folder_linked_out(root: Path) -> str:
    outside = root.parent / f"{root.name}-outside"
    (root / "sub").rename(outside)
    (root / "sub").symlink_to(outside)
    (outside / "data.txt").write_text("the user's file out of the root\n")
    return "it now leads outside the project root"


@pytest.mark.slow
@pytest.mark.parametrize("change", [_made_a_folder, _folder_linked_out], ids=["folder", "link"])
def test_a_declared_file_the_user_changed_in_kind_after_a_kill_is_left_and_named(
    pytester: pytest.Pytester, change: Callable[[Path], str]
) -> None:
    root = pytester.path
    (root / "sub").mkdir()
    (root / "sub" / "data.txt").write_text("the user's edit\n")
    run = ["echo half >> sub/data.txt && touch started && sleep 30", "echo done >> sub/data.txt"]
    write_plan(pytester, [{"id": "edit", "run": run, "files": ["sub/data.txt"], "max_retries": 0}])
    _kill_once_started(root)
    (root / "started").unlink()
    why = change(root)
    new = {p: p.read_bytes() for p in (root / "sub").resolve().rglob("*") if p.is_file()}
    again = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = again.stdout + again.stderr
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    assert again.returncode == pytest.ExitCode.TESTS_FAILED, out  # the run went on
    [line] = [line for line in out.splitlines() if "not put back sub/data.txt" in line]
    assert line.startswith("after a killed run: phase 'edit': not put back sub/data.txt: ")
    assert why in line
    where = KEPT.search(line)
    assert where is not None, line
    assert (root / where.group(1)).read_text() == "the user's edit\n"  # as before the phase
    assert {p: p.read_bytes() for p in new} == new  # the user's new content, as they left it
    assert not list(root.parent.rglob("*.maestro-restore*"))


PUT_BACK_ON_A_FULL_DISK = """
import json
from pathlib import Path
from pytest_maestro.files.declared import FileSnapshot

root = Path("root")
root.mkdir()
(root / "a.txt").write_text("a now\\n")
(root / "b.txt").write_text("b now\\n")
before = FileSnapshot(root, (("a.txt", b"a before\\n"), ("b.txt", b"x" * 400_000)))
try:
    before.restore(Path("keep"))
    error = None
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({
    "error": error,
    "files": {p.name: p.read_text()[:20] for p in sorted(root.iterdir())},
}))
"""


@pytest.mark.skipif(not can_mount_tmpfs(), reason="needs Linux user and mount namespaces")
def test_a_restore_the_disk_cannot_finish_changes_nothing(tmp_path: Path) -> None:
    # The second file's content does not fit: the first must not have been put back alone,
    # and no staged file may be left beside them.
    seen = on_small_disk(tmp_path, PUT_BACK_ON_A_FULL_DISK, size="200k")
    assert seen["files"] == {"a.txt": "a now\n", "b.txt": "b now\n"}
    assert seen["error"].startswith("RestoreError: cannot put back b.txt: No space left on device")


RETRY_ON_A_FULL_DISK = """
import json, subprocess, sys, tarfile
from pathlib import Path

Path("data.txt").write_text("the user's edit\\n")
Path("plan.yaml").write_text('''
phases:
  - id: edit
    files: [data.txt]
    run: ["head -c 200000 /dev/urandom > data.txt; head -c 9000000 /dev/zero > fill; true"]
    acceptance: [{criterion: never passes, check: "false"}]
    max_retries: 1
''')
done = subprocess.run(
    [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml"],
    capture_output=True, text=True,
)
kept = sorted(Path(".maestro/replaced/edit").glob("*-pre-images/edit.tar"))
before = None
if kept:
    with tarfile.open(kept[0]) as tar:
        before = tar.extractfile("files/0").read().decode()
print(json.dumps({
    "code": done.returncode, "out": done.stdout + done.stderr,
    "data": Path("data.txt").stat().st_size, "before": before,
    "staged": [str(p) for p in Path(".").rglob("*.maestro-restore*")],
}))
"""


@pytest.mark.skipif(not can_mount_tmpfs(), reason="needs Linux user and mount namespaces")
def test_a_retry_the_disk_cannot_restore_for_ends_the_phase_and_keeps_its_pre_images(
    tmp_path: Path,
) -> None:
    # No second attempt on half-done files, nothing half put back, and the pre-images (the only
    # copy of the user's edit) moved where no later run overwrites them, and named.
    seen = on_small_disk(tmp_path, RETRY_ON_A_FULL_DISK, size="1m")
    out = seen["out"]
    assert seen["code"] == 1 and "Traceback" not in out and "INTERNALERROR" not in out, out
    assert "failed after 1 attempt" in out
    assert "its declared files were not put back: cannot " in out
    assert "No space left on device" in out
    assert seen["data"] == 200000  # as the attempt left it: not half put back
    assert seen["before"] == "the user's edit\n"
    assert re.search(r"are in \.maestro/replaced/edit/\S+-pre-images/edit\.tar", out), out
    assert seen["staged"] == []


@pytest.mark.slow
def test_a_killed_run_s_restore_that_cannot_be_done_stops_the_next_run_and_is_done_later(
    pytester: pytest.Pytester,
) -> None:
    root = pytester.path
    (root / "sub").mkdir()
    (root / "sub" / "data.txt").write_text("the user's edit\n")
    run = [
        "echo half >> sub/data.txt && touch started && if rm first; then sleep 30; fi",
        "echo done >> sub/data.txt",
    ]
    write_plan(pytester, [{"id": "edit", "run": run, "files": ["sub/data.txt"], "max_retries": 0}])
    (root / "first").touch()  # the killed run's attempt waits to be killed; the last one not
    _kill_once_started(root)
    (root / "started").unlink()
    blocker = root / ".maestro" / "replaced" / "edit"  # where it must keep what it replaces
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a folder\n")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml"]
    stopped = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)
    out = stopped.stdout + stopped.stderr
    assert stopped.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    assert "phase 'edit', left half-done by a killed run: cannot put back sub/data.txt" in out
    assert (root / "sub" / "data.txt").read_text() == "the user's edit\nhalf\n"  # untouched
    assert not list(root.rglob("*.maestro-restore*"))
    blocker.unlink()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / "sub" / "data.txt").read_text() == "the user's edit\nhalf\ndone\n"
    assert "after a killed run: phase 'edit': restored sub/data.txt" in done.stdout
