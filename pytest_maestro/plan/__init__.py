"""Plans: the model, the readers and validation. ``load_plan`` is the one entry point."""

from __future__ import annotations

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
    if format is None:
        format = detect_format(text, path)
    elif format not in FORMAT_NAMES:
        raise PlanError(f"unknown plan format {format!r}; known: {', '.join(FORMAT_NAMES)}", path)
    plan = readers()[format].read(text, path)
    return validate(plan)
