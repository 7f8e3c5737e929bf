"""Task lists (Markdown): ``### T001: title`` headings with bold fields.

Fields: ``**File(s)**`` (backticked paths), ``**Type**: Create|Modify|Delete`` (the first of these
words applies to every file of the task; default Modify; a Type that names only a check, such as
``Verify``, makes the files reads), ``**Depends**: T001, T002`` (also
``**Depends on:**``; ``None`` for no dependency; ``T005..T008`` ranges), ``**Agent**``, and
``**Acceptance**`` followed by checkbox bullets. A task without a ``Depends`` field follows the
task written before it. Acceptance bullets are prose criteria; one becomes a command only when it
is a backticked command with arguments followed by words saying it passes (``- [ ] `npm test`
passes``). ``## Phase N`` group headings are not tasks: they become the tag ``phase-N``.
Ids are as written (``T001``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from ..model import Check, Files, Phase, Plan
from ..source import Line, Source
from . import markdown as md

NAME = "tasklist"
EXPECTS = "### T001: headings"

_TASK = re.compile(r"^(T\d+(?:\.\d+)?)\s*(?:[:.\u2014\u2013-]\s*(.*))?$")
_DEP_ID = re.compile(r"\bT\d+(?:\.\d+)?\b")
_RANGE = re.compile(r"\b(T)(\d+)\s*(?:\.\.\.?|\u2013|\u2014|-)\s*T(\d+)\b")
_TYPE_WORDS = {
    "create": "create",
    "new": "create",
    "add": "create",
    "modify": "modify",
    "update": "modify",
    "edit": "modify",
    "delete": "delete",
    "remove": "delete",
    # A task that only checks its files ("Verify (no file changes expected)") reads them.
    "verify": "reads",
    "verification": "reads",
    "read": "reads",
    "review": "reads",
}
_FILE_LABELS = ("file(s)", "files", "file")
_DEPENDS_LABELS = ("depends", "depends on", "dependencies", "blocked by")
_ACCEPTANCE_LABELS = ("acceptance", "acceptance criteria")
_KNOWN_LABELS = (
    *_FILE_LABELS,
    *_DEPENDS_LABELS,
    *_ACCEPTANCE_LABELS,
    "type",
    "agent",
    "status",
    "issue",
)
_COMMAND_PASSES = re.compile(r"^`([^`]*\s[^`]*)`\s+(.*)$")


def detect(source: Source) -> bool:
    """A heading ``T001: ...`` outside code fences."""
    if "T" not in source.text:
        return False
    return any(_TASK.match(h.text) for h in md.headings(source.lines))


def read(source: Source) -> Plan:
    lines, path = source.lines, source.path
    all_headings = md.headings(lines)
    starts = [h for h in all_headings if _TASK.match(h.text)]
    groups = md.enclosing_groups(all_headings, starts)
    raw = [_read_task(lines, start, groups.get(start.index), path) for start in starts]
    order = md.sequential(phase.id for phase, _ in raw)
    phases = tuple(
        phase if written else replace(phase, blocked_by=order[phase.id]) for phase, written in raw
    )
    first = groups.get(starts[0].index, starts[0]) if starts else None
    stop = first.index if first else len(lines)
    title, context = md.title_and_context(source, stop)
    return Plan(path=path, format=NAME, phases=phases, title=title, context=context)


def _read_task(
    lines: Sequence[Line], start: md.Heading, group: md.Heading | None, path: Path
) -> tuple[Phase, bool]:
    """The task and whether it declared its dependencies."""
    match = _TASK.match(start.text)
    assert match is not None  # guaranteed by the caller's filter
    end = md.section_end(lines, start.index, start.level)
    fields = _fields(lines, start.index + 1, end)
    paths = [p for label in _FILE_LABELS for p in md.paths_in(fields.get(label, ("", 0))[0])]
    kind = _file_type(fields.get("type", ("", 0))[0])
    depends = next((fields[label] for label in _DEPENDS_LABELS if label in fields), None)
    acceptance = next((fields[label] for label in _ACCEPTANCE_LABELS if label in fields), None)
    tag = md.group_tag(group.text) if group else None
    files, reads = _files(kind, tuple(dict.fromkeys(paths)))
    blocked_by = dependency_ids(depends[0]) if depends else ()
    if depends:
        line = lines[depends[1]].number
        md.check_dependencies(depends[0], blocked_by, path, line, match.group(1))
    phase = Phase(
        id=match.group(1),
        name=(match.group(2) or "").strip() or match.group(1),
        line=start.line(lines),
        agent=md.filled_in(fields.get("agent", ("", 0))[0]),
        blocked_by=blocked_by,
        files=files,
        reads=reads,
        acceptance=_acceptance(lines, acceptance, end) if acceptance else (),
        description=md.text_of(lines, start.index + 1, end),
        tags=(tag,) if tag else (),
    )
    return phase, depends is not None and bool(depends[0].strip())


def _fields(lines: Sequence[Line], start: int, end: int) -> dict[str, tuple[str, int]]:
    """Each known bold field's value and the index of its line (the first occurrence wins)."""
    fields: dict[str, tuple[str, int]] = {}
    for index in range(start, end):
        parsed = md.field(lines[index])
        if parsed and parsed[0] in _KNOWN_LABELS and parsed[0] not in fields:
            fields[parsed[0]] = (parsed[1], index)
    return fields


def _file_type(value: str) -> str:
    """The first write kind the Type names (``Modify / Verify`` modifies), else ``reads`` when
    it names only a check, else ``modify``."""
    kinds = [_TYPE_WORDS[w] for w in re.findall(r"[a-z]+", value.lower()) if w in _TYPE_WORDS]
    writes = [kind for kind in kinds if kind != "reads"]
    return writes[0] if writes else kinds[0] if kinds else "modify"


def _files(kind: str, paths: tuple[str, ...]) -> tuple[Files, tuple[str, ...]]:
    """The files a task writes, and those it only reads."""
    if kind == "create":
        return Files(create=paths), ()
    if kind == "delete":
        return Files(delete=paths), ()
    if kind == "reads":
        return Files(), paths
    return Files(modify=paths), ()


def dependency_ids(value: str) -> tuple[str, ...]:
    """``T001, T002`` / ``T005..T008`` / ``None`` -> task ids as written."""
    if md.is_placeholder(value) or md.is_none(value):
        return ()
    value = _RANGE.sub(_expand_range, value)
    return tuple(dict.fromkeys(_DEP_ID.findall(value)))


def _expand_range(match: re.Match[str]) -> str:
    first, last = match.group(2), match.group(3)
    width = len(first)
    if len(first) > 9 or len(last) > 9:  # no plan has a billion tasks: not a range
        return match.group(0)
    if int(last) < int(first) or int(last) - int(first) > 1000:
        return match.group(0)
    # Ids as written: a range written in another script's digits (Arabic-Indic, Devanagari...)
    # names its tasks in those digits, each script's ten being consecutive from its zero.
    zero = ord(first[0]) - int(first[0])
    if any(ord(c) - int(c) != zero for c in first + last):  # two scripts: no range to read
        return match.group(0)
    digits = str.maketrans("0123456789", "".join(chr(zero + n) for n in range(10)))
    ids = (f"T{n:0{width}d}".translate(digits) for n in range(int(first), int(last) + 1))
    return ", ".join(ids)


def _acceptance(lines: Sequence[Line], field: tuple[str, int], end: int) -> tuple[Check, ...]:
    value, index = field
    criteria = [value] if value and not md.is_placeholder(value) else []
    line = lines[index]
    marker = md.list_item(line)
    after = md.items(
        lines, index + 1, end, marker[0] if marker else -1, stop=_is_other_field(marker)
    )
    criteria.extend(item.text for item in after if not md.is_placeholder(item.text))
    return tuple(_criterion(text) for text in criteria)


def _is_other_field(marker: tuple[int, str] | None) -> Callable[[Line], bool]:
    """A known field on its own line ends the acceptance bullets (checkbox criteria do not)."""

    def stop(line: Line) -> bool:
        parsed = md.field(line)
        if parsed is None or parsed[0] not in _KNOWN_LABELS:
            return False
        item = md.list_item(line)
        return item is None or (marker is not None and item[0] <= marker[0])

    return stop


def _criterion(text: str) -> Check:
    """Prose, unless it reads ``\\`cmd args\\` passes`` (a command and words saying it passes)."""
    match = _COMMAND_PASSES.match(text.strip())
    if match and md.says_passes(match.group(2)):
        return Check(criterion=text, check=match.group(1).strip())
    return Check(criterion=text)
