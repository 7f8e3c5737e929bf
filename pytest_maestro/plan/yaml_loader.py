"""YAML loading on libyaml's parser, with the pure-Python loader's errors and depth limit.

PyYAML's ``CSafeLoader`` parses in C (libyaml) and also builds the node tree in C, recursively:
a document nested some tens of thousands of levels deep overflows the C stack and kills the
process, where the pure-Python ``SafeLoader`` raises ``RecursionError``. :class:`FastSafeLoader`
takes only libyaml's events (its parser keeps its own stack on the heap) and composes the nodes in
Python, which is as fast, since most of the time goes to resolving and constructing values in
Python anyway, and keeps the recursion limit. libyaml words its syntax errors differently and
counts their positions in bytes, so when it refuses a document, :func:`safe_load` and the plan
readers load it again with ``SafeLoader``, whose error users read, with or without libyaml.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

# How many values a document may expand to. A few kilobytes of nested aliases (a "billion laughs")
# expand to hundreds of millions, which whatever walks the data later pays for.
MAX_VALUES = 1_000_000


class _BoundedComposer:
    """Refuses a document whose aliases expand it past :data:`MAX_VALUES`, or that refers to
    itself, as it is composed: before any of it is constructed or walked."""

    def compose_document(self) -> Any:
        node = super().compose_document()  # type: ignore[misc]
        _check_expansion(node)
        return node


def _check_expansion(root: yaml.Node | None) -> None:
    size: dict[int, int] = {}  # node id -> values it expands to
    stack: list[tuple[yaml.Node, bool]] = [(root, False)] if root is not None else []
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        children = _children(node)
        if not children_done:
            open_nodes.add(id(node))
            stack.append((node, True))
            for child in children:
                if id(child) in open_nodes:
                    raise yaml.composer.ComposerError(
                        None, None, "an alias refers to the value that holds it", child.start_mark
                    )
                if id(child) not in size:
                    stack.append((child, False))
            continue
        open_nodes.discard(id(node))
        total = 1 + sum(size[id(child)] for child in children)
        if total > MAX_VALUES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"aliases expand this to over {MAX_VALUES:,} values: too large to read",
                node.start_mark,
            )
        size[id(node)] = total


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class CheckedSafeLoader(_BoundedComposer, yaml.SafeLoader):
    """``SafeLoader`` whose impossible values (``2024-02-30``, an integer of 5,000 digits) are
    YAML errors at their line, not a ValueError from deep inside PyYAML."""


def _checked(construct: Any) -> Any:
    def construct_checked(loader: Any, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, OverflowError) as exc:
            shown = str(node.value)[:40] + ("…" if len(str(node.value)) > 40 else "")
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"cannot read the value {shown!r}: {str(exc).split(';')[0]}",
                node.start_mark,
            ) from None

    return construct_checked


def _check_values(loader: Any) -> None:
    for tag, construct in (
        ("int", SafeConstructor.construct_yaml_int),
        ("float", SafeConstructor.construct_yaml_float),
        ("timestamp", SafeConstructor.construct_yaml_timestamp),
    ):
        loader.add_constructor(f"tag:yaml.org,2002:{tag}", _checked(construct))


_check_values(CheckedSafeLoader)
FastSafeLoader: Any = CheckedSafeLoader
try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml
    pass
else:

    class _EventsInC(_BoundedComposer, Composer, CParser, SafeConstructor, Resolver):
        """libyaml's parser, PyYAML's composer (before CParser's own, in the method order)."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    _check_values(_EventsInC)
    FastSafeLoader = _EventsInC

WITH_LIBYAML = FastSafeLoader is not CheckedSafeLoader


def safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``, parsed by libyaml when it is there; errors as ``SafeLoader``
    raises them."""
    try:
        return yaml.load(text, FastSafeLoader)
    except yaml.YAMLError:
        if not WITH_LIBYAML:
            raise
    return yaml.load(text, CheckedSafeLoader)
