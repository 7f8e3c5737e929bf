"""A read plan as JSON text and back, for a process that is given the plan rather than reading it.

An xdist worker runs the phases of the plan its controller read: reading the file again would
cost each worker what it cost the controller (detection, the reader, the schema, validation), and
a worker that read the file after the user changed it would collect other phases than the
controller. The text holds the plan as validated, warnings and normalised paths included, so the
plan that comes back is equal to the one that went.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path, PurePath
from typing import Any

from .model import Assumption, Check, Files, Phase, Plan


def plan_to_wire(plan: Plan) -> str:
    return json.dumps(plan, default=_plain)


def plan_from_wire(text: str) -> Plan:
    data = json.loads(text)
    phases = tuple(_phase(raw) for raw in data.pop("phases"))
    return Plan(path=Path(data.pop("path")), phases=phases, **_tuples(data))


def _plain(value: object) -> object:
    """What ``json`` cannot write itself: a dataclass as the mapping of its fields (a tuple is
    written as a list: ``_tuples`` turns them back), a path as its text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(f"a plan holds no {type(value).__name__}")


def _tuples(data: dict[str, Any]) -> dict[str, Any]:
    """The model's sequences are all tuples."""
    return {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}


def _phase(raw: dict[str, Any]) -> Phase:
    files = Files(**_tuples(raw.pop("files")))
    acceptance = tuple(Check(**check) for check in raw.pop("acceptance"))
    assumptions = tuple(Assumption(**assumption) for assumption in raw.pop("assumptions"))
    return Phase(files=files, acceptance=acceptance, assumptions=assumptions, **_tuples(raw))
