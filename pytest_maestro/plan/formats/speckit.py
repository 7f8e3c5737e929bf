"""GitHub spec-kit ``tasks.md``: checkbox tasks ``- [ ] T001 [P] [US1] description``.

A phase per task, id = the task id (``T004a`` allowed; ``**T004 [P]**`` bold as older files
write it). The order is read conservatively, so that nothing the plan orders runs side by side:
sections (``## Phase N: …``) run one after another; tasks keep their written order, except that
a run of consecutive ``[P]`` tasks (no heading between them) is one parallel group: each depends
on what precedes the group, and the task after it depends on the whole group. ``(depends on
T003)`` and ``T008 blocks T009`` add dependencies; a ``**Dependencies**: T001, T008-T015`` detail
line gives the task its dependencies (older files write one per task, forward references
included). ``[x]``/``[X]`` is done. Other labels (``[US1]``) and the section (``phase-3``) are
tags. Files are the paths the task names (backticked, or bare after "in"/"to"), created when it
says create/add/new, deleted when it opens with Delete/Remove and the path, else modified.
``**Independent Test**`` and ``**Checkpoint**`` lines are prose criteria of their section's last
task; a backticked command after "run" in a task is a check.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..blocks import ListItem
from ..model import Check, Files, Phase, Plan
from ..source import Line, Source
from . import checkboxes as cb
from . import markdown as md
from ._deps import without_implied
from .tasklist import dependency_ids

NAME = "speckit"
EXPECTS = "- [ ] T001 checkboxes"

_TASK = re.compile(r"^(T\d+[a-z]?)\b[ \t]*((?:\[[^\[\]\n]*\][ \t]*)*)(.*)$", re.S)
_LABEL = re.compile(r"\[([^\[\]\n]*)\]")
_DEP_LIST = r"(T\d+[a-z]?(?:\s*(?:,|and|&|-|\u2013|\.\.)\s*T\d+[a-z]?)*)"
_DEPENDS_ON = re.compile(r"\bdepends?\s+on\s+" + _DEP_LIST, re.I)
_BLOCKS = re.compile(r"\b(T\d+[a-z]?)\s+blocks\s+" + _DEP_LIST)
_DELETES = re.compile(r"^(?:delete|remove)\s+(?:the\s+)?(?:file\s+)?`?([^\s`]+)", re.I)
_SECTION_CRITERIA = {"independent test": "Independent Test", "checkpoint": "Checkpoint"}
_DEPENDS_FIELDS = ("dependencies", "depends on", "depends", "blocked by")


@dataclass(frozen=True)
class _Task:
    item: ListItem
    box: cb.Checkbox
    id: str
    labels: tuple[str, ...]
    name: str
    section: int  # index of its section heading in the headings list; -1 before any
    after_heading: bool  # a heading stands between it and the task written before it

    @property
    def parallel(self) -> bool:
        return "P" in self.labels


def _task_text(box: cb.Checkbox) -> str:
    """``**T004 [P]** Contract test`` as ``T004 [P] Contract test``."""
    text = box.text
    return text.replace("**", "", 2) if text.startswith("**") else text


def _tasks_in(source: Source) -> list[tuple[ListItem, cb.Checkbox, re.Match[str]]]:
    found = []
    for item in source.list_items:
        box = cb.checkbox(item)
        match = _TASK.match(_task_text(box)) if box else None
        if box and match:
            found.append((item, box, match))
    return found


def detect(source: Source) -> bool:
    """A checkbox list item ``[ ] T001 …`` outside code and HTML blocks."""
    return "T" in source.text and "[" in source.text and bool(_tasks_in(source))


def read(source: Source) -> Plan:
    lines = source.lines
    headings = [line for line in lines if line.heading is not None]
    heading_numbers = [line.number for line in headings]
    sections = [n for n, line in enumerate(headings) if _is_section(line)]
    tasks = []
    previous_line = 0
    for item, box, match in _tasks_in(source):
        position = bisect.bisect_left(heading_numbers, item.line)
        section = next((n for n in reversed(sections) if n < position), -1)
        after = bisect.bisect_right(heading_numbers, previous_line) < position
        labels = tuple(label.strip() for label in _LABEL.findall(match.group(2)))
        name = match.group(3).strip().split("\n", 1)[0] or match.group(1)
        tasks.append(_Task(item, box, match.group(1), labels, name, section, after))
        previous_line = item.line
    criteria = _section_criteria(lines, headings, sections)
    order = _written_order(tasks)
    blocks = _blocks(lines)
    phases = []
    warnings = []
    for position, task in enumerate(tasks):
        last_of_section = position + 1 == len(tasks) or tasks[position + 1].section != task.section
        extra = criteria.get(task.section, ()) if last_of_section else ()
        phases.append(_phase(source, task, headings, order[task.id], blocks, extra))
        if not task.box.known:
            warnings.append(cb.unknown_mark_warning(source, task.item, task.box, task.id))
    reduced = without_implied({phase.id: phase.blocked_by for phase in phases})
    phases = [replace(phase, blocked_by=reduced[phase.id]) for phase in phases]
    first = headings[sections[0]].number - 1 if sections else len(lines)
    title, context = md.title_and_context(source, first)
    return Plan(
        path=source.path,
        format=NAME,
        phases=tuple(phases),
        title=title,
        context=context,
        warnings=tuple(warnings),
    )


def _is_section(line: Line) -> bool:
    """``## Phase 3: …`` (any level): a section that runs after the one before it."""
    assert line.heading is not None
    tag = md.group_tag(line.heading[1])
    return tag is not None and tag.startswith("phase-")


def _written_order(tasks: Sequence[_Task]) -> dict[str, tuple[str, ...]]:
    """Each task's dependencies from the written order, ``[P]`` runs as parallel groups."""
    deps: dict[str, tuple[str, ...]] = {}
    frontier: tuple[str, ...] = ()
    group: list[str] = []
    for task in tasks:
        if group and (not task.parallel or task.after_heading):
            frontier, group = tuple(group), []
        deps[task.id] = frontier
        if task.parallel:
            group.append(task.id)
        else:
            frontier = (task.id,)
    return deps


def _blocks(lines: Sequence[Line]) -> dict[str, list[str]]:
    """``T008 blocks T009, T010`` anywhere in the document: what each task is blocked by."""
    blocked: dict[str, list[str]] = {}
    for line in lines:
        if line.literal or "blocks" not in line.text:
            continue
        for match in _BLOCKS.finditer(line.text):
            for target in dependency_ids(match.group(2)):
                blocked.setdefault(target, []).append(match.group(1))
    return blocked


def _section_criteria(
    lines: Sequence[Line], headings: Sequence[Line], sections: Sequence[int]
) -> dict[int, tuple[Check, ...]]:
    found: dict[int, list[Check]] = {}
    section_lines = [headings[n].number for n in sections]
    for line in lines:
        parsed = md.field(line)
        if parsed is None or parsed[0] not in _SECTION_CRITERIA or md.is_placeholder(parsed[1]):
            continue
        position = bisect.bisect_left(section_lines, line.number) - 1
        section = sections[position] if position >= 0 else -1
        label = _SECTION_CRITERIA[parsed[0]]
        found.setdefault(section, []).append(Check(f"{label}: {parsed[1]}"))
    return {section: tuple(checks) for section, checks in found.items()}


def _phase(
    source: Source,
    task: _Task,
    headings: Sequence[Line],
    written: tuple[str, ...],
    blocked: dict[str, list[str]],
    criteria: tuple[Check, ...],
) -> Phase:
    text = cb.item_text(source.lines, task.item)
    field = _dependencies_field(source, task.item)
    deps = list(dependency_ids(field) if field is not None else written)
    for match in _DEPENDS_ON.finditer(text):
        deps.extend(dependency_ids(match.group(1)))
    deps.extend(blocked.get(task.id, ()))
    section = headings[task.section].heading if task.section >= 0 else None
    tags = [label.lower() for label in task.labels if label != "P" and label.strip()]
    section_tag = md.group_tag(section[1]) if section else None
    if section_tag:
        tags.append(section_tag)
    commands = cb.run_commands(text)
    return Phase(
        id=task.id,
        name=task.name,
        line=task.item.line,
        blocked_by=tuple(dict.fromkeys(d for d in deps if d != task.id)),
        files=Files() if cb.says_reads_only(task.name) else _files(text, task.name),
        reads=_paths(text) if cb.says_reads_only(task.name) else (),
        acceptance=(*(Check(f"`{c}` passes", c) for c in commands), *criteria),
        description=f"{section[1]}\n\n{text}" if section else text,
        tags=tuple(dict.fromkeys(tags)),
        done=task.box.done,
    )


def _dependencies_field(source: Source, item: ListItem) -> str | None:
    """The value of a ``**Dependencies**:`` detail line of the task, if it has one."""
    for line in cb.item_lines(source.lines, item)[1:]:
        parsed = md.field(line)
        if parsed and parsed[0] in _DEPENDS_FIELDS:
            return parsed[1]
    return None


def _paths(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*cb.backticked_paths(text), *cb.bare_paths(text)]))


def _files(text: str, name: str) -> Files:
    paths = _paths(text)
    deleted = _DELETES.match(name)
    if deleted and (target := md.clean_path(deleted.group(1))) in paths:
        return Files(delete=(target,), modify=tuple(p for p in paths if p != target))
    if cb.says_creates(name):
        return Files(create=tuple(paths))
    return Files(modify=tuple(paths))
