"""What a reviewer is shown: the phase's task and prose criteria, the checks that passed, the
implementer's report (claims to check, not evidence), the attempt's change, what to look for
in the review's mode, and the one shape its answer must take.

The change is in the prompt when it is small enough, else only in its file, which the prompt
names: the reviewer reads it there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..plan import Phase, Plan
from ..runtimes.agents import Agent

HEAD = "Review of phase"  # the prompt's first words: a reviewer's task, not an implementer's
INLINE_DIFF = 100_000  # characters of change shown in the prompt; past them, only its file
REPORT_LIMIT = 20_000  # characters of the implementer's report, its end kept

SHAPE = """\
```json
{
  "criteria": [
    {"id": 1, "verdict": "met", "evidence": "path/to/file.py:42"}
  ],
  "findings": [
    {"severity": "blocking", "where": "path/to/file.py:17", "issue": "what is wrong"}
  ],
  "summary": "one line"
}
```"""

ANSWER = f"""\
## Your answer
Say what you checked, then END your answer with exactly one JSON block, in this shape:

{SHAPE}

- "criteria": one entry per criterion under "Criteria to judge", by its number (`id`);
  "verdict" is "met" or "not met"; "evidence" names the file and line that shows it met, or
  says what is missing. An empty list when there are no criteria to judge.
- "findings": each problem you found; "severity" is "blocking" (a criterion or the task is not
  met, or the change breaks something) or "minor" (worth fixing, no reason to reject the work).
  An empty list when there are none.
- Nothing after the block."""

_LOOK = {
    "spec": (
        "Spec compliance: is everything the task and its criteria ask for there (nothing "
        "missing), and nothing they did not ask for (nothing extra)?"
    ),
    "spec+quality": (
        "Spec compliance: is everything the task and its criteria ask for there (nothing "
        "missing), and nothing they did not ask for (nothing extra)? Then code quality: "
        "correctness, edge cases and error handling, tests, readability, fit with the code "
        "around it."
    ),
}


@dataclass(frozen=True)
class ReviewBrief:
    """What one review is about."""

    plan: Plan
    phase: Phase
    mode: str  # spec | spec+quality
    agent: Agent
    report: str  # the implementer's last reply
    diff: str  # the attempt's change
    diff_file: Path  # where the change is kept, for the reviewer to read
    earlier: tuple[str, ...] = ()  # the last review's lines, when a fix round came after it


def prose_criteria(phase: Phase) -> tuple[str, ...]:
    """The criteria no command checks: the reviewer judges these, numbered from 1."""
    return tuple(check.criterion for check in phase.acceptance if check.check is None)


def review_prompt(brief: ReviewBrief) -> str:
    phase = brief.phase
    sections = [
        f"{HEAD} {phase.id} ({phase.name}): {brief.mode}\nAgent: {brief.agent.name}",
        brief.agent.instructions,
        "You review another agent's work. Read any file of the project you need; change "
        "nothing: no edits, no commands that write. The implementer's report below is a claim, "
        "not evidence: check what it says in the code.",
    ]
    plan = brief.plan
    if plan.title or plan.context:
        sections.append("## Context\n" + "\n".join(t for t in (plan.title, plan.context) if t))
    sections.append(_task(phase))
    sections.append(_criteria(prose_criteria(phase)))
    checked = [f"- {c.criterion}: `{c.check}`" for c in phase.acceptance if c.check]
    if checked:
        sections.append("## Checked already (these commands passed)\n" + "\n".join(checked))
    report = brief.report.strip()[-REPORT_LIMIT:] or "(it said nothing)"
    sections.append(f"## The implementer's report (its claims, unverified)\n{report}")
    sections.append(_change(brief.diff, brief.diff_file))
    if brief.earlier:
        sections.append(
            "## What the last review found (the implementer has tried to fix it since)\n"
            + "\n".join(brief.earlier)
            + "\nCheck first that each of these is fixed; then judge every criterion again."
        )
    sections.append("## What to look for\n" + _LOOK[brief.mode])
    sections.append(ANSWER)
    return "\n\n".join(s for s in sections if s) + "\n"


def ask_again(prompt: str, why: str) -> str:
    """The prompt once more, for an answer outside the shape: what was wrong with it."""
    return (
        f"{prompt}\n## Your previous answer could not be read\n{why}. Answer again: the same "
        "review, ending with exactly one JSON block in the shape above.\n"
    )


def _task(phase: Phase) -> str:
    lines = [f"## The task: {phase.name}"]
    if phase.description:
        lines.append(phase.description)
    files = phase.file_lines()  # what it may change: what it reads is no concern of the review
    if files:
        lines.append("Files it declares (it may change no others):\n" + "\n".join(files))
    if phase.constraints:
        lines.append("Constraints:\n" + "\n".join(f"- {c}" for c in phase.constraints))
    return "\n\n".join(lines)


def _criteria(criteria: Sequence[str]) -> str:
    if not criteria:
        return (
            "## Criteria to judge\nThe phase states no criteria in prose: judge the work "
            "against its task (answer with an empty criteria list)."
        )
    numbered = [f"{n}. {criterion}" for n, criterion in enumerate(criteria, 1)]
    return "## Criteria to judge\n" + "\n".join(numbered)


def _change(diff: str, diff_file: Path) -> str:
    if not diff.strip():
        return f"## The change\nThe attempt changed no file it declares ({diff_file} is empty)."
    if len(diff) > INLINE_DIFF:
        return (
            f"## The change\nRead it in {diff_file} ({len(diff)} characters, a unified diff of "
            "the files the attempt changed)."
        )
    return f"## The change (also in {diff_file})\n```diff\n{diff.rstrip()}\n```"
