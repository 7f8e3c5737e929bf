"""Codex CLI: ``codex exec --json -``, the prompt on standard input.

The reply is JSON Lines of thread events: the final text is the last ``item.completed`` whose item
is an ``agent_message``; tokens come from each ``turn.completed``'s ``usage`` (input, cached input,
output); ``turn.failed`` and ``error`` events say why a turn failed; a ``command_execution`` the
sandbox refused ("Read-only file system") is a denied call, named. Codex reports no cost, nor its
model: the cost is estimated from the phase's model (OpenAI's prices), else left unknown.
See docs/agent-clis.md for the sources.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..state.model import Tokens
from .activity import CodexReader, Reader
from .base import AgentRequest
from .cli import CliRuntime, Reply
from .replies import count, json_lines, stderr_reason, uncached

# Its reconnect events when the API cannot be reached or refuses the key: it would go on (without
# a network, for good), so the call is ended at the first.
_HOPELESS = re.compile(
    rb'"Reconnecting\.\.\.[^"]*(waiting for network|failed to lookup address|connection refused'
    rb"|network is unreachable|unexpected status 401)",
    re.IGNORECASE,
)

# What a command says when the sandbox (read-only, or outside the writable root) refuses a write.
_SANDBOXED = re.compile(r"read-only file system|operation not permitted", re.IGNORECASE)


class CodexRuntime(CliRuntime):
    name = "codex"
    executable = "codex"
    autonomy = "--sandbox workspace-write: edits files and runs commands in the project, unasked"
    priced, price_provider = True, "openai"
    read_only = "--sandbox read-only"
    resumes = True  # exec [OPTIONS] resume SESSION_ID -: the options apply to the resumed session

    def arguments(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        # The project root need not be a git repository (a scratch directory): this tool keeps
        # the declared files' pre-images itself, which is what codex's check is for.
        args = ["exec", "--json", "--skip-git-repo-check", "--cd", str(request.root)]
        if request.model:
            args += ["--model", request.model]
        sandbox = "workspace-write" if request.autonomous and not request.read_only else "read-only"
        resume = ["resume", request.resume] if request.resume else []
        return [*args, "--sandbox", sandbox, *resume, "-"]

    def activity_reader(self, request: AgentRequest) -> Reader:
        return CodexReader(request.root)

    def hopeless(self, stdout: bytes) -> bool:
        return _HOPELESS.search(stdout) is not None

    def read_reply(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        text, failure, session, said = "", None, None, None
        tokens = Tokens()
        events = 0
        denied: list[str] = []
        for event in json_lines(stdout):
            events += 1
            kind = event.get("type")
            if kind == "thread.started":
                session = str(event.get("thread_id") or "") or None
            elif kind == "item.completed":
                item = event.get("item")
                if isinstance(item, dict) and item.get("type") == "agent_message":
                    text = str(item.get("text") or "")
                elif isinstance(item, dict) and _refused(item):
                    denied.append(str(item.get("command") or "a command"))
            elif kind == "turn.completed":
                usage = event.get("usage")
                if isinstance(usage, dict):
                    cached = count(usage.get("cached_input_tokens"))
                    tokens += Tokens(
                        uncached(count(usage.get("input_tokens")), cached, "input_tokens"),
                        count(usage.get("output_tokens")),
                        cached,
                    )
            elif kind == "error":
                said = str(event.get("message") or "") or said
            elif kind == "turn.failed":
                error = event.get("error")
                failure = str(error.get("message") if isinstance(error, dict) else error)
        if failure is None and exit_code != 0:  # ended at a reconnect: its message says why
            failure = said or f"exited {exit_code}: {stderr_reason(stderr)}".rstrip(": ")
        if failure is None and not events:
            failure = "no JSON events on standard output"
        return Reply(text, failure, tokens if events else None, session, denied=", ".join(denied))


def _refused(item: dict[str, object]) -> bool:
    """A command the sandbox refused: it failed, saying the file system is read-only to it."""
    said = str(item.get("aggregated_output") or "")
    return item.get("type") == "command_execution" and _SANDBOXED.search(said) is not None
