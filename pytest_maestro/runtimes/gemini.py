"""Gemini CLI, headless: ``gemini --output-format json``, the prompt on standard input.

The reply is one JSON object: ``response`` (the final text), ``stats.models.<model>.tokens``
(``prompt``, ``candidates``, ``cached``) and, when the run failed, ``error`` (``type``,
``message``, ``code``), which goes to standard error instead when the API call fails. Exit codes:
1 an API error, 42 bad input, 53 the turn limit; a failed API call exits with its HTTP status
(429 becomes 173). See docs/agent-clis.md for the sources.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..state.model import Tokens
from .base import AgentRequest
from .cli import CliRuntime, Reply, count, last_json_object, last_lines, uncached

EXIT_CODES = {1: "API error", 42: "input error", 53: "turn limit reached", 173: "429"}


class GeminiRuntime(CliRuntime):
    name = "gemini"
    executable = "gemini"
    autonomy = "--approval-mode yolo: edits files and runs commands without asking"

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
        data = last_json_object(stdout) or last_json_object(stderr) or {}
        text = str(data.get("response") or "")
        error = data.get("error")
        failure = None
        if isinstance(error, dict) and error:
            code = f" ({error['code']})" if error.get("code") else ""
            failure = f"{error.get('type', 'error')}{code}: {error.get('message', '')}"
        elif exit_code != 0:
            meaning = EXIT_CODES.get(exit_code, "failed")
            failure = f"exited {exit_code} ({meaning}): {last_lines(stderr)}".rstrip(": ")
        elif not data:
            failure = "no JSON result on standard output"
        return Reply(
            text, failure, _tokens(data.get("stats")), str(data.get("session_id") or "") or None
        )


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
