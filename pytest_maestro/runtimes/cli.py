"""What every agent CLI runtime shares: the prompt file, the process, reading the reply.

A runtime module says how to call its CLI (``argv``) and how to read what it printed
(``read_reply``); this module runs it under the phase's timeout in its own process group, with
the prompt on standard input from a file kept beside the log (never as one huge argument), its
standard output in a file of its own, and tells rate limits and spent quotas from failures.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ..numbers import NumberError
from ..processes.process import PhaseLog, ProcessResult, run_process
from ..state.model import Status, Tokens
from ..texts import one_line, shown
from .activity import Feed, Reader
from .agents import Agent
from .base import AgentRequest, AgentResult
from .handoff import parse_handoff
from .prices import estimate
from .replies import stderr_reason

# Most of a reply this tool reads back: a reply is text for the session state, not a dump.
MAX_REPLY_BYTES = 8 * 1024 * 1024
MAX_PROMPT_BYTES = 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024

# Checked before the rate-limit words: a spent quota also says "limit", and waiting won't help.
_QUOTA = re.compile(
    r"usage limit|hit your limit|daily quota|exceeded your current quota|no quota|quota_exceeded"
    r"|insufficient[_ ](quota|credit|funds|balance)|credit balance is too low|billing",
    re.IGNORECASE,
)
# No credentials, not signed in, or no network: the user must act, so no attempt is spent waiting.
_NO_ACCESS = re.compile(
    r"not logged in|please run /login|invalid (x-)?api[ -]key|\b401\b|unauthori[sz]ed"
    r"|authentication (error|failed|required)|no authentication|must specify the \w*API_KEY"
    r"|not authenticated|no credentials|waiting for network|\bENOTFOUND\b|\bECONNREFUSED\b"
    r"|failed to lookup address|connection refused|network is unreachable",
    re.IGNORECASE,
)
_RATE_LIMIT = re.compile(
    r"\b429\b|\b529\b|rate[ _-]?limit|too many requests|overloaded|resource has been exhausted"
    r"|resource_exhausted|try again later|temporarily unavailable|\b503\b",
    re.IGNORECASE,
)
_RETRY_AFTER = re.compile(
    r"retry[ -]after\D{0,4}(\d+(?:\.\d+)?)\s*(s|sec|seconds?|m|min|minutes?|h|hours?)?"
    r"|try again in (\d+(?:\.\d+)?)\s*(s|sec|seconds?|m|min|minutes?|h|hours?)",
    re.IGNORECASE,
)
_UNITS = {"s": 1, "m": 60, "h": 3600}
# A CLI that retries a rate limit on its own for minutes may say so only on its standard error
# (gemini 0.61.0: "Attempt 2 failed with status 429. Retrying with backoff... _ApiError: …"): a
# line that says it is retrying and names a limit.
_RETRYING = re.compile(r"\bretrying\b", re.IGNORECASE)


# A reply that says nothing of its status: a failure for an implementer, while a reviewer, who
# answers in its own shape, has still answered.
NO_STATUS_LINE = "the reply has no status line (COMPLETED:, FAILED:, BLOCKED:)"

AGENT_FIELDS = ("tools", "temperature")  # what an agent may set that some CLIs have no option for


def ignored_fields(agent: Agent, runtime: object) -> tuple[str, ...]:
    """The fields ``agent`` sets that ``runtime`` is not given: none for a runtime that does not
    say which it takes (the shell, another plugin's)."""
    takes = getattr(runtime, "agent_fields", None)
    if not isinstance(takes, frozenset):
        return ()
    given = {"tools": bool(agent.tools), "temperature": agent.temperature is not None}
    return tuple(name for name in AGENT_FIELDS if given[name] and name not in takes)


def ignored_field_lines(uses: Iterable[tuple[Agent, str, object]]) -> list[str]:
    """One warning line for each agent and runtime (its name, the runtime) of ``uses`` whose
    fields the runtime is not given, however many phases they share."""
    lines: dict[tuple[str, str], str] = {}
    for agent, name, runtime in uses:
        fields = ignored_fields(agent, runtime)
        if fields and (agent.name, name) not in lines:
            which = " and ".join(f"'{field}'" for field in fields)
            verb, them = ("is", "it") if len(fields) == 1 else ("are", "them")
            where = f" ({shown(agent.path, Path.cwd())})" if agent.path else ""
            lines[agent.name, name] = (
                f"agent {agent.name!r}{where}: {which} {verb} ignored for runtime {name!r}, "
                f"which has no option for {them}"
            )
    return list(lines.values())


@dataclass(frozen=True)
class Reply:
    """What a CLI printed, read: its final text, whether it says it failed, what it cost."""

    text: str
    error: str | None = None  # the CLI's own error message, exit code aside
    tokens: Tokens | None = None
    session_id: str | None = None
    blocked: bool = False  # the error needs the user (a setting, a login): trying again won't do
    model: str | None = None  # the model the CLI says it used, when it says
    # The tool calls the CLI refused, named (claude ``Write hello.txt``, codex the command): an
    # implementer's work is then missing, while a read-only call's refusals are its mode holding.
    denied: str = ""


class CliRuntime:
    """Subclasses set ``name``, ``executable`` and ``autonomy``, and define ``arguments`` and
    ``read_reply``."""

    name = ""
    executable = ""
    autonomy = ""  # what --maestro-autonomous adds, in words and flags
    # Its read-only mode, in words and flags, which a reviewer's call (``request.read_only``)
    # runs in; empty: it has none, and no reviewer runs on it.
    read_only = ""
    resumes = False  # it can go on with a session of its own (``request.resume``)
    # A CLI that reports tokens and no cost: its cost is estimated from a price table
    # (prices.py), under this provider's prices (None: the provider a ``provider/model`` names).
    priced = False
    price_provider: str | None = None
    # What bounds the CLI's own retries of a rate limit, where only its user can set it: named
    # when a call times out while it retries.
    own_retries = ""
    # The agent fields (``tools``, ``temperature``) the CLI is given; any other that an agent
    # sets is named in one warning (``ignored_fields``).
    agent_fields: frozenset[str] = frozenset()

    def arguments(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        raise NotImplementedError

    def argv(self, request: AgentRequest, prompt_file: Path) -> list[str]:
        return [self.executable, *self.arguments(request, prompt_file)]

    def hopeless(self, stdout: bytes) -> bool:
        """Whether the CLI's output so far says it cannot get anywhere (no network), so that it
        is ended at once rather than at the timeout. ``stdout`` is its last few KiB."""
        return False

    def activity_reader(self, request: AgentRequest) -> Reader | None:
        """A reader of the CLI's event stream, one line at a time, for what the agent is doing
        (``activity.py``); None: the CLI prints no events to read."""
        return None

    def feed(self, request: AgentRequest) -> Feed | None:
        """Each tool call the reader finds goes to the phase's log at once, and the newest to
        ``request.activity``."""
        reader = self.activity_reader(request)
        if reader is None:
            return None
        held = PhaseLog.held(request.log)
        return Feed(reader, held.write_line if held is not None else None, request.activity)

    def feeds_stdin(self, request: AgentRequest) -> bool:
        """Whether the prompt goes to standard input (else only the prompt file names it)."""
        return True

    def read_reply(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        """The reply from the CLI's standard output (its standard error, also in the log, may
        say why it failed)."""
        if exit_code == 0:
            return Reply(stdout.strip())
        return Reply(stdout.strip(), f"exited {exit_code}: {stderr_reason(stderr)}".rstrip(": "))

    def environment(self, request: AgentRequest) -> dict[str, str]:
        agent_env = dict(request.agent.env) if request.agent else {}
        # PWD names the project root: a CLI that takes its directory from $PWD (opencode) would
        # otherwise work in pytest's directory, whatever the process's cwd.
        return {**request.env, **agent_env, "PWD": str(request.root)}

    def run(self, request: AgentRequest) -> AgentResult:
        prompt = request.prompt.encode()
        if not request.prompt.strip():
            return AgentResult(Status.BLOCKED, "the prompt is empty: nothing to hand to the agent")
        if len(prompt) > MAX_PROMPT_BYTES:
            return AgentResult(
                Status.BLOCKED,
                f"the prompt is {len(prompt) // 1024} KiB, over the {MAX_PROMPT_BYTES // 1024}"
                " KiB an agent CLI is handed: shorten the phase's task or context",
            )
        prompt_file = request.attempt_file(".prompt.md")
        reply_file = request.attempt_file(".reply")
        stderr_file = request.attempt_file(".stderr")
        prompt_file.write_bytes(prompt)  # kept: what was sent is part of the record
        argv = self.argv(request, prompt_file)
        try:
            process = run_process(
                argv,
                cwd=request.root,
                env=self.environment(request),
                timeout=request.timeout,
                log=request.log,
                header=f"$ {shlex.join(argv)} < {prompt_file.name}",
                stdin_file=prompt_file if self.feeds_stdin(request) else None,
                stdout_file=reply_file,
                stderr_file=stderr_file,
                hopeless=self.hopeless,
                feed=self.feed(request),
            )
        except FileNotFoundError:
            return AgentResult(
                Status.BLOCKED,
                f"{argv[0]!r} is not on PATH: install the {self.name} CLI, or choose another "
                "runtime (--maestro-runtime, or the agent's runtime:)",
            )
        except PermissionError:
            return AgentResult(Status.BLOCKED, f"{argv[0]!r} cannot be executed")
        stderr = read_bounded(stderr_file, MAX_STDERR_BYTES)
        if process.timed_out:
            return AgentResult(Status.FAILED, self.timed_out(request.timeout, stderr), (process,))
        reply = self.read(process.exit_code, read_bounded(reply_file), stderr)
        if self.priced and reply.tokens is not None:
            model = request.model or reply.model
            reply = replace(reply, tokens=estimate(reply.tokens, model, self.price_provider))
        return judge(reply, process.exit_code, (process,), read_only=request.read_only)

    def timed_out(self, timeout: float, stderr: str) -> str:
        """A call that ran into its timeout: and, when its standard error says so, that the CLI
        was retrying a rate limit then, in its own words."""
        message = f"timed out after {timeout:g}s"
        said = retrying_limit(stderr)
        if said is None:
            return message
        bound = f" ({self.own_retries} bounds its retries)" if self.own_retries else ""
        return f"{message} while {self.name} was retrying a rate limit{bound}: {one_line(said)}"

    def read(self, exit_code: int, stdout: str, stderr: str) -> Reply:
        """``read_reply``, with a usage or cost this tool cannot count or cap made the reply's
        error: the attempt fails saying which, and no such number reaches the budget."""
        try:
            return self.read_reply(exit_code, stdout, stderr)
        except NumberError as error:
            return Reply(stdout.strip(), str(error))


def judge(
    reply: Reply, exit_code: int, procs: tuple[ProcessResult, ...] = (), *, read_only: bool = False
) -> AgentResult:
    """The attempt's result from what the CLI said: a limit to wait out, a spent quota, an
    error (whatever the exit code), refused tool calls (but in a ``read_only`` call, whose
    mode refused them), or the agent's own status line."""
    error = reply.error
    if error is None and exit_code != 0:
        error = f"exited {exit_code}"
    if error is None and reply.denied and not read_only:
        error = f"permission denied: {reply.denied} (the agent went on without them)"
    if error is not None:
        text = f"{error} {reply.text}"
        if reply.blocked or _NO_ACCESS.search(error):
            why = "" if reply.blocked else "no access to the model (credentials, login, network): "
            return AgentResult(
                Status.BLOCKED,
                why + one_line(error),
                procs,
                reply.text,
                reply.tokens,
                reply.session_id,
            )
        if _QUOTA.search(text):
            return AgentResult(
                Status.BLOCKED,
                f"quota spent: {one_line(error)}",
                procs,
                reply.text,
                reply.tokens,
                reply.session_id,
                retry_after=retry_after(text),
                quota_spent=True,
            )
        if _RATE_LIMIT.search(text):
            return AgentResult(
                Status.FAILED,
                f"rate limited: {one_line(error)}",
                procs,
                reply.text,
                reply.tokens,
                reply.session_id,
                limited=True,
                retry_after=retry_after(text),
            )
        return AgentResult(
            Status.FAILED,
            f"the agent CLI failed: {one_line(error)}",
            procs,
            reply.text,
            reply.tokens,
            reply.session_id,
        )
    handoff = parse_handoff(reply.text)
    if handoff.status is None:
        return AgentResult(
            Status.FAILED, NO_STATUS_LINE, procs, reply.text, reply.tokens, reply.session_id,
            handoff_missing=not handoff.present,
        )  # fmt: skip
    return AgentResult(
        handoff.status,
        handoff.status_line,
        procs,
        reply.text,
        reply.tokens,
        reply.session_id,
        handoff=handoff,
    )


def retrying_limit(stderr: str) -> str | None:
    """The last line of a CLI's standard error that says it is retrying a rate limit or an
    overload, if one does."""
    for line in reversed(stderr.splitlines()):
        if _RETRYING.search(line) and _RATE_LIMIT.search(line):
            return line.strip()
    return None


def retry_after(text: str) -> float | None:
    match = _RETRY_AFTER.search(text)
    if match is None:
        return None
    number = match.group(1) or match.group(3)
    unit = (match.group(2) or match.group(4) or "s")[0].lower()
    return float(number) * _UNITS[unit]


def read_bounded(path: Path, limit: int = MAX_REPLY_BYTES) -> str:
    """The file's text, or its last ``limit`` bytes: a runaway reply costs no more memory."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                handle.seek(size - limit)
            return handle.read(limit).decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
