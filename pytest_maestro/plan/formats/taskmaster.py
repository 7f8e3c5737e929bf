"""Taskmaster ``tasks.json`` (eyaltoledano/claude-task-master, ``docs/task-structure.md``).

Two shapes: the legacy ``{"tasks": [...]}`` and the tagged ``{"<tag>": {"tasks": [...]}}``. The
tag read is ``--maestro-tag``, else the ``currentTag`` of a ``.taskmaster/state.json`` beside or
above the file, else ``master``, else the only one. A task with subtasks is a group: its subtasks
are the phases (id ``4.2``) and inherit the task's dependencies; a dependency on a group means all
its phases (a subtask that depends on a sibling inherits them through it). Subtask dependencies
are sibling numbers (``[1, 2]``) or dotted ids (``"4.1"``); ids
are ints or strings, with gaps. ``description`` and ``details`` go to the prompt, ``testStrategy``
is a prose criterion, ``priority`` (high, medium, low) orders ready phases when nothing else
does. Status ``done`` or ``completed`` is done; a status outside Taskmaster's set is read as not
done, with a warning.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import PlanError
from ..model import Check, Phase, Plan
from ..source import Source, read_bounded
from ._deps import without_implied
from ._structured import DataPath, Document, describe, parse_json

NAME = "taskmaster"
EXPECTS = "JSON 'tasks' with 'title'"

DONE = frozenset({"done", "completed"})
STATUSES = DONE | {"pending", "in-progress", "review", "deferred", "cancelled", "blocked"}
_PRIORITY = {"high": 0, "medium": 1, "low": 2}
_STATE_LIMIT = 1024 * 1024


def _is_tasks(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(t, dict) and "id" in t and "title" in t for t in value)
    )


def detect(source: Source) -> bool:
    data = source.json_data
    if not isinstance(data, dict) or "schemaVersion" in data or "phases" in data:
        return False
    if "tasks" in data:
        return _is_tasks(data["tasks"])
    tagged = [value for value in data.values() if isinstance(value, dict) and "tasks" in value]
    return bool(tagged) and all(_is_tasks(value["tasks"]) for value in tagged)


def read(source: Source) -> Plan:
    document = parse_json(source)
    data = document.data
    if not isinstance(data, dict):
        raise PlanError(f"not a Taskmaster tasks.json: expected {EXPECTS}", source.path)
    at, tag = _tasks_at(data, source)
    tasks = data["tasks"] if tag is None else data[tag]["tasks"]
    if not isinstance(tasks, list):
        raise PlanError("'tasks' must be a list", source.path, document.line_of(at))
    reader = _Reader(source, document, at)
    for index, task in enumerate(tasks):
        reader.add_task(task, (*at, index))
    phases = sorted(reader.phases(), key=lambda p: _PRIORITY.get(reader.priority[p.id], 1))
    title = "Taskmaster tasks" if tag is None else f"Taskmaster tasks, tag {tag!r}"
    return Plan(source.path, NAME, tuple(phases), title, warnings=tuple(reader.warnings))


def _tasks_at(data: dict[str, Any], source: Source) -> tuple[DataPath, str | None]:
    """Where the tasks are, and the tag they are under (None: the legacy shape)."""
    if "tasks" in data:
        if source.tag not in (None, "master"):
            raise PlanError(f"has no tags (the legacy shape): no tag {source.tag!r}", source.path)
        return ("tasks",), None
    tags = [key for key, value in data.items() if isinstance(value, dict) and "tasks" in value]
    wanted = source.tag or _current_tag(source.path)
    if wanted is not None and wanted in tags:
        return (wanted, "tasks"), wanted
    if source.tag is not None:
        raise PlanError(f"has no tag {source.tag!r}; tags: {', '.join(tags)}", source.path)
    chosen = "master" if "master" in tags else tags[0] if len(tags) == 1 else None
    if chosen is None:
        raise PlanError(
            f"holds several tags ({', '.join(tags)}): choose one with --maestro-tag", source.path
        )
    return (chosen, "tasks"), chosen


def _current_tag(path: Path) -> str | None:
    """The ``currentTag`` of the nearest ``.taskmaster/state.json`` beside or above the plan."""
    for folder in list(path.resolve().parents)[:4]:
        for state in (folder / "state.json", folder / ".taskmaster" / "state.json"):
            if state.is_file():
                try:
                    data = json.loads(read_bounded(state, _STATE_LIMIT, "Taskmaster state"))
                except (PlanError, ValueError):
                    return None
                tag = data.get("currentTag") if isinstance(data, dict) else None
                return tag if isinstance(tag, str) else None
    return None


class _Reader:
    def __init__(self, source: Source, document: Document, at: DataPath) -> None:
        self.source = source
        self.document = document
        self.at = at
        self.members: dict[str, list[str]] = {}  # task id -> its phase ids
        self.raw: list[tuple[dict[str, Any], DataPath, str, list[Any]]] = []
        self.priority: dict[str, str] = {}
        self.warnings: list[str] = []

    def error(self, message: str, at: DataPath, phase: str | None = None) -> PlanError:
        return PlanError(message, self.source.path, self.document.line_of(at), phase)

    def add_task(self, task: Any, at: DataPath) -> None:
        if not isinstance(task, dict):
            raise self.error(f"a task must be an object, not {describe(task)}", at)
        task_id = self._id(task.get("id"), (*at, "id"))
        deps = self._list(task, "dependencies", at, task_id)
        subtasks = self._list(task, "subtasks", at, task_id)
        priority = str(task.get("priority") or "medium")
        if not subtasks:
            self._add(task, at, task_id, deps, task_id, priority)
            return
        parent = f"Part of task {task_id}: {task.get('title', '')}\n{task.get('description', '')}"
        for index, subtask in enumerate(subtasks):
            sub_at = (*at, "subtasks", index)
            if not isinstance(subtask, dict):
                raise self.error(f"a subtask must be an object, not {describe(subtask)}", sub_at)
            sub_id = f"{task_id}.{self._id(subtask.get('id'), (*sub_at, 'id'))}"
            sub_deps = [
                dep if isinstance(dep, str) and "." in dep else f"{task_id}.{dep}"
                for dep in self._list(subtask, "dependencies", sub_at, sub_id)
            ]
            status = subtask.get("status", task.get("status"))
            raw = {**subtask, "status": status, "parent": parent.strip()}
            # The task's dependencies, where no sibling stands between them and the subtask.
            inherited = [] if sub_deps else deps
            self._add(raw, sub_at, sub_id, [*inherited, *sub_deps], task_id, priority)

    def _add(
        self,
        raw: dict[str, Any],
        at: DataPath,
        phase_id: str,
        deps: list[Any],
        task: str,
        priority: str,
    ) -> None:
        self.members.setdefault(task, []).append(phase_id)
        self.raw.append((raw, at, phase_id, deps))
        self.priority[phase_id] = priority

    def _id(self, value: Any, at: DataPath) -> str:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or str(value) == "":
            raise self.error(f"'id' must be a number or a string, not {describe(value)}", at)
        return str(value)

    def _list(self, raw: dict[str, Any], key: str, at: DataPath, phase: str) -> list[Any]:
        value = raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(f"'{key}' must be a list, not {describe(value)}", (*at, key), phase)
        return value

    def phases(self) -> list[Phase]:
        phases = [self._phase(*entry) for entry in self.raw]
        reduced = without_implied({phase.id: phase.blocked_by for phase in phases})
        return [replace(phase, blocked_by=reduced[phase.id]) for phase in phases]

    def _phase(self, raw: dict[str, Any], at: DataPath, phase_id: str, deps: list[Any]) -> Phase:
        blocked_by = [m for dep in deps for m in self.members.get(str(dep), [str(dep)])]
        status = str(raw.get("status") or "pending")
        if status not in STATUSES:
            line = self.document.line_of((*at, "status"))
            self.warnings.append(
                f"{self.source.path}:{line}: phase {phase_id!r}: unknown status {status!r}, "
                "read as not done"
            )
        strategy = raw.get("testStrategy")
        text = [str(raw[key]) for key in ("parent", "description", "details") if raw.get(key)]
        return Phase(
            id=phase_id,
            name=str(raw.get("title") or phase_id),
            line=self.document.line_of(at),
            blocked_by=tuple(dict.fromkeys(d for d in blocked_by if d != phase_id)),
            acceptance=(Check(f"Test strategy: {strategy}"),) if strategy else (),
            description="\n\n".join(text),
            done=status in DONE,
        )
