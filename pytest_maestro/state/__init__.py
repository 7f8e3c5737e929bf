"""Session state of one plan: a locked, crash-safe record of every phase's transitions.

Files in the state dir, per plan (``<name>`` is ``<plan stem>-<hash of its path in the root>``):

- ``<name>.md``: the snapshot, Markdown with YAML frontmatter in the shape of Maestro's
  active-session.md and a readable log with a Mermaid graph (``document``); replaced atomically;
- ``<name>.journal``: one JSON line per change since the snapshot, appended and fsync'd before
  ``record`` returns (``journal``); folded into the snapshot at ``close()`` and whenever it outgrows
  a bound proportional to the plan, so the cost of a transition does not grow with the plan;
- ``<name>.lock``: a flock the kernel releases when its holder dies; ``<name>.info``: who holds it.
"""

from __future__ import annotations

from .entries import PhaseChange
from .journal import read_session
from .lock import SessionBusy
from .model import (
    PhaseError,
    PhaseState,
    SessionCorrupt,
    SessionDoc,
    SessionUnwritable,
    StateError,
    Status,
    Tokens,
)
from .paths import SessionPaths
from .resume import Interrupted, fingerprints
from .store import SessionStore
from .transitions import InvalidTransition

__all__ = [
    "Interrupted",
    "InvalidTransition",
    "PhaseChange",
    "PhaseError",
    "PhaseState",
    "SessionBusy",
    "SessionCorrupt",
    "SessionDoc",
    "SessionPaths",
    "SessionStore",
    "SessionUnwritable",
    "StateError",
    "Status",
    "Tokens",
    "fingerprints",
    "read_session",
]
