"""The one plan model: every reader produces these values, whatever the format."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

# How a phase is reviewed once its own checks passed: not at all, against its task and criteria,
# or against those and for the code's quality (``review:``, an agent's, ``--maestro-review``).
REVIEW_MODES = ("none", "spec", "spec+quality")


@dataclass(frozen=True)
class Files:
    """Paths (relative to the project root) a phase creates, modifies or deletes."""

    create: tuple[str, ...] = ()
    modify: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()

    @property
    def writes(self) -> frozenset[str]:
        return frozenset(self.create) | frozenset(self.modify) | frozenset(self.delete)

    def all(self) -> tuple[str, ...]:
        return self.create + self.modify + self.delete


@dataclass(frozen=True)
class Check:
    """An acceptance criterion. ``check`` is the shell command that proves it; None for prose."""

    criterion: str
    check: str | None = None


@dataclass(frozen=True)
class Assumption:
    """A pre-flight assumption; a failing ``blocking`` one ends the phase as BLOCKED."""

    claim: str
    verify: str | None = None
    severity: str = "blocking"  # blocking | warning


@dataclass(frozen=True)
class Phase:
    id: str
    name: str
    line: int | None = None
    agent: str | None = None
    blocked_by: tuple[str, ...] = ()
    files: Files = field(default_factory=Files)
    reads: tuple[str, ...] = ()
    acceptance: tuple[Check, ...] = ()
    run: tuple[str, ...] = ()
    description: str = ""
    parallel: bool = True
    timeout: float | None = None  # seconds
    max_retries: int | None = None
    estimate: float | None = None  # seconds
    tags: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    fallback: str | None = None
    rollback_triggers: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    model: str | None = None
    runtime: str | None = None  # beats the agent's and --maestro-runtime
    budget_usd: float | None = None  # dollars this phase may spend on its agent CLI
    done: bool = False  # the plan marks it done: skipped, and completed for its dependents
    review: str | None = None  # one of REVIEW_MODES; None: its agent's, else --maestro-review
    escalate_model: str | None = None  # the model of its late fix rounds after a review

    def file_lines(self, read: bool = False) -> list[str]:
        """``- create: path`` for each declared file (with ``read``, ``- read: path`` for each
        it reads after them): how the implementer's and the reviewer's prompts list them."""
        kinds = [("create", self.files.create), ("modify", self.files.modify)]
        kinds += [("delete", self.files.delete)] + ([("read", self.reads)] if read else [])
        return [f"- {kind}: {path}" for kind, paths in kinds for path in paths]


@dataclass(frozen=True)
class Plan:
    path: Path
    format: str
    phases: tuple[Phase, ...]
    title: str = ""
    context: str = ""  # goal and project context, for the agent's prompt
    root: str | None = None  # project root, relative to the plan file
    tags: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    isolate_include: tuple[str, ...] = ()  # untracked files an isolated phase's worktree needs

    def phase(self, phase_id: str) -> Phase:
        return self._by_id[phase_id]

    @property
    def done_ids(self) -> tuple[str, ...]:
        """The phases the plan itself marks done (``[x]``, ``status: done``)."""
        return tuple(phase.id for phase in self.phases if phase.done)

    @cached_property
    def _by_id(self) -> dict[str, Phase]:
        return {phase.id: phase for phase in self.phases}

    @cached_property  # every phase's prompt asks for it: built once, not once a phase
    def ids(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.phases)
