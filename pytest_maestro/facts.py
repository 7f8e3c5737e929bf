"""What a report tells the controller about a phase: the facts that travel with xdist reports."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from .collect import OUTCOME_KEY, PhaseItem
from .recorder import EARLIER

# Why a phase did not run, as the skip reason shows it and the session state records it.
STATUS_WORDS = {"failed": "failed", "blocked": "was blocked", "skipped": "was skipped"}
NOT_SELECTED = "was not selected and has not completed"


def skip_facts(phase_id: str, reason: str) -> dict[str, Any]:
    """A resumed phase counts as completed; one skipped after a failure must rerun with --lf."""
    return {
        "phase": phase_id,
        "status": "completed" if reason.startswith(EARLIER) else "skipped",
        "reason": reason,
        "after_failure": reason.startswith("dependency") and NOT_SELECTED not in reason,
    }


def phase_facts(item: PhaseItem, report: pytest.TestReport) -> dict[str, Any] | None:
    """What the controller must learn from a worker about one phase, or None for no news."""
    if report.when == "setup" and report.skipped:
        assert isinstance(report.longrepr, tuple)
        return skip_facts(item.phase.id, report.longrepr[2].removeprefix("Skipped: "))
    if report.when == "call":
        outcome = item.stash.get(OUTCOME_KEY, None)
        status = outcome.status if outcome else ("completed" if report.passed else "failed")
        facts: dict[str, Any] = {
            "phase": item.phase.id,
            "status": status,
            "worker": getattr(item.config, "workerinput", {}).get("workerid", "main"),
        }
        if outcome:
            facts.update(
                attempts=len([a for a in outcome.attempts if a.number]),
                started=iso_time(outcome.started),
                finished=iso_time(outcome.finished),
                duration=round(outcome.finished - outcome.started, 3),
            )
        return facts
    if report.failed:  # an error in setup or teardown
        return {"phase": item.phase.id, "status": "failed"}
    return None


def iso_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")
