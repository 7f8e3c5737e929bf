"""superpowers plans (Markdown): ``### Task N: title`` (or ``## Task N:``) sections.

Group headings above the tasks (``## Phase 2: ...``, ``## Chunk 2``) are not phases; a task under
one is tagged ``phase-2`` / ``chunk-2``. No dependencies are written: each task follows the one
written before it. ``**Files:**`` bullets: ``Create:``, ``Modify:`` and ``Delete:`` paths (line
ranges such as ``:12-40`` stripped); ``Reference:``/``Read:`` paths are reads; a ``Test:`` path is
created when the task says it creates that file, modified when the task writes tests (a TDD
task), and otherwise only read (a verification task runs it). A ``Run: `cmd``` whose
``Expected:`` says it passes is an acceptance check; an expected failure is a TDD red step, not a
check. The task body is the description. Ids are ``task-N``; when task numbers repeat across
groups, every grouped task is ``task-G.N`` (G = the group's number, so ``## Chunk 2`` ->
``task-2.3``).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import PurePosixPath

from ..model import Check, Files, Phase, Plan
from ..source import Line, Source
from . import markdown as md

NAME = "superpowers"
EXPECTS = "### Task N: headings"

_TASK = re.compile(r"^Task\s+(\d+(?:\.\d+)*[a-z]?)\s*(?:[:.\u2014\u2013-]\s*(.*))?$", re.I)
_FILE_ROLE = re.compile(r"^(\w+)\s*:\s*(.*)$", re.S)
_ROLES = {
    "create": "create",
    "modify": "modify",
    "delete": "delete",
    "remove": "delete",
    "test": "test",
    "tests": "test",
    "reference": "reads",
    "read": "reads",
}
_RUN = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?Run(?:\*\*)?\s*:(?:\*\*)?\s*(.*)$", re.I)
_EXPECTED = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\*\*)?Expected(?:\s+(?:output|result))?(?:\*\*)?\s*:(?:\*\*)?\s*(.*)$",
    re.I,
)
_OTHER_FILE_ROLE = re.compile(
    r"^\s*[-*+]\s+(?:create|modify|delete|remove|reference|read)\s*:", re.I
)
_STEP_HEADING = re.compile(r"^\s*\*\*Step\s+\d", re.I)
_WRITES_TESTS = re.compile(
    r"\b(?:write|writing|add|adding|create|creating|update|extend)\b[^\n]*\btests?\b", re.I
)


def has_task_headings(lines: Sequence[Line]) -> bool:
    return any(2 <= h.level <= 4 and _TASK.match(h.text) for h in md.headings(lines))


def detect(source: Source) -> bool:
    """A ``## Task N`` to ``#### Task N`` heading outside code fences."""
    return "Task" in source.text and has_task_headings(source.lines)


def read(source: Source) -> Plan:
    lines, path = source.lines, source.path
    all_headings = md.headings(lines)
    starts = [h for h in all_headings if 2 <= h.level <= 4 and _TASK.match(h.text)]
    # A heading that a broken nested code block lets through ("## Usage" of a README embedded
    # in a task) must not end a task or its group: tasks run to the next task or group heading.
    groups = md.enclosing_groups(all_headings, starts, ended_by_other_headings=False)
    ends = _task_ends(lines, all_headings, starts)
    ids = _task_ids(starts, groups)
    phases = [
        _read_task(lines, start, ends[start.index], ids[start.index], groups.get(start.index))
        for start in starts
    ]
    order = md.sequential(phase.id for phase in phases)
    first = groups.get(starts[0].index, starts[0]) if starts else None
    title, context = md.title_and_context(source, first.index if first else len(lines))
    return Plan(
        path=path,
        format=NAME,
        phases=tuple(replace(p, blocked_by=order[p.id]) for p in phases),
        title=title,
        context=context,
    )


def _task_ends(
    lines: Sequence[Line], all_headings: Sequence[md.Heading], starts: Sequence[md.Heading]
) -> dict[int, int]:
    """Where each task ends: at the next task or group heading; the last task, at the next
    heading at its level or above (a closing "## Success Criteria" is not part of it)."""
    groups = [h for h in all_headings if md.group_tag(h.text)]
    group_lines = [h.index for h in groups]
    ends = {}
    for position, start in enumerate(starts):
        if position + 1 == len(starts):
            ends[start.index] = md.section_end(lines, start.index, start.level)
            continue
        # Only the group headings between this task and the next can end it earlier: looking
        # at those alone keeps the whole loop linear in the headings (not tasks x headings).
        end = starts[position + 1].index
        for group in itertools.islice(groups, bisect.bisect_right(group_lines, start.index), None):
            if group.index >= end:
                break
            if group.level < start.level:
                end = group.index
                break
        ends[start.index] = end
    return ends


def _number(start: md.Heading) -> str:
    match = _TASK.match(start.text)
    assert match is not None  # guaranteed by the caller's filter
    return match.group(1)


def _task_ids(starts: Sequence[md.Heading], groups: dict[int, md.Heading]) -> dict[int, str]:
    numbers = [_number(start) for start in starts]
    repeated = len(set(numbers)) < len(numbers)
    ids = {}
    for start, number in zip(starts, numbers, strict=True):
        group = groups.get(start.index)
        tag = md.group_tag(group.text) if group else None
        qualifier = tag.split("-", 1)[1] + "." if repeated and tag else ""
        ids[start.index] = f"task-{qualifier}{number}"
    return ids


def _read_task(
    lines: Sequence[Line], start: md.Heading, end: int, phase_id: str, group: md.Heading | None
) -> Phase:
    match = _TASK.match(start.text)
    assert match is not None  # guaranteed by the caller's filter
    body = md.text_of(lines, start.index + 1, end)
    roles = _file_roles(lines, start.index + 1, end, body)
    tag = md.group_tag(group.text) if group else None
    return Phase(
        id=phase_id,
        name=(match.group(2) or "").strip() or f"Task {match.group(1)}",
        line=start.line(lines),
        files=Files(
            create=tuple(roles["create"]),
            modify=tuple(roles["modify"]),
            delete=tuple(roles["delete"]),
        ),
        reads=tuple(roles["reads"]),
        acceptance=_checks(lines, start.index + 1, end),
        description=body,
        tags=(tag,) if tag else (),
    )


def _file_roles(lines: Sequence[Line], start: int, end: int, body: str) -> dict[str, list[str]]:
    roles: dict[str, list[str]] = {"create": [], "modify": [], "delete": [], "reads": []}
    for index in range(start, end):
        parsed = md.field(lines[index])
        if parsed is None or parsed[0] != "files":
            continue
        roles["modify"].extend(md.paths_in(parsed[1]) if md.code_spans(parsed[1]) else [])
        for item in md.items(lines, index + 1, end, stop=lambda line: md.field(line) is not None):
            match = _FILE_ROLE.match(item.text)
            role = _ROLES.get(match.group(1).lower()) if match else None
            if match is None or role is None:
                continue
            for path in md.leading_paths(match.group(2).split("\n", 1)[0]):
                kind = _test_role(path, body) if role == "test" else role
                if not any(path in paths for paths in roles.values()):
                    roles[kind].append(path)
        break
    return roles


def _test_role(path: str, body: str) -> str:
    """Create when the task says it creates the file, modify when it writes tests, else read."""
    name = PurePosixPath(path).name
    for line in body.split("\n"):
        if _OTHER_FILE_ROLE.match(line):
            continue  # another file's declaration, not a statement about this one
        if re.search(r"\bcreat", line, re.I) and (path in line or name in line):
            return "create"
    return "modify" if _WRITES_TESTS.search(body) else "reads"


def _checks(lines: Sequence[Line], start: int, end: int) -> tuple[Check, ...]:
    """``Run:`` commands whose ``Expected:`` says they pass, each command once."""
    checks: dict[str, Check] = {}
    for index in range(start, end):
        match = None if lines[index].literal else _RUN.match(lines[index].text)
        if match is None:
            continue
        command = _command(lines, index, end, match.group(1))
        expected = _expected(lines, index + 1, end)
        if command and expected is not None and md.says_passes(expected):
            checks.setdefault(command, Check(f"`{command}` — expected: {expected}", command))
    return tuple(checks.values())


def _command(lines: Sequence[Line], index: int, end: int, rest: str) -> str | None:
    """The backticked command on the ``Run:`` line, or the code block right below it."""
    spans = md.code_spans(rest)
    if spans or rest.strip():
        return spans[0] if spans else None
    position = index + 1
    while position < end and not lines[position].text.strip():
        position += 1
    if position >= end or not lines[position].in_fence:
        return None
    commands = []
    for line in lines[position + 1 : end]:
        if not line.in_fence or _is_fence(line.text):
            break
        if line.text.strip():
            commands.append(line.text.strip())
    return "\n".join(commands) or None


def _is_fence(text: str) -> bool:
    return text.strip().startswith(("```", "~~~"))


def _expected(lines: Sequence[Line], start: int, end: int) -> str | None:
    """The ``Expected:`` text that follows, before the next ``Run:`` or ``**Step N**``.

    ``Run:`` lines written one after the other share the ``Expected:`` below the last of them
    ("Run: `npm test`", "Run: `npm run lint`", "Expected: all commands exit zero").
    """
    only_runs = True  # nothing but blank lines and other Run: lines since this one
    for index in range(start, end):
        line = lines[index]
        if line.literal:
            continue
        if _RUN.match(line.text) and only_runs:
            continue
        if _RUN.match(line.text) or _STEP_HEADING.match(line.text) or md.heading(line):
            return None
        match = _EXPECTED.match(line.text)
        if match:
            return match.group(1).strip() or _next_text(lines, index + 1, end)
        if line.text.strip():
            only_runs = False
    return None


def _next_text(lines: Sequence[Line], start: int, end: int) -> str:
    """The first non-blank line below an empty ``Expected:`` (inside a block or not)."""
    for line in lines[start:end]:
        if line.text.strip() and not _is_fence(line.text):
            return line.text.strip()
    return ""
