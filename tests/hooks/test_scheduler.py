"""DependencyScheduling without processes: fake workers that record what they were sent
(docs/architecture.md, "The scheduler's sync item").

The session is the plugin's own, configured by pytest from a small plan; the workers are fakes in
the style of pytest-xdist's scheduler tests. A phase's outcome reaches the controller the way a
worker's report does: through ``pytest_runtest_logreport`` with the phase's facts attached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_maestro.hooks import scheduler as scheduler_module
from pytest_maestro.hooks.collect import ORCHESTRATOR_KEY, SYNC_NAME
from pytest_maestro.hooks.scheduler import DependencyScheduling
from pytest_maestro.phase.events import STARTED, PhaseEvent
from pytest_maestro.phase.facts import PhaseFacts
from pytest_maestro.run.orchestrator import Orchestrator
from pytest_maestro.run.tools import detect
from pytest_maestro.settings import OPTIONS

from ..helpers import phase, write_plan

PREFIX = "plan.yaml::"
SYNC = PREFIX + SYNC_NAME


@dataclass(frozen=True)
class Send:
    """One ``send_runtest_some`` call, with what was out and completed at that moment."""

    worker: str
    indices: list[int]
    out: frozenset[str]
    completed: frozenset[str]
    at: float  # the run's clock


class FakeNode:
    """A worker as the scheduler sees it: a gateway id, and the item indices it was sent."""

    def __init__(
        self,
        worker: str,
        on_send: Callable[[FakeNode, list[int]], None],
        config: pytest.Config | None = None,
    ) -> None:
        self.gateway = SimpleNamespace(id=worker, spec="popen")
        self.config = config
        self.sent: list[list[int]] = []
        self._on_send = on_send

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(list(indices))
        self._on_send(self, list(indices))

    def __repr__(self) -> str:
        return f"FakeNode({self.gateway.id})"


class ReportLog:
    """A plugin that keeps every report the controller sees."""

    def __init__(self) -> None:
        self.reports: list[pytest.TestReport] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.append(report)

    def skipped(self) -> dict[str, str]:
        """Phase id -> skip reason, for the phases reported skipped."""
        found = {}
        for report in self.reports:
            if report.when == "setup" and report.skipped:
                assert isinstance(report.longrepr, tuple)
                found[report.nodeid.removeprefix(PREFIX)] = report.longrepr[2]
        return found


@dataclass
class Run:
    """A scheduler on fake workers, and the controller's view of what is out where."""

    maestro: Orchestrator
    sched: DependencyScheduling
    collection: list[str]
    log: ReportLog
    nodes: dict[str, FakeNode] = field(default_factory=dict)
    out: dict[str, FakeNode] = field(default_factory=dict)  # phase -> worker, in send order
    completed: set[str] = field(default_factory=set)
    sends: list[Send] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic

    def index(self, phase_id: str) -> int:
        return self.collection.index(PREFIX + phase_id)

    @property
    def sync_index(self) -> int:
        return self.collection.index(SYNC)

    def add_workers(self, *workers: str, collection: list[str] | None = None) -> None:
        """Workers join, then each collects (the plan unless told otherwise) and xdist schedules."""
        for worker in workers:
            node = FakeNode(worker, self._sent, self.sched.config)
            self.nodes[worker] = node
            self.sched.add_node(node)  # type: ignore[arg-type]
            self.say_tools(node)
        for worker in workers:
            ids = self.collection if collection is None else collection
            self.sched.add_node_collection(self.nodes[worker], ids)  # type: ignore[arg-type]
            if self.sched.collection_is_completed:
                self.sched.schedule()

    def say_tools(self, node: FakeNode) -> None:
        """What a worker says while it collects: what this machine has of the plan's needs."""
        config, resolve = self.sched.config, self.maestro.resolve
        phases = self.maestro.plan.phases
        tools = detect(resolve, phases, False, node.gateway.id, config.rootpath)
        self.sched.mark_test_complete(node, tools.to_wire())  # type: ignore[arg-type]

    def _sent(self, node: FakeNode, indices: list[int]) -> None:
        self.sends.append(
            Send(
                node.gateway.id,
                indices,
                frozenset(self.out),
                frozenset(self.completed),
                self.clock(),
            )
        )
        if indices and 0 <= indices[0] < len(self.collection):
            self.out[self.collection[indices[0]].removeprefix(PREFIX)] = node

    def finish(self, phase_id: str, status: str = "completed") -> None:
        """The worker reports the phase's outcome, then the end of its run protocol."""
        node = self.out.pop(phase_id)
        self.report(phase_id, status, node)
        if status == "completed":
            self.completed.add(phase_id)
        self.sched.mark_test_complete(node, self.index(phase_id))  # type: ignore[arg-type]

    def report(self, phase_id: str, status: str, node: FakeNode) -> None:
        nodeid = PREFIX + phase_id
        location = ("plan.yaml", 0, f"phase {phase_id}")
        outcome = "passed" if status == "completed" else "failed"
        longrepr = None if outcome == "passed" else "phase failed"
        report = pytest.TestReport(nodeid, location, {}, outcome, longrepr, "call")
        PhaseFacts(phase_id, status, worker=node.gateway.id).attach(report)
        self.sched.config.hook.pytest_runtest_logreport(report=report)

    def report_crash(self, node: FakeNode, crashitem: str) -> pytest.TestReport:
        """What xdist does once ``remove_node`` named the phase its dead worker ran
        (``DSession.handle_crashitem``): the crash goes to ``pytest_handlecrashitem``, where a
        plugin may ask for the phase again, then its report to ``pytest_runtest_logreport``."""
        why = f"worker {node.gateway.id!r} crashed while running {crashitem!r}"
        report = pytest.TestReport(
            crashitem, ("plan.yaml", None, "plan.yaml"), {}, "failed", why, "???"
        )  # type: ignore[arg-type]
        report.node = node  # type: ignore[attr-defined]
        hook = self.sched.config.hook
        hook.pytest_handlecrashitem(crashitem=crashitem, report=report, sched=self.sched)
        hook.pytest_runtest_logreport(report=report)
        return report

    def run_to_end(self, pick: Callable[[list[str]], str], limit: int = 100) -> None:
        for _ in range(limit):
            if not self.out:
                break
            self.finish(pick(list(self.out)))
        assert not self.out

    def sent_phases(self) -> list[str]:
        return [self.collection[s.indices[0]].removeprefix(PREFIX) for s in self.sends]


@pytest.fixture
def make_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Run]]:
    for option in OPTIONS:
        if option.env:
            monkeypatch.delenv(option.env, raising=False)

    def make(phases: list[dict[str, Any]], *args: str) -> Run:
        write_plan(pytester, phases)
        # The terminal reporter needs a running session; nothing here reads its output.
        config = pytester.parseconfigure("--maestro", "plan.yaml", "-p", "no:terminal", *args)
        maestro = config.stash[ORCHESTRATOR_KEY]
        log = ReportLog()
        config.pluginmanager.register(log, "test-report-log")
        # What each worker collects: the phases in run order, then the hidden sync item.
        collection = [PREFIX + p for p in maestro.run.run_order()] + [SYNC]
        return Run(maestro, DependencyScheduling(config, maestro), collection, log)

    yield make


def first_out(out: list[str]) -> str:
    return out[0]


def last_out(out: list[str]) -> str:
    return out[-1]


def by_name(out: list[str]) -> str:
    return min(out)


ORDERS = [first_out, last_out, by_name]

# Dependencies, write/write and write/read conflicts, and exclusive phases, some ready at once.
DAG = [
    phase("a", "true", files={"create": ["shared.txt"]}),
    phase("b", "true"),
    phase("c", "true", blocked_by=["a"]),
    phase("d", "true", blocked_by=["a"], files={"modify": ["shared.txt"]}),
    phase("e", "true", blocked_by=["b"], reads=["shared.txt"]),
    phase("f", "true", blocked_by=["b"]),
    phase("g", "true", blocked_by=["c", "d"]),
    phase("h", "true", blocked_by=["e", "f"], parallel=False),
    phase("i", "true"),
    phase("j", "true", blocked_by=["g", "h", "i"]),
    phase("k", "true", files={"create": ["other.txt"]}),
    phase("l", "true", files={"modify": ["other.txt"]}),
    phase("m", "true", reads=["other.txt"]),
    phase("solo", "true", parallel=False),
]
BY_ID = {p["id"]: p for p in DAG}


def writes(phase_id: str) -> set[str]:
    files = BY_ID[phase_id].get("files", {})
    return {path for paths in files.values() for path in paths}


def reads(phase_id: str) -> set[str]:
    return set(BY_ID[phase_id].get("reads", []))


def clash(phase_id: str, other: str) -> bool:
    """Whether the two phases' files keep them from running together."""
    mine = writes(phase_id)
    return bool(mine & (writes(other) | reads(other)) or reads(phase_id) & writes(other))


@pytest.fixture(params=ORDERS, ids=lambda order: order.__name__)
def dag_run(request: pytest.FixtureRequest, make_run: Callable[..., Run]) -> Run:
    """The DAG run to its end on three workers, phases completing in the given order."""
    run = make_run(DAG)
    run.add_workers("gw0", "gw1", "gw2")
    assert run.sends, "three idle workers and ready phases, yet nothing was sent"
    run.run_to_end(request.param)
    return run


def test_every_send_is_one_phase_then_the_sync_item(dag_run: Run) -> None:
    phase_indices = {dag_run.index(p["id"]) for p in DAG}
    for send in dag_run.sends:
        assert len(send.indices) == 2, send
        assert send.indices[0] in phase_indices, send
        assert send.indices[1] == dag_run.sync_index, send
    assert sorted(dag_run.sent_phases()) == sorted(BY_ID), "each phase sent exactly once"
    assert dag_run.sched.tests_finished
    assert not dag_run.sched.has_pending


def test_phase_is_sent_only_after_its_dependencies_completed(dag_run: Run) -> None:
    for send, phase_id in zip(dag_run.sends, dag_run.sent_phases(), strict=True):
        missing = set(BY_ID[phase_id].get("blocked_by", [])) - send.completed
        assert not missing, f"{phase_id} sent before {missing} completed"


def test_conflicting_phases_are_never_out_together(dag_run: Run) -> None:
    for send, phase_id in zip(dag_run.sends, dag_run.sent_phases(), strict=True):
        for other in send.out:
            assert not writes(phase_id) & (writes(other) | reads(other)), (phase_id, other)
            assert not reads(phase_id) & writes(other), (phase_id, other)


def test_exclusive_phase_is_out_alone(dag_run: Run) -> None:
    exclusive = {p["id"] for p in DAG if p.get("parallel") is False}
    for send, phase_id in zip(dag_run.sends, dag_run.sent_phases(), strict=True):
        if phase_id in exclusive:
            assert not send.out, f"{phase_id} sent while {set(send.out)} were out"
        else:
            assert not send.out & exclusive, f"{phase_id} sent beside {send.out & exclusive}"


@pytest.mark.parametrize("order", ORDERS, ids=lambda order: order.__name__)
def test_no_worker_idles_while_a_phase_could_start(
    make_run: Callable[..., Run], order: Callable[[list[str]], str]
) -> None:
    # The DAG without its exclusive phases, whose rules rightly hold others back; after every
    # completion the scheduler has run, and no worker may idle beside a phase that could start.
    plan = [{key: value for key, value in p.items() if key != "parallel"} for p in DAG]
    run = make_run(plan)
    run.add_workers("gw0", "gw1", "gw2")

    def could_start() -> list[str]:
        sent = set(run.sent_phases())
        return [
            p["id"]
            for p in plan
            if p["id"] not in sent
            and set(p.get("blocked_by", [])) <= run.completed
            and not any(clash(p["id"], other) for other in run.out)
        ]

    def check_then_pick(out: list[str]) -> str:
        idle = set(run.nodes) - {node.gateway.id for node in run.out.values()}
        assert not idle or not could_start(), f"{idle} idle while {could_start()} could start"
        return order(out)

    run.run_to_end(check_then_pick)
    assert sorted(run.sent_phases()) == sorted(BY_ID)
    assert run.sched.tests_finished


class FakeClock:
    """``time.monotonic`` and ``time.sleep`` for the scheduler: sleeping moves the clock on."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


def test_stagger_spaces_out_sends_by_its_delay(
    make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run([phase(p, "true") for p in "wxyz"], "--maestro-stagger=0.5")
    clock = FakeClock(1000.0)
    monkeypatch.setattr(scheduler_module, "time", clock)
    run.clock = clock.monotonic
    run.add_workers("gw0", "gw1", "gw2")
    # The first phase starts at once, each next one 0.5 s after the one before.
    assert [send.at for send in run.sends] == pytest.approx([1000.0, 1000.5, 1001.0])
    # A phase that becomes startable long after the last start does not wait.
    clock.now = 1010.0
    run.finish(run.sent_phases()[0])
    assert run.sends[-1].at == pytest.approx(1010.0)
    run.run_to_end(first_out)
    assert sorted(run.sent_phases()) == list("wxyz")


def test_idle_worker_gets_work_when_the_phase_completes_not_the_sync_item(
    make_run: Callable[..., Run],
) -> None:
    run = make_run(
        [
            phase("a", "true", files={"create": ["x.txt"]}),
            phase("b", "true", blocked_by=["a"]),
            phase("c", "true", files={"modify": ["x.txt"]}),
        ]
    )
    run.add_workers("gw0", "gw1")
    assert run.sent_phases() == ["a"]  # b waits for a, c for a's file: gw1 stays idle
    node = run.out["a"]

    # The worker ran a and now runs the sync item: a's outcome and completion already came.
    run.report("a", "completed", node)
    run.sched.mark_test_complete(node, run.sync_index)  # type: ignore[arg-type]
    assert run.sent_phases() == ["a"], "completing the sync item started something"
    assert not run.log.skipped()

    run.out.pop("a")
    run.completed.add("a")
    run.sched.mark_test_complete(node, run.index("a"))  # type: ignore[arg-type]
    assert sorted(run.sent_phases()) == ["a", "b", "c"], "ready phases waited"
    assert {run.out["b"].gateway.id, run.out["c"].gateway.id} == {"gw0", "gw1"}

    # A sync completion on a busy worker changes nothing either.
    run.sched.mark_test_complete(run.out["b"], run.sync_index)  # type: ignore[arg-type]
    run.run_to_end(first_out)
    assert run.maestro.run.outcomes == dict.fromkeys("abc", "completed")
    assert run.sched.tests_finished


def test_a_message_from_a_worker_is_no_completion(make_run: Callable[..., Run]) -> None:
    """What a running phase says reaches the scheduler as xdist's completion event with a text
    for its index (``_compat.controller_channel``): it frees no worker and starts nothing."""
    run = make_run([phase("a", "true"), phase("b", "true", blocked_by=["a"])])
    run.add_workers("gw0", "gw1")
    said = PhaseEvent("a", STARTED, worker="gw0").to_wire()
    run.sched.mark_test_complete(run.out["a"], said)  # type: ignore[arg-type]
    assert run.sent_phases() == ["a"] and "a" in run.out
    run.run_to_end(first_out)
    assert run.sent_phases() == ["a", "b"]


def test_failed_phase_skips_its_dependents_without_sending_them(
    make_run: Callable[..., Run],
) -> None:
    run = make_run(
        [
            phase("bad", "true"),
            phase("after", "true", blocked_by=["bad"]),
            phase("later", "true", blocked_by=["after"]),
            phase("free", "true"),
            phase("free2", "true", blocked_by=["free"]),
        ]
    )
    run.add_workers("gw0", "gw1")
    assert sorted(run.sent_phases()) == ["bad", "free"]
    run.finish("bad", "failed")
    assert run.log.skipped() == {
        "after": "Skipped: dependency 'bad' failed",
        "later": "Skipped: dependency 'after' was skipped",
    }
    assert run.maestro.run.outcomes == {"bad": "failed", "after": "skipped", "later": "skipped"}
    assert not run.sched.tests_finished  # free still runs
    run.run_to_end(first_out)
    assert sorted(run.sent_phases()) == ["bad", "free", "free2"]
    assert run.sched.tests_finished


def test_removed_worker_fails_its_phase_and_the_rest_runs_on(
    make_run: Callable[..., Run],
) -> None:
    run = make_run(
        [
            phase("a", "true", files={"create": ["x.txt"]}),
            phase("needs-a", "true", blocked_by=["a"]),
            phase("b", "true", files={"modify": ["x.txt"]}),
            phase("needs-b", "true", blocked_by=["b"]),
        ]
    )
    run.add_workers("gw0", "gw1")
    assert run.sent_phases() == ["a"]  # b waits for a's file
    crashed = run.out.pop("a")
    assert run.sched.remove_node(crashed) == PREFIX + "a"  # type: ignore[arg-type]
    run.report_crash(crashed, PREFIX + "a")
    assert run.maestro.run.outcomes == {"a": "failed", "needs-a": "skipped"}
    assert run.log.skipped() == {"needs-a": "Skipped: dependency 'a' failed"}
    assert crashed not in run.sched.nodes

    # The surviving worker was idle: b, no longer held back by a's file, starts on it now.
    assert run.sent_phases() == ["a", "b"]
    assert run.out["b"].gateway.id == "gw1"
    run.run_to_end(first_out)
    assert run.sent_phases() == ["a", "b", "needs-b"]
    assert len(crashed.sent) == 1
    assert run.sched.tests_finished


class RunAgain:
    """A plugin that asks for a crashed phase again, as xdist's documentation shows (and as
    pytest-rerunfailures does under ``--reruns``)."""

    def pytest_handlecrashitem(
        self, crashitem: str, report: pytest.TestReport, sched: DependencyScheduling
    ) -> None:
        sched.mark_test_pending(crashitem)
        report.outcome = "rerun"  # type: ignore[assignment]


def test_a_crashed_phase_asked_for_again_runs_again_first(
    make_run: Callable[..., Run],
) -> None:
    run = make_run(
        [
            phase("a", "true", files={"create": ["x.txt"]}),
            phase("needs-a", "true", blocked_by=["a"]),
            phase("b", "true", files={"modify": ["x.txt"]}),
            phase("c", "true"),
        ]
    )
    run.sched.config.pluginmanager.register(RunAgain(), "run-again")
    run.add_workers("gw0", "gw1")
    assert sorted(run.sent_phases()) == ["a", "c"]  # b waits for a's file
    crashed = run.out.pop("a")
    assert run.sched.remove_node(crashed) == PREFIX + "a"  # type: ignore[arg-type]
    report = run.report_crash(crashed, PREFIX + "a")
    assert PhaseFacts.of(report) is None  # no failure: the crash report says "rerun"
    assert run.maestro.run.outcomes == {}  # nothing failed, nothing is skipped
    assert run.log.skipped() == {}
    run.finish("c")  # the first worker free takes a again, before b, which a still holds back
    assert run.sent_phases()[-1] == "a" and run.out["a"].gateway.id == "gw1"
    run.run_to_end(first_out)
    assert sorted(run.sent_phases()) == ["a", "a", "b", "c", "needs-a"]
    assert run.maestro.run.outcomes == dict.fromkeys(["a", "b", "c", "needs-a"], "completed")
    assert run.sched.tests_finished


def test_only_a_crashed_phase_can_be_asked_for_again(make_run: Callable[..., Run]) -> None:
    run = make_run([phase("a", "true"), phase("b", "true", blocked_by=["a"])])
    run.add_workers("gw0")
    with pytest.raises(ValueError, match="phase 'b' is not a crashed phase"):
        run.sched.mark_test_pending(PREFIX + "b")


def test_removed_idle_worker_returns_no_phase(make_run: Callable[..., Run]) -> None:
    run = make_run([phase("a", "true")])
    run.add_workers("gw0", "gw1")
    idle = run.nodes["gw1"] if run.out["a"] is run.nodes["gw0"] else run.nodes["gw0"]
    assert run.sched.remove_node(idle) is None  # type: ignore[arg-type]
    assert run.maestro.run.outcomes == {}
    run.run_to_end(first_out)
    assert run.sched.tests_finished


def test_max_concurrent_one_keeps_one_phase_out_on_three_workers(
    make_run: Callable[..., Run],
) -> None:
    run = make_run(
        [
            phase("a", "true"),
            phase("b", "true"),
            phase("c", "true"),
            phase("d", "true", blocked_by=["a"]),
        ],
        "--maestro-max-concurrent=1",
    )
    run.add_workers("gw0", "gw1", "gw2")
    assert len(run.sends) == 1
    run.run_to_end(first_out)
    assert all(not send.out for send in run.sends)
    assert sorted(run.sent_phases()) == ["a", "b", "c", "d"]
    assert run.sched.tests_finished


@pytest.mark.parametrize("collected", [[], [PREFIX + "a"]], ids=["nothing", "no-sync-item"])
def test_collection_without_the_sync_item_runs_nothing(
    make_run: Callable[..., Run], collected: list[str]
) -> None:
    run = make_run([phase("a", "true"), phase("b", "true")])
    run.add_workers("gw0", "gw1", collection=collected)
    assert run.sched.collection_is_completed
    run.sched.schedule()
    assert run.sends == []
    assert run.sched.tests_finished
    assert not run.sched.has_pending


def test_worker_with_a_different_collection_is_a_usage_error(
    make_run: Callable[..., Run],
) -> None:
    run = make_run([phase("a", "true"), phase("b", "true")])
    run.add_workers("gw0")
    other = FakeNode("gw1", lambda node, indices: None)
    run.sched.add_node(other)  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match="worker gw1 collected a different plan"):
        run.sched.add_node_collection(other, run.collection[1:])  # type: ignore[arg-type]
