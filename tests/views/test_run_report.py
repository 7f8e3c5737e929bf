"""The phase rows and their renderings (Markdown report, Mermaid, summary.json), without pytest."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from pytest_maestro.phase.events import FINISHED, PhaseEvent
from pytest_maestro.state.model import PhaseError, PhaseState, SessionDoc, Status, Tokens
from pytest_maestro.texts import duration_text
from pytest_maestro.views.markdown_report import GANTT_FORMAT, cells_of, render
from pytest_maestro.views.rows import critical_path, parse_time, view
from pytest_maestro.views.summary import summary_dict, text_table

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def at(offset: float) -> str:
    return (T0 + timedelta(seconds=offset)).isoformat().replace("+00:00", "Z")


def state(
    pid: str, status: str, start: float | None, end: float | None, **fields: object
) -> PhaseState:
    return PhaseState(
        pid,
        f"Phase {pid}",
        status=Status(status),
        started=None if start is None else at(start),
        completed=None if end is None else at(end),
        **fields,  # type: ignore[arg-type]
    )


def diamond() -> SessionDoc:
    """a, then b (2 s) and c (5 s) on two workers, then d; e failed; f skipped after it; g from
    an earlier run."""
    doc = SessionDoc("s1", "Demo", "plan.yaml", at(-100), at(20), run_started=at(0))
    phases = [
        state("a", "completed", 1, 2, worker="gw0", attempts=1, agents=("coder",)),
        state("b", "completed", 2, 4, worker="gw0", attempts=1, blocked_by=("a",)),
        state("c", "completed", 2, 7, worker="gw1", attempts=2, blocked_by=("a",)),
        state("d", "completed", 7, 8, worker="gw0", attempts=1, blocked_by=("b", "c")),
        state(
            "e",
            "failed",
            3,
            4,
            worker="gw1",
            attempts=3,
            tokens=Tokens(100, 20, 5, 0.25),
            errors=(
                PhaseError(
                    "coder", at(4), "failed", "attempt 3: check failed: tests (exit code 1)"
                ),
            ),
        ),
        state("f", "skipped", None, None, blocked_by=("e",), result="dependency 'e' failed"),
        state("g", "completed", -50, -40, worker="gw0", attempts=1),
    ]
    doc.phases = {p.id: p for p in phases}
    return doc


def test_rows_say_what_ran_in_this_run_and_for_how_long() -> None:
    run = view(diamond(), T0 + timedelta(seconds=30))
    rows = {row.id: row for row in run.rows}
    assert [r.id for r in run.rows if r.executed] == ["a", "b", "c", "d", "e"]
    assert rows["c"].duration == 5.0 and rows["c"].attempts == 2
    assert not rows["g"].this_run and rows["g"].status == "completed"
    assert rows["e"].note == "attempt 3: check failed: tests (exit code 1)"
    assert rows["f"].note == "dependency 'e' failed"
    assert run.wall_time == 7.0  # 1 s to 8 s
    assert run.phase_time == 1 + 2 + 5 + 1 + 1
    assert run.critical_path == ("a", "c", "d")  # d waited for c, not b
    assert run.critical_time == 7.0
    assert run.counts["completed"] == 5 and not run.all_completed
    assert (run.tokens, run.cost) == ((100, 20, 5), 0.25)


def test_a_running_phase_lasts_until_now() -> None:
    doc = diamond()
    doc.phases["d"] = state("d", "in_progress", 7, None, worker="gw0", blocked_by=("b", "c"))
    run = view(doc, T0 + timedelta(seconds=10))
    d = next(r for r in run.rows if r.id == "d")
    assert (d.duration, d.finished) == (3.0, None)
    assert run.wall_time == 9.0
    assert run.critical_path[-1] == "d"


def test_critical_path_of_nothing_is_empty() -> None:
    assert critical_path([]) == []


def test_times_read_as_the_session_writes_them() -> None:
    assert parse_time("2026-03-01T12:00:00.5Z") == T0 + timedelta(seconds=0.5)
    assert parse_time("2026-03-01T12:00:00.500+00:00") == T0 + timedelta(seconds=0.5)
    assert parse_time("2026-03-01T12:00:00") == T0  # a hand-edited file: UTC
    assert parse_time("not a time") is None and parse_time(None) is None


FLOW_NODE = re.compile(r'^  (p\d+_\w+)\["([^"]*)"\]:::(\w+)$')
GANTT_TASK = re.compile(
    r"^  ([^:]+?) :(?:(done|active|crit), )?(p\d+_\w+), ([\d\- :.]+), ([\d\- :.]+)$"
)


def mermaid_blocks(text: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"```mermaid\n(.*?)```", text, re.S)]


def test_report_has_a_flowchart_a_gantt_chart_and_the_table() -> None:
    text = render(view(diamond(), T0 + timedelta(seconds=30)))
    flow, gantt = mermaid_blocks(text)
    nodes = {m[2].split(":")[0]: m[3] for line in flow if (m := FLOW_NODE.match(line))}
    assert nodes == {
        **dict.fromkeys("abcdg", "completed"),
        "e": "failed",
        "f": "skipped",
    }
    assert "  classDef failed fill:#f8d0d0,stroke:#c0392b" in flow
    assert gantt[:4] == [
        "gantt",
        "  title Phases by worker (UTC)",
        f"  dateFormat {GANTT_FORMAT}",
        "  axisFormat %H:%M:%S",
    ]
    assert [line for line in gantt if line.startswith("  section")] == [
        "  section gw0",
        "  section gw1",
    ]
    tasks = {m[1]: m for line in gantt if (m := GANTT_TASK.match(line))}
    assert sorted(tasks) == ["a", "b", "c", "d", "e"]  # g ran in an earlier run, f never
    assert tasks["c"].groups()[3:] == ("2026-03-01 12:00:02.000", "2026-03-01 12:00:07.000")
    assert (tasks["e"][2], tasks["a"][2]) == ("crit", "done")
    row = "| e | failed | 3 | 1.00s | - | gw1 | 100/20 | $0.2500 |  |  | attempt 3: check failed"
    assert row in text
    assert "| g | completed earlier | 1 | - |" in text


AWKWARD = ["a b", 'q"uote', "x:y;z#1", "[br]", "é-ü", "1.2", "1_2", "-->", "%%c"]


@given(
    st.lists(
        st.sampled_from(AWKWARD) | st.text(min_size=1, max_size=12),
        min_size=1,
        max_size=6,
        unique=True,
    )
)
def test_mermaid_stays_parseable_whatever_the_ids(ids: list[str]) -> None:
    doc = SessionDoc("s", "T", "p", at(0), at(0), run_started=at(0))
    for n, pid in enumerate(ids):
        doc.phases[pid] = state(pid, "completed", n, n + 1, worker="gw0", blocked_by=tuple(ids[:n]))
    flow, gantt = mermaid_blocks(render(view(doc, T0)))
    nodes = [FLOW_NODE.match(line) for line in flow if "[" in line and "classDef" not in line]
    assert all(nodes) and len({m[1] for m in nodes if m}) == len(ids)
    edges = [line for line in flow if "-->" in line and "[" not in line]
    assert all(re.fullmatch(r"  p\d+_\w+ --> p\d+_\w+", line) for line in edges)
    tasks = [
        line
        for line in gantt
        if line.startswith("  ")
        and not line.startswith(("  title", "  dateFormat", "  axisFormat", "  section"))
    ]
    assert len(tasks) == len(ids) and all(GANTT_TASK.match(line) for line in tasks)


def test_summary_has_maestros_dispatch_fields_and_ours() -> None:
    data = summary_dict(view(diamond(), T0 + timedelta(seconds=30)))
    assert {k: data[k] for k in ("batch_status", "total_agents", "succeeded", "failed")} == {
        "batch_status": "partial_failure",
        "total_agents": 5,
        "succeeded": 4,
        "failed": 1,
    }
    assert data["wall_time_seconds"] == 7.0
    assert data["agents"][0] == {"name": "coder", "phase": "a", "exit_code": 0, "status": "success"}
    assert data["agents"][-1]["exit_code"] == 1
    e = next(p for p in data["phases"] if p["id"] == "e")
    assert e["tokens"] == {"input": 100, "output": 20, "cached": 5} and e["cost"] == 0.25
    assert (e["start"], e["finish"], e["attempts"]) == (
        "2026-03-01T12:00:03.000+00:00",
        "2026-03-01T12:00:04.000+00:00",
        3,
    )


def test_batch_status_says_success_only_when_every_phase_completed() -> None:
    def batch(*phases: PhaseState) -> str:
        doc = SessionDoc("s1", "Demo", "plan.yaml", at(-100), at(20), run_started=at(0))
        doc.phases.update((p.id, p) for p in phases)
        return str(summary_dict(view(doc, T0 + timedelta(seconds=30)))["batch_status"])

    done, earlier = state("a", "completed", 1, 2), state("a", "completed", -9, -8)
    pending = state("b", "pending", None, None)
    stopped = state("b", "skipped", None, None, result="stopped: budget")
    assert batch(done, state("b", "completed", 2, 3)) == "success"
    assert batch(earlier, state("b", "completed", 2, 3)) == "success"
    assert batch(state("a", "pending", None, None), pending) == "pending"
    assert batch(done, pending) == "incomplete"  # stopped early, or b was not selected
    assert batch(earlier, pending) == "incomplete"  # nothing ran this time
    assert batch(done, stopped) == "incomplete"
    assert batch(done, state("b", "in_progress", 2, None)) == "in_progress"
    assert batch(done, state("b", "failed", 2, 3)) == "partial_failure"
    assert batch(earlier, state("b", "failed", 2, 3)) == "failed"


def test_text_table_cuts_only_the_note() -> None:
    lines = text_table(view(diamond(), T0).rows, width=90)
    assert lines[0].split()[:4] == ["phase", "status", "attempts", "duration"]
    failed = next(line for line in lines if line.startswith("e "))
    assert failed.endswith("…") and "100/20" in failed and "$0.2500" in failed


def test_a_duration_reads_the_same_in_the_table_and_the_progress_lines() -> None:
    doc = SessionDoc("s1", "Demo", "plan.yaml", at(-100), at(20), run_started=at(0))
    doc.phases["a"] = state("a", "completed", 1, 13.3, worker="gw0", attempts=1)
    (row,) = view(doc, T0).rows
    line = PhaseEvent("a", FINISHED, row.duration, attempt=1, status="completed").line()
    assert (cells_of(row)[3], line) == ("12s", "maestro a: completed in 12s")
    assert text_table((row,))[1].split()[3] == "12s"
    assert [duration_text(v) for v in (None, 0.04, 5, 42.25, 125, 7300)] == [
        "-",
        "0.04s",
        "5.00s",
        "42s",
        "2m05s",
        "2h01m",
    ]


def test_a_report_rendered_again_shows_what_moved_since_and_keeps_the_rest() -> None:
    """Rows and their lines are kept while a phase's state is the same object: a phase that
    moved, one running (its duration grows with the moment) and a new run start each show."""
    doc = diamond()
    first = render(view(doc, T0 + timedelta(seconds=30)))
    assert render(view(doc, T0 + timedelta(seconds=30))) == first
    doc.phases["d"] = replace(doc.phases["d"], status=Status.FAILED, attempts=2)
    doc.phases["g"] = state("g", "in_progress", 10, None, worker="gw1")
    again = render(view(doc, T0 + timedelta(seconds=30)))
    assert "| d | failed | 2 |" in again and "| d | completed |" in first
    assert "| g | in_progress | - | 20s |" in again
    later = render(view(doc, T0 + timedelta(seconds=40)))
    assert "| g | in_progress | - | 30s |" in later
    doc.phases["g"] = state("g", "completed", -50, -40, worker="gw0", attempts=1)
    assert "| g | completed earlier |" in render(view(doc, T0 + timedelta(seconds=30)))
    doc.run_started = at(-60)  # the same state, seen from a run that started before it did
    assert "| g | completed | 1 | 10s |" in render(view(doc, T0 + timedelta(seconds=30)))
