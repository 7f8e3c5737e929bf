"""The pure pacing core: may this agent call start now, given what the account allowed so far.

Calls are counted per key: a runtime's name, or its name and the model where its CLI said the
limit is per model. Each key has a concurrency limit, known (``--maestro-max-concurrent-calls``,
a ceiling passed in with each question) or learned from the account's refusals, additive
increase and multiplicative decrease: a refusal with k calls in flight makes the limit at most
k - 1 (never below 1), a window of clean calls while calls wait makes it one more (a window twice
as long after each growth the account took back, so that a steady limit is not probed at every
window). Waiting calls
are served first come, first served; a refused call keeps its place at the head of the queue. A
retry-after from the CLI closes the key until then. A refusal that no other call's end will
explain closes it for a backoff that doubles with each such refusal: of the only call in flight,
or with no more calls in flight than the account served cleanly a moment ago (a limit per minute,
not on calls at once: the concurrency limit stays). Such a key opens again for one call first,
the rest once the account has kept it a while (twice as long as the last refusal took to come,
at most the cool-off's length): a guess at when a minute ends is most often early, and one call
refused costs one, where all the waiting calls would be refused. A spent quota blocks the key's
remaining calls at once.

No processes, no clock, no files: values in, decisions out. ``phase/slots.py`` keeps a `Pacer` in
a file every process of a run shares and asks it under a lock. See docs/architecture.md, "Calls
paced by the account".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLEAN", "LIMITED", "NEUTRAL", "QUOTA", "Decision", "KeyState", "Pacer"]

CLEAN = "clean"  # the account answered: whatever the agent did, it was not refused
LIMITED = "limited"  # a 429, a 529: refused or overloaded
QUOTA = "quota"  # spent: no call of the key will do until it resets
NEUTRAL = "neutral"  # the call never reached the account (an error here): nothing learned
OUTCOMES = (CLEAN, LIMITED, QUOTA, NEUTRAL)

FIRST_COOL_OFF = 2.0  # seconds the key stays closed after its only call in flight was refused
LONGEST_COOL_OFF = 120.0
LEAST_WINDOW = 4  # clean calls before the limit grows by one, at the least
MOST_DOUBLINGS = 4  # of that window, after growths the account refused
LEAST_TRIAL = 1.0  # seconds the first call after a cool-off goes alone, at the least


def window(limit: int, failed: int = 0) -> int:
    """Clean calls, since the limit last changed, before it grows by one: two rounds of it,
    twice as many for each growth in a row that a refusal took back (``failed``)."""
    return int(max(LEAST_WINDOW, 2 * limit) << min(failed, MOST_DOUBLINGS))


def cool_off(refusals: int) -> float:
    """Seconds the key stays closed after the ``refusals``-th refusal in a row of a lone call."""
    return min(FIRST_COOL_OFF * 2.0 ** max(refusals - 1, 0), LONGEST_COOL_OFF)


def trial_length(latency: float, refusals: int) -> float:
    """Seconds the first call after the ``refusals``-th cool-off goes alone: twice as long as the
    last refusal took to come (``latency``), so that one not come by then is not coming; never
    longer than that cool-off was. A refusal that comes late (a CLI that retried first, a limit
    met mid-session) would hold the others back for minutes: then they go, as without a trial."""
    return max(LEAST_TRIAL, min(2.0 * latency, cool_off(refusals)))


@dataclass(frozen=True)
class Decision:
    """``granted``: the call may start; else ``blocked`` (why no call of the key will do) or
    wait: until ``until`` (epoch seconds: the key is closed) or until a slot frees (None)."""

    granted: bool = False
    blocked: str | None = None
    until: float | None = None
    held: int = 0  # calls of the key in flight
    limit: int | None = None  # the limit in force; None: none known


@dataclass
class KeyState:
    limit: int | None = None  # learned; None: no refusal yet
    held: dict[str, int] = field(default_factory=dict)  # ticket -> the pid of its process
    queue: list[tuple[str, int]] = field(default_factory=list)  # (ticket, pid), first first
    not_before: float = 0.0  # epoch seconds: no call starts before
    clean: int = 0  # clean calls since the limit last changed
    refusals: int = 0  # refusals in a row of a lone call
    blocked: str | None = None  # a spent quota, in the CLI's words
    blocked_until: float | None = None  # when the CLI says it resets
    per_model: bool = False  # the CLI said its limit is per model (on the runtime's key)
    proven: int = 0  # calls in flight together that the account served cleanly, at the most
    probing: bool = False  # the limit grew, and no refusal took it back yet
    failed: int = 0  # growths in a row that a refusal took back
    since: dict[str, float] = field(default_factory=dict)  # ticket -> when it was granted
    latency: float = 0.0  # seconds the last refusal took to come, from its call's start
    reopening: bool = False  # closed by a cool-off: one call goes first when it opens
    trial: str | None = None  # that call's ticket, once granted

    def to_dict(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "held": self.held,
            "queue": [list(entry) for entry in self.queue],
            "not_before": self.not_before,
            "clean": self.clean,
            "refusals": self.refusals,
            "blocked": self.blocked,
            "blocked_until": self.blocked_until,
            "per_model": self.per_model,
            "proven": self.proven,
            "probing": self.probing,
            "failed": self.failed,
            "since": self.since,
            "latency": self.latency,
            "reopening": self.reopening,
            "trial": self.trial,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeyState:
        """ValueError, TypeError or KeyError for anything but what ``to_dict`` wrote."""
        limit, until = data["limit"], data["blocked_until"]
        state = cls(
            limit=None if limit is None else _whole(limit, 1),
            held={str(t): _whole(p, 1) for t, p in dict(data["held"]).items()},
            queue=[(str(t), _whole(p, 1)) for t, p in data["queue"]],
            not_before=as_seconds(data["not_before"]),
            clean=_whole(data["clean"], 0),
            refusals=_whole(data["refusals"], 0),
            blocked=None if data["blocked"] is None else str(data["blocked"]),
            # A NaN here would keep the key closed, or blocked, for good: no moment is past it.
            blocked_until=None if until is None else as_seconds(until),
            per_model=bool(data["per_model"]),
            proven=_whole(data["proven"], 0),
            probing=bool(data["probing"]),
            failed=_whole(data["failed"], 0),
            # Not in a file an earlier version wrote: nothing on trial then.
            since={str(t): as_seconds(at) for t, at in _mapping(data.get("since", {})).items()},
            latency=as_seconds(data.get("latency", 0.0)),
            reopening=bool(data.get("reopening", False)),
            trial=data.get("trial"),
        )
        if state.trial is not None and state.trial not in state.since:
            raise ValueError(f"the call on trial {state.trial!r} has no start")
        return state


# A reset further off than a year is no time this tool can wait for: past it, a retry-after is
# taken as none said (a spent quota waits for the next run, a rate limit for its cool-off).
LONGEST_WAIT = 366 * 24 * 3600.0


def as_seconds(value: Any) -> float:
    try:
        seconds = float(value)
    except OverflowError:  # an integer past any float
        seconds = math.inf
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"not a time in seconds: {value!r}")
    return seconds


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"not a mapping: {value!r}")
    return value


def _whole(value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"not a whole number >= {least}: {value!r}")
    return value


class Pacer:
    """Every key's state; every method takes the moment it is asked at (epoch seconds)."""

    def __init__(self, keys: Mapping[str, KeyState] | None = None) -> None:
        self.keys: dict[str, KeyState] = dict(keys or {})

    def key(self, runtime: str, model: str | None) -> str:
        """The key a call of ``runtime`` with ``model`` is counted under."""
        state = self.keys.get(runtime)
        if model and state is not None and state.per_model:
            return f"{runtime} ({model})"
        return runtime

    def _state(self, key: str) -> KeyState:
        return self.keys.setdefault(key, KeyState())

    def ask(self, key: str, ticket: str, pid: int, now: float, ceiling: int | None) -> Decision:
        """May the call ``ticket`` (of process ``pid``) start now? A call not yet waiting joins
        the queue's end; the first waiters go while the limit leaves slots free."""
        state = self._state(key)
        until = state.blocked_until
        if state.blocked is not None and until is not None and now >= until:
            state.blocked = state.blocked_until = None
        if state.blocked is not None:
            self.cancel(key, ticket)
            return Decision(blocked=state.blocked, held=len(state.held))
        limit = _least(state.limit, ceiling)
        if ticket in state.held:
            return Decision(granted=True, held=len(state.held), limit=limit)
        if all(entry[0] != ticket for entry in state.queue):
            state.queue.append((ticket, pid))
        if now < state.not_before:
            return Decision(until=state.not_before, held=len(state.held), limit=limit)
        free = len(state.queue) if limit is None else limit - len(state.held)
        if state.reopening and state.trial not in state.held:  # none on trial (or it ended)
            state.trial = None
            if now >= state.not_before + LONGEST_COOL_OFF:  # opened long ago: the guess is old
                state.reopening = False
            free = min(free, 1) if state.reopening else free
        elif state.reopening and state.trial is not None:
            started = state.since.get(state.trial, now)
            until = started + trial_length(state.latency, state.refusals)
            if now < until:
                return Decision(until=until, held=len(state.held), limit=limit)
            state.reopening, state.trial = False, None  # the account kept it: open for all
        place = next(i for i, entry in enumerate(state.queue) if entry[0] == ticket)
        if place >= free:
            return Decision(held=len(state.held), limit=limit)
        del state.queue[place]
        state.held[ticket] = pid
        state.since[ticket] = now
        if state.reopening:
            state.trial = ticket
        return Decision(granted=True, held=len(state.held), limit=limit)

    def cancel(self, key: str, ticket: str) -> None:
        """The call no longer waits nor runs (it gave up, or its process ended)."""
        state = self._state(key)
        state.held.pop(ticket, None)
        state.since.pop(ticket, None)
        state.queue = [entry for entry in state.queue if entry[0] != ticket]

    def finish(
        self,
        key: str,
        ticket: str,
        outcome: str,
        now: float,
        *,
        ceiling: int | None = None,
        retry_after: float | None = None,
        reason: str = "",
        per_model: str | None = None,
    ) -> None:
        """The call ``ticket`` ended with ``outcome`` (one of ``OUTCOMES``). A refused call
        waits again at the head of the queue, to be asked for once more: of its model's key
        when the refusal says the limit is the model's (``per_model``: the call's model)."""
        if retry_after is not None and not (0 <= retry_after <= LONGEST_WAIT):
            retry_after = None  # no time (a CLI's 400 digits, NaN): no reset time said
        state = self._state(key)
        pid = state.held.get(ticket, 0)
        started = state.since.get(ticket)
        flight = len(state.held) if ticket in state.held else len(state.held) + 1
        self.cancel(key, ticket)
        if outcome == LIMITED and per_model and " " not in key:  # from now on, per model
            state.per_model = True
            state = self._state(self.key(key, per_model))
        if outcome == CLEAN:
            if ticket == state.trial:  # served through: the key is open for all
                state.reopening, state.trial = False, None
            self._clean(state, flight, ceiling)
        elif outcome == LIMITED:
            if started is not None and (not state.reopening or ticket == state.trial):
                state.latency = max(now - started, 0.0)  # a call from before: not the trial's
            self._limited(state, flight, now, retry_after)
            if pid:
                state.queue.insert(0, (ticket, pid))
        elif outcome == QUOTA:
            state.blocked = reason or "the account's quota is spent"
            state.blocked_until = None if retry_after is None else now + retry_after
        elif outcome != NEUTRAL:
            raise ValueError(f"an outcome is one of {', '.join(OUTCOMES)}, not {outcome!r}")

    def _clean(self, state: KeyState, flight: int, ceiling: int | None) -> None:
        state.refusals = 0
        state.proven = max(state.proven, flight)
        if state.limit is None:
            return  # nothing learned to grow back from
        state.clean += 1
        grows = ceiling is None or state.limit < ceiling
        if state.clean >= window(state.limit, state.failed) and state.queue and grows:
            if state.probing:  # the last growth held a window long: it was no probe too many
                state.failed = 0
            state.limit += 1
            state.clean = 0
            state.probing = True

    def _limited(self, state: KeyState, flight: int, now: float, retry_after: float | None) -> None:
        # As many calls at once as the account served cleanly a moment ago: not a limit on calls
        # at once but one per minute (or a busy API). The key closes instead, and the level it
        # served counts one less, so that a refusal there again cuts the limit. A lone call
        # refused says nothing of calls at once either: cut to one, an account of so many calls
        # a minute would then be served one call at a time once its minute is over.
        per_minute = flight <= max(state.proven, 1)
        if per_minute:
            state.proven = flight - 1
        else:
            cut = max(1, flight - 1)
            state.limit = cut if state.limit is None else min(state.limit, cut)
            state.proven = min(state.proven, state.limit)
            if state.probing:  # the account took the growth back: wait longer for the next
                state.failed += 1
                state.probing = False
        state.clean = 0
        if retry_after is not None:
            state.not_before = max(state.not_before, now + retry_after)
        elif per_minute or flight <= 1:  # no other call's end will explain it
            if now >= state.not_before:  # refusals while the key is closed are the same one
                state.refusals += 1
            state.not_before = max(state.not_before, now + cool_off(state.refusals))
            state.reopening, state.trial = True, None

    def reclaim(self, alive: Callable[[int], bool]) -> list[str]:
        """Slots held, and places in queues, of processes that are gone: freed. The tickets."""
        gone: list[str] = []
        for state in self.keys.values():
            for ticket, pid in list(state.held.items()):
                if not alive(pid):
                    del state.held[ticket]
                    state.since.pop(ticket, None)
                    gone.append(ticket)
            kept = [entry for entry in state.queue if alive(entry[1])]
            gone += [entry[0] for entry in state.queue if entry not in kept]
            state.queue = kept
        return gone

    def unblock(self) -> None:
        """A new run: a quota spent in an earlier one, without a reset time, is asked again,
        and a key an earlier run's cool-off closed opens for all (no call on trial holds it)."""
        for state in self.keys.values():
            if state.blocked_until is None:
                state.blocked = None
            if state.trial not in state.held:
                state.reopening, state.trial = False, None

    def to_dict(self) -> dict[str, Any]:
        return {key: state.to_dict() for key, state in self.keys.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pacer:
        return cls({str(key): KeyState.from_dict(value) for key, value in data.items()})


def _least(first: int | None, second: int | None) -> int | None:
    known = [value for value in (first, second) if value is not None]
    return min(known) if known else None
