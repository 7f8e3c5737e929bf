"""The Markdown block structure every Markdown reader reads: comments, fences, setext headings."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_maestro.plan import PlanError, load_plan
from pytest_maestro.plan.source import Source


def write(tmp_path: Path, text: str, name: str = "plan.md") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def test_a_task_heading_in_an_html_comment_is_no_phase(tmp_path: Path) -> None:
    plan = load_plan(
        write(
            tmp_path,
            """
            # Tasks

            <!--
            ### T099: phantom task from a template comment
            **Depends**: T001
            -->

            ### T001: real
            **File(s)**: `a.py`
            """,
        )
    )
    assert plan.ids == ("T001",)
    assert plan.phase("T001").line == 8


def test_a_setext_heading_is_a_task(tmp_path: Path) -> None:
    plan = load_plan(
        write(
            tmp_path,
            """
            # Plan

            ### Task 1: first

            Do the first thing.

            Task 2: second
            --------------

            Do the second thing.
            """,
        )
    )
    assert plan.ids == ("task-1", "task-2")
    assert plan.phase("task-2").line == 7
    assert plan.phase("task-2").name == "second"
    assert plan.phase("task-2").blocked_by == ("task-1",)
    assert "Do the second thing." in plan.phase("task-2").description


def test_headings_in_fences_are_text(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        # Not a plan

        ~~~markdown
        ### Task 1: an example inside a fence
        ~~~

            ### T001: an indented code block
        """,
    )
    with pytest.raises(PlanError, match="no phases found"):
        load_plan(path)


def test_the_frontmatter_never_becomes_a_setext_heading() -> None:
    source = Source(Path("p.md"), "---\ntitle: x\n---\n# Plan\n")
    assert [line.heading for line in source.lines] == [None, None, None, (1, "Plan"), None]


def test_lines_are_flagged_from_one_parse() -> None:
    source = Source(Path("p.md"), "# T\n<!-- a\n## b -->\nText\n===\n- [ ] x\n  - y\n")
    assert source.blocks is source.blocks
    flags = [(line.heading, line.literal) for line in source.lines]
    assert flags == [
        ((1, "T"), False),
        (None, True),
        (None, True),
        ((1, "Text"), False),
        (None, True),  # the setext underline
        (None, False),
        (None, False),
        (None, False),
    ]
    items = [(item.line, item.depth, item.text, item.parent) for item in source.list_items]
    assert items == [(6, 0, "[ ] x", None), (7, 1, "y", 0)]
