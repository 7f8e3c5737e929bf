"""Isolated phases: a git worktree of their own, their result merged back into the user's tree,
and what git shares between worktrees put back as the user had it.

The error is here, apart from the machinery: a run without ``--maestro-isolate`` imports none of
it, yet the code that would meet the error names it."""

from __future__ import annotations


class IsolationError(Exception):
    """Isolation cannot be used or a worktree cannot be made: one line for the user."""
