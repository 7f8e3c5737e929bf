"""Start-up: from pytest's start to the first phase running, beside plain xdist, in one run.

    python bench/bench_startup.py [--workers 8 2 0] [--repeat 5] [--no-pyc] [--modules]

Two cases, each in a fresh temporary directory per run (the session state would otherwise resume
the phases as completed), for each ``--workers`` count (``-n N``; 0 runs without ``-n``):

- plain: a test file of 8 tests, run with ``-p no:maestro`` (the plugin is installed here, and
  an installed plugin is imported by every process even when it is dormant): xdist's own cost;
- maestro: ``--maestro plan.json`` on a plan of 8 independent phases.

Every test and every phase runs the same command, ``bash -c 'date +%s.%N >> starts'`` (the runner
starts a phase's commands with ``bash -c``; a test starts it with ``subprocess.run``), so each one
leaves the wall-clock time it started at. A run's *first* figure is the earliest of those less the
wall-clock time taken just before pytest was spawned: Python starting, pytest and every plugin
importing and configuring, xdist's workers starting and collecting, the scheduler sending the
first item, and what runs before the item's command. *wall* is the whole run, until pytest exits;
*cpu* the CPU seconds of pytest and its workers (and the items' commands), which on a machine with
fewer cores than workers is what the workers' start-up waits for.
Each figure is the best of ``--repeat``; the cases take turns within each repetition, so they see
the same machine.

Bytecode: an installed package has its modules compiled, and pytest caches the assertion-rewritten
form of a plugin's modules beside them; a process that may not write caches
(``PYTHONDONTWRITEBYTECODE``) compiles every module it imports, in every worker, which costs far
more than importing it. By default the runs write their caches under the temporary directory
(``PYTHONPYCACHEPREFIX``), and one untimed run of each case fills them first, as a user's second
run finds them; ``--no-pyc`` makes every process compile from source instead.

Goal, printed beside the figure and not asserted: maestro's first phase starts at most 0.2 s after
plain xdist's first test, under ``-n 8``. Also printed: what importing the plugin alone costs a
fresh interpreter (every xdist worker pays it), best of ``--repeat``; with ``--modules``, the
top-level packages a maestro worker has imported by the time it collected that a plain worker has
not (read from a conftest.py written for that run only).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import astuple, dataclass
from pathlib import Path

from bytecode import environment

ITEMS = 8
GOAL_S = 0.2
GOAL_WORKERS = 8
QUIET = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
# What every test and every phase runs: its start, in seconds since the epoch, appended to a file.
STAMP = "date +%s.%N >> starts"
# With --modules: each worker writes the top-level packages it has imported once it collected.
MODULES_CONFTEST = """\
import os, sys

def pytest_collection_finish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        names = sorted({name.partition(".")[0] for name in sys.modules})
        with open(f"modules-{worker}", "w") as out:
            out.write("\\n".join(names))
"""


def plan(count: int) -> str:
    phases = [{"id": f"p{i}", "name": f"Phase {i}", "run": [STAMP]} for i in range(1, count + 1)]
    return json.dumps({"phases": phases})


def plain_tests(count: int) -> str:
    test = "def test_{}():\n    subprocess.run(['bash', '-c', {!r}], check=True)\n"
    return "\n".join(["import subprocess\n", *(test.format(i, STAMP) for i in range(count))])


@dataclass(frozen=True)
class Case:
    label: str
    files: dict[str, str]
    args: list[str]


def cases(workers: int) -> list[Case]:
    xdist = ["-n", str(workers)] if workers else []
    plain = ["-m", "pytest", "test_plain.py", "-p", "no:maestro", *QUIET, *xdist]
    maestro = ["-m", "pytest", "--maestro", "plan.json", *QUIET, *xdist]
    return [
        Case("plain", {"test_plain.py": plain_tests(ITEMS)}, plain),
        Case("maestro", {"plan.json": plan(ITEMS)}, maestro),
    ]


@dataclass(frozen=True)
class Timing:
    first: float  # seconds from the spawn to the first item's command
    wall: float  # seconds from the spawn to pytest's exit
    cpu: float  # CPU seconds of pytest and every process it waited for (its workers)

    def best(self, other: Timing) -> Timing:
        """Each figure at its best of the two runs."""
        return Timing(*(min(a, b) for a, b in zip(astuple(self), astuple(other), strict=True)))


class Runs:
    """Fresh project directories under one temporary base, each with the files of one run."""

    def __init__(self, base: Path, modules: bool) -> None:
        self.base = base
        self.made = 0
        self.modules = modules

    def project(self, files: dict[str, str]) -> Path:
        """A ``pytest.ini`` pins pytest's rootdir, and so the project root, to the directory."""
        self.made += 1
        workdir = self.base / f"run{self.made}"
        workdir.mkdir()
        extra = {"conftest.py": MODULES_CONFTEST} if self.modules else {}
        for name, text in {"pytest.ini": "[pytest]\n", **extra, **files}.items():
            (workdir / name).write_text(text, encoding="utf-8")
        return workdir


def run_once(workdir: Path, args: list[str], env: dict[str, str]) -> Timing:
    """One run's figures; a failing run, or one whose items did not all start, is an error."""
    argv = [sys.executable, *args]
    spawned = time.time()  # the wall clock, which the items' `date` reads too
    started = time.perf_counter()
    cpu_before = children_cpu()
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    cpu = children_cpu() - cpu_before
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}")
    stamps = [float(line) for line in (workdir / "starts").read_text().split()]
    if len(stamps) != ITEMS:
        raise SystemExit(f"{' '.join(argv)} started {len(stamps)} items, not {ITEMS}")
    return Timing(first=min(stamps) - spawned, wall=wall, cpu=cpu)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def import_cost(repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """Best wall seconds of a fresh interpreter importing pytest, and pytest and the plugin."""
    best = [float("inf"), float("inf")]
    for _ in range(repeat + 1):  # the first fills the bytecode caches
        for n, code in enumerate(("import pytest", "import pytest, pytest_maestro.plugin")):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            best[n] = min(best[n], time.perf_counter() - started)
    return best[0], best[1]


def worker_modules(workdir: Path) -> set[str]:
    return set((workdir / "modules-gw0").read_text().split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 2, 0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-pyc", action="store_true", help="compile every module every time")
    parser.add_argument("--modules", action="store_true", help="list what a maestro worker adds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="maestro-startup-") as tmp:
        runs = Runs(Path(tmp), args.modules)
        env = environment(Path(tmp), not args.no_pyc)
        load_before = os.getloadavg()[0]
        for case in cases(max(args.workers)):
            run_once(runs.project(case.files), case.args, env)  # untimed: fills the caches
        best: dict[tuple[int, str], Timing] = {}
        last: dict[str, Path] = {}
        for _ in range(args.repeat):
            for workers in args.workers:
                for case in cases(workers):
                    workdir = runs.project(case.files)
                    timing = run_once(workdir, case.args, env)
                    if workers:
                        last[case.label] = workdir
                    was = best.get((workers, case.label), timing)
                    best[workers, case.label] = was.best(timing)
        bare, plugin = import_cost(args.repeat, env)
        compiled = "compiled from source by every process" if args.no_pyc else "bytecode cached"
        print(
            f"seconds, best of {args.repeat}; {ITEMS} trivial tests against {ITEMS} phases; "
            f"{compiled}"
        )
        # Other work on the machine slows the workers' start most: figures taken under a load
        # above the cores' count say more about that load than about either case. (Taken before
        # the runs: during them, the load is mostly theirs.)
        print(f"load average before the runs: {load_before:.2f} on {os.cpu_count()} cores")
        print(f"{'':14} {'plain':>6} {'maestro':>8} {'added':>6}")
        for workers in args.workers:
            plain, maestro = best[workers, "plain"], best[workers, "maestro"]
            label = f"-n {workers}" if workers else "no -n"
            for figure in ("first", "wall", "cpu"):
                mine, theirs = getattr(maestro, figure), getattr(plain, figure)
                verdict = ""
                if workers == GOAL_WORKERS and figure == "first":
                    over = ": OVER THE GOAL" if mine - theirs > GOAL_S else ""
                    verdict = f"  (goal <= +{GOAL_S:g} s{over})"
                print(
                    f"{label:8} {figure:5} {theirs:6.2f} {mine:8.2f} {mine - theirs:+6.2f}{verdict}"
                )
                label = ""
        print(
            f"import pytest in a fresh interpreter: {bare:.3f} s; with pytest_maestro.plugin: "
            f"{plugin:.3f} s ({(plugin - bare) * 1000:+.0f} ms, paid by every process)"
        )
        if args.modules and last:
            added_modules = worker_modules(last["maestro"]) - worker_modules(last["plain"])
            print("top-level packages a maestro worker imported that a plain one did not:")
            print("  " + " ".join(sorted(added_modules)))


if __name__ == "__main__":
    main()
