"""The circuit breaker of the /execute skill: stop when failures doom most of what is left."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..plan.graph import PlanGraph

_FAILED = frozenset({"failed", "blocked"})


def breaker_verdict(
    graph: PlanGraph,
    selected: Collection[str],
    outcomes: Mapping[str, str],
    threshold: float,
) -> str | None:
    """The reason to stop, or None: more than 3 phases, and at least ``threshold`` of the pending
    ones can no longer run because a phase they depend on failed or was blocked."""
    if threshold <= 0 or len(selected) <= 3:
        return None
    failed = _failed(outcomes)
    pending = {pid for pid in selected if pid not in outcomes}
    if not failed or not pending:
        return None
    doomed = graph.descendants(failed) & pending
    if len(doomed) < threshold * len(pending) or doomed == pending:
        return None  # below the threshold, or stopping would spare nothing that could run
    names = ", ".join(repr(pid) for pid in failed)
    return (
        f"circuit breaker: {len(doomed)} of {len(pending)} pending phases cannot run after "
        f"{names} failed (threshold {threshold:g}; --maestro-circuit-breaker=0 turns it off)"
    )


def doomed_by_failures(graph: PlanGraph, outcomes: Mapping[str, str]) -> set[str]:
    """Every phase that depends, directly or not, on one that failed or was blocked."""
    return graph.descendants(_failed(outcomes))


def _failed(outcomes: Mapping[str, str]) -> list[str]:
    return [pid for pid, status in outcomes.items() if status in _FAILED]
