"""Session state through pytest: resume, --lf, --maestro-fresh, the breaker, a busy plan."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_maestro.state import Status, read_session

from ..helpers import assert_phases, phase, write_plan


def _session(root: Path) -> Path:
    (found,) = (root / ".maestro").glob("plan-*.md")
    return found


def _runs(root: Path, pid: str) -> int:
    marker = root / f"{pid}.ran"
    return len(marker.read_text().split()) if marker.exists() else 0


def ran(pid: str, *more: str, **fields: object) -> dict[str, object]:
    """A phase that counts its runs in ``<id>.ran``."""
    return phase(pid, f"echo x >> {pid}.ran", *more, **fields)


DIAMOND = [
    ran("a"),
    ran("b", "test -f fixed", blocked_by=["a"], max_retries=0),
    ran("c", blocked_by=["a"]),
    ran("d", blocked_by=["b", "c"]),
]


def test_resume_skips_completed_and_reruns_failed(pytester: pytest.Pytester) -> None:
    write_plan(pytester, DIAMOND)
    args = ("--maestro", "plan.yaml", "--maestro-circuit-breaker=0", "-rs")
    pytester.runpytest(*args).assert_outcomes(passed=2, failed=1, skipped=1)
    doc = read_session(_session(pytester.path))
    assert {p.id: p.status.value for p in doc.phases.values()} == {
        "a": "completed",
        "b": "failed",
        "c": "completed",
        "d": "skipped",
    }
    (pytester.path / "fixed").touch()
    result = pytester.runpytest(*args, "-v")
    assert_phases(result, passed=2, earlier=2)
    result.stdout.fnmatch_lines_random(["*::a ALREADY COMPLETED*", "*::c ALREADY COMPLETED*"])
    result.stdout.fnmatch_lines(["maestro: 2 phase(s) completed in an earlier run were not run *"])
    assert [_runs(pytester.path, p) for p in "abcd"] == [1, 2, 1, 1]
    assert read_session(_session(pytester.path)).status == "completed"


def test_lf_reruns_the_failure_and_what_it_blocked_only(pytester: pytest.Pytester) -> None:
    write_plan(pytester, DIAMOND)
    args = ("--maestro", "plan.yaml", "--maestro-circuit-breaker=0")
    pytester.runpytest(*args).assert_outcomes(passed=2, failed=1, skipped=1)
    (pytester.path / "fixed").touch()
    result = pytester.runpytest(*args, "--lf", "-v")
    result.assert_outcomes(passed=2, deselected=2)
    result.stdout.fnmatch_lines(["plan.yaml::b PASSED*", "plan.yaml::d PASSED*"])
    assert [_runs(pytester.path, p) for p in "abcd"] == [1, 2, 1, 1]


@pytest.mark.slow
def test_lf_under_xdist_keeps_skipped_phases_for_the_rerun(pytester: pytest.Pytester) -> None:
    write_plan(pytester, DIAMOND)
    args = ("--maestro", "plan.yaml", "--maestro-circuit-breaker=0", "-n", "2")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2, failed=1, skipped=1)
    (pytester.path / "fixed").touch()
    # xdist does not report deselected counts; the runs below say what ran.
    pytester.runpytest_subprocess(*args, "--lf").assert_outcomes(passed=2)
    assert [_runs(pytester.path, p) for p in "abcd"] == [1, 2, 1, 1]


def test_changed_phase_and_its_dependents_rerun(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester, [ran("a"), ran("b", blocked_by=["a"]), ran("c"), ran("d", blocked_by=["b"])]
    )
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=4)
    write_plan(
        pytester,
        [ran("a"), ran("b", "true", blocked_by=["a"]), ran("c"), ran("d", blocked_by=["b"])],
    )
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert_phases(result, passed=2, earlier=2)
    assert [_runs(pytester.path, p) for p in "abcd"] == [1, 2, 1, 2]


def test_fresh_archives_the_session_and_runs_everything(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [ran("a"), ran("b", blocked_by=["a"])])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=2)
    old = _session(pytester.path).read_text()
    pytester.runpytest("--maestro", "plan.yaml", "--maestro-fresh").assert_outcomes(passed=2)
    assert [_runs(pytester.path, p) for p in "ab"] == [2, 2]
    archived = list((pytester.path / ".maestro" / "archive").glob("plan-*.md"))
    assert len(archived) == 1 and archived[0].read_text() == old


def test_circuit_breaker_stops_and_is_recorded(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            ran("root", "false", max_retries=0),
            ran("x", blocked_by=["root"]),
            ran("y", blocked_by=["x"]),
            ran("z", blocked_by=["root"]),
            ran("free"),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "-rs")
    # The doomed phases are reported skipped; the one that could have run is not started, and
    # is reported skipped too, as not run because the run stopped.
    result.assert_outcomes(failed=1, skipped=4)
    result.stdout.fnmatch_lines(
        [
            "*dependency 'root' failed",
            "*not run: the run stopped (circuit breaker: 3 of 4 pending phases*",
            "*circuit breaker: 3 of 4 pending phases cannot run after 'root' failed*",
        ]
    )
    assert _runs(pytester.path, "free") == 0
    doc = read_session(_session(pytester.path))
    assert doc.status == "stopped"
    assert doc.stop_reason is not None and "'root' failed" in doc.stop_reason
    assert {p.id for p in doc.phases.values() if p.status == Status.SKIPPED} == {"x", "y", "z"}
    assert doc.phases["free"].status == Status.PENDING  # not run, not decided
    # --lf reruns the failure and what it doomed, not the phase the breaker spared.
    result = pytester.runpytest("--maestro", "plan.yaml", "--lf", "--co", "-q")
    result.stdout.fnmatch_lines(["plan.yaml::root", "plan.yaml::x", "plan.yaml::y", "*::z"])
    assert "plan.yaml::free" not in result.stdout.str()
    # Below the threshold the session goes on.
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-circuit-breaker=0.9")
    result.assert_outcomes(failed=1, skipped=3, passed=1)


def test_circuit_breaker_stops_parallel_runs_too(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            ran("root", "false", max_retries=0),
            ran("x", blocked_by=["root"]),
            ran("y", blocked_by=["root"]),
            ran("z", blocked_by=["root"]),
            ran("late", "sleep 1", blocked_by=["slow"]),
            ran("slow", "sleep 1"),
        ],
    )
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "2")
    result.stdout.fnmatch_lines(["*circuit breaker: 3 of * pending phases cannot run*"])
    assert _runs(pytester.path, "late") == 0
    assert read_session(_session(pytester.path)).status == "stopped"


@pytest.mark.parametrize(
    ("phases", "why"),
    [
        ([ran("root", "false", max_retries=0), ran("x", blocked_by=["root"]), ran("free")], "3"),
        (
            [
                ran("p1"),
                ran("p2", blocked_by=["p1"]),
                ran("p3", blocked_by=["p2"]),
                ran("root", "false", max_retries=0, blocked_by=["p3"]),
                ran("x", blocked_by=["root"]),
            ],
            "all doomed",
        ),
    ],
)
def test_circuit_breaker_stays_closed(
    pytester: pytest.Pytester, phases: list[dict[str, object]], why: str
) -> None:
    # Three phases or fewer never trip it; nor does a failure that leaves nothing runnable to
    # spare (stopping would only hide the skipped phases).
    write_plan(pytester, phases)
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "circuit breaker" not in result.stdout.str()
    assert read_session(_session(pytester.path)).status != "stopped"


def test_second_run_of_a_running_plan_fails_at_once(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("slow", "touch started; sleep 30")])
    first = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--maestro", "plan.yaml", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (pytester.path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        result = pytester.runpytest_subprocess("--maestro", "plan.yaml")
        assert time.monotonic() - started < 15
        assert first.poll() is None, "the second run waited for the first one to end"
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [f"ERROR: plan plan.yaml is already running (pid {first.pid} since *)"]
        )
    finally:
        first.kill()
        first.wait()
    # The killed run's lock does not block the next one; its phase is reset and runs again.
    write_plan(pytester, [phase("slow", "true")])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)


def test_state_dir_outside_the_root_is_refused(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true")])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-state-dir", "../elsewhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: state dir '../elsewhere' resolves to *, outside the *"])
    assert not (pytester.path.parent / "elsewhere").exists()


def test_stepwise_resumes_at_the_failed_phase(pytester: pytest.Pytester) -> None:
    write_plan(pytester, DIAMOND)
    result = pytester.runpytest("--maestro", "plan.yaml", "--sw", "-v")
    # a, then b fails and stepwise stops; so does the breaker (d of c, d is doomed), which
    # reports d skipped; c, not run, is reported skipped as the stop's
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    result.stdout.fnmatch_lines(["plan.yaml::c SKIPPED (not run: the run stopped*"])
    (pytester.path / "fixed").touch()
    result = pytester.runpytest("--maestro", "plan.yaml", "--sw", "-v")
    result.assert_outcomes(passed=3, deselected=1)
    result.stdout.fnmatch_lines(
        ["plan.yaml::b PASSED*", "plan.yaml::c PASSED*", "plan.yaml::d PASSED*"]
    )
    assert [_runs(pytester.path, p) for p in "abcd"] == [1, 2, 1, 1]


def test_failed_first_keeps_dependency_order(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester, [ran("a"), ran("b", "test -f fixed", max_retries=0), ran("c", blocked_by=["a"])]
    )
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=2, failed=1)
    (pytester.path / "fixed").touch()
    result = pytester.runpytest("--maestro", "plan.yaml", "--ff", "--maestro-fresh", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["plan.yaml::b PASSED*", "plan.yaml::a PASSED*", "plan.yaml::c PASSED*"]
    )


def test_completed_phase_records_its_declared_files(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            phase(
                "make",
                "echo new > new.txt; echo more >> old.txt; rm gone.txt",
                files={"create": ["new.txt"], "modify": ["old.txt"], "delete": ["gone.txt"]},
            ),
            phase("broken", "false", files=["old.txt"], max_retries=0),
        ],
    )
    (pytester.path / "old.txt").write_text("old\n")
    (pytester.path / "gone.txt").write_text("bye\n")
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1, failed=1)
    doc = read_session(_session(pytester.path))
    made = doc.phases["make"]
    assert (made.files_created, made.files_modified, made.files_deleted) == (
        ("new.txt",),
        ("old.txt",),
        ("gone.txt",),
    )
    assert doc.phases["broken"].files_modified == ()  # a failed phase claims nothing


def test_a_plan_reached_through_a_link_in_another_folder_has_one_root_and_one_session(
    pytester: pytest.Pytester,
) -> None:
    """``root:`` is relative to the plan's real path, as the session key is: a link to the plan
    from another folder names the same root, so the same session, and writes nothing beside
    the link."""
    plans = pytester.path / "project" / "plans"
    plans.mkdir(parents=True)
    plan = plans / "plan.yaml"
    plan.write_text(
        "root: ..\nphases:\n  - id: a\n    files: [a.txt]\n    run: [echo x >> a.txt]\n"
    )
    (pytester.path / "other").mkdir()
    link = pytester.path / "other" / "plan.yaml"
    link.symlink_to(plan)
    pytester.runpytest("--maestro", str(link)).assert_outcomes(passed=1)
    assert (pytester.path / "project" / "a.txt").read_text() == "x\n"
    assert not (pytester.path / "a.txt").exists()
    assert not (pytester.path / ".maestro").exists()
    # the plan by its real path: the same session, its phase already completed
    assert_phases(pytester.runpytest("--maestro", str(plan)), earlier=1)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_an_error_in_a_phases_teardown_keeps_its_completed_work(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """A plugin's teardown hook that raises after a phase completed is pytest's error to report:
    the phase's paid work stays completed in the session (no internal error, no traceback), and
    what it blocks runs, as pytest runs the next test after another's teardown error."""
    write_plan(pytester, [ran("a"), ran("b", blocked_by=["a"])])
    pytester.makeconftest(
        """
        import pytest

        @pytest.hookimpl(trylast=True)  # after pytest's own teardown
        def pytest_runtest_teardown(item, nextitem):
            if item.name == "a":
                raise RuntimeError("the teardown hook broke")
        """
    )
    result = pytester.runpytest("--maestro", "plan.yaml", *workers)
    result.assert_outcomes(passed=2, errors=1)
    assert "INTERNALERROR" not in result.stdout.str()
    doc = read_session(_session(pytester.path))
    assert [doc.phases[p].status for p in "ab"] == [Status.COMPLETED, Status.COMPLETED]
    assert [_runs(pytester.path, p) for p in "ab"] == [1, 1]


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["alone", "xdist"])
def test_what_start_up_made_is_out_of_the_collectors_sight_while_phases_run(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """Frozen (``gc.freeze``) from the start of collection, the items too from the start of
    the run loop, until pytest has done with the config, on an xdist worker too: the
    collections that collecting and running the phases set off do not walk start-up's objects
    again."""
    pytester.makeconftest(
        """
        import gc
        from pathlib import Path

        def pytest_collection_modifyitems(items):
            Path("collecting.txt").write_text(str(gc.get_freeze_count()))

        def pytest_runtest_setup(item):
            Path("running.txt").write_text(str(gc.get_freeze_count()))
        """
    )
    write_plan(pytester, [phase("a", "true")])
    assert gc.get_freeze_count() == 0
    pytester.runpytest("--maestro", "plan.yaml", *workers).assert_outcomes(passed=1)
    collecting = int((pytester.path / "collecting.txt").read_text())
    assert collecting > 1000
    assert int((pytester.path / "running.txt").read_text()) > collecting  # the items as well
    assert gc.get_freeze_count() == 0  # given back: in-process runs do not pile them up


def test_what_something_else_froze_meanwhile_stays_frozen(pytester: pytest.Pytester) -> None:
    """A conftest that freezes objects while the run collects keeps them frozen: thawing the
    run's own would thaw them too (``gc.unfreeze`` takes all), so the run leaves all frozen."""
    pytester.makeconftest(
        """
        import gc

        def pytest_collection_finish(session):
            gc.freeze()
        """
    )
    write_plan(pytester, [phase("a", "true")])
    assert gc.get_freeze_count() == 0
    try:
        pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()  # what the conftest froze is this test's to give back
