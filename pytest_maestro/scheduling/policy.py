"""The pure scheduling core: which phase should start now, given what runs and what finished.

It knows phases only as `Job` values (id, dependencies, file sets, estimated duration). No pytest,
no processes, no clock: the xdist adapter and `simulation.simulate` drive a `Policy` with
``next_job`` / ``start`` / ``finish``.

A mixed pool (workers that lack a runtime's CLI, or git) is one filter: ``next_job(has)`` offers
only a job whose ``needs`` the asking worker ``has`` (None: it has everything), and ``refuse``
fails a job that no worker can run, without running it.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping, Set
from typing import Protocol

from .jobs import Job, JobGraph, WaveLayout

__all__ = ["DagPolicy", "Job", "Policy", "WavePolicy", "fits"]

Heap = list[tuple[float, int, str]]


def fits(job: Job, has: Set[str] | None) -> bool:
    """Whether a worker that has ``has`` (None: anything) can run the job."""
    return has is None or job.needs <= has


class Policy(Protocol):
    """Every job ends up in exactly one of pending, running, finished or doomed."""

    def next_job(self, has: Set[str] | None = None) -> str | None: ...
    def start(self, job_id: str, has: Set[str] | None = None) -> None: ...
    def finish(self, job_id: str, ok: bool) -> list[tuple[str, str]]: ...
    def refuse(self, job_id: str) -> list[tuple[str, str]]: ...
    @property
    def pending(self) -> Set[str]: ...
    @property
    def running(self) -> Set[str]: ...
    @property
    def finished(self) -> Mapping[str, bool]: ...
    @property
    def doomed(self) -> Mapping[str, str]: ...
    @property
    def done(self) -> bool: ...


class _Ledger:
    """Bookkeeping shared by the policies: states, validation and transitive doom."""

    def __init__(self, jobs: Iterable[Job], max_running: int) -> None:
        if max_running < 1:
            raise ValueError(f"max_running must be at least 1, got {max_running}")
        self._graph = JobGraph(jobs)
        self._max_running = max_running
        self._pending: set[str] = set(self._graph.jobs)
        self._running: set[str] = set()
        self._finished: dict[str, bool] = {}
        self._doomed: dict[str, str] = {}

    @property
    def pending(self) -> Set[str]:
        """Jobs not started, not doomed (a live view)."""
        return self._pending

    @property
    def running(self) -> Set[str]:
        return self._running

    @property
    def finished(self) -> Mapping[str, bool]:
        """Finished jobs and whether each succeeded."""
        return self._finished

    @property
    def doomed(self) -> Mapping[str, str]:
        """Jobs that will never run, each with the failed (or skipped-for) job that dooms it."""
        return self._doomed

    @property
    def done(self) -> bool:
        return not self._pending and not self._running

    def next_job(self, has: Set[str] | None = None) -> str | None:
        raise NotImplementedError

    def start(self, job_id: str, has: Set[str] | None = None) -> None:
        """Start the job `next_job(has)` returned; anything else is a caller error."""
        allowed = self.next_job(has)
        if job_id != allowed:
            raise ValueError(f"job {job_id!r} may not start now (next_job() is {allowed!r})")
        self._pending.remove(job_id)
        self._running.add(job_id)
        self._claim(job_id)

    def finish(self, job_id: str, ok: bool) -> list[tuple[str, str]]:
        """Record the outcome; on failure return (job, failed job) for every job it dooms."""
        if job_id not in self._running:
            raise ValueError(f"job {job_id!r} is not running")
        self._running.remove(job_id)
        self._finished[job_id] = ok
        self._release(job_id, ok)
        doomed = [] if ok else self._doom_dependents(job_id, job_id)
        self._settle()
        return doomed

    def refuse(self, job_id: str) -> list[tuple[str, str]]:
        """A pending job that will never run (no worker can run it) finishes unsuccessfully
        without starting; returns what it dooms, as ``finish`` does for a failure."""
        if job_id not in self._pending:
            raise ValueError(f"job {job_id!r} is not pending")
        self._pending.remove(job_id)
        self._finished[job_id] = False
        self._forget(job_id)
        doomed = self._doom_dependents(job_id, job_id)
        self._settle()
        return doomed

    def _doom_dependents(self, job_id: str, reason_job: str) -> list[tuple[str, str]]:
        stack = list(self._graph.dependents[job_id])
        doomed: list[str] = []
        while stack:
            dependent = stack.pop()
            if dependent in self._pending:
                self._pending.remove(dependent)
                self._doomed[dependent] = reason_job
                self._forget(dependent)
                doomed.append(dependent)
                stack.extend(self._graph.dependents[dependent])
        doomed.sort(key=self._graph.order.__getitem__)
        return [(dependent, reason_job) for dependent in doomed]

    def _claim(self, job_id: str) -> None:
        raise NotImplementedError

    def _release(self, job_id: str, ok: bool) -> None:
        raise NotImplementedError

    def _forget(self, job_id: str) -> None:
        """A pending job left for good (doomed or skipped)."""

    def _settle(self) -> None:
        """Called after every finish or skip."""


class DagPolicy(_Ledger):
    """Start the dependency-ready job with the longest remaining path that may run now.

    Ready jobs wait in a heap keyed by (-remaining path, written order), one heap per set of
    ``needs`` (few: a plan's runtimes), so a worker that lacks some is offered the best of the
    heaps it can run without a scan. A job found blocked by a running job is set aside on it and
    goes back into its heap when that job finishes, so a call costs O(log n) amortised instead
    of a scan of everything ready.

    Exclusive jobs get two rules, because each one needs the workers drained: a blocked exclusive
    job holds back every job of lower priority (else a stream of others starves it), and when
    nothing runs, a ready exclusive job goes first (now it costs no drain; later it would).
    """

    def __init__(self, jobs: Iterable[Job], max_running: int) -> None:
        super().__init__(jobs, max_running)
        graph = self._graph
        paths = graph.remaining_paths()
        self._key = {job_id: (-paths[n], n, job_id) for n, job_id in enumerate(graph.ids)}
        self._unmet = {
            job_id: len(deps) for job_id, deps in zip(graph.ids, graph.dag.deps, strict=True)
        }
        self._ready: dict[frozenset[str], Heap] = {}  # by needs
        self._ready_exclusive: dict[frozenset[str], Heap] = {}
        for job_id, unmet in self._unmet.items():
            if unmet == 0:
                self._push(job_id)
        self._set_aside: dict[str, list[str]] = {}  # running job -> ready jobs it blocks
        self._waiting_exclusive: set[str] = set()  # set aside, holding back lower priorities
        self._writer: dict[str, str] = {}  # file -> the running job writing it (at most one)
        self._readers: dict[str, set[str]] = {}  # file -> running jobs reading it
        self._exclusive: str | None = None  # the running exclusive job

    def next_job(self, has: Set[str] | None = None) -> str | None:
        if len(self._running) >= self._max_running or self._exclusive is not None:
            return None
        if not self._running:
            exclusive = self._best(self._ready_exclusive, has)
            if exclusive is not None:
                return exclusive[0][2]
        while (ready := self._best(self._ready, has)) is not None:
            job_id = ready[0][2]
            if self._waiting_exclusive and ready[0] > min(
                self._key[waiting] for waiting in self._waiting_exclusive
            ):
                return None
            job = self._graph.jobs[job_id]
            blocker = self._blocker(job)
            if blocker is None:
                return job_id
            heapq.heappop(ready)
            self._set_aside.setdefault(blocker, []).append(job_id)
            if job.exclusive:
                self._waiting_exclusive.add(job_id)
        return None

    def _best(self, heaps: dict[frozenset[str], Heap], has: Set[str] | None) -> Heap | None:
        """Of the heaps whose needs ``has`` meets, the one whose best pending job is best."""
        best = None
        for needs, heap in heaps.items():
            if has is not None and not needs <= has:
                continue
            while heap and heap[0][2] not in self._pending:  # started or skipped meanwhile
                heapq.heappop(heap)
            if heap and (best is None or heap[0] < best[0]):
                best = heap
        return best

    def _push(self, job_id: str) -> None:
        job = self._graph.jobs[job_id]
        heapq.heappush(self._ready.setdefault(job.needs, []), self._key[job_id])
        if job.exclusive:
            heapq.heappush(self._ready_exclusive.setdefault(job.needs, []), self._key[job_id])

    def _blocker(self, job: Job) -> str | None:
        """A running job that `job` may not run beside, if any."""
        if job.exclusive and self._running:
            return next(iter(self._running))
        for path in job.writes:
            writer = self._writer.get(path)
            if writer is not None:
                return writer
            readers = self._readers.get(path)
            if readers:
                return next(iter(readers))
        for path in job.reads:
            writer = self._writer.get(path)
            if writer is not None:
                return writer
        return None

    def _claim(self, job_id: str) -> None:
        job = self._graph.jobs[job_id]
        if job.exclusive:
            self._exclusive = job_id
        for path in job.writes:
            self._writer[path] = job_id
        for path in job.reads:
            self._readers.setdefault(path, set()).add(job_id)

    def _release(self, job_id: str, ok: bool) -> None:
        job = self._graph.jobs[job_id]
        if self._exclusive == job_id:
            self._exclusive = None
        for path in job.writes:
            del self._writer[path]
        for path in job.reads:
            readers = self._readers[path]
            readers.discard(job_id)
            if not readers:
                del self._readers[path]
        for waiting in self._set_aside.pop(job_id, ()):
            self._waiting_exclusive.discard(waiting)
            if waiting in self._pending:
                needs = self._graph.jobs[waiting].needs
                heapq.heappush(self._ready.setdefault(needs, []), self._key[waiting])
        if ok:
            for dependent in self._graph.dependents[job_id]:
                self._unmet[dependent] -= 1
                if self._unmet[dependent] == 0 and dependent in self._pending:
                    self._push(dependent)

    def _forget(self, job_id: str) -> None:
        self._waiting_exclusive.discard(job_id)


class WavePolicy(_Ledger):
    """The strategy of wave-based orchestrators (a barrier per wave), for comparison.

    Waves by dependency depth with a barrier after each. Within a wave, exclusive jobs run first,
    one at a time and alone; then jobs whose files conflict are merged into chunks, and chunks run
    in parallel, each one job at a time like one agent working through its list. A started chunk
    keeps its worker; idle chunks start largest remaining work first (kinder than written order).
    """

    def __init__(self, jobs: Iterable[Job], max_running: int) -> None:
        super().__init__(jobs, max_running)
        self.layout = WaveLayout.of(self._graph)
        waves = self.layout.waves
        self._wave_of = {job_id: n for n, wave in enumerate(waves) for job_id in wave}
        self._left = [len(wave) for wave in waves]  # pending or running jobs per wave
        self._chunks: list[deque[str]] = []
        self._wave_chunks: list[list[int]] = []
        for chunks in self.layout.chunks:
            first = len(self._chunks)
            self._chunks.extend(deque(chunk) for chunk in chunks)
            self._wave_chunks.append(list(range(first, len(self._chunks))))
        self._chunk_of = {job_id: c for c, chunk in enumerate(self._chunks) for job_id in chunk}
        self._wave = -1
        self._solo: deque[str] = deque()  # the current wave's exclusive jobs
        self._alone: str | None = None  # the running exclusive job
        self._idle: list[tuple[float, int]] = []  # (-remaining work, chunk) of unstarted chunks
        self._resume: deque[int] = deque()  # started chunks whose worker is free again
        self._settle()

    def next_job(self, has: Set[str] | None = None) -> str | None:
        if len(self._running) >= self._max_running:
            return None
        while self._solo and self._solo[0] not in self._pending:
            self._solo.popleft()
        if self._solo or self._alone is not None:
            solo = None if self._running else self._solo[0]
            return solo if solo is not None and fits(self._graph.jobs[solo], has) else None
        chunk = self._next_chunk() if has is None else self._next_chunk_for(has)
        return None if chunk is None else self._chunks[chunk][0]

    def _next_chunk_for(self, has: Set[str]) -> int | None:
        """The chunk ``_next_chunk`` would give, among those whose next job ``has`` meets: a
        scan, which only a mixed pool pays."""
        jobs = self._graph.jobs
        resumed = [chunk for chunk in self._resume if self._drop_stale(chunk)]
        idle = sorted(entry for entry in self._idle if self._drop_stale(entry[1]))
        for chunk in (*resumed, *(chunk for _, chunk in idle)):
            if fits(jobs[self._chunks[chunk][0]], has):
                return chunk
        return None

    def _next_chunk(self) -> int | None:
        while self._resume:
            if self._drop_stale(self._resume[0]):
                return self._resume[0]
            self._resume.popleft()
        while self._idle:
            if self._drop_stale(self._idle[0][1]):
                return self._idle[0][1]
            heapq.heappop(self._idle)
        return None

    def _drop_stale(self, chunk: int) -> bool:
        """Drop doomed or skipped jobs from the chunk's front; True if a job is left."""
        queue = self._chunks[chunk]
        while queue and queue[0] not in self._pending:
            queue.popleft()
        return bool(queue)

    def _claim(self, job_id: str) -> None:
        if self._solo and self._solo[0] == job_id:
            self._alone = self._solo.popleft()
            return
        chunk = self._chunk_of[job_id]
        if self._resume and self._resume[0] == chunk:
            self._resume.popleft()
        elif chunk in self._resume:  # a worker that lacks what those before it need
            self._resume.remove(chunk)
        elif self._idle[0][1] == chunk:
            heapq.heappop(self._idle)
        else:
            self._idle = [entry for entry in self._idle if entry[1] != chunk]
            heapq.heapify(self._idle)
        self._chunks[chunk].popleft()

    def _release(self, job_id: str, ok: bool) -> None:
        self._left[self._wave_of[job_id]] -= 1
        if self._alone == job_id:
            self._alone = None
        chunk = self._chunk_of.get(job_id)
        if chunk is not None and self._chunks[chunk]:
            self._resume.append(chunk)

    def _forget(self, job_id: str) -> None:
        self._left[self._wave_of[job_id]] -= 1

    def _settle(self) -> None:
        """Open the next wave once everything in the current one finished or was doomed."""
        while self._wave < len(self._left) and (self._wave < 0 or self._left[self._wave] == 0):
            self._wave += 1
            if self._wave < len(self._left):
                self._open(self._wave)

    def _open(self, wave: int) -> None:
        self._solo = deque(self.layout.solo[wave])
        self._resume.clear()
        jobs = self._graph.jobs
        self._idle = [
            (-sum(jobs[j].duration for j in self._chunks[c] if j in self._pending), c)
            for c in self._wave_chunks[wave]
        ]
        heapq.heapify(self._idle)
