"""What travels between the controller and a remote worker for one phase, as plain values.

``Start`` goes out on the side channel just before the phase is sent: the bundle that brings the
worker's repository to the phase's start, and what the prompt takes from the session (the
dependencies' results, read where the session is). ``Result`` comes back in the phase's report
facts: the phase's diff from its start (binary-safe, ``git diff --binary``), or where a diff
too large to carry is kept on the worker, and the phase's logs. Bytes travel as base64 text, so
that the facts stay a plain mapping whatever serialises them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..phase.prompt import DependencyResult
from . import RemoteError


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


@dataclass(frozen=True)
class Start:
    """A phase's start on a remote worker."""

    phase: str
    commit: str = ""  # the commit the phase starts at, in the worker's repository once fetched
    bundle: bytes = b""  # a git bundle holding ``commit``; needs ``has`` when that is set
    has: str | None = None  # a commit the worker was sent before: the bundle holds what follows
    ref: str = ""  # the ref the bundle names ``commit`` by
    prefix: str = ""  # the project root from the top of the repository ("" or "sub/dir/")
    session_id: str = ""
    dependencies: tuple[DependencyResult, ...] = ()
    final_findings: tuple[str, ...] = ()
    problem: str | None = None  # why the controller could not make the start: the phase fails

    def to_wire(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "commit": self.commit,
            "bundle": self.bundle,  # execnet carries bytes as they are
            "has": self.has,
            "ref": self.ref,
            "prefix": self.prefix,
            "session_id": self.session_id,
            "dependencies": [
                [d.id, d.name, d.result, dict(d.downstream)] for d in self.dependencies
            ],
            "final_findings": list(self.final_findings),
            "problem": self.problem,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Start:
        try:
            deps = tuple(
                DependencyResult(str(i), str(n), r, dict(d)) for i, n, r, d in data["dependencies"]
            )
            return cls(
                str(data["phase"]),
                str(data["commit"]),
                bytes(data["bundle"]),
                None if data["has"] is None else str(data["has"]),
                str(data["ref"]),
                str(data["prefix"]),
                str(data["session_id"]),
                deps,
                tuple(str(f) for f in data["final_findings"]),
                data["problem"],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RemoteError(f"a phase's start from the controller is malformed: {exc}") from None


@dataclass(frozen=True)
class Result:
    """What a remote phase left, for the controller to bring back."""

    host: str  # the worker's host and directory, as users find it there
    start: str  # the commit the phase started at (the worker's)
    diff: bytes | None  # from ``start`` to what the phase left; None: not carried
    size: int  # the diff's size in bytes
    kept: str | None = None  # where the worker keeps a diff too large to carry
    problem: str | None = None  # why there is no diff (the worktree could not be read)
    logs: Mapping[str, bytes] = field(default_factory=dict)  # the phase's log files, by name

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "start": self.start,
            "diff": None if self.diff is None else encode(self.diff),
            "size": self.size,
            "kept": self.kept,
            "problem": self.problem,
            "logs": {name: encode(data) for name, data in self.logs.items()},
        }

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Result:
        try:
            diff = data["diff"]
            return cls(
                str(data["host"]),
                str(data["start"]),
                None if diff is None else decode(diff),
                int(data["size"]),
                data.get("kept"),
                data.get("problem"),
                {str(name): decode(text) for name, text in data["logs"].items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RemoteError(f"a remote phase's result is malformed: {exc}") from None

    def without_payload(self) -> dict[str, Any]:
        """The mapping with the diff and logs left out: what stays on the report once the
        controller has brought them in."""
        return {**self.to_dict(), "diff": None, "logs": {}}
