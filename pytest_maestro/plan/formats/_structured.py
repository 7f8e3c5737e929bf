"""Parsing JSON and YAML plans with the line of every value, for one-line errors that point home.

``parse_json`` and ``parse_yaml`` read a :class:`~pytest_maestro.plan.source.Source` and return a
:class:`Document`: the parsed data and, for every path into it (``("phases", 2, "timeout")``), the
line where that value starts — for a mapping member, the line of its key. Syntax errors and
duplicate keys become :class:`PlanError` with a line. YAML is parsed in ``_yaml_lines``, which
only a YAML plan imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import PlanError
from ..source import Source
from ._json_lines import DataPath as DataPath  # re-exported: the readers name paths with it
from ._json_lines import JsonLines, key_text, scan_lines

STRUCTURED_SUFFIXES = frozenset({".json", ".yaml", ".yml"})


@dataclass(frozen=True)
class Document:
    data: Any
    lines: Mapping[DataPath, int] = field(default_factory=dict)
    may_hold_nulls: bool = True  # False when no value of data is None

    def line_of(self, path: DataPath) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None


def parse(source: Source) -> Document:
    """JSON for ``.json`` files, YAML for ``.yaml``/``.yml``; other names by the first character."""
    suffix = source.path.suffix.lower()
    if suffix == ".json" or (suffix not in STRUCTURED_SUFFIXES and source.looks_like_json):
        return parse_json(source)
    return parse_yaml(source)


# --- JSON ------------------------------------------------------------------------------------


def parse_json(source: Source) -> Document:
    decoded, text, path = source.json, source.text, source.path
    if decoded.error is not None:
        error = decoded.error
        raise PlanError(
            f"JSON syntax error: {error.msg} (column {error.colno})", path, error.lineno
        )
    if decoded.too_deep:
        raise PlanError("JSON is nested too deeply", path)
    if decoded.duplicate_keys:
        duplicate = scan_lines(text)[1]
        if duplicate is not None:
            member, line = duplicate
            raise PlanError(f"duplicate key {key_text(member)}", path, line)
    # Only the null literal makes a None: without it, readers need not look for any.
    return Document(decoded.data, JsonLines(text), may_hold_nulls="null" in text)


# --- YAML ------------------------------------------------------------------------------------


def parse_yaml(source: Source) -> Document:
    # Imported here: PyYAML costs every process that imports the readers, and only a YAML plan
    # needs it (a JSON plan, the detection of any plan, an xdist worker given the plan: none).
    from ._yaml_lines import compose

    return Document(*compose(source.text, source.path))


# --- phase ids ---------------------------------------------------------------------------


def raw_phase_id(raw: Any, index: int) -> str | None:
    """The id of a raw phase mapping for error messages, None when it has no usable one."""
    value = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or value == "":
        return None
    if isinstance(value, float) and not value.is_integer():  # 1.5, NaN, infinities: no id
        return None
    return id_text(value)


def id_text(value: str | int | float) -> str:
    # JSON Schema counts 2.0 as an integer; the id is "2", not "2.0".
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- shared wording --------------------------------------------------------------------------


def describe(value: Any) -> str:
    """A value as an error message quotes it: ``'ten'``, ``12``, ``true``, ``null``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return repr(str(value))


def kind_of(value: Any) -> str:
    """What a top-level document is, for "not a plan" messages."""
    if isinstance(value, dict):
        keys = [str(key) for key in value][:5]
        more = ", ..." if len(value) > 5 else ""
        return "a mapping with keys " + ", ".join(f"'{key}'" for key in keys) + more
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a " + type(value).__name__
