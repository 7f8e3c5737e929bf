"""Agent definitions: YAML frontmatter and instructions, and one-line errors at the right line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_maestro.plan import PlanError
from pytest_maestro.runtimes.agents import AgentRegistry, load_agent


def test_an_agent_file_gives_its_fields_and_instructions(tmp_path: Path) -> None:
    path = tmp_path / "code_reviewer.md"
    text = "---\nname: code_reviewer\nruntime: shell\ntimeout_mins: 2\n---\n\nReview it.\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    agent = load_agent(path)
    assert (agent.name, agent.runtime, agent.timeout_mins) == ("code_reviewer", "shell", 2.0)
    assert agent.instructions == "Review it."
    assert AgentRegistry.load([tmp_path]).get("code-reviewer") == agent


def test_an_agent_file_without_frontmatter_is_all_instructions(tmp_path: Path) -> None:
    path = tmp_path / "writer.md"
    path.write_text("Write the docs.\n---\nname: not metadata\n---\n")
    agent = load_agent(path)
    assert (agent.name, agent.runtime) == ("writer", None)  # the phase or option decides
    assert agent.instructions.startswith("Write the docs.")


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("name: a\ndescription: [x\nruntime: shell", ":4: invalid agent definition: expected ','"),
        ("name: a\nruntime: shell\n  bad: indent", ":4: invalid agent definition: mapping values"),
        (": : :", ":2: invalid agent definition: expected <block end>, but found ':'"),
        ("name: a\ntimeout_mins: soon", ": agent 'a': timeout_mins must be a number, got 'soon'"),
        ("name: a\nenv: [A]", ": agent 'a': env must be a mapping of names to values, got ['A']"),
        ("name: a\ncommand: run it", ": agent 'a': command must be a list of arguments, got"),
        ("name: a\nprompt_via: pipe", ": agent 'a': prompt_via must be one of stdin, file"),
        ("name: a\nreview: strict", ": agent 'a': review must be one of none, spec, spec+quality"),
    ],
)
def test_a_bad_agent_file_is_one_line_at_its_line(tmp_path: Path, front: str, message: str) -> None:
    path = tmp_path / "a.md"
    path.write_text(f"---\n{front}\n---\nbody\n")
    with pytest.raises(PlanError) as error:
        load_agent(path)
    assert str(error.value).startswith(f"{path}{message}")
    assert "\n" not in str(error.value)
