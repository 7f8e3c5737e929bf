"""Reading what an agent CLI printed: its last JSON object or JSON lines, the reason on its
standard error, and its token counts and cost, checked (a count that is not one is a
``NumberError``, which fails the attempt rather than reaching the budget)."""

from __future__ import annotations

import json
import re
from typing import Any

from ..numbers import NumberError, reply_dollars, reply_tokens

_ERROR_LINE = re.compile(r"^(error|fatal)\b|\berror:", re.IGNORECASE)


def stderr_reason(text: str) -> str:
    """The CLI's own reason on its standard error, in one line: its last line that says
    ``Error``, else its last line (help that follows an error is not the reason)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = [line for line in lines if _ERROR_LINE.search(line)]
    return (said or lines or [""])[-1]


def last_lines(text: str, count: int = 3) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[-count:])


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object (CLIs may print notices first), else the
    whole text as one object."""
    found = json_lines(text)
    if found:
        return found[-1]
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser recurses
        return None
    return value if isinstance(value, dict) else None


def trailing_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object, one line or indented over many, that ends ``text`` after whatever came
    before it: notices, warnings, a stack trace (gemini's standard error)."""
    end = len(text.rstrip())
    start = end
    while start > 0:
        start = text.rfind("{", 0, start)
        if start < 0:
            return None
        if start == 0 or text[start - 1] == "\n":
            try:
                value, stop = json.JSONDecoder().raw_decode(text, start)
            except ValueError:
                continue
            if stop == end and isinstance(value, dict):
                return value
    return None


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` that is a JSON object."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def count(value: Any, field: str = "token count") -> int:
    """A token count from a CLI's JSON: absent is 0; anything but a count is NumberError."""
    return reply_tokens(value, field)


def uncached(total: int, cached: int, field: str) -> int:
    """The tokens of ``total`` not read from the cache, for CLIs whose input count includes
    the cached ones: more cached than in all is a reply that cannot be counted."""
    if cached > total:
        raise NumberError(f"the reply's cached tokens ({cached}) exceed its {field} ({total})")
    return total - cached


def dollars(value: Any, field: str) -> float:
    """A cost from a CLI's JSON: absent is 0; NaN, negative or not a number is NumberError
    (such a cost would disable or undo the budget)."""
    return reply_dollars(value, field)
