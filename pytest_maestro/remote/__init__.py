"""Phases on workers whose file system is not the controller's: a base goes out as a git bundle
over xdist's channel, the phase's diff comes back in its report, and the controller merges it.
See docs/architecture.md, "Remote phases".

The error is here, apart from the machinery: a run without remote workers imports none of it."""

from __future__ import annotations


class RemoteError(Exception):
    """A remote phase cannot start or its result cannot be read: one line for the user."""
