"""Plan readers, one module per format. Each exposes ``NAME``, ``EXPECTS``, ``detect`` and ``read``.

``detect(source)`` says whether the document looks like this format; ``read(source)`` returns a
:class:`~pytest_maestro.plan.model.Plan` (not yet validated) or raises ``PlanError``. Both take
the same :class:`~pytest_maestro.plan.source.Source`, which parses the text once for all of them.

A reader module is imported when it is first asked for: detection stops at the first reader that
claims the plan, so a JSON plan imports none of the Markdown readers, and a process that reads no
plan (pytest without ``--maestro``, an xdist worker the controller gave the plan) imports none.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from ..model import Plan
    from ..source import Source


class Reader(Protocol):
    @property
    def NAME(self) -> str: ...

    @property
    def EXPECTS(self) -> str: ...  # what detection looks for, as users read it

    def detect(self, source: Source) -> bool: ...

    def read(self, source: Source) -> Plan: ...


# The one list of plan formats: each format's name (its reader's NAME) and its reader's module, in
# the order detection tries them. Structured formats come first (native last of them, as it
# claims any JSON or YAML file), then the Markdown ones from the most to the least specific.
_MODULES: dict[str, str] = {
    "design-v2": "design_v2",
    "maestro-json": "maestro_json",
    "taskmaster": "taskmaster",
    "native": "native",
    "maestro-md": "maestro_md",
    "tasklist": "tasklist",
    "steps": "steps",
    "superpowers": "superpowers",
    "speckit": "speckit",
    "kiro": "numbered",
}
# The names as users see them listed (--maestro-format's choices, errors): this project's own
# format first, then the others in detection order.
FORMAT_NAMES: tuple[str, ...] = ("native", *(name for name in _MODULES if name != "native"))

if TYPE_CHECKING:  # every reader module is a Reader: mypy checks what importlib hands back
    from . import (
        design_v2,
        maestro_json,
        maestro_md,
        native,
        numbered,
        speckit,
        steps,
        superpowers,
        tasklist,
        taskmaster,
    )

    _TYPED: tuple[Reader, ...] = (
        design_v2,
        maestro_json,
        taskmaster,
        native,
        maestro_md,
        tasklist,
        steps,
        superpowers,
        speckit,
        numbered,
    )


def reader(name: str) -> Reader:
    """The reader of the format ``name`` (one of ``FORMAT_NAMES``), imported on first use."""
    return cast("Reader", importlib.import_module(f"{__name__}.{_MODULES[name]}"))


def readers() -> Iterator[Reader]:
    """Every reader in detection order, each imported only when the iteration reaches it."""
    return (reader(name) for name in _MODULES)
