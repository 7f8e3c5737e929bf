"""Reading plan text: BOM, CRLF and code fences handled once for every reader."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import PlanError

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def read_text(path: Path) -> str:
    """The plan's text with a UTF-8 BOM removed and line endings normalised to ``\\n``."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PlanError("plan file not found", path) from None
    except IsADirectoryError:
        raise PlanError("is a directory, not a plan file", path) from None
    except OSError as exc:
        raise PlanError(f"cannot read plan: {exc.strerror}", path) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PlanError("not UTF-8 text", path, line) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True)
class Line:
    number: int  # 1-based
    text: str
    in_fence: bool  # inside a fenced code block (fence lines included): text, never structure


def markdown_lines(text: str) -> Iterator[Line]:
    """Each line of a Markdown document, flagged when it belongs to a fenced code block."""
    fence: str | None = None
    for number, text_line in enumerate(text.split("\n"), start=1):
        match = _FENCE.match(text_line)
        if fence is None:
            if match:
                fence = match.group(1)
            yield Line(number, text_line, match is not None)
            continue
        closes = match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)
        if closes and not text_line.strip().strip(fence[0]):
            fence = None
        yield Line(number, text_line, True)
