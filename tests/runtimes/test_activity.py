"""What an agent is doing, read from its CLI's event stream a line at a time: each reader on the
event lines its real CLI prints, the feed that carries what they find to the log and the
progress line, and a run that shows it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_maestro.phase.events import ACTIVITY, PhaseEvent
from pytest_maestro.runtimes.activity import (
    Activity,
    ClaudeReader,
    CodexReader,
    CopilotReader,
    Feed,
    GeminiReader,
    OpenCodeReader,
    Reader,
)
from pytest_maestro.runtimes.gemini import GeminiRuntime
from pytest_maestro.state.model import Tokens

from ..helpers import FAKES, FIXTURES, write_plan

ROOT = Path("/project")
STREAMS = FIXTURES / "streams"

# claude's second turn, in the shape of its first (tests/fixtures/streams/claude.jsonl).
CLAUDE_BASH = (
    '{"type":"assistant","message":{"id":"msg_02","type":"message","role":"assistant","content":'
    '[{"type":"tool_use","id":"toolu_02","name":"Bash","input":{"command":"pytest -q",'
    '"description":"Run the tests"}}]},"parent_tool_use_id":null,"session_id":"2c1c"}'
)
# A file change as codex's exec_events.rs has it (the fake API's model is offered only a shell).
CODEX_EDIT = (
    '{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":'
    '"/project/src/core.py","kind":"update"}],"status":"completed"}}'
)


def recorded(cli: str) -> list[str]:
    """What the real CLI printed for one phase that writes hello.txt (tests/conformance's fake
    API, the releases of .ci/clis.txt), the project's and home's paths made ``/project`` and
    ``/home/user``."""
    return (STREAMS / f"{cli}.jsonl").read_text().splitlines()


def _read(reader: Reader, lines: list[str]) -> list[Activity]:
    return [found for line in lines if (found := reader.read(line + "\n")) is not None]


def test_claude_tool_calls_from_its_stream_json() -> None:
    lines = recorded("claude")
    assert _read(ClaudeReader(ROOT), lines) == [Activity("Write", "hello.txt", 1)]
    # Its tool results end a turn: the next call is the second.
    assert _read(ClaudeReader(ROOT), [*lines[:3], CLAUDE_BASH]) == [
        Activity("Write", "hello.txt", 1),
        Activity("Bash", "pytest -q", 2),
    ]


def test_claude_a_sub_agents_steps_are_not_turns() -> None:
    line = CLAUDE_BASH.replace('"parent_tool_use_id":null', '"parent_tool_use_id":"toolu_09"')
    assert _read(ClaudeReader(ROOT), [line]) == []


def test_codex_commands_and_file_changes_from_its_json_events() -> None:
    command = "/bin/bash -lc \"printf '%s\\\\n' hello > hello.txt\""
    assert _read(CodexReader(ROOT), recorded("codex")) == [Activity("exec", command, 1)]
    assert _read(CodexReader(ROOT), ['{"type":"turn.started"}', CODEX_EDIT]) == [
        Activity("edit", "src/core.py", 1)
    ]


def test_copilot_tool_starts_from_its_jsonl() -> None:
    assert _read(CopilotReader(ROOT), recorded("copilot")) == [Activity("create", "hello.txt", 1)]


def test_gemini_tool_calls_from_its_stream_json() -> None:
    assert _read(GeminiReader(ROOT), recorded("gemini")) == [Activity("write_file", "hello.txt", 1)]


def test_gemini_reply_tokens_and_session_from_the_same_stream() -> None:
    stdout = "\n".join(recorded("gemini")) + "\n"
    reply = GeminiRuntime().read_reply(0, stdout, "Warning: 256-color support not detected.\n")
    assert (reply.text, reply.error) == ("Wrote hello.txt.\n\nCOMPLETED: wrote hello.txt", None)
    assert reply.tokens == Tokens(1600, 100, 400)
    assert reply.session_id == "fde0834d-bdd4-4c12-9872-8f009b8e7b5d"
    failed = stdout.replace('"status":"success"', '"status":"error","error":{"type":"Err",'
                            '"message":"boom"}')  # fmt: skip
    assert GeminiRuntime().read_reply(1, failed, "").error == "Err: boom"


def test_opencode_tool_uses_from_its_json_events() -> None:
    assert _read(OpenCodeReader(ROOT), recorded("opencode")) == [Activity("write", "hello.txt", 1)]


BAD_LINES = [
    "",
    "not json",
    "{",
    "[1, 2]",
    '{"type": 3}',
    "null",
    '{"type":"assistant","message":"text"}',
    '{"type":"assistant","message":{"content":"text"}}',
    '{"type":"assistant","message":{"content":[1, null, {"type":"tool_use"}]}}',
    '{"type":"item.completed","item":{"type":"file_change","changes":"a"}}',
    '{"type":"item.started","item":["command_execution"]}',
    '{"type":"tool.execution_start","data":[]}',
    '{"type":"tool_use","part":{"tool":{"x":1},"state":"done"}}',
    "{" * 100_000 + "}" * 100_000,
    '{"a": "\udcff"}',
]


READERS = [ClaudeReader, CodexReader, CopilotReader, GeminiReader, OpenCodeReader]


@pytest.mark.parametrize("reader", READERS)
def test_a_line_of_any_shape_is_no_activity_or_one_and_never_an_error(
    reader: type[Reader],
) -> None:
    found = _read(reader(ROOT), BAD_LINES)
    assert all(isinstance(a.tool, str) and isinstance(a.target, str) for a in found)


def test_a_long_target_is_cut_to_one_line() -> None:
    line = recorded("codex")[3].replace("printf", "echo " + "x" * 500 + "\\nmore")
    (found,) = _read(CodexReader(ROOT), [line])
    assert len(found.text()) <= 120 and "\n" not in found.text()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_feed_notes_each_call_at_once_and_shows_the_newest_every_few_seconds() -> None:
    notes: list[str] = []
    shown: list[Activity] = []
    clock = Clock()
    feed = Feed(ClaudeReader(ROOT), notes.append, shown.append, every=3.0, clock=clock)
    feed.flush()
    assert shown == []
    for line in recorded("claude")[:3]:
        feed.line(line.encode() + b"\n")
    assert notes == ["--- Write hello.txt (turn 1)"]
    feed.flush()
    assert shown == [Activity("Write", "hello.txt", 1)]
    feed.line(CLAUDE_BASH.encode() + b"\n")
    assert notes[-1] == "--- Bash pytest -q (turn 2)"  # in the log at once
    clock.now += 1.0
    feed.flush()
    assert len(shown) == 1  # not on the line yet: one was shown a second ago
    clock.now += 2.0
    feed.flush()
    feed.flush()
    assert shown[1:] == [Activity("Bash", "pytest -q", 2)]  # once, three seconds on


def test_an_activity_is_a_progress_line_with_its_turn_and_the_phase_time() -> None:
    event = PhaseEvent("core", ACTIVITY, 100.0, 1, 3, "gw1", "Edit src/core.py", turn=7)
    assert event.line() == "maestro [gw1] core: Edit src/core.py (turn 7, 1m40s)"
    assert PhaseEvent.from_wire(event.to_wire()) == event
    assert PhaseEvent("core", ACTIVITY, 2.0, detail="exec ls").line().endswith("exec ls (2.00s)")


WORKERS = {"sequential": [], "xdist": ["-n", "1"]}


@pytest.mark.parametrize("workers", WORKERS.values(), ids=WORKERS.keys())
def test_a_running_agents_tool_call_is_a_progress_line_and_in_the_log(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    task = "FAKE:EDIT notes/hello.txt=hi\nFAKE:PACE=0.4"  # its events 0.4 s apart
    phase = {"id": "core", "description": task, "files": {"create": ["notes/hello.txt"]}}
    write_plan(pytester, [phase])
    argv = ["--maestro", "plan.yaml", "--maestro-runtime=claude", "--maestro-autonomous"]
    result = pytester.runpytest_subprocess(*argv, *workers)
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines(
        [
            r"maestro \[(main|gw0)\] core: started.*",
            r"maestro \[(main|gw0)\] core: Write notes/hello\.txt \(turn 1, \d\.\d\ds\)$",
            r"maestro \[(main|gw0)\] core: completed in .*",
        ]
    )
    log = (pytester.path / ".maestro" / "logs" / "core.log").read_text()
    assert "\n--- Write notes/hello.txt (turn 1)\n" in log
