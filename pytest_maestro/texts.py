"""Small renderings every output shares, so that one run reads the same everywhere: a duration,
the last line of a text, the width a table may take."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path


def duration_text(seconds: float | None) -> str:
    """0.25s, 12s, 3m05s, 1h02m: precise while short, readable when long; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.2f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


# What may not reach a terminal raw: a terminal escape, a NUL, a lone surrogate.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` as one line of a message: runs of white space (line breaks too) made one space,
    any other control character shown as its escape, cut to ``limit`` characters."""
    line = escaped(" ".join(text.split()))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def escaped(text: str) -> str:
    """``text`` with every control character (a line break too) shown as its escape: a name
    from a file, quoted in a message as it is."""
    return _CONTROL.sub(_escape, text)


def _escape(control: re.Match[str]) -> str:
    return control.group().encode("unicode_escape", "backslashreplace").decode()


def os_error_text(error: OSError) -> str:
    """What went wrong, and with which file when the error names one: ``No space left on
    device: /x/y``."""
    where = f": {error.filename}" if error.filename else ""
    return f"{error.strerror or error}{where}"


def shown(path: Path, cwd: Path) -> str:
    """``path`` as users read it: relative to ``cwd``, where they ran pytest, when inside it."""
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def last_line(text: str | None) -> str:
    """The last line of ``text`` that holds something, stripped; empty if none does."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def table_width() -> int:
    """The terminal's width when standard output is one; 0 (no limit) for a pipe or a CI log,
    which keep lines whole."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else 0
