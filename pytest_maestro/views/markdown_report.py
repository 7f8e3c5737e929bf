"""The Markdown report of a run: a Mermaid flowchart of the plan coloured by status, a Mermaid
Gantt chart of the run as it happened (a section per worker, real start and end times), and the
phase table. The same text goes to ``--maestro-report``, the session file's body and GitHub's
step summary.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

from ..state.model import SessionDoc, Status, Tokens, unpriced_text
from ..texts import duration_text
from .mermaid import gantt_text, mermaid_id, mermaid_label
from .rows import PhaseRow, RunView, view

STYLE = {
    Status.PENDING: "fill:#eeeeee,stroke:#999999",
    Status.IN_PROGRESS: "fill:#fff3c4,stroke:#c9a400",
    Status.COMPLETED: "fill:#d4f4d2,stroke:#2e8b2e",
    Status.FAILED: "fill:#f8d0d0,stroke:#c0392b",
    Status.BLOCKED: "fill:#f4d9b8,stroke:#d35400",
    Status.SKIPPED: "fill:#e0e0f0,stroke:#7070a0",
}
# Gantt tags: done (completed), active (running), crit (failed or blocked).
_GANTT_TAG = {"completed": "done", "in_progress": "active", "failed": "crit", "blocked": "crit"}
GANTT_FORMAT = "YYYY-MM-DD HH:mm:ss.SSS"  # Mermaid's (dayjs) spelling of what gantt_time writes
TABLE_HEAD = (
    "phase",
    "status",
    "attempts",
    "duration",
    "agent",
    "worker",
    "tokens",
    "cost",
    "unverified",
    "review",
    "note",
)


def session_report(doc: SessionDoc) -> str:
    """The report of a session as it is now: what the session file's body holds (under the
    file's own title)."""
    return render(view(doc, datetime.now(timezone.utc)), title=False)


def render(run: RunView, title: bool = True, *, diagram_limit: int = 0, room: int = 0) -> str:
    """The report; a diagram longer than ``diagram_limit`` characters is left out, and table
    rows past ``room`` bytes of text are (both with a line that says so), when those are set."""
    lines = [f"# {run.task}: run report", ""] if title else []
    node = node_ids(run.table_rows)  # the phases' first, by position: one id a row in all three
    plan = flowchart(run.rows, node)
    lines += [*headline(run), "", "## Plan", "", *_diagram(plan, "flowchart", diagram_limit)]
    lines += ["## Timeline", ""]
    if any(row.executed for row in run.rows):
        lines += _diagram(gantt(run.rows, node), "Gantt chart", diagram_limit)
    else:
        lines += ["No phase has run yet in this run.", ""]
    head = "\n".join([*lines, "## Phases", "", ""])
    rows = table(run.table_rows, node)
    if room:
        rows = _fit(rows, room - len(head.encode()) - 1)
    text = head + "\n".join(rows) + "\n"
    reviews = review_section(run.table_rows)
    if reviews and (not room or len(text.encode()) + len(reviews.encode()) < room):
        text += "\n" + reviews
    return text


def review_section(rows: tuple[PhaseRow, ...]) -> str:
    """Each reviewed phase's review: what it came to, each criterion's verdict, each finding,
    each fix round before it."""
    lines: list[str] = []
    for row in rows:
        review = row.review
        if review is None:
            continue
        lines += [f"### {row.id}: {review.outcome}", "", f"{review.reviewer}, {review.mode}", ""]
        if review.failure is not None:
            lines += [f"- failed: {_cell(review.failure)}"]
        for criterion in review.verdict.criteria if review.verdict else ():
            said = "met" if criterion.met else "**not met**"
            evidence = f" (`{_cell(criterion.evidence)}`)" if criterion.evidence else ""
            lines.append(f"- {said}: {_cell(criterion.criterion)}{evidence}")
        for finding in review.verdict.findings if review.verdict else ():
            where = f"`{_cell(finding.where)}`: " if finding.where else ""
            named = f" (phases {', '.join(finding.phases)})" if finding.phases else ""
            lines.append(f"- {finding.severity}: {where}{_cell(finding.issue)}{named}")
        for done in review.rounds:  # what each fix round came to, and cost with its review
            spent = f"{done.tokens.input}/{done.tokens.output} tokens, {cost_text(done.tokens)}"
            lines.append(
                f"- fix round {done.number} ({_cell(done.how)}): {_cell(done.outcome)}; {spent}"
            )
        lines.append("")
    return "\n".join(["## Reviews", "", *lines]) if lines else ""


def _diagram(lines: list[str], what: str, limit: int) -> list[str]:
    size = sum(len(line) + 1 for line in lines)
    if limit and size > limit:
        return [
            f"The {what} ({size} characters) is left out here, where it would not fit or "
            "render; the report `--maestro-report` writes has it.",
            "",
        ]
    return ["```mermaid", *lines, "```", ""]


def _fit(rows: list[str], room: int) -> list[str]:
    """The table's head and as many rows as fit in ``room`` bytes, and a line for the rest."""
    if sum(len(row.encode()) + 1 for row in rows) <= room:
        return rows
    kept, used = rows[:2], 0
    room -= 200 + sum(len(row.encode()) + 1 for row in kept)  # the note's share
    for row in rows[2:]:
        used += len(row.encode()) + 1
        if used > room:
            break
        kept.append(row)
    left = len(rows) - len(kept)
    return [
        *kept,
        "",
        f"{left} more phases left out here, to keep within the size GitHub takes;"
        " the report `--maestro-report` writes and summary.json have every phase.",
    ]


def totals(run: RunView, arrow: str = "->") -> list[str]:
    """What the run adds up to, a line each: phases by status, tokens and cost; the wall time
    against the phases' time; the critical path as it ran. The terminal summary, the status
    view and the report (as bullets) all say it so."""
    counts = ", ".join(f"{n} {status}" for status, n in run.counts.items() if n)
    spent = run.spent
    premium = f", {requests(spent.premium_requests)}" if spent.premium_requests else ""
    notes = ["estimated"] if spent.estimated else []
    notes += [f"{unpriced_text(spent.unpriced)}: not counted"] if spent.unpriced else []
    cost = money(spent.cost) + (f" ({'; '.join(notes)})" if notes else "")
    lines = [
        f"{len(run.rows)} phases: {counts or 'none'}; tokens {spent.input} in, {spent.output} out,"
        f" {spent.cached} cached{premium}; cost {cost}"
    ]
    if run.wall_time is not None:
        gain = f" ({run.phase_time / run.wall_time:.1f}x)" if run.wall_time > 0 else ""
        wall, phases = duration_text(run.wall_time), duration_text(run.phase_time)
        lines.append(f"wall time {wall} against {phases} of phase time{gain}")
        if run.account_wait > 0:
            waited = duration_text(run.account_wait)
            lines.append(f"phases waited {waited} for the account (rate limits, call slots)")
        path = f" {arrow} ".join(run.critical_path)
        lines.append(f"critical path as it ran: {path} ({duration_text(run.critical_time)})")
    return lines


def headline(run: RunView) -> list[str]:
    """The report's first bullets: the session, the totals, why the run stopped."""
    lines = [f"- session `{run.session_id}` {run.status}", *(f"- {t}" for t in totals(run, "→"))]
    if run.stop_reason:
        lines.append(f"- stopped: {run.stop_reason}")
    return lines


def node_ids(rows: tuple[PhaseRow, ...]) -> dict[str, str]:
    return {row.id: mermaid_id(i, row.id) for i, row in enumerate(rows)}


# Each row's lines (its flowchart node, Gantt task, table row), kept while the row is the same
# object (``rows.view`` keeps a row while its phase has not moved) at the same node id.
_LINES: dict[str, tuple[PhaseRow, str, tuple[str, str | None, str]]] = {}
_LINES_MAX = 50_000


def row_lines(row: PhaseRow, node: str) -> tuple[str, str | None, str]:
    """The row's flowchart node, its Gantt task (None: it did not run in this run), its table
    row."""
    kept = _LINES.get(row.id)
    if kept is not None and kept[0] is row and kept[1] == node:
        return kept[2]
    label = mermaid_label(f"{row.id}: {row.name}" if row.name != row.id else row.id)
    task = None
    if row.executed:
        assert row.started is not None and row.duration is not None
        end = row.started + timedelta(seconds=row.duration)  # or so far, while it runs
        tag = _GANTT_TAG.get(row.status)
        tags = f"{tag}, " if tag else ""
        task = f"  {gantt_text(row.id)} :{tags}{node}, {gantt_time(row.started)}, {gantt_time(end)}"
    cells = " | ".join(_cell(c) for c in cells_of(row))
    lines = (f'  {node}["{label}"]:::{row.status}', task, f"| {cells} |")
    if len(_LINES) >= _LINES_MAX:
        _LINES.clear()
    _LINES[row.id] = (row, node, lines)
    return lines


def flowchart(rows: tuple[PhaseRow, ...], node: Mapping[str, str]) -> list[str]:
    """A node per phase with its status as class, an edge per dependency; ``node``: each row's
    node id (``node_ids``)."""
    lines = ["flowchart TD"]
    lines += [row_lines(row, node[row.id])[0] for row in rows]
    for row in rows:
        deps = dict.fromkeys(d for d in row.blocked_by if d in node)
        lines += [f"  {node[dep]} --> {node[row.id]}" for dep in deps]
    lines += [f"  classDef {status.value} {style}" for status, style in STYLE.items()]
    return lines


def gantt(rows: tuple[PhaseRow, ...], node: Mapping[str, str]) -> list[str]:
    """A section per worker, a task per phase that ran in this run, from its start to its end
    (or to now, while it runs). Times in UTC."""
    ran = [row for row in rows if row.executed]
    lines = [
        "gantt",
        "  title Phases by worker (UTC)",
        f"  dateFormat {GANTT_FORMAT}",
        "  axisFormat %H:%M:%S",
    ]
    workers = sorted({row.worker or "main" for row in ran}, key=_natural)
    for worker in workers:
        lines.append(f"  section {gantt_text(worker)}")
        for row in sorted((r for r in ran if (r.worker or "main") == worker), key=_start):
            task = row_lines(row, node[row.id])[1]
            assert task is not None  # it ran
            lines.append(task)
    return lines


def _natural(text: str) -> tuple[str, int]:
    """gw2 before gw10."""
    stem = text.rstrip("0123456789")
    return stem, int(text[len(stem) :] or -1)


def _start(row: PhaseRow) -> datetime:
    assert row.started is not None
    return row.started


def gantt_time(moment: datetime) -> str:
    """``GANTT_FORMAT``: UTC, to the millisecond (isoformat: a tenth of strftime's cost)."""
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(" ", "milliseconds")


def table(rows: tuple[PhaseRow, ...], node: Mapping[str, str]) -> list[str]:
    lines = ["| " + " | ".join(TABLE_HEAD) + " |", "|" + "---|" * len(TABLE_HEAD)]
    return lines + [row_lines(row, node[row.id])[2] for row in rows]


def cells_of(row: PhaseRow) -> tuple[str, ...]:
    """A row's table cells as text, in ``TABLE_HEAD``'s order."""
    status = row.status
    if status == "completed" and not row.this_run:
        status = "completed earlier"
    tokens = "-"
    if row.tokens.input or row.tokens.output:
        tokens = f"{row.tokens.input}/{row.tokens.output}"
    elif row.tokens.premium_requests:
        tokens = requests(row.tokens.premium_requests)
    return (
        row.id,
        status,
        str(row.attempts) if row.attempts else "-",
        duration_text(row.duration) if row.this_run else "-",
        row.agent or "-",
        row.worker or "-",
        tokens,
        cost_text(row.tokens),
        "yes" if row.unverified else "",
        row.review.outcome if row.review is not None else "",
        row.note,
    )


def cost_text(tokens: Tokens) -> str:
    """A phase's cost: ``$0.0123``, ``$0.0123 estimated`` (from a price table), ``unknown model
    X`` when no table priced it, ``-`` when nothing cost anything."""
    said = [money(tokens.cost) + (" estimated" if tokens.estimated else "")] if tokens.cost else []
    if tokens.unpriced:
        said.append(unpriced_text(tokens.unpriced))
    return "; ".join(said) or "-"


def requests(count: int) -> str:
    return f"{count} premium request{'s' if count != 1 else ''}"


@functools.lru_cache(maxsize=1024)  # a table repeats its cells ("-", "completed", "shell")
def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def money(value: float) -> str:
    if not value:
        return "$0"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"
