"""Plan validation (Maestro's ``validate_plan`` rules): errors refuse a plan, warnings stay."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

from .. import numbers
from .errors import PlanError, quoted
from .graph import PlanGraph
from .model import Phase, Plan
from .paths import normal_phase

_BAD_ID = re.compile(r"::|\[|\]|^\s|\s$|[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


# Twice the largest plan the benchmarks time (10,000 phases load in about a second): past it, a
# plan is refused before its phases cost minutes to check.
MAX_PHASES = 20_000


def check_phase_count(count: int, path: Path | str) -> None:
    if count > MAX_PHASES:
        raise PlanError(
            f"has {count:,} phases, over the limit of {MAX_PHASES:,}: split the plan", path
        )


def validate(plan: Plan) -> PlanGraph:
    """Raise ``PlanError`` for the first error; return the graph of the plan, the plan (its
    ``plan``) with its warnings attached."""
    if not plan.phases:
        raise PlanError("no phases found", plan.path)
    for name, text in (
        ("root", plan.root or ""),
        *(("isolate_include", g) for g in plan.isolate_include),
    ):
        if "\x00" in text:
            raise PlanError(f"field {name!r} holds a NUL character: {quoted(text)}", plan.path)
    check_phase_count(len(plan.phases), plan.path)
    seen: dict[str, Phase] = {}
    for phase in plan.phases:
        _check_phase(plan, phase)
        if phase.id in seen:
            first = seen[phase.id].line
            also = f" (first defined at line {first})" if first else ""
            raise PlanError(f"duplicate phase id{also}", plan.path, phase.line, phase.id)
        seen[phase.id] = phase
    # One spelling per declared file (``./a`` is ``a``), before any conflict is computed.
    phases = tuple(normal_phase(phase) for phase in plan.phases)
    if any(new is not old for new, old in zip(phases, plan.phases, strict=True)):
        plan = dataclasses.replace(plan, phases=phases)
    written: set[str] = set()
    backwards = True  # every dependency written before its phase
    for phase in plan.phases:
        for dep in phase.blocked_by:
            if dep not in seen:
                raise PlanError(
                    f"depends on unknown phase {quoted(dep)}", plan.path, phase.line, phase.id
                )
            if dep == phase.id:
                raise PlanError("depends on itself", plan.path, phase.line, phase.id)
            backwards = backwards and dep in written
        written.add(phase.id)
    graph = PlanGraph(plan)
    if not backwards:  # dependencies that all point backwards cannot form a cycle
        _check_cycles(plan, graph)
    return graph.with_warnings((*plan.warnings, *graph.warnings()))


# A phase's numbers: what each must be (``numbers.py`` states why these maxima).
_NUMBERS = (
    ("timeout", numbers.TIMEOUT),
    ("max_retries", numbers.RETRIES),
    ("estimate", numbers.ESTIMATE),
    ("budget_usd", numbers.Bounds(0, numbers.DOLLARS.most, above=True)),
)


def _check_phase(plan: Plan, phase: Phase) -> None:
    for name, bounds in _NUMBERS:
        value = getattr(phase, name)
        if value is None:
            continue
        try:
            bounds.check(value)
        except numbers.NumberError as error:
            raise PlanError(f"field {name!r} {error}", plan.path, phase.line, phase.id) from None
    for name, text in _texts(phase):
        if "\x00" in text:  # no OS call takes it: a command, a path, an argument
            raise PlanError(
                f"field {name!r} holds a NUL character: {quoted(text)}",
                plan.path,
                phase.line,
                phase.id,
            )
    if not phase.id or _BAD_ID.search(phase.id):
        raise PlanError(
            "invalid phase id: it must be non-empty and contain no '::', '[', ']' or control "
            "characters",
            plan.path,
            phase.line,
            phase.id,
        )
    for path in (*phase.files.all(), *phase.reads):
        if not path.strip():
            raise PlanError("has an empty file path", plan.path, phase.line, phase.id)
        if _may_be_absolute(path) and (
            PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute()
        ):
            raise PlanError(
                f"file {path!r} is absolute; plan paths are relative to the project root",
                plan.path,
                phase.line,
                phase.id,
            )
        if ".." in path and ".." in PurePosixPath(path.replace("\\", "/")).parts:
            raise PlanError(
                f"file {path!r} leaves the project root ('..')", plan.path, phase.line, phase.id
            )


def _texts(phase: Phase) -> Iterator[tuple[str, str]]:
    """Every text of the phase, with the field it is in."""
    for name in ("name", "agent", "model", "escalate_model", "runtime", "description", "fallback"):
        yield name, getattr(phase, name) or ""
    for name in ("run", "reads", "tags", "constraints", "rollback_triggers"):
        for text in getattr(phase, name):
            yield name, text
    for text in phase.files.all():
        yield "files", text
    for check in phase.acceptance:
        yield from (("acceptance", check.criterion), ("acceptance", check.check or ""))
    for assumption in phase.assumptions:
        yield from (("assumptions", assumption.claim), ("assumptions", assumption.verify or ""))


def _may_be_absolute(path: str) -> bool:
    """False for a path that no OS takes for absolute, without building path objects (slow, and
    a plan has one or more per phase): an absolute path starts with a separator (POSIX root,
    Windows UNC share) or has a drive (``C:``) before its root."""
    return path[:1] in ("/", "\\") or path[1:2] == ":"


def _check_cycles(plan: Plan, graph: PlanGraph) -> None:
    cycle = graph.dependency_cycle()
    if cycle is not None:
        phase = plan.phase(cycle[0])
        shown = [quoted(pid, 40)[1:-1] for pid in cycle]
        what = "dependency cycle"
        if len(shown) > 12:  # the ends tell which phases to look at; a line holds no more
            what += f" of {len(cycle) - 1} phases"
            shown = [*shown[:6], f"… ({len(shown) - 11} more) …", *shown[-5:]]
        raise PlanError(
            f"{what}: " + " -> ".join(shown),
            plan.path,
            phase.line,
            phase.id,
        )
