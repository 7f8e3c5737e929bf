"""What the fake agent CLIs in this directory do, written once for all five.

`claude`, `codex`, `gemini`, `copilot` and `opencode` here are stand-ins for the real CLIs: tests
put this directory first on PATH. Each script parses its real CLI's flags (refusing unknown ones
with that CLI's usage error and exit code), reads the prompt the way the real CLI does and prints
the real output format (docs/agent-clis.md has the sources). What the "agent" answers is decided
here, from markers anywhere in the prompt text:

  FAKE:EDIT path=content   write `content` to `path`, relative to the agent's working directory;
                           one per line, repeatable; in content `\\n` is a newline and `\\\\` a
                           backslash. Written only when the CLI was given the flag that lets it
                           edit without asking (the real CLIs deny the edit in a pipe). Without it
                           nothing is written and the agent still answers "COMPLETED: done": the
                           green-but-empty trap.
  FAKE:SUCCEED             the default: Maestro's handoff (`## Task Report`, `## Downstream
                           Context`) ending with the status line "COMPLETED: <summary>"
  FAKE:FAIL                the status line is "FAILED: <why>"
  FAKE:FAIL_FIRST          FAILED on attempt 1, COMPLETED after; the attempt comes from the env
                           MAESTRO_ATTEMPT, else from "Attempt: N" in the prompt, else 1
  FAKE:BLOCKED             the status line is "BLOCKED: <what stops it>"
  FAKE:NO_HANDOFF          an answer with neither status line nor report
  FAKE:SHELL command       run `command` with `bash -c` in the agent's working directory, before
                           anything else; one per line, the rest of the line, in order, each
                           waited for (what it starts in the background is left running)
  FAKE:HANG                sleep until killed (SIGTERM to the process group ends it)
  FAKE:SLEEP=0.5           sleep that many seconds before answering (the call stays "running")
  FAKE:PACE=0.5            print the JSON events that many seconds apart, each flushed as it goes
                           (an agent whose tool calls arrive while it works)
  FAKE:RATE_LIMIT_OVER=3   answer rate-limited, in the CLI's format and exit code, when more than
                           3 fake calls run at once (counted with one file per live call in
                           $FAKE_AGENT_STATE/running; without FAKE_AGENT_STATE nothing is counted)
  FAKE:QUOTA               answer with the CLI's spent-quota error
  FAKE:ERROR_EXIT0         exit 0, but with the CLI's own error signal set
  FAKE:NO_AUTH             answer as the CLI does without credentials (not logged in, no key)
  FAKE:NO_NETWORK          as the CLI does without a network (codex: reconnect events, for good)
  FAKE:CAP                 end at the CLI's cost or turn cap (claude: error_max_budget_usd)
  FAKE:TOKENS in=100 out=20 cost=0.01 premium=1
                           the usage (and cost, where the CLI reports one) in the CLI's fields;
                           copilot: premium requests, and no token event when in and out are 0

Without markers the fake can still act like a coding agent on a real plan: when the env
FAKE_AGENT_SOLUTIONS names a directory, it reads the prompt's `## Files (change no others)`
section (pytest-maestro's prompt.py writes it) and, for each `- create: path` and `- modify: path`,
writes the solution file `$FAKE_AGENT_SOLUTIONS/path` to `path`; a solution under
`$FAKE_AGENT_SOLUTIONS/@<phase id>/path` (the phase from the env MAESTRO_PHASE_ID) wins over it,
so that a later phase can change a file an earlier one created. Each `- delete: path` is removed.
A listed path without a solution file is left alone, as are `- read:` paths and paths a FAKE:EDIT
marker already names. These are edits like FAKE:EDIT's: done only with the CLI's permission flag,
written byte for byte, and listed in the Task Report (Files Created/Modified/Deleted).

When FAKE_AGENT_STATE names a directory, every call appends one JSON line to calls.jsonl in it:
cli, argv, cwd, prompt_length, phase_id (env MAESTRO_PHASE_ID), attempt, round (env
MAESTRO_REVIEW_ROUND, 0 outside a fix round), pid and review (whether it was a reviewer's call:
_fake_reviewer.py says what a fake answers to a review prompt).

When FAKE_AGENT_HANG_ROUND is set in its environment (not a marker: a fix round's prompt quotes
no task), an implementer's call in that fix round sleeps until killed, after it was logged: a test
kills the run meanwhile, and runs it again without the variable.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import NoReturn

STATE_ENV = "FAKE_AGENT_STATE"
SOLUTIONS_ENV = "FAKE_AGENT_SOLUTIONS"
DEFAULT_TOKENS = (1200, 150, 0.0042)
PACE = 0.0  # seconds between two printed events (FAKE:PACE)

_EDIT = re.compile(r"FAKE:EDIT[ \t]+(\S+?)=(.*)$", re.MULTILINE)
_SHELL = re.compile(r"FAKE:SHELL[ \t]+(.+)$", re.MULTILINE)
_VALUE = re.compile(r"FAKE:(SLEEP|RATE_LIMIT_OVER|PACE)=([0-9.]+)")
_TOKENS = re.compile(r"FAKE:TOKENS((?:[ \t]+\w+=[0-9.]+)*)")
_ATTEMPT = re.compile(r"^Attempt:\s*(\d+)", re.MULTILINE)
_FILES = re.compile(r"^## Files \(change no others\)\n((?:- .*\n?)*)", re.MULTILINE)
_FILE = re.compile(r"^- (create|modify|delete|read): (.+?)[ \t]*$", re.MULTILINE)
_FLAGS = (
    "SUCCEED", "FAIL_FIRST", "FAIL", "BLOCKED", "NO_HANDOFF", "HANG", "QUOTA", "ERROR_EXIT0",
    "NO_AUTH", "CAP", "NO_NETWORK",
)  # fmt: skip


class Tokens:
    def __init__(self, input: int, output: int, cost: float, premium: int = 1) -> None:
        self.input, self.output, self.cost = input, output, cost
        self.premium = premium  # copilot's premium requests


class Edit:
    """A file the agent writes (`content`) or deletes (`content` None)."""

    def __init__(self, path: str, content: str | None, target: Path, existed: bool) -> None:
        self.path = path  # as the prompt gave it
        self.content = content or ""
        self.deleted = content is None
        self.target = target
        self.existed = existed
        self.written = False  # done: written, or deleted


class Reply:
    """The agent's answer: `kind` is answer, rate_limit, quota, error_exit0, no_auth or cap."""

    def __init__(
        self,
        kind: str,
        text: str,
        status: str | None,  # COMPLETED, FAILED, BLOCKED, or None without a status line
        edits: list[Edit] | None = None,
        tokens: Tokens | None = None,
    ) -> None:
        self.kind, self.text, self.status = kind, text, status
        self.edits = edits or []
        self.tokens = tokens or Tokens(*DEFAULT_TOKENS)

    @property
    def denied(self) -> list[Edit]:
        return [edit for edit in self.edits if not edit.written]


class Markers:
    def __init__(
        self,
        flags: frozenset[str],
        edits: tuple[tuple[str, str], ...],
        sleep: float,
        rate_limit_over: int | None,
        tokens: Tokens,
        pace: float = 0.0,
    ) -> None:
        self.flags, self.edits, self.sleep, self.pace = flags, edits, sleep, pace
        self.rate_limit_over, self.tokens = rate_limit_over, tokens

    @classmethod
    def parse(cls, prompt: str) -> Markers:
        flags = frozenset(f for f in _FLAGS if re.search(rf"FAKE:{f}\b", prompt))
        values = {name: value for name, value in _VALUE.findall(prompt)}
        edits = tuple((path, _line(_unescape(content))) for path, content in _EDIT.findall(prompt))
        tokens = Tokens(*DEFAULT_TOKENS)
        match = _TOKENS.search(prompt)
        if match:
            pairs = dict(pair.split("=", 1) for pair in match.group(1).split())
            tokens = Tokens(
                int(pairs.get("in", tokens.input)),
                int(pairs.get("out", tokens.output)),
                float(pairs.get("cost", tokens.cost)),
                int(pairs.get("premium", tokens.premium)),
            )
        limit = values.get("RATE_LIMIT_OVER")
        return cls(
            flags=flags,
            edits=edits,
            sleep=float(values.get("SLEEP", 0)),
            pace=float(values.get("PACE", 0)),
            rate_limit_over=int(float(limit)) if limit is not None else None,
            tokens=tokens,
        )


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text.rstrip("\r"))


def _line(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def declared_files(prompt: str) -> list[tuple[str, str]]:
    """(kind, path) for each line of the prompt's `## Files (change no others)` section."""
    match = _FILES.search(prompt)
    return _FILE.findall(match.group(1)) if match else []


def solutions(prompt: str) -> list[tuple[str, str | None]]:
    """(path, content) of the solution for each declared file, None for a deletion."""
    where = os.environ.get(SOLUTIONS_ENV)
    if not where:
        return []
    base = Path(where)
    phase = os.environ.get("MAESTRO_PHASE_ID")
    found: list[tuple[str, str | None]] = []
    for kind, path in declared_files(prompt):
        if kind == "delete":
            found.append((path, None))
        elif kind in ("create", "modify"):
            candidates = [base / f"@{phase}" / path] if phase else []
            for candidate in [*candidates, base / path]:
                if candidate.is_file():
                    found.append((path, candidate.read_bytes().decode()))
                    break
    return found


def attempt_of(prompt: str) -> int:
    env = os.environ.get("MAESTRO_ATTEMPT", "")
    if env.isdigit():
        return int(env)
    match = _ATTEMPT.search(prompt)
    return int(match.group(1)) if match else 1


# --- command lines ------------------------------------------------------------------------------


class StrictParser(argparse.ArgumentParser):
    """argparse that refuses what the real CLI refuses, with that CLI's message and exit code."""

    def __init__(
        self,
        prog: str,
        *,
        exit_code: int,
        unknown: Callable[[str], str],
        usage_tail: str = "",
    ) -> None:
        super().__init__(prog=prog, allow_abbrev=False, add_help=True)
        self._exit_code = exit_code
        self._unknown = unknown
        self._usage_tail = usage_tail

    def error(self, message: str) -> NoReturn:
        self.fail(f"error: {message}")

    def fail(self, text: str) -> NoReturn:
        sys.stderr.write(text.rstrip("\n") + "\n" + self._usage_tail)
        sys.exit(self._exit_code)

    def parse_strict(self, argv: Sequence[str]) -> argparse.Namespace:
        args, extra = self.parse_known_args(argv)
        if extra:
            self.fail(self._unknown(extra[0]))
        return args


def new_id() -> str:
    """A random UUID (version 4) string, without importing uuid."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def iso_now() -> str:
    """UTC time as JavaScript's Date.toISOString() writes it."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def read_stdin() -> str:
    """All of stdin unless it is a terminal (the real CLIs read a pipe or file to EOF)."""
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    return sys.stdin.read()


# --- one call -----------------------------------------------------------------------------------


class Call:
    """A run of a fake CLI: logged, counted while running, answered from the prompt's markers."""

    def __init__(self, cli: str, argv: Sequence[str], prompt: str, root: Path) -> None:
        self.cli = cli
        self.prompt = prompt
        self.root = root
        self.markers = Markers.parse(prompt)
        # pytest-maestro's reviewer prompts: a phase's review, or the final review of the run
        self.review = prompt.startswith(("Review of phase", "Final review of plan"))
        global PACE
        PACE = self.markers.pace
        self.attempt = attempt_of(prompt)
        state = os.environ.get(STATE_ENV)
        self.state = Path(state) if state else None
        self._slot: Path | None = None
        self._log(argv)
        self._register()

    def _log(self, argv: Sequence[str]) -> None:
        if self.state is None:
            return
        self.state.mkdir(parents=True, exist_ok=True)
        record = {
            "cli": self.cli,
            "argv": [self.cli, *argv],
            "cwd": os.getcwd(),
            "prompt_length": len(self.prompt),
            "phase_id": os.environ.get("MAESTRO_PHASE_ID"),
            "attempt": self.attempt,
            "round": int(os.environ.get("MAESTRO_REVIEW_ROUND") or 0),
            "pid": os.getpid(),
            "review": self.review,
        }
        with (self.state / "calls.jsonl").open("a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.write(json.dumps(record) + "\n")

    def _register(self) -> None:
        if self.state is None:
            return
        running = self.state / "running"
        running.mkdir(parents=True, exist_ok=True)
        signal.signal(signal.SIGTERM, self._terminated)  # first: a slot is never left behind
        self._slot = running / f"{self.cli}-{os.getpid()}"
        self._slot.write_text(str(os.getpid()))

    def _terminated(self, signum: int, frame: object) -> None:
        self.release()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def release(self) -> None:
        if self._slot is not None:
            with contextlib.suppress(FileNotFoundError):
                self._slot.unlink()
            self._slot = None

    def running(self) -> int:
        """Live fake calls, this one included; files of dead processes are removed."""
        if self.state is None:
            return 1
        count = 0
        for slot in (self.state / "running").iterdir():
            try:  # a slot read while being written is empty: its process is alive anyway
                os.kill(int(slot.read_text() or os.getpid()), 0)
            except (ValueError, ProcessLookupError, FileNotFoundError):
                with contextlib.suppress(FileNotFoundError):
                    slot.unlink()
                continue
            except PermissionError:
                pass  # alive, another user's
            count += 1
        return count

    def answer(self, *, can_edit: bool | Callable[[str], bool]) -> Reply:
        """Decide the reply, writing the edits `can_edit` allows (a flag, or a test of the path).

        May sleep first, or never return (HANG). A reviewer's prompt gets a reviewer's answer
        (_fake_reviewer.py), none of the implementer's markers it quotes acted on.
        """
        if self.review:
            import _fake_reviewer as reviewer  # here: only a reviewer's call needs it

            text = reviewer.review(self.prompt, self.root, self.attempt)
            return Reply("answer", text, None, tokens=self.markers.tokens)
        m = self.markers
        hang = os.environ.get("FAKE_AGENT_HANG_ROUND")
        if hang and hang == os.environ.get("MAESTRO_REVIEW_ROUND"):
            while True:
                time.sleep(3600)
        for command in _SHELL.findall(self.prompt):
            import subprocess  # here: most calls run no command, and the fakes start fast

            # Its output goes to standard error: standard output is the reply.
            subprocess.run(["bash", "-c", command], cwd=self.root, stdout=sys.stderr, check=False)
        over = m.rate_limit_over is not None and self.running() > m.rate_limit_over
        if "HANG" in m.flags:
            while True:
                time.sleep(3600)
        if m.sleep:
            time.sleep(m.sleep)
        if over:
            if self.state is not None:  # so a test can wait until every phase was refused
                with (self.state / "refused").open("a", encoding="utf-8") as handle:
                    handle.write(f"{os.environ.get('MAESTRO_PHASE_ID')}\n")
            return Reply("rate_limit", "", None, tokens=Tokens(0, 0, 0.0))
        if "QUOTA" in m.flags:
            return Reply("quota", "", None, tokens=Tokens(0, 0, 0.0))
        if "NO_AUTH" in m.flags:
            return Reply("no_auth", "", None, tokens=Tokens(0, 0, 0.0))
        if "NO_NETWORK" in m.flags:
            return Reply("no_network", "", None, tokens=Tokens(0, 0, 0.0))
        if "CAP" in m.flags:
            return Reply("cap", "", None, tokens=m.tokens)
        named = {path for path, _ in m.edits}
        planned = [*m.edits, *(s for s in solutions(self.prompt) if s[0] not in named)]
        edits = [self._edit(path, content, can_edit) for path, content in planned]
        if "ERROR_EXIT0" in m.flags:
            return Reply("error_exit0", "", None, edits, m.tokens)
        if "NO_HANDOFF" in m.flags:
            text = "I read the task and looked at the project files."
            return Reply("answer", text, None, edits, m.tokens)
        status, summary = self._status(edits)
        return Reply("answer", handoff(status, summary, edits), status, edits, m.tokens)

    def _status(self, edits: list[Edit]) -> tuple[str, str]:
        flags = self.markers.flags
        if "FAIL" in flags or ("FAIL_FIRST" in flags and self.attempt <= 1):
            return "FAILED", f"fake failure requested (attempt {self.attempt})"
        if "BLOCKED" in flags:
            return "BLOCKED", "fake blocker requested"
        done = []
        for verb, deleted in (("wrote", False), ("deleted", True)):
            paths = [edit.path for edit in edits if edit.written and edit.deleted is deleted]
            if paths:
                done.append(f"{verb} {', '.join(paths)}")
        return "COMPLETED", "; ".join(done) or "done"

    def _edit(self, path: str, content: str | None, can_edit: bool | Callable[[str], bool]) -> Edit:
        """Write `content` to `path` (delete it when None) if `can_edit` allows."""
        target = (self.root / path).resolve()
        inside = target.is_relative_to(self.root.resolve())
        edit = Edit(path, content, target, existed=target.exists())
        allowed = can_edit(path) if callable(can_edit) else can_edit
        if allowed and inside:
            if content is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content.encode())
            edit.written = True
        return edit


@contextlib.contextmanager
def call(cli: str, argv: Sequence[str], prompt: str, root: Path) -> Iterator[Call]:
    run = Call(cli, argv, prompt, root)
    try:
        yield run
    finally:
        run.release()


def handoff(status: str, summary: str, edits: list[Edit]) -> str:
    """Maestro's handoff report (agent-base-protocol.md), then the status line Maestro asks for."""

    def listed(paths: list[str]) -> str:
        return ", ".join(paths) if paths else "none"

    kept = [edit for edit in edits if not edit.deleted]

    outcome = {"COMPLETED": "success", "FAILED": "failure", "BLOCKED": "partial"}[status]
    return "\n".join(
        [
            "## Task Report",
            f"- **Status**: {outcome}",
            f"- **Objective Achieved**: {summary}",
            f"- **Files Created**: {listed([e.path for e in kept if not e.existed])}",
            f"- **Files Modified**: {listed([e.path for e in kept if e.existed])}",
            f"- **Files Deleted**: {listed([e.path for e in edits if e.deleted])}",
            "- **Decisions Made**: none",
            "- **Validation**: skipped",
            "- **Validation Output**: N/A",
            "- **Errors**: none" if status == "COMPLETED" else f"- **Errors**: {summary}",
            "- **Scope Deviations**: none",
            "",
            "## Downstream Context",
            "- **Key Interfaces Introduced**: none",
            "- **Patterns Established**: none",
            "- **Integration Points**: none",
            "- **Assumptions**: none",
            "- **Warnings**: none",
            "",
            f"{status}: {summary}",
        ]
    )


def compact(value: object) -> str:
    """JSON as JSON.stringify and serde_json write it: no spaces."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def emit_jsonl(events: Sequence[dict[str, object]]) -> None:
    for n, event in enumerate(events):
        if PACE and n:
            time.sleep(PACE)
        sys.stdout.write(compact(event) + "\n")
        if PACE:
            sys.stdout.flush()
    sys.stdout.flush()
