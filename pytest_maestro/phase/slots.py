"""The account's call slots, shared by every process of a run (and by runs in one state dir).

A small JSON file in the state dir holds the pacing core's `Pacer` (``scheduling/pacing.py``) and
the seconds each session's phases waited for the account; every question is asked under a file
lock, the file read, asked, and written back whole (a temporary file renamed over it). A slot held,
or a place in a queue, of a process that is gone is freed at the next question; a file that cannot
be read (damaged by hand, from another version) is started afresh, said once in the phase's log.
Waiting calls ask again every ``POLL`` seconds. See docs/architecture.md, "Calls paced by the
account".
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..scheduling.pacing import Decision, Pacer, as_seconds
from ..state.aside import into_archive
from ..state.journal import open_new
from ..state.lock import process_exists
from ..state.paths import SessionPaths
from ..texts import duration_text

if TYPE_CHECKING:
    import filelock

POLL = 0.02  # seconds between two questions of a waiting call (a read, most of them)
LOCK_TIMEOUT = 60.0
LOCK_NOTICE = 2.0  # seconds a call waits on another process's lock before it says so
VERSION = 1


@dataclass(frozen=True)
class Acquired:
    """A slot (``ticket``), or why none: ``blocked`` (a spent quota) or ``waited`` past the
    bound; and the seconds waited either way."""

    ticket: str | None
    key: str
    waited: float
    blocked: str | None = None


Waiting = Callable[[float | None, str], None]  # seconds when known, why


class AccountSlots:
    """``ceilings``: the known limits of runtimes (``--maestro-max-concurrent-calls``)."""

    def __init__(
        self,
        paths: SessionPaths,
        ceilings: Mapping[str, int] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = paths.pacing
        self.archive = paths.archive
        self.session = paths.name
        self.ceilings = dict(ceilings or {})
        self.clock = clock
        self.sleep = sleep
        self.notes: list[str] = []  # what the file's readers found wrong, said once

    @functools.cached_property
    def _lock(self) -> filelock.BaseFileLock:
        # Made at the first question, with filelock (which imports asyncio) imported then: every
        # process has the account's slots, and one that runs only commands never asks.
        import filelock

        return filelock.FileLock(
            str(self.path.with_name(f".{self.path.name}.lock")), timeout=LOCK_TIMEOUT
        )

    def ceiling(self, key: str) -> int | None:
        return self.ceilings.get(key.split(" ", 1)[0])

    @contextlib.contextmanager
    def _held(
        self, stuck: Callable[[str], None] | None = None
    ) -> Iterator[tuple[Pacer, dict[str, float]]]:
        """The pacer and the waits per session, read under the lock, written back after.
        ``stuck`` hears once, after ``LOCK_NOTICE`` seconds, that another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if stuck is None:
                self._lock.acquire()
            else:
                try:
                    self._lock.acquire(timeout=LOCK_NOTICE)
                except TimeoutError:
                    stuck(
                        f"another process holds {self._lock.lock_file}, the lock of the "
                        f"account's call slots (at most {LOCK_TIMEOUT:g} s)"
                    )
                    self._lock.acquire(timeout=max(LOCK_TIMEOUT - LOCK_NOTICE, 0.0))
        except TimeoutError:  # filelock's Timeout says only that the lock could not be had
            raise TimeoutError(
                f"the account's call slots ({self.path}) stayed locked {LOCK_TIMEOUT:g} s by "
                "another process: every run in this state dir shares them, and one holds them "
                f"still (a run that hangs?); the lock is {self._lock.lock_file}"
            ) from None
        try:
            text, pacer, waits = self._read()
            pacer.reclaim(process_exists)
            yield pacer, waits
            data = {"version": VERSION, "keys": pacer.to_dict(), "waited": waits}
            new = json.dumps(data)
            if new != text:  # a waiting call's question changes nothing: nothing to write
                temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                with open_new(temporary) as handle:
                    handle.write(new.encode())
                os.replace(temporary, self.path)
        finally:
            self._lock.release()

    def _read(self) -> tuple[str, Pacer, dict[str, float]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return "", Pacer(), {}
        try:
            text = raw.decode()
            data: Any = json.loads(text)
            if data["version"] != VERSION:
                raise ValueError(f"version {data['version']!r}")
            waits = {str(k): as_seconds(v) for k, v in dict(data["waited"]).items()}
            return text, Pacer.from_dict(data["keys"]), waits
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            self.notes.append(
                f"the account's call slots in {self.path} could not be read ({type(exc).__name__}"
                f"): started afresh; {self._keep_damaged()}"
            )
            return "", Pacer(), {}

    def _keep_damaged(self) -> str:
        """The damaged file moved into the archive, under a name no later move reuses."""
        try:
            kept = into_archive(self.archive, self.path, self.path.name, "damaged")
        except OSError as exc:
            return f"it could not be kept: {exc.strerror}"
        return f"the damaged file is kept as {kept}"

    def take_notes(self) -> list[str]:
        """What reading the file found wrong since last asked, once."""
        notes, self.notes = self.notes, []
        return notes

    def reset(self) -> None:
        """A new run of the session: its waits from zero, an earlier run's spent quota (without
        a reset time) asked again. What other processes hold stays theirs."""
        with self._held() as (pacer, waits):
            pacer.unblock()
            waits[self.session] = 0.0

    def waited(self) -> float:
        """Seconds this session's phases waited for the account, in all (0, and a note, when
        the file cannot be had)."""
        try:
            with self._held() as (_, waits):
                return waits.get(self.session, 0.0)
        except (OSError, TimeoutError) as exc:
            self.notes.append(f"how long phases waited for the account is not known: {exc}")
            return 0.0

    def add_waited(self, seconds: float) -> None:
        if seconds > 0:
            with self._held() as (_, waits):
                waits[self.session] = waits.get(self.session, 0.0) + seconds

    def acquire(
        self,
        runtime: str,
        model: str | None,
        most: float,
        waiting: Waiting | None = None,
        ticket: str | None = None,
    ) -> Acquired:
        """A slot for a call of ``runtime`` (with ``model``), waiting for one up to ``most``
        seconds; ``waiting`` hears once why it waits. ``ticket``: a refused call's, which waits
        again at the head of the queue."""
        ticket = ticket or f"{os.getpid()}-{secrets.token_hex(4)}"
        started = self.clock()
        told = False
        key = runtime
        said = False  # that another process held the lock: said once

        def stuck(why: str) -> None:
            nonlocal said
            if waiting is not None and not said:
                said = True
                waiting(None, why)

        try:
            while True:
                with self._held(stuck) as (pacer, _):
                    key = pacer.key(runtime, model)
                    now = self.clock()
                    decision = pacer.ask(key, ticket, os.getpid(), now, self.ceiling(key))
                    # Given up on the clock read under the lock, and only then: a second read
                    # after it could give up with the ticket still queued, a place never freed.
                    gave_up = not decision.granted and now - started >= most
                    if gave_up:
                        pacer.cancel(key, ticket)
                elapsed = self.clock() - started
                # A slot or a refusal at the first question: no wait, whatever the lock took.
                waited = elapsed if told else 0.0
                if decision.granted:
                    return Acquired(ticket, key, waited)
                if decision.blocked is not None:
                    return Acquired(None, key, waited, decision.blocked)
                if gave_up:
                    return Acquired(None, key, elapsed)
                if not told:
                    told = True
                    until = decision.until  # told no longer than it may wait
                    if waiting is not None:
                        delay = None if until is None else min(until - now, most)
                        waiting(delay, _why(key, decision, now))
                self.sleep(min(POLL, max(most - (now - started), 0.0)))
        except BaseException:
            with contextlib.suppress(Exception), self._held() as (pacer, _):
                pacer.cancel(key, ticket)
            raise

    def release(
        self,
        key: str,
        ticket: str,
        outcome: str,
        *,
        retry_after: float | None = None,
        reason: str = "",
        per_model: str | None = None,
    ) -> None:
        """The call ended with ``outcome``: its slot freed, what it says of the account learned.
        A refused call keeps its place at the head of the queue: ``acquire`` it again, or
        ``cancel`` it. ``per_model``: the call's model, when the refusal says the limit is the
        model's."""
        with self._held() as (pacer, _):
            pacer.finish(
                key,
                ticket,
                outcome,
                self.clock(),
                ceiling=self.ceiling(key),
                retry_after=retry_after,
                reason=reason,
                per_model=per_model,
            )

    def cancel(self, ticket: str) -> None:
        """The call ``ticket`` neither waits nor runs any more, under whichever key it was."""
        with self._held() as (pacer, _):
            for key in pacer.keys:
                pacer.cancel(key, ticket)


def _why(key: str, decision: Decision, now: float) -> str:
    if decision.until is not None:
        return f"no {key} call before {duration_text(max(decision.until - now, 0.0))} from now"
    return f"{decision.held} {key} calls in flight, as many as the account allows now"
