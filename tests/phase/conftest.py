"""What the tests of reviewed phases share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..helpers import FAKES


@pytest.fixture
def fakes(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in CLIs first on PATH, and their records, outside the project: a reviewer's
    own call must not look like a change it made to the tree."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    state = tmp_path_factory.mktemp("fake-state")
    monkeypatch.setenv("FAKE_AGENT_STATE", str(state))
    return state
