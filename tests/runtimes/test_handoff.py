"""Reading an agent's reply: status line, Task Report, Downstream Context."""

from __future__ import annotations

import pytest

from pytest_maestro.runtimes.handoff import MAX_FIELD, parse_handoff

MAESTRO_REPLY = """\
I added the parser and its tests.

## Task Report
- **Status**: success
- **Objective Achieved**: the word counter reads stdin
- **Files Created**: `wordstats/core.py`, tests/test_core.py
- **Files Modified**: none
- **Validation**: pass
  (pytest: 12 passed)

## Downstream Context
- **Key Interfaces Introduced**: `count(text) -> Counter`
- **Warnings**: none

COMPLETED: word counter reads stdin
"""


def test_a_maestro_reply_gives_its_status_report_and_context() -> None:
    handoff = parse_handoff(MAESTRO_REPLY)
    assert handoff.present
    assert (handoff.status, handoff.message) == ("completed", "word counter reads stdin")
    assert handoff.status_line == "COMPLETED: word counter reads stdin"
    assert handoff.report["objective_achieved"] == "the word counter reads stdin"
    assert handoff.report["validation"] == "pass\n(pytest: 12 passed)"
    assert handoff.files("created") == ("wordstats/core.py", "tests/test_core.py")
    assert handoff.files("modified") == ()
    assert handoff.downstream == {
        "key_interfaces_introduced": "`count(text) -> Counter`",
        "warnings": "none",
    }


@pytest.mark.parametrize(
    ("line", "status", "message"),
    [
        ("FAILED: tests do not pass", "failed", "tests do not pass"),
        ("**BLOCKED:** the API key is missing", "blocked", "the API key is missing"),
        ("> COMPLETED: done", "completed", "done"),
        ("`COMPLETED: done`", "completed", "done"),
    ],
)
def test_the_status_line_may_be_decorated(line: str, status: str, message: str) -> None:
    handoff = parse_handoff(f"Some words first.\n\n{line}\n")
    assert (handoff.status, handoff.message) == (status, message)


def test_the_last_status_line_wins_over_one_quoted_earlier() -> None:
    text = "The prompt said to end with\nFAILED: <why>\nSo here it is.\nCOMPLETED: all good\n"
    assert parse_handoff(text).status == "completed"


def test_without_a_status_line_the_reports_status_decides() -> None:
    blocked = parse_handoff("## Task Report\n- **Status**: blocked — no credentials\n")
    assert blocked.status == "blocked"
    partial = parse_handoff("# Task Report\n- Status: partial\n")
    assert partial.status == "failed"


def test_a_reply_with_neither_has_no_handoff() -> None:
    handoff = parse_handoff("I looked at the code and it seems fine. Completed, I think.\n")
    assert not handoff.present
    assert handoff.status is None and handoff.status_line == ""


def test_a_section_ends_at_the_next_heading_of_its_level() -> None:
    text = "## Task Report\n- **Status**: success\n### Notes\n- **Extra**: x\n"
    text += "## Other\n- **Y**: z\n"
    report = parse_handoff(text).report
    assert report == {"status": "success", "extra": "x"}


def test_fields_are_bounded() -> None:
    text = f"## Downstream Context\n- **Notes**: {'x' * (MAX_FIELD * 3)}\n"
    assert len(parse_handoff(text).downstream["notes"]) == MAX_FIELD
