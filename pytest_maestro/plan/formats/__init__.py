"""Plan readers, one module per format. Each exposes ``NAME``, ``detect`` and ``read``.

``detect(source)`` says whether the document looks like this format; ``read(source)`` returns a
:class:`~pytest_maestro.plan.model.Plan` (not yet validated) or raises ``PlanError``. Both take
the same :class:`~pytest_maestro.plan.source.Source`, which parses the text once for all of them.
"""

from __future__ import annotations

from typing import Protocol

from ..model import Plan
from ..source import Source
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


class Reader(Protocol):
    @property
    def NAME(self) -> str: ...

    @property
    def EXPECTS(self) -> str: ...  # what detection looks for, as users read it

    def detect(self, source: Source) -> bool: ...

    def read(self, source: Source) -> Plan: ...


# The one list of plan formats: every reader, in the order detection tries them. Structured
# formats come first (native last of them, as it claims any JSON or YAML file), then the Markdown
# ones from the most to the least specific.
READERS: tuple[Reader, ...] = (
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
BY_NAME: dict[str, Reader] = {reader.NAME: reader for reader in READERS}
# The names as users see them listed (--maestro-format's choices, errors): this project's own
# format first, then the others in detection order.
FORMAT_NAMES: tuple[str, ...] = (native.NAME, *(name for name in BY_NAME if name != native.NAME))
