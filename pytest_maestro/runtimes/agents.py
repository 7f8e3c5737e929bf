"""Agent definitions: Markdown files with YAML frontmatter (the role's instructions as the body).

Searched in order, the first definition of a name winning: ``--maestro-agents-dir``, ``agents/``
beside the plan, in the project root and in pytest's rootdir, the project's ``.claude/agents/``,
the user's ``~/.claude/agents/``, then the built-in definitions shipped in the package (one per
runtime). The frontmatter is Maestro's and Claude Code's (``name``, ``description``, ``tools``,
``model``, ``temperature``, ``max_turns``, ``timeout_mins``; unknown fields are kept) plus this
project's (``runtime``, ``command``, ``prompt_via``, ``env``, ``review``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import numbers
from ..plan.errors import PlanError, quoted
from ..plan.front_matter import FrontMatterError, load_yaml, split_front_matter
from ..plan.model import REVIEW_MODES

BUILTIN_DIR = Path(__file__).parent / "builtin_agents"
MAX_AGENT_BYTES = 1024 * 1024  # a role's instructions, not a library
PROMPT_VIA = ("stdin", "file")
# What an environment variable's name may be: a shell could name it, and ``=`` or NUL in it
# would reach the OS as another variable or not at all.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Claude Code's ``model: inherit`` means "the caller's model": no model of its own.
_NO_MODEL = ("", "inherit", "default", "null", "none")


@dataclass(frozen=True)
class Agent:
    name: str
    description: str = ""
    runtime: str | None = None  # None: the phase or --maestro-runtime decides
    model: str | None = None
    timeout_mins: float | None = None
    tools: tuple[str, ...] = ()
    temperature: float | None = None
    max_turns: int | None = None
    command: tuple[str, ...] = ()  # argv template of the command runtime
    prompt_via: str | None = None  # stdin | file, for the command runtime
    env: tuple[tuple[str, str], ...] = ()  # added to the agent CLI's environment
    instructions: str = ""  # the role: the file's body
    review: str | None = None  # how its phases are reviewed (REVIEW_MODES); None: not said
    path: Path | None = None  # None: made up for a name found nowhere
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def generic(self) -> bool:
        return self.path is None


def normalise(name: str) -> str:
    """Maestro treats ``code_reviewer`` and ``code-reviewer`` as one agent."""
    return name.strip().lower().replace("_", "-")


def generic_agent(name: str) -> Agent:
    """A role of that name for a phase whose agent no directory defines."""
    role = name.replace("_", " ").replace("-", " ")
    return Agent(
        name,
        f"a generic {role}",
        instructions=f"You are the {role} of this project. Do the task below as an expert {role}.",
    )


class AgentRegistry:
    def __init__(self, agents: Iterable[Agent], searched: Iterable[Path] = ()) -> None:
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            self._agents.setdefault(normalise(agent.name), agent)
        self.searched = tuple(searched)  # the directories looked in, for messages

    @classmethod
    def load(cls, directories: Iterable[Path]) -> AgentRegistry:
        """Agents from each existing directory in order, then the built-ins. PlanError names
        the file and line of a malformed definition."""
        searched = [*directories, BUILTIN_DIR]
        found: list[Agent] = []
        for directory in searched:
            if directory.is_dir():
                found.extend(load_agent(path) for path in sorted(directory.glob("*.md")))
        return cls(found, searched[:-1])

    def get(self, name: str) -> Agent | None:
        return self._agents.get(normalise(name))

    def names(self) -> list[str]:
        return sorted(agent.name for agent in self._agents.values())


def load_agent(path: Path) -> Agent:
    # Imported here: plan/source.py brings the plan's Markdown structure with it, which a process
    # reading no agent definition (an xdist worker running commands) has no other use for.
    from ..plan.source import read_bounded

    raw = read_bounded(path, MAX_AGENT_BYTES, "agent definition")
    try:
        text = raw.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError:
        raise PlanError("invalid agent definition: not UTF-8 text", path) from None
    front = split_front_matter(text)
    if front is None and re.match(r"-{3,}[ \t]*\n", text):
        raise PlanError(
            "invalid agent definition: the frontmatter opened on line 1 is never closed with ---",
            path,
            1,
        )
    try:
        meta = load_yaml(front) if front is not None else {}
    except FrontMatterError as error:
        raise PlanError(f"invalid agent definition: {error.problem}", path, error.line) from None
    if front is not None and front.text.strip() and not meta:
        import yaml  # loaded by load_yaml above, which imports it

        raw = yaml.safe_load(front.text)  # loaded above: only a non-mapping gives {}
        if not isinstance(raw, dict):
            raise PlanError(
                f"invalid agent definition: its frontmatter is {type(raw).__name__}, "
                "not a mapping of fields",
                path,
                front.first_line,
            )
    instructions = text[front.body_start :] if front is not None else text
    name = _text(meta.get("name"), "name", path) or path.stem
    reader = _Fields(meta, path, name)
    prompt_via = reader.text("prompt_via")
    if prompt_via is not None and prompt_via not in PROMPT_VIA:
        raise reader.error(f"prompt_via must be one of {', '.join(PROMPT_VIA)}, got {prompt_via!r}")
    model = reader.text("model")
    review = reader.text("review")
    if review is not None and review not in REVIEW_MODES:
        raise reader.error(f"review must be one of {', '.join(REVIEW_MODES)}, got {review!r}")
    known = {
        "name", "description", "runtime", "model", "timeout_mins", "tools", "temperature",
        "max_turns", "command", "prompt_via", "env", "review",
    }  # fmt: skip
    return Agent(
        name=name,
        description=reader.text("description") or "",
        runtime=reader.text("runtime"),
        model=None if model is None or model.lower() in _NO_MODEL else model,
        timeout_mins=reader.number("timeout_mins", numbers.TIMEOUT_MINUTES),
        tools=reader.words("tools"),
        temperature=reader.number("temperature", numbers.TEMPERATURE),
        max_turns=reader.integer("max_turns"),
        command=reader.words("command", split=False),
        prompt_via=prompt_via,
        env=reader.env(),
        instructions=instructions.strip(),
        review=review,
        path=path,
        extra={k: v for k, v in meta.items() if k not in known},
    )


def _text(value: Any, key: str, path: Path) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        raise PlanError(f"invalid agent definition: {key} must be text, got {value!r}", path)
    return str(value).strip()


class _Fields:
    """Typed reads of frontmatter fields; a wrong type names the agent, file and field."""

    def __init__(self, meta: Mapping[str, Any], path: Path, name: str) -> None:
        self.meta, self.path, self.name = meta, path, name

    def error(self, problem: str) -> PlanError:
        return PlanError(f"agent {self.name!r}: {problem}", self.path)

    def text(self, key: str) -> str | None:
        text = _text(self.meta.get(key), key, self.path)
        self.no_nul(key, text or "")
        return text

    def no_nul(self, key: str, text: str) -> None:
        """What goes to a command line or an environment cannot hold a NUL."""
        if "\x00" in text:
            raise self.error(f"{key} holds a NUL character: {quoted(text)}")

    def number(self, key: str, bounds: numbers.Bounds) -> float | None:
        value = self.meta.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"{key} must be a number, got {value!r}")
        try:
            return float(bounds.check(value))
        except numbers.NumberError as error:
            raise self.error(f"{key} {error}") from None

    def integer(self, key: str) -> int | None:
        value = self.meta.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.error(f"{key} must be a whole number > 0, got {value!r}")
        try:
            return int(numbers.TURNS.check(value))
        except numbers.NumberError as error:
            raise self.error(f"{key} {error}") from None

    def words(self, key: str, split: bool = True) -> tuple[str, ...]:
        """A list, or (``tools: Read, Edit``, as Claude Code writes it) a comma-separated text."""
        value = self.meta.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            if not split:
                raise self.error(f"{key} must be a list of arguments, got {value!r}")
            return tuple(word.strip() for word in value.split(",") if word.strip())
        if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
            for item in value:
                self.no_nul(key, str(item))
            return tuple(str(v) for v in value)
        raise self.error(f"{key} must be a list of text, got {value!r}")

    def env(self) -> tuple[tuple[str, str], ...]:
        value = self.meta.get("env")
        if value is None:
            return ()
        if not isinstance(value, dict):
            raise self.error(f"env must be a mapping of names to values, got {value!r}")
        for name, item in value.items():
            if not _ENV_NAME.fullmatch(str(name)):
                raise self.error(
                    f"env name {quoted(str(name))} is not a variable name "
                    "(letters, digits and _, not first a digit)"
                )
            if isinstance(item, (dict, list)):
                raise self.error(f"env {name!s} must be text, got {item!r}")
            self.no_nul(f"env {name}", "" if item is None else str(item))
        return tuple((str(k), "" if v is None else str(v)) for k, v in value.items())
