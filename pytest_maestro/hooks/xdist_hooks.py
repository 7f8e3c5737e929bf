"""Hooks that exist only when pytest-xdist is installed; registered by ``plugin.py`` then."""

from __future__ import annotations

import time
from typing import Any

import pytest

from .._compat import crashed_worker_id
from ..phase.facts import PhaseFacts, iso_time
from ..state.model import Status
from .nodeids import phase_id
from .scheduler import DependencyScheduling, make_scheduler


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> DependencyScheduling | None:
    return make_scheduler(config, log)


def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: Any) -> None:
    """A worker died under a phase: xdist's report of it carries no facts, so give it the ones
    the session state and the JUnit file need (the phase failed, where, when, why)."""
    if not isinstance(sched, DependencyScheduling):
        return
    PhaseFacts(
        phase_id(crashitem),
        Status.FAILED,
        worker=crashed_worker_id(report),
        finished=iso_time(time.time()),
        result=str(report.longrepr),
        failure=" ".join(str(report.longrepr).split())[:300],
    ).attach(report)
