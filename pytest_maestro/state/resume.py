"""Resuming a session: which recorded phases still describe the plan, which must run again."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..plan.graph import PlanGraph
from ..plan.model import Files, Phase, Plan
from .journal import read_session, replay, reset_phase
from .model import PhaseState, SessionDoc, Status, evolve, now
from .paths import SessionPaths

# Fields that say how or when a phase runs, not what it does: editing them keeps it completed.
_NOT_DEFINITION = frozenset(
    {
        "name", "line", "estimate", "timeout", "max_retries", "parallel", "tags", "budget_usd",
        "done", "review", "escalate_model",
    }
)  # fmt: skip
INTERRUPTED = "the run that started this phase ended before it finished"
CHANGED = "the phase's definition, or one of its dependencies', changed"


@dataclass(frozen=True)
class Interrupted:
    """A phase a killed run left in progress; its declared files may be half written."""

    id: str
    files: Files


def _defaults() -> tuple[tuple[str, object], ...]:
    """Each field of a phase's definition, with its default."""
    return tuple(
        (f.name, f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
        for f in dataclasses.fields(Phase)
        if f.name not in _NOT_DEFINITION
    )


_DEFINITION = _defaults()


def _own_fingerprint(phase: Phase) -> str:
    fields = {}
    for name, default in _DEFINITION:
        value = getattr(phase, name)
        # Default values are left out so that a field added to Phase later changes no fingerprint.
        if value != default:
            fields[name] = value
    text = json.dumps(fields, sort_keys=True, default=lambda v: dataclasses.asdict(v))
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprints(graph: PlanGraph) -> dict[str, str]:
    """Each phase's definition hash, combined with its dependencies' fingerprints (transitively)."""
    plan = graph.plan
    prints: dict[str, str] = {}
    for pid in graph.topological_order():  # dependencies first
        phase = plan.phase(pid)
        deps = ",".join(f"{d}={prints[d]}" for d in sorted(phase.blocked_by))
        own = _own_fingerprint(phase)
        prints[pid] = hashlib.sha256(f"{own}|{deps}".encode()).hexdigest()[:16]
    return {pid: prints[pid] for pid in plan.ids}


def load(paths: SessionPaths, plan: Plan, rel: str) -> SessionDoc:
    """The snapshot (or a new session) with the journal replayed; a torn last line is skipped."""
    if paths.snapshot.exists():
        return read_session(paths.snapshot)
    at, task = now(), plan.title or Path(rel).stem
    slug = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:48] or "plan"
    doc = SessionDoc(session_id=f"{at[:10]}-{slug}", task=task, plan=rel, created=at, updated=at)
    doc.phases = {p.id: PhaseState(p.id, p.name) for p in plan.phases}
    replay(doc, paths.journal)  # a journal whose snapshot was lost still counts
    return doc


def reconcile(doc: SessionDoc, graph: PlanGraph) -> tuple[list[Interrupted], list[str]]:
    """Fit the session to the plan: reset phases a killed run left and phases that changed."""
    plan, prints, at = graph.plan, fingerprints(graph), now()
    interrupted: list[Interrupted] = []
    changed: list[str] = []
    phases: dict[str, PhaseState] = {}
    for phase in plan.phases:
        agents = (phase.agent,) if phase.agent else ()
        old = doc.phases.get(phase.id) or PhaseState(phase.id, phase.name)
        fitted = {
            "name": phase.name,
            "agents": tuple(dict.fromkeys((*agents, *old.agents))),
            "parallel": phase.parallel,
            "blocked_by": phase.blocked_by,
            "definition": prints[phase.id],
        }
        state = evolve(old, fitted)
        if old.status is Status.IN_PROGRESS:
            interrupted.append(Interrupted(phase.id, phase.files))
            state = reset_phase(state, INTERRUPTED, at)
        elif old.status is not Status.PENDING and old.definition not in (None, prints[phase.id]):
            # A session without fingerprints (Maestro's) is taken as it is.
            changed.append(phase.id)
            state = reset_phase(state, CHANGED, at)
        phases[phase.id] = state
    doc.phases = phases
    return interrupted, changed
