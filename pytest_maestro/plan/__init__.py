"""Plans: the model, the readers and validation. ``load_plan`` is the one entry point."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .errors import PlanError
from .formats import FORMAT_NAMES, reader, readers
from .gc_pause import paused_gc
from .model import Assumption, Check, Files, Phase, Plan

# Most of the package imports this one for the model; reading a plan (its source, validation,
# the graph validation builds) is imported by the functions that read one, in the one process of
# a run that does (xdist workers are given the plan) and not at all by pytest without --maestro.
if TYPE_CHECKING:
    from .graph import PlanGraph
    from .source import Source

__all__ = [
    "FORMAT_NAMES",
    "Assumption",
    "Check",
    "Files",
    "Phase",
    "Plan",
    "PlanError",
    "detect_format",
    "load_graph",
    "load_plan",
    "not_a_plan",
    "paused_gc",
]


def not_a_plan() -> str:
    """What a document that no reader claims is told: every format tried, and what each looks
    for (every reader is imported by then: detection tried them all)."""
    tried = ", ".join(f"{each.NAME} ({each.EXPECTS})" for each in readers())
    return f"no phases found in any known format; tried {tried}"


def detected_format(source: Source) -> str | None:
    """The name of the first format whose reader claims the plan, or None."""
    return next((each.NAME for each in readers() if each.detect(source)), None)


def detect_format(source: Source) -> str:
    """The name of the first format whose reader claims the plan."""
    found = detected_format(source)
    if found is not None:
        return found
    if not source.text.strip():
        raise PlanError("the plan is empty", source.path)
    raise PlanError(not_a_plan(), source.path)


def load_plan(path: Path | str, format: str | None = None, tag: str | None = None) -> Plan:
    """Read, detect the format of (unless ``format`` names it), and validate a plan. ``tag``:
    the Taskmaster tag to read.

    Raises :class:`PlanError` with a one-line message for anything wrong with it.
    """
    return load_graph(path, format, tag).plan


def load_graph(path: Path | str, format: str | None = None, tag: str | None = None) -> PlanGraph:
    """``load_plan``, handing back the :class:`PlanGraph` that validation built: what uses the
    graph takes this one rather than building it again."""
    from .source import Source
    from .validate import validate

    source = Source.read(Path(path), tag)
    if format is not None and format not in FORMAT_NAMES:
        known = ", ".join(FORMAT_NAMES)
        raise PlanError(f"unknown plan format {format!r}; known: {known}", source.path)
    with paused_gc():
        if format is not None:
            _check_forced(source, format)
        plan = reader(format or detect_format(source)).read(source)
        return validate(plan)


def _check_forced(source: Source, format: str) -> None:
    """A format forced on a document that reads as another one is refused: its reader would
    find phases where the document has none, and run side by side what the plan orders."""
    forced = reader(format)
    if forced.detect(source):
        return
    found = detected_format(source)
    if found is not None:
        raise PlanError(
            f"not a {format} plan ({forced.EXPECTS}); it reads as {found}: "
            "leave --maestro-format out",
            source.path,
        )
