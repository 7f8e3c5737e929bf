"""DependencyScheduling: the xdist scheduler of ``pytest --maestro PLAN -n N``.

An xdist worker runs the item it holds only once it has received the *next* item (pytest's run
protocol needs ``nextitem``). So every phase is sent together with the worker's hidden no-op sync
item: ``[phase, sync]``. The worker runs the phase at once and then waits on the sync item, which
costs nothing and commits the worker to nothing. A ``Policy`` decides what starts;
this adapter only moves ids between it and the workers, and reports on the controller the phases
that must not run (a dependency failed, or they completed in an earlier run). In a mixed pool
(``pool.py``) a worker is sent only what it has the runtimes and git for.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

from .._compat import WorkerController, relayed, set_collected_count, xdist_shutting_down
from ..phase.facts import PhaseFacts
from ..review.final import FINAL_NAME
from ..run.orchestrator import Orchestrator
from ..scheduling.jobs import plan_jobs
from ..scheduling.policy import DagPolicy, Policy, WavePolicy
from ..scheduling.pool import Pool, WorkerTools
from ..state.model import Status
from .collect import ORCHESTRATOR_KEY, SYNC_NAME
from .nodeids import NodeId
from .pool import as_controller_sees, new_pool, phase_needs
from .progress import heard
from .remote import CHANNELS
from .skips import report_refused, report_skip

# Where the final review is: not selected, waiting for every phase to finish, on a worker, done.
_NONE, _WAITING, _RUNNING, _DONE = "none", "waiting", "running", "done"


class DependencyScheduling:
    def __init__(self, config: pytest.Config, maestro: Orchestrator) -> None:
        self.config = config
        self.maestro = maestro
        self.run = maestro.run
        self.collection: list[str] | None = None
        self.node_ids: dict[str, int] = {}  # node id -> index in the collection
        self.sync_index = -1
        self.sync: NodeId | None = None  # the sync item, whose file is the plan's
        self.running: dict[WorkerController, str | None] = {}  # worker -> phase it runs
        self.policy: Policy | None = None
        self.last_start = 0.0
        self.crashed: set[str] = set()  # phases whose worker died, until the crash is judged
        self.lost: set[str] = set()  # of those, phases whose remote worker was lost
        self.lost_before: set[str] = set()  # phases run again once after their host was lost
        self.again: list[str] = []  # crashed phases to run again, before anything else starts
        self.phase_at: dict[int, str] = {}  # index in the collection -> phase id
        self.ended: set[str] = set()  # finished at their report, their protocol's end to come
        self.final_index = -1  # the final review's index in the collection; -1: not selected
        self.final = _NONE  # where the final review is: none, waiting, running, done
        self.pool: Pool = new_pool(config)  # what each worker has, as it says at its start
        self.needs: dict[str | None, frozenset[str]] = {}  # phase (None: final) -> its needs
        self.every_need: frozenset[str] = frozenset()  # a worker with all: no filter

    # -- the xdist Scheduling protocol ------------------------------------------------------

    @property
    def nodes(self) -> list[WorkerController]:
        return list(self.running)

    @property
    def collection_is_completed(self) -> bool:
        return self.collection is not None

    @property
    def tests_finished(self) -> bool:
        return self.policy is not None and self.policy.done and self.final in (_NONE, _DONE)

    @property
    def has_pending(self) -> bool:
        if self.policy is None:
            return False
        return bool(self.policy.pending or self.policy.running) or self.final in (
            _WAITING,
            _RUNNING,
        )

    def add_node(self, node: WorkerController) -> None:
        self.running[node] = None

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        self._uncount_sync_item(len(collection))
        if self.collection is None:
            self.collection = list(collection)
            self.node_ids = {nodeid: n for n, nodeid in enumerate(collection)}
            nodes = [NodeId.parse(nodeid) for nodeid in collection]
            self.phase_at = {n: node.name for n, node in enumerate(nodes) if node}
            self.sync_index, self.sync = next(
                ((n, node) for n, node in enumerate(nodes) if node and node.name == SYNC_NAME),
                (-1, None),
            )
            self.final_index = next(
                (n for n, node in enumerate(nodes) if node and node.name == FINAL_NAME), -1
            )
            if self.sync is None:
                # The plan failed to collect (xdist shows the worker's error): run nothing.
                self.policy = DagPolicy([], 1)
        elif list(collection) != self.collection:
            raise pytest.UsageError(f"worker {node.gateway.id} collected a different plan")

    def mark_test_complete(
        self, node: WorkerController, item_index: int | str, duration: float = 0
    ) -> None:
        message = relayed(item_index)
        tools = WorkerTools.from_wire(message) if message is not None else None
        if tools is not None:  # what the worker has, said at its start
            self.worker_said(node, tools)
            return
        if message is not None:  # what a phase running on the worker says: no completion
            heard(self.config, message)
            return
        if item_index == self.sync_index:
            return
        if self.phase_at.get(int(item_index)) in self.ended:  # finished at its report
            self.ended.discard(self.phase_at[int(item_index)])
            return
        phase_id = self.running[node]
        self.running[node] = None
        if phase_id == FINAL_NAME:
            self.final = _DONE
        elif phase_id is not None:
            self._finish(phase_id)
        self.schedule()

    def worker_said(self, node: WorkerController, tools: WorkerTools) -> None:
        """A worker's tools, before its collection makes it idle: it may be sent phases now,
        and a phase that no worker of the complete pool can run fails."""
        remote = node.gateway.id in self.config.stash.get(CHANNELS, {})
        tools = as_controller_sees(node, tools, self.maestro, remote)
        self.pool.add(tools)
        if tools.refused is not None:
            self.maestro.life.notes.append(f"worker {tools.where} runs no phase: {tools.refused}")
        if self.policy is not None:
            self._refuse_unrunnable()
            self.schedule()

    def phase_completed(self, phase_id: str) -> None:
        """A phase's call passed, its end written: what it held back may start now, and its
        worker is sent its next phase, which it runs once the phase's teardown is done, rather
        than after the round trip that starts at the protocol's end. (A teardown error does not
        change a phase's outcome.) Only a completion: a failure waits for that end, so that
        ``-x``, ``--maxfail`` and the breaker judge it before anything else starts."""
        node = next((n for n, job in self.running.items() if job == phase_id), None)
        if node is None:
            return
        self.running[node] = None
        self.ended.add(phase_id)
        self._finish(phase_id)
        self.schedule(tearing_down=node)

    def mark_test_pending(self, item: str) -> None:
        """Run a phase whose worker crashed again, as a ``pytest_handlecrashitem`` may ask (xdist
        documents it so): it goes to the next idle worker before anything else starts, and the
        policy keeps it running meanwhile, its files and its slot held, so that nothing that
        conflicts with it starts on the files its crash left put back."""
        crashed = NodeId.of(item).name
        if crashed not in self.crashed:
            raise ValueError(f"phase {crashed!r} is not a crashed phase waiting for a verdict")
        self.crashed.remove(crashed)
        self.again.append(crashed)

    def judge_crash(self, crashitem: str) -> bool:
        """After every ``pytest_handlecrashitem``: a crashed phase that no plugin asked to run
        again failed (what it blocks is skipped, and what it held back may start). True then:
        the crash report gets its facts."""
        crashed = NodeId.of(crashitem).name
        if crashed == FINAL_NAME:  # it failed; no policy knows it, and no phase waits for it
            return True
        failed = crashed in self.crashed
        if failed:
            self.crashed.remove(crashed)
            self.run.record(PhaseFacts(crashed, Status.FAILED))  # its crash report follows
            self._finish(crashed)
        self.schedule()
        return failed

    def remove_pending_tests_from_node(
        self, node: WorkerController, indices: Sequence[int]
    ) -> None:
        raise NotImplementedError("pytest-maestro does not steal work")

    def remove_node(self, node: WorkerController) -> str | None:
        """A crashed worker: what its phase's commands still run is ended and its files are put
        back. xdist then reports the crash (``pytest_handlecrashitem``): unless a plugin asks for
        the phase again, it failed, what it blocks is skipped, and what it held back (its files,
        the concurrency limit) may start on idle workers at once (``judge_crash``), not only once
        a replacement worker has collected.
        """
        crashed = self.running.pop(node)
        if crashed is None:
            return None
        if crashed == FINAL_NAME:
            self.final = _DONE
            self.maestro.life.end_running(FINAL_NAME)  # what its reviewer's CLI still runs
            return self._nodeid(FINAL_NAME)
        life = self.maestro.life
        life.end_running(crashed)  # what the crashed phase's commands still run
        if life.recorder is not None:  # then its files, before another phase writes them
            life.notes += life.recorder.crashed(crashed)
        self.crashed.add(crashed)
        if node.gateway.id in self.config.stash.get(CHANNELS, {}):
            self.lost.add(crashed)
        return self._nodeid(crashed)

    def run_lost_again(self, crashitem: str, worker: str) -> bool:
        """A remote worker lost under a phase (its host gone, its gateway killed): the phase's
        work was there, and nothing of it reached the user's tree, so it goes back to pending
        and runs on another worker, once; a second loss fails it, as any crash does. True when
        it runs again."""
        crashed = NodeId.of(crashitem).name
        if crashed not in self.lost or crashed not in self.crashed:
            return False
        self.lost.discard(crashed)
        if crashed in self.lost_before:
            return False
        self.lost_before.add(crashed)
        self.mark_test_pending(crashitem)
        self.maestro.life.notes.append(
            f"phase {crashed!r}: its worker {worker} was lost mid-phase; it ran again on another"
        )
        self.schedule()
        return True

    def schedule(self, tearing_down: WorkerController | None = None) -> None:
        """Starts what may start on idle workers; one still ``tearing_down`` its phase last."""
        if self.collection is None:
            return
        if self.policy is None:
            self.policy = self._start_policy()
            self._refuse_unrunnable()
        idle = [node for node, phase in self.running.items() if phase is None and self._said(node)]
        idle.sort(key=lambda node: node is tearing_down)
        for again in list(self.again):  # still running for the policy
            node = next((n for n in idle if self._can(n, again)), None)
            if node is None or self._stopping():
                continue
            self._stagger()
            self.again.remove(again)
            idle.remove(node)
            self._send(node, again)
        empty: set[frozenset[str] | None] = set()  # what was offered nothing: asked once
        for node in list(idle):
            has = self._has(node)
            job = None if has in empty or self._stopping() else self.policy.next_job(has)
            if job is None:
                empty.add(has)
                continue
            self._stagger()
            idle.remove(node)
            self.policy.start(job, has)
            self._send(node, job)
            # Recorded once sent, while the phase gets going: no report of it comes before this
            # returns, and its runner holds its start on disk before it runs anything.
            self.maestro.phase_started(self.maestro.plan.phase(job), worker=node.gateway.id)
        self._final_review(idle)

    def _said(self, node: WorkerController) -> bool:
        """The worker said what it has (it does before its collection ends)."""
        return self.pool.has(node.gateway.id) is not None

    def _has(self, node: WorkerController) -> frozenset[str] | None:
        """What the policy is told the worker has: None when it has all any phase needs."""
        has = self.pool.has(node.gateway.id)
        return None if has is not None and self.every_need <= has else has

    def _can(self, node: WorkerController, phase_id: str | None) -> bool:
        has = self._has(node)
        return has is None or self.needs.get(phase_id, frozenset()) <= has

    def _refuse_unrunnable(self) -> None:
        """Each pending phase that no worker of the pool can run, once every worker said what
        it has, fails in one line naming each worker and what it lacks; its dependents are
        skipped as after any failure."""
        assert self.policy is not None
        if not self.pool.complete:
            return
        for phase_id in self.run.topological(self.policy.pending):
            if phase_id not in self.policy.pending:  # doomed by one refused before it
                continue
            text = self.pool.refusal(self.needs.get(phase_id, frozenset()), f"phase {phase_id!r}")
            if text is not None:
                self._refuse(phase_id, text)

    def _refuse(self, phase_id: str, text: str) -> None:
        assert self.policy is not None
        self.maestro.phase_started(self.maestro.plan.phase(phase_id))
        doomed = [job for job, _ in self.policy.refuse(phase_id)]
        report_refused(self.config, self.maestro.plan, self._nodeid(phase_id), text)
        for job in self.run.topological(doomed):
            reason = self.run.why_not_run(job, scheduled=True)
            assert reason is not None, f"phase {job!r} is doomed with no reason"
            report_skip(self.config, self.maestro.plan, self._nodeid(job), reason)

    def _final_review(self, idle: list[WorkerController]) -> None:
        """Once every phase finished (none running, none to start, no crash unjudged), the
        final review: reported skipped here when it must not run, else sent to an idle worker,
        alone, so it never runs beside a phase."""
        assert self.policy is not None
        if self.final != _WAITING or not self.policy.done or self.crashed or self._stopping():
            return
        reason = self.maestro.why_no_final_review()
        if reason is not None:
            self.final = _DONE
            report_skip(self.config, self.maestro.plan, self._nodeid(FINAL_NAME), reason)
        elif idle:
            # A worker that has the final reviewer's runtime, else any: it fails there, its
            # CLI missing, rather than waiting for a worker that has none.
            node = next((n for n in idle if self._can(n, None)), idle[0])
            idle.remove(node)
            self.final = _RUNNING
            self.running[node] = FINAL_NAME
            node.send_runtest_some([self.final_index, self.sync_index])

    def _send(self, node: WorkerController, job: str) -> None:
        self.running[node] = job
        channel = self.config.stash.get(CHANNELS, {}).get(node.gateway.id)
        if channel is not None:  # a remote worker: the phase's start first, on its side channel
            from ..run.remote import make_start

            channel.send(make_start(self.maestro.life, job, node.gateway.id))
        node.send_runtest_some([self.node_ids[self._nodeid(job)], self.sync_index])

    # -- helpers ----------------------------------------------------------------------------

    def _start_policy(self) -> Policy:
        """Report what must not run at all, then hand the rest to the policy."""
        assert self.collection is not None
        maestro, run = self.maestro, self.run
        names = [NodeId.of(nodeid).name for nodeid in self.collection]
        selected = [name for name in names if name not in (SYNC_NAME, FINAL_NAME)]
        run.select(selected)
        run.final = self.final_index >= 0
        self.final = _WAITING if run.final else _NONE
        run.refused = maestro.resolve.refusal(selected, final=run.final)
        if run.refused is not None:
            pytest.exit(run.refused, pytest.ExitCode.USAGE_ERROR)  # before any phase starts
        to_run = []
        for phase_id in run.topological(selected):
            reason = run.why_not_run(phase_id, scheduled=True)
            if reason is None:
                to_run.append(phase_id)
            else:
                report_skip(self.config, maestro.plan, self._nodeid(phase_id), reason)
        self._know_needs(to_run)
        jobs = plan_jobs(maestro.graph, to_run, self.run.duration, self.needs.__getitem__)
        # Idle workers bound what runs; workers still starting up join as they finish collecting.
        limit = maestro.settings.max_concurrent or max(len(jobs), 1)
        kind = WavePolicy if maestro.settings.schedule == "waves" else DagPolicy
        return kind(jobs, limit)

    def _know_needs(self, phase_ids: list[str]) -> None:
        """What each phase needs of a worker; refused before anything runs when the overrides
        give every worker's runtimes and none has a phase's."""
        self.needs, refused = phase_needs(self.config, self.maestro, phase_ids, self.final != _NONE)
        self.every_need = frozenset().union(*self.needs.values())
        if refused is not None:
            pytest.exit(refused, pytest.ExitCode.USAGE_ERROR)

    def _finish(self, phase_id: str) -> None:
        assert self.policy is not None
        doomed = [job for job, _ in self.policy.finish(phase_id, self.run.completed(phase_id))]
        for job in self.run.topological(doomed):
            reason = self.run.why_not_run(job, scheduled=True)
            assert reason is not None, f"phase {job!r} is doomed with no reason"
            report_skip(self.config, self.maestro.plan, self._nodeid(job), reason)

    def _nodeid(self, phase_id: str) -> str:
        assert self.sync is not None
        return str(self.sync.sibling(phase_id))

    def _uncount_sync_item(self, collected: int) -> None:
        """xdist counts the hidden sync item as a test (again at each worker's collection);
        progress percentages should not."""
        if collected:
            set_collected_count(self.config, collected - 1)

    def _stopping(self) -> bool:
        """``-x``, ``--maxfail`` or the circuit breaker asked xdist to shut down: start nothing."""
        return xdist_shutting_down(self.config)

    def _stagger(self) -> None:
        """Space out phase starts (rate limits of LLM APIs); blocks the controller briefly."""
        delay = self.maestro.settings.stagger
        wait = self.last_start + delay - time.monotonic()
        if delay and wait > 0:
            time.sleep(wait)
        self.last_start = time.monotonic()


def make_scheduler(config: pytest.Config, log: Any) -> DependencyScheduling | None:
    maestro = config.stash.get(ORCHESTRATOR_KEY, None)
    if maestro is None:
        return None
    scheduler = DependencyScheduling(config, maestro)
    maestro.completed = scheduler.phase_completed
    return scheduler
