"""A mixed pool: what each xdist worker can run, as it said at its start, and which workers can
run a job. Values in, decisions out: the scheduler hands a worker's ``has`` to the policy
(``Policy.next_job(has)``) and asks ``Pool.refusal`` for a job no worker can run.

What a job needs and a worker has are names: ``git`` and the runtimes (``claude``, ``shell``).
See docs/architecture.md, "A mixed pool".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Set
from dataclasses import dataclass, replace
from typing import Any

GIT = "git"
WIRE_KEY = "maestro_tools"  # what tells a worker's tools from its progress events on the wire


@dataclass(frozen=True)
class WorkerTools:
    """What one worker has: ``has`` the names it can run; ``lacks`` why it lacks others, by
    name (``no claude on its PATH``), ``otherwise`` why it lacks a name not listed there;
    ``refused`` why it runs nothing at all."""

    worker: str
    host: str
    rootdir: str
    has: frozenset[str]
    lacks: tuple[tuple[str, str], ...] = ()
    otherwise: str | None = None
    refused: str | None = None

    @property
    def where(self) -> str:
        return f"{self.worker} on {self.host}"

    def can(self, needs: Set[str]) -> bool:
        return self.refused is None and needs <= self.has

    def why_not(self, needs: Iterable[str]) -> str:
        """What it lacks of ``needs``, in a few words naming it and its host."""
        if self.refused is not None:
            return f"{self.where}: {self.refused}"
        said = dict(self.lacks)
        missing = [
            said.get(need) or self.otherwise or f"no {need}"
            for need in sorted(needs)
            if need not in self.has
        ]
        return f"{self.where}: {'; '.join(dict.fromkeys(missing))}"

    def given(self, key: str, runtimes: Iterable[str]) -> WorkerTools:
        """The worker as an override says (``--maestro-worker-runtimes KEY:RUNTIMES``): those
        runtimes, whatever it found; git as found."""
        names = frozenset(runtimes)
        return replace(
            self,
            has=names | (self.has & {GIT}),
            lacks=tuple(pair for pair in self.lacks if pair[0] == GIT),
            otherwise=f"--maestro-worker-runtimes gives it {key}:{','.join(sorted(names))}",
        )

    def to_wire(self) -> str:
        data: dict[str, Any] = {
            "worker": self.worker,
            "host": self.host,
            "rootdir": self.rootdir,
            "has": sorted(self.has),
            "lacks": [list(pair) for pair in self.lacks],
        }
        return json.dumps({WIRE_KEY: data})

    @classmethod
    def from_wire(cls, text: str) -> WorkerTools | None:
        """None for a text that is not a worker's tools (a progress event)."""
        try:
            data = json.loads(text)[WIRE_KEY]
            return cls(
                str(data["worker"]),
                str(data["host"]),
                str(data["rootdir"]),
                frozenset(map(str, data["has"])),
                tuple((str(need), str(why)) for need, why in data["lacks"]),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


class Pool:
    """The workers of a run as they report, kept when one is lost (its replacement has its
    spec, so what it had). ``expected``: how many the run starts."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.tools: dict[str, WorkerTools] = {}

    def add(self, tools: WorkerTools) -> None:
        self.tools[tools.worker] = tools

    def has(self, worker: str) -> frozenset[str] | None:
        """What the worker can run; None: it has not said yet (it gets nothing meanwhile)."""
        tools = self.tools.get(worker)
        if tools is None:
            return None
        return tools.has if tools.refused is None else frozenset()

    @property
    def complete(self) -> bool:
        """Every worker the run starts has said what it has."""
        return len(self.tools) >= max(self.expected, 1)

    def refusal(self, needs: Set[str], what: str) -> str | None:
        """Once the pool is complete: why no worker can run ``what`` (a phase), in one line
        naming each worker, its host and what it lacks; None when one can, or may yet."""
        if not self.complete or any(tools.can(needs) for tools in self.tools.values()):
            return None
        # In gateway order (gw2 before gw10), whichever worker said it first.
        ordered = sorted(self.tools.values(), key=lambda tools: _natural(tools.worker))
        lacking = " | ".join(tools.why_not(needs) for tools in ordered)
        # What every worker has is not the trouble: named only when nothing else is.
        short = {need for need in needs if any(need not in t.has for t in self.tools.values())}
        named = " and ".join(sorted(short or needs))
        which = "which no worker has" if len(short or needs) < 2 else "and no worker has all"
        return f"{what} needs {named}, {which}: {lacking}"


def _natural(name: str) -> tuple[str, int]:
    """``gw2`` before ``gw10``: the name's stem, then its number (-1 without one)."""
    stem = name.rstrip("0123456789")
    return stem, int(name[len(stem) :] or -1)
