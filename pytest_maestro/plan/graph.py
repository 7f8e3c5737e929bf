"""The dependency graph of a validated plan: order, waves, chunks, conflicts, critical path.

Phases are numbered 0..n-1 in written order; their structure is a ``dag.Dag``, the kernel the
scheduling policies use too, so what this graph says of order and waves is what they do. Every
answer is computed once and kept. Costs, with V phases, E dependency edges, F file references and
w = 30 (bits per CPython int digit):

* topological orders, waves, critical path, remaining paths: O(V log V + E);
* the order of a subset of k phases (``stable_order``): O(k log k) plus their edges;
* descendants, and the dependency cycle of a plan that has one: O(V + E), without recursion;
* chunks and the execution profile: O(V + E + F) (union-find with path halving);
* reachability (``may_run_concurrently``, conflicts, redundant dependencies): ancestor bitsets as
  Python ints indexed by topological position, built in O(E · V / w) time and O(V² / 8) bytes
  (12.5 MB at 10,000 phases); one query is then a shift of a V-bit int, O(V / w);
* conflicts: per-file indexes, O(Σ_files (|writers| + |readers|) · V / w) plus the number of
  conflicts found; no two phases are compared unless both touch one file.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

from .dag import Dag, FileIndex, conflict_roots, file_index
from .errors import location
from .gc_pause import paused_gc
from .model import Plan
from .ownership import (
    Chunk,
    Claims,
    Conflict,
    build_chunks,
    count_file_conflicts,
    file_conflicts,
    phase_claims,
    wave_overlap,
)

__all__ = ["Chunk", "Conflict", "PlanGraph", "Profile", "wave_overlap"]

DEFAULT_ESTIMATE = 1.0
DEFAULT_WORKER_CAP = 8  # more concurrent agent CLIs mostly meet rate limits, not more throughput
MAX_LISTED_WARNINGS = 20  # per kind; beyond, one line counts the rest: nobody reads 7,000 lines
_PAIRWISE_DEPS = 16  # up to this many dependencies, redundancy is tested pair by pair


@dataclass(frozen=True)
class Profile:
    """Maestro's execution profile, computed from the waves and chunks rather than the flags alone.

    A phase is parallel-eligible when it may run in parallel (``parallel`` is true) and its wave has
    another such phase in a different chunk, so the two can really run at the same time. Every other
    phase is sequential-only. ``batches`` counts the waves that run at least two phases at once and
    ``max_width`` the most phases any wave runs at once.
    """

    total_phases: int
    parallel_eligible: int
    batches: int
    sequential_only: int
    max_width: int


class PlanGraph:
    """Answers about the dependency structure of a plan that has passed validation."""

    def __init__(
        self,
        plan: Plan,
        durations: Mapping[str, float] | None = None,
        aliases: Mapping[str, str] | None = None,
        *,
        dag: Dag | None = None,
    ) -> None:
        """``aliases``: declared paths that lead, through symlinks, to other paths in the
        project root (``paths.real_paths``): they are those paths to the file conflicts.
        ``dag``: the structure of these phases' dependencies, where another graph of the plan
        already built it."""
        self.plan = plan
        self._aliases = aliases or {}
        self._given_durations = durations
        with paused_gc():  # a few lists and tuples per phase: see paused_gc
            self.ids: tuple[str, ...] = plan.ids
            self.index: dict[str, int] = {pid: i for i, pid in enumerate(self.ids)}
            self.dag = dag if dag is not None else Dag.build(self.ids, self._dep_indices())
        self.deps = self.dag.deps
        self.succs = self.dag.succs

    def _dep_indices(self) -> list[tuple[int, ...]]:
        index, result = self.index, []
        for phase in self.plan.phases:
            deps = phase.blocked_by
            if len(deps) > 1:
                deps = tuple(dict.fromkeys(deps))  # a dependency listed twice counts once
            try:
                result.append(tuple([index[dep] for dep in deps]))
            except KeyError as exc:
                raise ValueError(
                    f"phase {phase.id!r} depends on unknown phase {exc.args[0]!r}"
                ) from None
        return result

    def with_warnings(self, warnings: tuple[str, ...]) -> PlanGraph:
        """This graph, its plan holding ``warnings``: nothing it computed depends on them, so
        everything computed is kept."""
        graph = copy.copy(self)
        graph.plan = dataclasses.replace(self.plan, warnings=warnings)
        return graph

    def with_aliases(self, aliases: Mapping[str, str]) -> PlanGraph:
        """This graph with other ``aliases``: the dependency structure is kept, the files'
        answers are computed again."""
        if dict(aliases) == dict(self._aliases):
            return self
        return PlanGraph(self.plan, self._given_durations, aliases, dag=self.dag)

    @cached_property
    def _durations(self) -> list[float]:
        return self._duration_list(self._given_durations)

    def _duration_list(self, durations: Mapping[str, float] | None) -> list[float]:
        given = durations or {}
        result = []
        for phase in self.plan.phases:
            value = given.get(phase.id, phase.estimate)
            if value is None or not math.isfinite(value) or value < 0:
                value = DEFAULT_ESTIMATE
            result.append(float(value))
        return result

    # -- order ---------------------------------------------------------------------------------

    def dependency_cycle(self) -> list[str] | None:
        """A dependency cycle, or None. O(V + E), without recursion.

        The cycle starts at its phase written first and ends with it again; each phase is
        followed by one that depends on it (``[a, b, a]``: b depends on a, and a on b).
        """
        cycle = self.dag.cycle()
        return None if cycle is None else [self.ids[node] for node in cycle]

    def topological_order(self) -> list[str]:
        """Dependencies first; among ready phases, the one written first."""
        return [self.ids[i] for i in self.dag.order]

    def critical_order(self, durations: Mapping[str, float] | None = None) -> list[str]:
        """Dependencies first; among ready phases, the longest remaining path first."""
        remaining = (
            self.dag.remaining(self._duration_list(durations))
            if durations
            else self._remaining_default
        )
        return [self.ids[i] for i in self.dag.sort([-value for value in remaining])]

    def stable_order(self, ids: Iterable[str]) -> list[str]:
        """``ids`` reordered only where a phase would otherwise come before one of its
        dependencies among them: a topological order of the subset that keeps the given order
        wherever the dependencies allow it. Dependencies on phases outside ``ids`` are ignored."""
        position = {self.index[pid]: n for n, pid in enumerate(ids)}
        return [self.ids[i] for i in self.dag.sort(position)]

    def written_order(self, ids: Iterable[str]) -> list[str]:
        """``ids`` in written order, moved only where a dependency among them must come first."""
        nodes = [self.index[pid] for pid in ids]
        return [self.ids[i] for i in self.dag.sort(dict(zip(nodes, nodes, strict=True)))]

    def descendants(self, ids: Iterable[str]) -> set[str]:
        """Every phase that depends on one of ``ids``, directly or through others. O(V + E)."""
        nodes = self.dag.descendants(self.index[pid] for pid in ids if pid in self.index)
        return {self.ids[node] for node in nodes}

    # -- waves ---------------------------------------------------------------------------------

    def wave(self, phase_id: str) -> int:
        """1-based: wave 1 holds the phases without dependencies."""
        return self.dag.depth[self.index[phase_id]] + 1

    def waves(self) -> list[list[str]]:
        """Phase ids per wave, in written order."""
        return [[self.ids[i] for i in wave] for wave in self.dag.waves]

    # -- reachability --------------------------------------------------------------------------

    def depends_on(self, phase_id: str, other_id: str) -> bool:
        """Whether ``phase_id`` transitively depends on ``other_id``."""
        return self.dag.reach.precedes(self.index[other_id], self.index[phase_id])

    def may_run_concurrently(self, a: str, b: str) -> bool:
        """Neither phase transitively depends on the other. O(V / w) after the bitsets are built."""
        return self.dag.reach.concurrent(self.index[a], self.index[b])

    # -- files ---------------------------------------------------------------------------------

    @cached_property
    def _claims(self) -> list[Claims]:
        return phase_claims(self.plan.phases, self._aliases)

    def claims(self, phase_id: str) -> Claims:
        """The keys of the files ``phase_id`` writes and of those it only reads: phases whose
        claims share a key that one of them writes must not run at the same time."""
        return self._claims[self.index[phase_id]]

    @cached_property
    def _file_index(self) -> FileIndex:
        return file_index(self._claims)

    def iter_conflicts(self) -> Iterator[Conflict]:
        """Write/write and read/write overlaps between phases that may run at the same time."""
        for path in self._file_index:
            yield from file_conflicts(path, self._file_index, self.dag.reach, self.ids)

    def conflicts(self) -> list[Conflict]:
        return list(self.iter_conflicts())

    def conflicting(self, phase_id: str) -> frozenset[str]:
        """Phases that may run at the same time as ``phase_id`` but must not, for their files."""
        node = self.index[phase_id]
        writes, reads = self._claims[node]
        found: set[int] = set()
        for path in writes:
            writers, readers = self._file_index[path]
            found.update(writers, readers)
        for path in reads:
            found.update(self._file_index[path][0])
        return frozenset(self.ids[i] for i in found if self.dag.reach.concurrent(node, i))

    @cached_property
    def _chunk_roots(self) -> list[int]:
        return conflict_roots(self._file_index, self.dag.depth)

    @cached_property
    def _chunks(self) -> list[list[Chunk]]:
        return build_chunks(self.plan.phases, self.deps, self.dag.waves, self._chunk_roots)

    def chunks(self) -> list[list[Chunk]]:
        """The chunks of each wave; ``chunks()[0]`` is wave 1."""
        return [list(wave) for wave in self._chunks]

    # -- durations -----------------------------------------------------------------------------

    def duration(self, phase_id: str) -> float:
        return self._durations[self.index[phase_id]]

    @cached_property
    def _remaining_default(self) -> list[float]:
        return self.dag.remaining(self._durations)

    def remaining_path(self, phase_id: str) -> float:
        """Longest total duration from this phase (included) to the end of the plan."""
        return self._remaining_default[self.index[phase_id]]

    def remaining_paths(self, durations: Mapping[str, float] | None = None) -> dict[str, float]:
        values = (
            self.dag.remaining(self._duration_list(durations))
            if durations
            else self._remaining_default
        )
        return dict(zip(self.ids, values, strict=True))

    def critical_path(self, durations: Mapping[str, float] | None = None) -> list[str]:
        """A dependency path with the largest total duration; ties go to the earliest written."""
        cost = self._duration_list(durations) if durations else self._durations
        return [self.ids[i] for i in self.dag.longest_path(cost)]

    def path_duration(self, path: list[str]) -> float:
        return sum(self.duration(pid) for pid in path)

    # -- profile -------------------------------------------------------------------------------

    @cached_property
    def _lanes(self) -> list[int]:
        """Per wave: how many phases can run at once, one per chunk holding a parallel phase."""
        phases, roots = self.plan.phases, self._chunk_roots
        return [len({roots[i] for i in nodes if phases[i].parallel}) for nodes in self.dag.waves]

    def profile(self) -> Profile:
        phases = self.plan.phases
        eligible = sum(
            sum(1 for i in nodes if phases[i].parallel)
            for nodes, lanes in zip(self.dag.waves, self._lanes, strict=True)
            if lanes >= 2
        )
        return Profile(
            total_phases=len(phases),
            parallel_eligible=eligible,
            batches=sum(1 for lanes in self._lanes if lanes >= 2),
            sequential_only=len(phases) - eligible,
            max_width=max([1, *self._lanes]),
        )

    def recommended_workers(self, cap: int = DEFAULT_WORKER_CAP) -> int:
        """The widest wave, capped; 1 means running without xdist is as fast."""
        return max(1, min(self.profile().max_width, cap))

    # -- warnings ------------------------------------------------------------------------------

    def redundant_dependencies(self) -> list[tuple[str, str, str]]:
        """(phase, dependency, through): the dependency is implied through another direct one."""
        found = []
        position, ancestors = self.dag.reach.position, self.dag.reach.ancestors
        for node, deps in enumerate(self.deps):
            if len(deps) < 2:
                continue
            if len(deps) > _PAIRWISE_DEPS:
                # Many dependencies: one pass of V-bit unions finds the implied ones.
                implied = 0
                for dep in deps:
                    implied |= ancestors[dep]
                candidates = [dep for dep in deps if implied >> position[dep] & 1]
            else:
                candidates = list(deps)
            for dep in candidates:
                # Shifting by a dependency's position keeps only the bits above it: few, when
                # the dependencies sit close together (the usual plan), so each test is cheap
                # where a union of whole V-bit sets would cost O(V) for every phase.
                through = next((d for d in deps if ancestors[d] >> position[dep] & 1), None)
                if through is not None:
                    found.append((self.ids[node], self.ids[dep], self.ids[through]))
        return found

    def warnings(self) -> list[str]:
        """One line each: redundant dependencies, then file overlaps of concurrent phases.

        At most ``MAX_LISTED_WARNINGS`` of each kind, then one line that counts the rest.
        """
        plan = self.plan
        redundant = self.redundant_dependencies()
        lines = [
            f"{location(plan.path, plan.phases[self.index[phase]].line)}: phase {phase!r} "
            f"dependency on {dep!r} is redundant (implied through {through!r})"
            for phase, dep, through in redundant[:MAX_LISTED_WARNINGS]
        ]
        if len(redundant) > MAX_LISTED_WARNINGS:
            lines.append(
                f"{location(plan.path)}: and {len(redundant) - MAX_LISTED_WARNINGS} more "
                "redundant dependencies"
            )
        return lines + self._overlap_warnings()

    def _overlap_warnings(self) -> list[str]:
        pairs: dict[tuple[str, str], list[Conflict]] = {}
        hidden = 0
        for path in self._file_index:
            shown = 0
            for conflict in file_conflicts(path, self._file_index, self.dag.reach, self.ids):
                key = (conflict.writer, conflict.other)
                key = min(key, key[::-1], key=lambda pair: self.index[pair[0]])
                if key not in pairs and len(pairs) >= MAX_LISTED_WARNINGS:
                    break
                pairs.setdefault(key, []).append(conflict)
                shown += 1
            if len(pairs) >= MAX_LISTED_WARNINGS:
                # counted, not built: a file that every phase writes makes V² / 2 conflicts
                hidden += count_file_conflicts(path, self._file_index, self.dag.reach) - shown
        lines = [self._overlap_line(key, found) for key, found in pairs.items()]
        if hidden:
            lines.append(
                f"{location(self.plan.path)}: and {hidden} more file overlaps between phases "
                "that may run at the same time; they will not be run concurrently"
            )
        return lines

    def _overlap_line(self, pair: tuple[str, str], found: list[Conflict]) -> str:
        where = location(self.plan.path, self.plan.phases[self.index[pair[1]]].line)
        written = [c.path for c in found if c.kind == "write"]
        parts = [f"both write {_quoted(written)}"] if written else []
        for writer, reader in (pair, pair[::-1]):
            read = [c.path for c in found if c.kind == "read" and c.writer == writer]
            if read:
                parts.append(f"{writer!r} writes {_quoted(read)} which {reader!r} reads")
        return (
            f"{where}: phases {pair[0]!r} and {pair[1]!r} may run at the same time and "
            + " and ".join(parts)
            + "; they will not be run concurrently"
        )


def _quoted(paths: list[str]) -> str:
    return ", ".join(repr(p) for p in paths)
