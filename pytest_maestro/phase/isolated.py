"""An isolated phase's end: its changes merged back from its worktree, or kept; and, after each
attempt, what it changed that could not come back. The runner's, apart so that a run without
``--maestro-isolate`` imports none of the merge. See docs/architecture.md, "Isolated phases"."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..git import GitError
from ..isolation import IsolationError
from ..plan import Phase
from ..processes.process import PhaseLog
from ..state.model import Status
from ..state.paths import SessionPaths
from .outcome import PhaseOutcome

if TYPE_CHECKING:
    from ..isolation.worktree import Workspace


def bring_back(
    space: Workspace, phase: Phase, outcome: PhaseOutcome, out: PhaseLog, paths: SessionPaths
) -> PhaseOutcome:
    """A passed phase's changes merged into the user's tree; anything else kept."""
    from ..isolation.merge import merge_back

    lines: list[str] = []
    why = "its result was not merged back" if outcome.ok else f"the phase {outcome.status}"
    tree = None
    try:
        tree = space.snapshot(force=phase.files.all())
        if outcome.ok:
            merged = merge_back(
                space,
                phase,
                tree,
                paths.preimage(phase.id),
                paths.replaced(phase.id, "merge"),
            )
            if merged.refused is None:
                out.write_line(f"--- {merged.line(Path.cwd())}")
                return outcome
            lines.append(f"not merged back: {merged.refused}")
    except (GitError, IsolationError, OSError) as exc:
        if outcome.ok:
            lines.append(f"not merged back: {exc}")
    try:  # whatever went wrong above, the work outlives the worktree
        kept = space.keep(why, phase.name, tree)
    except (GitError, IsolationError, OSError) as exc:
        kept = f"its work not kept: {exc}"
    if kept:
        lines.append(kept)
    for line in lines:
        out.write_line(f"--- {line}")
    status = Status.FAILED if outcome.ok else outcome.status
    last = outcome.attempts[-1]
    attempts = (
        *outcome.attempts[:-1],
        replace(last, file_problems=(*last.file_problems, *lines)),
    )
    return replace(outcome, status=status, attempts=attempts, finished=time.time())


def out_of_scope(space: Workspace, phase: Phase) -> list[str]:
    """The worktree's changes outside the phase's declared files, or undoing the user's work,
    as a file problem."""
    from ..isolation.merge import UNDOES, scope, undoes

    try:
        tree = space.snapshot(force=phase.files.all())
        inside, outside = scope(phase, space.changed(tree), space.isolation.prefix)
        undone = undoes(space, phase, inside, tree)
    except (GitError, OSError):
        return []  # the merge-back looks again
    problems = ["changed files outside its declared ones: " + ", ".join(outside)] if outside else []
    return problems + ([UNDOES + ", ".join(undone)] if undone else [])
