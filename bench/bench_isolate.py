"""Cost of an isolated phase (``--maestro-isolate=worktree``) on a repository of 2,000 files.

    python bench/bench_isolate.py [--files 2000] [--phases 10] [--repeat 3] [--dir DIR]

A git repository of ``--files`` files (200 directories of ten, a few hundred bytes each) is made
once, committed, with a few uncommitted edits and untracked files as a user has them. Then:

- end to end: pytest runs a plan of ``--phases`` independent phases, each writing the one file it
  declares, without ``-n``, isolated and not, on a fresh copy of the state each time; the
  difference per phase is what isolation costs one phase (goal: under 300 ms), and the
  difference of the runs' totals less that is the run's own cost (the base snapshot, the
  cleanup);
- step by step, in this process: the base snapshot (once per run), the first worktree made and
  the last removed (once per process: a process's phases reuse its worktree), and per phase the
  worktree moved to the phase's start, cleaned and checked, the tree the phase left
  snapshotted, its result merged back, and the worktree released.

Each figure is the best of ``--repeat``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_overhead import QUIET, run_pytest

from pytest_maestro.isolation.merge import merge_back
from pytest_maestro.isolation.worktree import Isolation
from pytest_maestro.plan import Files, Phase
from pytest_maestro.state import SessionPaths

GOAL_MS = 300.0


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def make_repo(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "Bench")
    for n in range(files):
        path = root / f"pkg{n // 10:03d}" / f"mod{n % 10}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# module {n}\n" + "VALUE = 1\n" * 30)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / ".gitignore").write_text(".maestro/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    for n in range(5):  # what a user has in the work tree when a run starts
        (root / f"pkg{n:03d}" / "mod0.py").write_text("# edited, not committed\n")
        (root / f"notes{n}.txt").write_text("untracked\n")


def plan(phases: int) -> dict[str, object]:
    return {
        "phases": [
            {
                "id": f"p{n}",
                "run": [f"mkdir -p out && echo {n} > out/p{n}.txt"],
                "files": {"create": [f"out/p{n}.txt"]},
            }
            for n in range(phases)
        ]
    }


def reset(root: Path) -> None:
    """The repository as before a run: no state, no outputs, no refs of earlier runs."""
    shutil.rmtree(root / ".maestro", ignore_errors=True)
    shutil.rmtree(root / "out", ignore_errors=True)
    subprocess.run(
        "git for-each-ref --format='delete %(refname)' refs/maestro/ | git update-ref --stdin",
        shell=True,
        cwd=root,
        check=True,
    )


def run(root: Path, isolated: bool) -> float:
    reset(root)
    args = ["-m", "pytest", "--maestro", "plan.json", *QUIET]
    return run_pytest(root, [*args, "--maestro-isolate=worktree"] if isolated else args)


def best(repeat: int, measure: Callable[[], float]) -> float:
    return min(measure() for _ in range(repeat))


PER_PHASE = ("worktree reused and checked", "tree snapshot", "merge-back", "release")


def steps(root: Path, phases: int) -> dict[str, float]:
    """Seconds per step: per phase, the mean over ``phases`` phases after the first; once per
    run or per process, as measured."""
    reset(root)
    iso = Isolation.for_root(root, SessionPaths(root / ".maestro", "bench-00000000"))
    (root / ".maestro").mkdir()
    (root / ".maestro" / ".gitignore").write_text("*\n")
    clock = time.perf_counter
    at = clock()
    iso.start()
    took = {"base snapshot (once per run)": clock() - at}
    totals = dict.fromkeys(PER_PHASE, 0.0)
    for n in range(phases):
        phase = Phase(f"p{n}", f"p{n}", files=Files(create=(f"out/p{n}.txt",)))
        at = clock()
        space = iso.open(phase.id)
        if n == 0:
            took["first worktree (once per process)"] = clock() - at
        else:
            totals["worktree reused and checked"] += clock() - at
        (space.root / "out").mkdir(exist_ok=True)
        (space.root / "out" / f"p{n}.txt").write_text(f"{n}\n")
        at = clock()
        tree = space.snapshot(phase.files.all())
        totals["tree snapshot"] += clock() - at
        at = clock()
        done = merge_back(
            space, phase, tree, root / ".maestro" / "pre.tar", root / ".maestro" / "r"
        )
        assert done.refused is None, done.refused
        totals["merge-back"] += clock() - at
        at = clock()
        space.release()
        totals["release"] += clock() - at
    at = clock()
    iso.close()
    took["removal (once per process)"] = clock() - at
    iso.finish()
    took.update({name: total / max(phases - 1, 1) for name, total in totals.items()})
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--phases", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as base:
        root = Path(base) / "repo"
        make_repo(root, args.files)
        (root / "plan.json").write_text(json.dumps(plan(args.phases)))
        print(f"repository: {args.files} files, git {_git_version()}, {os.cpu_count()} cpus")
        plain = best(args.repeat, lambda: run(root, isolated=False))
        isolated = best(args.repeat, lambda: run(root, isolated=True))
        print(f"end to end, {args.phases} phases without -n (best of {args.repeat}):")
        print(f"  not isolated  {plain * 1000:8.0f} ms")
        print(f"  isolated      {isolated * 1000:8.0f} ms")
        per_phase = (isolated - plain) / args.phases * 1000
        verdict = "within" if per_phase < GOAL_MS else "OVER"
        print(f"  per isolated phase, above a plain one: {per_phase:6.0f} ms")
        print(f"  ({verdict} the goal of {GOAL_MS:.0f} ms; the run's own cost is included)")
        measured = [steps(root, args.phases) for _ in range(args.repeat)]
        print(f"step by step, in-process (best of {args.repeat}):")
        for name in measured[0]:
            print(f"  {name:<36} {min(m[name] for m in measured) * 1000:7.1f} ms")
        steady = sum(min(m[name] for m in measured) for name in PER_PHASE) * 1000
        print(f"  {'per phase once the worktree exists':<36} {steady:7.1f} ms")


def _git_version() -> str:
    out = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout
    return out.split()[-1] if out else "?"


if __name__ == "__main__":
    main()
