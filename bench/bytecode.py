"""Bytecode for the processes a benchmark starts, as an installed package has it.

An installed package has its modules compiled. A process that may not write bytecode caches
(``PYTHONDONTWRITEBYTECODE``, set on some machines and in many container images) and finds none
compiles every module it imports, in every xdist worker: far more than importing them costs, and
not what a user's second run pays. ``environment`` lets the runs write their caches under a
temporary directory (``PYTHONPYCACHEPREFIX``), which one untimed run fills first.
"""

from __future__ import annotations

import os
from pathlib import Path


def environment(base: Path, pyc: bool = True) -> dict[str, str]:
    """``os.environ`` with bytecode cached under ``base`` (or, not ``pyc``, never written)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if pyc:
        env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env
