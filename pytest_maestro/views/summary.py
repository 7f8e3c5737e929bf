"""The run's rows as plain text columns (the terminal summary, ``--maestro-status``) and as
``summary.json``: Maestro's dispatch summary fields, then ours per phase."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..state.model import Tokens
from .markdown_report import TABLE_HEAD, cells_of
from .rows import PhaseRow, RunView


def text_table(rows: tuple[PhaseRow, ...], width: int = 0) -> list[str]:
    """Left-aligned columns; the last one (the note) cut to fit ``width`` when it is given."""
    cells = [TABLE_HEAD, *(cells_of(row) for row in rows)]
    sizes = [max(len(line[i]) for line in cells) for i in range(len(TABLE_HEAD) - 1)]
    room = max(width - sum(sizes) - 2 * len(sizes), _MIN_NOTE) if width else 0
    lines = []
    for line in cells:
        note = line[-1]
        if room and len(note) > room:
            note = note[: room - 1] + "…"
        padded = [cell.ljust(size) for cell, size in zip(line[:-1], sizes, strict=True)]
        lines.append("  ".join([*padded, note]).rstrip())
    return lines


_MIN_NOTE = 30


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="milliseconds")


def usage(tokens: Tokens) -> dict[str, Any]:
    """Tokens, copilot's premium requests, the cost and whether it is an estimate (a price
    table's, for a CLI that reports only tokens), the models no table prices ("": none named)."""
    return {
        "tokens": {"input": tokens.input, "output": tokens.output, "cached": tokens.cached},
        "premium_requests": tokens.premium_requests,
        "cost": round(tokens.cost, 6),
        "cost_estimated": tokens.estimated,
        "unpriced_models": list(tokens.unpriced),
    }


def phase_dict(row: PhaseRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "status": row.status,
        "this_run": row.this_run,
        "agent": row.agent or None,
        "worker": row.worker,
        "attempts": row.attempts,
        "start": _time(row.started),
        "finish": _time(row.finished),
        "duration_seconds": None if row.duration is None else round(row.duration, 3),
        **usage(row.tokens),
        "unverified": row.unverified,
        "reviewed": row.reviewed,
        "review": row.review.to_dict() if row.review is not None else None,
        "error": row.note or None,
    }


def summary_dict(run: RunView) -> dict[str, Any]:
    """Maestro's dispatch summary (an agent per phase this run dispatched) and the session."""
    ran = [row for row in run.rows if row.executed]
    ok = [row for row in ran if row.status == "completed"]
    bad = [row for row in ran if row.status in ("failed", "blocked")]
    return {
        "batch_status": batch_status(run, ran, ok, bad),
        "total_agents": len(ran),
        "succeeded": len(ok),
        "failed": len(bad),
        "wall_time_seconds": round(run.wall_time or 0.0, 3),
        "agents": [
            {
                "name": row.agent or row.id,
                "phase": row.id,
                "exit_code": None if row.status == "in_progress" else int(row in bad),
                "status": _AGENT_STATUS[row.status],
            }
            for row in ran
        ],
        "plan": run.plan,
        "session_id": run.session_id,
        "session_status": run.status,
        "all_completed": run.all_completed,
        "phase_time_seconds": round(run.phase_time, 3),
        "account_wait_seconds": round(run.account_wait, 3),
        "critical_path": list(run.critical_path),
        **usage(run.spent),
        "phases": [phase_dict(row) for row in run.rows],
        "final_review": phase_dict(run.final) if run.final is not None else None,
    }


def batch_status(run: RunView, ran: list[PhaseRow], ok: list[PhaseRow], bad: list[PhaseRow]) -> str:
    """``success``: every phase of the plan completed (in this run or an earlier one);
    ``partial_failure``/``failed``: a phase this run dispatched failed or was blocked, and
    another did (not) succeed; ``in_progress``: phases still run; ``incomplete``: nothing
    failed, but phases are left pending or skipped (a run stopped early, a selection of the
    plan); ``pending``: no phase has run nor completed yet."""
    if run.all_completed:
        return "success"
    if bad:
        return "partial_failure" if ok else "failed"
    if any(row.status == "in_progress" for row in ran):
        return "in_progress"
    if ran or any(row.status == "completed" for row in run.rows):
        return "incomplete"
    return "pending"


# Maestro's agent statuses; the phase's own status is in ``phases``.
_AGENT_STATUS = {
    "completed": "success",
    "failed": "failed",
    "blocked": "failed",
    "in_progress": "running",
}


# json's compact encoder is its C one; given an indent it encodes in Python, ten times slower.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


def summary_json(run: RunView) -> str:
    """One line per key, and per item of a list (an agent, a phase): a run's end writes it,
    however many thousand phases the plan has, with the compact encoder."""
    lines = []
    for key, value in summary_dict(run).items():
        head = f"  {_COMPACT.encode(key)}: "
        if isinstance(value, list) and value:
            items = ",\n".join(f"    {_COMPACT.encode(item)}" for item in value)
            lines.append(f"{head}[\n{items}\n  ]")
        else:
            lines.append(head + _COMPACT.encode(value))
    return "{\n" + ",\n".join(lines) + "\n}\n"
