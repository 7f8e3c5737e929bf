"""Numbers at the edge: every number a user or a program hands this tool (an option, an
environment variable, an ini key, a plan or agent field, an agent CLI's reply) is checked here
against one ``Bounds``, so that NaN, infinities, absurd sizes and the wrong type become one line
naming the value, never a busy loop, an overflow deep in the run, or a cap that no longer caps.

The maxima are generous limits of sense, not of taste: past them a value is a typo (a week of
timeout, a hundred retries, a million dollars), and every one of them stays far from what
``time.sleep``, ``threading`` waits and integer sizes can take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

WEEK = 7 * 24 * 3600.0  # seconds


class NumberError(ValueError):
    """A value outside its bounds; ``str()`` is the rule and the value, to follow a name."""


@dataclass(frozen=True)
class Bounds:
    """A closed range, open at ``least`` when ``above``; ``whole`` asks for an integer."""

    least: float
    most: float
    above: bool = False  # the value must be greater than ``least``, not equal
    whole: bool = False

    def rule(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        low = ">" if self.above else ">="
        return f"{kind} {low} {self.least:g} and <= {self.most:g}"

    def check(self, value: Any) -> float:
        """``value`` if it is a number within the bounds (an ``int`` for ``whole``), else
        NumberError saying the rule and what was given."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NumberError(f"must be {self.rule()}, got {_shown(value)}")
        if self.whole and isinstance(value, float):
            if not value.is_integer():
                raise NumberError(f"must be {self.rule()}, got {_shown(value)}")
            value = int(value)
        finite = isinstance(value, int) or math.isfinite(value)  # a huge int has no float
        if not (finite and self.least <= value <= self.most) or (
            self.above and value == self.least
        ):
            raise NumberError(f"must be {self.rule()}, got {_shown(value)}")
        return float(value) if not self.whole else int(value)

    def holds(self, value: Any) -> bool:
        """Whether ``check`` takes ``value``."""
        try:
            self.check(value)
        except NumberError:
            return False
        return True


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**60:
        # past 4,300 digits Python refuses to write it at all
        return f"a whole number of {_digits(abs(value))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _digits(value: int) -> int:
    """How many decimal digits ``value`` has, without writing it out."""
    guess = int(value.bit_length() * math.log10(2))
    return guess + 1 if value >= 10**guess else guess


# Options, plan fields and agent fields.
TIMEOUT = Bounds(0, WEEK, above=True)  # seconds an attempt or a check may take
RETRIES = Bounds(0, 100, whole=True)
CONCURRENT = Bounds(0, 10_000, whole=True)
CALLS = Bounds(1, 10_000, whole=True)  # agent calls of a runtime at once
STAGGER = Bounds(0, 600)  # the controller sleeps it between starts
SHARE = Bounds(0, 1)
DOLLARS = Bounds(0, 1_000_000)
WAIT = Bounds(0, WEEK)
LOG_MEGABYTES = Bounds(0, 1024 * 1024, above=True)  # a tebibyte
DIFF_MEGABYTES = Bounds(0, 1024, above=True)  # a report carries it: a gibibyte at most
ESTIMATE = Bounds(0, WEEK)
TIMEOUT_MINUTES = Bounds(0, WEEK / 60, above=True)
TURNS = Bounds(1, 100_000, whole=True)
TEMPERATURE = Bounds(0, 2)

# A process or group id read from a file this tool wrote (a running record, a lock's info): a
# positive C int, where os.kill takes it; 0 and below would signal a group, or every process.
PID = Bounds(0, 2**31 - 1, above=True, whole=True)
# What an agent CLI's reply may say it used: more tokens or dollars than this in one call is
# a broken reply, and NaN or a negative cost would disable or undo the budget.
REPLY_TOKENS = Bounds(0, 10**15, whole=True)
REPLY_DOLLARS = Bounds(0, 1_000_000)


def reply_tokens(value: Any, field: str) -> int:
    """A token count from a reply: absent (None) is 0; anything else must be a count."""
    return int(_reply(value, field, REPLY_TOKENS))


def reply_dollars(value: Any, field: str) -> float:
    """A cost from a reply: absent (None) is 0; anything else must be dollars."""
    return float(_reply(value, field, REPLY_DOLLARS))


def _reply(value: Any, field: str, bounds: Bounds) -> float:
    if value is None:
        return 0
    try:
        return bounds.check(value)
    except NumberError as error:
        raise NumberError(f"the reply's {field} {error}") from None
