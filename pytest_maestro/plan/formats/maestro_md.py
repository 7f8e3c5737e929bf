"""Maestro implementation plans (Markdown): ``## Phase N: name`` sections with ``###`` parts.

Recognised parts of a phase: ``### Agent: name`` (``### Agent: coder, tester``: the first runs
the phase, the others are named in its prompt), ``### Parallel: Yes|No``, ``### Files to
Create|Modify|Delete`` (bullets with backticked paths), ``### Validation`` (a bullet's first
backticked span, or each line of a shell code block, is a command; other bullets stay prose
criteria), ``### Dependencies`` (``- Blocked by: 1, 2``, ``None`` or ``Phase 1, Phase 2``). Every
other part (``### Objective``, ``### Implementation Details``, ...) goes into the description.
Template placeholders (``<agent-name>``, ``[Phase IDs or "None"]``) count as not filled in.
Phase ids are the numbers as written (``"1"``, ``"2.1"``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import PlanError
from ..model import Check, Files, Phase, Plan
from ..source import Line, Source
from . import markdown as md

NAME = "maestro-md"
EXPECTS = "## Phase N, ### Agent"

_PHASE = re.compile(r"^Phase\s+(\d+(?:\.\d+)*[a-z]?)(?:\s*[:.\u2014\u2013-]\s*(.*)|\s*)$", re.I)
_PART = re.compile(r"^([^:]+?)\s*(?::\s*(.*))?$")
_MAESTRO_PARTS = re.compile(
    r"^(?:agents?|parallel|files to (?:create|modify|delete)|dependencies)\b", re.I
)
_BLOCKED_BY = re.compile(
    r"^\s*(?:[-*+]\s+)?\**\s*(?:blocked[ _-]by|depends[ _-]on)\s*\**\s*:?\s*\**\s*(.*)$", re.I
)
_DEP_ID = re.compile(r"(?<![\w.])(?:phase\s+)?(\d+(?:\.\d+)*[a-z]?)(?!\w)", re.I)
_SHELL_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})\s*(?:bash|sh|shell|console|zsh)?\s*$", re.I)
_DESCRIPTION_PARTS = ("objective", "implementation details")


@dataclass(frozen=True)
class _Part:
    key: str  # lower-cased heading text before any ':'
    value: str  # heading text after ':'
    heading_index: int
    end: int


def detect(source: Source) -> bool:
    """A ``## Phase N`` section holding a Maestro part (Agent, Parallel, Files to ..., ...)."""
    if "Phase" not in source.text:
        return False
    in_phase = False
    for line in source.lines:
        parsed = md.heading(line)
        if parsed is None:
            continue
        level, title = parsed
        if level <= 2:
            in_phase = level == 2 and _PHASE.match(title) is not None
        elif level == 3 and in_phase and _MAESTRO_PARTS.match(title):
            return True
    return False


def read(source: Source) -> Plan:
    lines, path = source.lines, source.path
    starts = [h for h in md.headings(lines) if h.level == 2 and _PHASE.match(h.text)]
    phases = [_read_phase(lines, h, path) for h in starts]
    stop = starts[0].index if starts else len(lines)
    title, context = md.title_and_context(source, stop)
    return Plan(path=path, format=NAME, phases=tuple(phases), title=title, context=context)


def _read_phase(lines: Sequence[Line], start: md.Heading, path: Path) -> Phase:
    match = _PHASE.match(start.text)
    assert match is not None  # guaranteed by the caller's filter
    phase_id, name = match.group(1), (match.group(2) or "").strip()
    line = start.line(lines)
    end = md.section_end(lines, start.index, 2)
    parts = _parts(lines, start.index, end)
    files: dict[str, list[str]] = {"create": [], "modify": [], "delete": []}
    acceptance: list[Check] = []
    blocked_by: list[str] = []
    agents: list[str] = []
    parallel = True
    described: list[str] = []
    for part in parts:
        body = (part.heading_index + 1, part.end)
        if part.key in ("agent", "agents"):
            agents = _agents(part.value or md.text_of(lines, *body))
        elif part.key == "parallel":
            parallel = _parallel(part.value or md.text_of(lines, *body), path, line, phase_id)
        elif part.key.startswith("files to ") and part.key[9:] in files:
            files[part.key[9:]].extend(_files(lines, *body))
        elif part.key in ("validation", "verification", "acceptance criteria"):
            acceptance.extend(_checks(lines, *body))
        elif part.key == "dependencies":
            blocked_by.extend(_dependencies(lines, part, path, phase_id))
        else:
            described.append(md.text_of(lines, part.heading_index, part.end))
    first_part = parts[0].heading_index if parts else end
    intro = md.text_of(lines, start.index + 1, first_part)
    return Phase(
        id=phase_id,
        name=name if name and not md.is_placeholder(name) else f"Phase {phase_id}",
        line=line,
        agent=agents[0] if agents else None,
        constraints=_team(agents),
        blocked_by=tuple(dict.fromkeys(blocked_by)),
        files=Files(tuple(files["create"]), tuple(files["modify"]), tuple(files["delete"])),
        acceptance=tuple(acceptance),
        description="\n\n".join(t for t in (intro, *_ordered(described)) if t),
        parallel=parallel,
    )


def _parts(lines: Sequence[Line], start: int, end: int) -> list[_Part]:
    found = [h for h in md.headings(lines, start + 1, end) if h.level == 3]
    parts = []
    for position, part in enumerate(found):
        match = _PART.match(part.text)
        key, value = (match.group(1), match.group(2) or "") if match else (part.text, "")
        part_end = found[position + 1].index if position + 1 < len(found) else end
        parts.append(_Part(" ".join(key.lower().split()), value.strip(), part.index, part_end))
    return parts


def _agents(value: str) -> list[str]:
    """``coder, tester`` (or ``coder and tester``): every agent named, in order."""
    names = (md.filled_in(name) for name in re.split(r",|;|\band\b|&", value))
    return list(dict.fromkeys(name for name in names if name))


def _team(agents: list[str]) -> tuple[str, ...]:
    """The first agent runs the phase; the others are named in its prompt."""
    if len(agents) < 2:
        return ()
    return (f"This phase is shared with {', '.join(agents[1:])}: leave their part to them.",)


def _ordered(described: list[str]) -> list[str]:
    """Objective first, then Implementation Details, then the rest in written order."""

    def rank(text: str) -> int:
        title = text.split("\n", 1)[0].lstrip("# ").lower()
        return next((i for i, key in enumerate(_DESCRIPTION_PARTS) if title.startswith(key)), 2)

    return sorted(described, key=rank)


def _parallel(value: str, path: Path, line: int, phase_id: str) -> bool:
    words = value.strip().strip("`*").split()
    if not words or md.is_placeholder(value):
        return True
    word = words[0].strip(".,;:()").lower()
    if word in ("yes", "true", "y"):
        return True
    if word in ("no", "false", "n"):
        return False
    raise PlanError(
        f"'### Parallel:' must be Yes or No, not {value.strip()!r}", path, line, phase_id
    )


def _files(lines: Sequence[Line], start: int, end: int) -> list[str]:
    paths = []
    for item in md.items(lines, start, end):
        first_line = item.text.split("\n", 1)[0]
        spans = md.code_spans(first_line)
        bare = first_line.split()[0] if first_line.split() else ""
        # A bare word is a path only when it looks like one ("src/app.py", not "Update").
        candidate = spans[0] if spans else bare if ("/" in bare or "." in bare) else ""
        path = md.clean_path(candidate)
        if path:
            paths.append(path)
    return paths


def _checks(lines: Sequence[Line], start: int, end: int) -> list[Check]:
    """Bullets (first backticked span = command) and the lines of shell code blocks."""
    checks = []
    for item in md.items(lines, start, end):
        if md.is_placeholder(item.text):
            continue
        checks.append(Check(criterion=item.text, check=md.command_in(item.text)))
    shell_block: bool | None = None  # None: outside a code block; else whether it is shell
    for line in lines[start:end]:
        fence = line.text.strip()
        if not line.in_fence:
            shell_block = None
        elif shell_block is None:
            shell_block = _SHELL_FENCE.match(line.text) is not None
        elif fence.startswith(("```", "~~~")) and not fence.strip("`~"):
            shell_block = None
        elif shell_block and fence and not fence.startswith("#"):
            command = fence.removeprefix("$ ").strip()
            checks.append(Check(criterion=command, check=command))
    return checks


def _dependencies(lines: Sequence[Line], part: _Part, path: Path, phase_id: str) -> list[str]:
    heading_line = lines[part.heading_index]
    values = [(part.value, heading_line.number)] if part.value else []
    for line in lines[part.heading_index + 1 : part.end]:
        match = None if line.literal else _BLOCKED_BY.match(line.text)
        if match:
            values.append((match.group(1), line.number))
    found = []
    for value, number in values:
        ids = dependency_ids(value)
        md.check_dependencies(value, ids, path, number, phase_id)
        found.extend(ids)
    return found


def dependency_ids(value: str) -> list[str]:
    """``1, 2`` / ``Phase 1 and Phase 3`` / ``None`` / a placeholder -> phase ids as written."""
    value = value.strip().strip("*").strip()
    if md.is_placeholder(value) or md.is_none(value):
        return []
    value = re.sub(r"\([^)]*\)", "", value)
    return _DEP_ID.findall(value)
