"""The session plugin: one per ``pytest --maestro`` run, registered by ``plugin.py``.

It owns the loaded plan, the project root, the agents, this run's phase outcomes and (on the
controller) the session state, and answers the pytest hooks that need them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

import pytest

from . import junit
from .agents import AgentRegistry
from .breaker import breaker_verdict, doomed_by_failures
from .collect import PhaseItem, PlanFile, SyncItem, marker_name
from .facts import NOT_SELECTED, STATUS_WORDS, phase_facts, skip_facts
from .ordering import stable_topological
from .plan import Phase, Plan
from .plan.errors import location
from .plan.graph import PlanGraph
from .prompt import build_prompt
from .recorder import EARLIER, Recorder
from .runner import PhaseOutcome, PhaseRunner, RunConfig
from .runtimes import AVAILABLE, get_runtime
from .settings import Settings
from .state import StateError

# Why a phase did not run, as the skip reason shows it and the session state records it.
DEFAULT_DURATION = 1.0


class MaestroSession:
    def __init__(self, config: pytest.Config, settings: Settings, plan: Plan, root: Path) -> None:
        self.config = config
        self.settings = settings
        self.plan = plan
        self.graph = PlanGraph(plan)
        self.root = root
        self.state_dir = root / settings.state_dir
        self.on_worker = hasattr(config, "workerinput")
        self.outcomes: dict[str, str] = {}  # phase id -> status in this run
        self.selected: set[str] = set(plan.ids)
        self.agents = AgentRegistry.load(self._agent_dirs())
        self.plan_path = plan.path.resolve()
        # Seconds each phase took when it last completed, kept in pytest's cache across runs.
        self.durations: dict[str, float] = self._cached_durations()
        self.recorder: Recorder | None = None  # the session state; only where reports arrive
        self.pytest_session: pytest.Session | None = None
        self.skipped_after_failure: set[str] = set()  # node ids, for --lf
        self.sync_item: SyncItem | None = None  # collected on xdist workers only
        self.stopped_by_breaker = False
        self.resumed = 0  # phases skipped in this run as completed in an earlier one

    # -- collection -------------------------------------------------------------------------

    def _agent_dirs(self) -> list[Path]:
        candidates = [self.plan.path.parent / "agents", self.root / "agents"]
        candidates.append(self.config.rootpath / "agents")
        unique: list[Path] = []
        for path in candidates:
            if path.resolve() not in [u.resolve() for u in unique]:
                unique.append(path)
        return unique

    def _durations_key(self) -> str:
        return "maestro/durations/" + hashlib.sha256(str(self.plan_path).encode()).hexdigest()[:12]

    def _cached_durations(self) -> dict[str, float]:
        cache = getattr(self.config, "cache", None)
        if cache is None or self.on_worker:
            return {}
        found = cache.get(self._durations_key(), {})
        return {k: float(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def check_agents(self) -> None:
        for phase in self.plan.phases:
            if phase.agent and self.agents.get(phase.agent) is None:
                raise pytest.Collector.CollectError(
                    f"{_where(self.plan, phase)}: phase {phase.id!r} names unknown agent "
                    f"{phase.agent!r}; available: {', '.join(self.agents.names())}"
                )

    def run_order(self) -> list[Phase]:
        """Topological order, the phase with the longest remaining path first among the ready."""
        estimated = {p.id for p in self.plan.phases if p.estimate is not None}
        measured = {p: s for p, s in self.durations.items() if p not in estimated}
        return [self.plan.phase(i) for i in self.graph.critical_order(measured)]

    def markers(self, phase: Phase) -> list[str]:
        names = [f"wave_{self.graph.wave(phase.id)}"]
        if phase.agent:
            names.append(marker_name(phase.agent))
        names += [marker_name(tag) for tag in (*self.plan.tags, *phase.tags)]
        return names

    def marker_lines(self) -> Iterable[str]:
        names = {m for phase in self.plan.phases for m in self.markers(phase)}
        for name in sorted(names):
            yield f"{name}: pytest-maestro phase marker (agent, wave or tag)"

    @pytest.hookimpl
    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> PlanFile | None:
        if file_path.resolve() == self.plan_path:
            return PlanFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """After every deselection (``-k``, ``-m``, ``--lf``): what runs, in which order.

        The order pytest's options chose (``--ff``) is kept where dependencies allow it. The
        worker's sync item survives any deselection: the scheduler cannot work without it.
        """
        phases = [i for i in session.items if isinstance(i, PhaseItem)]
        by_id = {item.phase.id: item for item in phases}
        order = stable_topological([i.phase.id for i in phases], self.plan)
        session.items[:] = [by_id[i] for i in order]
        if self.sync_item is not None:
            session.items.append(self.sync_item)
        self.selected = set(by_id)
        if not self.config.option.collectonly and not self.on_worker:
            refusal = self.cannot_run(by_id)
            if refusal is not None:
                raise pytest.UsageError(refusal)

    def cannot_run(self, selected: Iterable[str]) -> str | None:
        """Why the first selected phase that cannot run at all cannot, or None: refused before
        anything runs rather than failed half-way through the plan."""
        for phase_id in selected:
            phase = self.plan.phase(phase_id)
            runtime = self.runtime_name(phase)
            where = f"{_where(self.plan, phase)}: phase {phase.id!r}"
            if runtime not in AVAILABLE:
                return (
                    f"{where} needs runtime {runtime!r} (agent {phase.agent!r}), which this "
                    f"version does not provide; available: {', '.join(AVAILABLE)}"
                )
            if not phase.run and runtime == "shell":
                return f"{where} has nothing to run: give it 'run:' commands"
        return None

    # -- running ----------------------------------------------------------------------------

    def runtime_name(self, phase: Phase) -> str:
        agent = self.agents.get(phase.agent) if phase.agent else None
        return agent.runtime if agent else "shell"

    def why_not_run(self, phase: Phase, scheduled: bool = False) -> str | None:
        """Why a phase must not run now, or None. Workers trust the controller to know."""
        if self.on_worker:
            return None
        if self.recorder is not None:
            earlier = self.recorder.skip_reason(phase)
            if earlier:
                return earlier
        for dep in phase.blocked_by:
            status = self.outcomes.get(dep)
            if status == "completed":
                continue
            if status is not None:
                return f"dependency {dep!r} {STATUS_WORDS[status]}"
            if dep not in self.selected:
                if self.recorder is not None and self.recorder.completed_earlier(dep):
                    continue
                return f"dependency {dep!r} {NOT_SELECTED}"
            if not scheduled:  # under -n the scheduler runs it first; in order it already ran
                return f"dependency {dep!r} has not run yet"
        return None

    def phase_started(self, phase: Phase, worker: str | None = None) -> None:
        """On disk before the phase starts: a killed run leaves it in progress, to be reset."""
        if self.recorder is not None:
            self.recorder.started(phase, phase.agent or self.runtime_name(phase), worker)

    def run_phase(self, phase: Phase) -> PhaseOutcome:
        config = RunConfig(
            plan=self.plan,
            root=self.root,
            log_dir=self.state_dir / "logs",
            timeout=self.timeout(phase),
            check_timeout=self.settings.check_timeout,
            max_retries=self.settings.max_retries,
        )
        runner = PhaseRunner(config, get_runtime(self.runtime_name(phase)), build_prompt)
        return runner.run(phase)

    def timeout(self, phase: Phase) -> float:
        """Seconds per attempt unless the phase sets its own: the agent's ``timeout_mins``,
        else ``--maestro-timeout``."""
        agent = self.agents.get(phase.agent) if phase.agent else None
        if agent is not None and agent.timeout_mins is not None:
            return agent.timeout_mins * 60
        return self.settings.timeout

    def duration(self, phase: Phase) -> float:
        """Expected seconds: the plan's estimate, else the last measured run, else 1."""
        if phase.estimate is not None:
            return phase.estimate
        return self.durations.get(phase.id, DEFAULT_DURATION)

    def topological(self, ids: Iterable[str]) -> list[str]:
        position = {pid: n for n, pid in enumerate(self.plan.ids)}
        return stable_topological(sorted(ids, key=position.__getitem__), self.plan)

    def report_skip(self, nodeid: str, phase_id: str) -> None:
        """Report, on the controller, a phase that will not be sent to a worker."""
        phase = self.plan.phase(phase_id)
        reason = self.why_not_run(phase, scheduled=True) or "not run"
        location = (str(self.plan.path), (phase.line or 1) - 1, f"phase {phase.id}: {phase.name}")
        hook = self.config.hook
        hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        setup = pytest.TestReport(
            nodeid,
            location,
            {},
            "skipped",
            (str(self.plan.path), phase.line or 0, f"Skipped: {reason}"),
            "setup",
        )
        setup.maestro = skip_facts(phase_id, reason)  # type: ignore[attr-defined]
        hook.pytest_runtest_logreport(report=setup)
        hook.pytest_runtest_logreport(
            report=pytest.TestReport(nodeid, location, {}, "passed", None, "teardown")
        )
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> bool | None:
        return True if isinstance(item, SyncItem) else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if isinstance(item, PhaseItem):
            facts = phase_facts(item, report)
            if facts is not None:
                report.maestro = facts  # type: ignore[attr-defined]  # travels with xdist reports
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        facts: dict[str, Any] | None = getattr(report, "maestro", None)
        if facts is None:
            return
        self.outcomes[facts["phase"]] = facts["status"]
        if str(facts.get("reason", "")).startswith(EARLIER):
            self.resumed += 1
        if facts["status"] == "completed" and "duration" in facts:
            self.durations[facts["phase"]] = facts["duration"]
        if facts.get("after_failure"):
            self.skipped_after_failure.add(report.nodeid)
        if self.recorder is not None:
            self.recorder.finished(facts)
            if facts["status"] in ("failed", "blocked"):
                self._check_breaker()
        phase = self.plan.phase(facts["phase"])
        facts = {
            "agent": phase.agent or self.runtime_name(phase),
            "wave": self.graph.wave(phase.id),
            **facts,
        }
        junit.record_phase(self.config, report, facts)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        if self.stopped_by_breaker and not self.on_worker:
            self._report_doomed()
        if not self.on_worker:
            junit.record_session(self.config, self.plan, self.outcomes)
            self._remember_skipped_after_failure()
            cache = getattr(self.config, "cache", None)
            if cache is not None:
                cache.set(self._durations_key(), self.durations)
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Lock and resume the plan's session, where reports arrive and phases really run."""
        self.pytest_session = session
        if self.on_worker or self.config.option.collectonly:
            return
        try:
            self.recorder = Recorder.open(self.state_dir, self.plan, self.root, self.settings.fresh)
        except StateError as exc:
            raise pytest.UsageError(str(exc)) from None
        parallel = self.config.pluginmanager.get_plugin("dsession") is not None
        self.recorder.store.set_session(execution_mode="parallel" if parallel else "sequential")

    def _remember_skipped_after_failure(self) -> None:
        """pytest's cache forgets skipped tests, but ``--lf`` must rerun what a failure blocked.

        Runs before the cache plugin's own sessionfinish writes ``cache/lastfailed``.
        """
        lfplugin = self.config.pluginmanager.get_plugin("lfplugin")
        if lfplugin is not None:
            lfplugin.lastfailed.update(dict.fromkeys(self.skipped_after_failure, True))

    def _check_breaker(self) -> None:
        reason = breaker_verdict(
            self.plan, self.selected, self.outcomes, self.settings.circuit_breaker
        )
        if reason is None or self.recorder is None:
            return
        self.recorder.stop(reason)
        self.stopped_by_breaker = True
        if self.pytest_session is not None:
            self.pytest_session.shouldstop = reason
        dsession = self.config.pluginmanager.get_plugin("dsession")
        if dsession is not None and not dsession.shouldstop:
            dsession.shouldstop = reason

    def _report_doomed(self) -> None:
        """After the breaker, the phases that failures doomed are reported skipped, as they are
        without it: the summary, the JUnit file and ``--lf`` count them. (Under xdist the
        scheduler has already reported them; without it the loop stopped before them.)"""
        session = self.pytest_session
        if session is None:
            return
        doomed = doomed_by_failures(self.plan, self.outcomes)
        for item in session.items:
            if isinstance(item, PhaseItem) and item.phase.id in doomed - self.outcomes.keys():
                self.report_skip(item.nodeid, item.phase.id)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        plan = self.plan
        return [
            f"maestro: {plan.path} ({plan.format}, {len(plan.phases)} phases), root {self.root}"
        ]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.resumed:
            terminalreporter.write_line(
                f"maestro: {self.resumed} phase(s) completed in an earlier run were not run again"
                " (--maestro-fresh runs every phase)"
            )
        if self.plan.warnings:
            terminalreporter.section("maestro plan warnings", sep="-", yellow=True)
            for warning in self.plan.warnings:
                terminalreporter.line(warning)


def _where(plan: Plan, phase: Phase) -> str:
    return location(plan.path, phase.line)
