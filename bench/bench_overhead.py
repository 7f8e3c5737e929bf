"""Cost per phase beside a plain pytest item running the same command, in one run of this script.

    python bench/bench_overhead.py [--phases 500] [--repeat 5] [--dir DIR] [--profile 25]
        [--package DIR] [--instructions]

Each case runs pytest on ``--phases`` items and on one, each in a fresh temporary directory (the
session state would otherwise resume the phases as completed); the difference per item is what
one item costs, start-up excluded:

- plain: a test file whose tests each run ``subprocess.run(['bash', '-c', 'true'])``;
- maestro: ``--maestro plan.json`` on a plan of independent phases that each run ``true`` (the
  runner starts every command with ``bash -c``);
- maestro chain: the same phases, each blocked by the one before, so every phase waits for the
  report of the last (only under ``-n 2``, where a dependency costs a round trip to the
  controller), against plain pytest without ``-n``: the same commands, one after another.

Each case runs without ``-n`` and with ``-n 2``; the ratio is maestro's cost per phase over plain
pytest's per item (goals: at most 1.5 without ``-n``, 1.7 under ``-n 2``, 2 for a chain hop; a
ratio over its goal is printed as such). The cases take turns within each repetition, so they see
the same machine, and a ratio is taken within a repetition, of runs made side by side: on a
virtual machine whose speed drifts (by a fifth within minutes), the best of each case apart would
pair one's fast moment with the other's slow one. Start-up is the median of a case's runs of
one; every run starts from bytecode compiled once (``bytecode.py``), as a user's does.
Printed: the median over ``--repeat`` repetitions of each figure and of the ratio, and the range
of the ratio.

Printed beside them: one ``bash -c true`` from Python, the floor of both, and what one sync of an
append and of an overwrite cost on the file system of ``--dir`` (default: the system's temporary
directory), where the runs write: pytest-maestro syncs once per phase (its end, before the report;
its start too when it has files to put back), so on a disk whose flushes are slow those dominate;
on a tmpfs they cost nothing. And what creating a file costs there, as many in a new folder as
a run has phases: each phase creates its log (while its command runs, but on the CPU the other
processes wait for), and a plain test creates none. On ext4 without a journal that cost depends
on what was deleted lately: making a file, ext4 then passes over every free inode of the folder's
block group that was freed in the last minute (six while its inode table is not yet written
back), reading each one's deletion time; where many files were just deleted (a test suite's
temporary files, an earlier bench's runs) a new file costs 0.1 to 0.7 ms instead of 0.02. The
bench deletes nothing until it has measured, and says when the file system is of that kind. With
``--profile``, the maestro run without ``-n`` also runs under cProfile and the functions with the
most own time are printed.

Beside the wall times, the CPU seconds per item of pytest and every process it started (its
workers, the commands), taken the same way: where a phase's wall time grew, whether its work did
or its waiting. The goals are on wall time. To compare two versions, run both side by side.

``--instructions`` instead counts the instructions per item that the pytest process itself runs,
plain's and maestro's without ``-n`` (and ``--package``'s), under valgrind's cachegrind: its
commands, the kernel and any waiting are not counted, nor the cyclic garbage collector and the
session file's live rewrite (both come at moments a small change moves: see ``STEADY``), but the
figure moves by well under 1% from one run to the next, where wall times move by a fifth. It
shows whether a change to the Python of the hot path made it cheaper, before the wall times can.

``--package DIR`` runs each maestro case a second time, right after the first, with another
checkout's ``pytest_maestro`` first on PYTHONPATH (rows marked ``(pkg)``): a before and after
measured side by side.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bytecode import environment
from plans import PlanDict

QUIET = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
MAESTRO = ["-m", "pytest", "--maestro", "plan.json", *QUIET]
PLAIN = ["-m", "pytest", "test_plain.py", *QUIET]
# Goals of each row, as issue 21 sets them: maestro's cost per phase over plain pytest's per item.
GOALS = {"no -n": 1.5, "-n 2": 1.7, "chain -n 2": 2.0}
BEFORE = "(pkg)"  # the label of a case run with ``--package``


def phases_plan(count: int, chain: bool = False) -> PlanDict:
    phases = [
        {
            "id": f"p{i}",
            "name": f"Phase {i}",
            "run": ["true"],
            "blocked_by": [f"p{i - 1}"] if chain and i > 1 else [],
        }
        for i in range(1, count + 1)
    ]
    return {"phases": phases}


def plain_tests(count: int) -> str:
    """A test file whose ``count`` tests each do what a phase of ``phases_plan`` runs."""
    tests = [
        f"def test_{i}():\n    subprocess.run(['bash', '-c', 'true'], check=True)\n"
        for i in range(1, count + 1)
    ]
    return "\n".join(["import subprocess\n", *tests])


@dataclass(frozen=True)
class Case:
    label: str
    files: dict[int, dict[str, str]]  # items -> the files of a run with that many
    args: list[str]
    package: Path | None = None  # another checkout whose pytest_maestro runs (``--package``)


def cases(count: int, package: Path | None = None) -> list[Case]:
    def plain(n: int) -> dict[str, str]:
        return {"test_plain.py": plain_tests(n)}

    def plan(n: int, chain: bool = False) -> dict[str, str]:
        return {"plan.json": json.dumps(phases_plan(n, chain))}

    sizes = (1, count)
    made: list[Case] = []
    for workers in ([], ["-n", "2"]):
        suffix = " -n 2" if workers else ""
        made.append(Case(f"plain{suffix}", {n: plain(n) for n in sizes}, PLAIN + workers))
        made.append(Case(f"maestro{suffix}", {n: plan(n) for n in sizes}, MAESTRO + workers))
    chain = {n: plan(n, chain=True) for n in sizes}
    made.append(Case("maestro chain -n 2", chain, [*MAESTRO, "-n", "2"]))
    if package is None:
        return made
    with_twins: list[Case] = []
    for case in made:  # each maestro case again, right after, with the other checkout
        with_twins.append(case)
        if case.label.startswith("maestro"):
            with_twins.append(replace(case, label=f"{case.label} {BEFORE}", package=package))
    return with_twins


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


def run_pytest(
    workdir: Path, args: list[str], prefix: tuple[str, ...] = (), package: Path | None = None
) -> tuple[float, float]:
    """Wall seconds of one run, and the CPU seconds of pytest and all it started (each process
    waited for by its parent counts in its parent's children); a failing run is an error.
    ``package``: the checkout whose pytest_maestro runs, first on PYTHONPATH."""
    env = environment(workdir.parent)
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package), env.get("PYTHONPATH")]))
    # A basetemp of its own: under -n, xdist makes pytest number one in the system's temporary
    # directory, and the run that makes it also deletes the oldest there, however big (a test
    # suite's): seconds that land in whichever case's run it is.
    argv = [sys.executable, *prefix, *args, f"--basetemp={workdir / 'basetemp'}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def bash_floor(count: int = 200) -> float:
    """Mean seconds of one ``bash -c true`` started from Python, as the runner starts commands."""
    started = time.perf_counter()
    for _ in range(count):
        subprocess.run(["bash", "-c", "true"], check=True)
    return (time.perf_counter() - started) / count


def sync_costs(where: Path, count: int = 50) -> tuple[float, float]:
    """Median seconds of a 100-byte write and its fdatasync: appended, and over written bytes."""
    sync = getattr(os, "fdatasync", os.fsync)
    path = where / "sync-cost"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        costs: tuple[list[float], list[float]] = ([], [])
        os.write(fd, bytes(100 * count))
        os.fsync(fd)
        for n in range(count):
            for cost, offset in zip(costs, (os.fstat(fd).st_size, n * 100), strict=True):
                started = time.perf_counter()
                os.pwrite(fd, b"x" * 99 + b"\n", offset)
                sync(fd)
                cost.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(costs[0]), statistics.median(costs[1])


def create_costs(where: Path, count: int, when: str, dirs: int = 2) -> list[float]:
    """Mean seconds of creating a file, ``count`` of them in each of ``dirs`` new directories, as
    a run creates its phases' logs in its logs folder. The files stay until the bench ends: on
    ext4 without a journal, deleting them would make every file made in the next minutes cost
    more (see ``skips_recently_freed``)."""
    costs = []
    for d in range(dirs):
        folder = where / f"create-cost-{when}-{d}" / "logs"
        folder.mkdir(parents=True)
        started = time.perf_counter()
        for n in range(count):
            os.close(os.open(folder / f"{n}.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        costs.append((time.perf_counter() - started) / count)
    return sorted(costs)


def skips_recently_freed(where: Path) -> bool:
    """Whether ``where`` is on ext4 without a journal (Linux). Making a file, ext4 then passes
    over each free inode freed less than a minute ago (``recently_deleted`` in its
    ``find_inode_bit``, there so that a crash cannot leave two files sharing an inode): each
    costs a look-up of its inode table block."""
    try:
        device = os.stat(where).st_dev
        name = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}").resolve().name
        journals = Path("/proc/fs/jbd2")
        return Path(f"/proc/fs/ext4/{name}").is_dir() and not any(journals.glob(f"{name}-*"))
    except OSError:
        return False


Figures = dict[str, list[float]]  # case -> seconds per item, one figure per repetition


def measure(runs: Runs, made: list[Case], count: int, repeat: int) -> tuple[Figures, Figures]:
    """Wall and CPU seconds per item of each case in each repetition: its run of ``count`` items
    less the median of its runs of one. A run of one is start-up, whose outliers (a slow start of
    the xdist workers, a second late) would swing a repetition's figure by a millisecond an item."""
    for case in made:  # untimed: fills the bytecode cache, as a user's first run does
        run_pytest(runs.project(case.files[1]), case.args, (), case.package)
    runs_of: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(repeat):
        for case in made:
            for n in (1, count):
                figures = run_pytest(runs.project(case.files[n]), case.args, (), case.package)
                runs_of.setdefault((case.label, n), []).append(figures)
    wall: Figures = {}
    cpu: Figures = {}
    for case in made:
        ones, many = runs_of[case.label, 1], runs_of[case.label, count]
        for kind, into in ((0, wall), (1, cpu)):
            start = statistics.median(one[kind] for one in ones)
            into[case.label] = [(run[kind] - start) / (count - 1) for run in many]
    return wall, cpu


def ratios(figures: Figures, maestro: str, plain: str) -> list[float]:
    """Maestro's figure over plain's, repetition by repetition: two runs made minutes apart on
    a machine whose speed drifts are not compared, only runs made side by side."""
    return [m / p for m, p in zip(figures[maestro], figures[plain], strict=True)]


def profile(runs: Runs, count: int, top: int) -> None:
    workdir = runs.project({"plan.json": json.dumps(phases_plan(count))})
    wall, _ = run_pytest(workdir, MAESTRO, ("-m", "cProfile", "-o", "out.prof"))
    print(f"\ncProfile of the {count}-phase run ({wall:.2f} s wall under cProfile)")
    pstats.Stats(str(workdir / "out.prof")).sort_stats("tottime").print_stats(top)


VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]


# Loaded into the runs counted under cachegrind. Without the cyclic garbage collector: its
# collections come at allocation thresholds, so a change that allocates a little less moves a
# whole collection out of the run of 60 and the count by 0.3-0.4 M an item either way (young
# collections, what the collector costs an item, are well under 0.1 M). And for maestro without
# the session file's live rewrite: a thread woken by the wall clock, which cachegrind slows
# fiftyfold, so it would render the session in some runs and not in others.
STEADY = "import gc\n\ngc.disable()\n"
NO_LIVE_REWRITE = """\
import pytest_maestro.run.recorder as recorder
assert isinstance(recorder.REFRESH, float), "bench_overhead: the live rewrite's interval moved"
recorder.REFRESH = 1e6
"""


def instructions(runs: Runs, case: Case, sizes: tuple[int, int]) -> float:
    """Instructions per item that the pytest process itself runs (its commands not counted:
    valgrind follows no child), from its runs of the two ``sizes`` under cachegrind, steadied
    (``STEADY``, ``NO_LIVE_REWRITE``)."""
    counts = []
    for n in sizes:
        plain = "plain" in case.label
        files = {"test_plain.py": plain_tests(n)} if plain else {}
        files = files or {"plan.json": json.dumps(phases_plan(n))}
        steady = STEADY if plain else STEADY + NO_LIVE_REWRITE
        workdir = runs.project({**files, "_steady.py": steady})
        env = dict(os.environ, PYTHONHASHSEED="0")
        path = [str(case.package) if case.package else "", str(workdir), env.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
        argv = [*VALGRIND, sys.executable, *case.args, "-p", "_steady"]
        argv.append(f"--basetemp={workdir / 'basetemp'}")
        done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, env=env)
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
        counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) / (sizes[1] - sizes[0])


def count_instructions(runs: Runs, package: Path | None) -> None:
    """Plain pytest's and maestro's instructions per item without ``-n``, and their ratio: the
    Python work of each, counted, where wall times drift with the machine."""
    if shutil.which("valgrind") is None:
        print("\n--instructions: valgrind is not on PATH (apt install valgrind)")
        return
    sizes = (10, 60)
    made = [c for c in cases(sizes[1], package) if "-n" not in c.args]
    counted = {case.label: instructions(runs, case, sizes) for case in made}
    plain = counted.pop("plain")
    print(
        f"\nmillion instructions per item of the pytest process itself, (T{sizes[1]} - "
        f"T{sizes[0]}) / {sizes[1] - sizes[0]}, under cachegrind (its commands not counted)"
    )
    print(f"{'plain':20} {plain / 1e6:7.2f}")
    for label, count in counted.items():
        print(f"{label:20} {count / 1e6:7.2f}  {count / plain:5.2f}x plain's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where the runs write")
    parser.add_argument("--profile", type=int, default=0, metavar="TOP")
    parser.add_argument(
        "--instructions", action="store_true", help="only count instructions per item (valgrind)"
    )
    parser.add_argument(
        "--package", type=Path, default=None, help="another checkout to run beside this one"
    )
    args = parser.parse_args()
    count = args.phases
    if args.instructions:
        with tempfile.TemporaryDirectory(prefix="maestro-overhead-", dir=args.dir) as tmp:
            count_instructions(Runs(Path(tmp)), args.package)
        return
    with tempfile.TemporaryDirectory(prefix="maestro-overhead-", dir=args.dir) as tmp:
        runs = Runs(Path(tmp))
        before, made = sync_costs(Path(tmp)), create_costs(Path(tmp), count, "before")
        wall, cpu = measure(runs, cases(count, args.package), count, args.repeat)
        after = sync_costs(Path(tmp))
        made = sorted([*made, *create_costs(Path(tmp), count, "after")])
        floor = bash_floor()
        print(f"ms per item, (T{count} - T1) / {count - 1}, median of {args.repeat}, in {tmp}")
        print(f"one bash -c true from Python: {floor * 1000:.2f} ms (the floor)")
        print(
            f"one write + fdatasync there, before / after the runs: appended "
            f"{before[0] * 1000:.2f} / {after[0] * 1000:.2f} ms, over written bytes "
            f"{before[1] * 1000:.2f} / {after[1] * 1000:.2f} ms"
        )
        print(
            f"one file created there, the mean of {count} in a new folder as a run creates its "
            f"logs, {len(made)} folders before and after the runs: {made[0] * 1000:.2f} to "
            f"{made[-1] * 1000:.2f} ms (a phase creates one, its log, on its process's CPU; a "
            "plain test creates none)"
        )
        if skips_recently_freed(Path(tmp)):
            print(
                "  this file system is ext4 without a journal: a new file there costs more for "
                "each inode freed near it in the last minute (up to six); run the bench a few "
                "minutes after deleting many files (a test suite's, an earlier bench's)"
            )
        rows: list[tuple[str, str, str]] = []
        for row in (
            ("no -n", "plain", "maestro"),
            ("-n 2", "plain -n 2", "maestro -n 2"),
            ("chain -n 2", "plain", "maestro chain -n 2"),
        ):
            rows.append(row)
            if args.package is not None:
                rows.append((f"{row[0]} {BEFORE}", row[1], f"{row[2]} {BEFORE}"))
        if args.package is not None:
            print(f"{BEFORE}: pytest_maestro of {args.package}, run right after each case")
        for kind, figures in (("wall", wall), ("CPU", cpu)):
            if kind == "CPU":
                print("\nCPU ms per item of pytest and all it started (goals are on wall time)")
            goal_head = "  goal" if kind == "wall" else ""
            print(f"{'':20} {'plain':>7} {'maestro':>8} {'ratio':>6}  {'range':>11}{goal_head}")
            for label, plain, maestro in rows:
                each = ratios(figures, maestro, plain)
                ratio, goal = statistics.median(each), GOALS[label.removesuffix(f" {BEFORE}")]
                verdict = "meets" if ratio <= goal else "OVER its goal"
                print(
                    f"{label:20} {statistics.median(figures[plain]) * 1000:7.2f} "
                    f"{statistics.median(figures[maestro]) * 1000:8.2f} {ratio:5.2f}x  "
                    f"{min(each):4.2f}-{max(each):4.2f}x"
                    + (f"  <= {goal}x: {verdict}" if kind == "wall" else "")
                )
        print("(chain: each phase blocked by the one before, against plain pytest without -n)")
        if args.profile:
            profile(runs, count, args.profile)


if __name__ == "__main__":
    main()
