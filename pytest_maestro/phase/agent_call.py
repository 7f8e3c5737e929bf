"""One attempt's call of an agent runtime: rate limits waited out, a missing handoff asked for
once more, what every call cost added up.

A reply marked rate-limited or overloaded is not an attempt: the call is made again after an
exponential backoff with jitter (or the CLI's retry-after hint), as long as the phase's waits stay
within ``max_wait`` seconds in all. A reply with neither status line nor Task Report is asked for
once more, then counted as failed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..runtimes.base import AgentRequest, AgentResult, Runtime
from ..state.model import Tokens

FIRST_WAIT = 2.0  # seconds before the first retry of a rate-limited call
LONGEST_WAIT = 120.0
ASK_AGAIN = (
    "\n\n## Your previous reply had no status line\n"
    "It ended without COMPLETED:, FAILED: or BLOCKED:. Check the work against the task, then end "
    "your answer with exactly one status line, after the Task Report and Downstream Context.\n"
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
    waiting: Callable[[float, str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> Call:
    """``note`` writes a line to the phase's log; ``waiting`` hears of each rate-limit wait
    (seconds, why) before it starts; ``sleep`` and ``rng`` are for tests."""
    tokens, waited, calls, retries = Tokens(), 0.0, 0, 0
    asked = not ask_again
    while True:
        result = runtime.run(request)
        calls += 1
        tokens += result.tokens or Tokens()
        if result.limited:
            left = max_wait - waited
            if left <= 0:
                message = f"{result.message} (waited {waited:.0f}s in all; --maestro-max-wait)"
                return Call(replace(result, message=message), tokens, waited, calls)
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
            asked = True
            note("--- the reply had no status line; asking once more")
            request = replace(request, prompt=request.prompt + ASK_AGAIN)
            continue
        return Call(result, tokens, waited, calls)
