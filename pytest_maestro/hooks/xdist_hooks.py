"""Hooks that exist only when pytest-xdist is installed; registered by ``plugin.py`` then.

A worker registers them too, though only the controller calls them: the scheduler is imported by
the hooks that use it. ``given_plan`` is the worker's side of ``pytest_configure_node``."""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from .._compat import WorkerController, crashed_worker_id
from ..phase.facts import PhaseFacts, iso_time
from ..plan.wire import plan_from_wire, plan_to_wire
from ..run.orchestrator import Role
from ..state.model import Status
from .collect import ORCHESTRATOR_KEY
from .nodeids import phase_id
from .remote import CHANNELS, ISOLATE_INPUT, REMOTE_INPUT, is_remote_node, remote_input
from .session import LOST

if TYPE_CHECKING:
    from ..plan import Plan
    from ..run.orchestrator import Orchestrator
    from .scheduler import DependencyScheduling

# The plan as the controller read it, in each worker's ``workerinput``; and that text, made once.
PLAN_INPUT = "maestro_plan"
_PLAN_TEXT = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> DependencyScheduling | None:
    from .scheduler import make_scheduler

    return make_scheduler(config, log)


def pytest_configure_node(node: WorkerController) -> None:
    """Hand each worker the plan this process read (see ``plan/wire.py`` for why); in a run
    with remote workers, a remote one what it needs to run phases away from here, a local one
    the word that it isolates its phases too (``remote.py``)."""
    config = node.config
    maestro = config.stash.get(ORCHESTRATOR_KEY, None)
    if maestro is None:
        return
    if _PLAN_TEXT not in config.stash:
        config.stash[_PLAN_TEXT] = plan_to_wire(maestro.plan)
    node.workerinput[PLAN_INPUT] = config.stash[_PLAN_TEXT]
    if CHANNELS not in config.stash:  # no remote worker in this run
        return
    settings = maestro.settings
    if is_remote_node(node, settings):
        node.workerinput[REMOTE_INPUT] = remote_input(
            node,
            settings,
            maestro.plan,
            maestro.paths.name,
            maestro.root,
            list(maestro.resolve.agent_dirs),
        )
    else:
        node.workerinput[ISOLATE_INPUT] = settings.isolate


def check_options(config: pytest.Config, maestro: Orchestrator) -> None:
    """On the controller: a ``--maestro-worker-runtimes`` that names no worker of the run or
    an unknown runtime is a usage error, one line."""
    if maestro.role is Role.CONTROLLER and maestro.settings.worker_runtimes:
        from ..settings import SettingsError
        from .pool import check_overrides

        try:
            check_overrides(config, maestro)
        except SettingsError as exc:
            raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """On a worker, before xdist tells the controller its collection: what it has (git, the
    selected phases' agent CLIs), so that it is sent only what it can run (``pool.py``)."""
    config = session.config
    maestro = config.stash.get(ORCHESTRATOR_KEY, None)
    if maestro is None or maestro.run.decides:
        return
    from .pool import say_tools

    say_tools(config, maestro, session.items)


def given_plan(config: pytest.Config) -> Plan | None:
    """On an xdist worker, the plan its controller read and handed it; None elsewhere."""
    text = getattr(config, "workerinput", {}).get(PLAN_INPUT)
    return plan_from_wire(text) if isinstance(text, str) else None


@pytest.hookimpl(wrapper=True)
def pytest_handlecrashitem(
    crashitem: str, report: pytest.TestReport, sched: Any
) -> Generator[None, list[object], list[object]]:
    """A worker died under a phase. Every other implementation first: one may ask for the phase
    again (``sched.mark_test_pending``, as xdist documents). Then, unless one did, the phase
    failed, and xdist's report of it, which carries no facts, gets the ones the session state and
    the JUnit file need (the phase failed, where, when, why)."""
    from .scheduler import DependencyScheduling

    try:
        return (yield)
    finally:
        worker = crashed_worker_id(report)
        if isinstance(sched, DependencyScheduling) and sched.run_lost_again(crashitem, worker):
            report.outcome = LOST  # type: ignore[assignment]  # not a failure: it runs again
        elif isinstance(sched, DependencyScheduling) and sched.judge_crash(crashitem):
            PhaseFacts(
                phase_id(crashitem),
                Status.FAILED,
                worker=worker,
                finished=iso_time(time.time()),
                result=str(report.longrepr),
                failure=" ".join(str(report.longrepr).split())[:300],
            ).attach(report)
