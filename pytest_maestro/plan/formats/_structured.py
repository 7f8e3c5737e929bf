"""Parsing JSON and YAML plans with the line of every value, for one-line errors that point home.

``parse_json`` and ``parse_yaml`` return a :class:`Document`: the parsed data and, for every path
into it (``("phases", 2, "timeout")``), the line where that value starts — for a mapping member,
the line of its key. Syntax errors and duplicate keys become :class:`PlanError` with a line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import PlanError
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


def parse(text: str, path: Path) -> Document:
    """JSON for ``.json`` files, YAML for ``.yaml``/``.yml``; other names by the first character."""
    suffix = path.suffix.lower()
    if suffix == ".json" or (suffix not in STRUCTURED_SUFFIXES and looks_like_json(text)):
        return parse_json(text, path)
    return parse_yaml(text, path)


def looks_like_json(text: str) -> bool:
    return text.lstrip().startswith(("{", "["))


# --- JSON ------------------------------------------------------------------------------------


def parse_json(text: str, path: Path) -> Document:
    try:
        data, duplicates = _decoded(text)
    except json.JSONDecodeError as exc:
        raise PlanError(
            f"JSON syntax error: {exc.msg} (column {exc.colno})", path, exc.lineno
        ) from None
    except RecursionError:
        raise PlanError("JSON is nested too deeply", path) from None
    if duplicates:
        duplicate = scan_lines(text)[1]
        if duplicate is not None:
            member, line = duplicate
            raise PlanError(f"duplicate key {_key_text(member)}", path, line)
    # Only the null literal makes a None: without it, readers need not look for any.
    return Document(data, JsonLines(text), may_hold_nulls="null" in text)


def sniff_json(text: str) -> Any:
    """The parsed JSON of ``text``, or None when it is not JSON. Shared by the ``detect`` functions
    and ``parse_json`` so one file is parsed once however many readers look at it; callers must
    not mutate it."""
    if not looks_like_json(text):
        return None
    try:
        return _decoded(text)[0]
    except (ValueError, RecursionError):
        return None


def _decoded(text: str) -> tuple[Any, bool]:
    """``json.loads(text)``, and whether some object in it repeats a key; raises what json.loads
    raises. The last answer is kept for the same text object: identity, not equality, so that
    reading a file anew parses it anew and nothing else is kept."""
    global _last_decoded
    if _last_decoded is not None and _last_decoded[0] is text:
        return _last_decoded[1], _last_decoded[2]
    duplicates = False

    def mapping(members: list[tuple[str, Any]]) -> dict[str, Any]:
        # json.loads keeps the last of duplicate keys silently; counting them here is cheap, and
        # only a document that has one pays for the scan that says where.
        nonlocal duplicates
        result = dict(members)
        duplicates = duplicates or len(result) != len(members)
        return result

    data = json.loads(text, object_pairs_hook=mapping)
    _last_decoded = (text, data, duplicates)
    return data, duplicates


_last_decoded: tuple[str, Any, bool] | None = None


# --- YAML ------------------------------------------------------------------------------------


def parse_yaml(text: str, path: Path) -> Document:
    try:
        return _compose_yaml(text, path)
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise PlanError(
            f"YAML error: {_one_line(exc.reason)} (character #x{exc.character:04x})", path, line
        ) from None
    except yaml.constructor.ConstructorError as exc:
        raise PlanError(
            f"YAML error: {_one_line(exc.problem or '')}", path, _yaml_line(exc)
        ) from None
    except yaml.MarkedYAMLError as exc:
        raise PlanError(_yaml_message(exc), path, _yaml_line(exc)) from None
    except yaml.YAMLError as exc:
        raise PlanError(f"YAML error: {_one_line(str(exc))}", path) from None
    except RecursionError:
        raise PlanError("YAML is nested too deeply", path) from None


def _compose_yaml(text: str, path: Path) -> Document:
    loader = yaml.SafeLoader(text)
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
    problem = _one_line(exc.problem or "invalid YAML")
    context = f" ({_one_line(exc.context)})" if exc.context else ""
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
    return id_text(value)


def id_text(value: str | int | float) -> str:
    # JSON Schema counts 2.0 as an integer; the id is "2", not "2.0".
    return str(int(value)) if isinstance(value, float) else str(value)


# --- shared wording --------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _key_text(member: DataPath) -> str:
    return "'" + path_text(member) + "'"


def path_text(at: DataPath) -> str:
    """``("acceptance", 0, "check")`` as ``acceptance[0].check``."""
    text = ""
    for part in at:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
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
