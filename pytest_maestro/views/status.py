"""``--maestro-status``: the plan's phases as its session has them, read beside a run or after.

Read-only: the snapshot and its journal are read without the session's lock (a run that holds
it keeps writing; the reading order in ``read_session`` makes that safe). Nothing runs.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from ..plan import Plan
from ..state import PhaseState, SessionDoc, SessionPaths, StateError, read_session
from ..state.lock import holder_of
from ..texts import os_error_text, table_width
from .markdown_report import totals
from .rows import RunView, view
from .summary import summary_dict, text_table


def show(plan: Plan, root: Path, state_dir: str, fmt: str) -> tuple[str, int]:
    """The status text and the exit code: 0 when every phase completed (and the last final
    review, if any, passed), 1 otherwise. StateError (one line) for a session that cannot be
    read."""
    paths = SessionPaths.for_plan(root / state_dir, plan, root)
    found = paths.snapshot.exists() or paths.journal.exists()
    try:
        doc = read_session(paths.snapshot) if paths.snapshot.exists() else _empty(plan)
    except OSError as error:  # a directory, no permission: what a run would say, in one line
        raise StateError(f"cannot use session {paths.snapshot}: {os_error_text(error)}") from None
    run = view(doc, datetime.now(timezone.utc), plan.ids, plan.done_ids)
    final_failed = run.final is not None and run.final.status != "completed"
    code = 0 if run.all_completed and not final_failed else 1
    if fmt == "json":
        data = {
            **summary_dict(run),
            "running": holder_of(paths, alive=True),
            "session_file": str(paths.snapshot),
        }
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n", code
    if not found:
        where = paths.state_dir
        return f"maestro: no session of {plan.path} in {where} yet: nothing has run\n", code
    return "\n".join(_text(run, paths)) + "\n", code


def _text(run: RunView, paths: SessionPaths) -> list[str]:
    holder = holder_of(paths, alive=True)
    state = f"running ({holder})" if holder else run.status
    return [
        f"maestro: {run.task} ({run.plan}), session {run.session_id}: {state}",
        *text_table(run.table_rows, table_width()),
        *totals(run),
        f"session file: {paths.snapshot}",
    ]


def _empty(plan: Plan) -> SessionDoc:
    """The session of a plan that never ran: every phase pending."""
    doc = SessionDoc("", plan.title or plan.path.stem, str(plan.path), "", "", status="pending")
    for phase in plan.phases:
        agents = (phase.agent,) if phase.agent else ()
        doc.phases[phase.id] = PhaseState(
            phase.id, phase.name, agents=agents, blocked_by=phase.blocked_by
        )
    return doc
