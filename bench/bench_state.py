"""Mean cost of persisting one phase transition, for a plan of 100 and of 10,000 phases.

    .venv/bin/python bench/bench_state.py [--dir DIR] [--folds N]

Both sessions are open at once and take turns, 20 transitions each, so both see the same
disk (fsync latency drifts with whatever else the machine does). Each runs the same number of
transitions (in_progress, then failed with a result, an error and tokens), as the controller
records them: a start without a sync (the phase's runner holds it on disk), the end durable.
Enough of them to fold the 10,000-phase journal into its Markdown snapshot ``--folds`` times,
so the mean includes the amortised snapshot writes, not only the synced appends. ``--dir`` picks
the file system (default: the current directory; on a tmpfs fsync costs nothing). With
``--refresh SECONDS``, each session also rewrites its snapshot (with the run report in its body)
on that timer in its own thread, as a run does, so the mean includes what that takes from the
thread that records.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_maestro.plan.graph import PlanGraph
from pytest_maestro.plan.model import Files, Phase, Plan
from pytest_maestro.state import PhaseChange, PhaseError, SessionStore, Status, Tokens
from pytest_maestro.state import store as store_module
from pytest_maestro.views.markdown_report import session_report

TARGET = 1.5


def make_plan(size: int) -> Plan:
    """Waves of 10 phases, each depending on one or two phases of the wave before."""
    phases = []
    for i in range(size):
        deps = ((f"p{i - 10}",) + ((f"p{i - 11}",) if i % 10 else ())) if i >= 10 else ()
        files = Files(create=(f"src/mod{i}.py",), modify=(f"tests/test_mod{i}.py",))
        phases.append(Phase(f"p{i}", f"Phase {i}", agent="coder", blocked_by=deps, files=files))
    return Plan(path=Path(f"plans/bench-{size}.yaml"), format="native", phases=tuple(phases))


def transitions_for(size: int, folds: int) -> int:
    bound = max(store_module._MIN_JOURNAL, store_module._JOURNAL_PER_PHASE * size)
    return folds * (bound + 1)


def step(store: SessionStore, plan: Plan, i: int) -> float:
    """One transition of the workload; seconds it took to persist."""
    pid = plan.phases[i % len(plan.phases)].id
    running = store.last_status(pid) is Status.IN_PROGRESS
    start = time.perf_counter()
    if running:
        error = PhaseError(agent="", timestamp="", type="validation", message="pytest -q: exit 1")
        change = PhaseChange(
            result="2 of 5 acceptance checks failed",
            errors=(error,),
            tokens=Tokens(input=1200, output=300),
        )
        store.record(pid, Status.FAILED, change)
    else:
        attempts = i // len(plan.phases) + 1
        change = PhaseChange(attempts=attempts, worker="gw0")
        store.record(pid, Status.IN_PROGRESS, change, durable=False)
    return time.perf_counter() - start


def measure(
    sizes: tuple[int, ...], count: int, where: Path, refresh: float = 0.0
) -> dict[int, list[float]]:
    """Seconds per transition for each plan size, the sizes taking turns by blocks of 20."""
    plans = {size: make_plan(size) for size in sizes}
    costs: dict[int, list[float]] = {size: [] for size in sizes}
    with tempfile.TemporaryDirectory(prefix=".bench-state-", dir=where) as tmp:
        root = Path(tmp)
        report = session_report if refresh else None
        stores = {
            size: SessionStore.open(root / ".maestro", PlanGraph(plans[size]), root, report=report)
            for size in sizes
        }
        if refresh:
            for store in stores.values():
                store.start_refresh(refresh)
        try:
            for block in range(0, count, 20):
                for size in sizes:
                    for i in range(block, min(block + 20, count)):
                        costs[size].append(step(stores[size], plans[size], i))
        finally:
            for store in stores.values():
                store.close()
    return costs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where to write sessions")
    parser.add_argument("--folds", type=int, default=1, help="folds of the larger snapshot")
    parser.add_argument("--refresh", type=float, default=0.0, help="live snapshot every N s")
    args = parser.parse_args()
    sizes = (100, 10_000)
    count = transitions_for(max(sizes), args.folds)
    costs = measure(sizes, count, args.dir, args.refresh)
    means = {size: statistics.fmean(costs[size]) for size in sizes}
    for size in sizes:
        print(
            f"{size:>6} phases: {means[size] * 1e6:8.1f} us per transition "
            f"(mean of {count}; median {statistics.median(costs[size]) * 1e6:.1f} us; "
            f"worst {max(costs[size]) * 1e3:.1f} ms)"
        )
    ratio = means[10_000] / means[100]
    verdict = "met" if ratio <= TARGET else "missed"
    print(f"ratio 10,000 / 100: {ratio:.2f}x (target {TARGET}x: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
