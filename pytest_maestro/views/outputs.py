"""What a run leaves behind when it ends: ``summary.json`` in the state dir, the Markdown report
at ``--maestro-report``, and the same report appended to GitHub's step summary when
``GITHUB_STEP_SUMMARY`` names one. Written by the process that holds the session."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from ..files.declared import shown
from ..state.journal import atomic_write
from ..state.model import SessionDoc
from ..state.paths import SessionPaths
from . import markdown_report as run_report
from .markdown_report import totals
from .rows import RunView, view
from .summary import summary_json, text_table

# The first line of the report ``--maestro-report`` writes: an HTML comment, which Markdown shows
# nowhere. A file without it is not this tool's, and is never written over.
REPORT_MARKER = "<!-- pytest-maestro run report: --maestro-report rewrites this file -->"


@dataclass(frozen=True)
class Written:
    """Where the run's outputs went, and those that could not be written (one line each)."""

    run: RunView
    summary: Path | None
    report: Path | None
    step_summary: Path | None
    problems: tuple[str, ...]


def write_outputs(
    doc: SessionDoc,
    order: Iterable[str],
    summary_path: Path,
    report: Path | None,
    env: Mapping[str, str],
    done: Iterable[str] = (),
    account_wait: float = 0.0,
) -> Written:
    """``account_wait``: seconds the run's phases waited for the account (rate limits, slots)."""
    run = view(doc, datetime.now(timezone.utc), order, done)
    run = replace(run, account_wait=account_wait)
    problems: list[str] = []
    summary = _write(summary_path, summary_json(run), problems, "summary")
    written = None
    if report is not None:  # rendered only to be written: it costs O(phases)
        text = run_report.render(run)
        with contextlib.suppress(OSError):  # else _write says why it could not be written
            report.parent.mkdir(parents=True, exist_ok=True)
        written = _write(report, f"{REPORT_MARKER}\n{text}", problems, "report")
    step = env.get("GITHUB_STEP_SUMMARY", "").strip()
    step_path = _append_bounded(Path(step), run, problems) if step else None
    return Written(run, summary, written, step_path, tuple(problems))


def report_refusal(report: Path, plan: Path) -> str | None:
    """Why the report may not be written at ``report``: it is the plan, or a file this tool
    did not write (one that exists, is not empty, and lacks the marker). None: it may."""
    if report.resolve() == plan.resolve():
        return "is the plan"
    try:
        info = report.stat()
    except FileNotFoundError:  # its folders are made as pytest's --junitxml makes them
        return None
    except OSError as exc:
        return f"cannot be looked at: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_size == 0:
        return None
    mark = REPORT_MARKER.encode()
    try:
        with report.open("rb") as handle:
            first = handle.read(len(mark))
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    return None if first == mark else "holds a file this tool did not write (no report marker)"


# GitHub takes at most 1 MiB of step summary per step, and Mermaid renders no diagram past
# 50,000 characters (its maxTextSize).
STEP_SUMMARY_LIMIT = 1024 * 1024
MERMAID_LIMIT = 50_000
_LEAST = 4096  # less room than this: nothing useful fits


def _append_bounded(path: Path, run: RunView, problems: list[str]) -> Path | None:
    """The report, cut to what GitHub's step summary takes beside what the step wrote there."""
    try:
        used = path.stat().st_size
    except OSError:
        used = 0
    room = STEP_SUMMARY_LIMIT - used
    if room < _LEAST:
        problems.append(f"GITHUB_STEP_SUMMARY {path} is full (GitHub takes 1 MiB): no report")
        return None
    text = run_report.render(run, diagram_limit=MERMAID_LIMIT, room=room - 1)
    if len(text.encode()) >= room:  # the diagrams leave the table no room: they go
        text = run_report.render(run, diagram_limit=1, room=room - 1)
    if len(text.encode()) >= room:
        problems.append(f"GITHUB_STEP_SUMMARY {path} has no room left for the report")
        return None
    return _append(path, text, problems)


def _write(path: Path, text: str, problems: list[str], what: str) -> Path | None:
    try:
        atomic_write(path, text, _mode(path))
    except OSError as exc:
        problems.append(f"could not write the {what} {path}: {exc.strerror or exc}")
        return None
    return path


def _mode(path: Path) -> int:
    """An existing file keeps its permissions; a new one gets those the umask gives a file."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mask = os.umask(0o022)  # reading the umask means setting it: put it back at once
        os.umask(mask)
        return 0o666 & ~mask


def _append(path: Path, text: str, problems: list[str]) -> Path | None:
    """GitHub's step summary is one file that every step appends to."""
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        problems.append(f"could not append to GITHUB_STEP_SUMMARY {path}: {exc.strerror or exc}")
        return None
    return path


def summary_lines(written: Written, paths: SessionPaths, cwd: Path, width: int) -> list[str]:
    """The terminal summary's table, totals, and where the run's files are."""
    places = [("logs", paths.logs), ("session", paths.snapshot)]
    places += [
        (name, path)
        for name, path in (
            ("summary", written.summary),
            ("report", written.report),
            ("step summary", written.step_summary),
        )
        if path is not None
    ]
    return [
        *text_table(written.run.table_rows, width),
        *totals(written.run),
        *(f"{name}: {shown(path, cwd)}" for name, path in places),
        *written.problems,
    ]
