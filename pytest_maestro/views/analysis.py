"""`--maestro-analyze`: waves, chunks, critical path and profile of a plan as text, JSON or Mermaid.

Nothing here runs a phase; everything comes from :class:`~pytest_maestro.plan.graph.PlanGraph`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from ..plan.gc_pause import paused_gc
from ..plan.graph import Chunk, PlanGraph, wave_overlap
from ..plan.model import Phase, Plan
from .formats import ANALYZE_FORMATS as FORMATS
from .mermaid import mermaid_id, mermaid_label

_ENCODER = json.JSONEncoder(
    ensure_ascii=False
)  # one encoder: json.dumps(**options) builds one per call


def render(plan: Plan, fmt: str = "text", graph: PlanGraph | None = None) -> str:
    """The analysis of ``plan`` in ``fmt`` (one of :data:`FORMATS`)."""
    # The graph computes its answers on first use, here: see paused_gc for why without the GC.
    with paused_gc():
        return _render(plan, fmt, graph or PlanGraph(plan))


def _render(plan: Plan, fmt: str, graph: PlanGraph) -> str:
    if fmt == "text":
        return render_text(plan, graph)
    if fmt == "json":
        return dump_json(_sections(plan, graph))
    if fmt == "mermaid":
        return render_mermaid(plan, graph)
    raise ValueError(f"unknown analysis format {fmt!r}; choose one of: {', '.join(FORMATS)}")


# -- json ----------------------------------------------------------------------------------------


def analysis_dict(plan: Plan, graph: PlanGraph) -> dict[str, Any]:
    """The ``--maestro-analyze=json`` document as Python values."""
    return {
        key: list(value) if isinstance(value, Iterator) else value
        for key, value in _sections(plan, graph)
    }


def _sections(plan: Plan, graph: PlanGraph) -> Iterator[tuple[str, Any]]:
    """Top-level keys in order; the long lists as generators, so that rendering never holds
    10,000 phase dicts at once (each one would be garbage-collector work)."""
    profile = graph.profile()
    yield "plan", str(plan.path)
    yield "format", plan.format
    yield "phases", (_phase_dict(phase) for phase in plan.phases)
    yield "waves", graph.waves()
    chunks = (chunk for wave in graph.chunks() for chunk in wave)
    yield (
        "chunks",
        ({"wave": c.wave, "phases": list(c.phases), "files": list(c.files)} for c in chunks),
    )
    yield "critical_path", graph.critical_path()
    yield (
        "profile",
        {
            "total_phases": profile.total_phases,
            "parallel_eligible": profile.parallel_eligible,
            "batches": profile.batches,
            "sequential_only": profile.sequential_only,
            "max_width": profile.max_width,
        },
    )
    yield "warnings", all_warnings(plan, graph)


def dump_json(sections: Iterable[tuple[str, Any]]) -> str:
    """One top-level key per line and one list item per line: readable, and written by the C
    encoder (``indent=`` would switch to the pure-Python one, ten times slower at 10,000 phases)."""
    lines = []
    for key, value in sections:
        name = json.dumps(key)
        if isinstance(value, (list, Iterator)):
            items = ",\n".join("    " + _ENCODER.encode(item) for item in value)
            lines.append(f"  {name}: [\n{items}\n  ]" if items else f"  {name}: []")
        else:
            lines.append(f"  {name}: {_ENCODER.encode(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def all_warnings(plan: Plan, graph: PlanGraph) -> list[str]:
    """The reader's and the graph's warnings; a validated plan already holds the graph's."""
    return list(dict.fromkeys((*plan.warnings, *graph.warnings())))


def _phase_dict(phase: Phase) -> dict[str, Any]:
    return {
        "id": phase.id,
        "name": phase.name,
        "agent": phase.agent,
        "blocked_by": list(phase.blocked_by),
        "files": {
            "create": list(phase.files.create),
            "modify": list(phase.files.modify),
            "delete": list(phase.files.delete),
        },
        "reads": list(phase.reads),
        "acceptance": [{"criterion": c.criterion, "check": c.check} for c in phase.acceptance],
        "run": list(phase.run),
        "line": phase.line,
        **({"done": True} if phase.done else {}),
    }


# -- text ----------------------------------------------------------------------------------------


def render_text(plan: Plan, graph: PlanGraph) -> str:
    chunks = graph.chunks()
    count = sum(len(wave) for wave in chunks)
    lines = [
        f"Plan: {plan.path} ({plan.format}, {len(plan.phases)} phases)",
        "",
        "## Parallel Execution Analysis",
        "",
        f"**{count} {_plural(count, 'chunk')} across {len(chunks)} "
        f"{_plural(len(chunks), 'wave')}.**",
    ]
    for number, wave in enumerate(chunks, start=1):
        lines += ["", *_wave_lines(plan, graph, number, wave)]
    lines += ["", *_summary_lines(plan, graph)]
    return "\n".join(lines) + "\n"


def _wave_lines(plan: Plan, graph: PlanGraph, number: int, chunks: list[Chunk]) -> list[str]:
    when = "parallel" if len(chunks) > 1 else "one chunk"
    after = f"after Wave {number - 1}, " if number > 1 else ""
    lines = [
        f"### Wave {number} ({after}{when})",
        "| Chunk | Phases | Files | Dependencies |",
        "|-------|--------|-------|--------------|",
    ]
    for chunk in chunks:
        phases = ", ".join(
            pid if plan.phases[graph.index[pid]].parallel else f"{pid} (not parallel)"
            for pid in chunk.phases
        )
        files = ", ".join(f"`{path}`" for path in chunk.files) or "-"
        if chunk.reads:
            files += " (reads " + ", ".join(f"`{path}`" for path in chunk.reads) + ")"
        deps = ", ".join(f"Chunk {label}" for label in chunk.depends_on) or "None"
        cells = (chunk.label, phases, files, deps)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if len(chunks) > 1:
        lines += ["", *_proof_lines(number, chunks)]
    return lines


def _proof_lines(number: int, chunks: list[Chunk]) -> list[str]:
    lines = [f"> **Non-intersection proof (Wave {number}):**"]
    lines += [f"> Chunk {c.label} files: `{{{', '.join(c.files)}}}`" for c in chunks]
    shared = wave_overlap(chunks)
    if shared:  # cannot happen for PlanGraph's chunks; shown rather than hidden if it ever does
        lines.append(f"> Intersection: `{{{', '.join(sorted(shared))}}}` (NOT safe to parallelize)")
    else:
        lines.append("> Intersection: `∅` (no file conflicts, safe to parallelize)")
    return lines


def _summary_lines(plan: Plan, graph: PlanGraph) -> list[str]:
    path = graph.critical_path()
    profile = graph.profile()
    workers = graph.recommended_workers()
    lines = [
        "## Critical path",
        f"{' -> '.join(path)} ({_path_cost(plan, graph, path)})",
        "",
        "## Execution profile",
        f"total_phases: {profile.total_phases}  parallel_eligible: {profile.parallel_eligible}  "
        f"batches: {profile.batches}  sequential_only: {profile.sequential_only}  "
        f"max_width: {profile.max_width}",
        "",
        f"**Recommended**: -n {workers}"
        if workers > 1
        else "**Recommended**: no -n (no two phases can run at the same time)",
    ]
    warnings = all_warnings(plan, graph)
    if warnings:
        lines += ["", "## Warnings", *(f"- {warning}" for warning in warnings)]
    return lines


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def _path_cost(plan: Plan, graph: PlanGraph, path: list[str]) -> str:
    if all(phase.estimate is None for phase in plan.phases):
        return f"{len(path)} {_plural(len(path), 'phase')}; no estimates given"
    return f"{graph.path_duration(path):g} s estimated"


# -- mermaid -------------------------------------------------------------------------------------


def render_mermaid(plan: Plan, graph: PlanGraph) -> str:
    node = {phase.id: mermaid_id(i, phase.id) for i, phase in enumerate(plan.phases)}
    lines = ["flowchart TD"]
    for number, wave in enumerate(graph.waves(), start=1):
        lines.append(f'  subgraph wave{number}["Wave {number}"]')
        for phase_id in wave:
            phase = plan.phases[graph.index[phase_id]]
            label = mermaid_label(f"{phase.id}: {phase.name}" if phase.name else phase.id)
            lines.append(f'    {node[phase_id]}["{label}"]')
        lines.append("  end")
    for phase in plan.phases:
        lines += [f"  {node[dep]} --> {node[phase.id]}" for dep in dict.fromkeys(phase.blocked_by)]
    critical = graph.critical_path()
    if len(critical) > 1:
        lines.append("  classDef critical stroke-width:3px")
        lines.append(f"  class {','.join(node[pid] for pid in critical)} critical")
    return "\n".join(lines) + "\n"
