"""Maestro phases JSON: the ``phases`` that Maestro's ``validate_plan`` and ``create_session`` take.

Three shapes are read: a bare JSON list of phases; an object with a ``phases`` list (the
``create_session`` arguments: ``session_id``, ``task``, ``task_complexity``, ...); and
``{"plan": {"phases": [...]}, "task_complexity": ...}`` (the ``validate_plan`` arguments).

Phase fields follow Maestro's plan schema: ``id`` (an integer from 1, or a string), ``name``,
``agent``, ``parallel``, ``blocked_by`` (ids), ``files`` (the planned files, read as files to
modify), ``kind`` (kept as a tag) and ``parent_phase_id``; ``files_created``, ``files_modified``
and ``files_deleted`` of older Maestro versions are read as create, modify and delete. Like
Maestro, the reader ignores other fields, and a phase without ``parallel`` is sequential.

Detection — specific, so that a native JSON plan is never read as this format:

1. the text is JSON and holds its phases in one of the three shapes, a non-empty list of objects;
2. no native-only field appears: ``title``, ``root``, ``context``, ``tags`` or ``$schema`` at the
   top level, or in a phase any of ``NATIVE_ONLY_PHASE_FIELDS``, or ``files`` as a mapping;
3. and something says Maestro: a bare list or the ``plan`` wrapper, a ``create_session`` /
   ``validate_plan`` argument at the top level, a Maestro-only phase field (``kind``,
   ``parent_phase_id``, ``files_created``, ...), or every phase has all of Maestro's required
   fields (``id``, ``name``, ``agent``, ``parallel``, ``blocked_by``).
"""

from __future__ import annotations

import functools
from typing import Any

from ..errors import PlanError
from ..model import Files, Phase, Plan
from ..source import Source
from ._json_lines import lines_under
from ._schema_errors import Items, SchemaValidator, raise_first_error
from ._structured import DataPath, Document, id_text, parse_json, raw_phase_id

NAME = "maestro-json"
EXPECTS = "JSON Maestro phases"

MAESTRO_REQUIRED_FIELDS = frozenset({"id", "name", "agent", "parallel", "blocked_by"})
MAESTRO_ONLY_PHASE_FIELDS = frozenset(
    {"kind", "parent_phase_id", "files_created", "files_modified", "files_deleted"}
)
MAESTRO_TOP_LEVEL_FIELDS = frozenset(
    {
        "session_id",
        "task",
        "task_complexity",
        "execution_mode",
        "workflow_mode",
        "design_document",
        "implementation_plan",
        "implementation_plan_content",
        "implementation_plan_filename",
    }
)
NATIVE_ONLY_TOP_LEVEL_FIELDS = frozenset({"title", "root", "context", "tags", "$schema"})
NATIVE_ONLY_PHASE_FIELDS = frozenset(
    {
        "run",
        "acceptance",
        "reads",
        "description",
        "prompt",
        "timeout",
        "max_retries",
        "estimate",
        "assumptions",
        "fallback",
        "rollback_triggers",
        "constraints",
        "model",
        "tags",
    }
)

_ID = {
    "type": ["integer", "string"],
    "minimum": 1,
    "minLength": 1,
    "x-expected": "a phase id (an integer from 1, or a string)",
}
_PATHS = {"type": ["array", "null"], "items": {"type": "string", "minLength": 1}}
_PHASES = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "x-expected": "a phase object",
        "required": ["id"],
        "properties": {
            "id": _ID,
            "name": {"type": ["string", "null"], "minLength": 1},
            "agent": {"type": ["string", "null"], "minLength": 1},
            "parallel": {"type": ["boolean", "null"]},
            "blocked_by": {"type": ["array", "null"], "items": _ID},
            "files": _PATHS,
            "files_created": _PATHS,
            "files_modified": _PATHS,
            "files_deleted": _PATHS,
            "kind": {"enum": ["implementation", "review", "revision", "verification", None]},
            "parent_phase_id": {**_ID, "type": ["integer", "string", "null"]},
        },
    },
}


def detect(source: Source) -> bool:
    data = source.json_data
    located = _locate_phases(data)
    if located is None:
        return False
    _, phases = located
    if not phases or not all(isinstance(phase, dict) for phase in phases):
        return False
    top_level = set(data) if isinstance(data, dict) else set()
    if top_level & NATIVE_ONLY_TOP_LEVEL_FIELDS or any(_native_only(p) for p in phases):
        return False
    return (
        not isinstance(data, dict)
        or "plan" in data
        or bool(top_level & MAESTRO_TOP_LEVEL_FIELDS)
        or any(MAESTRO_ONLY_PHASE_FIELDS & set(phase) for phase in phases)
        or all(MAESTRO_REQUIRED_FIELDS.issubset(phase) for phase in phases)
    )


def _native_only(phase: dict[str, Any]) -> bool:
    return bool(NATIVE_ONLY_PHASE_FIELDS & set(phase)) or isinstance(phase.get("files"), dict)


def _locate_phases(data: Any) -> tuple[DataPath, list[Any]] | None:
    """Where the phases list is: ``()``, ``("phases",)`` or ``("plan", "phases")``."""
    if isinstance(data, list):
        return (), data
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("phases"), list):
        return ("phases",), data["phases"]
    plan = data.get("plan")
    if isinstance(plan, dict) and isinstance(plan.get("phases"), list):
        return ("plan", "phases"), plan["phases"]
    return None


def read(source: Source) -> Plan:
    path = source.path
    document = parse_json(source)
    located = _locate_phases(document.data)
    if located is None:
        raise PlanError(
            "not a Maestro phases document: expected a list of phases, "
            "or an object with a 'phases' list",
            path,
        )
    at, raw_phases = located
    # Validate the phases list on its own, with line numbers shifted to match its paths.
    phases_document = Document(raw_phases, lines_under(document.lines, at))
    errors = _validator().iter_errors(raw_phases)
    raise_first_error(errors, raw_phases, phases_document, path, Items((), raw_phase_id))
    task = document.data.get("task") if isinstance(document.data, dict) else None
    task = task.strip() if isinstance(task, str) else ""
    return Plan(
        path=path,
        format=NAME,
        phases=tuple(
            _phase(raw, document.lines.get((*at, index))) for index, raw in enumerate(raw_phases)
        ),
        title=task.splitlines()[0] if task else "",
        context=task,
    )


@functools.cache
def _validator() -> SchemaValidator:
    return SchemaValidator(_PHASES)


def _phase(raw: dict[str, Any], line: int | None) -> Phase:
    phase_id = id_text(raw["id"])
    modify = [*(raw.get("files") or ()), *(raw.get("files_modified") or ())]
    kind = raw.get("kind")
    return Phase(
        id=phase_id,
        name=raw.get("name") or phase_id,
        line=line,
        agent=raw.get("agent") or None,
        parallel=bool(raw.get("parallel")),
        blocked_by=tuple(id_text(dep) for dep in raw.get("blocked_by") or ()),
        files=Files(
            create=tuple(raw.get("files_created") or ()),
            modify=tuple(dict.fromkeys(modify)),
            delete=tuple(raw.get("files_deleted") or ()),
        ),
        tags=(kind,) if kind else (),
    )
