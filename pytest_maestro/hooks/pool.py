"""The pytest side of a mixed pool: each xdist worker says at its start what it has, the
controller's scheduler sends it only what it can run. See docs/architecture.md, "A mixed pool".

A worker sends its ``WorkerTools`` over xdist's own channel (``_compat.controller_channel``, as
progress events go) while it collects, so that the scheduler has them before the worker's
collection makes it idle: before its first phase. The controller puts the override of
``--maestro-worker-runtimes`` over them, and refuses a local worker whose rootdir is not its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from .._compat import WorkerController, controller_channel
from ..remote.specs import expand, gateway_ids, names_worker
from ..run.orchestrator import Orchestrator
from ..run.tools import detect, needs
from ..scheduling.pool import GIT, Pool, WorkerTools
from ..settings import SettingsError
from .collect import FinalItem, PhaseItem

FLAG = "--maestro-worker-runtimes"


def say_tools(config: pytest.Config, maestro: Orchestrator, items: Sequence[pytest.Item]) -> None:
    """On a worker, once its selection is known: what it has, to the controller."""
    send = controller_channel(config)
    if send is None:
        return
    phases = [item.phase for item in items if isinstance(item, PhaseItem)]
    final = any(isinstance(item, FinalItem) for item in items)
    worker = str(getattr(config, "workerinput", {}).get("workerid", "?"))
    send(detect(maestro.resolve, phases, final, worker, config.rootpath).to_wire())


def worker_specs(config: pytest.Config) -> list[str]:
    """The ``--tx`` specs one per worker (``-n 3`` is three ``popen``)."""
    return expand(config.getoption("tx", None) or ())


def check_overrides(config: pytest.Config, maestro: Orchestrator) -> None:
    """On the controller: SettingsError, one line, for an override naming no worker of the run
    or a runtime no plugin provides."""
    specs = worker_specs(config)
    ids = gateway_ids(specs)
    for key, names in maestro.settings.worker_runtimes or ():
        if not any(
            names_worker(key, worker, spec) for worker, spec in zip(ids, specs, strict=True)
        ):
            known = ", ".join(f"{worker} ({spec})" for worker, spec in zip(ids, specs, strict=True))
            raise SettingsError(f"{FLAG} names {key!r}, which is no worker of this run: {known}")
        unknown = [name for name in names if name not in maestro.resolve.runtimes]
        if unknown:
            raise SettingsError(
                f"{FLAG} {key}: no runtime {unknown[0]!r}; "
                f"available: {', '.join(sorted(maestro.resolve.runtimes))}"
            )


def declared(config: pytest.Config, maestro: Orchestrator) -> list[tuple[str, frozenset[str]]]:
    """Each worker's runtimes as the overrides give them, when they give every worker's (the
    pool is known before anything runs); else empty."""
    specs = worker_specs(config)
    given = []
    for worker, spec in zip(gateway_ids(specs), specs, strict=True):
        key, names = _override(maestro, worker, spec) or ("", None)
        if names is None:
            return []
        given.append((f"{key}:{','.join(names)}", frozenset(names)))
    return given


def phase_needs(
    config: pytest.Config, maestro: Orchestrator, phase_ids: list[str], final: bool
) -> tuple[dict[str | None, frozenset[str]], str | None]:
    """What each phase (None: the final review, when ``final``) needs of a worker, and why the
    run cannot start when the overrides give every worker's runtimes and none has a phase's."""
    resolve, plan = maestro.resolve, maestro.plan
    isolated = maestro.settings.isolate == "worktree"
    found: dict[str | None, frozenset[str]] = {
        name: needs(resolve, plan.phase(name), isolated) for name in phase_ids
    }
    if final:
        found[None] = needs(resolve, None, isolated)
    given = declared(config, maestro)
    for name in phase_ids if given else ():
        wanted = found[name] - {GIT}  # git is found, never given
        if not any(wanted <= has for _, has in given):
            pool = ", ".join(text for text, _ in given)
            return found, (
                f"{resolve.where(plan.phase(name))} needs {', '.join(sorted(wanted))}, which no "
                f"worker has: {FLAG} gives {pool}"
            )
    return found, None


def _override(maestro: Orchestrator, worker: str, spec: str) -> tuple[str, tuple[str, ...]] | None:
    """The override that names the worker (the last one given, as with any repeated option)."""
    found = None
    for key, names in maestro.settings.worker_runtimes or ():
        if names_worker(key, worker, spec):
            found = key, names
    return found


def new_pool(config: pytest.Config) -> Pool:
    return Pool(len(worker_specs(config)))


def as_controller_sees(
    node: WorkerController, tools: WorkerTools, maestro: Orchestrator, remote: bool
) -> WorkerTools:
    """What the worker said, the override put over it; a local worker whose rootdir is not the
    controller's runs nothing (its phases would not run in the user's tree)."""
    spec, worker = str(node.gateway.spec), node.gateway.id
    override = _override(maestro, worker, spec)
    if override is not None:
        tools = tools.given(*override)
    root = str(node.config.rootpath)
    if not remote and tools.rootdir != root:
        return replace(
            tools,
            refused=f"its rootdir {tools.rootdir} is not the controller's {root}, so its phases "
            "would not run in this tree (give its --tx spec chdir= to run them remote)",
        )
    return tools
