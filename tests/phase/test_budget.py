"""The spend ledger that caps a run's and a phase's agent costs."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from pytest_maestro.phase.budget import Budget


def test_costs_add_up_per_run_and_per_phase(tmp_path: Path) -> None:
    budget = Budget(tmp_path / "run.spend", session_cap=1.0)
    budget.reset()
    budget.add("a", 1, 0.25)
    budget.add("b", 1, 0.5)
    budget.add("a", 2, 0.0)  # free attempts leave no line
    assert budget.spent() == 0.75
    assert budget.spent("a") == 0.25
    assert budget.refusal("a", phase_cap=None) is None
    assert budget.refusal("a", phase_cap=0.25) == (
        "the phase's budget of $0.25 is spent ($0.2500; budget_usd in the plan)"
    )
    assert budget.left("b", phase_cap=None) == 0.25
    assert round(budget.left("b", phase_cap=0.6) or 0, 6) == 0.1


def test_the_run_cap_refuses_every_phase_once_spent(tmp_path: Path) -> None:
    budget = Budget(tmp_path / "run.spend", session_cap=0.5)
    budget.reset()
    budget.add("a", 1, 0.5)
    refusal = budget.refusal("b", phase_cap=None)
    assert refusal is not None and "run's budget of $0.5 is spent" in refusal
    assert budget.left("b", None) == 0.0


def test_no_cap_refuses_nothing_and_a_reset_forgets(tmp_path: Path) -> None:
    budget = Budget(tmp_path / "run.spend", session_cap=None)
    budget.add("a", 1, 100.0)
    assert budget.refusal("a", None) is None and budget.left("a", None) is None
    budget.reset()
    assert budget.spent() == 0.0


def test_a_torn_line_is_skipped(tmp_path: Path) -> None:
    ledger = tmp_path / "run.spend"
    ledger.write_text('{"phase": "a", "attempt": 1, "cost": 0.5}\n{"phase": "b", "cos')
    assert Budget(ledger, None).spent() == 0.5


def _spend(ledger: str) -> None:
    budget = Budget(Path(ledger), None)
    for n in range(200):
        budget.add("p", n, 0.01)


def test_concurrent_writers_lose_no_line(tmp_path: Path) -> None:
    ledger = tmp_path / "run.spend"
    workers = [multiprocessing.Process(target=_spend, args=(str(ledger),)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(ledger.read_text().splitlines()) == 800
    assert round(Budget(ledger, None).spent(), 6) == 8.0


def test_a_ledger_line_that_is_not_a_cost_never_disables_or_lowers_the_cap(
    tmp_path: Path,
) -> None:
    """NaN would make every comparison with the cap false, a negative cost would give money
    back: the ledger is a file, so such lines are not costs and count for nothing."""
    budget = Budget(tmp_path / "run.spend", session_cap=1.0)
    budget.reset()
    budget.add("a", 1, 0.75)
    budget.add("a", 2, float("nan"))
    budget.add("a", 3, float("inf"))
    with budget.ledger.open("a") as ledger:
        ledger.write('{"phase": "a", "attempt": 4, "cost": -1000}\n')
        ledger.write('{"phase": "a", "attempt": 5, "cost": NaN}\n')
        ledger.write('{"phase": "a", "attempt": 6, "cost": "0.5"}\n')
    assert budget.spent() == 0.75
    budget.add("b", 1, 0.25)
    assert budget.refusal("b", phase_cap=None) is not None
