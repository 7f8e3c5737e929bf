"""Spending caps: what this run's agent CLI calls cost, shared by every process of the run.

Each attempt's cost is appended to a ledger beside the session (one short line, ``O_APPEND``: the
lines of concurrent workers never interleave); every process sums it before it starts an attempt.
The controller empties it when the run starts, so ``--maestro-budget-usd`` caps one run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..numbers import DOLLARS, NumberError


@dataclass(frozen=True)
class Budget:
    ledger: Path
    session_cap: float | None  # dollars for the whole run; None: no cap

    def reset(self) -> None:
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        self.ledger.write_text("")

    def add(self, phase_id: str, attempt: int, cost: float) -> None:
        if not _cost(cost):
            return
        line = json.dumps({"phase": phase_id, "attempt": attempt, "cost": cost}) + "\n"
        fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def spent(self, phase_id: str | None = None) -> float:
        """Dollars spent in this run, by every phase or by one."""
        try:
            lines = self.ledger.read_text().splitlines()
        except FileNotFoundError:
            return 0.0
        total = 0.0
        for line in lines:
            try:
                entry = json.loads(line)
                if phase_id is None or entry["phase"] == phase_id:
                    total += _cost(entry["cost"])
            except (ValueError, KeyError, TypeError):
                continue  # a line a kill cut short
        return total

    def session_left(self) -> float | None:
        return None if self.session_cap is None else self.session_cap - self.spent()

    def refusal(self, phase_id: str, phase_cap: float | None) -> str | None:
        """Why no new attempt of the phase may start, or None."""
        if self.session_cap is not None and self.spent() >= self.session_cap:
            return (
                f"the run's budget of ${self.session_cap:g} is spent (${self.spent():.4f}; "
                "--maestro-budget-usd): no new attempt starts"
            )
        if phase_cap is not None and self.spent(phase_id) >= phase_cap:
            return (
                f"the phase's budget of ${phase_cap:g} is spent (${self.spent(phase_id):.4f}; "
                "budget_usd in the plan)"
            )
        return None

    def left(self, phase_id: str, phase_cap: float | None) -> float | None:
        """Dollars the next attempt may spend (the CLI's own cap flag), or None: no cap."""
        caps = [self.session_left()]
        if phase_cap is not None:
            caps.append(phase_cap - self.spent(phase_id))
        known = [cap for cap in caps if cap is not None]
        return max(0.0, min(known)) if known else None


def _cost(value: object) -> float:
    """Dollars an entry may count: NaN would make every comparison with a cap false and a
    negative cost would give money back, so such a value counts as nothing."""
    try:
        return float(DOLLARS.check(value))
    except NumberError:
        return 0.0
