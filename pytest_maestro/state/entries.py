"""The facts of a transition: one typed value on the way in, plain JSON in the journal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .model import PhaseError, PhaseState, Status, Tokens

_ENDS = (Status.COMPLETED, Status.FAILED, Status.BLOCKED)


@dataclass(frozen=True)
class PhaseChange:
    """What one move of a phase says about it. A fact left None (or empty) is not said, and the
    phase keeps what it had, except where the move itself says more: ``SessionStore.record``
    fills in ``started`` (to in_progress) or ``completed`` (to completed, failed or blocked) with
    now, a new run (to in_progress) clears what the last one produced, and a skip's ``result`` is
    why it was skipped or nothing (an earlier run's result no longer describes the phase).
    """

    started: str | None = None  # ISO 8601
    completed: str | None = None
    attempts: int | None = None
    worker: str | None = None
    agent: str | None = None  # added to the phase's agents; whose tokens these are
    result: str | None = None
    errors: tuple[PhaseError, ...] = ()  # appended
    files_created: tuple[str, ...] = ()  # merged with those the phase names already
    files_modified: tuple[str, ...] = ()
    files_deleted: tuple[str, ...] = ()
    downstream_context: Mapping[str, Any] | None = None  # replaces the phase's
    tokens: Tokens | None = None  # added to the phase's, the agent's and the session's
    unverified: bool = False  # completed on the agent's word: no acceptance command checked it
    review: Mapping[str, Any] | None = None  # its last attempt's review (``Review.to_dict``)


def journal_facts(
    change: PhaseChange, status: Status, at: str, phase: PhaseState
) -> dict[str, Any]:
    """The facts of a move of ``phase`` to ``status`` at ``at``, as the journal stores them: only
    those it says, and those the store fills in. An error without a time or an agent gets the
    move's: ``at``, and the change's agent, else the phase's first."""
    started, completed = change.started, change.completed
    if status is Status.IN_PROGRESS and started is None:
        started = at
    elif status in _ENDS and completed is None:
        completed = at
    scalars = (
        ("started", started),
        ("completed", completed),
        ("attempts", change.attempts),
        ("worker", change.worker),
        ("agent", change.agent),
    )
    facts: dict[str, Any] = {key: value for key, value in scalars if value is not None}
    if change.result is not None or status is Status.SKIPPED:
        facts["result"] = change.result
    if change.errors:
        agent = change.agent or (phase.agents[0] if phase.agents else "")
        facts["errors"] = [
            dict(e.to_dict(), agent=e.agent or agent, timestamp=e.timestamp or at)
            for e in change.errors
        ]
    files = (
        ("files_created", change.files_created),
        ("files_modified", change.files_modified),
        ("files_deleted", change.files_deleted),
    )
    facts.update((key, list(paths)) for key, paths in files if paths)
    if change.downstream_context is not None:
        facts["downstream_context"] = dict(change.downstream_context)
    if change.tokens is not None:
        facts["tokens"] = change.tokens.to_dict()
    if change.unverified:
        facts["unverified"] = True
    if change.review is not None:
        facts["review"] = dict(change.review)
    return facts
