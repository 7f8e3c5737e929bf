"""What an agent is doing, read from its CLI's event stream line by line as the line arrives.

Each agent CLI runtime names a ``Reader`` for its stream (``CliRuntime.activity_reader``): one
line of standard output in, an ``Activity`` (a tool call or a file edit) or None out. A reader
keeps only the turn count; a line it cannot read (not JSON, another shape, another event) is no
activity, never an error. ``Feed`` carries what the readers find: each activity to the phase's
log at once (on the thread that copies the CLI's output), the newest to the progress line when
the runner's main thread asks, at most every ``EVERY`` seconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..texts import one_line

EVERY = 3.0  # seconds between two activity lines of one phase
TARGET_LIMIT = 80  # characters of a target shown
# Where a tool's input names what it acts on, in the order looked for.
TARGET_KEYS = (
    *("file_path", "filePath", "path", "notebook_path", "absolute_path"),
    *("command", "cmd", "pattern", "query", "url", "description"),
)


@dataclass(frozen=True)
class Activity:
    tool: str  # as the CLI names it: Edit, write_file, exec ...
    target: str = ""  # the file, command or pattern it acts on
    turn: int | None = None  # the agent's turn (model response) it belongs to, when known

    def text(self) -> str:
        return one_line(f"{self.tool} {self.target}".strip(), TARGET_LIMIT + 40)


def event_of(line: str) -> dict[str, Any] | None:
    """The JSON object on ``line``, else None."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class Reader:
    """Reads one CLI's events; subclasses define ``event``. ``root`` is cut from the front of a
    target path, so that a file shows as the project names it."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = f"{root}/" if root is not None else None
        self.turn = 0

    def read(self, line: str) -> Activity | None:
        event = event_of(line)
        return None if event is None else self.event(event)

    def event(self, event: dict[str, Any]) -> Activity | None:
        raise NotImplementedError

    def activity(self, tool: object, given: object) -> Activity:
        return Activity(one_line(str(tool or "tool"), 40), self.target(given), self.turn or None)

    def target(self, given: object) -> str:
        """What a tool's input names: its path (relative to the root), command or pattern."""
        if isinstance(given, str):
            text = given
        else:
            found = mapping(given)
            text = next((found[k] for k in TARGET_KEYS if isinstance(found.get(k), str)), "")
        if self.root is not None and text.startswith(self.root):
            text = text[len(self.root) :]
        return one_line(text, TARGET_LIMIT)


class ClaudeReader(Reader):
    """``stream-json``: ``assistant`` events whose content holds ``tool_use`` blocks (``name``,
    ``input``), one block an event; a turn is the assistant's events after the ``user`` event of
    the tool results (message ids are no guide: a proxy or a fake API may repeat them)."""

    def __init__(self, root: Path | None = None) -> None:
        super().__init__(root)
        self.answered = True  # the next assistant event begins a turn

    def event(self, event: dict[str, Any]) -> Activity | None:
        if event.get("parent_tool_use_id"):
            return None  # a sub-agent's own steps are not the agent's turns
        kind = event.get("type")
        if kind == "user":
            self.answered = True
        if kind != "assistant":
            return None
        if self.answered:
            self.turn, self.answered = self.turn + 1, False
        content = mapping(event.get("message")).get("content")
        uses = [mapping(c) for c in content] if isinstance(content, list) else []
        uses = [use for use in uses if use.get("type") == "tool_use"]
        return self.activity(uses[-1].get("name"), uses[-1].get("input")) if uses else None


class CodexReader(Reader):
    """``--json``: a turn per ``turn.started``; ``item.started`` of a ``command_execution``
    (``command``) or an ``mcp_tool_call``, ``item.completed`` of a ``file_change``
    (``changes[].path``) or a ``web_search`` (``query``)."""

    def event(self, event: dict[str, Any]) -> Activity | None:
        kind, item = event.get("type"), mapping(event.get("item"))
        if kind == "turn.started":
            self.turn += 1
            return None
        what = (kind, item.get("type"))
        if what == ("item.started", "command_execution"):
            return self.activity("exec", item.get("command"))
        if what == ("item.started", "mcp_tool_call"):
            return self.activity(f"{item.get('server')}.{item.get('tool')}", item.get("arguments"))
        if what == ("item.completed", "file_change"):
            changes = item.get("changes")
            paths = [self.target(c) for c in changes] if isinstance(changes, list) else []
            return Activity("edit", one_line(", ".join(paths), TARGET_LIMIT), self.turn or None)
        if what == ("item.completed", "web_search"):
            return self.activity("web_search", item.get("query"))
        return None


class CopilotReader(Reader):
    """``--output-format json``: a turn per ``assistant.turn_start``; ``tool.execution_start``
    (``data.toolName``, ``data.arguments``)."""

    def event(self, event: dict[str, Any]) -> Activity | None:
        kind, data = event.get("type"), mapping(event.get("data"))
        if kind == "assistant.turn_start":
            self.turn += 1
        elif kind == "tool.execution_start":
            return self.activity(data.get("toolName") or data.get("name"), data.get("arguments"))
        return None


class GeminiReader(Reader):
    """``stream-json``: ``tool_use`` (``tool_name``, ``parameters``); a turn is the assistant's
    messages and tool calls after the user's message or the last tool results."""

    def __init__(self, root: Path | None = None) -> None:
        super().__init__(root)
        self.answered = True

    def event(self, event: dict[str, Any]) -> Activity | None:
        kind = event.get("type")
        if kind == "tool_result" or (kind == "message" and event.get("role") == "user"):
            self.answered = True
        elif kind == "tool_use" or (kind == "message" and event.get("role") == "assistant"):
            if self.answered:
                self.turn, self.answered = self.turn + 1, False
            if kind == "tool_use":
                return self.activity(event.get("tool_name"), event.get("parameters"))
        return None


class OpenCodeReader(Reader):
    """``--format json``: a turn per ``step_start``; ``tool_use`` (``part.tool``,
    ``part.state.input``), printed when the tool ended."""

    def event(self, event: dict[str, Any]) -> Activity | None:
        kind, part = event.get("type"), mapping(event.get("part"))
        if kind == "step_start":
            self.turn += 1
        elif kind == "tool_use":
            return self.activity(part.get("tool"), mapping(part.get("state")).get("input"))
        return None


class Feed:
    """One agent call's activities: ``line`` on the thread that copies its standard output,
    ``flush`` on the thread that waits for it. ``note`` writes a line to the phase's log; ``tell``
    shows an activity on the progress line."""

    def __init__(
        self,
        reader: Reader,
        note: Callable[[str], None] | None,
        tell: Callable[[Activity], None] | None,
        every: float = EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader, self.note, self.tell = reader, note, tell
        self.every, self.clock = every, clock
        self.lock = threading.Lock()
        self.latest: Activity | None = None
        self.told = float("-inf")  # when the last activity was shown

    def line(self, raw: bytes) -> None:
        activity = self.reader.read(raw.decode("utf-8", "replace"))
        if activity is None:
            return
        if self.note is not None:
            turn = f" (turn {activity.turn})" if activity.turn else ""
            self.note(f"--- {activity.text()}{turn}")
        with self.lock:
            self.latest = activity

    def flush(self) -> None:
        """Show the newest activity not yet shown, unless one was shown in the last ``every``
        seconds (it then waits for a later flush)."""
        now = self.clock()
        with self.lock:
            latest = self.latest
            if latest is None or self.tell is None or now - self.told < self.every:
                return
            self.latest, self.told = None, now
        self.tell(latest)
