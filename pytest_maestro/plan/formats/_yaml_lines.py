"""A YAML text parsed with the line where each value starts, for one-line errors that point home.

Apart from ``_structured`` so that PyYAML is imported only where a YAML plan is read: detecting
a plan's format and reading a JSON one never need it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ...texts import one_line
from ..errors import PlanError
from ..yaml_loader import WITH_LIBYAML, CheckedSafeLoader, FastSafeLoader
from ._json_lines import DataPath, key_text


def compose(text: str, path: Path) -> tuple[Any, dict[DataPath, int]]:
    """The data, and the line of every path into it (for a mapping member, the line of its
    key); syntax errors and duplicate keys are a :class:`PlanError` with a line."""
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


def _compose_yaml(text: str, path: Path) -> tuple[Any, dict[DataPath, int]]:
    try:
        return _compose_yaml_with(FastSafeLoader, text, path)
    except yaml.YAMLError:
        if not WITH_LIBYAML:
            raise
    # libyaml words the error differently and counts in bytes: say it as SafeLoader does.
    return _compose_yaml_with(CheckedSafeLoader, text, path)


def _compose_yaml_with(loader_class: Any, text: str, path: Path) -> tuple[Any, dict[DataPath, int]]:
    loader: yaml.SafeLoader = loader_class(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        lines: dict[DataPath, int] = {(): 1}
        if node is not None:
            _node_lines(loader, node, (), lines, path, set())
        return data, lines
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
                raise PlanError(f"duplicate key {key_text(member)}", path, line)
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
