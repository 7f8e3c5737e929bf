"""Native YAML/JSON plans, this project's own format, validated by ``plan/native.schema.json``.

Top level: ``title``, ``root``, ``context``, ``tags``, ``isolate_include`` and ``phases``
(required). Each phase needs
an ``id``; every other field is optional, and a field set to null counts as absent. Unknown
fields are errors, with the closest known name suggested, so that a typo never passes silently.

``detect`` claims every ``.json``, ``.yaml`` and ``.yml`` file the more specific structured readers
(design-v2, maestro-json, tried first) left, so that a JSON or YAML file of another schema gets
"not a plan" from ``read`` instead of an empty plan or a Markdown reader's guess.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import PlanError
from ..model import Assumption, Check, Files, Phase, Plan
from ..source import Source
from ..validate import check_phase_count
from ._schema_errors import Items, SchemaValidator, raise_first_error
from ._structured import STRUCTURED_SUFFIXES, Document, id_text, kind_of, parse, raw_phase_id

NAME = "native"
EXPECTS = "YAML/JSON 'phases' list"

NOT_A_PLAN = (
    "not a plan: expected a 'phases' list (native or Maestro phases JSON), 'tasks' with "
    "'schemaVersion' (design-v2) or 'tasks' with 'title' (taskmaster), found {found}"
)

_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".txt"})
_PHASES_KEY = re.compile(r"^phases[ \t]*:", re.MULTILINE)


def detect(source: Source) -> bool:
    suffix = source.path.suffix.lower()
    if suffix in STRUCTURED_SUFFIXES:
        return True
    if suffix in _MARKDOWN_SUFFIXES:
        return False
    data = source.json_data
    if data is None and _PHASES_KEY.search(source.text):
        data = source.yaml_data
    return isinstance(data, dict) and isinstance(data.get("phases"), list)


def read(source: Source) -> Plan:
    path = source.path
    document = parse(source)
    data = document.data
    if data is None:
        raise PlanError("the plan is empty", path)
    if not isinstance(data, dict) or "phases" not in data:
        raise PlanError(NOT_A_PLAN.format(found=kind_of(data)), path)
    if isinstance(data["phases"], list):
        check_phase_count(len(data["phases"]), path)  # before checking each costs minutes
    if document.may_hold_nulls:
        data = _without_nulls(data)
    _validate(data, document, path)
    phases = tuple(
        _phase(raw, document.lines.get(("phases", index)))
        for index, raw in enumerate(data["phases"])
    )
    return Plan(
        path=path,
        format=NAME,
        phases=phases,
        title=data.get("title", "").strip(),
        context=data.get("context", "").strip(),
        root=data.get("root"),
        tags=tuple(data.get("tags", ())),
        isolate_include=tuple(data.get("isolate_include", ())),
    )


@functools.cache
def schema() -> dict[str, Any]:
    """The native plan format's JSON Schema (draft 2020-12), as shipped with the package."""
    text = resources.files("pytest_maestro.plan").joinpath("native.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@functools.cache
def _validator() -> SchemaValidator:
    return SchemaValidator(schema())


def _validate(data: dict[str, Any], document: Document, path: Path) -> None:
    try:
        errors = list(_validator().iter_errors(data))
    except RecursionError:
        raise PlanError("the plan refers to itself (a recursive YAML anchor)", path) from None
    raise_first_error(errors, data, document, path, Items(("phases",), raw_phase_id))


def _without_nulls(value: Any, depth: int = 0) -> Any:
    """Drop null members (``reads:`` left empty in YAML) down to the items of phase fields."""
    if depth > 4:
        return value
    # Scalars are tested inline rather than passed down: most values are, and a call each
    # would double the cost of this walk over a large plan.
    depth += 1
    if isinstance(value, dict):
        return {
            key: _without_nulls(item, depth) if isinstance(item, (dict, list)) else item
            for key, item in value.items()
            if item is not None
        }
    if isinstance(value, list):
        return [
            _without_nulls(item, depth) if isinstance(item, (dict, list)) else item
            for item in value
        ]
    return value


def _phase(raw: dict[str, Any], line: int | None) -> Phase:
    phase_id = id_text(raw["id"])
    return Phase(
        id=phase_id,
        name=raw.get("name", phase_id),
        line=line,
        agent=raw.get("agent"),
        model=raw.get("model"),
        runtime=raw.get("runtime"),
        budget_usd=_number(raw.get("budget_usd")),
        blocked_by=tuple(id_text(dep) for dep in _as_list(raw.get("blocked_by"))),
        files=_files(raw.get("files")),
        reads=tuple(raw.get("reads", ())),
        acceptance=tuple(_check(item) for item in raw.get("acceptance", ())),
        run=tuple(_as_list(raw.get("run"))),
        description=_description(raw),
        parallel=raw.get("parallel", True),
        timeout=_number(raw.get("timeout")),
        max_retries=raw.get("max_retries"),
        estimate=_number(raw.get("estimate")),
        tags=tuple(raw.get("tags", ())),
        assumptions=tuple(_assumption(item) for item in raw.get("assumptions", ())),
        fallback=raw.get("fallback"),
        rollback_triggers=tuple(raw.get("rollback_triggers", ())),
        constraints=tuple(raw.get("constraints", ())),
        review=raw.get("review"),
        escalate_model=raw.get("escalate_model"),
    )


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _files(value: Any) -> Files:
    if value is None:
        return Files()
    if isinstance(value, list):
        return Files(modify=tuple(value))
    return Files(
        create=tuple(value.get("create", ())),
        modify=tuple(value.get("modify", ())),
        delete=tuple(value.get("delete", ())),
    )


def _check(item: str | dict[str, Any]) -> Check:
    if isinstance(item, str):
        return Check(item)
    command: str | None = item.get("check")
    criterion: str = item.get("criterion") or command or ""
    return Check(criterion, command)


def _assumption(item: dict[str, Any]) -> Assumption:
    return Assumption(item["claim"], item.get("verify"), item.get("severity", "blocking"))


def _description(raw: dict[str, Any]) -> str:
    parts = (raw.get("description", ""), raw.get("prompt", ""))
    return "\n\n".join(part.strip() for part in parts if part.strip())


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
