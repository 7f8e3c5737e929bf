"""Real xdist workers: dependencies, file conflicts, idle workers, crashes (docs/architecture.md,
"The scheduler's sync item")."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.state import Status, read_session

from ..helpers import write_plan

# Every test here starts real xdist workers and runs timed phases on them: seconds each.
pytestmark = pytest.mark.slow

# A phase records its start and end (epoch seconds) and its worker's pid around a sleep.
STAMP = 'echo "$MAESTRO_PHASE_ID {what} $(date +%s.%N) $PPID" >> times.log'


def timed(pid: str, seconds: float, **fields: Any) -> dict[str, Any]:
    run = [STAMP.format(what="start"), f"sleep {seconds}", STAMP.format(what="end")]
    return {"id": pid, "run": run, **fields}


def waiting(pid: str, until: str, **fields: Any) -> dict[str, Any]:
    """A phase that ends once ``until`` (a shell test on times.log) holds, and fails if it never
    does: its span then proves an order, however slow the machine (it waits 60 s at most)."""
    wait = f"for _ in $(seq 1200); do {until} && break; sleep 0.05; done; {until}"
    run = [STAMP.format(what="start"), wait, STAMP.format(what="end")]
    return {"id": pid, "run": run, **fields}


@dataclass(frozen=True)
class Span:
    start: float
    end: float
    worker: str


def spans(root: Path) -> dict[str, Span]:
    starts: dict[str, tuple[float, str]] = {}
    ends: dict[str, float] = {}
    for line in (root / "times.log").read_text().splitlines():
        pid, what, stamp, worker = line.split()
        if what == "start":
            starts[pid] = (float(stamp), worker)
        else:
            ends[pid] = float(stamp)
    return {pid: Span(s, ends[pid], w) for pid, (s, w) in starts.items() if pid in ends}


def overlap(a: Span, b: Span) -> bool:
    return a.start < b.end and b.start < a.end


DAG = [
    timed("a", 0.6, files={"create": ["shared.txt"]}),
    timed("b", 0.4),
    timed("c", 0.5, blocked_by=["a"]),
    timed("d", 0.3, blocked_by=["a"], files={"modify": ["shared.txt"]}),
    timed("e", 0.4, blocked_by=["b"], reads=["shared.txt"]),
    timed("f", 0.3, blocked_by=["b"]),
    timed("g", 0.3, blocked_by=["c", "d"]),
    timed("h", 0.2, blocked_by=["e", "f"]),
    timed("i", 0.5),
    timed("j", 0.2, blocked_by=["g", "h", "i"]),
]


def test_dag_on_three_workers_respects_dependencies_and_files(pytester: pytest.Pytester) -> None:
    # The "create"/"modify" declarations are checked: let the phases really touch the file.
    plan = [dict(p) for p in DAG]
    plan[0]["run"] = [*plan[0]["run"], "echo a > shared.txt"]
    plan[3]["run"] = [*plan[3]["run"], "echo d >> shared.txt"]
    write_plan(pytester, plan)
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "3")
    result.assert_outcomes(passed=len(DAG))
    times = spans(pytester.path)
    assert set(times) == {p["id"] for p in DAG}
    by_id = {p["id"]: p for p in DAG}
    for pid, span in times.items():
        for dep in by_id[pid].get("blocked_by", []):
            assert times[dep].end <= span.start, f"{pid} started before {dep} finished"
    conflicting = [("a", "d"), ("a", "e"), ("d", "e")]  # write/write, read/write
    for x, y in conflicting:
        assert not overlap(times[x], times[y]), f"{x} and {y} overlapped"
    assert len({s.worker for s in times.values()}) == 3
    _assert_no_idle_worker(times, by_id, conflicting)


def _assert_no_idle_worker(
    times: dict[str, Span],
    plan: dict[str, dict[str, Any]],
    conflicts: list[tuple[str, str]],
    slack: float = 1.0,
) -> None:
    """No worker stayed idle for more than ``slack`` while some phase could have started.

    The stamps lag the controller's decisions by a report and a dispatch, which on a loaded machine
    take a few tenths of a second: ``slack`` is well above that, so this catches stalls only. That
    no worker idles at all while a phase could start is proven exactly on fake workers
    (test_scheduler.py) and for the policy (scheduling/test_policy.py).
    """
    rivals: dict[str, set[str]] = {pid: set() for pid in times}
    for x, y in conflicts:
        rivals[x].add(y)
        rivals[y].add(x)
    finish = max(s.end for s in times.values())
    for worker in {s.worker for s in times.values()}:
        mine = sorted((s for s in times.values() if s.worker == worker), key=lambda s: s.start)
        gaps = [(a.end, b.start) for a, b in itertools.pairwise(mine)] + [(mine[-1].end, finish)]
        for idle_from, idle_to in gaps:
            for pid, span in times.items():
                ready = max([times[d].end for d in plan[pid].get("blocked_by", [])], default=0.0)
                waited_from = max(idle_from, ready)
                probe = waited_from + slack
                if probe >= min(idle_to, span.start):
                    continue  # not startable, or not for long, while this worker was idle
                if any(times[r].start < probe and times[r].end > waited_from for r in rivals[pid]):
                    continue  # a conflicting phase ran meanwhile
                raise AssertionError(
                    f"worker {worker} idle from {idle_from:.2f} while {pid} could start"
                )


def test_chain_on_two_workers_completes_in_order(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [timed("a", 0.1), timed("b", 0.1, blocked_by=["a"]), timed("c", 0.1, blocked_by=["b"])],
    )
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "2")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*[[]100%[]]"])  # the hidden sync item is not counted
    times = spans(pytester.path)
    assert times["a"].end <= times["b"].start and times["b"].end <= times["c"].start


def test_one_phase_on_four_workers_completes(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [timed("only", 0.1)])
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "4")
    result.assert_outcomes(passed=1)
    assert set(spans(pytester.path)) == {"only"}


def test_workers_run_the_plan_the_controller_read(pytester: pytest.Pytester) -> None:
    """A worker is given the plan, not told to read it again: here the file is no plan any more
    by the time the workers start, and they run what the controller read."""
    write_plan(pytester, [timed("a", 0.1), timed("b", 0.1, blocked_by=["a"])])
    pytester.makeconftest(
        """
        from pathlib import Path

        def pytest_configure_node(node):
            Path("plan.yaml").write_text("not a plan any more")
        """
    )
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "2")
    result.assert_outcomes(passed=2)
    assert set(spans(pytester.path)) == {"a", "b"}


def test_exclusive_phase_runs_alone(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [timed("x", 0.3), timed("solo", 0.3, parallel=False), timed("y", 0.3), timed("z", 0.3)],
    )
    pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "3").assert_outcomes(passed=4)
    times = spans(pytester.path)
    for other in ("x", "y", "z"):
        assert not overlap(times["solo"], times[other])


def test_failure_skips_dependents_on_the_controller(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            {"id": "bad", "run": ["sleep 0.2", "false"], "max_retries": 0},
            timed("after", 0.1, blocked_by=["bad"]),
            timed("later", 0.1, blocked_by=["after"]),
            timed("free", 0.4),
        ],
    )
    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "-n", "2", "-rs", "--maestro-circuit-breaker=0"
    )
    result.assert_outcomes(passed=1, failed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED ?1? plan.yaml:*: dependency 'bad' failed",
            "SKIPPED ?1? plan.yaml:*: dependency 'after' was skipped",
        ]
    )
    assert set(spans(pytester.path)) == {"free"}


def test_worker_crash_fails_that_phase_only(pytester: pytest.Pytester) -> None:
    # The crashed phase leaves its declared file half-done: it is put back at once, before a
    # phase that writes it could start on it (the next run's put-back would then undo that one).
    (pytester.path / "data.txt").write_text("the user's\n")
    write_plan(
        pytester,
        [
            {
                "id": "crash",
                "run": ["sleep 0.3", "echo half >> data.txt; kill -9 $PPID"],
                "files": ["data.txt"],
            },
            timed("needs-crash", 0.1, blocked_by=["crash"]),
            timed("one", 0.5),
            timed("two", 0.3, blocked_by=["one"]),
            timed("three", 0.2, blocked_by=["two"]),
        ],
    )
    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "-n", "2", "-rs", "--junitxml=out.xml"
    )
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*crashed while running*crash*"])
    assert set(spans(pytester.path)) == {"one", "two", "three"}
    # The crash is on record: the session state and the JUnit file say the phase failed.
    (session_file,) = (pytester.path / ".maestro").glob("plan-*.md")
    doc = read_session(session_file)
    assert doc.phases["crash"].status == Status.FAILED
    assert "crashed while running" in (doc.phases["crash"].result or "")
    assert doc.phases["needs-crash"].status == Status.SKIPPED
    assert doc.status == "failed"
    assert 'name="maestro.crash.status" value="failed"' in (pytester.path / "out.xml").read_text()
    assert (pytester.path / "data.txt").read_text() == "the user's\n"
    (kept,) = (pytester.path / ".maestro" / "replaced" / "crash").glob("*-interrupted/data.txt")
    assert kept.read_text() == "the user's\nhalf\n"
    result.stdout.fnmatch_lines(["its worker crashed: phase 'crash': restored data.txt *"])


# A plugin of the user's that asks once for a phase whose worker crashed, as xdist documents.
RUN_AGAIN_ONCE = """
import pytest

ASKED = set()

def pytest_handlecrashitem(crashitem, report, sched):
    if crashitem not in ASKED:
        ASKED.add(crashitem)
        sched.mark_test_pending(crashitem)
        report.outcome = "rerun"
"""


def test_a_crashed_phase_runs_again_when_a_plugin_asks(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RUN_AGAIN_ONCE)
    crash_once = "if [ ! -e crashed ]; then touch crashed; kill -9 $PPID; fi"
    write_plan(
        pytester,
        [
            {
                "id": "flaky",
                "run": [STAMP.format(what="start"), crash_once, STAMP.format(what="end")],
            },
            timed("after", 0.1, blocked_by=["flaky"]),
        ],
    )
    result = pytester.runpytest_subprocess("--maestro", "plan.yaml", "-n", "2")
    result.assert_outcomes(passed=2)
    assert set(spans(pytester.path)) == {"flaky", "after"}
    (session_file,) = (pytester.path / ".maestro").glob("plan-*.md")
    doc = read_session(session_file)
    assert doc.phases["flaky"].status == Status.COMPLETED
    assert doc.phases["after"].status == Status.COMPLETED


def test_waves_schedule_waits_for_each_wave(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            timed("long", 0.8),
            timed("short", 0.1),
            timed("after-short", 0.1, blocked_by=["short"]),
        ],
    )
    args = ("--maestro", "plan.yaml", "-n", "2")
    pytester.runpytest_subprocess(*args, "--maestro-schedule=waves").assert_outcomes(passed=3)
    times = spans(pytester.path)
    assert times["after-short"].start >= times["long"].end  # the barrier
    (pytester.path / "times.log").unlink()
    # No barrier under dag: "long" ends only once "after-short" has ended, so the plan passes only
    # if "after-short" ran while "long" still ran (a barrier would leave "long" waiting in vain).
    write_plan(
        pytester,
        [
            waiting("long", "grep -q '^after-short end ' times.log"),
            timed("short", 0.1),
            timed("after-short", 0.1, blocked_by=["short"]),
        ],
    )
    pytester.runpytest_subprocess(*args, "--maestro-fresh").assert_outcomes(passed=3)
    times = spans(pytester.path)
    assert times["after-short"].end <= times["long"].end


def test_max_concurrent_caps_running_phases(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [timed(p, 0.3) for p in "wxyz"])
    args = ("--maestro", "plan.yaml", "-n", "3", "--maestro-max-concurrent", "1")
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=4)
    times = sorted(spans(pytester.path).values(), key=lambda s: s.start)
    assert all(a.end <= b.start for a, b in itertools.pairwise(times))


def test_stagger_spaces_out_phase_starts(pytester: pytest.Pytester) -> None:
    # Each phase runs until all three have started: spaced out, not serialised, or none ends.
    all_started = "test $(grep -c ' start ' times.log) -ge 3"
    write_plan(pytester, [waiting(p, all_started) for p in "xyz"])
    args = ("--maestro", "plan.yaml", "-n", "3")
    pytester.runpytest_subprocess(*args, "--maestro-stagger", "0.5").assert_outcomes(passed=3)
    times = spans(pytester.path)
    starts = sorted(s.start for s in times.values())
    # The controller spaces its dispatches by 0.5 s exactly (test_scheduler.py, on a fake clock);
    # a phase starts a dispatch's latency later, which varies by a few hundredths of a second on
    # a loaded machine. Without the stagger the three would start together.
    assert all(b - a >= 0.25 for a, b in itertools.pairwise(starts)), starts
    assert all(s.end >= starts[-1] for s in times.values())


# Until both workers collected (and a moment for the controller to hear it), so that b has an
# idle worker to start on: else it waits, queued, on a's.
BOTH_COLLECTED = (
    "for i in $(seq 300); do [ -e collected.gw0 ] && [ -e collected.gw1 ] && break; sleep 0.1; "
    "done; sleep 0.5"
)


def test_what_a_completed_phase_held_back_starts_before_its_teardown_ends(
    pytester: pytest.Pytester,
) -> None:
    """A phase's outcome is its call's (a teardown error does not change it): once the call's
    report says it completed, its dependent starts on an idle worker, without waiting for the
    phase's teardown and the end of its protocol to come back from its worker."""
    write_plan(
        pytester,
        [
            {"id": "a", "name": "A", "run": [BOTH_COLLECTED]},
            {"id": "b", "name": "B", "run": ["date +%s.%N > b.start"], "blocked_by": ["a"]},
        ],
    )
    pytester.makeconftest(
        """
        import os
        import time
        import pytest

        def pytest_collection_finish(session):
            open("collected." + os.environ.get("PYTEST_XDIST_WORKER", "main"), "w").close()

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_teardown(item, nextitem):
            if item.name == "a":
                time.sleep(2)
                open("a.teardown", "w").write(repr(time.time()))
        """
    )
    pytester.runpytest("--maestro", "plan.yaml", "-n", "2").assert_outcomes(passed=2)
    started = float((pytester.path / "b.start").read_text())
    assert started < float((pytester.path / "a.teardown").read_text())
