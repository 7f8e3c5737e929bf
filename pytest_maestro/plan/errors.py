"""Plan errors: one line that names the file, the line where known, and the phase."""

from __future__ import annotations

from pathlib import Path

from ..texts import one_line

# What one error line may hold: a 5,000-character id must not become a 5,000-character line.
MAX_LINE = 400


def location(path: Path | str, line: int | None = None) -> str:
    return f"{path}:{line}" if line else str(path)


def quoted(text: str, limit: int = 60) -> str:
    """``repr(text)``, its middle left out past ``limit`` characters: an id in a message."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit])[:-1] + "…" + repr(text)[-1]


class PlanError(Exception):
    """A plan that cannot be read or is not valid.

    ``str(error)`` is the one line a user sees: ``plans/x.md:41: phase 'T007' depends on unknown
    phase 'T099'``.
    """

    def __init__(
        self,
        message: str,
        path: Path | str,
        line: int | None = None,
        phase: str | None = None,
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.phase = phase
        super().__init__(str(self))

    def __str__(self) -> str:
        where = one_line(location(self.path, self.line), 200)
        what = f"phase {one_line(quoted(self.phase))} " if self.phase is not None else ""
        return f"{where}: {what}{one_line(self.message, MAX_LINE)}"
