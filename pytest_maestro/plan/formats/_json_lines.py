"""Where each value of a JSON text starts: the line of every path into it, for error messages.

``scan_lines`` walks the tokens of the whole text in Python: about 0.5 s for a plan of 10,000
phases, so it runs only where an error needs a line or a duplicate key needs finding.
:class:`JsonLines` gives every line the same way, but finds those of the top two levels (every
phase of every format) with a walk that hands all deeper values to the C decoder, and scans the
whole text only when a deeper path is asked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...texts import escaped

DataPath = tuple[Any, ...]  # keys (str) and list indices (int) from the document's root


def path_text(at: DataPath) -> str:
    """``("acceptance", 0, "check")`` as ``acceptance[0].check``."""
    text = ""
    for part in at:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + escaped(str(part))
    return text


def key_text(member: DataPath) -> str:
    """A mapping member's path as a duplicate key's message quotes it."""
    return "'" + path_text(member) + "'"


class _LinesUnder(Mapping[DataPath, int]):
    """The lines of the value at ``at``, by paths relative to it: a view, so that nothing is
    looked up (or scanned, see ``JsonLines``) before an error asks."""

    def __init__(self, lines: Mapping[DataPath, int], at: DataPath) -> None:
        self._lines = lines
        self._at = at

    def __getitem__(self, inner: DataPath) -> int:
        return self._lines[self._at + inner]

    def __iter__(self) -> Iterator[DataPath]:
        size = len(self._at)
        return (at[size:] for at in self._lines if at[:size] == self._at)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def lines_under(lines: Mapping[DataPath, int], at: DataPath) -> Mapping[DataPath, int]:
    """``lines`` for the value at ``at``, with paths relative to it."""
    return _LinesUnder(lines, at) if at else lines


# Valid JSON splits into strings, punctuation, newlines and bare scalars; whitespace is skipped.
_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\],:]|\n|[^\s{}\[\],:"]+')


class JsonLines(Mapping[DataPath, int]):
    """The lines of a valid JSON text, in two stages so that a large plan is not scanned token by
    token: the members and items of the top two levels (every phase of every format: ``("phases",
    7)``, ``(7,)``) at once, everything else (a field an error points at) on first need."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._shallow = shallow_lines(text, levels=2)
        self._every: dict[DataPath, int] | None = None

    def __getitem__(self, at: DataPath) -> int:
        line = self._shallow.get(at)
        return line if line is not None else self._all()[at]

    def __iter__(self) -> Iterator[DataPath]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def _all(self) -> dict[DataPath, int]:
        if self._every is None:
            self._every = scan_lines(self._text)[0]
        return self._every


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def shallow_lines(text: str, levels: int) -> dict[DataPath, int]:
    """The lines ``scan_lines`` gives the paths of at most ``levels`` parts, for a valid JSON
    text: containers at those levels are walked here, the values below them are skipped by the
    C decoder, and lines are counted once over the text, between successive positions."""
    lines: dict[DataPath, int] = {(): 1}
    counter = _LineCounter(text)
    start = _skip_space(text, 0)
    if levels > 0 and text[start] in "{[":
        _walk(text, start, (), levels, lines, counter)
    return lines


def _skip_space(text: str, position: int) -> int:
    match = _SPACE.match(text, position)
    assert match is not None  # the pattern matches the empty string
    return match.end()


class _LineCounter:
    def __init__(self, text: str) -> None:
        self._text = text
        self._position = 0
        self._line = 1

    def line_at(self, position: int) -> int:
        """The line of ``position``; positions must not decrease from one call to the next."""
        self._line += self._text.count("\n", self._position, position)
        self._position = position
        return self._line


def _walk(
    text: str,
    position: int,
    at: DataPath,
    levels: int,
    lines: dict[DataPath, int],
    counter: _LineCounter,
) -> int:
    """Record the lines of the members or items of the container at ``position``, ``levels``
    deep; return the position after the container."""
    is_object = text[position] == "{"
    closer = "}" if is_object else "]"
    position = _skip_space(text, position + 1)
    index = 0
    while text[position] != closer:
        line = counter.line_at(position)
        if is_object:
            key, position = _DECODER.raw_decode(text, position)
            member = (*at, key)
            position = _skip_space(text, _skip_space(text, position) + 1)  # past the ':'
        else:
            member = (*at, index)
            index += 1
        lines[member] = line
        if levels > 1 and text[position] in "{[":
            position = _walk(text, position, member, levels - 1, lines, counter)
        else:
            position = _DECODER.raw_decode(text, position)[1]
        position = _skip_space(text, position)
        if text[position] == ",":
            position = _skip_space(text, position + 1)
    return position + 1


@dataclass
class _Container:
    """An open JSON object or array while scanning."""

    is_object: bool
    path: DataPath
    index: int = 0
    key: Any = None
    expect_key: bool = True
    keys: set[str] = field(default_factory=set)

    def next_member(self) -> None:
        if self.is_object:
            self.expect_key = True
        else:
            self.index += 1

    def value_path(self) -> DataPath:
        return self.path + ((self.key,) if self.is_object else (self.index,))


def scan_lines(text: str) -> tuple[dict[DataPath, int], tuple[DataPath, int] | None]:
    """Lines of every value of an already valid JSON text, and its first duplicate key if any."""
    lines: dict[DataPath, int] = {(): 1}
    stack: list[_Container] = []
    duplicate: tuple[DataPath, int] | None = None
    line = 1
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token == "\n":
            line += 1
        elif token == ",":
            stack[-1].next_member()
        elif token in ("}", "]"):
            stack.pop()
        elif token == ":":
            continue
        elif stack and stack[-1].is_object and stack[-1].expect_key:
            container = stack[-1]
            container.key = json.loads(token)
            container.expect_key = False
            member = container.value_path()
            if container.key in container.keys and duplicate is None:
                duplicate = (member, line)
            container.keys.add(container.key)
            lines.setdefault(member, line)
        else:
            value_path = stack[-1].value_path() if stack else ()
            lines.setdefault(value_path, line)
            if token in ("{", "["):
                stack.append(_Container(token == "{", value_path))
    return lines, duplicate
