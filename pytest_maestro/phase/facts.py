"""What the controller learns of a phase from a report: typed values, one wire format.

Facts travel from an xdist worker to the controller as a plain dict on the report (pytest copies a
report's extra attributes into its serialised form); ``PhaseFacts`` is the only code that writes or
reads that dict. A phase's status is always a field, never worked out from a message's wording.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..state.model import Status, Tokens

# The report attribute that carries the facts (``TestReport(..., maestro=...)`` sets it too).
WIRE_ATTRIBUTE = "maestro"


class SkipKind(enum.Enum):
    """Why a phase did not run."""

    EARLIER = "earlier"  # completed in an earlier run, definition unchanged: counts as completed
    DONE = "done"  # the plan marks it done ([x], status done): counts as completed
    DEPENDENCY = "dependency"  # a dependency failed, was blocked or was skipped
    NOT_SELECTED = "not_selected"  # a dependency was deselected and never completed
    NOT_RUN_YET = "not_run_yet"  # a dependency has not run (only out of order)
    # The run stopped first (-x, Ctrl-C, the breaker, the budget): not a failure's doing, so
    # --lf leaves it to a plain rerun, and the session state keeps it pending.
    STOPPED = "stopped"


_DEPENDENCY_WORDS = {
    Status.FAILED: "failed",
    Status.BLOCKED: "was blocked",
    Status.SKIPPED: "was skipped",
}


@dataclass(frozen=True)
class SkipReason:
    kind: SkipKind
    text: str  # as the skip report shows it
    phase: str | None = None  # the dependency it names

    @classmethod
    def earlier(cls, when: str) -> SkipReason:
        return cls(SkipKind.EARLIER, f"completed in an earlier run at {when}")

    @classmethod
    def done(cls) -> SkipReason:
        return cls(SkipKind.DONE, "done in the plan")

    @classmethod
    def dependency(cls, dep: str, status: Status) -> SkipReason:
        return cls(SkipKind.DEPENDENCY, f"dependency {dep!r} {_DEPENDENCY_WORDS[status]}", dep)

    @classmethod
    def not_selected(cls, dep: str) -> SkipReason:
        text = f"dependency {dep!r} was not selected and has not completed"
        return cls(SkipKind.NOT_SELECTED, text, dep)

    @classmethod
    def not_run_yet(cls, dep: str) -> SkipReason:
        return cls(SkipKind.NOT_RUN_YET, f"dependency {dep!r} has not run yet", dep)

    @classmethod
    def stopped(cls, why: str) -> SkipReason:
        return cls(SkipKind.STOPPED, f"not run: the run stopped ({why})")

    @property
    def status(self) -> Status:
        """The phase's status in the session state: a resumed phase stays completed."""
        return Status.COMPLETED if self.kind is SkipKind.EARLIER else Status.SKIPPED

    @property
    def after_failure(self) -> bool:
        """Skipped because of a failure in this session: ``--lf`` must run it again."""
        return self.kind in (SkipKind.DEPENDENCY, SkipKind.NOT_RUN_YET)


@dataclass(frozen=True)
class PhaseFacts:
    """One phase's news for the controller: its status and, when it ran, how it ran."""

    phase: str
    status: Status  # completed, failed, blocked or skipped
    skip: SkipReason | None = None
    worker: str | None = None
    attempts: int | None = None
    started: str | None = None  # ISO 8601
    finished: str | None = None
    duration: float | None = None  # seconds
    result: str | None = None  # a one-line account: the agent's status line, a crash
    failure: str | None = None  # one line: which check failed, or why the agent failed
    tokens: Tokens | None = None  # what the phase's agent CLI calls used, all attempts
    unverified: bool | None = None  # passed on the agent's word: no check could fail it
    downstream: dict[str, str] | None = None  # the agent's Downstream Context
    outside: list[str] | None = None  # files the agent changed outside the declared ones
    warnings: list[str] | None = None  # what the phase went without, for the run's summary
    review: dict[str, Any] | None = None  # its last attempt's review (``Review.to_dict``)
    remote: dict[str, Any] | None = None  # a remote phase's result (``remote.wire.Result``)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))  # from the wire: its text

    @property
    def ok(self) -> bool:
        return self.status is Status.COMPLETED

    @classmethod
    def skipped(cls, phase: str, reason: SkipReason) -> PhaseFacts:
        return cls(phase, reason.status, skip=reason)

    def to_wire(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            key: value
            for key, value in vars(self).items()
            if value is not None and key not in ("skip", "tokens")
        }
        data["status"] = self.status.value  # the wire carries plain values
        if self.tokens is not None:
            data["tokens"] = self.tokens.to_dict()
        if self.skip is not None:
            data["skip"] = [self.skip.kind.value, self.skip.text, self.skip.phase]
        return data

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> PhaseFacts:
        fields = dict(data)
        skip = fields.pop("skip", None)
        reason = None if skip is None else SkipReason(SkipKind(skip[0]), skip[1], skip[2])
        tokens = fields.pop("tokens", None)
        spent = None if tokens is None else Tokens.from_mapping(tokens, "tokens")
        return cls(skip=reason, tokens=spent, **fields)

    def attach(self, report: object) -> None:
        setattr(report, WIRE_ATTRIBUTE, self.to_wire())

    @classmethod
    def of(cls, report: object) -> PhaseFacts | None:
        data = getattr(report, WIRE_ATTRIBUTE, None)
        return cls.from_wire(data) if isinstance(data, dict) else None


def iso_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")
