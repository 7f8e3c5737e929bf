"""What every runtime takes and gives: one attempt's request, its result, the interface."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..plan import Phase
from ..process import ProcessResult


@dataclass(frozen=True)
class AgentRequest:
    phase: Phase
    prompt: str
    attempt: int  # 1-based
    root: Path
    env: Mapping[str, str]
    timeout: float
    log: Path


@dataclass(frozen=True)
class AgentResult:
    status: str  # completed | failed | blocked
    message: str  # one line: why it failed, or the agent's own status line
    processes: tuple[ProcessResult, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "completed"


class Runtime(Protocol):
    """``name`` is what agents and ``--maestro-runtime`` call it; ``autonomy`` says what
    ``--maestro-autonomous`` lets it do (its approval flags), empty when it needs no consent."""

    @property
    def name(self) -> str: ...

    @property
    def autonomy(self) -> str: ...

    def run(self, request: AgentRequest) -> AgentResult: ...
