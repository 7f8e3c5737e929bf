"""Claude Code: ``claude -p --output-format json``, the prompt on standard input.

The reply is one JSON object: ``result`` (the final text), ``is_error``, ``session_id``,
``total_cost_usd`` and ``usage`` (input, output, cache read and cache creation tokens).
See docs/agent-clis.md for the sources.
"""

from __future__ import annotations

from pathlib import Path

from ..state.model import Tokens
from .base import AgentRequest
from .cli import CliRuntime, Reply, count, dollars, last_json_object, last_lines


class ClaudeRuntime(CliRuntime):
    name = "claude"
    executable = "claude"
    autonomy = "--permission-mode bypassPermissions: edits files and runs commands without asking"

    def arguments(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        args = ["-p", "--output-format", "json"]
        if request.model:
            args += ["--model", request.model]
        if request.agent and request.agent.max_turns:
            args += ["--max-turns", str(request.agent.max_turns)]
        if request.budget_usd is not None:
            args += ["--max-budget-usd", f"{request.budget_usd:.4f}"]
        # Stated either way: a user's settings may default to a mode that asks, which in a pipe
        # would deny silently or wait.
        mode = "bypassPermissions" if request.autonomous else "dontAsk"
        return [*args, "--permission-mode", mode]

    def read_reply(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        data = last_json_object(stdout)
        if data is None:
            why = f"exited {exit_code}" if exit_code else "no JSON result on standard output"
            return Reply(stdout.strip(), f"{why}: {last_lines(stderr)}".rstrip(": "))
        text = str(data.get("result") or "")
        error = None
        if data.get("is_error") or str(data.get("subtype", "success")) != "success":
            status = data.get("api_error_status")
            error = f"{data.get('subtype', 'error')}{f' ({status})' if status else ''}: {text}"
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        tokens = Tokens(
            input=count(usage.get("input_tokens"))
            + count(usage.get("cache_creation_input_tokens")),
            output=count(usage.get("output_tokens")),
            cached=count(usage.get("cache_read_input_tokens")),
            cost=dollars(data.get("total_cost_usd"), "total_cost_usd"),
        )
        return Reply(text, error, tokens, str(data.get("session_id") or "") or None)
