"""Runtimes turn one attempt of a phase into a result: ``shell`` offline, or an agent CLI.

Each built-in lives in its own module; ``plugin.py`` offers them through the
``pytest_maestro_runtimes`` hook, through which other plugins add theirs.
"""

from __future__ import annotations

from .base import AgentRequest, AgentResult, Runtime
from .claude import ClaudeRuntime
from .codex import CodexRuntime
from .command import CommandRuntime, CopilotRuntime, OpenCodeRuntime
from .gemini import GeminiRuntime
from .shell import ShellRuntime

__all__ = ["BUILTIN_RUNTIMES", "AgentRequest", "AgentResult", "Runtime"]

BUILTIN_RUNTIMES: tuple[Runtime, ...] = (
    ShellRuntime(),
    ClaudeRuntime(),
    CodexRuntime(),
    GeminiRuntime(),
    CopilotRuntime(),
    OpenCodeRuntime(),
    CommandRuntime(),
)
