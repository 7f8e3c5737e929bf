"""What users read: the failure report of a phase, the header and the summary lines."""

from __future__ import annotations

import os
from pathlib import Path

from ..files.declared import shown
from ..phase.outcome import Attempt, PhaseOutcome
from ..plan import Phase

OUTPUT_LIMIT = 64 * 1024  # bytes of a phase's log, and of its agent's reply, in a JUnit file


def render_failure(phase: Phase, outcome: PhaseOutcome, cwd: Path) -> str:
    """The readable report of a failed or blocked phase: the last attempt in full, and its log's
    path from ``cwd``, where the user ran pytest."""
    tries = len([a for a in outcome.attempts if a.number > 0])
    verb = "was blocked" if outcome.status == "blocked" else "failed"
    plural = "s" if tries != 1 else ""
    head = f"phase {phase.id!r} ({phase.name}) {verb}"
    lines = [head + (f" after {tries} attempt{plural}" if tries else "")]
    lines += _attempt_lines(outcome.attempts[-1])
    lines += _put_back_lines(outcome, cwd)
    lines.append(f"log: {shown(outcome.log, cwd)}")
    return "\n".join(lines)


def _put_back_lines(outcome: PhaseOutcome, cwd: Path) -> list[str]:
    """Where the phase left the declared files, and where its last attempt's output went."""
    if outcome.not_put_back is not None:
        return [f"its declared files were not put back: {outcome.not_put_back}"]
    if not outcome.put_back:
        return []
    whole = all(restored.left is None for restored in outcome.put_back)
    head = "its declared files were put back as they were before it began"
    lines = [head + (":" if whole else ", except:")]
    return lines + [f"    {restored.line(cwd)}" for restored in outcome.put_back]


def failure_message(outcome: PhaseOutcome) -> str | None:
    """One line saying why a phase did not complete: its last attempt's first problem (the
    agent's status line or error, a failed check, a file problem), as a JUnit message says it."""
    if outcome.ok or not outcome.attempts:
        return None
    return outcome.attempts[-1].problem


def phase_output(outcome: PhaseOutcome, limit: int = OUTPUT_LIMIT) -> str:
    """What the phase wrote, for a JUnit file: its log (commands, their output, the agent CLI's
    errors) and the last reply of its agent, each cut to its last ``limit`` bytes."""
    parts = [_last_bytes(outcome.log, limit)]
    reply = outcome.attempts[-1].agent.text if outcome.attempts else ""
    if reply:
        number = outcome.attempts[-1].number
        cut = reply.encode()[-limit:].decode("utf-8", "replace")
        parts.append(f"--- the agent's reply, attempt {number} ---\n{cut}")
    return "\n".join(part.rstrip("\n") for part in parts if part) + "\n"


def _last_bytes(path: Path, limit: int) -> str:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - limit))
            data = handle.read()
    except OSError:
        return ""
    head = f"[... first {size - limit} bytes of {path.name} cut ...]\n" if size > limit else ""
    return head + data.decode("utf-8", "replace")


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
    if attempt.review is not None and not attempt.review.passed:  # every finding, and verdict
        head, *rest = attempt.review.lines()
        lines += [f"{label}{head}", *rest]
    lines += [f"{label}{problem}" for problem in attempt.file_problems]
    return lines


def _tail(output: tuple[str, ...] | list[str]) -> list[str]:
    return [f"    | {line}" for line in output]
