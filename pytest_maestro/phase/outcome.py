"""What running a phase gives: its attempts, each with its checks and file problems, and how
it ended. See docs/architecture.md, "The flow of one phase from plan to JUnit"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files.putback import Restored
from ..review.verdict import Review
from ..runtimes import AgentResult
from ..runtimes.handoff import Handoff
from ..state.model import Status, Tokens

PROBLEM_LIMIT = 200  # characters of a one-line problem: a message, not the output


@dataclass(frozen=True)
class CheckFailure:
    criterion: str
    command: str
    exit_code: int
    timed_out: bool
    tail: tuple[str, ...]


@dataclass(frozen=True)
class Attempt:
    number: int
    agent: AgentResult
    check_failures: tuple[CheckFailure, ...] = ()
    file_problems: tuple[str, ...] = ()
    tokens: Tokens = field(default_factory=Tokens)  # every call the attempt made
    outside: tuple[str, ...] = ()  # files changed outside the declared ones
    checked: bool = False  # at least one acceptance command ran
    review: Review | None = None  # a reviewer's, once its own checks passed
    rounds: int = 0  # fix rounds made after a failed review: they stood in for retries

    @property
    def ok(self) -> bool:
        own = self.agent.ok and not self.check_failures and not self.file_problems
        return own and (self.review is None or self.review.passed)

    @property
    def blocked(self) -> bool:
        """Retrying cannot help: the agent says it is blocked, or its reviewer cannot run."""
        return self.agent.status is Status.BLOCKED or bool(self.review and self.review.blocked)

    @property
    def problem(self) -> str:
        """One line: the attempt's first problem (the agent's status line or error, a failed
        check, a file problem, the review's first blocking finding)."""
        if not self.agent.ok:
            text = self.agent.message
        elif self.check_failures:
            more = len(self.check_failures) - 1
            text = f"check failed: {self.check_failures[0].criterion}"
            text += f" (and {more} more)" if more else ""
        elif self.review is not None and not self.review.passed:
            # Before file problems: a review runs only when there were none, so any there now
            # came after it (where an isolated phase's work was kept).
            text = self.review.problem or ""
        else:
            text = self.file_problems[0] if self.file_problems else self.agent.status
        return " ".join(text.split())[:PROBLEM_LIMIT]


@dataclass(frozen=True)
class PhaseOutcome:
    phase_id: str
    status: Status  # completed, failed or blocked
    attempts: tuple[Attempt, ...]
    log: Path
    started: float  # epoch seconds
    finished: float
    unverified: bool = False  # passed on the agent's word alone: no check could have failed it
    # A phase that did not complete: its declared files as the restore after it left them,
    # or why they could not be put back.
    put_back: tuple[Restored, ...] = ()
    not_put_back: str | None = None
    warnings: tuple[str, ...] = ()  # what it went without (its prompt lacked its dependencies')
    # A remote phase's result for the controller, a plain mapping (``remote.wire.Result``).
    remote: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == Status.COMPLETED

    @property
    def tokens(self) -> Tokens:
        total = Tokens()
        for attempt in self.attempts:
            total += attempt.tokens
        return total

    @property
    def handoff(self) -> Handoff:
        """What the last attempt's agent handed back (empty for shell phases)."""
        return self.attempts[-1].agent.handoff if self.attempts else Handoff()

    @property
    def outside(self) -> tuple[str, ...]:
        return self.attempts[-1].outside if self.attempts else ()

    @property
    def review(self) -> Review | None:
        """The last attempt's review, if it had one."""
        return self.attempts[-1].review if self.attempts else None
