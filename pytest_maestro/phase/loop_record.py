"""Where a reviewed phase's loop stood after its last review, kept so that the run after a kill
goes on from there instead of starting over: the attempt, the fix round, the implementer's CLI
session, the last review (its findings, the rounds before it), what the attempt cost so far, the
implementer's last reply, and a content hash of each declared file as that review saw it.

A plain JSON file beside the phase's pre-images, written by the process that runs the phase
(the session is the controller's alone). It needs them (a resumed loop's change is taken against
them; a phase that fails after all is put back from them) and goes with them. It holds only while
it still describes the phase: the same definition, every declared file as reviewed, the pre-images
readable; else the phase starts over, as a killed phase always did. See docs/architecture.md,
"What a killed run leaves".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files.declared import FileSnapshot, OutsideRoot, UnreadablePreimages, inside, set_aside
from ..files.putback import read
from ..plan import Phase
from ..review.verdict import Review
from ..runtimes import AgentResult
from ..runtimes.handoff import parse_handoff
from ..state.fields import FieldError, Fields
from ..state.journal import open_new
from ..state.model import Status, Tokens
from ..state.paths import SessionPaths
from ..texts import one_line, os_error_text
from .outcome import Attempt

VERSION = 1
Hashes = tuple[tuple[str, str | None], ...]  # declared path -> sha256 of its content (None: absent)
_OUTSIDE = "outside the root"  # a declared path that leads out of the root: never as reviewed


class LoopRecordError(ValueError):
    """A loop record the next run cannot go on from; ``str()`` is one line saying why."""


def hashes(root: Path, paths: Sequence[str]) -> Hashes:
    """Each path's content hash in ``root``."""
    found: list[tuple[str, str | None]] = []
    for relative in paths:
        try:
            content = read(inside(root, relative))
        except OutsideRoot:
            found.append((relative, _OUTSIDE))
            continue
        found.append((relative, None if content is None else hashlib.sha256(content).hexdigest()))
    return tuple(found)


@dataclass(frozen=True)
class LoopRecord:
    phase: str
    definition: str  # the phase's fingerprint (``state.fingerprints``): a changed phase starts over
    attempt: int
    round: int  # the fix round the review came after; 0: the attempt's own review
    session: str | None  # the implementer's CLI session the next round goes on with
    reply: str  # the implementer's last reply: its handoff, should the review have passed
    review: Review  # the last review, with the rounds before it
    tokens: Tokens  # what the attempt cost so far, its reviews included
    outside: tuple[str, ...]  # what it changed outside the declared files
    files: Hashes

    @classmethod
    def of(
        cls,
        phase: Phase,
        definition: str,
        attempt: Attempt,
        number: int,
        session: str | None,
        root: Path,
    ) -> LoopRecord:
        """Where the loop stands once ``attempt`` was reviewed after fix round ``number``."""
        assert attempt.review is not None, "a loop record follows a review"
        return cls(
            phase.id, definition, attempt.number, number, session, attempt.agent.text,
            attempt.review, attempt.tokens, attempt.outside, hashes(root, phase.files.all()),
        )  # fmt: skip

    @property
    def point(self) -> str:
        """The review it was written after, in words: ``fix round 2's review``."""
        if self.round:
            return f"fix round {self.round}'s review"
        return f"attempt {self.attempt}'s review"

    def resumed(self, phase: Phase) -> Attempt:
        """The attempt as the loop left it. Its own checks had passed (a review runs only then)
        on these very files; its last review, its rounds and its session go on with it."""
        handoff = parse_handoff(self.reply)
        agent = AgentResult(
            Status.COMPLETED,
            handoff.status_line or Status.COMPLETED.value,
            text=self.reply,
            session_id=self.session,
            handoff=handoff,
        )
        checked = any(check.check for check in phase.acceptance)
        return Attempt(
            self.attempt, agent, tokens=self.tokens, outside=self.outside, checked=checked,
            review=self.review, rounds=self.round,
        )  # fmt: skip

    def changed(self, root: Path, phase: Phase) -> str | None:
        """The first declared file that is not as the review saw it, or None."""
        now = dict(hashes(root, phase.files.all()))
        recorded = dict(self.files)
        for path in dict.fromkeys([*recorded, *now]):
            if recorded.get(path, _OUTSIDE) != now.get(path, _OUTSIDE):
                return path
        return None

    # -- on disk ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "phase": self.phase,
            "definition": self.definition,
            "attempt": self.attempt,
            "round": self.round,
            "session": self.session,
            "review": self.review.to_dict(),
            "tokens": self.tokens.to_dict(),
            "outside": list(self.outside),
            "files": dict(self.files),
            "reply": self.reply,
        }

    @classmethod
    def from_mapping(cls, raw: object) -> LoopRecord:
        """What ``to_dict`` wrote; LoopRecordError for anything else (a file cut short or
        edited by hand)."""
        try:
            f = Fields(raw)
            if f.raw.get("version") != VERSION:
                raise LoopRecordError("it is not in the shape this version of the tool writes")
            review = Review.from_mapping(f.mapping("review"))
            if review is None:
                raise FieldError("field 'review' is not a review this tool wrote")
            attempt = f.count("attempt")
            if attempt < 1:
                raise f.error("attempt", "a whole number >= 1", f.raw.get("attempt"))
            files = f.mapping("files")
            if not all(isinstance(v, str | None) for v in files.values()):
                raise f.error("files", "a mapping of paths to content hashes", files)
            return cls(
                f.required("phase"), f.text("definition") or "", attempt, f.count("round"),
                f.text("session"), f.text("reply") or "", review,
                Tokens.from_mapping(f.mapping("tokens")), f.texts("outside"),
                tuple((str(path), value) for path, value in files.items()),
            )  # fmt: skip
        except FieldError as exc:
            raise LoopRecordError(f"it cannot be read: {one_line(str(exc))}") from None

    def save(self, path: Path) -> None:
        """Written whole or not at all, synced: a kill finds this record or the one before."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open_new(tmp) as handle:
            handle.write(json.dumps(self.to_dict()).encode())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def keep(self, path: Path) -> str | None:
        """``save``d; else why not, the record before it dropped: never one that is behind."""
        try:
            self.save(path)
        except OSError as exc:
            drop(path)
            return os_error_text(exc)
        return None

    @classmethod
    def load(cls, path: Path) -> LoopRecord | None:
        """The record at ``path``; None when there is none; LoopRecordError when it cannot be
        read."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            why = os_error_text(exc) if isinstance(exc, OSError) else "it is not text"
            raise LoopRecordError(f"it cannot be read: {why}") from None
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise LoopRecordError(f"it is not JSON: {one_line(str(exc))}") from None
        except RecursionError:
            raise LoopRecordError("it is not JSON this tool wrote: nested too deep") from None
        return cls.from_mapping(raw)


def left_off(
    paths: SessionPaths, root: Path, phase: Phase, definition: str
) -> tuple[LoopRecord, FileSnapshot] | None:
    """The loop a killed run left for ``phase``, and its files from before the phase (its
    pre-images), if that loop still holds; None when none was left. LoopRecordError, one line,
    says why the phase starts over instead."""
    record = LoopRecord.load(paths.loop_record(phase.id))
    if record is None:
        return None
    if record.phase != phase.id:
        raise LoopRecordError(f"it was written for phase {record.phase!r}")
    if record.definition != definition:
        raise LoopRecordError(f"the phase changed since {record.point}")
    changed = record.changed(root, phase)
    if changed is not None:
        raise LoopRecordError(f"{changed} changed since {record.point}")
    if not phase.files.all():
        return record, FileSnapshot(root, ())
    try:
        before = FileSnapshot.load(root, paths.preimage(phase.id))
    except UnreadablePreimages:
        before = None
    if before is None or dict(before.contents).keys() != set(phase.files.all()):
        raise LoopRecordError("its files from before the phase (its pre-images) cannot be read")
    return record, before


def going_on(
    paths: SessionPaths,
    root: Path,
    phase: Phase,
    definition: str,
    why_not: Callable[[LoopRecord], str | None] | None,
) -> tuple[LoopRecord | None, FileSnapshot | None, str | None]:
    """What becomes of the loop a killed run left for ``phase`` in a run that runs it: the
    record and the pre-images it goes on with; or, when it starts over, the pre-images (if they
    can be read) and why. ``why_not`` says why a loop that holds cannot go on (no round left);
    None: the phase is not reviewed now. All None: no loop was left."""
    try:
        if why_not is None:
            if not paths.loop_record(phase.id).exists():
                return None, None, None
            raise LoopRecordError("it is not reviewed now")
        left = left_off(paths, root, phase, definition)
        if left is None:
            return None, None, None
        why = why_not(left[0])
        if why is None:
            return left[0], left[1], None
    except LoopRecordError as exc:
        why = str(exc)
    preimage = paths.preimage(phase.id)
    try:
        return None, FileSnapshot.load(root, preimage), why
    except UnreadablePreimages as exc:  # never saved over: its files stay as they are
        kept = set_aside(preimage, paths.kept_preimage(phase.id), exc)
        return None, None, f"{why}; {exc}, kept at {kept}"


def drop(path: Path) -> None:
    """A loop record gone, if the disk lets it: what is left is checked again before use."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
