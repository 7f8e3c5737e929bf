"""A discrete-event simulation that drives a `Policy` with jobs taking their estimated durations.

It measures a policy without processes or a clock: the makespan it would give, which worker ran
what, and `lower_bound`, a time no schedule can beat, to compare it against.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping, Sequence
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


PolicyFactory = Callable[[Sequence[Job], int], Policy]


def simulate(
    policy: Policy | PolicyFactory,
    jobs: Sequence[Job],
    workers: int,
    startup: float = 0.0,
    stagger: float = 0.0,
    failing: Collection[str] = frozenset(),
    observe: Callable[[float, Policy], None] | None = None,
) -> Schedule:
    """Discrete-event run of `jobs` on `workers` workers, each job taking its duration.

    `policy` is a policy over `jobs` or a factory such as `DagPolicy` (called with `workers` as
    max_running). `startup` is added to every job (agent launch), `stagger` is the least time
    between two launches, jobs in `failing` finish unsuccessfully, and `observe(time, policy)` is
    called at every event time after the launches, for checks.
    """
    if callable(policy):
        policy = policy(jobs, workers)
    durations = {job.id: job.duration for job in jobs}
    idle = list(range(workers))
    events: list[tuple[float, int, str, int]] = []  # (finish time, launch number, job, worker)
    slots: dict[str, Slot] = {}
    now = next_launch = 0.0
    while True:
        while idle and now >= next_launch and (job_id := policy.next_job()) is not None:
            policy.start(job_id)
            worker = heapq.heappop(idle)
            end = now + startup + durations[job_id]
            slots[job_id] = Slot(now, end, worker, job_id not in failing)
            heapq.heappush(events, (end, len(slots), job_id, worker))
            next_launch = now + stagger
        if observe is not None:
            observe(now, policy)
        throttled = idle and now < next_launch and policy.next_job() is not None
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
    return Schedule(slots, dict(policy.doomed), makespan)


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
