"""The circuit breaker of the /execute skill: stop when failures doom most of what is left."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .plan import Plan

_FAILED = frozenset({"failed", "blocked"})


def breaker_verdict(
    plan: Plan, selected: Collection[str], outcomes: Mapping[str, str], threshold: float
) -> str | None:
    """The reason to stop, or None: more than 3 phases, and at least ``threshold`` of the pending
    ones can no longer run because a phase they depend on failed or was blocked."""
    if threshold <= 0 or len(selected) <= 3:
        return None
    failed = _failed(outcomes)
    pending = {pid for pid in selected if pid not in outcomes}
    if not failed or not pending:
        return None
    doomed = _dependents(plan, failed) & pending
    if len(doomed) < threshold * len(pending) or doomed == pending:
        return None  # below the threshold, or stopping would spare nothing that could run
    names = ", ".join(repr(pid) for pid in failed)
    return (
        f"circuit breaker: {len(doomed)} of {len(pending)} pending phases cannot run after "
        f"{names} failed (threshold {threshold:g}; --maestro-circuit-breaker=0 turns it off)"
    )


def doomed_by_failures(plan: Plan, outcomes: Mapping[str, str]) -> set[str]:
    """Every phase that depends, directly or not, on one that failed or was blocked."""
    return _dependents(plan, _failed(outcomes))


def _failed(outcomes: Mapping[str, str]) -> list[str]:
    return [pid for pid, status in outcomes.items() if status in _FAILED]


def _dependents(plan: Plan, roots: list[str]) -> set[str]:
    children: dict[str, list[str]] = {}
    for phase in plan.phases:
        for dep in phase.blocked_by:
            children.setdefault(dep, []).append(phase.id)
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen
