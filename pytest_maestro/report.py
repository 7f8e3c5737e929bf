"""What users read: the failure report of a phase, the header and the summary lines."""

from __future__ import annotations

from pathlib import Path

from .files import shown
from .plan import Phase
from .runner import Attempt, PhaseOutcome


def render_failure(phase: Phase, outcome: PhaseOutcome, cwd: Path) -> str:
    """The readable report of a failed or blocked phase: the last attempt in full, and its log's
    path from ``cwd``, where the user ran pytest."""
    tries = len([a for a in outcome.attempts if a.number > 0])
    verb = "was blocked" if outcome.status == "blocked" else "failed"
    plural = "s" if tries != 1 else ""
    head = f"phase {phase.id!r} ({phase.name}) {verb}"
    lines = [head + (f" after {tries} attempt{plural}" if tries else "")]
    lines += _attempt_lines(outcome.attempts[-1])
    lines.append(f"log: {shown(outcome.log, cwd)}")
    return "\n".join(lines)


def failure_line(outcome: PhaseOutcome) -> str | None:
    """Why a failed or blocked phase failed, in one line: its last attempt's first problem."""
    if outcome.ok or not outcome.attempts:
        return None
    attempt = outcome.attempts[-1]
    if not attempt.agent.ok:
        line = attempt.agent.message
    elif attempt.check_failures:
        failure = attempt.check_failures[0]
        how = "timed out" if failure.timed_out else f"exit code {failure.exit_code}"
        line = f"check failed: {failure.criterion} ({how})"
    elif attempt.file_problems:
        line = attempt.file_problems[0]
    else:
        return None
    label = f"attempt {attempt.number}: " if attempt.number else ""
    return label + " ".join(line.split())


def _attempt_lines(attempt: Attempt) -> list[str]:
    label = f"attempt {attempt.number}: " if attempt.number else ""
    lines: list[str] = []
    if not attempt.agent.ok:
        lines.append(f"{label}{attempt.agent.message}")
        if attempt.agent.processes:
            lines += _tail(attempt.agent.processes[-1].tail(15))
    for failure in attempt.check_failures:
        exit_text = "timed out" if failure.timed_out else f"exit code {failure.exit_code}"
        lines.append(f"{label}check failed: {failure.criterion}")
        lines.append(f"    $ {failure.command}")
        lines.append(f"    {exit_text}")
        lines += _tail(failure.tail)
    lines += [f"{label}{problem}" for problem in attempt.file_problems]
    return lines


def _tail(output: tuple[str, ...] | list[str]) -> list[str]:
    return [f"    | {line}" for line in output]
