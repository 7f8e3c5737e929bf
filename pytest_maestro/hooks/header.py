"""The lines ``pytest --maestro`` adds to pytest's header: what the plan is and what this run will
do with it, before anything runs. Everything comes from the plan's graph (the answers
``--maestro-analyze`` gives) and what the session state says of earlier runs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..files.declared import shown
from ..run.orchestrator import Orchestrator
from ..texts import duration_text

PATH_SHOWN = 6  # phases of a critical path named in the header; the rest are counted


def header_lines(maestro: Orchestrator, cwd: Path, workers: int) -> list[str]:
    """``workers``: this run's ``-n`` (0 without xdist)."""
    plan, graph, run = maestro.plan, maestro.graph, maestro.run
    total = len(plan.phases)
    done = set(plan.done_ids)
    earlier = len(run.earlier.keys() - done)
    waves = len(graph.waves())
    counts = f"{_count(total, 'phase')} in {_count(waves, 'wave')}"
    known = [f"{len(done)} done in the plan"] if done else []
    known += [f"{earlier} completed in an earlier run"] if earlier else []
    if known:
        counts += f": {', '.join(known)}, {total - len(done) - earlier} to run"
    runtimes = Counter(maestro.resolve.runtime_name(phase) or "none" for phase in plan.phases)
    root = shown(maestro.root, cwd.resolve())
    lines = [
        f"maestro: {shown(plan.path, cwd)} ({plan.format}), root {root}",
        f"maestro: {counts}",
        f"maestro: critical path {_critical_path(maestro)}",
        f"maestro: {_parallel(maestro, workers)}",
        "maestro: runtimes: " + ", ".join(f"{name} {n}" for name, n in runtimes.most_common()),
    ]
    reviewers = (maestro.resolve.reviewers.reviewer(p) for p in plan.phases if not p.done)
    reviews = Counter((r.mode, r.name) for r in reviewers if r is not None)
    if reviews:
        said = (f"{mode} by {name} {n}" for (mode, name), n in reviews.most_common())
        lines.append("maestro: reviews: " + ", ".join(said))
    final = maestro.resolve.reviewers.final_reviewer(plan.phases)
    if maestro.settings.final_review and final is not None:
        model = f" on model {final.model}" if final.model else ""
        lines.append(f"maestro: final review by {final.name}{model}, once every phase passed")
    if maestro.life.recorder is not None:  # the session is open: this run records it there
        lines.append(f"maestro: session {shown(maestro.paths.snapshot, cwd)}")
    return lines


def _critical_path(maestro: Orchestrator) -> str:
    """The longest path by expected duration (the plan's estimates, else earlier runs' times),
    as the run orders phases."""
    plan, run = maestro.plan, maestro.run
    estimated = {p.id for p in plan.phases if p.estimate is not None}
    measured = {p: s for p, s in run.durations.items() if p not in estimated}
    path = maestro.graph.critical_path(measured)
    names = path if len(path) <= PATH_SHOWN else [*path[:3], "…", *path[-2:]]
    known = [p for p in path if p in estimated or p in measured]
    if not known:
        cost = f"{_count(len(path), 'phase')}, no estimates yet"
    else:
        seconds = sum(run.duration(p) for p in path)
        cost = f"{_count(len(path), 'phase')}, ~{duration_text(seconds)}"
        if len(known) < len(path):
            cost += f"; {len(path) - len(known)} without an estimate, counted as 1s each"
    return f"{' -> '.join(names)} ({cost})"


def _parallel(maestro: Orchestrator, workers: int) -> str:
    profile = maestro.graph.profile()
    best = maestro.graph.recommended_workers()
    if profile.parallel_eligible == 0:
        return "no phases can run side by side; -n would not help"
    eligible = f"parallel-eligible: {profile.parallel_eligible} of {profile.total_phases} phases"
    this_run = f"this run -n {workers}" if workers else "this run without -n"
    return f"{eligible}; -n {best} would use them ({this_run})"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
