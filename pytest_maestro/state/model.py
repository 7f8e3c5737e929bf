"""The values of a session: phase states, errors, tokens, the whole session document."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from .fields import Fields

SESSION_FIELDS = frozenset({"execution_mode", "execution_backend", "current_batch"})
# What a session field left out (or empty) reads as, from the snapshot and the journal alike.
SESSION_DEFAULTS = {"execution_mode": "sequential", "execution_backend": "pytest"}
SESSION_STATUSES = frozenset({"in_progress", "completed", "failed", "stopped"})


class StateError(Exception):
    """A session state problem a user can act on; ``str()`` is the one line they read."""


class SessionCorrupt(StateError):
    """A session file that cannot be read."""


class SessionUnwritable(StateError):
    """The journal took no more changes (a full disk): the session holds what came before."""


class Status(str, Enum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    BLOCKED = "blocked"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


_STATUS_NAMES = tuple(s.value for s in Status)


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds: phases finish within the same second."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def now() -> str:
    return format_time(datetime.now(timezone.utc))


def as_time(value: object) -> str | None:
    if value is None or value == "":
        return None
    # YAML turns unquoted timestamps (a hand-edited file) into datetime objects.
    return format_time(value) if isinstance(value, datetime) else str(value)


@dataclass(frozen=True)
class Tokens:
    """What agent CLI calls used. ``cost`` is dollars: the CLI's own figure, or, ``estimated``,
    one from a price table (``prices.py``) for a CLI that reports only tokens. ``unpriced``
    names the models whose tokens no table prices ("" when no model was named): their cost is
    left out, never guessed. ``premium_requests`` is copilot's unit, where it reports no tokens."""

    input: int = 0
    output: int = 0
    cached: int = 0
    cost: float = 0.0
    estimated: bool = False
    premium_requests: int = 0
    unpriced: tuple[str, ...] = ()

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            self.input + other.input,
            self.output + other.output,
            self.cached + other.cached,
            self.cost + other.cost,
            self.estimated or other.estimated,
            self.premium_requests + other.premium_requests,
            tuple(dict.fromkeys(self.unpriced + other.unpriced)),
        )

    @property
    def counted(self) -> bool:
        """Whether the CLI reported any tokens."""
        return bool(self.input or self.output or self.cached)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, where: str = "") -> Tokens:
        """FieldError names a count or cost that is not one (NaN, negative, text). A session
        written before estimates and premium requests reads as none of either."""
        f = Fields(raw or {}, where)
        return cls(
            f.count("input"),
            f.count("output"),
            f.count("cached"),
            f.dollars("cost"),
            f.raw.get("estimated") is True,
            f.count("premium_requests"),
            f.texts("unpriced"),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"input": self.input, "output": self.output, "cached": self.cached}
        if self.cost:
            data["cost"] = self.cost
        if self.estimated:
            data["estimated"] = True
        if self.premium_requests:
            data["premium_requests"] = self.premium_requests
        if self.unpriced:
            data["unpriced"] = list(self.unpriced)
        return data


def unpriced_text(models: tuple[str, ...]) -> str:
    """Why a cost is missing, in words: ``unknown model X``, ``no model named``."""
    return "; ".join(f"unknown model {m}" if m else "no model named" for m in models)


@dataclass(frozen=True)
class PhaseError:
    agent: str
    timestamp: str
    type: str
    message: str
    resolution: str = "pending"

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], where: str = "") -> PhaseError:
        f = Fields(raw, where)
        return cls(
            agent=f.text("agent") or "",
            timestamp=as_time(f.scalar("timestamp")) or "",
            type=f.text("type") or "error",
            message=f.text("message") or "",
            resolution=f.text("resolution") or "pending",
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "agent": self.agent,
            "timestamp": self.timestamp,
            "type": self.type,
            "message": self.message,
            "resolution": self.resolution,
        }


@dataclass(frozen=True)
class PhaseState:
    """What the session knows of one phase. ``definition`` is the phase's fingerprint."""

    id: str
    name: str
    status: Status = Status.PENDING
    agents: tuple[str, ...] = ()
    parallel: bool = True
    blocked_by: tuple[str, ...] = ()
    started: str | None = None
    completed: str | None = None
    attempts: int = 0
    files_created: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    files_deleted: tuple[str, ...] = ()
    downstream_context: Mapping[str, Any] = field(default_factory=dict)
    errors: tuple[PhaseError, ...] = ()
    result: str | None = None
    worker: str | None = None
    definition: str | None = None
    tokens: Tokens = Tokens()
    unverified: bool = False  # completed on the agent's word: no acceptance command checked it
    # Its last attempt's review, as ``Review.to_dict`` wrote it: a reviewed phase keeps its
    # verdict, so a resumed run neither reviews it again nor forgets it was reviewed.
    review: Mapping[str, Any] | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], where: str = "") -> PhaseState:
        """FieldError names the phase and the field that is not what this tool writes."""
        pid = Fields(raw, where).required("id")  # Maestro numbers its phases
        f = Fields(raw, f"phase {pid!r}")
        status = f.choice("status", _STATUS_NAMES, "pending")
        started = as_time(f.scalar("started"))
        if f.raw.get("attempts") is None:  # Maestro counts retries, not attempts
            attempts = f.count("retry_count") + 1 if started else 0
        else:
            attempts = f.count("attempts")
        agents = f.texts("agents")
        if f.raw.get("agents") is None:
            agents = (f.text("agent") or "",) if f.text("agent") else ()
        context = f.raw.get("downstream_context") or {}
        errors = f.items("errors")
        return cls(
            id=pid,
            name=f.text("name") or pid,
            status=Status(status),
            agents=agents,
            parallel=bool(f.raw.get("parallel", True)),
            blocked_by=f.texts("blocked_by"),
            started=started,
            completed=as_time(f.scalar("completed")),
            attempts=attempts,
            files_created=f.texts("files_created"),
            files_modified=f.texts("files_modified"),
            files_deleted=f.texts("files_deleted"),
            # YAML keys may be numbers or words (``5: x``, ``yes: x``): the session's are text.
            downstream_context={str(k): v for k, v in context.items()}
            if isinstance(context, Mapping)
            else {"text": context},
            errors=tuple(
                PhaseError.from_mapping(e, f"phase {pid!r} error {n}")
                for n, e in enumerate(errors, 1)
            ),
            result=f.text("result"),
            worker=f.text("worker"),
            definition=f.text("definition"),
            tokens=Tokens.from_mapping(f.mapping("tokens"), f"phase {pid!r} tokens"),
            unverified=f.raw.get("unverified") is True,
            review=dict(f.mapping("review")) or None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status.value,
            "agents": list(self.agents),
            "parallel": self.parallel,
            "blocked_by": list(self.blocked_by),
            "started": self.started,
            "completed": self.completed,
            "attempts": self.attempts,
            "retry_count": max(self.attempts - 1, 0),  # Maestro's name for the same count
            "files_created": list(self.files_created),
            "files_modified": list(self.files_modified),
            "files_deleted": list(self.files_deleted),
            "downstream_context": dict(self.downstream_context),
            "errors": [e.to_dict() for e in self.errors],
            "result": self.result,
            "worker": self.worker,
            "definition": self.definition,
            "tokens": self.tokens.to_dict(),
            **({"unverified": True} if self.unverified else {}),
            **({"review": dict(self.review)} if self.review else {}),
        }


_PHASE_FIELDS = frozenset(PhaseState.__dataclass_fields__)


def evolve(state: PhaseState, changes: Mapping[str, Any]) -> PhaseState:
    """``dataclasses.replace`` for changes already of their fields' types (a journal entry's,
    read through ``Fields``): the fields copied, without ``replace``'s pass over each field and
    ``__init__``; a tenth of its cost, on every transition of every phase."""
    unknown = changes.keys() - _PHASE_FIELDS
    if unknown:
        raise TypeError(f"PhaseState has no fields {sorted(unknown)}")
    new = object.__new__(PhaseState)
    new.__dict__.update(state.__dict__)
    new.__dict__.update(changes)
    return new


@dataclass
class SessionDoc:
    """The whole session: mutable, owned by the one process that holds the lock."""

    session_id: str
    task: str
    plan: str
    created: str
    updated: str
    status: str = "in_progress"
    run_started: str | None = None  # when the run that wrote it last opened it
    stop_reason: str | None = None
    execution_mode: str = "sequential"
    execution_backend: str = "pytest"
    current_batch: str | int | None = None
    current_phase: str | None = None
    tokens: Tokens = Tokens()
    by_agent: dict[str, Tokens] = field(default_factory=dict)
    journal_seq: int = 0
    phases: dict[str, PhaseState] = field(default_factory=dict)
    # The final review's base and last verdict (``review/final.py``'s ``FinalRecord``), plain:
    # the state layer knows no reviews.
    final_review: Mapping[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other tools' fields, kept as they were
