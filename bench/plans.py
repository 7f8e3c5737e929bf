"""Random DAG plans for the benchmarks: native plan dicts and the same plan as Markdown.

    from plans import random_plan, write_plan
    plan = random_plan(200, seed=1, edge_probability=0.3, conflict_ratio=0.1, duration=(0.1, 0.5))
    write_plan(plan, tmp / "plan.json")

Run the benchmarks as scripts (``python bench/bench_x.py``) so that ``plans`` is importable.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

PlanDict = dict[str, Any]


def random_plan(
    n: int,
    *,
    seed: int = 0,
    edge_probability: float = 0.3,
    window: int = 8,
    conflict_ratio: float = 0.1,
    shared_files: int | None = None,
    duration: tuple[float, float] = (0.0, 0.0),
    command: str = "sleep {duration:.3f}",
) -> PlanDict:
    """A native plan of ``n`` phases ``p1``..``pn`` forming a random DAG.

    Each phase depends on each of the ``window`` phases written just before it with probability
    ``edge_probability`` (so ``window`` bounds how far back edges reach: a small window gives long,
    narrow plans, a large one with a low probability gives wide ones). Every phase creates its own
    file; with probability ``conflict_ratio`` it also modifies one of ``shared_files`` shared files
    (default: one per 50 phases), which makes file conflicts between concurrent phases. Its
    estimate is drawn uniformly from ``duration`` (seconds) and its ``run`` command is ``command``
    formatted with that duration.
    """
    rng = random.Random(seed)
    pool = shared_files or max(1, n // 50)
    phases = []
    for i in range(1, n + 1):
        earlier = range(max(1, i - window), i)
        seconds = round(rng.uniform(*duration), 3)
        files: dict[str, list[str]] = {"create": [f"src/p{i}.py"]}
        if rng.random() < conflict_ratio:
            files["modify"] = [f"src/shared_{rng.randrange(pool)}.py"]
        phases.append(
            {
                "id": f"p{i}",
                "name": f"Phase {i}",
                "blocked_by": [f"p{j}" for j in earlier if rng.random() < edge_probability],
                "files": files,
                "estimate": seconds,
                "run": [command.format(duration=seconds)],
            }
        )
    return {"phases": phases}


def write_plan(plan: PlanDict, path: Path) -> Path:
    path.write_text(json.dumps(plan, indent=1), encoding="utf-8")
    return path


def tasklist_markdown(plan: PlanDict, title: str = "Benchmark plan") -> str:
    """The plan as a task list (``### T00001: title``, ``**Depends**``), one file per task: the
    shared file it modifies if any, else the file it creates (the format has one Type per task)."""
    number = {phase["id"]: f"T{i:05d}" for i, phase in enumerate(plan["phases"], start=1)}
    parts = [f"# Tasks: {title}\n"]
    for phase in plan["phases"]:
        files = phase["files"]
        kind, path = ("Modify", files["modify"][0]) if files.get("modify") else ("Create", "")
        path = path or files["create"][0]
        depends = ", ".join(number[dep] for dep in phase["blocked_by"]) or "None"
        parts.append(
            f"### {number[phase['id']]}: {phase['name']}\n"
            f"**File(s)**: `{path}`\n"
            f"**Type**: {kind}\n"
            f"**Depends**: {depends}\n"
            "**Acceptance**:\n"
            f"- [ ] `{path}` is in place\n"
        )
    return "\n".join(parts)


def superpowers_markdown(plan: PlanDict, title: str = "Benchmark plan") -> str:
    """The plan as a superpowers plan (``### Task N:``). The format writes no dependencies: each
    task follows the previous one, so this is a chain whatever the DAG was."""
    parts = [f"# {title} Implementation Plan\n", "**Goal:** measure plan loading.\n"]
    for i, phase in enumerate(plan["phases"], start=1):
        files = phase["files"]
        lines = [f"- Create: `{path}`" for path in files.get("create", [])]
        lines += [f"- Modify: `{path}`" for path in files.get("modify", [])]
        parts.append(
            f"### Task {i}: {phase['name']}\n\n**Files:**\n"
            + "\n".join(lines)
            + f"\n\n**Step 1: Run it**\n\nRun: `{phase['run'][0]}`\nExpected: PASS\n"
        )
    return "\n".join(parts)


def steps_markdown(plan: PlanDict, title: str = "Benchmark plan", per_section: int = 10) -> str:
    """The plan as a step plan (``* [ ] **Step N**:`` bullets with ``**Depends**`` and ``**Files**``
    sub-bullets), ``per_section`` steps under each ``### Section K`` heading."""
    number = {phase["id"]: i for i, phase in enumerate(plan["phases"], start=1)}
    parts = [f"# Implementation Plan: {title}\n"]
    for i, phase in enumerate(plan["phases"], start=1):
        if (i - 1) % per_section == 0:
            section = (i - 1) // per_section + 1
            parts.append(f"\n### Section {section}: Part {section}")
        files = phase["files"]
        paths = [*files.get("create", []), *files.get("modify", [])]
        depends = ", ".join(f"Step {number[dep]}" for dep in phase["blocked_by"]) or "None"
        parts.append(
            f"*   [ ] **Step {i}**: {phase['name']}.\n"
            f"    *   **Depends**: {depends}\n"
            f"    *   **Files**: {', '.join(f'`{path}`' for path in paths)}\n"
            f"    *   **Verification**: `{phase['run'][0]}`"
        )
    return "\n".join(parts) + "\n"
