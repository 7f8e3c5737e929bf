"""SessionStore: the phase state machine over a locked, journaled session file."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..plan.graph import PlanGraph
from .document import Renderer, Report
from .entries import PhaseChange, journal_facts
from .journal import Journal, apply_entry, atomic_write
from .live import Refresher
from .lock import acquire, archive, prepare_dir, release
from .model import (
    SESSION_FIELDS,
    SESSION_STATUSES,
    PhaseState,
    SessionCorrupt,
    SessionDoc,
    SessionUnwritable,
    StateError,
    Status,
    Tokens,
    now,
)
from .paths import SessionPaths, plan_relpath
from .resume import CHANGED, INTERRUPTED, Interrupted, load, reconcile
from .transitions import check_transition

if TYPE_CHECKING:  # the lock is made by lock.acquire
    import filelock

# The journal is folded into the snapshot past this many entries per phase (and at least
# _MIN_JOURNAL): a snapshot costs O(phases), so its share of each transition stays constant.
_JOURNAL_PER_PHASE = 4
_MIN_JOURNAL = 2048

_STATUS_ONLY = PhaseChange()  # a move that says nothing but its status

# The way out of a session this tool cannot read: what the user can do, said with the problem.
FRESH = "; --maestro-fresh archives it and starts the session over"
ASIDE = "; --maestro-fresh moves aside what is in the way, and keeps it"


class SessionStore:
    """The session of one plan, held by one process.

    Every write is on disk when it returns, but a ``record`` made with ``durable=False``: that one
    goes to the disk with the next write that is durable (one sync for both), or with ``close``.
    """

    def __init__(
        self,
        paths: SessionPaths,
        doc: SessionDoc,
        lock: filelock.BaseFileLock,
        journal: Journal,
        *,
        interrupted: tuple[Interrupted, ...] = (),
        changed: tuple[str, ...] = (),
        archived: Path | None = None,
        report: Report | None = None,
    ) -> None:
        self.paths = paths
        self.interrupted = interrupted  # left in progress by a killed run, now pending
        self.changed = changed  # completed before, definition changed since, now pending
        self.archived = archived  # where ``fresh`` moved the old session
        self._doc = doc
        self._lock = lock
        self._journal = journal
        self._unfolded = 0  # journal entries since the last snapshot
        self._closed = False
        self._unwritable: str | None = None  # why the journal took no more changes (a full disk)
        self._render = Renderer(report).render  # with the body's run report
        # The refresher thread reads the state while this one changes it: ``_guard`` keeps the
        # journal and the state in memory in step; ``_writing`` keeps a slow refresh from putting
        # back an older snapshot than a fold wrote (``_written`` is the seq of the one on disk).
        self._guard = threading.Lock()
        self._writing = threading.Lock()
        self._written = -1
        self._refresher: Refresher | None = None
        self._fold_took = 0.0  # what the last fold took: the first refresh waits as its own
        done = (p for p in doc.phases.values() if p.status is Status.COMPLETED)
        self._earlier = {p.id: p.completed or doc.updated for p in done}

    @classmethod
    def open(
        cls,
        state_dir: Path,
        graph: PlanGraph,
        root: Path,
        *,
        fresh: bool = False,
        report: Report | None = None,
    ) -> SessionStore:
        """Lock and load the plan's session (or start one); SessionBusy if another process has it.

        ``state_dir`` is absolute and inside ``root``; a relative ``plan.path`` is relative to
        ``root``. ``fresh`` archives the old session first. Otherwise the session resumes: phases
        a killed run left in progress are reset (``interrupted``), and so are completed phases
        whose definition or dependencies changed (``changed``). ``report`` renders the run report
        of the snapshot's body.
        """
        plan = graph.plan
        rel = plan_relpath(plan, root)
        paths = SessionPaths.for_plan(state_dir, plan, root)
        try:
            prepare_dir(state_dir)
            lock = acquire(paths, rel)
        except OSError as error:
            raise StateError(f"cannot use state dir {state_dir}: {error}{ASIDE}") from None
        try:
            return cls._resume(paths, graph, rel, lock, fresh, report)
        except OSError as error:
            release(paths, lock)
            raise StateError(f"cannot use session {paths.snapshot}: {error}{FRESH}") from None
        except SessionCorrupt as error:
            release(paths, lock)
            raise SessionCorrupt(f"{error}{FRESH}") from None
        except BaseException:
            release(paths, lock)
            raise

    @classmethod
    def _resume(
        cls,
        paths: SessionPaths,
        graph: PlanGraph,
        rel: str,
        lock: filelock.BaseFileLock,
        fresh: bool,
        report: Report | None,
    ) -> SessionStore:
        archived = archive(paths) if fresh else None
        for stale in paths.state_dir.glob(f".{paths.name}.*.tmp"):  # a write a crash cut short
            stale.unlink()
        plan = graph.plan
        doc = load(paths, plan, rel)
        interrupted, changed = reconcile(doc, graph)
        doc.task, doc.plan = plan.title or doc.task or Path(rel).stem, rel
        doc.status, doc.stop_reason = "in_progress", None
        doc.updated = doc.run_started = now()
        journal = Journal(paths.journal)
        store = cls(
            paths,
            doc,
            lock,
            journal,
            interrupted=tuple(interrupted),
            changed=tuple(changed),
            archived=archived,
            report=report,
        )
        try:
            store._fold()  # the resets above, and an empty journal without a torn tail
        except BaseException:
            journal.close()
            raise
        return store

    # -- reading -------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self.paths.snapshot

    @property
    def session_id(self) -> str:
        return self._doc.session_id

    @property
    def status(self) -> str:
        return self._doc.status

    @property
    def stop_reason(self) -> str | None:
        return self._doc.stop_reason

    @property
    def token_usage(self) -> tuple[Tokens, dict[str, Tokens]]:
        """Session totals and totals by agent."""
        return self._doc.tokens, dict(self._doc.by_agent)

    def phase(self, phase_id: str) -> PhaseState:
        try:
            return self._doc.phases[phase_id]
        except KeyError:
            raise KeyError(f"phase {phase_id!r} is not in plan {self._doc.plan}") from None

    def phases(self) -> tuple[PhaseState, ...]:
        return tuple(self._doc.phases.values())

    def last_status(self, phase_id: str) -> Status:
        return self.phase(phase_id).status

    def completed_earlier(self, phase_id: str) -> str | None:
        """When the phase completed in an earlier run, if it did and its definition is unchanged."""
        if self.phase(phase_id).status is not Status.COMPLETED:
            return None
        return self._earlier.get(phase_id)

    # -- writing -------------------------------------------------------------------------------

    def record(
        self,
        phase_id: str,
        status: Status | str,
        change: PhaseChange = _STATUS_ONLY,
        *,
        durable: bool = True,
    ) -> PhaseState:
        """Move a phase to ``status`` with what ``change`` says of that move; on disk when it
        returns unless not ``durable`` (for a move that something else already holds on disk).
        """
        old = self.phase(phase_id)
        new = check_transition(phase_id, old.status, status)
        at = now()
        facts = journal_facts(change, new, at, old)
        self._write(
            {"op": "record", "phase": phase_id, "status": new.value, "facts": facts},
            at,
            durable=durable,
        )
        return self._doc.phases[phase_id]

    def reset(self, phase_id: str, reason: str = CHANGED) -> PhaseState:
        """Back to pending from any state: the definition changed, or a killed run left it."""
        self.phase(phase_id)
        self._write({"op": "reset", "phase": phase_id, "reason": reason}, now())
        self._earlier.pop(phase_id, None)
        return self._doc.phases[phase_id]

    def sync(self) -> None:
        """On disk, what records written with ``durable=False`` left to the next sync."""
        with self._guard:
            if self._unwritable is not None:
                raise SessionUnwritable(self._unwritable)
            try:
                self._journal.sync()
            except OSError as exc:
                self._unwritable = (
                    f"cannot sync session journal {self.paths.journal} ({exc.strerror}): the "
                    "session holds what was recorded before"
                )
                raise SessionUnwritable(self._unwritable) from None

    def interrupt(self, phases: Iterable[Interrupted]) -> tuple[Interrupted, ...]:
        """Reset phases that a killed run's processes say they were running, where the session's
        own record of their start may never have reached the disk; not those the session has
        completed, which ended before the kill. Adds those it resets to ``interrupted`` and
        returns them; on disk when it returns.
        """
        known = {phase.id for phase in self.interrupted}
        new: list[Interrupted] = []
        for phase in phases:
            state = self._doc.phases.get(phase.id)
            if state is None or state.status is Status.COMPLETED or phase.id in known:
                continue
            known.add(phase.id)
            new.append(phase)
            self._write(
                {"op": "reset", "phase": phase.id, "reason": INTERRUPTED}, now(), durable=False
            )
        self._journal.sync()  # one sync for them all
        self.interrupted += tuple(new)
        return tuple(new)

    def stop(self, reason: str) -> None:
        """The circuit breaker stopped the session: status ``stopped``, with the reason."""
        self._write({"op": "stop", "reason": reason}, now())

    def set_final_review(
        self, record: Mapping[str, Any], spent: Tokens | None = None, agent: str = ""
    ) -> None:
        """The final review's record (its base, its last verdict), in place of the last; what
        its calls ``spent``, by ``agent``, added to the session's token usage."""
        op: dict[str, Any] = {"op": "final", "record": dict(record)}
        if spent is not None and spent != Tokens():
            op.update(tokens=spent.to_dict(), agent=agent)
        self._write(op, now())

    def set_session(self, **fields: Any) -> None:
        """Set execution_mode (parallel|sequential), execution_backend or current_batch."""
        unknown = fields.keys() - SESSION_FIELDS
        if unknown:
            raise TypeError(f"unknown session fields {sorted(unknown)}")
        if fields.get("execution_mode", "parallel") not in ("parallel", "sequential"):
            raise ValueError(f"execution_mode {fields['execution_mode']!r}: parallel or sequential")
        self._write({"op": "session", "fields": fields}, now())

    def start_refresh(self, interval: float = 1.0) -> None:
        """Rewrite the snapshot about every ``interval`` seconds while the session changes, in a
        thread of its own, until ``close``."""
        if self._refresher is None and not self._closed:
            self._refresher = Refresher(interval, self._refresh, took=self._fold_took)
            self._refresher.start()

    @property
    def lag(self) -> str | None:
        """Why the session file lagged the run while it lived (rewrites failed), or None."""
        return self._refresher.lag() if self._refresher is not None else None

    def document(self) -> SessionDoc:
        """A copy of the session as it is now, for reports."""
        with self._guard:
            return _copy(self._doc)

    def close(self, status: str | None = None) -> None:
        """Fold the journal into the snapshot with the session's final status, and unlock."""
        if self._closed:
            return
        if self._refresher is not None:
            self._refresher.stop()
        try:
            final = status or self._final_status()
            if final not in SESSION_STATUSES:
                raise ValueError(f"session status {final!r}: one of {sorted(SESSION_STATUSES)}")
            self._doc.status, self._doc.updated = final, now()
            try:
                self._fold()
            except OSError as exc:
                raise StateError(
                    f"cannot rewrite session {self.paths.snapshot} ({exc.strerror}): its journal "
                    "keeps every change recorded, and the next run reads it"
                ) from None
        finally:
            self._closed = True
            self._journal.close()
            release(self.paths, self._lock)

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _final_status(self) -> str:
        statuses = {p.status for p in self._doc.phases.values()}
        if self._doc.status == "stopped":
            return "stopped"
        if statuses <= {Status.COMPLETED}:
            return "completed"
        return "failed" if statuses & {Status.FAILED, Status.BLOCKED} else "in_progress"

    def _write(self, op: dict[str, Any], at: str, *, durable: bool = True) -> None:
        if self._closed:
            raise RuntimeError(f"session {self.paths.snapshot} is closed")
        if self._unwritable is not None:  # never append behind a line a full disk cut short
            raise SessionUnwritable(self._unwritable)
        with self._guard:
            entry = {"seq": self._doc.journal_seq + 1, "at": at, **op}
            # On disk before the state in memory (or any report) moves, when durable.
            try:
                self._journal.append(entry, durable=durable)
            except OSError as exc:
                self._unwritable = (
                    f"cannot write session journal {self.paths.journal} ({exc.strerror}): the "
                    "session holds what was recorded before"
                )
                raise SessionUnwritable(self._unwritable) from None
            apply_entry(self._doc, entry)
            self._unfolded += 1
            if self._unfolded > max(_MIN_JOURNAL, _JOURNAL_PER_PHASE * len(self._doc.phases)):
                with contextlib.suppress(OSError):  # the journal still holds it all: fold later
                    self._fold()
                self._unfolded = 0

    def _fold(self) -> None:
        """Write the snapshot, then empty the journal (its entries are in the snapshot's seq)."""
        with self._writing:
            started = time.monotonic()
            atomic_write(self.paths.snapshot, self._render(self._doc))
            self._fold_took = time.monotonic() - started
            self._written = self._doc.journal_seq
            self._journal.truncate()
            self._unfolded = 0

    def _refresh(self) -> bool:
        """Write the snapshot if the session changed since the last one; the journal stays, so
        a reader still replays what came after. Renders outside ``_guard``: transitions go on."""
        with self._guard:
            if self._doc.journal_seq <= self._written:
                return False
            doc = _copy(self._doc)
        text = self._render(doc)
        with self._writing:
            if doc.journal_seq <= self._written:  # a fold wrote a newer one meanwhile
                return False
            atomic_write(self.paths.snapshot, text)
            self._written = doc.journal_seq
        return True


def _copy(doc: SessionDoc) -> SessionDoc:
    """Phase states are frozen: copying the containers is enough to render a consistent view."""
    return replace(doc, phases=dict(doc.phases), by_agent=dict(doc.by_agent), extra=dict(doc.extra))
