"""Plans: the model, the readers and validation. ``load_plan`` is the one entry point."""

from __future__ import annotations

from pathlib import Path

from .errors import PlanError
from .formats import BY_NAME, FORMAT_NAMES, READERS
from .gc_pause import paused_gc
from .model import Assumption, Check, Files, Phase, Plan
from .source import Source
from .validate import validate

__all__ = [
    "FORMAT_NAMES",
    "Assumption",
    "Check",
    "Files",
    "Phase",
    "Plan",
    "PlanError",
    "Source",
    "detect_format",
    "load_plan",
    "paused_gc",
]


def detect_format(source: Source) -> str:
    """The name of the first format whose reader claims the plan."""
    for reader in READERS:
        if reader.detect(source):
            return reader.NAME
    if not source.text.strip():
        raise PlanError("the plan is empty", source.path)
    raise PlanError(
        "no phases found: not a plan in any known format (" + ", ".join(FORMAT_NAMES) + ")",
        source.path,
    )


def load_plan(path: Path | str, format: str | None = None) -> Plan:
    """Read, detect the format of (unless ``format`` names it), and validate a plan.

    Raises :class:`PlanError` with a one-line message for anything wrong with it.
    """
    source = Source.read(Path(path))
    if format is not None and format not in BY_NAME:
        known = ", ".join(FORMAT_NAMES)
        raise PlanError(f"unknown plan format {format!r}; known: {known}", source.path)
    with paused_gc():
        plan = BY_NAME[format or detect_format(source)].read(source)
        return validate(plan)
