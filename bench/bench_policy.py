"""Scheduling policies on random plans: simulation speed, and makespan against the lower bound.

    python bench/bench_policy.py [--jobs 10000] [--workers 64] [--plans 200] [--seed 1]

Prints figures; asserts nothing. Makespans are simulated (each job takes its estimated duration).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence

from pytest_maestro.scheduling.policy import DagPolicy, Job, Policy, WavePolicy
from pytest_maestro.scheduling.simulation import lower_bound, simulate

PolicyClass = Callable[[Sequence[Job], int], Policy]


def random_plan(
    rng: random.Random, count: int, files: int | None, window: int, exclusive: float = 0.02
) -> list[Job]:
    """Jobs depending on up to 3 of the `window` jobs before them, durations 1-10 s.

    With `files`, each job writes 1-3 and reads 0-2 of that many files; without, it writes a file
    of its own, so no two jobs conflict.
    """
    jobs = []
    for index in range(count):
        picks = rng.randint(0, 3) if index else 0
        deps = frozenset(f"j{rng.randrange(max(0, index - window), index)}" for _ in range(picks))
        if files is None:
            writes, reads = frozenset({f"own{index}"}), frozenset[str]()
        else:
            writes = frozenset(f"f{rng.randrange(files)}" for _ in range(rng.randint(1, 3)))
            reads = frozenset(f"f{rng.randrange(files)}" for _ in range(rng.randint(0, 2)))
        solo = rng.random() < exclusive
        jobs.append(Job(f"j{index}", deps, writes, reads, solo, rng.uniform(1.0, 10.0)))
    return jobs


def timed_run(
    policy_class: PolicyClass, jobs: list[Job], workers: int
) -> tuple[float, float, float]:
    """(wall s, CPU s) of building the policy and simulating, and the simulated makespan."""
    wall, cpu = time.perf_counter(), time.process_time()
    makespan = simulate(policy_class, jobs, workers).makespan
    return time.perf_counter() - wall, time.process_time() - cpu, makespan


def big_plan(jobs: int, workers: int, seed: int) -> None:
    plan = random_plan(random.Random(seed), jobs, files=jobs // 5, window=200)
    bound = lower_bound(plan, workers)
    print(f"{jobs} jobs, {jobs // 5} files, 2 % exclusive, {workers} workers")
    print(f"  lower bound {bound:10.1f} s")
    for name, policy_class in (("dag", DagPolicy), ("waves", WavePolicy)):
        wall, cpu, makespan = timed_run(policy_class, plan, workers)
        print(
            f"  {name:6} simulated in {wall:6.3f} s wall ({cpu:.3f} s CPU):"
            f" makespan {makespan:10.1f} s"
            f" = {makespan / bound:5.2f} x lower bound"
        )


def small_plans(plans: int, seed: int) -> None:
    print(f"\nmean (worst for dag) over {plans} random plans of 10-50 jobs, 2 % exclusive")
    print(f"  {'files':22} {'workers':>7} {'dag/lower bound':>18} {'waves/dag':>16}")
    kinds = (("none shared", None), ("1-3 of 40 per job", 40), ("1-3 of 12 per job", 12))
    for label, files in kinds:
        for workers in (2, 4, 8):
            rng = random.Random(seed * 100 + workers)
            to_bound, waves_to_dag = [], []
            for _ in range(plans):
                plan = random_plan(rng, rng.randint(10, 50), files, window=10)
                dag = simulate(DagPolicy, plan, workers).makespan
                to_bound.append(dag / lower_bound(plan, workers))
                waves_to_dag.append(simulate(WavePolicy, plan, workers).makespan / dag)
            print(
                f"  {label:22} {workers:7}"
                f" {statistics.mean(to_bound):9.3f} ({max(to_bound):5.2f})"
                f" {statistics.mean(waves_to_dag):7.3f} ({min(waves_to_dag):5.2f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--plans", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    big_plan(args.jobs, args.workers, args.seed)
    small_plans(args.plans, args.seed)


if __name__ == "__main__":
    main()
