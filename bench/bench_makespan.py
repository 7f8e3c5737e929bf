"""Makespan of real parallel runs: ``--maestro-schedule=dag`` against ``waves`` on random plans.

    python bench/bench_makespan.py [--phases 24] [--seed 1] [--workers 2 4 8] [--keep DIR]

Two seeded random DAG plans of sleep phases (0.2-1.5 s each): one whose phases share no file, and
one where about half the phases also modify one of two shared files. Each runs for real with
``python -m pytest --maestro plan.json -n N -q -p no:cacheprovider -p no:hypothesispytest`` in a
fresh directory (temporary unless ``--keep``), once with the dag and once with the waves schedule.
Each phase's command appends its start and end time and its worker to a log, so the makespan runs
from the first start to the last end (pytest and xdist start-up excluded); "wall" is the whole
pytest run and "start" the time from launching pytest to the first phase start.

Beside each real makespan: the lower bound max(critical path, total work / N) of the sleep
durations, and the makespan the policy alone gives in ``simulation.simulate`` on the same plan
("sim"). Under the table, per run: the policy simulated again with the durations the phases
really took ("replay"; the real makespan minus it is what the plumbing added, give or take the
different choices that other durations lead to), and the median "dispatch" gap: on one worker,
the time from one phase's end to the next phase's start, where the next one's dependencies had
all ended by then (the controller's reaction, xdist's round trip and starting bash). Last, the
policies simulated on 100 plans of the same generator, to tell a typical seed from an odd one.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from plans import PlanDict, random_plan

from pytest_maestro.scheduling.policy import DagPolicy, Job, Policy, WavePolicy
from pytest_maestro.scheduling.simulation import simulate

QUIET = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
TIMING_LOG = "timing.log"
# bash 5's clock variable costs no process, so the stamps barely lengthen a phase; date elsewhere.
STAMP = "${EPOCHREALTIME:-$(date +%s.%N)}"
# (label, share of phases that also modify a shared file, how many shared files)
CASES = (("no file conflicts", 0.0, None), ("shared files", 0.5, 2))
POLICIES: dict[str, Callable[[Sequence[Job], int], Policy]] = {
    "dag": DagPolicy,
    "waves": WavePolicy,
}


def make_plan(phases: int, seed: int, conflict_ratio: float, shared_files: int | None) -> PlanDict:
    return random_plan(
        phases,
        seed=seed,
        edge_probability=0.2,
        window=10,
        conflict_ratio=conflict_ratio,
        shared_files=shared_files,
        duration=(0.2, 1.5),
    )


def timed(plan: PlanDict) -> PlanDict:
    """Each phase logs its start and end around its sleep and makes the file changes it declares
    (the runner fails a phase whose declared files did not appear or change)."""
    phases = []
    for phase in plan["phases"]:
        pid, files = phase["id"], phase["files"]
        steps = [f'echo "{pid} start {STAMP} ${{PYTEST_XDIST_WORKER:-main}}" >> {TIMING_LOG}']
        steps += phase["run"]
        steps += [f": > {path}" for path in files.get("create", [])]
        steps += [f"echo {pid} >> {path}" for path in files.get("modify", [])]
        steps.append(f'echo "{pid} end {STAMP}" >> {TIMING_LOG}')
        phases.append({**phase, "run": [" && ".join(steps)]})
    return {**plan, "phases": phases}


def jobs_of(plan: PlanDict, durations: dict[str, float] | None = None) -> list[Job]:
    """The plan as the policies see it; ``durations`` (measured) replace the estimates."""
    jobs = []
    for phase in plan["phases"]:
        files = phase["files"]
        seconds = phase["estimate"] if durations is None else durations[phase["id"]]
        writes = frozenset(files.get("create", []) + files.get("modify", []))
        deps = frozenset(phase["blocked_by"])
        jobs.append(Job(phase["id"], deps, writes, frozenset(), False, seconds))
    return jobs


def critical_path(jobs: Sequence[Job]) -> float:
    """Longest chain of durations; random plans only depend on phases written before."""
    finish: dict[str, float] = {}
    for job in jobs:
        finish[job.id] = job.duration + max((finish[dep] for dep in job.deps), default=0.0)
    return max(finish.values(), default=0.0)


def lower_bound(jobs: Sequence[Job], workers: int) -> float:
    return max(critical_path(jobs), sum(job.duration for job in jobs) / workers)


def simulated(policy: str, jobs: Sequence[Job], workers: int) -> float:
    return simulate(POLICIES[policy], jobs, workers).makespan


@dataclass(frozen=True)
class Run:
    wall: float  # launching pytest to its exit
    launched: float  # epoch seconds
    starts: dict[str, float]  # phase -> epoch seconds, from the phase's own log lines
    ends: dict[str, float]
    worker: dict[str, str]  # phase -> xdist worker id

    @property
    def start(self) -> float:
        return min(self.starts.values()) - self.launched

    @property
    def makespan(self) -> float:
        return max(self.ends.values()) - min(self.starts.values())

    @property
    def durations(self) -> dict[str, float]:
        return {pid: self.ends[pid] - start for pid, start in self.starts.items()}

    def dispatch_gaps(self, plan: PlanDict) -> list[float]:
        deps = {phase["id"]: phase["blocked_by"] for phase in plan["phases"]}
        by_worker: dict[str, list[str]] = {}
        for pid in sorted(self.starts, key=self.starts.__getitem__):
            by_worker.setdefault(self.worker[pid], []).append(pid)
        gaps = []
        for order in by_worker.values():
            for before, after in itertools.pairwise(order):
                if all(self.ends[dep] <= self.ends[before] for dep in deps[after]):
                    gaps.append(self.starts[after] - self.ends[before])
        return gaps


def run(plan: PlanDict, workers: int, schedule: str, workdir: Path) -> Run:
    workdir.mkdir(parents=True)
    (workdir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # pins the project root
    (workdir / "plan.json").write_text(json.dumps(timed(plan), indent=1), encoding="utf-8")
    for phase in plan["phases"]:  # the phases write their files with shell builtins only
        for path in phase["files"].get("create", []) + phase["files"].get("modify", []):
            (workdir / path).parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pytest", "--maestro", "plan.json", "-n", str(workers), *QUIET]
    argv.append(f"--maestro-schedule={schedule}")
    launched = time.time()
    done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True)
    wall = time.time() - launched
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    worker: dict[str, str] = {}
    for line in (workdir / TIMING_LOG).read_text(encoding="utf-8").splitlines():
        pid, event, stamp, *where = line.split()
        seconds = float(stamp.replace(",", "."))  # EPOCHREALTIME follows the locale's decimal mark
        if event == "start":
            starts[pid], worker[pid] = seconds, where[0]
        else:
            ends[pid] = seconds
    return Run(wall, launched, starts, ends, worker)


HEADER = (
    f"  {'N':>2} {'bound':>6} | {'dag':>6} {'/bound':>6} {'sim':>6} {'wall':>6} {'start':>5}"
    f" | {'waves':>6} {'sim':>6} {'wall':>6} {'start':>5} | {'waves/dag':>9} {'sim':>5}"
)


def row(workers: int, bound: float, dag: Run, waves: Run, sims: dict[str, float]) -> str:
    return (
        f"  {workers:2} {bound:6.2f} | {dag.makespan:6.2f} {dag.makespan / bound:6.3f}"
        f" {sims['dag']:6.2f} {dag.wall:6.2f} {dag.start:5.2f}"
        f" | {waves.makespan:6.2f} {sims['waves']:6.2f} {waves.wall:6.2f} {waves.start:5.2f}"
        f" | {waves.makespan / dag.makespan:9.3f} {sims['waves'] / sims['dag']:5.2f}"
    )


def diagnosis(plan: PlanDict, runs: dict[str, Run], workers: int) -> str:
    parts = []
    for name, measured in runs.items():
        replay = simulated(name, jobs_of(plan, measured.durations), workers)
        gaps = measured.dispatch_gaps(plan)
        gap = f"{statistics.median(gaps) * 1000:.0f} ms" if gaps else "-"
        parts.append(
            f"{name}: replay {replay:.2f} (real {measured.makespan - replay:+.2f}), dispatch {gap}"
        )
    return "       " + "; ".join(parts)


def family(phases: int, conflicts: tuple[float, int | None], workers: Sequence[int]) -> str:
    """The policies simulated on 100 plans of the same generator: is the one seed typical?"""
    parts = []
    for count in workers:
        to_bound, waves_to_dag = [], []
        for seed in range(1, 101):
            jobs = jobs_of(make_plan(phases, seed, *conflicts))
            dag = simulated("dag", jobs, count)
            to_bound.append(dag / lower_bound(jobs, count))
            waves_to_dag.append(simulated("waves", jobs, count) / dag)
        parts.append(
            f"N={count} dag/bound {statistics.mean(to_bound):.3f},"
            f" waves/dag {statistics.mean(waves_to_dag):.3f}"
            f" (>= 1.3 in {sum(ratio >= 1.3 for ratio in waves_to_dag)}%)"
        )
    return "  simulated, mean over seeds 1-100: " + "; ".join(parts)


def bench_case(label: str, plan: PlanDict, workers: Sequence[int], base: Path) -> None:
    jobs = jobs_of(plan)
    shared = {path for phase in plan["phases"] for path in phase["files"].get("modify", [])}
    touching = sum(1 for phase in plan["phases"] if phase["files"].get("modify"))
    print(
        f"\n{label}: {len(jobs)} phases, work {sum(job.duration for job in jobs):.2f} s,"
        f" critical path {critical_path(jobs):.2f} s"
        + (f", {touching} phases modify one of {len(shared)} shared files" if shared else "")
    )
    print(HEADER)
    for count in workers:
        slug = label.split()[0]
        runs = {name: run(plan, count, name, base / f"{slug}-n{count}-{name}") for name in POLICIES}
        sims = {name: simulated(name, jobs, count) for name in POLICIES}
        print(row(count, lower_bound(jobs, count), runs["dag"], runs["waves"], sims))
        print(diagnosis(plan, runs, count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--keep", type=Path, help="run in this directory and keep the runs")
    args = parser.parse_args()
    print(f"seconds; bound = max(critical path, work / N); seed {args.seed}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="maestro-makespan-") as tmp:
        base = args.keep or Path(tmp)
        for label, conflict_ratio, shared_files in CASES:
            plan = make_plan(args.phases, args.seed, conflict_ratio, shared_files)
            bench_case(label, plan, args.workers, base)
            print(family(args.phases, (conflict_ratio, shared_files), args.workers))
    print(f"\nbenchmark took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
