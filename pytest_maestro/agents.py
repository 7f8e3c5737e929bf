"""Agent definitions: ``agents/*.md`` files (YAML frontmatter + role instructions) and built-ins."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .plan.errors import PlanError
from .plan.front_matter import FrontMatterError, load_yaml, split_front_matter

RUNTIMES = ("shell", "claude", "gemini", "codex", "command")


@dataclass(frozen=True)
class Agent:
    name: str
    description: str = ""
    runtime: str = "shell"
    model: str | None = None
    timeout_mins: float | None = None
    instructions: str = ""
    path: Path | None = None


BUILTIN = (Agent("shell", "runs the phase's run: commands with bash", "shell"),)


def normalise(name: str) -> str:
    """Maestro treats ``code_reviewer`` and ``code-reviewer`` as one agent."""
    return name.strip().lower().replace("_", "-")


class AgentRegistry:
    def __init__(self, agents: Iterable[Agent]) -> None:
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            self._agents.setdefault(normalise(agent.name), agent)

    @classmethod
    def load(cls, directories: Iterable[Path]) -> AgentRegistry:
        """Agents from each directory in order (the first of a name wins), then built-ins."""
        found: list[Agent] = []
        for directory in directories:
            if directory.is_dir():
                found.extend(load_agent(path) for path in sorted(directory.glob("*.md")))
        return cls([*found, *BUILTIN])

    def get(self, name: str) -> Agent | None:
        return self._agents.get(normalise(name))

    def names(self) -> list[str]:
        return sorted(agent.name for agent in self._agents.values())


def load_agent(path: Path) -> Agent:
    try:
        text = path.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError:
        raise PlanError("invalid agent definition: not UTF-8 text", path) from None
    front = split_front_matter(text)
    try:
        meta = load_yaml(front) if front is not None else {}
    except FrontMatterError as error:
        raise PlanError(f"invalid agent definition: {error.problem}", path, error.line) from None
    instructions = text[front.body_start :] if front is not None else text
    name = str(meta.get("name") or path.stem)
    runtime = str(meta.get("runtime", "shell"))
    if runtime not in RUNTIMES:
        raise PlanError(
            f"agent {name!r}: unknown runtime {runtime!r}; known: {', '.join(RUNTIMES)}", path
        )
    timeout = meta.get("timeout_mins")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise PlanError(f"agent {name!r}: timeout_mins must be a number, got {timeout!r}", path)
    return Agent(
        name=name,
        description=str(meta.get("description", "")),
        runtime=runtime,
        model=str(meta["model"]) if meta.get("model") else None,
        timeout_mins=float(timeout) if timeout is not None else None,
        instructions=instructions.strip(),
        path=path,
    )
