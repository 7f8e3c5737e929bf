"""Collection: the plan file is a pytest File, each phase an Item (DESIGN §7)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from _pytest._code.code import ExceptionInfo, TerminalRepr

from .plan import Phase
from .report import render_failure
from .runner import PhaseOutcome

if TYPE_CHECKING:
    from .session import MaestroSession

SYNC_NAME = "maestro-sync"
SESSION_KEY = pytest.StashKey["MaestroSession"]()
OUTCOME_KEY = pytest.StashKey[PhaseOutcome]()


class PhaseFailed(Exception):
    def __init__(self, outcome: PhaseOutcome) -> None:
        super().__init__(outcome.status)
        self.outcome = outcome


def marker_name(text: str) -> str:
    """A marker name usable with ``-m``: letters, digits and underscores."""
    name = re.sub(r"\W+", "_", text.strip()).strip("_").lower()
    return name if name and not name[0].isdigit() else f"_{name}"


class PlanFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        maestro = self.session.config.stash[SESSION_KEY]
        maestro.check_agents()
        for phase in maestro.run_order():
            item = PhaseItem.from_parent(self, name=phase.id, phase=phase)
            for marker in maestro.markers(phase):
                item.add_marker(marker)
            yield item
        if maestro.on_worker:
            maestro.sync_item = SyncItem.from_parent(self, name=SYNC_NAME)
            yield maestro.sync_item


class PhaseItem(pytest.Item):
    def __init__(self, *, phase: Phase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.phase = phase

    @property
    def maestro(self) -> MaestroSession:
        return self.config.stash[SESSION_KEY]

    def setup(self) -> None:
        reason = self.maestro.why_not_run(self.phase)
        if reason is not None:
            # Reported at the phase's line in the plan, not at this line of the plugin.
            raise pytest.skip.Exception(reason, _use_item_location=True)

    def runtest(self) -> None:
        self.maestro.phase_started(self.phase)
        outcome = self.maestro.run_phase(self.phase)
        self.stash[OUTCOME_KEY] = outcome
        if not outcome.ok:
            raise PhaseFailed(outcome)

    def repr_failure(
        self, excinfo: ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, PhaseFailed):
            cwd = self.config.invocation_params.dir
            return render_failure(self.phase, excinfo.value.outcome, cwd)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        line = self.phase.line - 1 if self.phase.line else None
        return self.path, line, f"phase {self.phase.id}: {self.phase.name}"


class SyncItem(pytest.Item):
    """A no-op item collected on xdist workers only; see ``scheduler.py`` for why it exists."""

    def runtest(self) -> None:  # never called: the protocol hook short-cuts it
        pass

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, SYNC_NAME
