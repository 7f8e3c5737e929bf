"""Hooks that exist only when pytest-xdist is installed; registered by ``plugin.py`` then."""

from __future__ import annotations

import time
from collections.abc import Generator
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


@pytest.hookimpl(wrapper=True)
def pytest_handlecrashitem(
    crashitem: str, report: pytest.TestReport, sched: Any
) -> Generator[None, list[object], list[object]]:
    """A worker died under a phase. Every other implementation first: one may ask for the phase
    again (``sched.mark_test_pending``, as xdist documents). Then, unless one did, the phase
    failed, and xdist's report of it, which carries no facts, gets the ones the session state and
    the JUnit file need (the phase failed, where, when, why)."""
    try:
        return (yield)
    finally:
        if isinstance(sched, DependencyScheduling) and sched.judge_crash(crashitem):
            PhaseFacts(
                phase_id(crashitem),
                Status.FAILED,
                worker=crashed_worker_id(report),
                finished=iso_time(time.time()),
                result=str(report.longrepr),
                failure=" ".join(str(report.longrepr).split())[:300],
            ).attach(report)
