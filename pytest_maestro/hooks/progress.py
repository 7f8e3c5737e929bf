"""Live progress: a line when a phase starts, retries, waits out a rate limit, finishes.

Only the process that decides prints: the one process without xdist, the controller with it.
Lines are whole lines written through pytest's terminal reporter, never a partial line and never a
cursor movement, because pytest's own progress shares the terminal; in a terminal they are
coloured, in a pipe (a CI log) they are plain. ``-q`` prints none; the default verbosity and up
print every event, since pytest shows nothing of a running phase. At the default verbosity a
phase's finish line stands in for its result letter, and results are written without the plan's
path in front (as xdist writes them): otherwise each line would leave a lone letter, or a path,
on a line of its own. ``-v`` keeps pytest's result lines as they are.

How an xdist worker's events reach the controller: over xdist's own channel from the worker to
the controller's scheduler (``_compat.controller_channel``), which hands them to ``heard`` here.
No other plugin receives them: they are no test start, no report, no warning. They need no
shared file system (remote workers work). Finishes need no message: the controller reads them
from the phase's report.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any

import pytest

from .._compat import controller_channel, outside_capture
from ..phase.events import PhaseEvent
from ..phase.facts import PhaseFacts
from ..run.orchestrator import Orchestrator
from ..state.model import Status
from .report_facts import report_facts

PLUGIN_NAME = "maestro-progress"
LOCAL_WORKER = "main"  # as PhaseFacts name the process of a run without xdist
_COLOURS = {
    Status.COMPLETED: {"green": True},
    Status.FAILED: {"red": True},
    Status.BLOCKED: {"red": True},
}


def register(config: pytest.Config, maestro: Orchestrator) -> None:
    """Give the orchestrator the progress sink of this process: print where reports arrive,
    send on from an xdist worker."""
    if maestro.run.decides:
        lines = ProgressLines(config)
        config.pluginmanager.register(lines, PLUGIN_NAME)
        maestro.progress = lines.here
    else:
        worker = str(getattr(config, "workerinput", {}).get("workerid", "?"))
        maestro.progress = EventSender(config, worker).send


def heard(config: pytest.Config, wire: str) -> None:
    """An event a worker sent (the scheduler hears it on the controller): printed, unless it is
    none this version can read."""
    lines = config.pluginmanager.get_plugin(PLUGIN_NAME)
    event = PhaseEvent.from_wire(wire)
    if isinstance(lines, ProgressLines) and event is not None:
        lines.show(event)


class ProgressLines:
    """Writes events as lines, in the process that decides."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.facts = report_facts(config)

    def here(self, event: PhaseEvent) -> None:
        """An event of a phase running in this process: under pytest's output capture (lifting
        it costs system calls: not for a line that ``-q`` would not print)."""
        if not self.on:
            return
        with outside_capture(self.config):
            self.show(replace(event, worker=LOCAL_WORKER))

    @property
    def terminal(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    @property
    def on(self) -> bool:
        return self.terminal is not None and self.config.get_verbosity() >= 0

    def show(self, event: PhaseEvent) -> None:
        terminal = self.terminal
        if not self.on:
            return
        terminal.ensure_newline()  # ends pytest's line of a file's results, if one is open
        if self.config.get_terminal_writer().width_of_current_line:
            terminal.write("\n")  # xdist's results are written without that bookkeeping
        terminal.write_line(
            event.line(), **(_COLOURS.get(event.status, {}) if event.status else {})
        )

    @pytest.hookimpl
    def pytest_sessionstart(self) -> None:
        if self.on and self.config.get_verbosity() == 0:
            self.terminal.showfspath = False

    @pytest.hookimpl(trylast=True)  # at -v, after pytest's result line
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.on:  # -q: no line, nor the facts and event it would be made of
            return
        facts = self.facts(report)
        if _ran(facts):
            assert facts is not None
            self.show(PhaseEvent.finished(facts))

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> Generator[None, tuple[str, str, Any], tuple[str, str, Any]]:
        category, letter, word = yield
        if self.on and self.config.get_verbosity() == 0 and _ran(self.facts(report)):
            letter = ""  # the finish line said it
        return category, letter, word


def _ran(facts: PhaseFacts | None) -> bool:
    """Facts of a phase that ran: they say on which worker (a crash too); a skip or an error in
    setup does not."""
    return facts is not None and facts.skip is None and facts.worker is not None


class EventSender:
    """On an xdist worker: sends the events of the phase it runs to the controller."""

    def __init__(self, config: pytest.Config, worker: str) -> None:
        self.config = config
        self.worker = worker
        self.channel = controller_channel(config)

    def send(self, event: PhaseEvent) -> None:
        # A worker has the controller's options: under -q the controller would print nothing.
        if self.channel is None or self.config.get_verbosity() < 0:
            return
        self.channel(replace(event, worker=self.worker).to_wire())
