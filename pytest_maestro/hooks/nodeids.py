"""A phase's node id, ``<plan file>::<phase id>``, read and written in one place.

pytest names an item by its file's path and its name, joined by ``::``. A phase id never holds
``::`` (``plan/validate.py`` refuses it), so the name is everything after the first separator, and
the sync item's node id has the same shape (``<plan file>::maestro-sync``).
"""

from __future__ import annotations

from dataclasses import dataclass

SEPARATOR = "::"


@dataclass(frozen=True)
class NodeId:
    file: str  # the plan file as pytest names it: relative to rootdir, or as given
    name: str  # the phase id, or the sync item's name

    @classmethod
    def parse(cls, text: str) -> NodeId | None:
        """None for a text that names no item in a file (a bare path)."""
        file, separator, name = text.partition(SEPARATOR)
        return cls(file, name) if separator else None

    @classmethod
    def of(cls, text: str) -> NodeId:
        """The node id of an item this plugin made (ValueError for anything else)."""
        node = cls.parse(text)
        if node is None:
            raise ValueError(f"not a phase's node id: {text!r}")
        return node

    def sibling(self, name: str) -> NodeId:
        """The node id of another item of the same plan file."""
        return NodeId(self.file, name)

    def __str__(self) -> str:
        return f"{self.file}{SEPARATOR}{self.name}"


def phase_id(nodeid: str) -> str:
    """The phase a node id names."""
    return NodeId.of(nodeid).name
