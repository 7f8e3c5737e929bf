"""The snapshot as a live view: rewritten about once a second while the session changes (less
often for a plan so large that the rewrite takes over 20 ms).

A transition costs one journal append; rewriting the snapshot costs time proportional to the
plan. Doing that on a timer, in a thread of its own, keeps the first flat and still lets a reader
of the Markdown file (``cat``, a second terminal, another tool) see the run within a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# A plan so large that writing its snapshot takes a while is rewritten less often, so that the
# thread takes at most about 2% of the time the run has: it renders in Python, so under the GIL
# every millisecond it takes is one the phases' own Python waits for (500 phases render in about
# 40 ms: rewritten every 2 s, not every second).
_SHARE = 50.0


def next_wait(interval: float, took: float) -> float:
    """Seconds until the next rewrite after one that took ``took``."""
    return max(interval, _SHARE * took)


class Refresher:
    """Calls ``refresh`` every ``interval`` seconds (or every ``next_wait``, if longer) until
    ``stop``; ``refresh`` says whether it wrote anything."""

    def __init__(self, interval: float, refresh: Callable[[], bool], took: float = 0.0) -> None:
        """``took``: what a rewrite took before (the fold that opened the session), which
        spaces the first one as the next."""
        self._interval = interval
        self.first_wait = next_wait(interval, took)
        self._refresh = refresh
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="maestro-snapshot", daemon=True)
        self.errors = 0  # refreshes that failed (a full disk); the closing fold reports its own
        self.last_error = ""  # why the last of them failed

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread; returns once it has ended (a refresh under way finishes first)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def lag(self) -> str | None:
        """How many refreshes failed, and why the last did; None if none did."""
        if not self.errors:
            return None
        return f"{self.errors} of its rewrites failed ({self.last_error})"

    def _loop(self) -> None:
        wait = self.first_wait
        while not self._stop.wait(wait):
            started = time.monotonic()
            try:
                self._refresh()
            except OSError as exc:
                # The journal holds every change: a view that could not be written only lags.
                self.errors += 1
                self.last_error = exc.strerror or str(exc)
            wait = next_wait(self._interval, time.monotonic() - started)
