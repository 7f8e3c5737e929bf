"""Claude Code: ``claude -p --output-format stream-json --verbose``, the prompt on standard input.

The reply is JSON Lines of events, read as they come for the tool calls (``activity.py``); the
last is the result, one JSON object: ``result`` (the final text), ``is_error``, ``session_id``,
``total_cost_usd`` and ``usage`` (input, output, cache read and cache creation tokens); an error
result's reason in ``errors[]``, its tokens in ``modelUsage`` where ``usage`` is all zeros, and the
tool calls refused in ``permission_denials``. See docs/agent-clis.md for the sources.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..state.model import Tokens
from .activity import ClaudeReader, Reader
from .base import AgentRequest
from .cli import CliRuntime, Reply
from .replies import count, dollars, last_json_object, stderr_reason

# Its own retries of 429 and 529 are silent (10 by default): after these few, a limit reaches this
# tool's backoff. A user's own setting wins.
MAX_RETRIES = "2"
ROOT_REFUSAL = "cannot be used with root/sudo privileges"
# What a reviewer is offered, each allowed unasked: the model has no tool that writes. Not
# ``--permission-mode plan``: headless, plan mode can end a turn only through ExitPlanMode,
# which needs an approver that a pipe does not have (docs/agent-clis.md).
READ_TOOLS = ("Read", "Grep", "Glob")


class ClaudeRuntime(CliRuntime):
    name = "claude"
    executable = "claude"
    autonomy = "--permission-mode bypassPermissions: edits files and runs commands without asking"
    agent_fields = frozenset({"tools"})
    read_only = "--permission-mode dontAsk offering only Read, Grep and Glob"
    resumes = True  # --resume SESSION_ID

    def arguments(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        args = ["-p", "--output-format", "stream-json", "--verbose"]
        if request.read_only:
            return [*args, *_model_args(request), *_read_only_args(request)]
        args += _model_args(request)
        if request.agent and request.agent.tools:  # what it may use; asking is the mode's
            args += ["--tools", ",".join(request.agent.tools)]
        # Stated either way: a user's settings may default to a mode that asks, which in a pipe
        # would deny silently or wait.
        mode = "bypassPermissions" if request.autonomous else "dontAsk"
        return [*args, "--permission-mode", mode]

    def activity_reader(self, request: AgentRequest) -> Reader:
        return ClaudeReader(request.root)

    def environment(self, request: AgentRequest) -> dict[str, str]:
        return {"CLAUDE_CODE_MAX_RETRIES": MAX_RETRIES, **super().environment(request)}

    def read_reply(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        data = last_json_object(stdout)
        if data is None:
            if ROOT_REFUSAL in stderr:
                return Reply(stdout.strip(), _root_refusal(stderr_reason(stderr)), blocked=True)
            why = f"exited {exit_code}" if exit_code else "no JSON result on standard output"
            return Reply(stdout.strip(), f"{why}: {stderr_reason(stderr)}".rstrip(": "))
        text = str(data.get("result") or "")
        error = None
        if data.get("is_error") or str(data.get("subtype", "success")) != "success":
            status = data.get("api_error_status")
            errors = data.get("errors")  # a cap's reason: its result has no text
            reason = text or ("; ".join(map(str, errors)) if isinstance(errors, list) else "")
            error = f"{data.get('subtype', 'error')}{f' ({status})' if status else ''}: {reason}"
        tokens, session = _tokens(data), str(data.get("session_id") or "") or None
        denied = _denials(data.get("permission_denials"))
        return Reply(text, error, tokens, session, denied=denied)


def _model_args(request: AgentRequest) -> list[str]:
    """The session it goes on with, the model, the turns and the dollars the call may take."""
    args = ["--resume", request.resume] if request.resume else []
    args += ["--model", request.model] if request.model else []
    if request.agent and request.agent.max_turns:
        args += ["--max-turns", str(request.agent.max_turns)]
    if request.budget_usd is not None:
        args += ["--max-budget-usd", f"{request.budget_usd:.4f}"]
    return args


def _read_only_args(request: AgentRequest) -> list[str]:
    """Only tools that read, each allowed unasked (``dontAsk`` denies every other): those of
    the agent's ``tools`` that read, else all three."""
    named = request.agent.tools if request.agent else ()
    tools = ",".join([tool for tool in named if tool in READ_TOOLS] or READ_TOOLS)
    return ["--tools", tools, "--allowedTools", tools, "--permission-mode", "dontAsk"]


def _root_refusal(line: str) -> str:
    return (
        f"claude refuses to run as root without a sandbox ({line.strip()}): run as another user,"
        " or set IS_SANDBOX=1 in a container you trust (this tool never sets it)"
    )


def _denials(value: Any) -> str:
    """The refused tool calls, named: ``Write hello.txt, Bash``."""
    if not isinstance(value, list):
        return ""
    names = []
    for denial in value:
        if isinstance(denial, dict):
            given = denial.get("tool_input")
            target = (
                given.get("file_path") or given.get("command") if isinstance(given, dict) else ""
            )
            names.append(f"{denial.get('tool_name', 'a tool')} {target or ''}".strip())
    return ", ".join(names)


def _tokens(data: dict[str, Any]) -> Tokens:
    """From ``usage``; from ``modelUsage`` (per model) where ``usage`` is all zeros, as in a result
    that ended at a cap."""
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens = Tokens(
        input=count(usage.get("input_tokens")) + count(usage.get("cache_creation_input_tokens")),
        output=count(usage.get("output_tokens")),
        cached=count(usage.get("cache_read_input_tokens")),
    )
    models = data.get("modelUsage")
    if tokens == Tokens() and isinstance(models, dict):
        for model in models.values():
            if isinstance(model, dict):
                tokens += Tokens(
                    count(model.get("inputTokens")) + count(model.get("cacheCreationInputTokens")),
                    count(model.get("outputTokens")),
                    count(model.get("cacheReadInputTokens")),
                )
    cost = dollars(data.get("total_cost_usd"), "total_cost_usd")
    return Tokens(tokens.input, tokens.output, tokens.cached, cost)
