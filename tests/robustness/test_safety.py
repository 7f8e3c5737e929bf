"""The user's work and money are safe: one session per plan wherever pytest starts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ..helpers import assert_phases, git_repo

PLAN = {
    "phases": [
        {"id": "a", "run": ["echo a >> ran.txt"]},
        {"id": "b", "run": ["echo b >> ran.txt"], "blocked_by": ["a"]},
    ]
}


def pytest_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "plan.yaml").write_text(yaml.safe_dump(PLAN))
    (tmp_path / "elsewhere").mkdir()
    os.symlink(root / "plan.yaml", tmp_path / "elsewhere" / "link.yaml")
    return root


def test_every_way_of_naming_the_plan_resumes_one_session(project: Path) -> None:
    first = pytest_in(project, "--maestro", "plan.yaml")
    assert first.returncode == 0, first.stdout
    elsewhere = project.parent / "elsewhere"
    for cwd, plan in [
        (project / "sub", "../plan.yaml"),
        (elsewhere, str(project / "plan.yaml")),
        (elsewhere, "link.yaml"),
        (elsewhere, f"{project}/sub/../plan.yaml"),
    ]:
        again = pytest_in(cwd, "--maestro", plan, "-rs")
        assert again.returncode == 0, again.stdout
        assert "2 phase(s) completed in an earlier run were not run again" in again.stdout
    assert (project / "ran.txt").read_text() == "a\nb\n"  # nothing ran twice
    assert len(list((project / ".maestro").glob("*.md"))) == 1
    assert not (elsewhere / ".maestro").exists() and not (project / "sub" / ".maestro").exists()


def test_one_lock_covers_every_way_of_naming_the_plan(project: Path) -> None:
    slow = {"phases": [{"id": "wait", "run": ["sleep 30"], "timeout": 60}]}
    (project / "plan.yaml").write_text(yaml.safe_dump(slow))
    holder = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--maestro", "plan.yaml"],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        info = project / ".maestro"
        deadline = time.monotonic() + 60
        while not list(info.glob("*.info")) and time.monotonic() < deadline:
            time.sleep(0.05)
        elsewhere = project.parent / "elsewhere"
        for cwd, plan in [(elsewhere, "link.yaml"), (project / "sub", "../plan.yaml")]:
            busy = pytest_in(cwd, "--maestro", plan)
            assert busy.returncode == pytest.ExitCode.USAGE_ERROR
            assert f"plan plan.yaml is already running (pid {holder.pid} since " in busy.stderr
    finally:
        os.killpg(holder.pid, 15)
        holder.wait(timeout=60)


def test_a_retry_restores_only_the_declared_files_and_keeps_what_it_replaced(
    pytester: pytest.Pytester,
) -> None:
    root = pytester.path
    (root / "data.txt").write_text("mine\n")  # the user's, before the run
    (root / "other.txt").write_text("untouched\n")
    plan = {
        "phases": [
            {
                "id": "edit",
                "run": ["echo attempt$MAESTRO_ATTEMPT >> data.txt; echo x >> other.txt"],
                "files": ["data.txt"],
                "acceptance": [{"criterion": "second try", "check": 'test "$MAESTRO_ATTEMPT" = 2'}],
            }
        ]
    }
    (root / "plan.yaml").write_text(yaml.safe_dump(plan))
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(passed=1)
    assert (root / "data.txt").read_text() == "mine\nattempt2\n"
    assert (root / "other.txt").read_text() == "untouched\nx\nx\n"  # not declared: not touched
    [kept] = (root / ".maestro" / "replaced" / "edit").glob("*-attempt-1/data.txt")
    assert kept.read_text() == "mine\nattempt1\n"
    log = (root / ".maestro" / "logs" / "edit.log").read_text()
    assert "--- restored data.txt (the content it replaced is kept at .maestro/replaced/" in log


def test_distinct_ids_never_share_a_log(pytester: pytest.Pytester) -> None:
    ids = ["a b", "a_b", "a/b", "a.b"]
    plan = {"phases": [{"id": pid, "run": [f"echo {pid!r}"]} for pid in ids]}
    (pytester.path / "plan.yaml").write_text(yaml.safe_dump(plan))
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(passed=4)
    logs = sorted((pytester.path / ".maestro" / "logs").glob("*.log"))
    assert len(logs) == 4
    assert sorted(log.read_text().splitlines()[-1] for log in logs) == sorted(ids)


# -- no process survives the run -----------------------------------------------------------------


def marked(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (zombies are gone already)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
                if state != "Z":
                    found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    """A mark for a test's long-running commands, in their command lines; whatever still
    carries it when the test ends is killed, so no failing test leaves a process behind."""
    mark = f"maestro-test-{uuid.uuid4().hex}"
    yield mark
    for pid in marked(mark):
        os.kill(pid, signal.SIGKILL)


def gone(marker: str, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not marked(marker)


def start_run(root: Path, marker: str, *options: str, trap: str = "") -> subprocess.Popen[str]:
    """pytest on a plan whose phase starts a long command marked in its command line."""
    sleeper = f"{sys.executable} -c 'import time; time.sleep(600)' {marker}"
    plan = {"phases": [{"id": "long", "run": [f"{trap}touch started; {sleeper}"]}]}
    (root / "plan.yaml").write_text(yaml.safe_dump(plan))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--maestro",
            "plan.yaml",
            *options,
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a signal to the test's own group must not reach it
    )
    deadline = time.monotonic() + 60
    while not (root / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked(marker), "the phase's command did not start"
    return process


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "options"),
    [
        pytest.param(signal.SIGTERM, (), id="sigterm"),
        pytest.param(signal.SIGHUP, (), id="sighup"),
        pytest.param(signal.SIGTERM, ("-n", "2"), id="sigterm-n2"),
    ],
)
def test_a_signal_to_pytest_ends_every_command_it_started(
    tmp_path: Path, marker: str, sig: signal.Signals, options: tuple[str, ...]
) -> None:
    run = start_run(tmp_path, marker, *options)
    os.kill(run.pid, sig)  # to pytest alone, as a cancelled job or a closed terminal does
    run.communicate(timeout=60)
    assert run.returncode != 0
    assert gone(marker), "a command outlived the run"


@pytest.mark.slow
def test_a_second_ctrl_c_still_ends_a_command_that_ignores_sigterm(
    tmp_path: Path, marker: str
) -> None:
    run = start_run(tmp_path, marker, trap="trap '' TERM; ")
    os.kill(run.pid, signal.SIGINT)
    time.sleep(0.5)  # inside the grace period that waits for SIGTERM to work
    os.kill(run.pid, signal.SIGINT)
    run.communicate(timeout=60)
    assert gone(marker), "the second Ctrl-C skipped the SIGKILL"


@pytest.mark.slow
def test_a_crashed_worker_s_commands_are_ended(tmp_path: Path, marker: str) -> None:
    run = start_run(tmp_path, marker, "-n", "2", "--maestro-max-retries=0")
    [command] = marked(marker)
    group = os.getpgid(command)
    runner = int(Path(f"/proc/{group}/stat").read_text().rsplit(")", 1)[-1].split()[1])
    os.kill(runner, signal.SIGKILL)  # the xdist worker that runs the phase
    out, _ = run.communicate(timeout=120)
    assert gone(marker), "the crashed worker's command ran on"
    assert "1 failed" in out


# -- bounded output -----------------------------------------------------------------------------

LOUD = "head -c {size} /dev/zero | tr '\\0' x; echo; echo last-line"  # one enormous line


@pytest.mark.slow
def test_300_mb_of_output_leaves_a_bounded_log_and_report_in_flat_memory(tmp_path: Path) -> None:
    size = 300 * 1024 * 1024
    plan = {
        "phases": [
            {"id": "loud", "run": [LOUD.format(size=size), "false"], "max_retries": 0},
        ]
    }
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    script = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider',"
        " '--maestro', 'plan.yaml', '--junitxml=out.xml', '--maestro-log-limit=2'],"
        " capture_output=True, text=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stdout.write(done.stdout)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    peak_kib, _, out = done.stdout.partition("\n")
    assert "1 failed" in out
    assert int(peak_kib) < 150 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB"
    log = (tmp_path / ".maestro" / "logs" / "loud.log").read_bytes()
    assert len(log) < 2 * 1024 * 1024 + 4096
    assert b"bytes cut here: this command printed" in log
    assert log.rstrip().endswith(b"last-line") or b"last-line\n" in log[-4096:]
    assert len(out) < 50_000  # the failure report: a bounded tail, not the line
    assert len((tmp_path / "out.xml").read_bytes()) < 50_000


def test_the_log_limit_bounds_each_attempt_not_each_command(pytester: pytest.Pytester) -> None:
    mib = 1024 * 1024
    loud = [LOUD.format(size=mib) for _ in range(3)]  # 3 MiB an attempt, in three commands
    plan = {"phases": [{"id": "loud", "run": [*loud, "false"], "max_retries": 1}]}
    (pytester.path / "plan.yaml").write_text(yaml.safe_dump(plan))
    pytester.runpytest("--maestro", "plan.yaml", "--maestro-log-limit=1.5").assert_outcomes(
        failed=1
    )
    log = (pytester.path / ".maestro" / "logs" / "loud.log").read_bytes()
    # Each attempt keeps 1.5 MiB, but a command that comes after the limit keeps its tail (64 KiB)
    # for the failure report.
    tail_room = 64 * 1024
    assert 2 * 1.5 * mib < len(log) < 2 * (1.5 * mib + 2 * tail_room) + 8192
    assert log.count(b"\nlast-line\n") == 6  # every command's end is kept
    assert log.count(b"bytes cut here") == 4  # in each attempt: the second and third commands


def test_a_short_log_is_left_whole_and_a_long_one_cut_in_the_middle(tmp_path: Path) -> None:
    from pytest_maestro.processes.process import cut_middle

    log = tmp_path / "p.log"
    log.write_bytes(b"header\n" + b"a" * 100 + b"b" * 1000 + b"c" * 100)
    assert cut_middle(log, 7, 1207, 2000) == 0
    assert cut_middle(log, 7, 1207, 200) == 1000
    data = log.read_bytes()
    assert data.startswith(b"header\n" + b"a" * 20)
    assert data.endswith(b"b" * 80 + b"c" * 100)
    assert b"[... 1000 bytes cut here: this command printed 1200" in data


def test_renaming_a_completed_phase_does_not_run_it_again(pytester: pytest.Pytester) -> None:
    plan = {"phases": [{"id": "a", "name": "First name", "run": ["echo ran >> ran.txt"]}]}
    (pytester.path / "plan.yaml").write_text(yaml.safe_dump(plan))
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    plan["phases"][0]["name"] = "A better name"
    (pytester.path / "plan.yaml").write_text(yaml.safe_dump(plan))
    assert_phases(pytester.runpytest("--maestro", "plan.yaml"), earlier=1)
    assert (pytester.path / "ran.txt").read_text() == "ran\n"


def test_a_phase_s_background_job_ends_with_the_phase(
    pytester: pytest.Pytester, marker: str
) -> None:
    sleeper = f"{sys.executable} -c 'import time; time.sleep(600)' {marker}"
    plan = {"phases": [{"id": "bg", "run": [f"{sleeper} & echo started"]}]}
    (pytester.path / "plan.yaml").write_text(yaml.safe_dump(plan))
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    assert gone(marker, within=5), "the phase's background job outlived it"


@pytest.mark.parametrize(
    ("state_dir", "error"),
    [
        (".", "ERROR: state dir '.' is the project root: name a directory in it"),
        (
            "docs",
            "ERROR: state dir */docs already holds files this tool did not write (notes.md): *",
        ),
    ],
)
def test_the_state_dir_is_a_directory_of_its_own(
    pytester: pytest.Pytester, state_dir: str, error: str
) -> None:
    (pytester.path / "docs").mkdir()
    (pytester.path / "docs" / "notes.md").write_text("the user's\n")
    (pytester.path / "plan.yaml").write_text(
        yaml.safe_dump({"phases": [{"id": "a", "run": ["true"]}]})
    )
    result = pytester.runpytest("--maestro", "plan.yaml", f"--maestro-state-dir={state_dir}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([error])
    assert sorted(p.name for p in (pytester.path / "docs").iterdir()) == ["notes.md"]
    # Its own directory, used before, is fine.
    again = pytester.runpytest("--maestro", "plan.yaml", "--maestro-state-dir=.state")
    again.assert_outcomes(passed=1)
    assert_phases(
        pytester.runpytest("--maestro", "plan.yaml", "--maestro-state-dir=.state"), earlier=1
    )


def test_a_state_dir_named_with_a_control_character_is_refused(pytester: pytest.Pytester) -> None:
    (pytester.path / "plan.yaml").write_text(
        yaml.safe_dump({"phases": [{"id": "a", "run": ["true"]}]})
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-state-dir=a\nb")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line] == [
        "ERROR: state dir 'a\\nb' holds a control character: name it plainly"
    ]
    assert sorted(p.name for p in pytester.path.iterdir()) == ["plan.yaml"]


@pytest.mark.parametrize(
    "link",
    ["plan-*.journal", "plan-*.spend", "logs/a.log", "logs"],
)
def test_a_link_in_the_state_dir_is_refused_not_written_through(
    pytester: pytest.Pytester, link: str
) -> None:
    """A journal, ledger or log made a link to a file of the user's had the run write through
    it: the journal's fold emptied the file, a log replaced it. Now the run refuses before it
    writes anything, the file and the link as they were."""
    (pytester.path / "plan.yaml").write_text(
        yaml.safe_dump({"phases": [{"id": "a", "run": ["echo ran"]}]})
    )
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    state = pytester.path / ".maestro"
    (mine := pytester.path / "mine").mkdir()
    precious = mine / "precious.txt"
    precious.write_text("the user's line\n")
    if "*" in link:
        (path,) = state.glob(link)
        path.unlink()
    else:
        path = state / link
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    path.symlink_to(mine if link == "logs" else precious)
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-fresh")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    shown = path.relative_to(state).as_posix()
    result.stderr.fnmatch_lines(
        [f"ERROR: state dir * holds symbolic links this tool did not make ({shown}): *"]
    )
    assert precious.read_text() == "the user's line\n" and path.is_symlink()
    assert sorted(p.name for p in mine.iterdir()) == ["precious.txt"]


@pytest.mark.parametrize("kind", ["symbolic", "hard"])
def test_a_link_at_the_pre_images_temporary_name_is_never_written_through(
    pytester: pytest.Pytester, kind: str
) -> None:
    """The pre-images are written to a temporary name beside their own: a link planted there had
    the run write its tar over the file it leads to. A symbolic one is refused at the start; a
    hard one (no check sees it) is replaced, not written through."""
    (pytester.path / "data.txt").write_text("mine\n")
    phase = {"id": "a", "run": ["echo ran >> data.txt"], "files": ["data.txt"]}
    (pytester.path / "plan.yaml").write_text(yaml.safe_dump({"phases": [phase]}))
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    state = pytester.path / ".maestro"
    (session,) = state.glob("plan-*.md")
    precious = pytester.path / "precious.txt"
    precious.write_text("the user's line\n")
    link = state / "preimages" / f"{session.stem}.a.tar.tmp"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(precious) if kind == "symbolic" else os.link(precious, link)
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-fresh")
    if kind == "symbolic":
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [f"ERROR: state dir * holds symbolic links * (preimages/{link.name}*"]
        )
    else:
        result.assert_outcomes(passed=1)
    assert precious.read_text() == "the user's line\n"


@pytest.mark.parametrize("link", ["worktrees/{session}", "worktrees/{session}.branches.json"])
def test_a_link_among_the_worktrees_is_refused_not_followed(
    pytester: pytest.Pytester, link: str
) -> None:
    """An isolated run cleared its session's worktree folder, link or not: a link there to a
    folder of the user's had its folders deleted, and one at its branches file had that
    overwritten."""
    root = git_repo(pytester.path)
    (root / "plan.yaml").write_text(yaml.safe_dump({"phases": [{"id": "a", "run": ["true"]}]}))
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "plan"], cwd=root, check=True)
    isolate = "--maestro-isolate=worktree"
    pytester.runpytest("--maestro", "plan.yaml", isolate).assert_outcomes(passed=1)
    state = root / ".maestro"
    (session,) = state.glob("plan-*.md")
    mine = root.parent / f"{root.name}-mine"
    (mine / "work").mkdir(parents=True)
    (mine / "work" / "notes.txt").write_text("the user's line\n")
    path = state / link.format(session=session.stem)
    path.parent.mkdir(exist_ok=True)
    shutil.rmtree(path, ignore_errors=True)
    path.unlink(missing_ok=True)
    path.symlink_to(mine if path.suffix != ".json" else mine / "work" / "notes.txt")
    result = pytester.runpytest("--maestro", "plan.yaml", isolate, "--maestro-fresh")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    shown = path.relative_to(state).as_posix()
    result.stderr.fnmatch_lines([f"ERROR: state dir * holds symbolic links * ({shown}): *"])
    assert (mine / "work" / "notes.txt").read_text() == "the user's line\n"


def test_a_process_that_leaves_its_group_is_found_and_ended(
    pytester: pytest.Pytester, marker: str
) -> None:
    pytester.makeconftest(
        f"""
        import subprocess, sys
        from pytest_maestro.processes.process import run_process
        from pytest_maestro.runtimes import AgentResult

        class Daemonising:
            name = "daemonising"
            autonomy = ""

            def run(self, request):
                daemon = "open('ready', 'w').close(); import time; time.sleep(600)"
                command = (  # returns once the daemon is out of the group, in its own session
                    "setsid " + sys.executable + ' -c "' + daemon + '" {marker} &'
                    " while [ ! -e ready ]; do sleep 0.02; done"
                )
                run_process(["bash", "-c", command], cwd=request.root, env=request.env,
                            timeout=30, log=request.log)
                return AgentResult("completed", "COMPLETED: started a daemon")

        def pytest_maestro_runtimes(config):
            return [Daemonising()]
        """
    )
    (pytester.path / "plan.yaml").write_text(
        yaml.safe_dump({"phases": [{"id": "d", "name": "Daemon", "description": "x"}]})
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=daemonising")
    result.assert_outcomes(passed=1)
    assert gone(marker, within=5), "a setsid escape outlived its phase"
    log = (pytester.path / ".maestro" / "logs" / "d.log").read_text()
    assert "--- ended 1 process(es) the command left running" in log


def test_a_logs_dir_that_cannot_be_used_is_one_line_not_a_traceback(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "plan.yaml").write_text(
        yaml.safe_dump({"phases": [{"id": "a", "run": ["true"]}]})
    )
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    logs = pytester.path / ".maestro" / "logs"
    (logs / "a.log").unlink()
    (logs / "a.log").mkdir()  # the phase's log cannot be opened
    failed = pytester.runpytest("--maestro", "plan.yaml", "--maestro-fresh")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*phase 'a' could not run: Is a directory: *a.log"])
    assert "Traceback" not in failed.stdout.str()
    shutil.rmtree(logs)
    logs.write_text("not a directory\n")
    refused = pytester.runpytest("--maestro", "plan.yaml")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: cannot use */logs for the phases' logs: *"])


@pytest.mark.parametrize("folder", ["preimages", "replaced", "worktrees", "kept", "archive"])
def test_a_file_where_a_state_folder_belongs_is_one_line_at_the_start(
    pytester: pytest.Pytester, folder: str
) -> None:
    """It failed the first phase that needed the folder ("File exists"), or worse, later."""
    (pytester.path / "data.txt").write_text("mine\n")
    phase = {"id": "a", "run": ["echo ran >> data.txt"], "files": ["data.txt"]}
    (pytester.path / "plan.yaml").write_text(yaml.safe_dump({"phases": [phase]}))
    (pytester.path / ".maestro").mkdir()
    (pytester.path / ".maestro" / folder).write_text("not a directory\n")
    refused = pytester.runpytest("--maestro", "plan.yaml")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: cannot use */{folder}: it is not a directory; *"])
    assert (pytester.path / "data.txt").read_text() == "mine\n"
    moved = pytester.runpytest("--maestro", "plan.yaml", "--maestro-fresh")
    moved.assert_outcomes(passed=1)
