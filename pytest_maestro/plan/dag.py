"""The one DAG kernel: nodes 0..n-1 and their dependencies, and every answer about their structure
that the plan's graph (``PlanGraph``) and the scheduling policies share.

Nodes are numbered in written order; ``names`` serve only to say which nodes form a cycle. The
kernel knows nothing of phases or jobs: what a node writes and reads comes in as keys, its
duration as a number. Costs, with V nodes, E dependency edges and w = 30 (bits per CPython int
digit):

* topological order: O(V + E) when every dependency is written before its node, else
  O(V log V + E); the order of a subset of k nodes (``sort`` with a mapping): O(k log k + E_k);
* waves, remaining paths, the longest path, descendants, a dependency cycle: O(V + E), without
  recursion;
* conflict groups: O(V + F) for F file references (union-find with path halving);
* reachability (``Reach``): ancestor bitsets as Python ints indexed by topological position, built
  in O(E · V / w) time and O(V² / 8) bytes; one query is then a shift of a V-bit int, O(V / w).
"""

from __future__ import annotations

import graphlib
import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

# key -> (nodes that write it, nodes that only read it), each in node order
FileIndex = dict[str, tuple[list[int], list[int]]]


class DependencyCycle(ValueError):
    """Nodes that no topological order can place: on a dependency cycle, or after one."""

    def __init__(self, stuck: Sequence[str]) -> None:
        super().__init__("dependency cycle among: " + ", ".join(stuck[:10]))
        self.stuck = tuple(stuck)


@dataclass(frozen=True, eq=False)
class Dag:
    """Dependencies (``deps``) and dependents (``succs``) of nodes 0..n-1, each listed once,
    dependents in node order. Every answer is computed on first use and kept."""

    names: tuple[str, ...]
    deps: tuple[tuple[int, ...], ...]
    succs: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, names: Sequence[str], deps: Sequence[tuple[int, ...]]) -> Dag:
        """``deps[node]``: the nodes it depends on, each once."""
        succs: list[list[int]] = [[] for _ in deps]
        for node, node_deps in enumerate(deps):
            for dep in node_deps:
                succs[dep].append(node)
        return cls(tuple(names), tuple(deps), tuple([tuple(s) for s in succs]))

    # -- order ---------------------------------------------------------------------------------

    @cached_property
    def order(self) -> list[int]:
        """Dependencies first; among ready nodes, the one written first."""
        if all(dep < node for node, deps in enumerate(self.deps) for dep in deps):
            # every dependency written before its node (the usual plan): the written order is
            # already the answer, in O(V + E) instead of O(V log V)
            return list(range(len(self.deps)))
        return self.sort([0] * len(self.deps))

    def sort(self, key: Sequence[Any] | Mapping[int, Any]) -> list[int]:
        """Kahn's algorithm over the nodes ``key`` ranks (a sequence ranks every node, a mapping
        the nodes it holds) and the dependencies among them: among ready nodes, the smallest key
        goes first, then the one written first. Raises ``DependencyCycle``."""
        subset = key if isinstance(key, Mapping) else None
        missing = self._unmet(subset)
        members = range(len(missing)) if subset is None else subset.keys()
        ready = [(key[node], node) for node in members if missing[node] == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            node = heapq.heappop(ready)[1]
            order.append(node)
            for succ in self.succs[node]:
                if subset is not None and succ not in subset:
                    continue
                missing[succ] -= 1
                if missing[succ] == 0:
                    heapq.heappush(ready, (key[succ], succ))
        if len(order) != len(members):
            placed = set(order)
            raise DependencyCycle([self.names[n] for n in sorted(members) if n not in placed])
        return order

    def _unmet(self, subset: Mapping[int, Any] | None) -> list[int] | dict[int, int]:
        """Per node (of ``subset``, if given): how many of its dependencies (in it) to wait for."""
        if subset is None:
            return [len(deps) for deps in self.deps]
        return {node: sum(1 for d in self.deps[node] if d in subset) for node in subset}

    def cycle(self) -> list[int] | None:
        """A dependency cycle, or None: it starts at its node written first and ends with it
        again, each node followed by one that depends on it."""
        sorter = graphlib.TopologicalSorter(dict(enumerate(self.deps)))
        try:
            sorter.prepare()
        except graphlib.CycleError as error:
            cycle: list[int] = error.args[1][:-1]  # graphlib repeats the first node at the end
            first = cycle.index(min(cycle))
            return [*cycle[first:], *cycle[: first + 1]]
        return None

    def descendants(self, nodes: Iterable[int]) -> set[int]:
        """Every node that depends on one of ``nodes``, directly or through others."""
        seen: set[int] = set()
        stack = list(nodes)
        while stack:
            for succ in self.succs[stack.pop()]:
                if succ not in seen:
                    seen.add(succ)
                    stack.append(succ)
        return seen

    # -- waves and paths -----------------------------------------------------------------------

    @cached_property
    def depth(self) -> list[int]:
        """Each node's wave, from 0: one more than its deepest dependency."""
        depth = [0] * len(self.deps)
        for node in self.order:
            for dep in self.deps[node]:
                if depth[dep] >= depth[node]:
                    depth[node] = depth[dep] + 1
        return depth

    @cached_property
    def waves(self) -> list[list[int]]:
        """The nodes of each wave, in node order."""
        members: list[list[int]] = [[] for _ in range(max(self.depth, default=-1) + 1)]
        for node, depth in enumerate(self.depth):
            members[depth].append(node)
        return members

    def remaining(self, durations: Sequence[float]) -> list[float]:
        """Per node: its duration plus the longest chain of durations of its dependents."""
        remaining = list(durations)
        for node in reversed(self.order):
            succs = self.succs[node]
            if succs:
                remaining[node] += max([remaining[s] for s in succs])
        return remaining

    def longest_path(self, durations: Sequence[float]) -> list[int]:
        """A dependency path with the largest total duration; ties go to the earliest written."""
        if not durations:
            return []
        best = list(durations)
        previous: list[int | None] = [None] * len(durations)
        for node in self.order:
            for dep in self.deps[node]:
                if previous[node] is None or best[dep] + durations[node] > best[node]:
                    best[node], previous[node] = best[dep] + durations[node], dep
        node_or_none: int | None = max(range(len(durations)), key=lambda i: (best[i], -i))
        path: list[int] = []
        while node_or_none is not None:
            path.append(node_or_none)
            node_or_none = previous[node_or_none]
        return path[::-1]

    @cached_property
    def reach(self) -> Reach:
        return Reach.build(self.order, self.deps)


@dataclass(frozen=True)
class Reach:
    """Ancestor bitsets: bit p of ``ancestors[v]`` is set when the node at topological position
    p is a transitive dependency of v. A query is a shift of a V-bit int: O(V / 30) digits."""

    order: Sequence[int]  # topological position -> node
    position: Sequence[int]  # node -> topological position
    ancestors: Sequence[int]

    @classmethod
    def build(cls, order: Sequence[int], deps: Sequence[Sequence[int]]) -> Reach:
        position = [0] * len(order)
        for pos, node in enumerate(order):
            position[node] = pos
        ancestors = [0] * len(order)
        for node in order:
            bits = 0
            for dep in deps[node]:
                bits |= ancestors[dep] | (1 << position[dep])
            ancestors[node] = bits
        return cls(order, position, ancestors)

    def precedes(self, first: int, second: int) -> bool:
        """Whether ``second`` transitively depends on ``first``."""
        return bool(self.ancestors[second] >> self.position[first] & 1)

    def concurrent(self, a: int, b: int) -> bool:
        return a != b and not self.precedes(a, b) and not self.precedes(b, a)

    def mask(self, nodes: Sequence[int]) -> int:
        bits = 0
        for node in nodes:
            bits |= 1 << self.position[node]
        return bits

    def concurrent_mask(self, node: int, mask: int) -> int:
        """The nodes of ``mask`` placed before ``node`` in topological order that are not its
        ancestors: exactly the earlier ones that may run at the same time as ``node``."""
        return mask & ((1 << self.position[node]) - 1) & ~self.ancestors[node]

    def concurrent_before(self, node: int, mask: int) -> Iterator[int]:
        candidates = self.concurrent_mask(node, mask)
        while candidates:
            low = candidates & -candidates
            yield self.order[low.bit_length() - 1]
            candidates ^= low


# -- conflict groups -----------------------------------------------------------------------------


def file_index(claims: Iterable[tuple[Iterable[str], Iterable[str]]]) -> FileIndex:
    """Per key, the nodes that write it and those that only read it; ``claims[node]`` is
    (keys it writes, keys it reads). A node that writes a key is its writer, not a reader."""
    index: FileIndex = {}
    for node, (writes, reads) in enumerate(claims):
        for key in writes:
            index.setdefault(key, ([], []))[0].append(node)
        for key in reads:
            if key not in writes:
                index.setdefault(key, ([], []))[1].append(node)
    return index


def conflict_roots(index: FileIndex, depth: Sequence[int]) -> list[int]:
    """Union-find within each wave: the writers of a key merge, and its readers with a writer.
    Two nodes share a root exactly when a chain of such conflicts joins them in their wave."""
    parent = list(range(len(depth)))

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving keeps the trees flat
            node = parent[node]
        return node

    for writers, readers in index.values():
        if len(writers) + len(readers) < 2:
            continue  # the usual key: one node's own file
        anchors: dict[int, int] = {}  # wave -> the root the key's writers in it join
        for node in writers:
            root = find(node)
            parent[root] = anchors.setdefault(depth[node], root)
        for node in readers:
            anchor = anchors.get(depth[node], -1)
            if anchor >= 0:
                parent[find(node)] = anchor
    return [find(node) for node in range(len(depth))]


def conflict_groups(nodes: Iterable[int], roots: Sequence[int]) -> list[list[int]]:
    """``nodes`` grouped by their root, each group in the given order, groups in order of their
    first node: the chunks of a wave, one agent working through each."""
    groups: dict[int, list[int]] = {}
    for node in nodes:
        groups.setdefault(roots[node], []).append(node)
    return list(groups.values())
