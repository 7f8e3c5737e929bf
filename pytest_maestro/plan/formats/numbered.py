"""Numbered checkbox task lists: Kiro and cc-sdd ``tasks.md``, OpenSpec ``tasks.md``.

``- [ ] 1. title`` with sub-tasks ``- [ ] 1.1 title`` (flat or indented, nested to any depth),
under optional ``## 1. Group`` headings, detail bullets below a task. A task with sub-tasks is a
group: its text is context for its sub-tasks' prompts; the leaves are the phases, id = the number
(``1.1``, ``4``). Without dependency annotations the leaves run in written order, one by one, as
Kiro runs them. With cc-sdd's annotations, ``(P)`` marks a task that may run beside its
neighbours (a run of consecutive ``(P)`` tasks of one major task depends on what precedes the
run), ``_Depends: 1.1, 2.1_`` names dependencies (a group stands for all its leaves; a ``(P)``
task depends on those alone, another task on those and the task before it), and a task with
neither follows the one before it. ``[x]`` is done; ``- [ ]*`` is optional (marker
``optional``): a side branch, which the tasks after it do not wait for.
``_Requirements:_`` and ``_Boundary:_`` stay in the prompt; ``Observable…:`` detail lines are
acceptance criteria, a backticked command in them the check. Files: the backticked paths of the
task and its details, created when the task says create/add/new, else modified.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..blocks import ListItem
from ..model import Check, Files, Phase, Plan
from ..source import Source
from . import checkboxes as cb
from . import markdown as md
from ._deps import without_implied

NAME = "kiro"
EXPECTS = "- [ ] 1.1 checkboxes"

_NUMBERED = re.compile(r"^(\d{1,6}(?:\.\d{1,6})*)\.?[ \t]+(.*)$", re.S)
_GROUP_HEADING = re.compile(r"^(\d{1,6}(?:\.\d{1,6})*)\.?\s+(.*)$")
_PARALLEL = re.compile(r"(?:^|\s)\(P\)(?=\s|$)")
_DEPENDS = re.compile(r"_Depends:\s*([^_\n]*)_?")
_DEP_ID = re.compile(r"\d+(?:\.\d+)*")
_OBSERVABLE = re.compile(r"^\s*(?:[-*+]\s+)?(Observable\b[^:\n]*:\s*(.*))$", re.I | re.M)


@dataclass(frozen=True)
class _Task:
    item: ListItem
    box: cb.Checkbox
    id: str
    title: str  # the first line, without the (P) mark

    @property
    def major(self) -> str:
        return self.id.split(".", 1)[0]


def _tasks(source: Source) -> list[_Task]:
    found = []
    for item in source.list_items:
        box = cb.checkbox(item)
        match = _NUMBERED.match(box.text.replace("**", "", 2) if box else "")
        if box is None or match is None:
            continue
        first = match.group(2).split("\n", 1)[0]
        title = " ".join(_PARALLEL.sub(" ", first).split())
        found.append(_Task(item, box, match.group(1), title))
    return found


def detect(source: Source) -> bool:
    """A checkbox list item ``[ ] 1.`` or ``[ ] 2.3`` outside code and HTML blocks."""
    return "[" in source.text and bool(_tasks(source))


def read(source: Source) -> Plan:
    tasks = _tasks(source)
    ids = {task.id for task in tasks}
    groups = {task.id.rsplit(".", 1)[0] for task in tasks if "." in task.id} & ids
    leaves = [task for task in tasks if task.id not in groups]
    texts = {task.id: cb.item_text(source.lines, task.item) for task in leaves}
    annotated = any(_PARALLEL.search(t.item.text) or "_Depends:" in texts[t.id] for t in leaves)
    members = _group_members(leaves)
    order = _order(leaves, texts, members) if annotated else _sequential(leaves)
    titles = {task.id: task.title for task in tasks} | _heading_groups(source)
    phases = []
    warnings = []
    for task in leaves:
        phases.append(_phase(task, texts[task.id], order[task.id], titles))
        if not task.box.known:
            warnings.append(cb.unknown_mark_warning(source, task.item, task.box, task.id))
    first = min((task.item.line for task in tasks), default=len(source.lines) + 1)
    headings = [line.number for line in source.lines if line.heading and line.number < first]
    stop = headings[-1] - 1 if len(headings) > 1 else first - 1
    title, context = md.title_and_context(source, stop)
    return Plan(source.path, NAME, tuple(phases), title, context, warnings=tuple(warnings))


def _sequential(leaves: Sequence[_Task]) -> dict[str, tuple[str, ...]]:
    """Written order, one by one; an optional task is a side branch nothing waits for."""
    deps: dict[str, tuple[str, ...]] = {}
    previous: tuple[str, ...] = ()
    for task in leaves:
        deps[task.id] = previous
        if not task.box.optional:
            previous = (task.id,)
    return deps


def _heading_groups(source: Source) -> dict[str, str]:
    """``## 2. Core services`` headings: the title of group ``2``."""
    found: dict[str, str] = {}
    for line in source.lines:
        match = _GROUP_HEADING.match(line.heading[1]) if line.heading else None
        if match:
            found.setdefault(match.group(1), match.group(2).strip())
    return found


def _group_members(leaves: Sequence[_Task]) -> dict[str, list[str]]:
    """For every number that is a leaf or a group, the leaves it stands for."""
    members: dict[str, list[str]] = {}
    for task in leaves:
        parts = task.id.split(".")
        for end in range(1, len(parts) + 1):
            members.setdefault(".".join(parts[:end]), []).append(task.id)
    return members


def _order(
    leaves: Sequence[_Task], texts: dict[str, str], members: dict[str, list[str]]
) -> dict[str, tuple[str, ...]]:
    deps: dict[str, tuple[str, ...]] = {}
    frontier: tuple[str, ...] = ()
    run: list[str] = []
    previous: _Task | None = None
    for task in leaves:
        parallel = bool(_PARALLEL.search(task.item.text))
        if run and (not parallel or previous is None or previous.major != task.major):
            frontier, run = tuple(run), []
        named = _depends(texts[task.id], members)
        if parallel and named is not None:
            deps[task.id] = named
        else:
            deps[task.id] = tuple(dict.fromkeys((*frontier, *(named or ()))))
        if task.box.optional:  # a side branch: what follows never waits for it
            continue
        if parallel:
            run.append(task.id)
        else:
            frontier = (task.id,)
        previous = task
    return without_implied(deps)


def _depends(text: str, members: dict[str, list[str]]) -> tuple[str, ...] | None:
    """The leaves a ``_Depends: 1.1, 2_`` line names (a group: all its leaves), or None."""
    match = _DEPENDS.search(text)
    if match is None:
        return None
    found = [leaf for ref in _DEP_ID.findall(match.group(1)) for leaf in members.get(ref, [ref])]
    return tuple(dict.fromkeys(found))


def _phase(task: _Task, text: str, deps: tuple[str, ...], titles: dict[str, str]) -> Phase:
    parts = task.id.split(".")
    context = [
        f"{'.'.join(parts[:end])}. {titles[key]}"
        for end in range(1, len(parts))
        if (key := ".".join(parts[:end])) in titles
    ]
    checks = [
        Check(match.group(1).strip(), md.command_in(match.group(2)))
        for match in _OBSERVABLE.finditer(text)
    ]
    paths = tuple(dict.fromkeys(cb.backticked_paths(text)))
    reads_only = cb.says_reads_only(task.title)
    if reads_only:
        files = Files()
    else:
        files = Files(create=paths) if cb.says_creates(task.title) else Files(modify=paths)
    name = task.title if task.title and not md.is_placeholder(task.title) else f"Task {task.id}"
    return Phase(
        id=task.id,
        name=name,
        line=task.item.line,
        blocked_by=tuple(dep for dep in deps if dep != task.id),
        files=files,
        reads=paths if reads_only else (),
        acceptance=tuple(checks),
        description="\n\n".join([*context, text]),
        tags=("optional",) if task.box.optional else (),
        done=task.box.done,
    )
