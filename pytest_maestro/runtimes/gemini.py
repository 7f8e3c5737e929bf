"""Gemini CLI, headless: ``gemini --output-format stream-json``, the prompt on standard input.

The reply is JSON Lines of events, read as they come for the tool calls (``activity.py``):
``init`` (``session_id``), the assistant's ``message`` pieces (the final text), ``tool_use``,
``tool_result``, ``error`` and last ``result`` (``status``, ``error`` with ``type`` and
``message``, ``stats`` with ``input_tokens``, ``output_tokens``, ``cached`` and per model in
``models``). A fatal error ends standard error instead (after the CLI's warnings), one JSON
object: ``error`` (``type``, ``message``, ``code``). Exit codes are the CLI's ``Fatal*Error``
classes (``EXIT_CODES``); a failed API call exits with its HTTP status (429 becomes 173), after
retrying it for minutes, which only its stderr tells ("Attempt 2 failed with status 429. Retrying
with backoff..."): a call that times out meanwhile says so (``CliRuntime.timed_out``). Gemini
reports no cost: it is estimated from the phase's model, else the model of ``stats.models`` that
used the most tokens (Google's prices). See docs/agent-clis.md for the sources.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..state.model import Tokens
from .activity import GeminiReader, Reader
from .base import AgentRequest
from .cli import CliRuntime, Reply
from .replies import count, json_lines, stderr_reason, trailing_json_object, uncached

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
    own_retries = "general.maxAttempts in its settings.json"
    # Not ``plan``: headless, plan mode leaves itself once its plan is made, and goes on to
    # implement it (docs/agent-clis.md); ``default`` denies every tool that asks.
    read_only = "--approval-mode default"
    resumes = True  # --resume SESSION_ID

    def arguments(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        args = ["--output-format", "stream-json"]
        if request.resume:
            args += ["--resume", request.resume]
        if request.model:
            args += ["--model", request.model]
        mode = "yolo" if request.autonomous and not request.read_only else "default"
        return [*args, "--approval-mode", mode]

    def activity_reader(self, request: AgentRequest) -> Reader:
        return GeminiReader(request.root)

    def environment(self, request: AgentRequest) -> dict[str, str]:
        # Headless runs refuse an untrusted folder; the user chose to run this project.
        return {"GEMINI_CLI_TRUST_WORKSPACE": "true", **super().environment(request)}

    def read_reply(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        # The reply on stdout; when the run failed before or beside its events, the error JSON
        # ends stderr, after the CLI's warnings and a stack trace.
        data = {**(trailing_json_object(stderr) or {}), **_streamed(stdout)}
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


def _streamed(stdout: str) -> dict[str, Any]:
    """The events as the one object of ``--output-format json``: ``session_id``, ``response``,
    ``error`` and ``stats``; empty without events."""
    texts: list[str] = []
    data: dict[str, Any] = {}
    for event in json_lines(stdout):
        kind = event.get("type")
        if kind == "init":
            data["session_id"] = event.get("session_id")
        elif kind == "message" and event.get("role") == "assistant":
            texts.append(str(event.get("content") or ""))
        elif kind in ("tool_use", "tool_result") and texts and texts[-1] != "\n":
            texts.append("\n")  # what it said before a tool call ends a paragraph
        elif kind == "error" and event.get("severity") == "error":
            data["error"] = {"type": "error", "message": event.get("message", "")}
        elif kind == "result":
            data["stats"] = event.get("stats")
            if event.get("status") == "error":
                data["error"] = event.get("error") or data.get("error") or {"type": "error"}
    if texts:
        data["response"] = "".join(texts).strip()
    return data


def _tokens(stats: Any) -> Tokens | None:
    """From the result's ``stats`` (``input_tokens`` counts the ``cached`` ones)."""
    if not isinstance(stats, dict):
        return None
    cached = count(stats.get("cached"))
    return Tokens(
        uncached(count(stats.get("input_tokens")), cached, "input tokens"),
        count(stats.get("output_tokens")),
        cached,
    )


def _model(stats: Any) -> str | None:
    """The model of ``stats.models`` that used the most tokens (gemini may route a turn to a
    smaller one beside the main one)."""
    models = stats.get("models") if isinstance(stats, dict) else None
    if not isinstance(models, dict) or not models:
        return None

    def used(name: str) -> int:
        model = models[name]
        total = model.get("total_tokens") if isinstance(model, dict) else None
        return total if isinstance(total, int) and not isinstance(total, bool) else 0

    return str(max(models, key=used))
