"""Parsing JSON and YAML plans with the line of every value, for one-line errors that point home.

``parse_json`` and ``parse_yaml`` read a :class:`~pytest_maestro.plan.source.Source` and return a
:class:`Document`: the parsed data and, for every path into it (``("phases", 2, "timeout")``), the
line where that value starts — for a mapping member, the line of its key. Syntax errors and
duplicate keys become :class:`PlanError` with a line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...texts import escaped, one_line
from ..errors import PlanError
from ..source import Source
from ..yaml_loader import WITH_LIBYAML, CheckedSafeLoader, FastSafeLoader
from ._json_lines import DataPath as DataPath  # re-exported: the readers name paths with it
from ._json_lines import JsonLines, scan_lines

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
            raise PlanError(f"duplicate key {_key_text(member)}", path, line)
    # Only the null literal makes a None: without it, readers need not look for any.
    return Document(decoded.data, JsonLines(text), may_hold_nulls="null" in text)


# --- YAML ------------------------------------------------------------------------------------


def parse_yaml(source: Source) -> Document:
    text, path = source.text, source.path
    try:
        return _compose_yaml(text, path)
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise PlanError(
            f"YAML error: {one_line(exc.reason)} (character #x{exc.character:04x})", path, line
        ) from None
    except yaml.constructor.ConstructorError as exc:
        raise PlanError(
            f"YAML error: {one_line(exc.problem or '')}", path, _yaml_line(exc)
        ) from None
    except yaml.MarkedYAMLError as exc:
        raise PlanError(_yaml_message(exc), path, _yaml_line(exc)) from None
    except yaml.YAMLError as exc:
        raise PlanError(f"YAML error: {one_line(str(exc))}", path) from None
    except RecursionError:
        raise PlanError("YAML is nested too deeply", path) from None


def _compose_yaml(text: str, path: Path) -> Document:
    try:
        return _compose_yaml_with(FastSafeLoader, text, path)
    except yaml.YAMLError:
        if not WITH_LIBYAML:
            raise
    # libyaml words the error differently and counts in bytes: say it as SafeLoader does.
    return _compose_yaml_with(CheckedSafeLoader, text, path)


def _compose_yaml_with(loader_class: Any, text: str, path: Path) -> Document:
    loader: yaml.SafeLoader = loader_class(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        lines: dict[DataPath, int] = {(): 1}
        if node is not None:
            _node_lines(loader, node, (), lines, path, set())
        return Document(data, lines)
    finally:
        loader.dispose()


def _node_lines(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    at: DataPath,
    lines: dict[DataPath, int],
    path: Path,
    seen: set[int],
) -> None:
    # Aliases reuse nodes: walk each node once, which also stops recursive anchors.
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[Any] = set()
        for key_node, value_node in node.value:
            key = _yaml_key(loader, key_node)
            member = (*at, key)
            line = key_node.start_mark.line + 1
            if key in keys and key != "<<":
                raise PlanError(f"duplicate key {_key_text(member)}", path, line)
            keys.add(key)
            lines.setdefault(member, line)
            _node_lines(loader, value_node, member, lines, path, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            item_path = (*at, index)
            lines.setdefault(item_path, item.start_mark.line + 1)
            _node_lines(loader, item, item_path, lines, path, seen)


def _yaml_key(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """The key as the constructed data holds it (``1:`` is the int 1), so error paths match."""
    if not isinstance(node, yaml.ScalarNode):
        return id(node)  # a complex key: never matches a path, but stays unique
    try:
        return loader.construct_object(node, deep=True)
    except yaml.YAMLError:
        return node.value


def _yaml_message(exc: yaml.MarkedYAMLError) -> str:
    problem = one_line(exc.problem or "invalid YAML")
    context = f" ({one_line(exc.context)})" if exc.context else ""
    return f"YAML syntax error: {problem}{context}"


def _yaml_line(exc: yaml.MarkedYAMLError) -> int | None:
    mark = exc.problem_mark or exc.context_mark
    return mark.line + 1 if mark is not None else None


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


def _key_text(member: DataPath) -> str:
    return "'" + path_text(member) + "'"


def path_text(at: DataPath) -> str:
    """``("acceptance", 0, "check")`` as ``acceptance[0].check``."""
    text = ""
    for part in at:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + escaped(str(part))
    return text


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
