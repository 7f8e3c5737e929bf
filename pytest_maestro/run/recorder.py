"""The controller's side of the session state: what it writes when, and what resuming means.

Only the process that receives every report writes (the controller under xdist, else the one
process); each transition is on disk before pytest's reporters see it. See ``state/`` for how.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..files.declared import FileSnapshot, UnreadablePreimages, left_as_they_are
from ..files.putback import Restored, RestoreError
from ..phase.facts import PhaseFacts, SkipKind
from ..phase.loop_record import LoopRecord, LoopRecordError, drop, left_off
from ..plan import Files, Phase, Plan
from ..plan.graph import PlanGraph
from ..processes.leftovers import end_groups, read_running_record, spare_log
from ..state import (
    Interrupted,
    PhaseChange,
    PhaseError,
    SessionStore,
    SessionUnwritable,
    StateError,
    Status,
    Tokens,
)
from ..state.journal import fsync_dir
from ..texts import last_line
from ..views.markdown_report import session_report

# Seconds between two rewrites of the session file while the run changes it.
REFRESH = 1.0


class Recorder:
    def __init__(self, store: SessionStore, plan: Plan, root: Path, *, fresh: bool = False) -> None:
        self.store = store
        self._completed: list[str] = []  # ends written, not yet settled: their pre-images stay
        self.plan = plan
        self.root = root
        self.paths = paths = store.paths
        # Phases a killed run left half-done: what they still run is ended, then their declared
        # files are put back from the pre-images taken before their first attempt (never from
        # git, which would lose the user's uncommitted work), before anything runs. The session
        # has them in progress, or the running records of the processes that ran them do (the
        # controller does not wait for its record of a start to reach the disk; a worker does,
        # before the phase runs). A fresh session knows none: every phase with pre-images left
        # (half-done, or done but not yet recorded) is put back, as every phase runs again.
        left = [read_running_record(path) for path in paths.running_records()]
        saved = self._preimages()  # one listing serves the put-back and the drop of stale ones
        self.resuming: list[tuple[str, LoopRecord]] = []  # review loops that may go on
        self.started_over: list[tuple[str, str]] = []  # (phase id, why its loop cannot)
        if fresh:  # the session is new: whatever phase has pre-images left is put back
            half_done = [pid for pid in plan.ids if self._preimage(pid) in saved]
        else:
            ids = set(plan.ids)
            store.interrupt(
                Interrupted(r.phase, plan.phase(r.phase).files) for r in left if r.phase in ids
            )
            half_done = [phase.id for phase in store.interrupted]
            half_done += [pid for pid in self._loops(saved) if pid not in half_done]
        for record in left:
            end_groups(record.groups)
        self.restored: list[tuple[str, Restored]] = []  # (phase id, what its restore did)
        self.unwritable: str | None = None
        going_on = {pid for pid, _ in self.resuming}
        for phase_id in half_done:
            if phase_id in going_on:  # its files stay as its loop left them, pre-images kept
                continue
            try:
                done = self._put_back(phase_id)
            except RestoreError as exc:  # nothing written: the next run tries again
                raise StateError(
                    f"phase {phase_id!r}, left half-done by a killed run: {exc}; its files from "
                    "before it began stay in its pre-images, for the next run to put back"
                ) from None
            self.restored += [(phase_id, restored) for restored in done]
            drop(paths.loop_record(phase_id))  # only now: a kill before reads it again
        self._drop_stale_preimages(set(half_done), saved)
        # Dropped only now: a run killed before this point reads them again.
        for record in left:
            record.path.unlink(missing_ok=True)
            spare_log(record.path).unlink(missing_ok=True)
        if left:
            fsync_dir(paths.logs)

    def _preimage(self, phase_id: str) -> Path:
        return self.paths.preimage(phase_id)

    def _loops(self, saved: set[Path]) -> list[str]:
        """The phases a killed run's review loop left, but those the session has completed: a
        loop record marks its phase half-done whatever the session says, since one kept to go
        on outlives a run that did not select its phase. Each is checked: its loop may go on
        (``resuming``), or it starts over, its files put back (``started_over`` says why)."""
        found: list[str] = []
        for phase in self.plan.phases:
            if self.paths.loop_record(phase.id) not in saved:
                continue
            if self.store.last_status(phase.id) is Status.COMPLETED:
                continue  # ended before the kill: dropped with its pre-images
            found.append(phase.id)
            definition = self.store.phase(phase.id).definition or ""
            try:
                left = left_off(self.paths, self.root, phase, definition)
            except LoopRecordError as exc:
                self.started_over.append((phase.id, str(exc)))
                continue
            if left is not None:
                self.resuming.append((phase.id, left[0]))
        return found

    def _put_back(self, phase_id: str) -> list[Restored]:
        """A half-done phase's declared files put back from its pre-images (none: it had changed
        nothing yet), RestoreError with nothing written."""
        preimage = self._preimage(phase_id)
        try:
            before = FileSnapshot.load(self.root, preimage)
        except UnreadablePreimages as exc:  # kept aside: its files stay as the kill left them
            kept = self.paths.kept_preimage(phase_id)
            return left_as_they_are(self.plan.phase(phase_id).files.all(), preimage, kept, exc)
        if before is None:
            return []
        return before.restore(self.paths.replaced(phase_id, "interrupted"))

    def crashed(self, phase_id: str) -> list[str]:
        """A worker died under the phase (controller only): its files put back now, as a killed
        run's next run would, before another phase writes them; its pre-images go once they
        are. Whether it died mid-phase or after its end, before the session had that, it runs
        again from its files as they were. The lines say what was done."""
        try:
            done = self._put_back(phase_id)
        except RestoreError as exc:  # its pre-images stay: the next run tries again
            return [f"phase {phase_id!r}, its worker crashed: {exc}"]
        drop(self.paths.loop_record(phase_id))  # it ends failed, or starts over when run again
        self._preimage(phase_id).unlink(missing_ok=True)
        return [f"its worker crashed: phase {phase_id!r}: {r.line(Path.cwd())}" for r in done]

    def _drop_stale_preimages(self, half_done: set[str], saved: set[Path]) -> None:
        """Pre-images of a phase no killed run left half-done are from before an end that
        was recorded (a kill came between the record and their removal): never to be put back
        over what ran since, should a later run of the phase be killed before it saves its own."""
        for phase_id in self.plan.ids:
            if phase_id not in half_done and self.paths.loop_record(phase_id) in saved:
                drop(self.paths.loop_record(phase_id))
            if phase_id not in half_done and self._preimage(phase_id) in saved:
                self._preimage(phase_id).unlink(missing_ok=True)

    def _preimages(self) -> set[Path]:
        """The pre-image files in the state dir (one listing, not a look per phase)."""
        try:
            return set(self.paths.preimages.iterdir())
        except OSError:  # none yet
            return set()

    @classmethod
    def open(cls, state_dir: Path, graph: PlanGraph, root: Path, fresh: bool) -> Recorder:
        plan = graph.plan
        store = SessionStore.open(state_dir, graph, root, fresh=fresh, report=session_report)
        try:
            recorder = cls(store, plan, root, fresh=fresh)
        except BaseException:
            store.close()  # unlocked: the next run puts the files back
            raise
        store.start_refresh(REFRESH)
        return recorder

    def completed_earlier(self, phase_id: str) -> str | None:
        return self.store.completed_earlier(phase_id)

    def started(self, phase: Phase, agent: str, worker: str | None = None) -> None:
        """Not synced: where a crash would leave files to put back, the phase's runner has its own
        record of the start on disk before the phase runs anything; the next durable record takes
        this one to the disk with it."""
        change = PhaseChange(agent=agent, worker=worker or None)
        self._record(phase.id, Status.IN_PROGRESS, change, durable=False)

    def record_end(self, facts: PhaseFacts) -> None:
        """What a report says of a phase, written and visible to any reader of the session, but
        not synced until ``settle``, which must follow before the report is shown. A phase
        completed earlier stays as it was."""
        phase_id, status = facts.phase, facts.status
        current = self.store.last_status(phase_id)
        if status is Status.COMPLETED and current is Status.COMPLETED:
            return  # resumed: nothing ran
        if status is Status.SKIPPED:
            if facts.skip is not None and facts.skip.kind is SkipKind.STOPPED:
                return  # not run, nor decided: it stays pending for the next run
            change = PhaseChange(result=facts.skip.text if facts.skip else None)
            self._record(phase_id, status, change, durable=False)
            return
        if current is not Status.IN_PROGRESS:  # an error before the phase could start
            self._record(phase_id, Status.IN_PROGRESS, PhaseChange(), durable=False)
        self._record(phase_id, status, self._change(facts), durable=False)
        if status is Status.COMPLETED:
            self._completed.append(phase_id)

    def settle(self) -> None:
        """The ends ``record_end`` wrote, on disk; then the pre-images of the phases among them
        that completed go. Their runner left them: until now a kill made the next run put their
        files back and run them again. Now the session has them completed, and a kill leaves
        their work alone."""
        if self.unwritable is None:
            try:
                self.store.sync()
            except SessionUnwritable as exc:
                self.unwritable = str(exc)
        completed, self._completed = self._completed, []
        if self.unwritable is None:
            for phase_id in completed:
                drop(self.paths.loop_record(phase_id))  # first: it needs the pre-images
                self._preimage(phase_id).unlink(missing_ok=True)

    def final_reviewed(self, record: Mapping[str, Any], spent: Tokens, agent: str) -> None:
        """The final review's record in the session, and what it cost in its token usage."""
        self._write_final(record, spent, agent)

    def send_back(self, resets: Mapping[str, str]) -> None:
        """The phases a failed final review sends back to work reset (``resets``: each with
        why), before anything runs: this run, ``--lf`` or not, runs them again."""
        for phase_id, reason in resets.items():
            try:
                self.store.reset(phase_id, reason)
            except SessionUnwritable as exc:
                self.unwritable = str(exc)
                return

    def _write_final(
        self, record: Mapping[str, Any], spent: Tokens | None = None, agent: str = ""
    ) -> None:
        if self.unwritable is not None:
            return
        try:
            self.store.set_final_review(record, spent, agent)
        except SessionUnwritable as exc:
            self.unwritable = str(exc)

    def stop(self, reason: str) -> None:
        if self.unwritable is None:
            try:
                self.store.stop(reason)
            except SessionUnwritable as exc:
                self.unwritable = str(exc)

    def _change(self, facts: PhaseFacts) -> PhaseChange:
        """What the session keeps of a phase's end: its declared files when it completed (they
        passed the spot check), the reason as an error when it failed or was blocked."""
        status, error = facts.status, facts.failure or last_line(facts.result)
        errors: tuple[PhaseError, ...] = ()
        if status in (Status.FAILED, Status.BLOCKED) and error:
            errors = (PhaseError(agent="", timestamp="", type=status.value, message=error),)
        files = self.plan.phase(facts.phase).files if status is Status.COMPLETED else Files()
        return PhaseChange(
            started=facts.started,
            completed=facts.finished,
            attempts=facts.attempts,
            worker=facts.worker,
            result=facts.result or None,
            errors=errors,
            files_created=files.create,
            files_modified=files.modify,
            files_deleted=files.delete,
            downstream_context=facts.downstream or None,
            tokens=facts.tokens,
            unverified=bool(facts.unverified),
            review=facts.review,
        )

    def _record(
        self, phase_id: str, status: Status, change: PhaseChange, *, durable: bool = True
    ) -> None:
        """A change the session cannot take any more (a full disk) leaves it as it was and says
        why in ``unwritable``: the run stops, and the next one resumes from what was written."""
        if self.unwritable is not None:
            return
        try:
            self.store.record(phase_id, status, change, durable=durable)
        except SessionUnwritable as exc:
            self.unwritable = str(exc)

    def close(self) -> None:
        """Fold and unlock the session (StateError when the fold cannot be written: the journal
        keeps what the snapshot lacks). ``store.document()`` still holds it all, for reports."""
        self.store.close()
