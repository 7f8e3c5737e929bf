"""texts.one_line, the one helper that makes any text one line of a message, and escaped."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from pytest_maestro.texts import escaped, one_line


def test_one_line_joins_lines_and_shows_a_terminal_escape_as_text() -> None:
    said = "Error:\n  not logged in\t\x1b[2J\x00 · Please run /login\r\n"
    assert one_line(said) == "Error: not logged in \\x1b[2J\\x00 · Please run /login"
    assert one_line("x" * 500, 10) == "x" * 9 + "…"


@given(st.text(), st.integers(min_value=1, max_value=400))
def test_one_line_is_one_line_of_printable_text_within_its_limit(text: str, limit: int) -> None:
    line = one_line(text, limit)
    assert len(line) <= limit
    assert not re.search(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]", line)
    assert line == line.strip()


def test_a_name_with_a_line_break_is_quoted_as_it_is_not_joined() -> None:
    assert escaped("run\nall\x1b") == "run\\nall\\x1b"
