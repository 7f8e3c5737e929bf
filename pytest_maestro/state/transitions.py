"""The phase state machine: which status a phase may move to from which (a transition table),
checked as the session state records each move."""

from __future__ import annotations

from .model import Status

NEXT: dict[Status, frozenset[Status]] = {
    Status.PENDING: frozenset({Status.IN_PROGRESS, Status.SKIPPED}),
    Status.IN_PROGRESS: frozenset({Status.COMPLETED, Status.FAILED, Status.BLOCKED}),
    Status.COMPLETED: frozenset(),  # only reset() leaves it: the phase's definition changed
    # A rerun starts the phase again, or skips it again while a dependency still fails.
    Status.FAILED: frozenset({Status.IN_PROGRESS, Status.SKIPPED}),
    Status.BLOCKED: frozenset({Status.IN_PROGRESS, Status.SKIPPED}),
    Status.SKIPPED: frozenset({Status.IN_PROGRESS, Status.SKIPPED}),
}


class InvalidTransition(ValueError):
    """A transition the phase state machine does not allow: a bug in the caller."""

    def __init__(self, phase_id: str, old: Status, new: Status) -> None:
        super().__init__(
            f"phase {phase_id!r}: {old.value} -> {new.value} is not a valid transition"
        )


def _status(value: Status | str) -> Status:
    try:
        return Status(value)
    except ValueError:
        known = ", ".join(s.value for s in Status)
        raise ValueError(f"unknown phase status {value!r}; expected one of {known}") from None


def check_transition(phase_id: str, old: Status, new: Status | str) -> Status:
    """``new`` as a ``Status``: ValueError for no status at all, InvalidTransition for a move
    the table does not allow."""
    status = _status(new)
    if status not in NEXT[old]:
        raise InvalidTransition(phase_id, old, status)
    return status
