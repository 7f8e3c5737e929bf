"""Which program a runtime starts for an agent, and whether this machine has it on its PATH.

An xdist worker says at its start which of the run's runtimes it can run (see
docs/architecture.md, "A mixed pool"): a look at the PATH, not a call of the CLI, since every
worker of a run pays for it before its first phase.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from .agents import Agent
from .base import Runtime
from .command import CommandRuntime

# What the shell runtime starts, and what every isolated or remote phase needs.
SHELL_PROGRAM = "bash"
GIT = "git"


def program(runtime: Runtime, agent: Agent | None) -> str | None:
    """The program the runtime starts for the agent: the shell's bash, an agent CLI's
    executable, the ``command`` runtime's first word of the agent's command; None when it
    cannot be told (a plugin's runtime that names none)."""
    if runtime.name == "shell":
        return SHELL_PROGRAM
    named = getattr(runtime, "executable", "")
    if isinstance(named, str) and named:
        return named
    if isinstance(runtime, CommandRuntime) and agent is not None and agent.command:
        return agent.command[0]
    return None


def on_path(name: str, which: Callable[[str], str | None] = shutil.which) -> bool:
    """Whether ``name`` (a bare name, or a path) is a program this machine can start."""
    return which(name) is not None
