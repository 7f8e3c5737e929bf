"""Cost of a remote phase (``--tx popen//chdir=DIR``) beside an isolated local one, on a
repository of 2,000 files, and the bytes each remote phase moves.

    python bench/bench_remote.py [--files 2000] [--phases 10] [--repeat 3] [--dir DIR]

The repository of ``bench_isolate.py`` (``--files`` files, committed, a few uncommitted edits and
untracked files) is made once. Then:

- end to end: pytest runs a plan of ``--phases`` independent phases, each writing the one file it
  declares, on one xdist worker: local and isolated (``-n 1 --maestro-isolate=worktree``), and
  remote (``-d --tx popen//chdir=DIR``, a directory standing for another host); and the same
  with one phase. The difference of the differences, per phase, is what a remote phase adds
  (goal: under 300 ms, what an isolated phase may cost over a plain one); what the one-phase
  runs differ by, less that, is the run's own remote cost (the worker's repository made, the
  first bundle with the whole base);
- step by step, in this process, the controller's side and a worker's side of each phase as
  the run makes them: the bundle out (``Shipper.start``), the worker's checkout of it
  (``Home.open``), the phase's diff there (``Space.result``), its report's facts encoded and
  decoded, and the diff applied and merged back on the controller (``bring_back``); beside the
  isolated local phase's own steps (``bench_isolate.steps``);
- bytes per phase: the first bundle (the whole base, without history), the next ones (what the
  merged results changed since: goal, proportional to the change, so the same on a repository
  of a tenth the files), and the diff and logs back in the report.

Each figure is the best of ``--repeat``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench_isolate import _git_version, best, make_repo, plan, reset, steps
from bench_overhead import QUIET, run_pytest

from pytest_maestro.isolation.worktree import Isolation
from pytest_maestro.plan import Files, Phase
from pytest_maestro.remote.back import bring_back
from pytest_maestro.remote.home import Home
from pytest_maestro.remote.ship import Shipper
from pytest_maestro.remote.wire import Result, Start
from pytest_maestro.state import SessionPaths

GOAL_MS = 300.0
# An incremental bundle is proportional to the change when it does not grow with the
# repository: on a tenth of the files it is the same size, give or take git's packing.
SAME_SIZE = 1.25
REMOTE_STEPS = ("bundle out", "checkout there", "diff there", "report facts", "apply and merge")


def run(root: Path, host: Path | None, phases: int) -> float:
    reset(root)
    (root / "plan.json").write_text(json.dumps(plan(phases)))
    shutil.rmtree(host or root / "none", ignore_errors=True)
    args = ["-m", "pytest", "--maestro", "plan.json", *QUIET]
    if host is None:
        return run_pytest(root, [*args, "-n", "1", "--maestro-isolate=worktree"])
    host.mkdir()
    return run_pytest(root, [*args, "-d", "--tx", f"popen//chdir={host}"])


def remote_steps(root: Path, home: Path, phases: int) -> tuple[dict[str, float], list[int]]:
    """Seconds per step, the mean over ``phases`` phases after the first (which sends the whole
    base); and the bytes each phase moved: its bundle, then its diff and logs back."""
    reset(root)
    paths = SessionPaths(root / ".maestro", "bench-00000000")
    (root / ".maestro").mkdir()
    (root / ".maestro" / ".gitignore").write_text("*\n")
    iso = Isolation.for_root(root, paths)
    iso.start()
    shipper, worker = Shipper(iso), Home(home)
    worker.clear()
    totals = dict.fromkeys(REMOTE_STEPS, 0.0)
    moved: list[int] = []
    clock = time.perf_counter
    for n in range(phases):
        phase = Phase(f"p{n}", f"p{n}", files=Files(create=(f"out/p{n}.txt",)))
        took, at = {}, clock()
        start = Start.from_wire(shipper.start(phase.id, "gw0").to_wire())
        took["bundle out"], at = clock() - at, clock()
        space = worker.open(start)
        took["checkout there"] = clock() - at
        (space.root / "out").mkdir(exist_ok=True)
        (space.root / "out" / f"p{n}.txt").write_text(f"{n}\n")
        logs = {f"p{n}.log": b"$ echo\n" * 20}  # a phase's log comes back with it
        at = clock()
        result = space.result(phase, 64 * 1024 * 1024, logs)
        took["diff there"], at = clock() - at, clock()
        facts = json.dumps(result.to_dict())  # as its report carries it
        back = Result.from_mapping(json.loads(facts))
        took["report facts"], at = clock() - at, clock()
        sent = shipper.sent.pop(phase.id)
        shipper.confirm("gw0", sent.commit)
        brought = bring_back(iso, phase, sent, back, paths, ok=True)
        assert brought.refused is None, brought.refused
        took["apply and merge"] = clock() - at
        moved += [len(start.bundle), len(facts)]
        if n:
            for name, seconds in took.items():
                totals[name] += seconds
    iso.close()
    iso.finish()
    shipper.finish()
    return {name: total / max(phases - 1, 1) for name, total in totals.items()}, moved


def figures(base: Path, files: int, phases: int, repeat: int) -> None:
    root = base / f"repo{files}"
    make_repo(root, files)
    took = {}
    for count in (1, phases):
        for host in (None, base / "host"):
            took[count, host] = best(repeat, lambda: run(root, host, count))  # noqa: B023
    print(f"end to end, on one worker (best of {repeat}):")
    for (count, host), seconds in took.items():
        kind = "local, isolated" if host is None else "remote"
        print(f"  {kind:<16} {count:3d} phase(s) {seconds * 1000:8.0f} ms")
    one = took[1, base / "host"] - took[1, None]
    many = took[phases, base / "host"] - took[phases, None]
    per_phase = (many - one) / max(phases - 1, 1) * 1000
    verdict = "within" if per_phase < GOAL_MS else "OVER"
    print(f"  added per remote phase: {per_phase:6.0f} ms ({verdict} the goal of {GOAL_MS:.0f} ms)")
    print(f"  added once per run:     {one * 1000 - per_phase:6.0f} ms")
    measured = [remote_steps(root, base / "home", phases) for _ in range(repeat)]
    isolated = [steps(root, phases) for _ in range(repeat)]
    print(f"step by step, in-process, per phase after the first (best of {repeat}):")
    remote_total = 0.0
    for name in REMOTE_STEPS:
        seconds = min(m[0][name] for m in measured)
        remote_total += seconds
        print(f"  remote: {name:<28} {seconds * 1000:7.1f} ms")
    local_total = sum(
        min(m[name] for m in isolated)
        for name in ("worktree reused and checked", "tree snapshot", "merge-back", "release")
    )
    print(f"  remote, in all                       {remote_total * 1000:7.1f} ms")
    print(f"  isolated local, in all               {local_total * 1000:7.1f} ms")
    extra = (remote_total - local_total) * 1000
    verdict = "within" if extra < GOAL_MS else "OVER"
    print(f"  added per remote phase: {extra:6.1f} ms ({verdict} the goal of {GOAL_MS:.0f} ms)")
    moved = measured[0][1]
    print("bytes per phase:")
    print(f"  first bundle (the whole base)        {moved[0]:9d}")
    later = moved[2::2]
    print(f"  next bundles (one file changed)      {min(later):9d} to {max(later)}")
    print(f"  diff and logs back, in the report    {min(moved[3::2]):9d} to {max(moved[3::2])}")


def incremental(base: Path, files: int) -> int:
    """The largest incremental bundle of five phases on a repository of ``files`` files."""
    root = base / f"small{files}"
    make_repo(root, files)
    _, moved = remote_steps(root, base / "home-small", 5)
    return max(moved[2::2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--phases", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        base = Path(name)
        print(f"repository: {args.files} files, git {_git_version()}, {os.cpu_count()} cpus")
        figures(base, args.files, args.phases, args.repeat)
        large = incremental(base, args.files)
        small = incremental(base, max(args.files // 10, 10))
        ratio = large / max(small, 1)
        verdict = "proportional to the change" if ratio < SAME_SIZE else "GROWS with the repository"
        print(
            f"  next bundle on {args.files} files: {large} bytes; on {max(args.files // 10, 10)}: "
            f"{small} bytes ({verdict}: goal, under {SAME_SIZE:g} times)"
        )


if __name__ == "__main__":
    main()
