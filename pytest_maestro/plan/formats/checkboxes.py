"""What the checkbox task lists (spec-kit, Kiro, cc-sdd, OpenSpec) share: the checkbox, the
files a task names, the commands it says to run, and the text of its list item."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from ..blocks import ListItem
from ..source import Line, Source
from . import markdown as md

# "[ ] text", "[x] text", Kiro's optional "[ ]* text"; any other mark in the box is kept, for
# a warning ("[~]", "[-]": states some editors write).
_CHECKBOX = re.compile(r"^\[(.)\](\*)?[ \t]+(\S.*)$", re.S)
# A task that opens with one of these verbs, or says "new", makes the files it names.
_CREATES = re.compile(
    r"^\W*(?:create|add|scaffold|generate|initiali[sz]e|init|write)\b|\bnew\b", re.I
)
_READS_ONLY = re.compile(
    r"^\W*(?:verify|check|review|confirm|inspect|validate|audit|read|analy[sz]e)\b", re.I
)
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
_BARE_AFTER = re.compile(r"\b(?:in|to|into|at)[ \t]+([^\s`'\"(),;]+)")
_WORD = re.compile(r"[^\s`'\"(),;]+")
_RUN = re.compile(r"\b[Rr]un:?[ \t]+(?=`)")


@dataclass(frozen=True)
class Checkbox:
    mark: str  # what the box holds: " ", "x", "X", or another mark
    optional: bool  # Kiro's "- [ ]*"
    text: str

    @property
    def done(self) -> bool:
        return self.mark in ("x", "X")

    @property
    def known(self) -> bool:
        return self.mark in (" ", "x", "X")


def checkbox(item: ListItem) -> Checkbox | None:
    match = _CHECKBOX.match(item.text)
    if match is None:
        return None
    return Checkbox(match.group(1), match.group(2) is not None, match.group(3))


def unknown_mark_warning(source: Source, item: ListItem, box: Checkbox, phase: str) -> str:
    return (
        f"{source.path}:{item.line}: phase {phase!r}: checkbox [{box.mark}] is neither [ ] nor "
        "[x]: read as not done"
    )


def item_lines(lines: Sequence[Line], item: ListItem) -> list[Line]:
    return list(lines[item.line - 1 : item.end - 1])


def item_text(lines: Sequence[Line], item: ListItem) -> str:
    """The item's lines (its details included), the marker line's indentation removed."""
    chunk = [line.text for line in item_lines(lines, item)]
    while chunk and not chunk[-1].strip():
        chunk.pop()
    if not chunk:
        return ""
    first, rest = chunk[0].strip(), textwrap.dedent("\n".join(chunk[1:]))
    return (first + "\n" + rest).strip()


def is_path(word: str) -> bool:
    """A word that names a file or a directory: ``src/a.py``, ``lde/``, ``README.md`` (not
    ``and/or`` nor ``e.g.``)."""
    word = word.strip().rstrip(".,:;")
    if not word or "://" in word or word.startswith(("-", "$", "/", "\\", "~")) or " " in word:
        return False  # an option, a variable, a URL, or a path outside the project
    if word[1:2] == ":" or ".." in word.split("/"):
        return False
    if "/" in word:
        return word.endswith("/") or bool(_EXTENSION.search(word))
    return bool(_EXTENSION.search(word)) and word[0].isalnum() and word.count(".") <= 3


def backticked_paths(text: str) -> list[str]:
    found = (md.clean_path(span) for span in md.code_spans(text) if is_path(span))
    return [path for path in found if path]


def bare_paths(text: str) -> list[str]:
    """Paths written without backticks: a word with a ``/`` that looks like a path, or a path
    after "in"/"to" (``in src/models/user.py``, ``to requirements.txt``)."""
    outside = re.sub(r"`[^`]*`", " ", text)
    words = [m.group().rstrip(".,:;") for m in _WORD.finditer(outside) if "/" in m.group()]
    words += [m.group(1) for m in _BARE_AFTER.finditer(outside)]
    found = (md.clean_path(word) for word in words if is_path(word))
    return [path for path in found if path]


def says_creates(text: str) -> bool:
    return _CREATES.search(text) is not None


def says_reads_only(text: str) -> bool:
    """A task that only looks at the files it names (``Verify existing a.py``): a phase need not
    change them, so they are what it reads, not what it writes."""
    return _READS_ONLY.search(text) is not None


def run_commands(text: str) -> list[str]:
    """Backticked commands the text says to run: ``Run `npm test```."""
    commands = []
    for match in _RUN.finditer(text):
        spans = md.code_spans(text[match.end() :])
        if spans:
            commands.append(spans[0])
    return commands
