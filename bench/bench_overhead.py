"""Orchestration overhead per phase, in one process: a plan of many phases that run ``true``.

    python bench/bench_overhead.py [--phases 500] [--repeat 3] [--profile 25]

Runs ``python -m pytest --maestro plan.json -q -p no:cacheprovider -p no:hypothesispytest`` on a
plan of ``--phases`` independent phases and on a plan of one, each in a fresh temporary directory
(the session state would otherwise resume the phases as completed), and prints the difference per
phase: what pytest-maestro costs around each phase, start-up excluded. Printed beside it, for
reference: one ``bash -c true`` (the runner starts every command with bash, so that is the floor),
and the same difference for plain pytest on a file of tests that each run ``bash -c true``
(pytest's own cost per item plus the floor). With ``--profile``, the big plan also runs under
cProfile and the functions with the most own time are printed.

Prints figures; asserts nothing. Wall times are the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from plans import PlanDict

QUIET = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
MAESTRO = ["-m", "pytest", "--maestro", "plan.json", *QUIET]
PLAIN = ["-m", "pytest", "test_plain.py", *QUIET]


def independent_plan(count: int, command: str = "true") -> PlanDict:
    phases = [{"id": f"p{i}", "name": f"Phase {i}", "run": [command]} for i in range(1, count + 1)]
    return {"phases": phases}


def plain_tests(count: int) -> str:
    """A test file whose ``count`` tests each do what a phase of ``independent_plan`` runs."""
    tests = [
        f"def test_{i}():\n    subprocess.run(['bash', '-c', 'true'], check=True)\n"
        for i in range(1, count + 1)
    ]
    return "\n".join(["import subprocess\n", *tests])


class Runs:
    """Fresh project directories under one temporary base, each with the file(s) of one run."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.made = 0

    def project(self, files: dict[str, str]) -> Path:
        """A ``pytest.ini`` pins pytest's rootdir, and so the project root, to the directory."""
        self.made += 1
        workdir = self.base / f"run{self.made}"
        workdir.mkdir()
        for name, text in {"pytest.ini": "[pytest]\n", **files}.items():
            (workdir / name).write_text(text, encoding="utf-8")
        return workdir

    def best(self, files: dict[str, str], args: list[str], repeat: int) -> float:
        return min(run_pytest(self.project(files), args) for _ in range(repeat))


def run_pytest(workdir: Path, args: list[str], prefix: tuple[str, ...] = ()) -> float:
    """Wall seconds of one run; a failing run is an error, not a figure."""
    argv = [sys.executable, *prefix, *args]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}")
    return wall


def bash_floor(count: int = 200) -> float:
    """Mean seconds of one ``bash -c true`` started from Python, as the runner starts commands."""
    started = time.perf_counter()
    for _ in range(count):
        subprocess.run(["bash", "-c", "true"], check=True)
    return (time.perf_counter() - started) / count


def plan_files(count: int) -> dict[str, str]:
    return {"plan.json": json.dumps(independent_plan(count))}


def profile(runs: Runs, count: int, top: int) -> None:
    workdir = runs.project(plan_files(count))
    wall = run_pytest(workdir, MAESTRO, ("-m", "cProfile", "-o", "out.prof"))
    print(f"\ncProfile of the {count}-phase run ({wall:.2f} s wall under cProfile)")
    pstats.Stats(str(workdir / "out.prof")).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, metavar="TOP")
    args = parser.parse_args()
    count, repeat = args.phases, args.repeat
    with tempfile.TemporaryDirectory(prefix="maestro-overhead-") as tmp:
        runs = Runs(Path(tmp))
        one = runs.best(plan_files(1), MAESTRO, repeat)
        many = runs.best(plan_files(count), MAESTRO, repeat)
        plain_one = runs.best({"test_plain.py": plain_tests(1)}, PLAIN, repeat)
        plain_many = runs.best({"test_plain.py": plain_tests(count)}, PLAIN, repeat)
        floor = bash_floor()
        per_phase = (many - one) / (count - 1)
        per_test = (plain_many - plain_one) / (count - 1)
        print(f"best of {repeat}: 1 phase {one:.3f} s, {count} phases {many:.3f} s")
        print(
            f"per phase:                  {per_phase * 1000:6.2f} ms  (T{count} - T1) / {count - 1}"
        )
        print(f"one bash -c true:           {floor * 1000:6.2f} ms  (the floor)")
        print(f"per phase above the floor:  {(per_phase - floor) * 1000:6.2f} ms")
        print(f"plain pytest, per test:     {per_test * 1000:6.2f} ms  (each runs bash -c true)")
        if args.profile:
            profile(runs, count, args.profile)


if __name__ == "__main__":
    main()
