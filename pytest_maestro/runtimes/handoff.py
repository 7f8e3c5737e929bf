"""What an agent hands back: its status line, Maestro's Task Report and Downstream Context.

An agent ends its reply with one status line, ``COMPLETED: …``, ``FAILED: …`` or ``BLOCKED: …``,
and may include Maestro's ``## Task Report`` and ``## Downstream Context`` sections, each a list
of ``- **Field**: value`` bullets. The reply may wrap them in other text: nothing is assumed to
start at the first byte. The verdict never rests on this alone (the runner checks files and
acceptance commands); it is what the agent says, kept for the session state and its dependents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..state.model import Status

_STATUS_LINE = re.compile(
    r"^[\s>*_`#-]*(COMPLETED|FAILED|BLOCKED)[*_`]*\s*:[*_`]*\s*(.*?)[*_`\s]*$", re.MULTILINE
)
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)
_BULLET = re.compile(r"^\s*[-*+]\s+(?:\*\*(.+?)\*\*|([^:]+?))\s*:\s*(?:\*\*)?\s*(.*)$")
_REPORT_STATUS = {
    "success": Status.COMPLETED,
    "succeeded": Status.COMPLETED,
    "completed": Status.COMPLETED,
    "complete": Status.COMPLETED,
    "done": Status.COMPLETED,
    "failure": Status.FAILED,
    "failed": Status.FAILED,
    "partial": Status.FAILED,
    "blocked": Status.BLOCKED,
}
# Longest text a handoff field keeps: a dependent's prompt carries it.
MAX_FIELD = 4000


@dataclass(frozen=True)
class Handoff:
    status: Status | None = None  # completed, failed or blocked: the status line's or report's
    message: str = ""  # the status line's text, or the report's status
    report: dict[str, str] = field(default_factory=dict)  # Task Report fields
    downstream: dict[str, str] = field(default_factory=dict)  # Downstream Context fields

    @property
    def present(self) -> bool:
        """The reply says how it went: a status line or a Task Report."""
        return self.status is not None or bool(self.report)

    @property
    def status_line(self) -> str:
        if self.status is None:
            return ""
        return f"{self.status.upper()}: {self.message}".rstrip(": ")

    def files(self, kind: str) -> tuple[str, ...]:
        """Paths the report lists as ``created``, ``modified`` or ``deleted``."""
        value = self.report.get(f"files_{kind}", "")
        paths = [p.strip().strip("`") for p in re.split(r"[,\n]", value)]
        return tuple(p for p in paths if p and p.lower() not in ("none", "n/a", "-"))


def parse_handoff(text: str) -> Handoff:
    sections = _sections(text)
    report = _fields(sections.get("task report", ""))
    downstream = _fields(sections.get("downstream context", ""))
    status, message = None, ""
    lines = _STATUS_LINE.findall(text)
    if lines:
        word, message = lines[-1]
        status = Status(word.lower())
    elif report.get("status"):
        status = _REPORT_STATUS.get(report["status"].split()[0].lower().strip(".,"), Status.FAILED)
        message = report["status"]
    return Handoff(status, message[:MAX_FIELD], report, downstream)


def _sections(text: str) -> dict[str, str]:
    """Heading text (lower case) -> the text below it, up to a heading of its level or above."""
    headings = list(_HEADING.finditer(text))
    found: dict[str, str] = {}
    for n, heading in enumerate(headings):
        level = len(heading.group(1))
        end = len(text)
        for later in headings[n + 1 :]:
            if len(later.group(1)) <= level:
                end = later.start()
                break
        found.setdefault(heading.group(2).strip().lower(), text[heading.end() : end])
    return found


def _fields(body: str) -> dict[str, str]:
    """``- **Field Name**: value`` bullets as ``{"field_name": "value"}``; indented lines below
    a bullet continue its value, anything else ends it."""
    fields: dict[str, str] = {}
    key: str | None = None
    for line in body.splitlines():
        match = _BULLET.match(line)
        if match and not line.startswith((" " * 4, "\t")):
            name = match.group(1) or match.group(2)
            key = re.sub(r"\W+", "_", name.strip().lower()).strip("_")
            fields[key] = match.group(3).strip()
        elif key is not None and line.strip() and line[:1].isspace():
            fields[key] = f"{fields[key]}\n{line.strip()}".strip()
        else:
            key = None
    return {k: v[:MAX_FIELD] for k, v in fields.items() if k}
