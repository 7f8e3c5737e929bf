"""Hooks pytest-maestro adds to pytest, for other plugins (registered by ``plugin.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

    from .runtimes.base import Runtime


def pytest_maestro_runtimes(config: pytest.Config) -> list[Runtime]:
    """The runtimes a plugin provides: objects with a ``name``, an ``autonomy`` text (what
    ``--maestro-autonomous`` lets them do; empty when they need no consent) and
    ``run(request) -> AgentResult`` (see ``pytest_maestro.runtimes.base``).

    Every implementation is called; a runtime named like one found in an earlier call (the
    built-ins answer last) is ignored, so a plugin may replace a built-in runtime.
    """
    return []
