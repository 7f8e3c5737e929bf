"""The final review: once every phase passed, a reviewer judges the run's whole change against
the plan. What it is shown (``final_prompt``), how its answer is read (``read_final_reply``: the
phase review's shape without criteria, each finding naming the phases it is about), and what the
session keeps of it (``FinalRecord``). Pure: no I/O.

A blocking finding must name at least one phase, and every phase it names must be the plan's:
those are the phases a failed final review sends back to work (their ``--lf`` rerun), so an
answer that names none, or one the plan lacks, is outside the shape, asked for once more, then
fails the review, as a phase review's would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..plan import Phase, Plan
from ..runtimes.agents import Agent
from ..texts import one_line
from .prompt import INLINE_DIFF
from .verdict import (
    BLOCKING,
    FINDINGS_SCHEMA,
    Finding,
    ReplyError,
    Review,
    Verdict,
    compile_schema,
    json_block,
)

FINAL_NAME = "final-review"  # the item's name: ``plan.yaml::final-review``
FINAL_MODE = "final"  # its Review's mode
HEAD = "Final review of plan"  # the prompt's first words: not a phase's review
TASK_LIMIT = 2_000  # characters of a phase's task in the prompt; the rest is in the plan file

FINAL_SHAPE = """\
```json
{
  "findings": [
    {"severity": "blocking", "where": "path/to/file.py:17", "issue": "what is wrong",
     "phases": ["phase-id"]}
  ],
  "summary": "one line"
}
```"""

FINAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["findings"],
    "properties": {
        "findings": FINDINGS_SCHEMA,
        "summary": {"type": "string"},
    },
}

_LOOK = (
    "Judge the change as a whole against the plan: is every phase's task and criterion met by "
    "what is there now; do the phases' parts fit together (interfaces agree, names match, "
    "nothing one phase did breaks another's); is anything left half done, or done that the "
    "plan did not ask for? Each phase was checked on its own already: look for what only the "
    "whole shows."
)


@dataclass(frozen=True)
class FinalBrief:
    """What the final review is about."""

    plan: Plan
    agent: Agent
    results: Mapping[str, str]  # phase id -> its agent's status line, as the session has it
    diff: str  # the run's whole change
    diff_file: Path  # where the change is kept, for the reviewer to read
    since: str  # when the change began: the session's base was taken then


def final_prompt(brief: FinalBrief) -> str:
    plan = brief.plan
    title = plan.title or plan.path.name
    sections = [
        f"{HEAD} {title}: {len(plan.phases)} phases\nAgent: {brief.agent.name}",
        brief.agent.instructions,
        "You review the work several agents did, one phase of the plan each, now that every "
        "phase passed its own checks. Read any file of the project you need; change nothing: "
        "no edits, no commands that write. What a phase's agent reported is a claim, not "
        "evidence: check it in the code.",
    ]
    if plan.title or plan.context:
        sections.append("## Context\n" + "\n".join(t for t in (plan.title, plan.context) if t))
    phases = [_phase(phase, brief.results.get(phase.id)) for phase in plan.phases]
    sections.append("## The plan's phases\n\n" + "\n\n".join(phases))
    sections.append(_change(brief.diff, brief.diff_file, brief.since))
    sections.append("## What to look for\n" + _LOOK)
    sections.append(_answer(plan.ids))
    return "\n\n".join(s for s in sections if s) + "\n"


def _phase(phase: Phase, result: str | None) -> str:
    lines = [f"### {phase.id}: {phase.name}"]
    if phase.description:
        task = phase.description.strip()
        more = len(task) - TASK_LIMIT
        lines.append(task[:TASK_LIMIT] + (f" [... {more} more characters ...]" if more > 0 else ""))
    files = [f"{kind} {', '.join(paths)}" for kind, paths in _files(phase) if paths]
    if files:
        lines.append("Files: " + "; ".join(files))
    lines += [
        f"- criterion: {c.criterion}" + (f" (checked: `{c.check}`)" if c.check else "")
        for c in phase.acceptance
    ]
    if result:
        lines.append(f"Its agent reported: {one_line(result)}")
    return "\n".join(lines)


def _files(phase: Phase) -> list[tuple[str, tuple[str, ...]]]:
    files = phase.files
    return [("create", files.create), ("modify", files.modify), ("delete", files.delete)]


def _change(diff: str, diff_file: Path, since: str) -> str:
    head = f"## The change (every file changed since {since}"
    if not diff.strip():
        return f"{head})\nNothing changed: {diff_file} is empty. Judge the files as they are."
    if len(diff) > INLINE_DIFF:
        return f"{head})\nRead it in {diff_file} ({len(diff)} characters, a unified diff)."
    return f"{head}; also in {diff_file})\n```diff\n{diff.rstrip()}\n```"


def _answer(ids: Sequence[str]) -> str:
    return (
        "## Your answer\nSay what you checked, then END your answer with exactly one JSON "
        f"block, in this shape:\n\n{FINAL_SHAPE}\n\n"
        '- "findings": each problem you found; "severity" is "blocking" (the plan is not met, '
        'or the change breaks something) or "minor" (worth fixing, no reason to reject the '
        'work); "phases" names, by id, the phases whose work the finding is about: a blocking '
        "finding names at least one, since those phases are sent back to work. The ids: "
        + ", ".join(ids)
        + ".\n  An empty list when there are none.\n- Nothing after the block."
    )


# -- reading the answer ----------------------------------------------------------------------


def read_final_reply(text: str, ids: Sequence[str]) -> Verdict:
    """The findings in a final reviewer's answer; ReplyError, one line, for an answer outside
    the shape: a blocking finding naming no phase, or a phase not among ``ids``."""
    data = json_block(text)
    _validator()(data)
    known = set(ids)
    findings = []
    for number, raw in enumerate(data["findings"], 1):
        phases = tuple(dict.fromkeys(one_line(p) for p in raw.get("phases") or ()))
        unknown = [p for p in phases if p not in known]
        if unknown:
            raise ReplyError(f"finding {number} names phase {unknown[0]!r}, which the plan lacks")
        if raw["severity"] == BLOCKING and not phases:
            raise ReplyError(f"blocking finding {number} names no phase")
        issue, where = one_line(raw["issue"]), one_line(raw.get("where") or "")
        findings.append(Finding(raw["severity"], issue, where, phases))
    return Verdict((), tuple(findings), one_line(data.get("summary") or ""))


@functools.cache
def _validator() -> Callable[[Any], None]:
    return compile_schema(FINAL_SCHEMA)


def named_phases(review: Review, order: Sequence[str]) -> tuple[str, ...]:
    """The phases a failed final review sends back to work: those its blocking findings name,
    in ``order`` (the plan's)."""
    if review.passed or review.verdict is None:
        return ()
    named = {p for finding in review.verdict.blocking for p in finding.phases}
    return tuple(p for p in order if p in named)


def findings_for(review: Review, phase_id: str) -> tuple[str, ...]:
    """The blocking findings of a failed final review that name the phase: what its next run's
    prompt says it must fix."""
    if review.passed or review.verdict is None:
        return ()
    return tuple(f.line for f in review.verdict.blocking if phase_id in f.phases)


# -- what the session keeps ------------------------------------------------------------------


@dataclass(frozen=True)
class FinalRecord:
    """The session's final review: the base its change is taken from, and the last review.

    ``base`` is a commit (in a git work tree: a snapshot of the work tree, a ref keeps it) or
    ``files`` (a snapshot of the plan's declared files beside the session); taken once, when the
    session first ran with the final review, and kept while the session lives."""

    base: str | None = None
    since: str | None = None  # when the base was taken
    review: Review | None = None
    started: str | None = None  # when the last review started
    at: str | None = None  # when it ended

    @property
    def passed(self) -> bool:
        return self.review is not None and self.review.passed

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.base is not None:
            data.update(base=self.base, since=self.since)
        if self.review is not None:
            data.update(review=self.review.to_dict(), started=self.started, at=self.at)
        return data

    @classmethod
    def from_mapping(cls, raw: object) -> FinalRecord:
        """What ``to_dict`` wrote; an empty record for anything else (a hand-edited session)."""
        if not isinstance(raw, Mapping):
            return cls()
        base, since, started, at = (raw.get(k) for k in ("base", "since", "started", "at"))
        review = Review.from_mapping(raw.get("review"))
        ran = review is not None
        return cls(
            str(base) if isinstance(base, str) and base else None,
            str(since) if since is not None else None,
            review,
            str(started) if ran and started is not None else None,
            str(at) if ran and at is not None else None,
        )
