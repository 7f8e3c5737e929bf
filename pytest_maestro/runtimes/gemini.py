"""Gemini CLI, headless: ``gemini --output-format json``, the prompt on standard input.

The reply is one JSON object: ``response`` (the final text), ``stats.models.<model>.tokens``
(``prompt``, ``candidates``, ``cached``) and, when the run failed, ``error`` (``type``,
``message``, ``code``), which ends standard error instead (after the CLI's warnings) when the run
failed. Exit codes are the CLI's ``Fatal*Error`` classes (``EXIT_CODES``); a failed API call
exits with its HTTP status (429 becomes 173). Gemini reports no cost: it is estimated from the
phase's model, else the model of ``stats.models`` that used the most tokens (Google's prices).
See docs/agent-clis.md for the sources.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..state.model import Tokens
from .base import AgentRequest
from .cli import (
    CliRuntime,
    Reply,
    count,
    last_json_object,
    stderr_reason,
    trailing_json_object,
    uncached,
)

EXIT_CODES = {
    1: "API error",
    41: "authentication failed",
    42: "input error",
    44: "sandbox error",
    52: "configuration error",
    53: "turn limit reached",
    54: "tool execution failed",
    55: "untrusted workspace",
    130: "cancelled",
    173: "429",
}
NEEDS_USER = {41, 44, 52, 55}  # a setting or a login to fix: trying again won't do


class GeminiRuntime(CliRuntime):
    name = "gemini"
    executable = "gemini"
    autonomy = "--approval-mode yolo: edits files and runs commands without asking"
    priced, price_provider = True, "google"

    def arguments(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        args = ["--output-format", "json"]
        if request.model:
            args += ["--model", request.model]
        mode = "yolo" if request.autonomous else "default"
        return [*args, "--approval-mode", mode]

    def environment(self, request: AgentRequest) -> dict[str, str]:
        # Headless runs refuse an untrusted folder; the user chose to run this project.
        return {"GEMINI_CLI_TRUST_WORKSPACE": "true", **super().environment(request)}

    def read_reply(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        # The reply on stdout; when the API call failed, the error JSON ends stderr, after the
        # CLI's warnings and a stack trace.
        data = last_json_object(stdout) or trailing_json_object(stderr) or {}
        text = str(data.get("response") or "")
        error = data.get("error")
        failure = None
        meaning = EXIT_CODES.get(exit_code, "failed")
        if isinstance(error, dict) and error:
            code = f" ({error['code']})" if error.get("code") else ""
            named = f"exited {exit_code} ({meaning}): " if exit_code in NEEDS_USER else ""
            failure = f"{named}{error.get('type', 'error')}{code}: {error.get('message', '')}"
        elif exit_code != 0:
            failure = f"exited {exit_code} ({meaning}): {stderr_reason(stderr)}".rstrip(": ")
        elif not data:
            failure = "no JSON result on standard output"
        session = str(data.get("session_id") or "") or None
        stats = data.get("stats")
        tokens, model = _tokens(stats), _model(stats)
        return Reply(text, failure, tokens, session, exit_code in NEEDS_USER, model)


def _tokens(stats: Any) -> Tokens | None:
    if not isinstance(stats, dict) or not isinstance(stats.get("models"), dict):
        return None
    total = Tokens()
    for model in stats["models"].values():
        tokens = model.get("tokens") if isinstance(model, dict) else None
        if isinstance(tokens, dict):
            cached = count(tokens.get("cached"))
            total += Tokens(
                uncached(count(tokens.get("prompt")), cached, "prompt tokens"),
                count(tokens.get("candidates")),
                cached,
            )
    return total


def _model(stats: Any) -> str | None:
    """The model of ``stats.models`` that used the most tokens (gemini may route a turn to a
    smaller one beside the main one)."""
    models = stats.get("models") if isinstance(stats, dict) else None
    if not isinstance(models, dict) or not models:
        return None

    def used(name: str) -> int:
        tokens = models[name].get("tokens") if isinstance(models[name], dict) else None
        total = tokens.get("total") if isinstance(tokens, dict) else None
        return total if isinstance(total, int) and not isinstance(total, bool) else 0

    return str(max(models, key=used))
