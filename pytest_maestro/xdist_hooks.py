"""Hooks that exist only when pytest-xdist is installed; registered by ``plugin.py`` then."""

from __future__ import annotations

from typing import Any

import pytest

from .scheduler import DependencyScheduling, make_scheduler


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> DependencyScheduling | None:
    return make_scheduler(config, log)
