"""Any agent CLI, from an argv template; and the presets for GitHub Copilot CLI and OpenCode.

An agent file's ``command:`` is the argv, with ``{prompt_file}``, ``{model}``, ``{phase_id}`` and
``{root}`` filled in; ``prompt_via: stdin`` (the default) also feeds the prompt on standard input,
``file`` does not. The reply is the command's standard output, its status line the verdict. An
element naming ``{model}`` when no model is set is left out, with the option just before it
(``--model {model}``). The command is the user's own, so it needs no ``--maestro-autonomous``;
the presets do, and add their CLI's approval flags only under it.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

from ..state.model import Status, Tokens
from .activity import CopilotReader, OpenCodeReader, Reader
from .base import AgentRequest, AgentResult
from .cli import CliRuntime, Reply
from .replies import count, dollars, json_lines, stderr_reason

PLACEHOLDERS = ("prompt_file", "model", "phase_id", "root")


class TemplateError(ValueError):
    pass


def expand(template: tuple[str, ...], values: dict[str, str | None]) -> list[str]:
    argv: list[str] = []
    for element in template:
        names = _placeholders(element)
        unknown = names - set(PLACEHOLDERS)
        if unknown:
            raise TemplateError(
                f"unknown placeholder {{{sorted(unknown)[0]}}} in {element!r}; "
                f"known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
            )
        if any(values.get(name) is None for name in names):
            if argv and argv[-1].startswith("-") and "{" not in argv[-1]:
                argv.pop()  # the option whose value is missing
            continue
        argv.append(element.format_map({k: v or "" for k, v in values.items()}))
    return argv


def _placeholders(element: str) -> set[str]:
    """The names ``element`` fills in; TemplateError for what ``str.format`` cannot take (a lone
    brace, an empty or positional field) and for a conversion or a format spec, which a
    placeholder has no use for (``{root:>99999999999}`` would build gigabytes)."""
    try:
        fields = list(string.Formatter().parse(element))
    except ValueError as exc:
        raise TemplateError(f"malformed placeholder in {element!r}: {exc}") from None
    names: set[str] = set()
    for _, name, spec, conversion in fields:
        if name is None:
            continue
        if not name or spec or conversion:
            shown = (
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            raise TemplateError(
                f"malformed placeholder {shown} in {element!r}: a placeholder is a bare name"
            )
        names.add(name)
    return names


class CommandRuntime(CliRuntime):
    """The agent's ``command:`` argv."""

    name = "command"
    autonomy = ""

    def run(self, request: AgentRequest) -> AgentResult:
        try:
            self.argv(request, request.attempt_file(".prompt.md"))
        except TemplateError as exc:
            return AgentResult(Status.BLOCKED, str(exc))
        return super().run(request)

    def template(self, request: AgentRequest) -> tuple[str, ...]:
        agent = request.agent
        if agent is None or not agent.command:
            who = f"agent {agent.name!r}" if agent else "the phase's agent"
            raise TemplateError(f"runtime 'command' needs {who} to give a command: argv")
        return agent.command

    def feeds_stdin(self, request: AgentRequest) -> bool:
        return request.agent is None or request.agent.prompt_via != "file"

    def argv(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        values = {
            "prompt_file": str(prompt_file),
            "model": request.model,
            "phase_id": request.phase.id,
            "root": str(request.root),
        }
        return expand(self.template(request), values)


class CopilotRuntime(CommandRuntime):
    """GitHub Copilot CLI in prompt mode: the prompt on standard input, JSON Lines events on
    standard output (``assistant.message``, ``assistant.usage``, ``session.error``, ``result``).
    Its usage is premium requests (``result.usage.premiumRequests``), often with no tokens."""

    name = "copilot"
    executable = "copilot"
    autonomy = "--allow-all-tools: edits files and runs commands without asking"
    agent_fields = frozenset({"tools"})
    resumes = True  # --resume SESSION_ID

    def template(self, request: AgentRequest) -> tuple[str, ...]:
        argv = [self.executable, "--output-format", "json", "--no-ask-user", "--no-auto-update"]
        argv += ["--model", "{model}"]
        if request.autonomous:
            argv.append("--allow-all-tools")
        return tuple(argv)

    def argv(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        """The agent's tools last, as they are (no placeholder reads them): the only tools the
        model is offered; whether it may use them unasked is ``--allow-all-tools``'s to say."""
        tools = list(request.agent.tools) if request.agent else []
        argv = super().argv(request, prompt_file)
        if request.resume:  # after the template's words: a session id is no placeholder
            argv += ["--resume", request.resume]
        return argv + (["--available-tools", *tools] if tools else [])

    def feeds_stdin(self, request: AgentRequest) -> bool:
        return True

    def activity_reader(self, request: AgentRequest) -> Reader:
        return CopilotReader(request.root)

    def read_reply(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        text, failure, session, tokens = "", None, None, Tokens()
        events = json_lines(stdout)
        for event in events:
            kind, data = event.get("type"), event.get("data")
            data = data if isinstance(data, dict) else {}
            if kind == "assistant.message" and data.get("content"):
                text = str(data["content"])
            elif kind == "assistant.usage":
                tokens += Tokens(count(data.get("inputTokens")), count(data.get("outputTokens")))
            elif kind == "session.error":
                failure = f"{data.get('errorType', 'error')}: {data.get('message', '')}"
            elif kind == "result":
                session = str(event.get("sessionId") or "") or None
                used = _mapping(event.get("usage")).get("premiumRequests")
                tokens += Tokens(premium_requests=count(used, "premiumRequests"))
        if failure is None and exit_code != 0:
            failure = f"exited {exit_code}: {stderr_reason(stderr)}".rstrip(": ")
        if failure is None and not events:
            failure = "no JSON events on standard output"
        return Reply(text, failure, tokens if events else None, session)


class OpenCodeRuntime(CommandRuntime):
    """OpenCode's ``opencode run``: the message on standard input, the reply on standard output.
    OpenCode allows edits by default; without consent its permission config denies them."""

    name = "opencode"
    executable = "opencode"
    autonomy = "permission edit and bash 'allow': edits files and runs commands without asking"
    # A provider without prices in opencode reports a cost of 0: estimated from the phase's
    # ``provider/model``.
    priced = True
    read_only = "permission edit and bash 'deny'"
    resumes = True  # --session SESSION_ID

    def argv(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        argv = super().argv(request, prompt_file)  # a session id is no placeholder: after it
        return [*argv, "--session", request.resume] if request.resume else argv

    def template(self, request: AgentRequest) -> tuple[str, ...]:
        # --dir: opencode works in $PWD, not in its cwd; the project root is where it must act.
        return (self.executable, "run", "--format", "json", "--dir", "{root}", "--model", "{model}")

    def feeds_stdin(self, request: AgentRequest) -> bool:
        return True

    def activity_reader(self, request: AgentRequest) -> Reader:
        return OpenCodeReader(request.root)

    def read_reply(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        """JSON Lines events: ``text`` parts, ``step_finish`` parts with ``cost`` and
        ``tokens``, ``error`` events."""
        texts: list[str] = []
        failure, session, tokens = None, None, Tokens()
        events = json_lines(stdout)
        for event in events:
            kind, part = event.get("type"), event.get("part")
            part = part if isinstance(part, dict) else {}
            session = session or (str(event.get("sessionID") or "") or None)
            if kind == "text" and part.get("text"):
                texts.append(str(part["text"]))
            elif kind == "step_finish":
                used = _mapping(part.get("tokens"))
                cache = _mapping(used.get("cache"))
                tokens += Tokens(
                    count(used.get("input")),
                    count(used.get("output")),
                    count(cache.get("read")),
                    dollars(part.get("cost"), "cost"),
                )
            elif kind == "error":
                error = _mapping(event.get("error"))
                data = error.get("data")
                message = _mapping(data).get("message") or data or error
                failure = f"{error.get('name', 'error')}: {message}"
        if failure is None and exit_code != 0:
            failure = f"exited {exit_code}: {stderr_reason(stderr)}".rstrip(": ")
        if failure is None and not events:
            failure = "no JSON events on standard output"
        return Reply("\n".join(texts), failure, tokens if events else None, session)

    def environment(self, request: AgentRequest) -> dict[str, str]:
        rule = "allow" if request.autonomous and not request.read_only else "deny"
        permission = f'{{"edit": "{rule}", "bash": "{rule}"}}'
        return {**super().environment(request), "OPENCODE_PERMISSION": permission}


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
