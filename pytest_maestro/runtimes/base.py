"""What every runtime takes and gives: one attempt's request, its result, the interface."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..plan import Phase
from ..processes.process import ProcessResult
from ..state.model import Status, Tokens
from .activity import Activity
from .agents import Agent
from .handoff import Handoff

RESULTS = (Status.COMPLETED, Status.FAILED, Status.BLOCKED)


@dataclass(frozen=True)
class AgentRequest:
    phase: Phase
    prompt: str
    attempt: int  # 1-based
    root: Path
    env: Mapping[str, str]
    timeout: float
    log: Path
    agent: Agent | None = None
    model: str | None = None
    autonomous: bool = False  # the user consented to the CLI acting without asking
    budget_usd: float | None = None  # dollars this attempt may still spend
    # Shows what the agent is doing (its latest tool call) on the phase's progress line.
    activity: Callable[[Activity], None] | None = None
    # A reviewer's call: the runtime's read-only mode (``read_only`` says which), whatever
    # ``autonomous`` says. Only a runtime that has one is handed such a request.
    read_only: bool = False
    role: str = ""  # who calls beside the phase's own agent ("review"): its files apart
    # The CLI session to go on with (a fix round after a review): given only to a runtime whose
    # ``resumes`` says it can.
    resume: str | None = None

    def attempt_file(self, suffix: str) -> Path:
        """A file of this attempt beside the phase's log: its prompt, the CLI's reply (a
        reviewer's with its role in the name, so that the implementer's stay)."""
        role = f".{self.role}" if self.role else ""
        return self.log.with_name(f"{self.log.stem}.attempt-{self.attempt}{role}{suffix}")


@dataclass(frozen=True)
class AgentResult:
    status: Status  # completed, failed or blocked
    message: str  # one line: why it failed, or the agent's own status line
    processes: tuple[ProcessResult, ...] = ()
    text: str = ""  # the agent's reply
    tokens: Tokens | None = None  # what the attempt cost, when the CLI says
    session_id: str | None = None
    # Rate-limited or overloaded: wait and try again, without counting an attempt.
    limited: bool = False
    retry_after: float | None = None  # seconds, when the CLI says
    quota_spent: bool = False  # blocked: the account's quota is spent, for every call of it
    handoff_missing: bool = False  # the reply had no status line and no Task Report
    handoff: Handoff = field(default_factory=Handoff)  # what the agent handed back, read once

    def __post_init__(self) -> None:
        # A runtime of another plugin may say its status as text: it travels as a Status.
        if self.status not in RESULTS:
            raise ValueError(
                f"an agent's result is completed, failed or blocked, not {str(self.status)!r}"
            )
        object.__setattr__(self, "status", Status(self.status))

    @property
    def ok(self) -> bool:
        return self.status == Status.COMPLETED


class Runtime(Protocol):
    """``name`` is what agents and ``--maestro-runtime`` call it; ``autonomy`` says what
    ``--maestro-autonomous`` lets it do (its approval flags), empty when it needs no consent."""

    @property
    def name(self) -> str: ...

    @property
    def autonomy(self) -> str: ...

    def run(self, request: AgentRequest) -> AgentResult: ...
