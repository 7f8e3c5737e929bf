"""Prompt assembly for agent runtimes: the phase as a self-contained task, plus what went wrong."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .plan import Phase

if TYPE_CHECKING:
    from .runner import Attempt

STATUS_FORMAT = (
    "End your answer with exactly one status line:\n"
    "COMPLETED: <what you did>  |  FAILED: <why>  |  BLOCKED: <what stops you>"
)


def build_prompt(phase: Phase, attempt: int, previous: Attempt | None) -> str:
    sections = [f"Phase: {phase.id} — {phase.name}\nAttempt: {attempt}"]
    if phase.description:
        sections.append("## Task\n" + phase.description)
    files = [
        f"- {kind}: {path}"
        for kind, paths in (
            ("create", phase.files.create),
            ("modify", phase.files.modify),
            ("delete", phase.files.delete),
            ("read", phase.reads),
        )
        for path in paths
    ]
    if files:
        sections.append("## Files (touch no others)\n" + "\n".join(files))
    if phase.constraints:
        sections.append("## Constraints\n" + "\n".join(f"- {c}" for c in phase.constraints))
    if phase.acceptance:
        criteria = [
            f"- {c.criterion}" + (f" (checked with `{c.check}`)" if c.check else "")
            for c in phase.acceptance
        ]
        sections.append("## Acceptance criteria\n" + "\n".join(criteria))
    if phase.rollback_triggers:
        sections.append("## Stop when\n" + "\n".join(f"- {t}" for t in phase.rollback_triggers))
    if previous is not None:
        sections.append("## The previous attempt failed\n" + _failure_summary(previous))
        if phase.fallback:
            sections.append("## Fallback strategy\n" + phase.fallback)
    sections.append(STATUS_FORMAT)
    return "\n\n".join(sections) + "\n"


def _failure_summary(attempt: Attempt) -> str:
    lines = [] if attempt.agent.ok else [attempt.agent.message]
    for failure in attempt.check_failures:
        lines.append(
            f"check failed: {failure.criterion} (`{failure.command}`, exit {failure.exit_code})"
        )
        lines += [f"    {line}" for line in failure.tail[-10:]]
    lines += attempt.file_problems
    return "\n".join(lines)
