"""Running plans sequentially: collection, order, checks, timeouts, retries, skips (black box)."""

from __future__ import annotations

import os
import time

import pytest
from pytest import LineMatcher

from pytest_maestro.processes.leftovers import read_running_record
from pytest_maestro.state import read_session
from pytest_maestro.state.journal import read_journal
from pytest_maestro.state.resume import INTERRUPTED

from ..helpers import assert_phases, phase, write_plan


def test_collects_only_the_plan_with_stable_node_ids(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ordinary="def test_x(): pass")
    pytester.makeini("[pytest]\ntestpaths = .\n")
    write_plan(pytester, [phase("a", "true"), phase("b", "true", blocked_by=["a"])])
    result = pytester.runpytest("--maestro", "plan.yaml", "--co", "-q")
    result.stdout.fnmatch_lines(["plan.yaml::a", "plan.yaml::b", "2 tests collected*"])
    assert "test_ordinary" not in result.stdout.str()
    assert result.ret == 0


def test_dormant_without_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ordinary="def test_x(): pass")
    write_plan(pytester, [phase("a", "false")])
    pytester.runpytest().assert_outcomes(passed=1)


def test_markers_select_with_k_and_m(pytester: pytest.Pytester) -> None:
    (pytester.path / "agents").mkdir()
    (pytester.path / "agents" / "coder.md").write_text(
        "---\nname: coder\nruntime: shell\n---\nCode."
    )
    write_plan(
        pytester,
        [
            phase("alpha", "true", agent="coder"),
            phase("beta", "true", blocked_by=["alpha"], tags=["docs"]),
            phase("gamma", "true"),
        ],
        tags=["demo"],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "--co", "-q", "-m", "wave_1")
    result.stdout.fnmatch_lines(["plan.yaml::alpha", "plan.yaml::gamma", "2/3 tests collected*"])
    result = pytester.runpytest("--maestro", "plan.yaml", "-q", "-m", "coder", "--strict-markers")
    result.assert_outcomes(passed=1, deselected=2)
    result = pytester.runpytest("--maestro", "plan.yaml", "--co", "-q", "-m", "docs and demo")
    result.stdout.fnmatch_lines(["plan.yaml::beta", "1/3 tests collected*"])
    result = pytester.runpytest("--maestro", "plan.yaml", "--co", "-q", "-k", "not alpha")
    result.stdout.fnmatch_lines(["plan.yaml::beta", "plan.yaml::gamma", "2/3*"])


def test_runs_in_topological_order_critical_path_first(pytester: pytest.Pytester) -> None:
    log = "echo $MAESTRO_PHASE_ID >> order.txt"
    write_plan(
        pytester,
        [
            phase("short", log),
            phase("long1", log, estimate=5),
            phase("long2", log, blocked_by=["long1"], estimate=5),
            phase("join", log, blocked_by=["short", "long2"]),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "-v")
    result.assert_outcomes(passed=4)
    order = (pytester.path / "order.txt").read_text().split()
    assert order == ["long1", "long2", "short", "join"]


def test_failed_check_report_lists_each_failure(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            phase(
                "build",
                "echo built > out.txt",
                name="Build it",
                max_retries=0,
                acceptance=[
                    {"criterion": "output exists", "check": "test -f out.txt"},
                    {"criterion": "says hello", "check": "echo looking; grep -q hello out.txt"},
                    {"criterion": "exits 3", "check": "echo bad >&2; exit 3"},
                    {"criterion": "prose only, not executed"},
                ],
            )
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "phase 'build' (Build it) failed after 1 attempt",
            "attempt 1: check failed: says hello",
            "    $ echo looking; grep -q hello out.txt",
            "    exit code 1",
            "    | looking",
            "attempt 1: check failed: exits 3",
            "    $ echo bad >&2; exit 3",
            "    exit code 3",
            "    | bad",
            "log: .maestro/logs/build.log",
        ]
    )
    out = result.stdout.str()
    assert "check failed: output exists" not in out
    assert "Traceback" not in out


def test_failing_command_shows_its_output(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester, [phase("a", "echo first", "echo oops; exit 4", "echo never", max_retries=0)]
    )
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["attempt 1: command exited 4: echo oops; exit 4", "    | oops"])
    assert "never" not in (pytester.path / ".maestro" / "logs" / "a.log").read_text().split("$")[-1]


def test_missing_created_file_fails(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [phase("a", "true", files={"create": ["made.txt"]}, max_retries=0)],
    )
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["attempt 1: declared file 'made.txt' was not created"])


def test_unmodified_declared_file_fails_in_git_tree(pytester: pytest.Pytester) -> None:
    pytester.run("git", "init", "-q")
    (pytester.path / "kept.txt").write_text("same\n")
    write_plan(
        pytester,
        [
            phase("a", "true", files={"modify": ["kept.txt"]}, max_retries=0),
            phase("b", "echo more >> kept.txt", files={"modify": ["kept.txt"]}, blocked_by=["a"]),
        ],
    )
    pytester.run("git", "add", "-A")
    pytester.run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["attempt 1: declared file 'kept.txt' was not modified"])


def test_timeout_kills_the_whole_process_tree(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [phase("slow", "sleep 300 & echo $! > child.pid; sleep 300", timeout=1, max_retries=0)],
    )
    started = time.monotonic()
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert time.monotonic() - started < 60
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["attempt 1: timed out after 1s: *"])
    child = int((pytester.path / "child.pid").read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "the background child outlived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; it only waits for its parent (init here) to reap it.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_retries_with_attempt_number(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [phase("flaky", "echo $MAESTRO_ATTEMPT >> attempts.txt", "test $MAESTRO_ATTEMPT -ge 3")],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-max-retries", "2")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "attempts.txt").read_text().split() == ["1", "2", "3"]

    (pytester.path / "attempts.txt").unlink()
    args = ("--maestro", "plan.yaml", "--maestro-max-retries", "1", "--maestro-fresh")
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["phase 'flaky' (flaky) failed after 2 attempts"])
    assert (pytester.path / "attempts.txt").read_text().split() == ["1", "2"]


def test_retry_count_from_environment_and_plan(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plan(
        pytester,
        [
            phase("env", "echo x >> env.txt", "false"),
            phase("own", "echo x >> own.txt", "false", max_retries=0),
        ],
    )
    monkeypatch.setenv("MAESTRO_MAX_RETRIES", "1")
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(failed=2)
    assert len((pytester.path / "env.txt").read_text().split()) == 2
    assert len((pytester.path / "own.txt").read_text().split()) == 1


def test_failure_skips_dependents_transitively_with_reasons(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            phase("a", "false", max_retries=0),
            phase("b", "touch b.ran", blocked_by=["a"]),
            phase("c", "touch c.ran", blocked_by=["b"]),
            phase("d", "touch d.ran"),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "-rs", "--maestro-circuit-breaker=0")
    result.assert_outcomes(failed=1, skipped=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED ?1? plan.yaml:*: dependency 'a' failed",
            "SKIPPED ?1? plan.yaml:*: dependency 'b' was skipped",
        ]
    )
    assert not (pytester.path / "b.ran").exists()
    assert not (pytester.path / "c.ran").exists()
    assert (pytester.path / "d.ran").exists()


def test_deselected_dependency_skips_dependent(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true"), phase("b", "true", blocked_by=["a"])])
    result = pytester.runpytest("--maestro", "plan.yaml", "-k", "b", "-rs")
    result.assert_outcomes(skipped=1, deselected=1)
    result.stdout.fnmatch_lines(["*dependency 'a' was not selected and has not completed"])


def run_maybe_parallel(pytester: pytest.Pytester, workers: int, *args: str) -> pytest.RunResult:
    """Without -n in process; with -n in a subprocess, as xdist's workers need."""
    if not workers:
        return pytester.runpytest(*args)
    return pytester.runpytest_subprocess(*args, "-n", str(workers))


@pytest.mark.parametrize("workers", [0, 2])
def test_unknown_agent_is_a_collection_error(pytester: pytest.Pytester, workers: int) -> None:
    (pytester.path / "agents").mkdir()
    (pytester.path / "agents" / "coder.md").write_text("---\nname: coder\n---\nCode.")
    write_plan(pytester, [phase("a", "touch a.ran", agent="codr")])
    result = run_maybe_parallel(pytester, workers, "--maestro", "plan.yaml")
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.TESTS_FAILED)
    result.stdout.fnmatch_lines(
        [
            "*plan.yaml:*: phase 'a' names unknown agent 'codr'; did you mean 'coder'? "
            "available: claude, coder, codex, copilot, gemini, opencode, reviewer, shell"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "a.ran").exists()


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_phase_with_nothing_to_run_is_refused_before_running(
    pytester: pytest.Pytester, workers: int
) -> None:
    write_plan(pytester, [phase("a", "touch a.ran"), {"id": "b", "blocked_by": ["a"]}])
    result = run_maybe_parallel(pytester, workers, "--maestro", "plan.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # Under -n the refusal comes from the controller, once the workers have collected.
    lines = result.stdout.lines if workers else result.stderr.lines
    prefix = "*Exit" if workers else "ERROR"
    LineMatcher(lines).fnmatch_lines([f"{prefix}: plan.yaml:*: phase 'b' has nothing to run: *"])
    assert not (pytester.path / "a.ran").exists()
    # Deselected, it is no obstacle.
    args = ("--maestro", "plan.yaml", "--deselect", "plan.yaml::b")
    result = run_maybe_parallel(pytester, workers, *args)
    result.assert_outcomes(passed=1)
    pytester.runpytest("--maestro", "plan.yaml", "--co").assert_outcomes()
    assert pytester.runpytest("--maestro", "plan.yaml", "--maestro-analyze").ret == 0


def test_exitfirst_stops_after_first_failure(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [phase("a", "false", max_retries=0), phase("b", "touch b.ran"), phase("c", "touch c.ran")],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "-x", "--junitxml=out.xml")
    result.assert_outcomes(failed=1, skipped=2)  # every phase accounted for
    assert (pytester.path / "out.xml").read_text().count("<testcase ") == 3
    assert not (pytester.path / "b.ran").exists()
    assert not (pytester.path / "c.ran").exists()


def test_environment_of_commands(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            phase(
                "a",
                'echo "$MAESTRO_PHASE_ID|$MAESTRO_PLAN|$MAESTRO_ROOT|$MAESTRO_ATTEMPT|$PWD" >env',
            )
        ],
    )
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    root = str(pytester.path.resolve())
    assert (pytester.path / "env").read_text().strip() == (f"a|{root}/plan.yaml|{root}|1|{root}")


def test_plan_root_is_relative_to_plan_and_created(pytester: pytest.Pytester) -> None:
    (pytester.path / "plans").mkdir()
    (pytester.path / "plans" / "p.yaml").write_text(
        "root: ../work\nphases:\n  - id: a\n    run: pwd > where.txt\n"
    )
    pytester.runpytest("--maestro", "plans/p.yaml").assert_outcomes(passed=1)
    assert (pytester.path / "work" / "where.txt").read_text().strip() == str(
        (pytester.path / "work").resolve()
    )


def test_measured_durations_set_the_order_of_the_next_run(pytester: pytest.Pytester) -> None:
    log = "echo $MAESTRO_PHASE_ID >> order.txt"
    write_plan(pytester, [phase("quick", log), phase("slow", log, "sleep 0.6"), phase("mid", log)])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=3)
    assert (pytester.path / "order.txt").read_text().split() == ["quick", "slow", "mid"]
    pytester.runpytest("--maestro", "plan.yaml", "--maestro-fresh").assert_outcomes(passed=3)
    assert (pytester.path / "order.txt").read_text().split()[3] == "slow"


def test_declared_file_escaping_the_root_by_symlink_is_refused(pytester: pytest.Pytester) -> None:
    outside = pytester.path.parent / f"{pytester.path.name}-outside"
    outside.mkdir()
    (pytester.path / "link").symlink_to(outside)
    write_plan(pytester, [phase("a", "touch ran", files={"create": ["link/x.txt"]})])
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["phase 'a' (a) was blocked", "declared file 'link/x.txt' resolves outside the project*"]
    )
    assert not (pytester.path / "ran").exists()
    assert "Traceback" not in result.stdout.str()


def test_agent_timeout_bounds_its_phases(pytester: pytest.Pytester) -> None:
    # timeout_mins of the agent applies unless the phase sets its own timeout.
    (pytester.path / "agents").mkdir()
    (pytester.path / "agents" / "quick.md").write_text(
        "---\nname: quick\nruntime: shell\ntimeout_mins: 0.02\n---\nBe quick."
    )
    write_plan(
        pytester,
        [
            phase("short", "sleep 5", agent="quick", max_retries=0),
            phase("own", "sleep 1.5", agent="quick", timeout=10, max_retries=0),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-timeout=60")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["attempt 1: timed out after 1.2s: *"])


def test_runtime_no_plugin_provides_is_refused_before_running(pytester: pytest.Pytester) -> None:
    (pytester.path / "agents").mkdir()
    (pytester.path / "agents" / "coder.md").write_text("---\nname: coder\nruntime: nosuch\n---\n")
    write_plan(pytester, [phase("a", "touch a.ran"), {"id": "b", "agent": "coder"}])
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: plan.yaml:*: phase 'b' needs runtime 'nosuch' (agent 'coder'), which no "
            "installed plugin provides; available: claude, codex, command, copilot, gemini, "
            "opencode, shell"
        ]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "a.ran").exists()


# Notes, in the controller, what the journal held at each sync, and whether each phase's report
# found its record among what the last sync covered.
SYNC_WATCH = """
from pathlib import Path

from pytest_maestro.hooks.nodeids import phase_id
from pytest_maestro.state import journal
from pytest_maestro.state.journal import read_journal

SYNCED = []
ON_WORKER = False
sync_data = journal._sync_data


def sync_and_note(fd):
    sync_data(fd)
    (path,) = Path(".maestro").glob("plan-*.journal")
    SYNCED.append(read_journal(path)[0])


journal._sync_data = sync_and_note


def pytest_configure(config):
    global ON_WORKER
    ON_WORKER = hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    if ON_WORKER or report.when != "call":
        return
    phase = phase_id(report.nodeid)
    status = "completed" if report.passed else "failed"
    last = SYNCED[-1] if SYNCED else []
    synced = any(e.get("phase") == phase and e.get("status") == status for e in last)
    with open("reports.txt", "a") as out:
        out.write(f"{phase} {status} {synced}\\n")


def pytest_unconfigure(config):
    if not ON_WORKER:  # at each sync, how many outcomes the journal held
        ends = [sum(e.get("status") in ("completed", "failed") for e in got) for got in SYNCED]
        Path("syncs.txt").write_text(" ".join(map(str, ends)))
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_a_finished_phase_is_on_disk_before_its_report_and_a_start_waits_for_no_sync(
    pytester: pytest.Pytester, workers: int
) -> None:
    pytester.makeconftest(SYNC_WATCH)
    phases = [phase(f"p{n}", "true") for n in range(6)] + [phase("bad", "false", max_retries=0)]
    write_plan(pytester, phases)
    args = ["--maestro", "plan.yaml", "-p", "no:hypothesispytest"]
    result = pytester.runpytest_subprocess(*args, *(["-n", str(workers)] if workers else []))
    result.assert_outcomes(passed=6, failed=1)
    reports = (pytester.path / "reports.txt").read_text().split("\n")
    expected = [f"p{n} completed True" for n in range(6)] + ["bad failed True"]
    assert sorted(filter(None, reports)) == sorted(expected)
    # Each sync took an outcome to the disk: none was for a phase's start alone, which the
    # controller recorded without waiting for the disk (a start may ride along with an outcome).
    ends = [int(n) for n in (pytester.path / "syncs.txt").read_text().split()]
    assert [n for n in ends if n] == list(range(1, 8))


def test_a_phase_that_ended_is_not_taken_for_interrupted_by_the_next_run(
    pytester: pytest.Pytester,
) -> None:
    write_plan(pytester, [phase("ok", "true"), phase("bad", "touch bad.ran; false", max_retries=0)])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1, failed=1)
    (record,) = (pytester.path / ".maestro" / "logs").glob("*.running")
    assert read_running_record(record).phase is None  # cleared when the phase ended
    # Another process, so another record: this one is read and dropped.
    again = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-p", "no:hypothesispytest")
    assert_phases(again, failed=1, earlier=1)
    assert not record.exists()
    (snapshot,) = (pytester.path / ".maestro").glob("plan-*.md")
    errors = [e.message for p in read_session(snapshot).phases.values() for e in p.errors]
    assert INTERRUPTED not in errors


@pytest.mark.parametrize("fresh", [False, True])
def test_a_damaged_running_record_names_nothing_and_the_run_goes_on(
    pytester: pytest.Pytester, fresh: bool
) -> None:
    """A record no run of this tool wrote (ids past any pid or past the digits int() takes,
    digits that are not ASCII, a phase nested past the parser's depth) ends nothing and stops
    nothing; a folder of that name is no record and is left where it is."""
    write_plan(pytester, [phase("ok", "true")])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    (record,) = (pytester.path / ".maestro" / "logs").glob("*.running")
    stem = record.name.rsplit(".", 2)[0]
    hostile = record.with_name(f"{stem}.4242.running")
    lines = ["[" * 100_000, f"1{'0' * 40} 1 2", f"s1{'0' * 40}", "\u00b2 1 2", "3 \u00b2 1", "0"]
    lines += [f"{'1' * 5000}", f"s3 1{'0' * 5000} 2"]  # past the digits int() takes
    hostile.write_text("\n".join(lines) + "\n\0")
    folder = record.with_name(f"{stem}.4343.running")
    folder.mkdir()
    options = ["--maestro-fresh"] if fresh else []
    again = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", *options, "-p", "no:hypothesispytest"
    )
    assert_phases(again, passed=int(fresh), earlier=int(not fresh))
    assert "INTERNALERROR" not in again.stdout.str() + again.stderr.str()
    assert not hostile.exists() and folder.is_dir()


def test_a_phase_is_in_progress_in_the_session_while_its_first_command_runs(
    pytester: pytest.Pytester,
) -> None:
    """Recorded while the command runs, not before it starts (the process only waits then), but
    before it ends; a phase blocked before any command ran has its start recorded all the same."""
    outside = pytester.path.parent / f"{pytester.path.name}-outside"
    outside.mkdir()
    (pytester.path / "link").symlink_to(outside)
    write_plan(
        pytester,
        [
            phase("a", "sleep 0.5; cp .maestro/plan-*.journal seen.journal"),
            phase("b", "touch ran", files={"create": ["link/x.txt"]}),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(passed=1, failed=1)
    seen, _ = read_journal(pytester.path / "seen.journal")
    statuses = [(e["phase"], e["status"]) for e in seen if "phase" in e]
    assert statuses == [("a", "in_progress")]
    (snapshot,) = (pytester.path / ".maestro").glob("plan-*.md")
    blocked = read_session(snapshot).phases["b"]
    assert blocked.status.value == "blocked" and blocked.started is not None
