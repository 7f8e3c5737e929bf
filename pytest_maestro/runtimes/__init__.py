"""Runtimes turn one attempt of a phase into a result: ``shell`` offline, LLM CLIs later."""

from __future__ import annotations

from .base import AgentRequest, AgentResult, Runtime
from .shell import ShellRuntime

__all__ = ["AVAILABLE", "AgentRequest", "AgentResult", "Runtime", "get_runtime"]

# Runtimes this version provides; agents may name the others of agents.RUNTIMES already.
AVAILABLE = ("shell",)


def get_runtime(name: str) -> Runtime:
    runtimes: dict[str, Runtime] = {"shell": ShellRuntime()}
    try:
        return runtimes[name]
    except KeyError:
        raise ValueError(f"unknown runtime {name!r}; known: {', '.join(runtimes)}") from None
