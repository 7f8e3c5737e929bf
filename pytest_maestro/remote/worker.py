"""A remote worker's link to its controller: the phases' starts it receives, in order, and the
directory its phases run in. Knows nothing of execnet: it is handed a function that receives."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..state.paths import file_stem
from . import RemoteError
from .home import Home, Space
from .wire import Start

# Seconds a phase waits for its start: the controller sends it before the phase itself, so it is
# there at once unless the connection is gone.
START_WAIT = 300.0


def home_for(cwd: Path, controller_root: Path, session: str, worker: str) -> Path:
    """The worker's directory: under its working directory (xdist's ``chdir``), unless that is
    in the controller's project (a worker on the same machine made remote with
    ``--maestro-remote``), where it would land in the user's tree: the system's temporary
    directory then."""
    base = cwd
    if cwd.resolve().is_relative_to(controller_root.resolve()):
        base = Path(tempfile.gettempdir()) / f"pytest-maestro-{os.getuid()}"
    return base / ".maestro-remote" / file_stem(session) / file_stem(worker)


@dataclass
class RemoteWorker:
    """What runs a worker's phases remotely. ``problem``: why its directory cannot be used,
    said by each phase it is sent."""

    home: Home
    receive: Callable[[float], object]  # the next message on the side channel, or an error
    problem: str | None = None

    def prepare(self) -> None:
        """At the worker's start: what an earlier run left in its directory goes."""
        try:
            self.home.clear()
        except RemoteError as exc:
            self.problem = str(exc)

    def open(self, phase_id: str) -> tuple[Start, Space]:
        """The phase's start from the controller, and its work tree there; RemoteError when it
        cannot be had, in one line naming the host."""
        if self.problem is not None:
            raise RemoteError(self.problem)
        start = self._start(phase_id)
        return start, self.home.open(start)

    def _start(self, phase_id: str) -> Start:
        while True:
            try:
                data = self.receive(START_WAIT)
            except Exception as exc:  # the channel's errors are execnet's own classes
                raise RemoteError(
                    f"no start for phase {phase_id!r} from the controller on {self.home.host}: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            if not isinstance(data, dict):
                raise RemoteError(f"the controller sent {type(data).__name__}, not a start")
            start = Start.from_wire(data)
            if start.phase == phase_id and start.problem is not None:
                raise RemoteError(start.problem)
            if start.phase == phase_id:
                return start
            # A start whose phase never came (the controller stopped before sending it): the
            # next one is this phase's.
