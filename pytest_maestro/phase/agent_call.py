"""One attempt's call of an agent runtime: rate limits waited out, a missing handoff asked for
once more, what every call cost added up.

A reply marked rate-limited or overloaded is not an attempt: the call is made again, as long as
the phase's waits stay within ``max_wait`` seconds in all. An agent CLI's calls are paced by the
account (``slots.py``): each waits for a slot of the account first, and a refusal teaches every
process of the run; a spent quota blocks the runtime's remaining calls. A runtime called without
the account's slots backs off on its own: exponential backoff with jitter, or the CLI's
retry-after hint. A reply with neither status line nor Task Report is asked for once more, then
counted as failed.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..runtimes.base import AgentRequest, AgentResult, Runtime
from ..scheduling.pacing import CLEAN, LIMITED, NEUTRAL, QUOTA
from ..state.model import Status, Tokens
from .slots import AccountSlots, Acquired

FIRST_WAIT = 2.0  # seconds before the first retry of a rate-limited call
LONGEST_WAIT = 120.0
ASK_AGAIN = (
    "\n\n## Your previous reply had no status line\n"
    "It ended without COMPLETED:, FAILED: or BLOCKED:. Check the work against the task, then end "
    "your answer with exactly one status line, after the Task Report and Downstream Context.\n"
)
# A refusal that says the limit is the model's: calls of other models are counted apart.
_PER_MODEL = re.compile(
    r"per[ _-]model|for (this |the )?model\b|model[ _-]specific|\bmodel: \S", re.IGNORECASE
)


@dataclass(frozen=True)
class Call:
    result: AgentResult
    tokens: Tokens  # every call's, rate-limited and asked-again ones too
    waited: float  # seconds spent waiting out limits
    calls: int


def backoff(retry: int, hint: float | None, rng: random.Random) -> float:
    """Seconds before retry number ``retry`` (0-based): the CLI's hint when it gives one, else
    2, 4, 8 … up to 120 s; plus up to a quarter more, so parallel phases do not retry in step."""
    base = hint if hint is not None else min(FIRST_WAIT * 2**retry, LONGEST_WAIT)
    return base * (1 + rng.random() / 4)


def call_agent(
    runtime: Runtime,
    request: AgentRequest,
    *,
    max_wait: float,
    ask_again: bool,
    note: Callable[[str], None],
    waiting: Callable[[float | None, str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    slots: AccountSlots | None = None,
) -> Call:
    """``note`` writes a line to the phase's log; ``waiting`` hears of each wait (seconds when
    known, why) before it starts; ``slots``: the account's call slots, which pace the calls
    (None: each refused call backs off on its own); ``sleep`` and ``rng`` are for tests."""
    if slots is not None:
        return _paced(runtime, request, slots, max_wait, ask_again, note, waiting)
    tokens, waited, calls, retries = Tokens(), 0.0, 0, 0
    asked = not ask_again
    while True:
        result = runtime.run(request)
        calls += 1
        tokens += result.tokens or Tokens()
        if result.limited:
            left = max_wait - waited
            if left <= 0:
                return Call(_past_max_wait(result, waited), tokens, waited, calls)
            rng = rng or random.Random()  # seeded from the OS: only once a call must wait
            delay = min(backoff(retries, result.retry_after, rng), left)
            note(f"--- {result.message}; waiting {delay:.1f}s before calling again")
            if waiting is not None:
                waiting(delay, result.message)
            sleep(delay)
            waited += delay
            retries += 1
            continue
        if result.handoff_missing and not asked:
            asked, request = True, _ask_again(request, note)
            continue
        return Call(result, tokens, waited, calls)


def _ask_again(request: AgentRequest, note: Callable[[str], None]) -> AgentRequest:
    """The request once more, for a reply that had no status line."""
    note("--- the reply had no status line; asking once more")
    return replace(request, prompt=request.prompt + ASK_AGAIN)


def _past_max_wait(result: AgentResult, waited: float) -> AgentResult:
    return replace(
        result, message=f"{result.message} (waited {waited:.0f}s in all; --maestro-max-wait)"
    )


def _paced(
    runtime: Runtime,
    request: AgentRequest,
    slots: AccountSlots,
    max_wait: float,
    ask_again: bool,
    note: Callable[[str], None],
    waiting: Callable[[float | None, str], None] | None,
) -> Call:
    """Each call waits for a slot of the account first; a refused call waits again, at the
    head of the queue, and its refusal teaches every process of the run."""
    tokens, waited, calls = Tokens(), 0.0, 0
    asked = not ask_again
    refused: AgentResult | None = None
    ticket: str | None = None

    def told(delay: float | None, why: str) -> None:
        note(f"--- waiting for a slot: {why}")
        if waiting is not None:  # after a refusal, the refusal is why
            waiting(delay, refused.message if refused is not None else why)

    try:
        while True:
            got = slots.acquire(runtime.name, request.model, max_wait - waited, told, ticket)
            waited += got.waited
            for line in slots.take_notes():
                note(f"--- {line}")
            if got.ticket is None:
                return Call(_no_slot(got, refused, waited), tokens, waited, calls)
            if got.waited >= 0.05:
                note(f"--- a slot after {got.waited:.1f}s")
            ticket = got.ticket
            result = _call(runtime, request, slots, got.key, ticket)
            calls += 1
            tokens += result.tokens or Tokens()
            if result.limited:
                note(f"--- {result.message}; waiting for a slot before calling again")
                refused = result
                continue
            ticket = None
            if result.handoff_missing and not asked:
                asked, request = True, _ask_again(request, note)
                continue
            return Call(result, tokens, waited, calls)
    finally:
        if ticket is not None:  # a refused call that waits no more: its place goes
            slots.cancel(ticket)
        slots.add_waited(waited)


def _no_slot(got: Acquired, refused: AgentResult | None, waited: float) -> AgentResult:
    """The result of a call that got no slot: the account's quota is spent, or the phase
    waited as long as it may (after a refusal, the refusal is its result)."""
    if got.blocked is not None:
        message = f"{got.blocked} (no further {got.key} call is made this run)"
        return AgentResult(Status.BLOCKED, message, quota_spent=True)
    result = refused or AgentResult(
        Status.FAILED, f"rate limited: no slot for a {got.key} call", limited=True
    )
    return _past_max_wait(result, waited)


def _call(
    runtime: Runtime, request: AgentRequest, slots: AccountSlots, key: str, ticket: str
) -> AgentResult:
    """One call in the slot ``ticket``, freed after it with what the call says of the account."""
    try:
        result = runtime.run(request)
    except BaseException:
        slots.release(key, ticket, NEUTRAL)
        raise
    if result.limited:
        outcome = LIMITED
    elif result.quota_spent:
        outcome = QUOTA
    else:
        outcome = CLEAN
    slots.release(
        key,
        ticket,
        outcome,
        retry_after=result.retry_after,
        reason=result.message,
        per_model=request.model if _PER_MODEL.search(result.message) else None,
    )
    return result
