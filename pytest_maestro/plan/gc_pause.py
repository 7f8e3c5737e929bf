"""Pausing the cyclic garbage collector while a plan is read or analysed."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Run the block without the cyclic garbage collector.

    Reading a plan or analysing it allocates hundreds of thousands of small objects (phases,
    tuples, dicts, strings) that all stay alive. Each allocation burst triggers collections that
    traverse every live object only to find that nothing is garbage, and the bigger the plan, the
    more objects each pass walks: a large share of the time, and growth faster than the plan's
    size. None of these objects form reference cycles, so reference counting frees what the
    block drops and nothing piles up; the collector resumes when the block ends (unless it was
    already off: a caller's choice is kept).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
