"""Step plans (Markdown): checkbox bullets ``* [ ] **Step N**: action`` or ``* [ ] **1/2**: ...``.

Sub-bullets carry the fields: ``**Depends**`` (``None``, ``Step 4, Step 5`` or ``2/2, 2/3``),
``**Files**`` (backticked paths: created when the action starts with "Create" or the path is
followed by ``(new)``, otherwise modified), ``**Verification**`` (a backticked span is the command
that proves it; prose stays a criterion) and ``**Agent**``. A step without a ``Depends`` value
follows the step written before it (a plan with no ``Depends`` at all runs in order, as the
parallel-handoff protocol treats it). Ids: ``**Step 3**`` is ``step-3`` (``step-2.3`` under
``### Phase 2`` when the numbering restarts in each group); ``**2/3**`` is ``2.3`` (``/`` would
be legal in a pytest node id but reads like a path in ``-k`` and ``--deselect``).
The heading above a step (``### Section 2: Core Logic``) becomes its tag (``section-2``).
A step may also be a heading, ``### Step 3: action``, with the same fields as bold lines below
it, in a plan where some step has a ``**Depends**`` line.
"""

from __future__ import annotations

import bisect
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..model import Check, Files, Phase, Plan
from ..source import Line, Source
from . import markdown as md
from .superpowers import has_task_headings

NAME = "steps"
EXPECTS = "**Step N** items, ### Step N:"

_STEP = re.compile(r"^\*\*(?:Step\s+(\d[\w.]*)|(\d[\w.]*/\d[\w.]*))\s*:?\*\*\s*:?\s*(.*)$", re.I)
_STEP_HEADING = re.compile(r"^Step\s+(\d[\w.]*)\s*(?:[:.\u2014\u2013-]\s*(.*))?$", re.I)
_DEP_TOKEN = re.compile(r"\d[\w.]*/\d[\w.]*|\d[\w.]*")
_CREATES = re.compile(r"^\W*(?:create|add new|scaffold)\b", re.I)
_NEW_MARK = re.compile(r"`\s*\((?:new|create[sd]?)\)", re.I)  # closes "`path` (new)"
_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s*)?")


@dataclass(frozen=True)
class _Step:
    phase: Phase
    depends: str | None  # the Depends value as written; None when absent or empty


def detect(source: Source) -> bool:
    """A ``**Step N**`` or ``**N/M**`` list item, or a ``### Step N:`` heading, in a document
    without ``### Task N`` headings."""
    if "**" not in source.text and "Step" not in source.text:
        return False
    lines = source.lines
    found = any(_step_match(line) for line in lines) or _heading_steps(lines)
    return found and not has_task_headings(lines)


def read(source: Source) -> Plan:
    lines, path = source.lines, source.path
    headed = _heading_steps(lines)
    starts = [
        index
        for index, line in enumerate(lines)
        if (headed and _heading_step(line)) or _step_match(line)
    ]
    all_headings = md.headings(lines)
    heading_lines = [h.index for h in all_headings]
    parents = _parent_headings(all_headings)
    steps = [
        _read_step(
            lines, index, parents.get(index) or _heading_above(all_headings, heading_lines, index)
        )
        for index in starts
    ]
    steps, qualifiers = _qualified(steps)
    known = {step.phase.id for step in steps}
    order = md.sequential(step.phase.id for step in steps)
    phases = tuple(
        _with_dependencies(step, known, order, path, qualifier)
        for step, qualifier in zip(steps, qualifiers, strict=True)
    )
    stop = _context_stop(all_headings, starts[0]) if starts else len(lines)
    title, context = md.title_and_context(source, stop)
    return Plan(path=path, format=NAME, phases=phases, title=title, context=context)


def _qualified(steps: list[_Step]) -> tuple[list[_Step], list[str]]:
    """Steps numbered anew under each group heading (``### Phase 2`` holding ``Step 1`` again)
    become ``step-2.1``; with the qualifier (``2.``) of each step, which its own Depends values
    try first. Ids that do not repeat are kept as written."""
    ids = [step.phase.id for step in steps]
    if len(set(ids)) == len(ids):
        return steps, [""] * len(steps)
    qualified, qualifiers = [], []
    for step in steps:
        tag = step.phase.tags[0] if step.phase.tags else None
        qualifier = tag.split("-", 1)[1] + "." if tag and step.phase.id.startswith("step-") else ""
        new_id = "step-" + qualifier + step.phase.id.removeprefix("step-") if qualifier else None
        qualified.append(replace(step, phase=replace(step.phase, id=new_id)) if new_id else step)
        qualifiers.append(qualifier)
    return qualified, qualifiers


def _with_dependencies(
    step: _Step, known: set[str], order: dict[str, tuple[str, ...]], path: Path, qualifier: str
) -> Phase:
    phase = step.phase
    if step.depends is None:
        return replace(phase, blocked_by=order[phase.id])
    blocked_by = _dependencies(step.depends, known, qualifier)
    md.check_dependencies(step.depends, blocked_by, path, phase.line, phase.id)
    return replace(phase, blocked_by=blocked_by)


def _step_match(line: Line) -> re.Match[str] | None:
    item = md.list_item(line)
    return _STEP.match(item[1]) if item else None


def step_id(label: str) -> str:
    """``Step 3`` -> ``step-3``; ``2/3`` -> ``2.3``."""
    label = label.strip().rstrip(".")
    if "/" in label:
        return label.replace("/", ".")
    return "step-" + re.sub(r"^step\s+", "", label, flags=re.I)


def _heading_above(
    all_headings: Sequence[md.Heading], heading_lines: Sequence[int], index: int
) -> md.Heading | None:
    """The last heading before line ``index``, by bisection: a walk back from the end for each
    step would make a plan of many sections quadratic."""
    position = bisect.bisect_left(heading_lines, index)
    return all_headings[position - 1] if position else None


def _read_step(lines: Sequence[Line], index: int, group: md.Heading | None) -> _Step:
    heading = _heading_step(lines[index])
    if heading is not None:  # ### Step N: action, its fields on the lines below
        label, action = heading.group(1), (heading.group(2) or "").strip()
        title = lines[index].heading
        level = title[0] if title else 6
        end = md.section_end(lines, index, level)
        fields = _heading_fields(lines, index + 1, end)
    else:
        match = _step_match(lines[index])
        assert match is not None  # guaranteed by the caller's filter
        label = match.group(1) or match.group(2)
        action = match.group(3).strip()
        indent = md.indent_of(lines[index])
        end = _block_end(lines, index, indent)
        fields = _fields(lines, index + 1, end, indent)
    tag = md.group_tag(group.text) if group else None
    depends = fields.get("depends", fields.get("depends on", "")).strip()
    phase = Phase(
        id=step_id(label),
        name=action if action and not md.is_placeholder(action) else f"Step {label}",
        line=lines[index].number,
        agent=md.filled_in(fields.get("agent", "")),
        files=_files(fields.get("files", ""), action),
        acceptance=_verification(fields.get("verification", "")),
        description=_description(lines, index, end),
        tags=(tag,) if tag else (),
    )
    return _Step(phase, depends or None)


def _parent_headings(all_headings: Sequence[md.Heading]) -> dict[int, md.Heading]:
    """For each heading (by line index), the nearest heading above it of a lower level."""
    parents: dict[int, md.Heading] = {}
    stack: list[md.Heading] = []
    for found in all_headings:
        while stack and stack[-1].level >= found.level:
            stack.pop()
        if stack:
            parents[found.index] = stack[-1]
        stack.append(found)
    return parents


def _heading_steps(lines: Sequence[Line]) -> bool:
    """``### Step N:`` headings are steps of a plan when some step names its dependencies (a
    skill's instructions are written as steps too, and depend on nothing)."""
    return any(_heading_step(line) for line in lines) and any(
        (field := md.field(line)) is not None and field[0] in ("depends", "depends on")
        for line in lines
    )


def _heading_step(line: Line) -> re.Match[str] | None:
    return _STEP_HEADING.match(line.heading[1]) if line.heading else None


def _heading_fields(lines: Sequence[Line], start: int, end: int) -> dict[str, str]:
    """Bold fields on their own lines below a step heading, with the bullets that follow each
    (the first occurrence of a field wins)."""
    fields: dict[str, str] = {}
    label: str | None = None
    for line in lines[start:end]:
        parsed = md.field(line)
        if parsed is not None:
            label = parsed[0] if parsed[0] not in fields else None
            if label is not None:
                fields[label] = parsed[1]
        elif label is not None and md.list_item(line):
            fields[label] = (fields[label] + "\n" + line.text.strip()).strip()
        elif line.text.strip():
            label = None
    return fields


def _block_end(lines: Sequence[Line], index: int, indent: int) -> int:
    """The step's block ends at a heading or a non-blank line indented no deeper than it."""
    for position in range(index + 1, len(lines)):
        line = lines[position]
        if md.heading(line) or (line.text.strip() and md.indent_of(line) <= indent):
            return position
    return len(lines)


def _fields(lines: Sequence[Line], start: int, end: int, indent: int) -> dict[str, str]:
    """Each sub-bullet field's value, nested lines included (the first occurrence wins)."""
    fields: dict[str, str] = {}
    for item in md.items(lines, start, end, deeper_than=indent):
        first, _, rest = item.text.partition("\n")
        parsed = md.parse_field(first)
        if parsed and parsed[0] not in fields:
            fields[parsed[0]] = "\n".join(part for part in (parsed[1], rest) if part)
    return fields


def _files(value: str, action: str) -> Files:
    if md.is_placeholder(value.strip()):
        return Files()
    create: list[str] = []
    modify: list[str] = []
    marks_new = _NEW_MARK.search(value) is not None
    for path in dict.fromkeys(md.paths_in(value) if md.code_spans(value) else []):
        # A pattern per path costs a compilation each (paths are unique, re's cache is not
        # that big): only a value that marks some path new needs one.
        new = marks_new and re.search(re.escape(path) + "[^`]*" + _NEW_MARK.pattern, value, re.I)
        (create if new or _CREATES.match(action) else modify).append(path)
    return Files(create=tuple(create), modify=tuple(modify))


def _verification(value: str) -> tuple[Check, ...]:
    checks = []
    for raw in value.split("\n"):
        text = _MARKER.sub("", raw).strip()
        if not text or md.is_placeholder(text):
            continue
        checks.append(Check(criterion=text, check=md.command_in(text)))
    return tuple(checks)


def _description(lines: Sequence[Line], index: int, end: int) -> str:
    block = "\n".join(line.text for line in lines[index:end]).rstrip()
    first, _, rest = block.partition("\n")
    return (_MARKER.sub("", first).strip() + "\n" + textwrap.dedent(rest)).strip()


def _dependencies(value: str, known: set[str], qualifier: str = "") -> tuple[str, ...]:
    """Ids named in a Depends value; a bare number means ``Step N`` unless that is unknown, and
    in a plan whose numbering restarts per group, ``Step N`` of the same group first."""
    if md.is_placeholder(value) or md.is_none(value):
        return ()
    found = []
    for token in _DEP_TOKEN.findall(re.sub(r"\([^)]*\)", "", value)):
        token = token.rstrip(".")
        choices = [step_id(token), token]
        if qualifier and "/" not in token:
            choices.insert(0, step_id(qualifier + token))
        found.append(next((c for c in choices if c in known), choices[0]))
    return tuple(dict.fromkeys(found))


def _context_stop(all_headings: Sequence[md.Heading], first_step: int) -> int:
    """The plan context ends at the heading just above the first step (its section)."""
    above = [h.index for h in all_headings if h.index < first_step]
    return above[-1] if above else first_step
