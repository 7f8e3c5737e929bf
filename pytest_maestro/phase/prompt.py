"""Prompt assembly for agent runtimes: the phase as a self-contained task, plus what went wrong.

In order: Maestro's ``Agent:/Phase:/Batch:/Session:`` header, the agent's role, pre-flight
assumptions, the plan's context, the task with its files and constraints, the strategy, the
completed dependencies' results and Downstream Context, when to stop, the acceptance criteria with
their check commands, on a retry what failed, and the required output format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..plan import Phase, Plan
from ..processes.process import PhaseLog
from ..review.final import FinalRecord, findings_for
from ..runtimes.agents import Agent
from ..state import StateError, read_session
from ..texts import os_error_text

if TYPE_CHECKING:
    from ..state.model import SessionDoc
    from .outcome import Attempt

OUTPUT_FORMAT = """\
## Output format
When you are done, report in Maestro's handoff format:

## Task Report
- **Status**: success | failure | blocked
- **Objective Achieved**: one line
- **Files Created**: paths, or none
- **Files Modified**: paths, or none
- **Files Deleted**: paths, or none
- **Validation**: what you ran and its result

## Downstream Context
- **Key Interfaces Introduced**: what later phases can use
- **Warnings**: what they must know

The FINAL line of your answer MUST be exactly one status line:
COMPLETED: <one-line summary>  |  FAILED: <one-line reason>  |  BLOCKED: <what stops you>"""


@dataclass(frozen=True)
class DependencyResult:
    """What a completed dependency handed on: its status line and Downstream Context."""

    id: str
    name: str
    result: str | None = None
    downstream: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PromptContext:
    """What the prompt says beyond the phase itself."""

    plan: Plan
    agent: Agent | None = None
    session_id: str = ""
    dependencies: tuple[DependencyResult, ...] = ()
    other_agents: tuple[str, ...] = ()  # named by the phase besides the one that runs it
    wave: int = 1  # the phase's wave: Maestro's batch
    runtime: str = "agent"  # who runs the phase when no agent is named
    warnings: tuple[str, ...] = ()  # what it lacks that it should have: for the log and summary
    final_findings: tuple[str, ...] = ()  # what a failed final review found in its work


@dataclass(frozen=True)
class SessionContext:
    """What the prompt takes from the session: its id, what the dependencies handed on, and a
    warning when the session could not be read (the prompt then goes without them)."""

    session_id: str
    dependencies: tuple[DependencyResult, ...]
    warnings: tuple[str, ...] = ()
    final_findings: tuple[str, ...] = ()  # a failed final review's, naming the phase

    @classmethod
    def read(cls, plan: Plan, phase: Phase, snapshot: Path) -> SessionContext:
        """From the session file (``read_session``: the snapshot with its journal replayed), not
        from memory: a worker sees what the controller wrote, durably, before the policy let the
        phase start."""
        try:
            doc = read_session(snapshot)
        except (OSError, StateError) as exc:
            why = os_error_text(exc) if isinstance(exc, OSError) else str(exc)
            deps = ", ".join(phase.blocked_by)
            lacks = f"its dependencies' results ({deps}) and " if deps else ""
            results = tuple(DependencyResult(d, plan.phase(d).name) for d in phase.blocked_by)
            warning = f"its prompt went without {lacks}the session's id: cannot read the session: "
            return cls("", results, (warning + why,))
        return cls.of(plan, phase, doc)

    @classmethod
    def of(cls, plan: Plan, phase: Phase, doc: SessionDoc) -> SessionContext:
        """From a session as its holder has it: what the controller hands a remote worker."""
        states = doc.phases
        dependencies = tuple(
            DependencyResult(
                dep,
                plan.phase(dep).name,
                states[dep].result if dep in states else None,
                states[dep].downstream_context if dep in states else {},
            )
            for dep in phase.blocked_by
        )
        final = FinalRecord.from_mapping(doc.final_review).review
        findings = findings_for(final, phase.id) if final is not None else ()
        return cls(doc.session_id, dependencies, final_findings=findings)


def prompter(context: PromptContext, log: Path) -> Callable[[Phase, int, Attempt | None], str]:
    """``build_prompt`` for a phase's runner, which calls it under each attempt's header in the
    phase's log, held open meanwhile: an attempt whose prompt goes without something it should
    have says so there."""

    def prompt(phase: Phase, attempt: int, previous: Attempt | None) -> str:
        held = PhaseLog.held(log)
        if held is not None:
            for warning in context.warnings:
                held.write_line(f"--- warning: {warning}")
        return build_prompt(context, phase, attempt, previous)

    return prompt


def build_prompt(
    context: PromptContext, phase: Phase, attempt: int, previous: Attempt | None
) -> str:
    plan = context.plan
    position = plan.ids.index(phase.id) + 1
    agent_name = context.agent.name if context.agent else context.runtime
    header = [
        f"Agent: {agent_name}",
        f"Phase: {phase.id}/{len(plan.phases)} ({position} of {len(plan.phases)}: {phase.name})",
        f"Batch: wave-{context.wave}",
        f"Session: {context.session_id or '-'}",
        f"Attempt: {attempt}",
    ]
    sections = ["\n".join(header)]
    if context.agent and context.agent.instructions:
        sections.append(context.agent.instructions)
    if context.other_agents:
        sections.append("Work with: " + ", ".join(context.other_agents))
    if phase.assumptions:
        lines = [
            f"- [ ] [{a.severity}] {a.claim}" + (f": `{a.verify}`" if a.verify else "")
            for a in phase.assumptions
        ]
        sections.append(
            "## Pre-flight\nVerify before starting. If a blocking check fails, answer "
            "BLOCKED: and the reason.\n" + "\n".join(lines)
        )
    if plan.context or plan.title:
        sections.append("## Context\n" + "\n".join(t for t in (plan.title, plan.context) if t))
    task = [f"## Task: {phase.name}"]
    if phase.description:
        task.append(phase.description)
    sections.append("\n".join(task))
    files = phase.file_lines(read=True)
    if files:
        sections.append("## Files (change no others)\n" + "\n".join(files))
    if phase.constraints:
        sections.append("## Constraints\n" + "\n".join(f"- {c}" for c in phase.constraints))
    if phase.run:
        sections.append("## Commands the plan gives\n" + "\n".join(f"- `{c}`" for c in phase.run))
    dependencies = [_dependency(d) for d in context.dependencies]
    if dependencies:
        sections.append("## Dependency results\n" + "\n\n".join(dependencies))
    if phase.rollback_triggers:
        sections.append(
            "## Stop and answer BLOCKED if any of these occur\n"
            + "\n".join(f"- {t}" for t in phase.rollback_triggers)
        )
    if phase.acceptance:
        criteria = [
            f"- [ ] {c.criterion}" + (f": `{c.check}`" if c.check else "") for c in phase.acceptance
        ]
        sections.append(
            "## Acceptance criteria (checked after you finish; run the commands yourself first)\n"
            + "\n".join(criteria)
        )
    if context.final_findings:
        sections.append(
            "## What the final review of the run found in this phase's work\n"
            + "\n".join(context.final_findings)
            + "\nYour earlier work is in the files: fix these findings there."
        )
    if previous is not None:
        sections.append("## The previous attempt failed\n" + failure_summary(previous))
        if phase.fallback:
            sections.append("## Fallback strategy\n" + phase.fallback)
    sections.append("Do not stage or commit: this tool handles git.")
    sections.append(OUTPUT_FORMAT)
    return "\n\n".join(sections) + "\n"


def _dependency(result: DependencyResult) -> str:
    lines = [f"### {result.id}: {result.name}", result.result or "COMPLETED"]
    lines += [f"- {key.replace('_', ' ')}: {value}" for key, value in result.downstream.items()]
    return "\n".join(lines)


def failure_summary(attempt: Attempt) -> str:
    """What failed in an attempt, in full: for the next attempt's prompt, or a fix round's."""
    lines = [] if attempt.agent.ok else [attempt.agent.message]
    for failure in attempt.check_failures:
        lines.append(
            f"check failed: {failure.criterion} (`{failure.command}`, exit {failure.exit_code})"
        )
        lines += [f"    {line}" for line in failure.tail[-10:]]
    lines += attempt.file_problems
    if attempt.review is not None and not attempt.review.passed:  # what to fix, in full
        lines += attempt.review.lines()
    return "\n".join(lines)
