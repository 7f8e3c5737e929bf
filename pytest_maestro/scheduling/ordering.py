"""Dependency order over a subset of a plan's phases, keeping a given order where it can."""

from __future__ import annotations

from ..plan import Plan
from ..plan.graph import PlanGraph


def stable_topological(ids: list[str], plan: Plan | PlanGraph) -> list[str]:
    """``ids`` reordered only where a dependency would otherwise run after its dependent.

    Pass the plan's :class:`PlanGraph` where one is at hand: building it costs O(V + E).
    """
    graph = plan if isinstance(plan, PlanGraph) else PlanGraph(plan)
    return graph.stable_order(ids)
