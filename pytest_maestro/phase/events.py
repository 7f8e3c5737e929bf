"""What a running phase says while it runs: started, what its agent does, retrying, waiting out a
rate limit or for a slot of the account, finished.

A ``PhaseEvent`` is born where the phase runs (the runner, or the controller for a finish) and
becomes one line of live progress; the pytest layer carries it to the process that prints. The wire
format is a short JSON text, written and read only here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..state.model import Status
from ..texts import duration_text, one_line
from .facts import PhaseFacts

STARTED = "started"
RETRY = "retry"
WAITING = "waiting"
FINISHED = "finished"
ACTIVITY = "activity"  # the agent's latest tool call
KINDS = (STARTED, RETRY, WAITING, FINISHED, ACTIVITY)
DETAIL_LIMIT = 200  # characters of a line's detail


@dataclass(frozen=True)
class PhaseEvent:
    phase: str
    kind: str  # one of KINDS
    elapsed: float | None = 0.0  # seconds since the phase started; None: not known (a crash)
    attempt: int | None = None  # 1-based: the attempt starting (retry) or made (finished)
    attempts: int | None = None  # the most the phase may make
    worker: str | None = None  # set by the process that sends it on
    detail: str = ""  # one line: why a retry, the limit waited for, how a phase ended
    wait: float | None = None  # seconds of a rate-limit wait; None: for a slot, until one frees
    status: Status | None = None  # a finished phase's status
    turn: int | None = None  # the agent's turn an activity belongs to

    def to_wire(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v not in (None, "")})

    @classmethod
    def from_wire(cls, text: str) -> PhaseEvent | None:
        """None for a text that is not an event (from another version, or damaged)."""
        try:
            data: dict[str, Any] = json.loads(text)
            if "status" in data:
                data["status"] = Status(data["status"])
            event = cls(**data)
        except (ValueError, TypeError):
            return None
        return event if event.kind in KINDS else None

    @classmethod
    def finished(cls, facts: PhaseFacts) -> PhaseEvent:
        """A phase that ran, from the facts its report carries."""
        return cls(
            facts.phase,
            FINISHED,
            elapsed=facts.duration,
            attempt=facts.attempts,
            worker=facts.worker,
            detail="" if facts.ok else (facts.failure or facts.result or ""),
            status=facts.status,
        )

    def line(self) -> str:
        """The progress line: ``[worker] phase: what happened``."""
        where = f"[{self.worker}] " if self.worker else ""
        return f"maestro {where}{self.phase}: {self._what()}"

    def _what(self) -> str:
        after = duration_text(self.elapsed or 0.0)
        if self.kind == STARTED:
            most = f" (up to {self.attempts} attempts)" if (self.attempts or 1) > 1 else ""
            return f"started{most}"
        if self.kind == RETRY:
            return _joined(f"attempt {self.attempt} of {self.attempts} after {after}", self.detail)
        if self.kind == ACTIVITY:
            turn = f"turn {self.turn}, " if self.turn else ""
            return f"{one_line(self.detail, DETAIL_LIMIT)} ({turn}{after})"
        if self.kind == WAITING and self.wait is None:  # for a slot: until another call ends
            return _joined(f"waiting for a slot of the account after {after}", self.detail)
        if self.kind == WAITING:
            wait = duration_text(self.wait)
            return _joined(f"waiting {wait} for a rate limit after {after}", self.detail)
        tries = self.attempt or 0
        made = f" after {tries} attempts" if tries > 1 else ""
        took = f" in {after}" if self.elapsed is not None else ""
        return _joined(f"{self.status}{made}{took}", self.detail)


Progress = Callable[[PhaseEvent], None]


def _joined(head: str, detail: str) -> str:
    """A detail is one line however it came (a crash report has many), of bounded length."""
    detail = one_line(detail, DETAIL_LIMIT)
    return f"{head}: {detail}" if detail else head


@dataclass(frozen=True)
class Teller:
    """What a phase's runner calls to tell ``progress`` of an event (nothing without one)."""

    phase_id: str
    started: float  # epoch seconds
    most: int  # attempts the phase may make
    progress: Progress | None

    def __call__(
        self,
        kind: str,
        attempt: int,
        detail: str,
        wait: float | None = None,
        turn: int | None = None,
    ) -> None:
        if self.progress is not None:
            elapsed = time.time() - self.started
            when = (self.phase_id, kind, elapsed, attempt, self.most)
            self.progress(PhaseEvent(*when, detail=detail, wait=wait, turn=turn))
