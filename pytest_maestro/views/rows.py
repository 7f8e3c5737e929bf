"""One row per phase, read from a session: the terminal summary, ``--maestro-status``, the
Markdown report and ``summary.json`` are renderings of these values, never of the session itself.

Pure functions of a :class:`SessionDoc` and a moment in time; nothing here runs or writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from ..review.final import FINAL_NAME, FinalRecord
from ..review.verdict import Review
from ..state.model import PhaseState, SessionDoc, Status, Tokens
from ..texts import last_line

# Statuses of a phase that ran: started, and finished or still running.
RAN = frozenset({"completed", "failed", "blocked", "in_progress"})
_FAILED = frozenset({"failed", "blocked"})


@dataclass(frozen=True)
class PhaseRow:
    id: str
    name: str
    status: str
    attempts: int
    agent: str
    worker: str | None
    started: datetime | None
    finished: datetime | None
    duration: float | None  # seconds; of a running phase, so far
    tokens: Tokens  # and premium requests, the cost, whether it is an estimate
    unverified: bool
    note: str  # why a phase failed, or was skipped: one line
    blocked_by: tuple[str, ...]
    this_run: bool  # started by the run that wrote the session last
    review: Review | None = None  # its last attempt's review

    @property
    def reviewed(self) -> bool:
        """Completed with a review that passed: every prose criterion judged met."""
        return self.status == "completed" and self.review is not None and self.review.passed

    @property
    def executed(self) -> bool:
        """Ran in this run: it has a bar in the run's timeline."""
        return self.this_run and self.status in RAN and self.started is not None


@dataclass(frozen=True)
class RunView:
    """The session seen at one moment: its rows, and what they add up to."""

    task: str
    plan: str
    session_id: str
    status: str
    stop_reason: str | None
    rows: tuple[PhaseRow, ...]
    wall_time: float | None  # first start to last finish of this run (or to now)
    phase_time: float  # the sum of this run's phase durations
    critical_path: tuple[str, ...]  # as it ran: each phase waited for the one before
    critical_time: float | None
    done: frozenset[str] = frozenset()  # phases the plan marks done: as good as completed
    account_wait: float = 0.0  # seconds phases waited for the account: rate limits, call slots
    final: PhaseRow | None = None  # the session's last final review, as a row of its own

    @property
    def table_rows(self) -> tuple[PhaseRow, ...]:
        """The rows of a table: the phases', then the final review's."""
        return self.rows if self.final is None else (*self.rows, self.final)

    @property
    def counts(self) -> dict[str, int]:
        found = {s.value: 0 for s in Status}
        for row in self.rows:
            found[row.status] += 1
        return found

    @property
    def all_completed(self) -> bool:
        return all(row.status == "completed" or row.id in self.done for row in self.rows)

    @property
    def spent(self) -> Tokens:
        return sum((r.tokens for r in self.table_rows), Tokens())

    @property
    def tokens(self) -> tuple[int, int, int]:
        spent = self.spent
        return (spent.input, spent.output, spent.cached)

    @property
    def cost(self) -> float:
        return self.spent.cost


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 time as the session holds it (``Z`` or an offset), or None if unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def view(
    doc: SessionDoc, now: datetime, order: Iterable[str] | None = None, done: Iterable[str] = ()
) -> RunView:
    """The session's rows (in ``order``, else the session's), as of ``now``. Phases that
    ``order`` names and the session does not know yet are pending; those in ``done`` the plan
    marks done."""
    run_started = parse_time(doc.run_started)
    ids = list(doc.phases) if order is None else list(order)
    rows = tuple(_row(doc.phases.get(pid), pid, run_started, now) for pid in ids)
    ran = [r for r in rows if r.executed]
    wall = None
    if ran:
        start = min(r.started for r in ran if r.started)
        end = max((r.finished or now) for r in ran)
        wall = max((end - start).total_seconds(), 0.0)
    path = critical_path(ran)
    critical = None
    if path:
        first, last = _by_id(ran)[path[0]], _by_id(ran)[path[-1]]
        if first.started is not None:
            critical = max(((last.finished or now) - first.started).total_seconds(), 0.0)
    return RunView(
        task=doc.task or doc.plan,
        plan=doc.plan,
        session_id=doc.session_id,
        status=doc.status,
        stop_reason=doc.stop_reason,
        rows=rows,
        wall_time=wall,
        phase_time=sum(r.duration or 0.0 for r in ran),
        critical_path=tuple(path),
        critical_time=critical,
        done=frozenset(done),
        final=final_row(FinalRecord.from_mapping(doc.final_review), run_started),
    )


def final_row(record: FinalRecord, run_started: datetime | None) -> PhaseRow | None:
    """The last final review as a row: ``completed`` when it passed, else ``failed``; its note
    the first blocking finding (or why it gave no verdict), with the phases it names."""
    review = record.review
    if review is None:
        return None
    started, finished = parse_time(record.started), parse_time(record.at)
    duration = None
    if started is not None and finished is not None:
        duration = max((finished - started).total_seconds(), 0.0)
    return PhaseRow(
        id=FINAL_NAME,
        name="final review",
        status="completed" if review.passed else "failed",
        attempts=1,
        agent=review.reviewer,
        worker=None,
        started=started,
        finished=finished,
        duration=duration,
        tokens=review.tokens,
        unverified=False,
        note=review.problem or "",
        blocked_by=(),
        this_run=run_started is not None and started is not None and started >= run_started,
        review=review,
    )


def critical_path(ran: Iterable[PhaseRow]) -> list[str]:
    """The chain that decided when the run ended: from the phase that finished last, back
    through the dependency each one waited for longest (the one that finished last)."""
    rows = _by_id(ran)
    if not rows:
        return []
    far = datetime.max.replace(tzinfo=timezone.utc)  # still running: ends last
    last = max(rows.values(), key=lambda r: r.finished or far)
    path = [last.id]
    seen = {last.id}
    while True:
        deps = [rows[d] for d in rows[path[-1]].blocked_by if d in rows and d not in seen]
        if not deps:
            break
        waited = max(deps, key=lambda r: r.finished or far)
        path.append(waited.id)
        seen.add(waited.id)
    return path[::-1]


def _by_id(rows: Iterable[PhaseRow]) -> Mapping[str, PhaseRow]:
    return {row.id: row for row in rows}


# A phase's row, kept while its state (frozen) is the same object: the session file's body is
# rendered at every rewrite of it, and most phases have not moved since the last. A running
# phase's row depends on the moment, and is made anew.
_ROWS: dict[str, tuple[PhaseState, datetime | None, PhaseRow]] = {}
_ROWS_MAX = 50_000


def _row(
    state: PhaseState | None, pid: str, run_started: datetime | None, now: datetime
) -> PhaseRow:
    if state is None or state.status is Status.IN_PROGRESS:
        return _new_row(state, pid, run_started, now)
    kept = _ROWS.get(pid)
    if kept is not None and kept[0] is state and kept[1] == run_started:
        return kept[2]
    if len(_ROWS) >= _ROWS_MAX:
        _ROWS.clear()
    row = _new_row(state, pid, run_started, now)
    _ROWS[pid] = (state, run_started, row)
    return row


def _new_row(
    state: PhaseState | None, pid: str, run_started: datetime | None, now: datetime
) -> PhaseRow:
    if state is None:
        state = PhaseState(pid, pid)
    started, finished = parse_time(state.started), parse_time(state.completed)
    status = state.status.value
    if status == "in_progress":
        finished = None  # a rerun's start: the finish on record is an earlier run's
    end = finished if status != "in_progress" else now
    duration = None
    if started is not None and end is not None and status in RAN:
        duration = max((end - started).total_seconds(), 0.0)
    this_run = run_started is not None and started is not None and started >= run_started
    return PhaseRow(
        id=pid,
        name=state.name,
        status=status,
        attempts=state.attempts,
        agent=state.agents[-1] if state.agents else "",
        worker=state.worker,
        started=started,
        finished=finished,
        duration=duration,
        tokens=state.tokens,
        unverified=state.unverified,
        note=_note(state),
        blocked_by=state.blocked_by,
        this_run=this_run,
        review=Review.from_mapping(state.review) if state.review else None,
    )


def _note(state: PhaseState) -> str:
    """The last error of a failed or blocked phase; why a skipped one did not run."""
    if state.status.value in _FAILED:
        errors = [e for e in state.errors if e.type != "reset"]
        text = errors[-1].message if errors else state.result or ""
    elif state.status is Status.SKIPPED:
        text = state.result or ""
    else:
        return ""
    return last_line(text)
