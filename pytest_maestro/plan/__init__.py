"""Plans: the model, the readers and validation. ``load_plan`` is the one entry point."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

from .errors import PlanError
from .model import Assumption, Check, Files, Phase, Plan
from .source import read_text
from .validate import validate

__all__ = [
    "FORMAT_NAMES",
    "Assumption",
    "Check",
    "Files",
    "Phase",
    "Plan",
    "PlanError",
    "detect_format",
    "load_plan",
    "paused_gc",
]

FORMAT_NAMES = (
    "native",
    "design-v2",
    "maestro-json",
    "maestro-md",
    "superpowers",
    "tasklist",
    "steps",
)


def detect_format(text: str, path: Path) -> str:
    from .formats import readers

    for name, reader in readers().items():
        if reader.detect(text, path):
            return name
    if not text.strip():
        raise PlanError("the plan is empty", path)
    raise PlanError(
        "no phases found: not a plan in any known format (" + ", ".join(FORMAT_NAMES) + ")",
        path,
    )


def load_plan(path: Path | str, format: str | None = None) -> Plan:
    """Read, detect the format of (unless ``format`` names it), and validate a plan.

    Raises :class:`PlanError` with a one-line message for anything wrong with it.
    """
    from .formats import readers

    path = Path(path)
    text = read_text(path)
    with paused_gc():
        if format is None:
            format = detect_format(text, path)
        elif format not in FORMAT_NAMES:
            known = ", ".join(FORMAT_NAMES)
            raise PlanError(f"unknown plan format {format!r}; known: {known}", path)
        plan = readers()[format].read(text, path)
        return validate(plan)


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
