"""Markdown parsing shared by the Markdown plan readers.

Everything here works on :class:`~pytest_maestro.plan.source.Line` values, which the CommonMark
parser has flagged, so a line inside a code block or an HTML comment is never taken for a
heading, a field or a list item.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import PlanError
from ..front_matter import FrontMatterError, load_yaml
from ..source import Line, Source

# Linear-time patterns only: a plan is untrusted text, and a pattern that backtracks turns one
# long line (100,000 spaces, or backticks) into minutes. The pairing of backtick runs is worked
# out in code instead.
_BACKTICKS = re.compile(r"`+")
_LINE_RANGE = re.compile(r"(?::\d+(?:-\d+)?|#L\d+(?:-L?\d+)?)$")
_FIELD = re.compile(
    r"^\s*(?:(?:[-*+]|\d+[.)])\s+)?(?:\[[ xX]\]\s+)?\*\*([^*:]+?)\s*(?::\*\*|\*\*\s*:)\s*(.*)$"
)
_LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])(?:\s+|$)(?:\[[ xX~-]\]\s*)?(.*)$")
_PLACEHOLDER = re.compile(r"^\s*(?:<[^<>]*>|\[[^\[\]]*\])\s*$")
# "[2]", "[1, 3]", "[T001, T002]", "[Phase 1, Phase 2]": a bracketed list of ids, not a template
# placeholder such as "[Phase IDs or \"None\"]" (every item is one id, with a digit).
_ID_LIST = re.compile(
    r"^\s*\[\s*(?:(?:phase|step|task)\s+)?[a-z]*\d[\w./-]*"
    r"(?:\s*[,;]\s*(?:(?:phase|step|task)\s+)?[a-z]*\d[\w./-]*)*\s*\]\s*$",
    re.IGNORECASE,
)
_NONE = re.compile(r"^\W*(?:none|n/?a|nothing|-+|—)?\W*$", re.IGNORECASE)
_GROUP = re.compile(
    r"^(phase|chunk|section|part|stage|milestone|group|wave)\s+([\w.-]*\w)", re.IGNORECASE
)
_RUN_VERB = re.compile(r"^(?:run|execute|exec)\s*:?\s+", re.IGNORECASE)
_RULE = re.compile(r"^\s*(?:-{3,}|\*{3,}|_{3,})\s*$")
_FAILS = re.compile(
    r"^\W*(?:fail|fails|failed|failing|error)\b|\b(?:should|will|to|must)\s+fail", re.IGNORECASE
)
_FAILS_UPPER = re.compile(r"\bFAIL")
_PASSES = re.compile(
    r"\b(?:pass|passes|passed|passing|succeeds?|succeeded|success|successful(?:ly)?|green"
    r"|exits?\s+(?:with\s+)?(?:code\s+|status\s+)?(?:0|zero))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Heading:
    index: int  # position in the line list
    level: int
    text: str

    def line(self, lines: Sequence[Line]) -> int:
        return lines[self.index].number


@dataclass(frozen=True)
class Item:
    """A list item: its first line, marker indentation and text (continuation lines joined)."""

    line: int
    indent: int
    text: str


def heading(line: Line) -> tuple[int, str] | None:
    """``(level, text)`` when an ATX or setext heading starts at the line (never in code or an
    HTML block: the parser decided)."""
    return line.heading


def headings(lines: Sequence[Line], start: int = 0, end: int | None = None) -> list[Heading]:
    found = []
    for index in range(start, len(lines) if end is None else end):
        parsed = heading(lines[index])
        if parsed:
            found.append(Heading(index, parsed[0], parsed[1]))
    return found


def section_end(lines: Sequence[Line], start: int, level: int, end: int | None = None) -> int:
    """Index of the first heading after ``start`` at ``level`` or above (or ``end``)."""
    stop = len(lines) if end is None else end
    for index in range(start + 1, stop):
        parsed = heading(lines[index])
        if parsed and parsed[0] <= level:
            return index
    return stop


def text_of(lines: Sequence[Line], start: int, end: int) -> str:
    """The raw text of ``lines[start:end]`` without blank lines or rules at either edge."""
    chunk = [line.text for line in lines[start:end]]
    while chunk and (not chunk[0].strip() or _RULE.match(chunk[0])):
        chunk.pop(0)
    while chunk and (not chunk[-1].strip() or _RULE.match(chunk[-1])):
        chunk.pop()
    return "\n".join(chunk)


def code_spans(text: str) -> list[str]:
    """The contents of inline code spans: a run of backticks up to the next run of the same
    length (CommonMark); a run with no partner is text."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    spans: list[str] = []
    index = 0
    while index < len(runs):
        start, end = runs[index]
        width = end - start
        partner = next(
            (n for n in range(index + 1, len(runs)) if runs[n][1] - runs[n][0] == width), None
        )
        if partner is None:
            index += 1
            continue
        content = text[end : runs[partner][0]].strip()
        if content:
            spans.append(content)
        index = partner + 1
    return spans


def command_in(text: str) -> str | None:
    """The command a verification bullet names, if any.

    That is a backticked span with arguments (npm test) or starting with ``./``, or a lone
    backticked word (pytest) that opens the bullet; a lone word in mid-sentence (UserService) is
    an identifier, not a command.
    """
    spans = code_spans(text)
    for span in spans:
        if re.search(r"\s", span) or span.startswith("./"):
            return span
    opening = _RUN_VERB.sub("", text.lstrip())
    if spans and opening.startswith("`") and re.fullmatch(r"[\w-]+", spans[0]):
        return spans[0]
    return None


def clean_path(raw: str) -> str | None:
    """A file path as the plan should record it: quotes and ``:12-40`` line ranges removed."""
    path = raw.strip().strip("'\"").strip()
    path = _LINE_RANGE.sub("", path)
    if not path or is_placeholder(path) or is_none(path) or " " in path:
        return None
    return path


def paths_in(text: str) -> list[str]:
    """The file paths of a value: its backticked spans, else comma- or semicolon-separated
    bare words.

    A bare part is a path when it is one word (``VERSION``), a word with a note in parentheses
    (``Dockerfile (new)``), or starts with a word that looks like a path (``src/app.py as
    needed``); prose such as ``existing shared helpers in src/`` names no file.
    """
    spans = code_spans(text)
    if not spans:
        spans = [_bare_path(part) for part in re.split(r"[,;]", text)]
    return [path for path in (clean_path(span) for span in spans if span) if path]


_LEADING_SPAN = re.compile(r"\s*(?:(?:,|;|&|\+|and|or)\s*)?(`+)(.+?)\1(?:\s*\([^)]*\))?", re.I)


def leading_paths(text: str) -> list[str]:
    """The paths a file-role value lists before its prose begins.

    ``a.py``, ``b.py`` (new) lists two files; in ``.gitignore`` only if ``out/`` is not yet
    ignored, the second span is part of a sentence, not a file to change. A value that does not
    open with a backticked span is read by :func:`paths_in`.
    """
    if not text.lstrip().startswith("`"):
        return paths_in(text)
    spans = []
    position = 0
    while match := _LEADING_SPAN.match(text, position):
        spans.append(match.group(2).strip())
        position = match.end()
    return [path for path in (clean_path(span) for span in spans) if path]


def _bare_path(part: str) -> str:
    words = part.split()
    if not words:
        return ""
    first = words[0].rstrip(".:")
    if len(words) == 1 or words[1].startswith("(") or "/" in first or "." in first:
        return first
    return ""


def field(line: Line) -> tuple[str, str] | None:
    """``(label, value)`` for a bold field line (``**Depends**: T001`` or ``**Depends on:** T001``).

    The label is lower-cased with single spaces; a list marker or checkbox before it is allowed.
    """
    return None if line.literal else parse_field(line.text)


def parse_field(text: str) -> tuple[str, str] | None:
    """:func:`field` for a string (the first line of a list item's text, say)."""
    match = _FIELD.match(text)
    if not match:
        return None
    label = " ".join(match.group(1).lower().split())
    return label, match.group(2).strip()


def list_item(line: Line) -> tuple[int, str] | None:
    """``(indent, text)`` for a list item (bullet, number or checkbox) outside a code fence."""
    if line.literal:
        return None
    match = _LIST_ITEM.match(line.text.expandtabs(4))
    if not match:
        return None
    return len(match.group(1)), match.group(2).strip()


def indent_of(line: Line) -> int:
    expanded = line.text.expandtabs(4)
    return len(expanded) - len(expanded.lstrip())


def items(
    lines: Sequence[Line],
    start: int,
    end: int,
    deeper_than: int = -1,
    stop: Callable[[Line], bool] | None = None,
) -> list[Item]:
    """The outermost list items of ``lines[start:end]``, indented more than ``deeper_than``.

    Deeper items and indented lines are continuation text of the item above them. With ``stop``
    (the items that follow a field) the scan ends at the first other text or where ``stop`` says;
    without it (the items of a whole section) paragraphs and code blocks between items are skipped.
    """
    found: list[Item] = []
    for index in range(start, end):
        line = lines[index]
        if heading(line) or (stop is not None and stop(line)):
            break
        if not line.text.strip():
            continue
        indent = indent_of(line)
        if indent <= deeper_than:
            break
        parsed = list_item(line)
        if parsed and (not found or parsed[0] <= found[0].indent):
            found.append(Item(line.number, parsed[0], parsed[1]))
        elif found and indent > found[-1].indent:
            last = found[-1]
            found[-1] = Item(last.line, last.indent, f"{last.text}\n{line.text.strip()}")
        elif stop is not None:
            break
    return found


def is_placeholder(text: str) -> bool:
    """Template text such as ``<agent-name>`` or ``[Phase IDs or "None"]``.

    A bracketed list of ids (``[2]``, ``[1, 3]``) is a value that real plans write, not a
    placeholder.
    """
    return bool(_PLACEHOLDER.match(text)) and not _ID_LIST.match(text)


def filled_in(value: str) -> str | None:
    """A single-word value such as an agent name, or None for a placeholder, ``None`` or nothing."""
    value = value.strip().strip("`*'\"").strip()
    return None if is_placeholder(value) or is_none(value) else value


def is_none(text: str) -> bool:
    """``None``, ``N/A``, ``-`` or nothing (a trailing note in parentheses is ignored)."""
    return bool(_NONE.match(re.sub(r"\([^)]*\)", "", text)))


def check_dependencies(
    value: str, found: Sequence[str], path: Path, line: int | None, phase_id: str
) -> None:
    """A dependency value that names no phase and is not ``None`` is an error, not "no deps"."""
    if found or is_none(value) or is_placeholder(value):
        return
    raise PlanError(
        f"cannot read the dependencies {value.strip()!r}: name phases, or write None",
        path,
        line,
        phase_id,
    )


def says_passes(expected: str) -> bool:
    """Whether an ``Expected:`` text says the command succeeds (a TDD red step says it fails)."""
    if _FAILS.search(expected) or _FAILS_UPPER.search(expected):
        return False
    return bool(_PASSES.search(expected))


def group_tag(text: str) -> str | None:
    """``phase-2`` for a group heading such as ``Phase 2: Foundations`` or ``Chunk 2``."""
    match = _GROUP.match(text.strip())
    if not match:
        return None
    return f"{match.group(1).lower()}-{match.group(2).lower()}"


def enclosing_groups(
    all_headings: Sequence[Heading],
    starts: Sequence[Heading],
    ended_by_other_headings: bool = True,
) -> dict[int, Heading]:
    """For each phase heading in ``starts``, the group heading (``## Phase 2: ...``) above it.

    A phase is in a group only when its heading is deeper than the group heading. A group lasts
    until the next group heading, and also until any other heading at its level or above unless
    ``ended_by_other_headings`` is false.
    """
    groups: dict[int, Heading] = {}
    current: Heading | None = None
    phase_indexes = {start.index for start in starts}
    for found in all_headings:
        if found.index in phase_indexes:
            if current is not None and current.level < found.level:
                groups[found.index] = current
        elif group_tag(found.text):
            current = found
        elif ended_by_other_headings and current is not None and found.level <= current.level:
            current = None
    return groups


def frontmatter(source: Source) -> dict[str, object]:
    """The YAML frontmatter as a mapping; a syntax error in it is a ``PlanError`` at its line."""
    block = source.front_matter
    if block is None:
        return {}
    try:
        return load_yaml(block)
    except FrontMatterError as error:
        message = f"invalid YAML frontmatter: {error.problem}"
        raise PlanError(message, source.path, error.line) from None


def title_and_context(source: Source, stop: int) -> tuple[str, str]:
    """The plan title (frontmatter ``title``, else the first ``#`` heading) and the text before
    line index ``stop`` (the first phase or group heading) as the plan's context for the agents."""
    lines = source.lines
    block = source.front_matter
    start = block.closing_line if block is not None else 0  # the index of the line after it
    title = frontmatter(source).get("title")
    title_index = None
    for found in headings(lines, start, stop):
        if found.level == 1:
            title_index = found.index
            break
    if not isinstance(title, str) or not title.strip():
        title = lines[title_index].text.lstrip("# ").strip() if title_index is not None else ""
    if title_index is not None:
        start = title_index + 1
    return title.strip(), text_of(lines, start, stop)


def sequential(ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each id depends on the one written before it (the plan's reading order)."""
    deps: dict[str, tuple[str, ...]] = {}
    previous: str | None = None
    for phase_id in ids:
        deps[phase_id] = (previous,) if previous is not None else ()
        previous = phase_id
    return deps
