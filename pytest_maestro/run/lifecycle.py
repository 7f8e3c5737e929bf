"""A run's lifecycle in the process that decides: the session state opened and closed, the
isolation started and finished, what follows each phase's end (a commit, the budget, notes), the
outputs written, and what runs ended when the run is stopped. See docs/architecture.md,
"Session state"."""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..git import commit
from ..isolation import IsolationError
from ..phase.budget import Budget
from ..phase.facts import PhaseFacts
from ..phase.slots import AccountSlots
from ..plan import Phase
from ..plan.graph import PlanGraph
from ..processes.leftovers import end_groups, read_running_record, tell_owners
from ..processes.process import KILL_GRACE
from ..review.base import BaseError, RunBase, declared_files
from ..review.final import FinalRecord, findings_for, named_phases
from ..review.verdict import Review
from ..settings import Settings, SettingsError
from ..state import SessionPaths, StateError, Status
from ..state.aside import move_aside, taken_folders
from ..state.model import PhaseState, now
from ..texts import os_error_text
from ..views.rows import parse_time
from .run_state import RunState

# Every process of a run has a Lifecycle, but only the one that decides opens the session and
# writes the outputs, and only a run with --maestro-isolate isolates: what only those do is
# imported where they do it, so an xdist worker imports none of it.
if TYPE_CHECKING:
    from ..isolation.worktree import Isolation
    from ..remote.ship import Shipper
    from ..views.outputs import Written
    from .recorder import Recorder


class Lifecycle:
    def __init__(
        self, settings: Settings, graph: PlanGraph, root: Path, paths: SessionPaths, run: RunState
    ) -> None:
        self.settings = settings
        self.graph = graph
        self.plan = graph.plan
        self.root = root
        self.paths = paths
        self.state_dir = paths.state_dir
        self.run = run
        self.budget = Budget(paths.spend, settings.budget_usd or None)
        self.slots = AccountSlots(paths, settings.call_limits)  # the account's, shared
        self.recorder: Recorder | None = None  # the session state, once open
        self.notes: list[str] = []  # what the run did that users should know of
        self.written: Written | None = None  # the run's summary and report, once it ended
        self.isolation = self._isolation() if settings.isolate == "worktree" else None
        self.shipper: Shipper | None = None  # the controller's, once a remote phase is sent
        self.base = self._base() if settings.final_review else None  # the final review's

    def _base(self) -> RunBase:
        declared = declared_files([phase.files.all() for phase in self.plan.phases])
        return RunBase(self.root, self.paths, declared)

    def _isolation(self) -> Isolation:
        from ..isolation.worktree import Isolation

        include = (*self.plan.isolate_include, *self.settings.include)
        try:
            return Isolation.for_root(self.root, self.paths, include)
        except IsolationError as exc:
            raise SettingsError(str(exc)) from None

    # -- the session state ---------------------------------------------------------------------

    def open(self, parallel: bool) -> None:
        """Lock and resume the plan's session; StateError when it cannot be used."""
        from .recorder import Recorder

        if self.settings.fresh:  # whatever is in the way of a new session goes aside
            try:
                self.notes += move_aside(self.paths)
            except OSError as exc:
                raise StateError(f"--maestro-fresh: {os_error_text(exc)}") from None
        try:
            self.paths.logs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(
                f"cannot use {self.paths.logs} for the phases' logs: {exc.strerror}; it must be a "
                "directory this tool can write (--maestro-fresh moves aside what is in the way)"
            ) from None
        taken = taken_folders(self.paths)  # each made when first needed: say it now, not then
        if taken:
            raise StateError(
                f"cannot use {taken[0]}: it is not a directory; it must be one this tool can "
                "write (--maestro-fresh moves aside what is in the way)"
            )
        recorder = Recorder.open(self.state_dir, self.graph, self.root, self.settings.fresh)
        try:
            self.budget.reset()  # --maestro-budget-usd caps this run
            self.slots.reset()
            self.notes += [
                f"after a killed run: phase {pid!r}: {r.line(Path.cwd())}"
                for pid, r in recorder.restored
            ]
            self.notes += [
                f"after a killed run: phase {pid!r}: its files stay as {record.point} saw them, "
                + ("which passed" if record.review.passed else "for its review loop to go on")
                for pid, record in recorder.resuming
            ]
            self.notes += [
                f"after a killed run: phase {pid!r}: its review loop starts over: {why}"
                for pid, why in recorder.started_over
            ]
            recorder.store.set_session(execution_mode="parallel" if parallel else "sequential")
            self._send_back(recorder)
            if self.base is not None:
                self._keep_base(recorder)
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

    # -- the final review ----------------------------------------------------------------------

    def _keep_base(self, recorder: Recorder) -> None:
        """The final review's base, taken when the session has none: before its first phase
        ran with the final review on (StateError when it cannot be taken)."""
        assert self.base is not None
        record = FinalRecord.from_mapping(recorder.store.document().final_review)
        if record.base is not None:
            return
        try:
            base = self.base.take()
        except BaseError as exc:
            raise StateError(f"--maestro-final-review: {exc}") from None
        recorder.store.set_final_review(replace(record, base=base, since=now()).to_dict())

    def _send_back(self, recorder: Recorder) -> None:
        """The phases the last final review failed, reset to run again: those still completed
        since before it (a phase that ran since, or was reset, has been dealt with)."""
        doc = recorder.store.document()
        record = FinalRecord.from_mapping(doc.final_review)
        at = parse_time(record.at)
        if record.review is None or at is None:
            return
        resets = {
            pid: f"the final review found: {findings_for(record.review, pid)[0]}"
            for pid in named_phases(record.review, self.plan.ids)
            if pid in doc.phases and _completed_by(doc.phases[pid], at)
        }
        recorder.send_back(resets)
        self.notes += [f"phase {pid!r} runs again: {why}" for pid, why in resets.items()]

    def final_record(self) -> FinalRecord:
        if self.recorder is None:
            return FinalRecord()
        return FinalRecord.from_mapping(self.recorder.store.document().final_review)

    def final_passed(self) -> str | None:
        """When the session's final review passed, if that still holds: every phase completed
        before it. None: it has to run."""
        if self.recorder is None:
            return None
        doc = self.recorder.store.document()
        record = FinalRecord.from_mapping(doc.final_review)
        at = parse_time(record.at)
        if not record.passed or at is None:
            return None
        done = set(self.plan.done_ids)  # never run: as good as completed
        if all(s.id in done or _completed_by(s, at) for s in doc.phases.values()):
            return record.at
        return None

    def final_finished(self, review: Review, started: str | None, at: str) -> tuple[str, ...]:
        """The final review's verdict in the session. A failed one sends the phases it names
        back to work: the next run's ``open`` resets them. Returns those phases."""
        if self.recorder is None:
            return ()
        named = named_phases(review, self.plan.ids)
        record = replace(self.final_record(), review=review, started=started, at=at)
        self.recorder.final_reviewed(record.to_dict(), review.tokens, review.reviewer)
        if review.passed and review.verdict is not None and review.verdict.minor:
            minor = review.verdict.minor  # kept, not failures: said where users look
            self.notes.append(
                f"final review passed with {len(minor)} minor finding"
                f"{'s' if len(minor) > 1 else ''}: " + "; ".join(f.line for f in minor)
            )
        return named

    def close(self, outputs: bool = True) -> None:
        """Close the session, then write the run's summary and report from what it holds, unless
        not ``outputs`` (a run refused before any phase could start leaves those of the last)."""
        if self.shipper is not None:
            self.shipper.finish()  # the refs that named what workers were sent
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
            if outputs:
                from ..views.outputs import write_outputs

                report = Path(self.settings.report) if self.settings.report else None
                final = recorder.store.document()
                ids, done = self.plan.ids, self.plan.done_ids
                waited = self.slots.waited()
                self.written = write_outputs(
                    final, ids, self.paths.summary, report, os.environ, done, account_wait=waited
                )
                self.notes += self.slots.take_notes()

    # -- phases --------------------------------------------------------------------------------

    def stop_running(self) -> None:
        """The run is stopped by a signal to the controller, which does not reach its workers:
        each worker running a phase is told as pytest was (SIGTERM), so that it takes its
        command's end for the stop it is, never for a failed attempt to retry; then the groups
        their commands lead are ended here too, in case a worker cannot end them."""
        tell_owners(self.paths.running_records(), signal.SIGTERM)
        self.end_running()

    def end_running(self, phase_id: str | None = None, grace: float = KILL_GRACE) -> list[int]:
        """End the process groups the running records of this plan name (of one phase, or all):
        a crashed worker's phase, or everything when the run itself is stopped by a signal."""
        groups = [
            group
            for path in self.paths.running_records()
            for record in (read_running_record(path),)
            if phase_id is None or record.phase == phase_id
            for group in record.groups
        ]
        return end_groups(groups, grace)

    def phase_started(self, phase: Phase, agent: str, worker: str | None = None) -> None:
        """The phase in progress in the session, not synced: where a crash would leave files
        to put back, the runner's running record holds the start on disk before it runs."""
        if self.recorder is not None:
            self.recorder.started(phase, agent, worker)

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
        review = Review.from_mapping(facts.review) if ran and facts.review else None
        if review is not None and review.passed and review.verdict and review.verdict.minor:
            minor = review.verdict.minor  # kept, not failures: said where users look
            self.notes.append(
                f"phase {phase.id!r}: review passed with {len(minor)} minor finding"
                f"{'s' if len(minor) > 1 else ''}: " + "; ".join(f.line for f in minor)
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


def _completed_by(state: PhaseState, moment: datetime) -> bool:
    """The phase is completed, and was by ``moment``."""
    completed = parse_time(state.completed)
    return state.status is Status.COMPLETED and completed is not None and completed <= moment


def _start_error(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return f"cannot start the run: {os_error_text(error)}"
    return str(error)
