"""What a phase needs of the worker it runs on, and what a worker has: the two sides of a mixed
pool (``scheduling/pool.py``). Both are asked of the ``Resolver``, which every process of a run
answers alike, so the controller's needs and a worker's findings name the same runtimes."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..plan import Phase
from ..runtimes.agents import Agent
from ..runtimes.presence import GIT, on_path, program
from ..scheduling.pool import WorkerTools
from .resolver import Resolver


def uses(resolve: Resolver, phase: Phase) -> Iterator[tuple[str, Agent | None]]:
    """The runtimes a phase's attempts call, each with the agent it plays: its own, and its
    reviewer's when it is reviewed."""
    name = resolve.runtime_name(phase)
    if name is not None:
        yield name, resolve.agent(phase)
    reviewers = resolve.reviewers
    if reviewers.mode(phase) != "none":
        review = reviewers.runtime_name(phase)
        if review is not None:
            yield review, reviewers.agents.get(reviewers.name)


def final_uses(resolve: Resolver) -> Iterator[tuple[str, Agent | None]]:
    reviewers = resolve.reviewers
    name = reviewers.final_runtime_name(resolve.plan.phases)
    if name is not None:
        yield name, reviewers.agents.get(reviewers.name)


def needs(resolve: Resolver, phase: Phase | None, isolated: bool) -> frozenset[str]:
    """What a worker must have to run the phase (None: the final review): its runtimes, and git
    when it runs in a worktree or a repository of its own (isolated, or remote)."""
    used = uses(resolve, phase) if phase is not None else final_uses(resolve)
    return frozenset(name for name, _ in used) | ({GIT} if isolated else frozenset())


def detect(
    resolve: Resolver,
    phases: Iterable[Phase],
    final: bool,
    worker: str,
    rootdir: Path,
    which: Callable[[str], bool] = on_path,
) -> WorkerTools:
    """On a worker, at its start: git, and of the runtimes the selected ``phases`` (and the
    final review, when ``final``) use, those whose program is on this machine's PATH."""
    used = [pair for phase in phases for pair in uses(resolve, phase)]
    if final:
        used += final_uses(resolve)
    lacks: dict[str, str] = {}
    has: set[str] = set()
    for name, agent in used:
        runtime = resolve.runtimes.get(name)
        command = program(runtime, agent) if runtime is not None else None
        if command is not None and not which(command):
            lacks.setdefault(name, f"no {command} on its PATH")
        else:
            has.add(name)
    if which(GIT):
        has.add(GIT)
    else:
        lacks[GIT] = f"no {GIT} on its PATH"
    return WorkerTools(
        worker,
        socket.gethostname(),
        str(rootdir),
        frozenset(has - set(lacks)),
        tuple(lacks.items()),
    )
