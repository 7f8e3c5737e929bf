"""The session plugin: the pytest hooks of one ``pytest --maestro`` run, registered by
``plugin.py``. What they decide lives in the :class:`Orchestrator` and its :class:`RunState`."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import signal
import sysconfig
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from .._compat import remember_failed, runs_distributed, stop_message, stop_session
from ..phase.facts import PhaseFacts, SkipKind, SkipReason
from ..processes.process import interrupted_by
from ..processes.reaping import subreaper
from ..review.final import FINAL_NAME
from ..run.orchestrator import Orchestrator
from ..state import StateError, Status
from ..texts import table_width
from . import junit
from .collect import SYNC_KEY, FinalItem, PhaseItem, PlanFile, SyncItem
from .final import FinalReports
from .header import header_lines
from .nodeids import NodeId
from .report_facts import report_facts
from .skips import report_skip

# The outcome of xdist's crash report for a phase that runs again after its remote worker was
# lost (``xdist_hooks.py``, which exists only with xdist, sets it).
LOST = "lost"
# The terminal's category for a phase completed before this run.
ALREADY_COMPLETED = "already completed"


def durations_key(plan_path: Path) -> str:
    """The cache key of a plan's measured phase durations."""
    return "maestro/durations/" + hashlib.sha256(str(plan_path).encode()).hexdigest()[:12]


class MaestroSession:
    def __init__(self, config: pytest.Config, maestro: Orchestrator) -> None:
        self.config = config
        self.maestro = maestro
        self.run = maestro.run
        self.pytest_session: pytest.Session | None = None
        self.nodeids: dict[str, str] = {}  # phase id -> node id, as reports name them
        self.stopped = False
        self.interrupted: str | None = None  # Ctrl-C or a signal, and which
        self.looped = False  # the run got to its phases: a refused one leaves no outputs
        self.cleanup = contextlib.ExitStack()  # undone when the session ends
        self.facts = report_facts(config)
        self.final = FinalReports(config, maestro)
        self.frozen = False  # this run froze objects (``_freeze``), and gives them back
        self.left_frozen = 0  # how many were frozen once it last froze them

    @pytest.hookimpl
    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> PlanFile | None:
        if file_path.resolve() == self.maestro.plan_path:
            return PlanFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        self._freeze()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """After every deselection (``-k``, ``-m``, ``--lf``): what runs, in which order.

        The order pytest's options chose (``--ff``) is kept where dependencies allow it. The
        worker's sync item survives any deselection: the scheduler cannot work without it.
        """
        by_id = {i.phase.id: i for i in session.items if isinstance(i, PhaseItem)}
        final = [i for i in session.items if isinstance(i, FinalItem)]  # last, after them all
        session.items[:] = [*(by_id[i] for i in self.run.keep_order(list(by_id))), *final]
        sync = self.config.stash.get(SYNC_KEY, None)
        if sync is not None:
            session.items.append(sync)
        self.run.select(by_id)
        self.run.final = bool(final)
        if self.run.decides and not self.config.option.collectonly:
            self.run.refused = self.maestro.resolve.refusal(by_id, final=bool(final))
            if self.run.refused is not None:
                raise pytest.UsageError(self.run.refused)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Lock and resume the plan's session, where reports arrive and phases really run.

        SIGTERM and SIGHUP stop the run as Ctrl-C does, in every process: the commands' own
        groups are ended (an xdist controller tells its workers to stop, and ends what their
        records name, since a signal to it does not reach them). A process that runs phases is
        the subreaper of what they start, so that what its commands leave is found
        (``reaping``)."""
        self.pytest_session = session
        distributed = runs_distributed(self.config)
        on_signal = self.maestro.life.stop_running if distributed else None
        self.cleanup.enter_context(interrupted_by([signal.SIGTERM, signal.SIGHUP], on_signal))
        if not distributed:
            self.cleanup.enter_context(subreaper())
        if not self.run.decides or self.config.option.collectonly:
            return
        try:
            self.maestro.life.open(parallel=runs_distributed(self.config))
        except StateError as exc:
            raise pytest.UsageError(str(exc)) from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> bool | None:
        return True if isinstance(item, SyncItem) else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if isinstance(item, PhaseItem | FinalItem):
            facts = item.facts(report)
            if facts is not None:
                facts.attach(report)  # travels with the report to xdist's controller
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        """A phase an earlier run completed is counted apart from real skips: a fully resumed
        run ends "8 already completed", not "8 skipped". JUnit still shows it as skipped. A
        phase whose remote worker was lost, which runs again, is counted "lost"."""
        if report.outcome == LOST:
            return LOST, "L", "LOST (runs again)"
        if report.when == "setup" and report.skipped:
            facts = self.facts(report)
            if facts is not None and facts.status == Status.COMPLETED:
                return ALREADY_COMPLETED, "c", "ALREADY COMPLETED"
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Persist a phase's news before any reporter sees it, then let the breaker judge. A
        remote phase's result is brought in first: it decides whether the phase completed."""
        facts = self.facts(report)
        if facts is None:
            return
        if facts.remote is not None and self.run.decides:
            facts = self._brought_back(report, facts)
        if facts.phase == FINAL_NAME:  # no plan has a phase of that name: refused
            self.final.reported(report, facts)
            return
        self.run.record(facts)
        self.nodeids[facts.phase] = report.nodeid
        recorder = self.maestro.life.recorder
        if recorder is not None:
            recorder.record_end(facts)
            told = self.maestro.completed
            completed = report.when == "call" and facts.status is Status.COMPLETED
            if told is not None and completed and recorder.unwritable is None:
                # Written, and visible to what the phase held back; synced just after, while
                # what starts now gets going: before any reporter sees the report all the same.
                told(facts.phase)
            recorder.settle()
            if recorder.unwritable is not None:
                self._stop(recorder.unwritable)
        if self.run.decides:
            stop = self.maestro.life.phase_finished(facts)
            if stop is not None:
                self._stop(stop)
            elif facts.status in (Status.FAILED, Status.BLOCKED):
                self._check_breaker()
        phase = self.maestro.plan.phase(facts.phase)
        agent, wave = self.maestro.resolve.agent_name(phase), self.run.graph.wave(phase.id)
        junit.record_phase(self.config, report, facts, agent, wave)

    def _brought_back(self, report: pytest.TestReport, facts: PhaseFacts) -> PhaseFacts:
        """A remote phase's result brought into the user's tree (``run/remote.py``); the report
        carries the facts as they stand then, and fails when a passed phase did not come back."""
        from ..run.remote import brought_back

        brought = brought_back(self.maestro.life, facts)
        brought.facts.attach(report)  # its diff and logs left out: they are in, or kept
        self.facts.forget(report)
        lines = "".join(f"\n--- {line}" for line in brought.lines)
        if brought.refused is not None and report.passed:
            report.outcome = "failed"
            report.longrepr = f"phase {facts.phase!r} passed on its worker, but{lines}"
        elif lines and report.failed and isinstance(report.longrepr, str):
            report.longrepr += lines
        return brought.facts

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.run.decides and not self.config.option.collectonly:
            if self.run.stop_reason is not None:
                self._report_doomed()
            unrun_final = self.final.unrun()  # before the phases left are reported skipped
            self._report_unrun()
            if unrun_final is not None:
                nodeid = self._nodeid(FINAL_NAME)
                if nodeid is not None:
                    self.final.report_skip(nodeid, unrun_final, self._why_stopped())
            junit.record_session(self.config, self.maestro.plan, self.run.outcomes)
            remember_failed(self.config, (self.nodeids[p] for p in self.run.skipped_after_failure))
            remember_failed(self.config, self.final.rerun(self._nodeid))
            cache = getattr(self.config, "cache", None)
            if cache is not None:
                cache.set(durations_key(self.maestro.plan_path), self.run.durations)
        try:
            self.maestro.life.close(outputs=self.looped and self.run.refused is None)
        except StateError as exc:  # a full disk: the journal keeps what the snapshot lacks
            self.maestro.life.notes.append(str(exc))
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.cleanup.close()

    def pytest_unconfigure(self) -> None:
        self.cleanup.close()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.run.decides:  # an xdist worker's header is shown nowhere
            return []
        workers = config.getoption("numprocesses", None)
        workers = workers if isinstance(workers, int) else 0
        return header_lines(self.maestro, config.invocation_params.dir, workers)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        written = self.maestro.life.written
        if written is not None or self.maestro.life.notes:
            terminalreporter.section("maestro", sep="-")
        if written is not None:  # in the process that decides, which wrote the outputs
            from ..views.outputs import summary_lines

            cwd = self.config.invocation_params.dir
            for line in summary_lines(written, self.maestro.paths, cwd, table_width()):
                terminalreporter.line(line)
        if written is not None and self.interrupted:
            for row in written.run.rows:
                if row.status == Status.IN_PROGRESS:  # stopped mid-phase: not failed, not done
                    terminalreporter.write_line(
                        f"maestro: phase {row.id!r} was interrupted ({self.interrupted}); the "
                        "next run runs it again, its declared files put back first (its review "
                        "loop goes on from its last review where the files are as it saw them)"
                    )
        if self.run.resumed:
            terminalreporter.write_line(
                f"maestro: {self.run.resumed} phase(s) completed in an earlier run were not run "
                "again (--maestro-fresh runs every phase)"
            )
        for note in self.maestro.life.notes:
            terminalreporter.line(note)
        maestro = self.maestro
        warnings = [*maestro.plan.warnings, *maestro.resolve.warnings()]
        if warnings:
            terminalreporter.section("maestro plan warnings", sep="-", yellow=True)
            for warning in warnings:
                terminalreporter.line(warning)

    def _check_breaker(self) -> None:
        if self.run.stop_reason is not None:
            return  # already stopping
        reason = self.run.breaker_verdict()
        if reason is not None:
            self._stop(reason)

    def _stop(self, reason: str) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.maestro.life.recorder is not None:
            self.maestro.life.recorder.stop(reason)
        stop_session(self.config, self.pytest_session, reason)

    def _report_unrun(self) -> None:
        """After a stop (-x, Ctrl-C, the breaker, the budget), every selected phase that did not
        run is reported skipped with the reason: the summary, JUnit and --lf account for all."""
        unrun = [p for p in self.run.topological(self.run.selected) if p not in self.run.outcomes]
        if not unrun:
            return
        reason = SkipReason.stopped(self._why_stopped())
        for phase_id in unrun:
            nodeid = self._nodeid(phase_id)
            if nodeid is not None:
                report_skip(self.config, self.maestro.plan, nodeid, reason)

    def _why_stopped(self) -> str:
        return self.interrupted or stop_message(self.config, self.pytest_session) or "stopped early"

    def _nodeid(self, phase_id: str) -> str | None:
        if phase_id in self.nodeids:
            return self.nodeids[phase_id]
        if self.pytest_session is not None:
            for item in self.pytest_session.items:
                if isinstance(item, PhaseItem | FinalItem) and item.name == phase_id:
                    return item.nodeid
        known = next(iter(self.nodeids.values()), None)  # under xdist: as reports name phases
        return str(NodeId.of(known).sibling(phase_id)) if known else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        self.looped = True
        self._freeze()
        try:
            return (yield)
        except KeyboardInterrupt as stop:
            self.interrupted = str(stop) or "interrupted"
            raise

    def _freeze(self) -> None:
        """What start-up made (pytest's objects and this plugin's, the plan), then what
        collection made (the items), lives as long as the run: out of the cyclic collector's
        sight, so that neither the collections that collecting the phases and running them set
        off nor pytest's own at its end walk it again (a tenth of a millisecond or more a phase,
        and a third of collecting 10,000). The young garbage is collected first, so that
        nothing a finalizer would close stays frozen; a full collection would cost each of
        eight workers on two cores 50 ms before its first phase. All is given back once
        pytest's unconfigure hooks are done, unless something else froze objects meanwhile
        (a conftest, a plugin): ``gc.unfreeze`` would thaw theirs too, so all stay frozen."""
        if not self.frozen:
            if not _may_freeze():
                return
            self.frozen = True
            self.config.add_cleanup(self._unfreeze)
        elif self._others_froze():
            return
        gc.collect(1)
        gc.freeze()
        self.left_frozen = gc.get_freeze_count()

    def _others_froze(self) -> bool:
        """Whether something else froze objects since this run last did: the count only falls
        as frozen objects are freed, and grows when more are frozen."""
        return gc.get_freeze_count() > self.left_frozen

    def _unfreeze(self) -> None:
        if not self._others_froze():  # all of them this run's
            gc.unfreeze()

    def _report_doomed(self) -> None:
        """After the breaker, the phases that failures doomed are reported skipped, as they are
        without it: the summary, the JUnit file and ``--lf`` count them. (Under xdist the
        scheduler has already reported them; without it the loop stopped before them.)"""
        if self.pytest_session is None:
            return
        items = self.pytest_session.items
        nodeids = {i.phase.id: i.nodeid for i in items if isinstance(i, PhaseItem)}
        for phase_id in self.run.doomed():
            if phase_id in nodeids:
                reason = self.run.why_not_run(phase_id, scheduled=True) or _NOT_RUN
                report_skip(self.config, self.maestro.plan, nodeids[phase_id], reason)


_NOT_RUN = SkipReason(SkipKind.DEPENDENCY, "not run")


def _may_freeze() -> bool:
    """Whether the run freezes what start-up made (``gc.freeze``): not where the collector
    has none (PyPy), nor on a free-threaded build (3.13.0 could miscount references there), nor
    where something froze objects already (a host that shares memory with its forks, an outer
    run in this process): ``gc.unfreeze`` would thaw theirs too."""
    return (
        hasattr(gc, "freeze")
        and not sysconfig.get_config_var("Py_GIL_DISABLED")
        and gc.get_freeze_count() == 0
    )
