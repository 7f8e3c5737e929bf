"""Plan readers, one module per format. Each exposes ``NAME``, ``detect`` and ``read``.

``detect(text, path)`` says whether the document looks like this format; ``read(text, path)``
returns a :class:`~pytest_maestro.plan.model.Plan` (not yet validated) or raises ``PlanError``.
Readers are tried in the order of ``READERS``: structured formats first, then the Markdown ones
from the most to the least specific.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Protocol

from ..model import Plan


class Reader(Protocol):
    NAME: str

    def detect(self, text: str, path: Path) -> bool: ...

    def read(self, text: str, path: Path) -> Plan: ...


def readers() -> dict[str, Reader]:
    from . import design_v2, maestro_json, maestro_md, native, steps, superpowers, tasklist

    modules: list[ModuleType] = [
        design_v2,
        maestro_json,
        native,
        maestro_md,
        tasklist,
        steps,
        superpowers,
    ]
    return {module.NAME: module for module in modules}
