"""Plan errors: one line that names the file, the line where known, and the phase."""

from __future__ import annotations

from pathlib import Path


def location(path: Path | str, line: int | None = None) -> str:
    return f"{path}:{line}" if line else str(path)


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
        where = location(self.path, self.line)
        what = f"phase {self.phase!r} " if self.phase is not None else ""
        return f"{where}: {what}{self.message}"
