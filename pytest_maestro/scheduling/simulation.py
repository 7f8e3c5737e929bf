"""A discrete-event simulation that drives a `Policy` with jobs taking their estimated durations.

It measures a policy without processes or a clock: the makespan it would give, which worker ran
what, and `lower_bound`, a time no schedule can beat, to compare it against.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping, Sequence, Set
from dataclasses import dataclass

# JobGraph is the policies' own view of the jobs; the bound uses it so it prunes dependencies and
# rejects duplicates and cycles exactly as the policies do.
from .jobs import Job, JobGraph
from .policy import Policy


@dataclass(frozen=True)
class Slot:
    start: float
    finish: float
    worker: int
    ok: bool


@dataclass(frozen=True)
class Schedule:
    slots: Mapping[str, Slot]  # every job that ran
    doomed: Mapping[str, str]  # every job that never ran -> the failed job that doomed it
    makespan: float
    refused: tuple[str, ...] = ()  # jobs no worker could run (a mixed pool)


PolicyFactory = Callable[[Sequence[Job], int], Policy]


def simulate(
    policy: Policy | PolicyFactory,
    jobs: Sequence[Job],
    workers: int,
    startup: float = 0.0,
    stagger: float = 0.0,
    failing: Collection[str] = frozenset(),
    observe: Callable[[float, Policy], None] | None = None,
    has: Sequence[Set[str]] | None = None,
) -> Schedule:
    """Discrete-event run of `jobs` on `workers` workers, each job taking its duration.

    `policy` is a policy over `jobs` or a factory such as `DagPolicy` (called with `workers` as
    max_running). `startup` is added to every job (agent launch), `stagger` is the least time
    between two launches, jobs in `failing` finish unsuccessfully, and `observe(time, policy)` is
    called at every event time after the launches, for checks. ``has``: what each worker has
    (a mixed pool; None: every worker runs every job), the lowest idle worker that can run a
    job asked first; a job no worker can run is refused (``Policy.refuse``) at the start.
    """
    if callable(policy):
        policy = policy(jobs, workers)
    durations = {job.id: job.duration for job in jobs}
    idle = list(range(workers))
    refused = []
    if has is not None:
        pool = [has[worker] for worker in range(workers)]
        for job in jobs:
            if job.id in policy.pending and not any(job.needs <= can for can in pool):
                policy.refuse(job.id)
                refused.append(job.id)
    events: list[tuple[float, int, str, int]] = []  # (finish time, launch number, job, worker)
    slots: dict[str, Slot] = {}
    now = next_launch = 0.0
    while True:
        while idle and now >= next_launch and (found := _launch(policy, idle, has)) is not None:
            worker, job_id = found
            end = now + startup + durations[job_id]
            slots[job_id] = Slot(now, end, worker, job_id not in failing)
            heapq.heappush(events, (end, len(slots), job_id, worker))
            next_launch = now + stagger
        if observe is not None:
            observe(now, policy)
        throttled = idle and now < next_launch and _launch(policy, idle, has, dry=True)
        wakeups = [events[0][0]] if events else []
        if throttled:
            wakeups.append(next_launch)
        if not wakeups:
            break
        now = min(wakeups)
        while events and events[0][0] <= now:
            _, _, job_id, worker = heapq.heappop(events)
            heapq.heappush(idle, worker)
            policy.finish(job_id, slots[job_id].ok)
    if not policy.done:
        raise RuntimeError(f"deadlock: {len(policy.pending)} jobs pending, nothing can start")
    makespan = max((slot.finish for slot in slots.values()), default=0.0)
    return Schedule(slots, dict(policy.doomed), makespan, tuple(refused))


def _launch(
    policy: Policy, idle: list[int], has: Sequence[Set[str]] | None, dry: bool = False
) -> tuple[int, str] | None:
    """The lowest idle worker the policy offers a job, and the job, started unless ``dry``."""
    for worker in sorted(idle) if has is not None else idle[:1]:
        job_id = policy.next_job(None if has is None else has[worker])
        if job_id is None:
            continue
        if not dry:
            policy.start(job_id, None if has is None else has[worker])
            if has is None:
                heapq.heappop(idle)
            else:
                idle.remove(worker)
                heapq.heapify(idle)
        return worker, job_id
    return None


def lower_bound(jobs: Sequence[Job], workers: int) -> float:
    """A time no schedule on `workers` workers can beat.

    The longest dependency chain; exclusive work plus the other work spread evenly (which is at
    least total work / workers); the work of all jobs writing one file, which never overlap.
    """
    chain = max(JobGraph(jobs).remaining_paths(), default=0.0)
    alone = sum(job.duration for job in jobs if job.exclusive)
    shared = sum(job.duration for job in jobs if not job.exclusive)
    per_file: dict[str, float] = {}
    for job in jobs:
        for path in job.writes:
            per_file[path] = per_file.get(path, 0.0) + job.duration
    return max(chain, alone + shared / workers, max(per_file.values(), default=0.0))
