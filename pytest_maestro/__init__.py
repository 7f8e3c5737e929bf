"""pytest-maestro: run an implementation plan as a pytest session, one item per phase."""

from __future__ import annotations

__version__ = "0.1.0"
