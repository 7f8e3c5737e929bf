"""Agent phases against an account's limits: how close a run comes to what the account allows.

    python bench/bench_agents.py [--repeat 3] [--seconds 1.5] [--only A B C] [--package DIR]

Each phase is one call of a stand-in claude (``tests/fakes/account/claude``, put first on PATH)
that takes ``--seconds`` (minutes-long agent calls scaled down) and whose account, shared by every
process through a lock file, refuses a call past its limit at once with claude's 429 reply:

- A: 8 independent phases at ``-n 8``, an account of 3 concurrent calls;
- B: a 40-phase DAG (the random plans of ``plans.py``: each phase depends on each of the 8
  written before it with probability 0.15) at ``-n 4`` and ``-n 8``, an account of 3 concurrent
  calls;
- C: 8 independent phases at ``-n 8``, an account of 4 calls per minute and no limit on
  concurrent calls. The minute is a real one (the scenario takes a minute and a few seconds):
  claude's refusal says no reset time, so the run cools off for 2, 4, 8 ... real seconds, and
  against a minute scaled down those measured the scaling, not the pacing.

Each run is ``python -m pytest --maestro plan.json -n N -q --maestro-runtime=claude`` in a fresh
temporary directory. Printed per run:

- the span, from the first phase's start to the last phase's end as summary.json has them
  (start-up apart), over the bound the account allows (A, B: the longer of the critical path and
  ceil(phases / slots) calls one after another, slots the smaller of the account's and N; C: the
  last start the per-minute limit allows, plus one call); goal at most 1.15;
- the span over the one the workers' start-up allowed: on 2 cores, 8 workers come up seconds
  apart, and until they do a phase waits for a worker, not for the account. Each worker ready at
  its first phase's start, the same greedy schedule under the account's limits; same goal;
- wasted calls (refused, or made again for a phase that had completed one); attempts burnt (past
  each phase's first, and phases not completed; goal 0); start-up (launching pytest to the first
  phase's start); the seconds phases waited for the account, as the summary says.

``--package DIR`` runs another checkout's ``pytest_maestro`` (put first on PYTHONPATH), e.g.
the code before this benchmark's pacing, for a before and after.

Bytecode as an installed package has it (``bytecode.py``): the runs cache it under the temporary
directory, and one untimed run of two short phases fills the cache first; ``--no-pyc`` makes
every process compile what it imports instead, as where ``PYTHONDONTWRITEBYTECODE`` is set and no
cache was ever written.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bytecode import environment
from plans import PlanDict, random_plan

REPO = Path(__file__).resolve().parent.parent
ACCOUNT = REPO / "tests" / "fakes" / "account"
QUIET = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:randomly"]
GOAL_SPAN = 1.15
GOAL_BURNT = 0


@dataclass(frozen=True)
class Scenario:
    name: str
    phases: int
    workers: int
    concurrent: int = 0  # the account's calls at once (0: no limit)
    per_minute: int = 0  # the account's calls per minute (0: no limit)
    minute: float = 60.0  # the minute's seconds
    dag: bool = False

    def plan(self) -> PlanDict:
        edges = random_plan(self.phases, seed=1, edge_probability=0.15, window=8)
        phases = [
            {
                "id": phase["id"],
                "name": f"Phase {phase['id']}",
                "description": "Do the phase's part.",
                "reads": ["README.md"],
                "blocked_by": phase["blocked_by"] if self.dag else [],
            }
            for phase in edges["phases"]
        ]
        return {"title": f"scenario {self.name}", "phases": phases}

    def bound(self, seconds: float) -> float:
        """The shortest span the account allows, calls being indivisible."""
        plan = self.plan()["phases"]
        if self.per_minute:  # the k-th start no earlier than minute * floor(k / per minute)
            last = (self.phases - 1) // self.per_minute
            return last * self.minute + seconds
        slots = min(self.concurrent or self.workers, self.workers)
        depth: dict[str, int] = {}
        for phase in plan:
            depth[phase["id"]] = 1 + max((depth[d] for d in phase["blocked_by"]), default=0)
        return max(max(depth.values()), math.ceil(self.phases / slots)) * seconds


def ideal(scenario: Scenario, seconds: float, ready: list[float]) -> float:
    """The span a run with workers ready at ``ready`` (seconds from the first phase start) could
    have had under the account's limits: whenever a worker is free, the account has room and a
    phase's dependencies have ended, the phase with the longest chain after it starts (calls of
    ``seconds``)."""
    plan = scenario.plan()["phases"]
    deps = {phase["id"]: set(phase["blocked_by"]) for phase in plan}
    chain: dict[str, int] = {}
    for phase in reversed(plan):  # written order is a topological order
        after = [chain[p["id"]] for p in plan if phase["id"] in p["blocked_by"]]
        chain[phase["id"]] = 1 + max(after, default=0)
    slots = scenario.concurrent or len(ready)
    free = sorted(ready)  # when each worker is free next
    ends: dict[str, float] = {}
    starts: list[float] = []
    now = 0.0
    while len(ends) < len(plan):
        flying = sum(1 for end in ends.values() if end > now)
        ready_now = [w for w, at in enumerate(free) if at <= now]
        window_full = (
            scenario.per_minute
            and len([t for t in starts if t > now - scenario.minute]) >= scenario.per_minute
        )
        waiting = sorted(
            (
                pid
                for pid in deps
                if pid not in ends and all(ends.get(d, 1e18) <= now for d in deps[pid])
            ),
            key=lambda pid: -chain[pid],
        )
        if waiting and ready_now and flying < slots and not window_full:
            ends[waiting[0]] = free[ready_now[0]] = now + seconds
            starts.append(now)
            continue
        later = [t for t in (*free, *ends.values()) if t > now]
        later += [t + scenario.minute for t in starts if t + scenario.minute > now]
        now = min(later)
    return max(ends.values())


@dataclass(frozen=True)
class Figures:
    span: float
    ideal: float  # the span the workers' start-up allowed (``ideal``)
    startup: float
    wasted: int
    burnt: int
    waited: float | None  # seconds phases waited for the account, as the summary says
    passed: int


def run(
    scenario: Scenario,
    seconds: float,
    package: Path | None,
    workdir: Path,
    base: dict[str, str],
) -> Figures:
    """One run of ``scenario`` in ``workdir``, its processes given ``base`` as environment."""
    workdir.mkdir(parents=True)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "README.md").write_text("a project\n")
    (workdir / "plan.json").write_text(json.dumps(scenario.plan(), indent=1))
    account = workdir / "account"
    env = {
        **base,
        "PATH": f"{ACCOUNT}{os.pathsep}{base['PATH']}",
        "ACCOUNT_DIR": str(account),
        "ACCOUNT_SECONDS": str(seconds),
        "ACCOUNT_CONCURRENT": str(scenario.concurrent),
        "ACCOUNT_RPM": str(scenario.per_minute),
        "ACCOUNT_MINUTE": str(scenario.minute),
    }
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "pytest", "--maestro", "plan.json", "-n", str(scenario.workers)]
    argv += [*QUIET, "--maestro-runtime=claude"]
    launched = time.time()
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        said = done.stdout[-3000:] + done.stderr[-3000:]
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{said}")
    summary = json.loads((workdir / ".maestro" / "summary.json").read_text())
    rows = summary["phases"]
    starts = [_epoch(row["start"]) for row in rows if row["start"]]
    ends = [_epoch(row["finish"]) for row in rows if row["finish"]]
    ready: dict[str, float] = {}  # each worker's first phase start
    for row in rows:
        if row["start"] and row["worker"]:
            start = _epoch(row["start"]) - min(starts)
            ready[row["worker"]] = min(ready.get(row["worker"], start), start)
    events = [json.loads(line) for line in (account / "events.jsonl").read_text().splitlines()]
    accepted: dict[str, int] = {}
    for event in events:
        if event["event"] == "start":
            accepted[event["phase"]] = accepted.get(event["phase"], 0) + 1
    refused = sum(event["event"] in ("refused", "quota") for event in events)
    passed = sum(row["status"] == "completed" for row in rows)
    burnt = sum(max(row["attempts"] - 1, 0) for row in rows) + len(rows) - passed
    return Figures(
        span=max(ends) - min(starts),
        ideal=ideal(scenario, seconds, list(ready.values())),
        startup=min(starts) - launched,
        wasted=refused + sum(n - 1 for n in accepted.values()),
        burnt=burnt,
        waited=summary.get("account_wait_seconds"),
        passed=passed,
    )


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def over(value: float, goal: float) -> str:
    return "" if value <= goal else "  OVER GOAL"


def report(scenario: Scenario, seconds: float, runs: list[Figures]) -> None:
    bound = scenario.bound(seconds)
    limits = []
    if scenario.concurrent:
        limits.append(f"{scenario.concurrent} concurrent calls")
    if scenario.per_minute:
        limits.append(f"{scenario.per_minute} calls per {scenario.minute:g} s")
    shape = "a DAG of" if scenario.dag else ""
    print(
        f"\n{scenario.name}: {shape} {scenario.phases} phases at -n {scenario.workers}, "
        f"account {' and '.join(limits)}, calls of {seconds:g} s; bound {bound:.2f} s"
    )
    for number, got in enumerate(runs, 1):
        ratio = got.span / bound
        waited = "-" if got.waited is None else f"{got.waited:.1f} s"
        given = got.span / got.ideal
        print(
            f"  run {number}: span {got.span:5.2f} s = {ratio:.2f}x the bound "
            f"(goal <= {GOAL_SPAN}){over(ratio, GOAL_SPAN)}, {given:.2f}x what the workers' "
            f"start allowed ({got.ideal:.2f} s; goal <= {GOAL_SPAN}){over(given, GOAL_SPAN)}; "
            f"wasted calls {got.wasted}; "
            f"attempts burnt {got.burnt} (goal {GOAL_BURNT}){over(got.burnt, GOAL_BURNT)}; "
            f"start-up {got.startup:.2f} s; waited for the account {waited}; "
            f"{got.passed}/{scenario.phases} completed"
        )
    ratios = [got.span / bound for got in runs]
    given = [got.span / got.ideal for got in runs]
    print(
        f"  span/bound {min(ratios):.2f}-{max(ratios):.2f} (median "
        f"{statistics.median(ratios):.2f}); span/what the workers' start allowed "
        f"{min(given):.2f}-{max(given):.2f}; start-up "
        f"{min(g.startup for g in runs):.2f}-{max(g.startup for g in runs):.2f} s"
    )


SCENARIOS = {
    "A": [Scenario("A", 8, 8, concurrent=3)],
    "B": [Scenario("B", 40, n, concurrent=3, dag=True) for n in (4, 8)],
    "C": [Scenario("C", 8, 8, per_minute=4, minute=60.0)],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.5, help="each call's length")
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), default=sorted(SCENARIOS))
    parser.add_argument("--package", type=Path, help="a checkout whose pytest_maestro to run")
    parser.add_argument("--no-pyc", action="store_true", help="every process compiles its modules")
    args = parser.parse_args()
    package = args.package.resolve() if args.package else None
    print(f"pytest_maestro from {package or REPO}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="maestro-agents-") as tmp:
        base = environment(Path(tmp), not args.no_pyc)
        if not args.no_pyc:  # untimed: fills the bytecode cache, as a user's first run does
            run(Scenario("warm-up", 2, 2, concurrent=1), 0.1, package, Path(tmp) / "warm", base)
        for name in args.only:
            for scenario in SCENARIOS[name]:
                runs = [
                    run(
                        scenario,
                        args.seconds,
                        package,
                        Path(tmp) / f"{name}-{scenario.workers}-{i}",
                        base,
                    )
                    for i in range(args.repeat)
                ]
                report(scenario, args.seconds, runs)
    print(f"\nbenchmark took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
