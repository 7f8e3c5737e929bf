"""Dependencies a reader works out (from written order, groups, inheritance) without the ones
another of the same phase's dependencies already implies: the plan's own redundancies are worth
a warning, the reader's are not."""

from __future__ import annotations

from collections.abc import Mapping


def without_implied(deps: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Each phase's dependencies less those that another of them depends on directly."""
    reduced = {}
    for phase, own in deps.items():
        implied = {dep for other in own for dep in deps.get(other, ())}
        reduced[phase] = tuple(dep for dep in own if dep not in implied)
    return reduced
