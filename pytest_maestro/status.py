"""``--maestro-status``: the plan's phases as its session has them, read beside a run or after.

Read-only: the snapshot and its journal are read without the session's lock (a run that holds
it keeps writing; the reading order in ``read_session`` makes that safe). Nothing runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from .plan import Plan
from .rows import RunView, view
from .state import PhaseState, SessionDoc, SessionPaths, read_session
from .summary import summary_dict, text_table, totals_lines

FORMATS = ("text", "json")


def show(plan: Plan, root: Path, state_dir: str, fmt: str) -> tuple[str, int]:
    """The status text and the exit code: 0 when every phase completed, 1 otherwise.
    SessionCorrupt (one line) for a session that cannot be read."""
    paths = SessionPaths.for_plan(root / state_dir, plan, root)
    found = paths.snapshot.exists() or paths.journal.exists()
    if found:
        doc = read_session(paths.snapshot) if paths.snapshot.exists() else _empty(plan)
    else:
        doc = _empty(plan)
    run = view(doc, datetime.now(timezone.utc), plan.ids)
    code = 0 if run.all_completed else 1
    if fmt == "json":
        data = {**summary_dict(run), "running": _holder(paths), "session_file": str(paths.snapshot)}
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n", code
    if not found:
        where = paths.state_dir
        return f"maestro: no session of {plan.path} in {where} yet: nothing has run\n", code
    return "\n".join(_text(run, paths)) + "\n", code


def _text(run: RunView, paths: SessionPaths) -> list[str]:
    holder = _holder(paths)
    state = f"running ({holder})" if holder else run.status
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 0  # a pipe: whole
    return [
        f"maestro: {run.task} ({run.plan}), session {run.session_id}: {state}",
        *text_table(run.rows, width),
        *totals_lines(run),
        f"session file: {paths.snapshot}",
    ]


def _holder(paths: SessionPaths) -> str | None:
    """Who holds the session, if a live process does (the lock's info file names it)."""
    try:
        info = json.loads(paths.info.read_text(encoding="utf-8"))
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if os.name != "nt":  # signal 0 only asks whether the process exists; not so on Windows
        with contextlib.suppress(PermissionError):  # alive, another user's
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return None  # a killed run left it
    return f"pid {pid} since {info.get('since', '?')}"


def _empty(plan: Plan) -> SessionDoc:
    """The session of a plan that never ran: every phase pending."""
    doc = SessionDoc("", plan.title or plan.path.stem, str(plan.path), "", "", status="pending")
    for phase in plan.phases:
        agents = (phase.agent,) if phase.agent else ()
        doc.phases[phase.id] = PhaseState(
            phase.id, phase.name, agents=agents, blocked_by=phase.blocked_by
        )
    return doc
