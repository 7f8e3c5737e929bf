"""Orchestrator: one plan as one ``pytest --maestro`` run executes it, without pytest.

It holds what every process of the run shares (settings, plan, graph, project root, agents), the
run's :class:`RunState`, and, where reports arrive, the session state's :class:`Recorder`. It
answers how a phase runs (runtime, timeout, markers) and runs it.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import signal
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ..files.places import log_path
from ..git import commit
from ..isolation.worktree import Isolation, IsolationError
from ..phase.budget import Budget
from ..phase.events import Progress
from ..phase.facts import PhaseFacts
from ..phase.outcome import PhaseOutcome
from ..phase.prompt import PromptContext, SessionContext, prompter
from ..phase.runner import PhaseRunner, RunConfig
from ..phase.slots import AccountSlots
from ..plan import Phase
from ..plan.errors import location
from ..plan.graph import PlanGraph
from ..plan.paths import real_paths
from ..processes.leftovers import end_groups, read_running_record, running_records, tell_owners
from ..processes.process import KILL_GRACE
from ..runtimes import Runtime
from ..runtimes.agents import Agent, AgentRegistry, generic_agent, normalise
from ..runtimes.cli import ignored_field_lines
from ..settings import Settings, SettingsError
from ..state import SessionPaths, StateError, Status
from ..state.aside import move_aside
from ..texts import os_error_text
from ..views.outputs import Written, write_outputs
from .recorder import Recorder
from .run_state import RunState


def marker_name(text: str) -> str:
    """A marker name usable with ``-m``: letters, digits and underscores."""
    name = re.sub(r"\W+", "_", text.strip()).strip("_").lower()
    return name if name and not name[0].isdigit() else f"_{name}"


class Orchestrator:
    def __init__(
        self,
        settings: Settings,
        graph: PlanGraph,
        root: Path,
        *,
        agent_dirs: Iterable[Path],
        decides: bool,
        runtimes: Mapping[str, Runtime],
        durations: dict[str, float] | None = None,
    ) -> None:
        self.settings = settings
        self.plan = plan = graph.plan
        self.plan_path = plan.path.resolve()
        self.root = root
        # Symlinks inside the root resolved: two names of one file are one to the scheduler.
        declared = (path for phase in plan.phases for path in (*phase.files.all(), *phase.reads))
        self.graph = graph.with_aliases(real_paths(root, declared))
        self.state_dir = root / settings.state_dir
        self.log_dir = self.state_dir / "logs"
        self.paths = SessionPaths.for_plan(self.state_dir, plan, root)  # the session's files
        self.agents = AgentRegistry.load(_unique(agent_dirs))
        self.runtimes = dict(runtimes)
        self.run = RunState(
            self.graph,
            decides=decides,
            durations=durations,
            breaker_threshold=settings.circuit_breaker,
        )
        self.recorder: Recorder | None = None  # the session state, where reports arrive
        cap = settings.budget_usd or None
        self.budget = Budget(self.state_dir / f"{self.paths.name}.spend", cap)
        self.slots = AccountSlots(self.state_dir, self.paths.name, settings.call_limits)
        self.warnings: list[str] = []  # for the terminal summary, beside the plan's
        self.notes: list[str] = []  # what the run did that users should know of
        self.progress: Progress | None = None  # told when a phase starts, retries, waits
        self.written: Written | None = None  # the run's summary and report, once it ended
        self.refused: str | None = None  # why the run ran nothing at all (``cannot_run``)
        self.isolation = self._isolation() if settings.isolate == "worktree" else None

    def _isolation(self) -> Isolation:
        include = (*self.plan.isolate_include, *self.settings.include)
        try:
            return Isolation.for_root(self.root, self.state_dir, self.paths.name, include)
        except IsolationError as exc:
            raise SettingsError(str(exc)) from None

    # -- the session state ---------------------------------------------------------------------

    def open_state(self, parallel: bool) -> None:
        """Lock and resume the plan's session; StateError when it cannot be used."""
        if self.settings.fresh:  # whatever is in the way of a new session goes aside
            try:
                self.notes += move_aside(self.state_dir, self.paths.name)
            except OSError as exc:
                raise StateError(f"--maestro-fresh: {os_error_text(exc)}") from None
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(
                f"cannot use {self.log_dir} for the phases' logs: {exc.strerror}; it must be a "
                "directory this tool can write (--maestro-fresh moves aside what is in the way)"
            ) from None
        recorder = Recorder.open(self.state_dir, self.plan, self.root, self.settings.fresh)
        try:
            self.budget.reset()  # --maestro-budget-usd caps this run
            self.slots.reset()
            self.notes += [
                f"after a killed run: phase {pid!r}: {r.line(Path.cwd())}"
                for pid, r in recorder.restored
            ]
            recorder.store.set_session(execution_mode="parallel" if parallel else "sequential")
            if self.isolation is not None:
                kept = self.isolation.start()
                self.notes += [f"after a killed run: {line}" for line in kept]
        except BaseException as exc:
            recorder.close()  # no run, and pytest ends no session it never started
            if isinstance(exc, IsolationError | OSError):
                raise StateError(_start_error(exc)) from None
            raise
        self.recorder = recorder
        self.run.resume(
            {pid: when for pid in self.plan.ids if (when := recorder.completed_earlier(pid))}
        )

    def close_state(self, outputs: bool = True) -> None:
        """Close the session, then write the run's summary and report from what it holds, unless
        not ``outputs`` (a run refused before any phase could start leaves those of the last)."""
        if self.isolation is not None:
            try:
                self.isolation.close()  # this process's worktree
                if self.recorder is not None:
                    self.notes += self.isolation.finish()  # and any a crashed worker left
            except (IsolationError, OSError) as exc:
                self.notes.append(f"worktrees not cleaned up: {exc}")
        recorder, self.recorder = self.recorder, None
        if recorder is None:
            return
        try:
            recorder.close()
            if lag := recorder.store.lag:
                lagged = f"session file {self.paths.snapshot} lagged the run: {lag}"
                self.notes.append(f"{lagged}; its journal kept every change")
        finally:  # a fold the disk refused still leaves the run's outputs, from memory
            if outputs and self.refused is None:
                report = Path(self.settings.report) if self.settings.report else None
                final = recorder.store.document()
                self.written = write_outputs(
                    final, self.plan.ids, self.state_dir, report, os.environ, self.plan.done_ids,
                    account_wait=self.slots.waited(),
                )  # fmt: skip
                self.notes += self.slots.take_notes()

    # -- phases --------------------------------------------------------------------------------

    def stop_running(self) -> None:
        """The run is stopped by a signal to the controller, which does not reach its workers:
        each worker running a phase is told as pytest was (SIGTERM), so that it takes its
        command's end for the stop it is, never for a failed attempt to retry; then the groups
        their commands lead are ended here too, in case a worker cannot end them."""
        tell_owners(running_records(self.log_dir, self.paths.name), signal.SIGTERM)
        self.end_running()

    def end_running(self, phase_id: str | None = None, grace: float = KILL_GRACE) -> list[int]:
        """End the process groups the running records of this plan name (of one phase, or all):
        a crashed worker's phase, or everything when the run itself is stopped by a signal."""
        groups = [
            group
            for path in running_records(self.log_dir, self.paths.name)
            for record in (read_running_record(path),)
            if phase_id is None or record.phase == phase_id
            for group in record.groups
        ]
        return end_groups(groups, grace)

    def where(self, phase: Phase) -> str:
        return f"{location(self.plan.path, phase.line)}: phase {phase.id!r}"

    def defined_agent(self, phase: Phase) -> Agent | None:
        """The definition of the phase's agent, if some directory or the built-ins have it."""
        return self.agents.get(phase.agent) if phase.agent else None

    def agent(self, phase: Phase) -> Agent | None:
        """The phase's agent: its definition, else a generic role of its name."""
        if not phase.agent:
            return None
        return self.defined_agent(phase) or generic_agent(phase.agent)

    def check_agents(self) -> str | None:
        """An error line for a shell phase naming an agent no directory defines (a typo: its
        timeout would be lost); a warning for the agents that LLM phases will play generically."""
        generic: dict[str, str] = {}  # normalised name -> as first written
        for phase in self.plan.phases:
            if not phase.agent or self.defined_agent(phase) is not None:
                continue
            if self.runtime_name(phase) == "shell":
                names = self.agents.names()
                close = difflib.get_close_matches(phase.agent, names, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                return (
                    f"{self.where(phase)} names unknown agent {phase.agent!r}; "
                    f"{hint}available: {', '.join(names)}"
                )
            generic.setdefault(normalise(phase.agent), phase.agent)
        if generic:
            looked = ", ".join(str(d) for d in self.agents.searched) or "nowhere"
            self.warnings.append(
                f"agents defined nowhere, played by a generic role of their name: "
                f"{', '.join(generic.values())} (looked in {looked}, then the built-ins)"
            )
        return None

    def ignored_agent_fields(self) -> list[str]:
        """A line for each agent whose ``tools:`` or ``temperature:`` its runtime is not given."""
        uses = ((self.defined_agent(p), self.runtime_name(p) or "") for p in self.plan.phases)
        return ignored_field_lines((a, n, self.runtimes.get(n)) for a, n in uses if a)

    def markers(self, phase: Phase) -> list[str]:
        names = [f"wave_{self.graph.wave(phase.id)}"]
        if phase.agent:
            names.append(marker_name(phase.agent))
        names += [marker_name(tag) for tag in (*self.plan.tags, *phase.tags)]
        return names

    def marker_lines(self) -> Iterator[str]:
        names = {m for phase in self.plan.phases for m in self.markers(phase)}
        for name in sorted(names):
            yield f"{name}: pytest-maestro phase marker (agent, wave or tag)"

    def runtime_name(self, phase: Phase) -> str | None:
        """The phase's own runtime, else its agent's, else ``--maestro-runtime``, else ``shell``
        when it has ``run:`` commands; None: nothing can run it."""
        agent = self.defined_agent(phase)
        for runtime in (phase.runtime, agent.runtime if agent else None, self.settings.runtime):
            if runtime:
                return runtime
        return "shell" if phase.run else None

    def agent_name(self, phase: Phase) -> str:
        return phase.agent or self.runtime_name(phase) or "none"

    def cannot_run(self, selected: Iterable[str]) -> str | None:
        """Why the first selected phase that cannot run at all cannot, or None: refused before
        anything runs rather than failed half-way through the plan (and then ``refused``)."""
        self.refused = self._refusal(selected)
        return self.refused

    def _refusal(self, selected: Iterable[str]) -> str | None:
        needs_consent: dict[str, Runtime] = {}
        for phase_id in selected:
            phase = self.plan.phase(phase_id)
            if phase.done:  # skipped: it needs nothing to run it
                continue
            name = self.runtime_name(phase)
            if name is None:
                return (
                    f"{self.where(phase)} has nothing to run: give it 'run:' commands, or an "
                    f"agent CLI to hand it to (--maestro-runtime: {', '.join(self.llm_runtimes())})"
                )
            runtime = self.runtimes.get(name)
            if runtime is None:
                whose = f"agent {phase.agent!r}" if phase.agent else "--maestro-runtime"
                return (
                    f"{self.where(phase)} needs runtime {name!r} ({whose}), which no installed "
                    f"plugin provides; available: {', '.join(sorted(self.runtimes))}"
                )
            if name == "shell" and not phase.run:
                agent = self.defined_agent(phase)
                why = (
                    f"its agent {agent.name!r} ({agent.path}) says runtime: shell, which runs "
                    "'run:' commands"
                    if agent and agent.runtime == "shell" and agent.path
                    else "shell runs 'run:' commands"
                )
                return (
                    f"{self.where(phase)} has nothing to run: {why}; give it 'run:' commands, "
                    "or an agent whose runtime is an agent CLI"
                )
            if runtime.autonomy and edits(phase) and not self.settings.autonomous:
                needs_consent.setdefault(name, runtime)
        if needs_consent:
            allows = "; ".join(f"{n}: {r.autonomy}" for n, r in needs_consent.items())
            return (
                f"phases go to agent CLIs ({', '.join(needs_consent)}) that can change files and "
                f"run commands in {self.root}: run with --maestro-autonomous to let them do so "
                f"without asking ({allows})"
            )
        return None

    def llm_runtimes(self) -> list[str]:
        return sorted(name for name, runtime in self.runtimes.items() if runtime.autonomy)

    def timeout(self, phase: Phase) -> float:
        """Seconds per attempt unless the phase sets its own: the agent's ``timeout_mins``,
        else ``--maestro-timeout``."""
        agent = self.defined_agent(phase)
        if agent is not None and agent.timeout_mins is not None:
            return agent.timeout_mins * 60
        return self.settings.timeout

    def phase_started(self, phase: Phase, worker: str | None = None) -> None:
        """On disk before the phase starts: a killed run leaves it in progress, to be reset."""
        if self.recorder is not None:
            self.recorder.started(phase, self.agent_name(phase), worker)

    def phase_finished(self, facts: PhaseFacts) -> str | None:
        """After a phase's news is on disk (controller only): commit its files under
        ``--maestro-commit``, note what users should know, and say why the run must stop."""
        phase = self.plan.phase(facts.phase)
        ran = facts.skip is None
        if ran and facts.outside:
            self.notes.append(
                f"phase {phase.id!r} changed files outside its declared ones: "
                + ", ".join(facts.outside)
            )
        if ran and facts.unverified:
            self.notes.append(
                f"phase {phase.id!r} passed unverified: no acceptance command checked the "
                "agent's work"
            )
        self.notes += [f"phase {phase.id!r}: warning: {w}" for w in facts.warnings or ()]
        if ran and facts.status == Status.COMPLETED and self.settings.commit:
            said = commit(self.root, phase.files.all(), f"{phase.id}: {phase.name}")
            self.notes.append(f"phase {phase.id!r}: {said}")
        if self.budget.session_cap is not None and ran:
            spent = self.budget.spent()
            if spent >= self.budget.session_cap:
                return (
                    f"the run's budget of ${self.budget.session_cap:g} is spent "
                    f"(${spent:.4f}; --maestro-budget-usd)"
                )
        return None

    def model(self, phase: Phase) -> str | None:
        """The phase's model, else its agent's, else ``--maestro-model``."""
        agent = self.agent(phase)
        return phase.model or (agent.model if agent else None) or self.settings.model

    def run_phase(self, phase: Phase) -> PhaseOutcome:
        name = self.runtime_name(phase)
        assert name is not None, "cannot_run refuses a phase without a runtime"
        runtime = self.runtimes[name]
        agent_cli = name != "shell"  # an agent's word needs proof; a command's exit code is one
        config = RunConfig(
            plan=self.plan,
            root=self.root,
            log_dir=self.log_dir,
            session=self.paths.name,
            timeout=self.timeout(phase),
            check_timeout=self.settings.check_timeout,
            max_retries=self.settings.max_retries,
            agent=self.agent(phase),
            model=self.model(phase),
            autonomous=self.settings.autonomous,
            agent_cli=agent_cli,
            strict_files=self.settings.strict_files,
            max_wait=self.settings.max_wait,
            budget=self.budget,
            ignored=(self.state_dir.relative_to(self.root).as_posix() + "/",),
            # In a worktree of its own, no change is another phase's.
            concurrent_files=self.concurrent_files(phase)
            if agent_cli and self.isolation is None
            else frozenset(),
            log_limit=int(self.settings.log_limit * 1024 * 1024),
            isolation=self.isolation,
            progress=self.progress,
            plan_path=self.plan_path,
            slots=self.slots,
        )
        context = self.prompt_context(phase) if agent_cli else PromptContext(self.plan)
        runner = PhaseRunner(config, runtime, prompter(context, log_path(self.log_dir, phase.id)))
        return dataclasses.replace(runner.run(phase), warnings=context.warnings)

    def concurrent_files(self, phase: Phase) -> frozenset[str]:
        """Files declared by phases that may run beside this one (on other xdist workers): a
        change to them is theirs, not this phase's."""
        if self.run.decides:  # in one process, phases run one at a time
            return frozenset()
        return frozenset(
            path
            for other in self.plan.phases
            if other.id != phase.id and self.graph.may_run_concurrently(phase.id, other.id)
            for path in other.files.all()
        )

    def prompt_context(self, phase: Phase) -> PromptContext:
        """The agent, the session and what the phase's dependencies handed on, read from the
        session file (a worker reads it too: the controller wrote them before sending it)."""
        session = SessionContext.read(self.plan, phase, self.paths.snapshot)
        return PromptContext(
            self.plan,
            self.agent(phase),
            session.session_id,
            session.dependencies,
            wave=self.graph.wave(phase.id),
            runtime=self.runtime_name(phase) or "agent",
            warnings=session.warnings,
        )


def edits(phase: Phase) -> bool:
    """Whether a phase may change files: it declares some to write, or declares no files at
    all (formats without file lists). Only one that declares reads and no writes is read-only."""
    return bool(phase.files.writes) or not phase.reads


def _unique(paths: Iterable[Path]) -> list[Path]:
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _start_error(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return f"cannot start the run: {os_error_text(error)}"
    return str(error)
