"""Durable writes: atomic snapshot replacement, and the journal of changes since the snapshot.

Each journal line is one JSON object with a ``seq`` above the snapshot's ``journal_seq``; entries at
or below it are already in the snapshot (a crash between writing the snapshot and emptying the
journal), and a line a kill cut short is skipped. Zero bytes written ahead follow the last line.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from .document import parse_session
from .fields import FieldError, Fields
from .model import (
    SESSION_DEFAULTS,
    SESSION_FIELDS,
    PhaseError,
    PhaseState,
    SessionCorrupt,
    SessionDoc,
    Status,
    Tokens,
    as_time,
    evolve,
    now,
)


def fsync_dir(path: Path) -> None:
    if os.name == "nt":  # Windows cannot open a directory; NTFS journals the rename itself
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_new(path: Path) -> BinaryIO:
    """``path`` made anew for writing: whatever was there (a file a crash left half-written, a
    link planted there) is removed first, never written through."""
    path.unlink(missing_ok=True)
    return open(path, "xb")


def atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    """Replace ``path`` with ``text``: readers see the old file or the new one, never a mix.
    The new file's permissions are ``mode`` when given, else 0600."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if mode is not None:
            os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", "replace"))  # a lone surrogate: a file name's byte
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


# fdatasync flushes the data and the size an append changed, without the rest of the inode.
_sync_data = getattr(os, "fdatasync", os.fsync)
# Zeros written ahead of the journal's last line: an append that overwrites them leaves the file's
# size alone, so syncing it flushes the data without a file-system journal commit (on ext4 about
# 0.1 ms instead of 3). Writing more zeros, every so many appends, costs one such commit.
_AHEAD = 256 * 1024
# One encoder for every line: ``json.dumps`` with any option makes a new one at each call.
_LINE = json.JSONEncoder(separators=(",", ":")).encode


class Journal:
    """Append-only JSON lines, then zeros. An append is on disk when it returns, unless it is not
    ``durable``: then it is on disk with the next durable append (one sync for both), or ``sync``.
    """

    def __init__(self, path: Path) -> None:
        existed = path.exists()
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0)
        self._fd = os.open(path, flags, 0o644)
        if not existed:
            fsync_dir(path.parent)
        data = path.read_bytes() if existed else b""
        lines = data.rstrip(b"\0")
        self._size = len(data)  # of the file: lines, then zeros
        self._end = len(lines)  # where the next line goes
        self._torn = bool(lines) and not lines.endswith(b"\n")  # a line a kill cut short
        self._unsynced = False
        os.lseek(self._fd, self._end, os.SEEK_SET)

    def append(self, entry: dict[str, Any], *, durable: bool = True) -> None:
        line = _LINE(entry) + "\n"
        data = (("\n" if self._torn else "") + line).encode()
        self._torn = False
        end = self._end + len(data)
        self._write(data)  # on a full disk this raises, and the line is not taken
        if end > self._size:
            self._size = end
            # Space ahead saves syncs, nothing more: a disk too full for it still takes lines.
            with contextlib.suppress(OSError):
                self._write(bytes(_AHEAD))
                self._size = end + _AHEAD
            os.lseek(self._fd, end, os.SEEK_SET)  # the next line overwrites the zeros
        self._end = end
        self._unsynced = True
        if durable:
            self.sync()

    def sync(self) -> None:
        """Put on disk what appends that were not durable wrote."""
        if self._unsynced:
            _sync_data(self._fd)
            self._unsynced = False

    def truncate(self) -> None:
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self._size = self._end = 0
        self._torn = False
        _sync_data(self._fd)
        self._unsynced = False

    def close(self) -> None:
        os.close(self._fd)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]


def read_journal(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The journal's entries, and how many lines were unreadable (a write torn by a kill)."""
    try:
        data = path.read_bytes().rstrip(b"\0")
    except FileNotFoundError:
        return [], 0
    entries: list[dict[str, Any]] = []
    torn = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            torn += 1
            continue
        if isinstance(entry, dict) and isinstance(entry.get("seq"), int):
            entries.append(entry)
        else:
            torn += 1
    return entries, torn


def read_session(path: Path) -> SessionDoc:
    """Read a session file (ours or Maestro's) and replay the journal beside it, if any.

    Safe beside a run that writes them: the journal is read first, so a fold that empties it in
    between has already written a snapshot holding what it emptied.
    """
    journal = path.with_suffix(".journal")
    entries = read_journal(journal)[0]
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SessionCorrupt(f"{path}: not UTF-8 text") from None
    try:
        doc = parse_session(text, str(path))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a field of a wrong type
        raise SessionCorrupt(f"{path}: not a session this tool can read ({_why(exc)})") from None
    _replay(doc, journal, entries)
    return doc


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if isinstance(exc, KeyError) else text


def replay(doc: SessionDoc, journal: Path) -> None:
    """Apply the journal's entries that the snapshot does not hold yet."""
    _replay(doc, journal, read_journal(journal)[0])


def _replay(doc: SessionDoc, journal: Path, entries: list[dict[str, Any]]) -> None:
    for entry in entries:
        if entry["seq"] > doc.journal_seq:
            try:
                apply_entry(doc, entry)
            except FieldError as exc:
                raise SessionCorrupt(f"{journal}: entry {entry['seq']}: {exc}") from None
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise SessionCorrupt(
                    f"{journal}: entry {entry['seq']} is not a change this tool wrote ({_why(exc)})"
                ) from None


def reset_phase(state: PhaseState, reason: str, at: str) -> PhaseState:
    """Back to pending; errors and tokens spent stay as history, with the reason appended."""
    note = PhaseError(
        state.agents[0] if state.agents else "", at, "reset", reason, "reset to pending"
    )
    return PhaseState(
        id=state.id,
        name=state.name,
        agents=state.agents,
        parallel=state.parallel,
        blocked_by=state.blocked_by,
        errors=(*state.errors, note),
        definition=state.definition,
        tokens=state.tokens,
    )


def apply_entry(doc: SessionDoc, entry: Mapping[str, Any]) -> None:
    """Apply one journal entry; entries were validated when they were written."""
    op, pid, at = entry.get("op"), entry.get("phase"), str(entry.get("at") or now())
    if op == "record" and pid in doc.phases:
        _apply_record(doc, doc.phases[pid], entry)
    elif op == "reset" and pid in doc.phases:
        doc.phases[pid] = reset_phase(doc.phases[pid], str(entry.get("reason") or ""), at)
    elif op == "stop":
        doc.status, doc.stop_reason = "stopped", str(entry.get("reason") or "")
    elif op == "final":
        doc.final_review = dict(Fields(entry).mapping("record")) or None
        if "tokens" in entry:
            spent = Tokens.from_mapping(Fields(entry).mapping("tokens"), "tokens")
            who = Fields(entry).text("agent") or "default"
            doc.tokens += spent
            doc.by_agent[who] = doc.by_agent.get(who, Tokens()) + spent
    elif op == "session":  # read as the snapshot reads them: what one takes, the other does
        fields = Fields(Fields(entry).mapping("fields"), "fields")
        for key in SESSION_FIELDS & fields.raw.keys():
            if key == "current_batch":
                setattr(doc, key, fields.raw[key])
            else:
                setattr(doc, key, fields.text(key) or SESSION_DEFAULTS[key])
    doc.updated = at
    doc.journal_seq = max(doc.journal_seq, Fields(entry).count("seq"))


_NEW_RUN: dict[str, Any] = {
    "completed": None,
    "result": None,
    "worker": None,
    "files_created": (),
    "files_modified": (),
    "files_deleted": (),
    "unverified": False,
    "review": None,
}


# Every transition is checked against them: listed once, not at each record.
_STATUSES = tuple(s.value for s in Status)
_STATUS_OF = {s.value: s for s in Status}  # an Enum's call costs a microsecond


def _apply_record(doc: SessionDoc, old: PhaseState, entry: Mapping[str, Any]) -> None:
    """FieldError names a field of the entry that is not what this tool writes."""
    status = _STATUS_OF[Fields(entry).choice("status", _STATUSES)]
    facts = Fields(Fields(entry).mapping("facts"))
    changes: dict[str, Any] = {"status": status}
    if status is Status.IN_PROGRESS and old.status is not Status.IN_PROGRESS:
        # A new run of the phase: what the last run produced no longer describes it.
        changes.update(_NEW_RUN, downstream_context={})
        doc.current_phase = old.id
    for key in ("started", "completed"):
        if key in facts.raw:
            changes[key] = as_time(facts.scalar(key))
    for key in ("worker", "result"):
        if key in facts.raw:
            changes[key] = facts.text(key)
    if "attempts" in facts.raw:
        changes["attempts"] = facts.count("attempts")
    if "unverified" in facts.raw:
        changes["unverified"] = facts.raw["unverified"] is True
    if "review" in facts.raw:
        changes["review"] = dict(facts.mapping("review")) or None
    for key in ("files_created", "files_modified", "files_deleted"):
        if key in facts.raw:
            known = changes.get(key, getattr(old, key))
            changes[key] = tuple(dict.fromkeys((*known, *facts.texts(key))))
    if "errors" in facts.raw:
        new = (
            PhaseError.from_mapping(e, f"error {n}") for n, e in enumerate(facts.items("errors"))
        )
        changes["errors"] = old.errors + tuple(new)
    if "downstream_context" in facts.raw:
        changes["downstream_context"] = dict(facts.mapping("downstream_context"))
    agent = facts.text("agent")
    if agent and agent not in old.agents:
        changes["agents"] = (*old.agents, agent)
    if "tokens" in facts.raw:
        spent = Tokens.from_mapping(facts.mapping("tokens"), "tokens")
        who = agent or (old.agents[0] if old.agents else "default")
        changes["tokens"] = old.tokens + spent
        doc.tokens += spent
        doc.by_agent[who] = doc.by_agent.get(who, Tokens()) + spent
    doc.phases[old.id] = evolve(old, changes)
