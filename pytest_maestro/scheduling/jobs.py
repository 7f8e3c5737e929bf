"""What the policies schedule: ``Job`` values, their graph over the DAG kernel that ``PlanGraph``
uses too, the waves and chunks ``WavePolicy`` runs, and the jobs of a plan's phases."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..plan.dag import Dag, conflict_groups, conflict_roots, file_index
from ..plan.graph import PlanGraph


@dataclass(frozen=True)
class Job:
    id: str
    deps: frozenset[str]  # ids of jobs that must finish (successfully) first
    writes: frozenset[str]  # files created/modified/deleted
    reads: frozenset[str]
    exclusive: bool = False  # runs with nothing beside it (a phase with parallel: false)
    duration: float = 1.0  # estimate in seconds, for priority only
    # What a worker must have to run it (a runtime's CLI, git): the scheduler sends a job only
    # to a worker that has all of it.
    needs: frozenset[str] = frozenset()


class JobGraph:
    """The jobs by id in the order given, numbered for the DAG kernel (``plan.dag.Dag``) that
    ``PlanGraph`` uses too; dependencies restricted to the set."""

    def __init__(self, jobs: Iterable[Job]) -> None:
        self.jobs: dict[str, Job] = {}
        for job in jobs:
            if job.id in self.jobs:
                raise ValueError(f"duplicate job id {job.id!r}")
            self.jobs[job.id] = job
        self.ids = tuple(self.jobs)
        self.order = {job_id: index for index, job_id in enumerate(self.ids)}
        # A dependency outside the set was deselected or completed earlier: it counts as satisfied.
        deps = [
            tuple(sorted(self.order[dep] for dep in job.deps if dep in self.order))
            for job in self.jobs.values()
        ]
        self.dag = Dag.build(self.ids, deps)
        self.dag.order  # noqa: B018 - raises DependencyCycle here, naming the jobs it cannot order
        self.dependents = {
            job_id: [self.ids[succ] for succ in succs]
            for job_id, succs in zip(self.ids, self.dag.succs, strict=True)
        }

    def remaining_paths(self) -> list[float]:
        """Per job, in order: its duration plus the longest chain of durations of its dependents."""
        return self.dag.remaining([job.duration for job in self.jobs.values()])


@dataclass(frozen=True)
class WaveLayout:
    """What ``WavePolicy`` runs, per wave: its jobs, its exclusive jobs, and the chunks of the
    others (jobs whose files conflict, transitively), each in the order the jobs were given."""

    waves: tuple[tuple[str, ...], ...]
    solo: tuple[tuple[str, ...], ...]
    chunks: tuple[tuple[tuple[str, ...], ...], ...]

    @classmethod
    def of(cls, graph: JobGraph) -> WaveLayout:
        """The kernel's waves and conflict groups, as ``PlanGraph`` has them for the analysis;
        exclusive jobs run alone, so they join no chunk."""
        ids, jobs = graph.ids, list(graph.jobs.values())
        shared = [not job.exclusive for job in jobs]
        nothing = frozenset[str]()
        claims = [
            (job.writes, job.reads) if ok else (nothing, nothing)
            for job, ok in zip(jobs, shared, strict=True)
        ]
        roots = conflict_roots(file_index(claims), graph.dag.depth)
        waves = graph.dag.waves
        return cls(
            waves=tuple(tuple(ids[n] for n in wave) for wave in waves),
            solo=tuple(tuple(ids[n] for n in wave if not shared[n]) for wave in waves),
            chunks=tuple(
                tuple(
                    tuple(ids[n] for n in group)
                    for group in conflict_groups([n for n in wave if shared[n]], roots)
                )
                for wave in waves
            ),
        )


def plan_jobs(
    graph: PlanGraph,
    ids: Iterable[str],
    duration: Callable[[str], float],
    needs: Callable[[str], frozenset[str]] | None = None,
) -> list[Job]:
    """A job per phase of ``ids``, in that order: its dependencies among them (one outside
    completed earlier), the keys of its files (one per file, however named: ``PlanGraph.claims``),
    exclusive for ``parallel: false``, and what a worker needs to run it (``needs``)."""
    ids = list(ids)
    running = set(ids)
    jobs = []
    for phase_id in ids:
        phase = graph.plan.phase(phase_id)
        writes, reads = graph.claims(phase_id)
        jobs.append(
            Job(
                id=phase_id,
                deps=frozenset(dep for dep in phase.blocked_by if dep in running),
                writes=frozenset(writes),
                reads=frozenset(reads),
                exclusive=not phase.parallel,
                duration=duration(phase_id),
                needs=needs(phase_id) if needs is not None else frozenset(),
            )
        )
    return jobs
