"""``.design/plan.json`` schemaVersion 2, written by the ``/design`` skill of morphiax/claude-do.

Tasks are ordered and their index is their id (``"0"``, ``"1"``, ...); ``blockedBy`` lists
indices. Completed tasks may be trimmed to subject, status, result, metadata.files, blockedBy and
agent.role/model, so every field but ``subject`` is optional. Unknown fields are kept out of the
way rather than refused: the skill adds fields (status, result, attempts, progress) as it runs.

Detected by content: a JSON object with ``schemaVersion`` and ``tasks``. Any other version is
refused by name rather than half-read.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ..errors import PlanError
from ..model import Assumption, Check, Files, Phase, Plan
from ..source import Source
from ._schema_errors import Items, SchemaValidator, raise_first_error
from ._structured import Document, describe, parse_json

NAME = "design-v2"
EXPECTS = "JSON 'schemaVersion'"
SCHEMA_VERSION = 2

_TEXT = {"type": ["string", "null"]}
_TEXTS = {"type": ["array", "null"], "items": {"type": "string"}}
_TEXT_OR_TEXTS = {
    "type": ["string", "array", "null"],
    "items": {"type": "string"},
    "x-expected": "a text or a list of texts",
}
_PATHS = {"type": ["array", "null"], "items": {"type": "string", "minLength": 1}}

_AGENT = {
    "type": "object",
    "properties": {
        "role": _TEXT,
        "model": _TEXT,
        "approach": _TEXT,
        "expertise": _TEXT_OR_TEXTS,
        "priorArt": _TEXT_OR_TEXTS,
        "fallback": _TEXT,
        "constraints": _TEXT_OR_TEXTS,
        "rollbackTriggers": _TEXTS,
        "contextFiles": {
            "type": ["array", "null"],
            "items": {
                "type": ["object", "string"],
                "properties": {"path": {"type": "string"}, "reason": _TEXT},
            },
        },
        "assumptions": {
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "required": ["claim"],
                "properties": {
                    "claim": {"type": "string", "minLength": 1},
                    "verify": _TEXT,
                    "severity": {"enum": ["blocking", "warning", None]},
                },
            },
        },
        "acceptanceCriteria": {
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "required": ["criterion"],
                "properties": {"criterion": {"type": "string", "minLength": 1}, "check": _TEXT},
            },
        },
    },
}

_TASK = {
    "type": "object",
    "x-expected": "a task object",
    "required": ["subject"],
    "properties": {
        "subject": {"type": "string", "minLength": 1},
        "description": _TEXT,
        "blockedBy": {
            "type": ["array", "null"],
            "x-expected": "a list of task indices",
            "items": {"type": "integer", "minimum": 0, "x-expected": "a task index (an integer)"},
        },
        "metadata": {
            "type": ["object", "null"],
            "properties": {
                "type": _TEXT,
                "reads": _PATHS,
                "files": {
                    "type": ["object", "null"],
                    "properties": {"create": _PATHS, "modify": _PATHS, "delete": _PATHS},
                },
            },
        },
        "agent": {**_AGENT, "type": ["object", "null"]},
    },
}

_PLAN = {
    "type": "object",
    "required": ["schemaVersion", "tasks"],
    "properties": {
        "goal": _TEXT,
        "context": {
            "type": ["object", "null"],
            "properties": {
                "stack": _TEXT_OR_TEXTS,
                "conventions": _TEXT_OR_TEXTS,
                "testCommand": _TEXT,
                "buildCommand": _TEXT,
            },
        },
        "tasks": {"type": "array", "minItems": 1, "items": _TASK},
    },
}


def detect(source: Source) -> bool:
    data = source.json_data
    return isinstance(data, dict) and "schemaVersion" in data and "tasks" in data


def read(source: Source) -> Plan:
    path = source.path
    document = parse_json(source)
    data = document.data
    if not isinstance(data, dict) or "schemaVersion" not in data:
        raise PlanError("not a design plan: expected a JSON object with 'schemaVersion'", path)
    _check_version(data["schemaVersion"], document, path)
    items = Items(("tasks",), lambda raw, index: str(index), noun="task")
    raise_first_error(_validator().iter_errors(data), data, document, path, items)
    tasks: list[dict[str, Any]] = data["tasks"]
    _check_indices(tasks, document, path)
    phases = tuple(
        _phase(index, task, document.lines.get(("tasks", index)))
        for index, task in enumerate(tasks)
    )
    goal = (data.get("goal") or "").strip()
    return Plan(
        path=path,
        format=NAME,
        phases=phases,
        title=goal.splitlines()[0] if goal else "",
        context=_context(goal, data.get("context") or {}),
        # The skill writes the plan to <project>/.design/plan.json.
        root=".." if path.parent.name == ".design" else None,
    )


@functools.cache
def _validator() -> SchemaValidator:
    return SchemaValidator(_PLAN)


def _check_version(version: Any, document: Document, path: Path) -> None:
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise PlanError(
            f"schemaVersion {describe(version)} is not supported "
            f"(this reader reads design plans of schemaVersion {SCHEMA_VERSION})",
            path,
            document.line_of(("schemaVersion",)),
        )


def _check_indices(tasks: list[dict[str, Any]], document: Document, path: Path) -> None:
    last = len(tasks) - 1
    for index, task in enumerate(tasks):
        for position, dep in enumerate(task.get("blockedBy") or ()):
            if dep > last:
                raise PlanError(
                    f"blockedBy index {dep} is out of range: the plan has {len(tasks)} tasks "
                    f"(0-{last})",
                    path,
                    document.line_of(("tasks", index, "blockedBy", position)),
                    str(index),
                )


def _phase(index: int, task: dict[str, Any], line: int | None) -> Phase:
    agent: dict[str, Any] = task.get("agent") or {}
    metadata: dict[str, Any] = task.get("metadata") or {}
    files: dict[str, Any] = metadata.get("files") or {}
    kind = metadata.get("type")
    return Phase(
        id=str(index),
        name=task["subject"],
        line=line,
        model=agent.get("model"),
        blocked_by=tuple(str(int(dep)) for dep in task.get("blockedBy") or ()),
        files=Files(
            create=tuple(files.get("create") or ()),
            modify=tuple(files.get("modify") or ()),
            delete=tuple(files.get("delete") or ()),
        ),
        reads=tuple(metadata.get("reads") or ()),
        acceptance=tuple(
            Check(item["criterion"], item.get("check") or None)
            for item in agent.get("acceptanceCriteria") or ()
        ),
        description=_description(task, agent),
        tags=(kind,) if kind else (),
        assumptions=tuple(
            Assumption(item["claim"], item.get("verify"), item.get("severity") or "blocking")
            for item in agent.get("assumptions") or ()
        ),
        fallback=agent.get("fallback") or None,
        rollback_triggers=tuple(agent.get("rollbackTriggers") or ()),
        constraints=_texts(agent.get("constraints")),
    )


def _description(task: dict[str, Any], agent: dict[str, Any]) -> str:
    """The task text a prompt needs: description, role, approach, prior art, files to read."""
    parts = [(task.get("description") or "").strip()]
    role = agent.get("role")
    if role:
        expertise = "; ".join(_texts(agent.get("expertise")))
        parts.append(f"Role: {role}" + (f" with expertise in {expertise}" if expertise else ""))
    if agent.get("approach"):
        parts.append(f"Approach: {agent['approach']}")
    prior_art = "; ".join(_texts(agent.get("priorArt")))
    if prior_art:
        parts.append(f"Apply: {prior_art}")
    context_files = [_context_file(item) for item in agent.get("contextFiles") or ()]
    if context_files:
        parts.append("Read before implementing:\n" + "\n".join(context_files))
    return "\n\n".join(part for part in parts if part)


def _context_file(item: str | dict[str, Any]) -> str:
    if isinstance(item, str):
        return f"- {item}"
    reason = item.get("reason")
    return f"- {item.get('path', '')}" + (f" — {reason}" if reason else "")


def _context(goal: str, context: dict[str, Any]) -> str:
    lines = [f"Goal: {goal}"] if goal else []
    stack = "; ".join(_texts(context.get("stack")))
    conventions = "; ".join(_texts(context.get("conventions")))
    if stack:
        lines.append(f"Project: {stack}.")
    if conventions:
        lines.append(f"Conventions: {conventions}.")
    if context.get("testCommand"):
        lines.append(f"Test: {context['testCommand']}")
    if context.get("buildCommand"):
        lines.append(f"Build: {context['buildCommand']}")
    return "\n".join(lines)


def _texts(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)
