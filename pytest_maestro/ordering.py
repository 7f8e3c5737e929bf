"""Dependency order over a subset of a plan's phases, keeping a given order where it can."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from .plan import Plan


def stable_topological(ids: list[str], plan: Plan) -> list[str]:
    """``ids`` reordered only where a dependency would otherwise run after its dependent."""
    position = {pid: n for n, pid in enumerate(ids)}
    return _kahn(ids, plan, lambda pid: (position[pid],))


def _kahn(ids: Iterable[str], plan: Plan, key: Any) -> list[str]:
    chosen = set(ids)
    waiting = {pid: {d for d in plan.phase(pid).blocked_by if d in chosen} for pid in chosen}
    dependents: dict[str, list[str]] = {pid: [] for pid in chosen}
    for pid, deps in waiting.items():
        for dep in deps:
            dependents[dep].append(pid)
    heap = [(key(pid), pid) for pid, deps in waiting.items() if not deps]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        _, pid = heapq.heappop(heap)
        order.append(pid)
        for nxt in dependents[pid]:
            waiting[nxt].discard(pid)
            if not waiting[nxt]:
                heapq.heappush(heap, (key(nxt), nxt))
    return order
