"""Each agent CLI runtime against its fake CLI (tests/fakes, put first on PATH): the real flags,
the prompt on standard input, the real output format read back, limits told from failures."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pytest_maestro.plan.model import Phase
from pytest_maestro.runtimes import BUILTIN_RUNTIMES, AgentRequest, AgentResult
from pytest_maestro.runtimes.agents import Agent
from pytest_maestro.runtimes.cli import (
    NO_STATUS_LINE,
    CliRuntime,
    ignored_fields,
    judge,
    retry_after,
)
from pytest_maestro.runtimes.cli import Reply as CliReply
from pytest_maestro.runtimes.command import TemplateError, expand

from ..helpers import FAKES

RUNTIMES = {runtime.name: runtime for runtime in BUILTIN_RUNTIMES}
AGENT_CLIS = ["claude", "codex", "gemini", "copilot", "opencode"]
REPORTS_COST = {"claude", "opencode"}  # the others report tokens only


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    directory = tmp_path / "fake-state"
    monkeypatch.setenv("FAKE_AGENT_STATE", str(directory))
    return directory


def run(
    name: str,
    root: Path,
    prompt: str,
    *,
    autonomous: bool = False,
    timeout: float = 30,
    agent: Agent | None = None,
    model: str | None = None,
    read_only: bool = False,
) -> AgentResult:
    log = root / ".maestro" / "logs" / "p.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    request = AgentRequest(
        Phase("p", "P"),
        prompt,
        1,
        root,
        {**os.environ, "MAESTRO_ATTEMPT": "1", "MAESTRO_PHASE_ID": "p"},
        timeout,
        log,
        agent=agent,
        model=model,
        autonomous=autonomous,
        read_only=read_only,
        role="review" if read_only else "",
    )
    return RUNTIMES[name].run(request)


def calls(state: Path) -> list[dict[str, object]]:
    lines = (state / "calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("name", AGENT_CLIS)
def test_a_reply_gives_status_tokens_and_the_prompt_went_in_whole(
    name: str, tmp_path: Path, state: Path
) -> None:
    prompt = "Attempt: 1\nDo it.\nFAKE:TOKENS in=100 out=20 cost=0.01\n" + "x" * 200_000
    result = run(name, tmp_path, prompt, model="m-1")
    assert result.status == "completed", result.message
    assert result.message.startswith("COMPLETED: ")
    assert "## Task Report" in result.text
    assert result.tokens is not None
    assert (result.tokens.input + result.tokens.cached, result.tokens.output) == (100, 20)
    assert result.tokens.cost == (0.01 if name in REPORTS_COST else 0.0)
    [call] = calls(state)
    assert call["prompt_length"] == len(prompt)  # on standard input, not in an argument
    assert all(len(str(arg)) < 1000 for arg in call["argv"])  # type: ignore[union-attr]
    assert "m-1" in call["argv"]  # type: ignore[operator]
    sent = sorted((tmp_path / ".maestro" / "logs").glob("p.attempt-1.prompt.md"))
    assert [p.read_text() for p in sent] == [prompt]  # kept beside the log


# How a refused edit is named, for the CLIs whose reply shows it (the others offer the model no
# write tool without consent: docs/agent-clis.md).
DENIALS = {"claude": "Write", "codex": "/bin/bash -lc"}


@pytest.mark.parametrize("name", AGENT_CLIS)
def test_edits_need_consent(name: str, tmp_path: Path, state: Path) -> None:
    prompt = "Attempt: 1\nFAKE:EDIT out.txt=hello\n"
    denied = run(name, tmp_path, prompt)
    assert not (tmp_path / "out.txt").exists()
    if name in DENIALS:  # its reply shows the refused calls: named, the attempt failed
        assert denied.status == "failed" and f"permission denied: {DENIALS[name]}" in denied.message
        assert "out.txt" in denied.message
    else:  # the agent still says it did it: the checks must not
        assert denied.status == "completed"
    allowed = run(name, tmp_path, prompt, autonomous=True)
    assert allowed.status == "completed"
    assert (tmp_path / "out.txt").read_text() == "hello\n"
    assert RUNTIMES[name].autonomy  # the consent message can say what it allows


# A reviewer's read-only mode: whatever --maestro-autonomous says, no tool that writes is let run.
READ_ONLY = {
    "claude": ["--tools", "Read", "--allowedTools", "Read", "--permission-mode", "dontAsk"],
    "codex": ["--sandbox", "read-only"],
    "gemini": ["--approval-mode", "default"],
    "opencode": [],  # its permission rules, in the environment
}


@pytest.mark.parametrize("name", sorted(READ_ONLY))
def test_a_reviewer_s_call_is_read_only_whatever_consent_says(
    name: str, tmp_path: Path, state: Path
) -> None:
    prompt = "Review of phase p (P): spec\nFAKE:TOKENS in=10 out=2\n## Criteria to judge\n1. x\n"
    agent = Agent("reviewer", tools=("Read", "Write"))
    result = run(name, tmp_path, prompt, autonomous=True, agent=agent, read_only=True)
    assert '"verdict": "met"' in result.text, result.message
    argv = [str(arg) for arg in calls(state)[0]["argv"]]  # type: ignore[union-attr]
    flags = READ_ONLY[name]
    assert any(argv[i : i + len(flags)] == flags for i in range(len(argv))), argv
    assert RUNTIMES[name].read_only  # a reviewer may run on it
    # Its files beside the log carry its role: the implementer's prompt and reply stay.
    logs = tmp_path / ".maestro" / "logs"
    assert (logs / "p.attempt-1.review.prompt.md").read_text() == prompt
    assert not (logs / "p.attempt-1.prompt.md").exists()


def test_runtimes_without_a_read_only_mode_say_so() -> None:
    assert sorted(n for n, r in RUNTIMES.items() if getattr(r, "read_only", "")) == sorted(
        READ_ONLY
    )


# An agent's ``tools:`` as each CLI that takes one gets it: the only tools the model is offered
# (never the approval lists, which would let it edit without --maestro-autonomous).
TOOLS = {
    "claude": (("Read", "Grep"), ("Read", "Write"), ["--tools", "Read,Grep"]),
    "copilot": (("view",), ("view", "create"), ["--available-tools", "view"]),
}


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_an_agent_s_tools_are_all_the_cli_offers(name: str, tmp_path: Path, state: Path) -> None:
    reading, writing, flags = TOOLS[name]
    prompt = "Attempt: 1\nFAKE:EDIT out.txt=hello\n"
    run(name, tmp_path, prompt, autonomous=True, agent=Agent("reader", tools=reading))
    assert not (tmp_path / "out.txt").exists()  # offered no tool that writes, consent or not
    argv = [str(arg) for arg in calls(state)[0]["argv"]]  # type: ignore[union-attr]
    assert any(argv[i : i + len(flags)] == flags for i in range(len(argv)))
    run(name, tmp_path, prompt, autonomous=True, agent=Agent("writer", tools=writing))
    assert (tmp_path / "out.txt").read_text() == "hello\n"
    run(name, tmp_path, prompt, agent=Agent("writer", tools=writing))  # no consent: no edit
    assert (tmp_path / "out.txt").read_text() == "hello\n"


@pytest.mark.parametrize(
    ("name", "ignored"),
    [
        ("claude", ("temperature",)),
        ("copilot", ("temperature",)),
        ("codex", ("tools", "temperature")),
        ("gemini", ("tools", "temperature")),
        ("opencode", ("tools", "temperature")),
        ("command", ("tools", "temperature")),
        ("shell", ()),  # no agent CLI: an agent there gives a timeout, no tools
    ],
)
def test_the_agent_fields_a_runtime_is_not_given(name: str, ignored: tuple[str, ...]) -> None:
    agent = Agent("a", tools=("Read",), temperature=0.2)
    assert ignored_fields(agent, RUNTIMES[name]) == ignored
    assert ignored_fields(Agent("plain"), RUNTIMES[name]) == ()
    assert ignored_fields(agent, object()) == ()  # another plugin's runtime: it says nothing


@pytest.mark.parametrize("name", AGENT_CLIS)
@pytest.mark.parametrize(
    ("marker", "status", "words"),
    [
        ("FAKE:FAIL", "failed", "FAILED: fake failure"),
        ("FAKE:BLOCKED", "blocked", "BLOCKED: fake blocker"),
        ("FAKE:NO_HANDOFF", "failed", "no status line"),
        ("FAKE:QUOTA", "blocked", "quota spent"),
        ("FAKE:ERROR_EXIT0", "failed", ""),
    ],
)
def test_what_the_agent_says_and_how_the_cli_fails(
    name: str, marker: str, status: str, words: str, tmp_path: Path, state: Path
) -> None:
    result = run(name, tmp_path, f"Attempt: 1\n{marker}\n")
    # Claude's error with exit 0 is "Repeated 529 Overloaded errors": one to wait out.
    overloaded = name == "claude" and marker == "FAKE:ERROR_EXIT0"
    assert (result.status, result.limited) == (status, overloaded), result.message
    assert words in result.message


@pytest.mark.parametrize("name", AGENT_CLIS)
def test_a_rate_limit_is_told_apart_to_wait_it_out(name: str, tmp_path: Path, state: Path) -> None:
    running = state / "running"
    running.mkdir(parents=True)
    for pid in (os.getpid(), os.getppid()):  # two live "calls" besides this one
        (running / f"other-{pid}").write_text(str(pid))
    result = run(name, tmp_path, "Attempt: 1\nFAKE:RATE_LIMIT_OVER=2\n")
    assert (result.status, result.limited) == ("failed", True), result.message
    assert result.message.startswith("rate limited: ")


@pytest.mark.parametrize("name", AGENT_CLIS)
def test_a_hanging_cli_is_ended_at_the_timeout_with_its_group(
    name: str, tmp_path: Path, state: Path
) -> None:
    started = time.monotonic()
    result = run(name, tmp_path, "Attempt: 1\nFAKE:HANG\n", timeout=1)
    assert result.status == "failed" and result.message == "timed out after 1s"
    assert time.monotonic() - started < 20
    [call] = calls(state)
    with pytest.raises(ProcessLookupError):
        os.kill(int(call["pid"]), 0)  # type: ignore[arg-type]


def test_a_cli_not_installed_blocks_the_phase_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run("claude", tmp_path, "Do it.\n")
    assert result.status == "blocked"
    assert result.message.startswith("'claude' is not on PATH: install the claude CLI")


@pytest.mark.parametrize("prompt", ["", "  \n", "x" * (1024 * 1024 + 1)])
def test_empty_and_huge_prompts_are_refused(prompt: str, tmp_path: Path, state: Path) -> None:
    result = run("claude", tmp_path, prompt)
    assert result.status == "blocked"
    assert "prompt" in result.message
    assert not (state / "calls.jsonl").exists()  # nothing was spent


def test_the_command_runtime_fills_its_template(tmp_path: Path, state: Path) -> None:
    agent = Agent(
        "mine",
        runtime="command",
        command=("claude", "-p", "--model", "{model}"),
    )
    without_model = run("command", tmp_path, "Attempt: 1\nDo it.\n", agent=agent)
    assert without_model.status == "completed", without_model.message
    with_model = run("command", tmp_path, "Attempt: 1\nDo it.\n", agent=agent, model="m-2")
    assert with_model.status == "completed"
    argvs = [call["argv"] for call in calls(state)]
    assert argvs == [["claude", "-p"], ["claude", "-p", "--model", "m-2"]]


def test_a_command_template_with_an_unknown_placeholder_blocks(tmp_path: Path) -> None:
    agent = Agent("mine", runtime="command", command=("tool", "{prompt}"))
    result = run("command", tmp_path, "Do it.\n", agent=agent)
    assert result.status == "blocked"
    assert result.message.startswith("unknown placeholder {prompt}")


def test_expand_fills_placeholders_and_drops_an_option_without_its_value() -> None:
    values: dict[str, str | None] = {"prompt_file": "/p.md", "model": None, "phase_id": "a"}
    got = expand(("run", "--model", "{model}", "--in={prompt_file}", "{phase_id}"), values)
    assert got == ["run", "--in=/p.md", "a"]
    with pytest.raises(TemplateError):
        expand(("x", "{nope}"), values)


@pytest.mark.parametrize(
    "element",
    ["{prompt_file", "x}", "{root!r}", "{root!x}", "{root:>99999999999}", "{root:d}", "{}"],
)
def test_a_malformed_placeholder_is_a_template_error_not_a_crash(element: str) -> None:
    """An agent file's ``command:`` element that Python's formatter cannot take, or that asks
    for a conversion or a format spec (``{root:>99999999999}`` would build gigabytes), blocks
    the phase in one line instead of raising out of the runtime."""
    values: dict[str, str | None] = {"prompt_file": "/p.md", "root": "/r", "phase_id": "a"}
    with pytest.raises(TemplateError, match="placeholder"):
        expand(("x", element), values)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("429 Too Many Requests; retry-after: 30", 30.0),
        ("Please try again in 2 minutes.", 120.0),
        ("Rate limit reached", None),
    ],
)
def test_retry_after_hints_are_read(text: str, seconds: float | None) -> None:
    assert retry_after(text) == seconds


def test_an_error_with_exit_zero_fails_and_a_reply_text_saying_rate_limit_does_not() -> None:
    assert judge(CliReply("COMPLETED: fixed", error="boom"), 0).status == "failed"
    calm = judge(CliReply("I added a rate limit to the API.\nCOMPLETED: done"), 0)
    assert (calm.status, calm.limited) == ("completed", False)


# A reviewer's codex call whose model tried to write (observed, codex 0.169.0 in its read-only
# sandbox; paths shortened): the command failed, and the verdict came after.
_REFUSED_REVIEW = "\n".join(
    json.dumps(event)
    for event in [
        {"type": "thread.started", "thread_id": "01a21a4e-1865-7cb0-9eb5-97c6a6021abd"},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {
                "id": "item_1",
                "type": "command_execution",
                "command": "/bin/bash -lc \"printf '%s\\n' x > /p/README\"",
                "aggregated_output": "/bin/bash: line 1: /p/README: Read-only file system\n",
                "exit_code": 1,
                "status": "failed",
            },
        },
        {
            "type": "item.completed",
            "item": {"id": "item_2", "type": "agent_message", "text": "```json\n{}\n```"},
        },
        {"type": "turn.completed", "usage": {"input_tokens": 20, "output_tokens": 1}},
    ]
)


# claude's, offered a write it was not allowed (the result's keys as observed, 2.1.332).
_DENIED_RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "```json\n{}\n```",
    "session_id": "s",
    "permission_denials": [{"tool_name": "Write", "tool_input": {"file_path": "/p/README"}}],
}


@pytest.mark.parametrize(
    ("name", "stdout"), [("codex", _REFUSED_REVIEW), ("claude", json.dumps(_DENIED_RESULT))]
)
def test_a_refused_call_fails_an_implementer_but_not_a_read_only_call(
    name: str, stdout: str
) -> None:
    runtime = RUNTIMES[name]
    assert isinstance(runtime, CliRuntime)
    reply = runtime.read_reply(0, stdout, "")
    assert reply.error is None and "/p/README" in reply.denied
    implementer = judge(reply, 0)
    assert implementer.status == "failed" and "permission denied: " in implementer.message
    # A reviewer's mode refused the write, as it should: its answer stands.
    reviewer = judge(reply, 0, read_only=True)
    assert reviewer.message == NO_STATUS_LINE and reviewer.text == "```json\n{}\n```"


def test_every_builtin_cli_runtime_is_a_cli_runtime() -> None:
    assert {r.name for r in BUILTIN_RUNTIMES if isinstance(r, CliRuntime)} == {
        *AGENT_CLIS,
        "command",
    }


# -- numbers in a reply ---------------------------------------------------------------------------

_DEEP = 100_000  # past the depth Python's JSON parser recurses to
_REPLIES = [
    ("cost-nan", '"total_cost_usd": NaN', "total_cost_usd"),
    ("cost-infinite", '"total_cost_usd": Infinity', "total_cost_usd"),
    ("cost-negative", '"total_cost_usd": -1000', "total_cost_usd"),
    ("cost-text", '"total_cost_usd": "0.5"', "total_cost_usd"),
    ("cost-a-list", '"total_cost_usd": [1]', "total_cost_usd"),
    ("tokens-nan", '"usage": {"input_tokens": NaN}', "token"),
    ("tokens-text", '"usage": {"output_tokens": "many"}', "token"),
    ("tokens-a-list", '"usage": {"cache_read_input_tokens": [1, 2]}', "token"),
    ("tokens-negative", '"usage": {"output_tokens": -5}', "token"),
    ("usage-deep", '"usage": ' + "[" * _DEEP + "]" * _DEEP, "no JSON result"),
]


@pytest.mark.parametrize(
    ("field", "words"), [r[1:] for r in _REPLIES], ids=[r[0] for r in _REPLIES]
)
def test_a_reply_whose_numbers_are_garbage_fails_the_attempt_in_one_line(
    field: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NaN, infinite, negative, text or list usage and cost, or a reply nested too deep: the
    attempt fails saying which number, never a traceback, and no NaN cost reaches the budget."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    reply = bin_dir / "reply.json"
    reply.write_text('{"type": "result", "result": "COMPLETED: done", ' + field + "}\n")
    claude = bin_dir / "claude"
    claude.write_text(f"#!/bin/sh\ncat > /dev/null\ncat '{reply}'\n")
    claude.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = run("claude", tmp_path, "Attempt: 1\nDo it.\n")
    assert result.status == "failed", result.message
    assert words in result.message
    assert len(result.message.splitlines()) == 1
