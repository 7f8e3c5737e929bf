"""A command's standard output and standard error kept apart, and together in its log.

An agent CLI prints its reply on stdout and its diagnostics on stderr: read mixed, warnings break
the reply (gemini) and the CLI's own reason for failing is lost among JSON (claude). ``Tee`` copies
each stream, as it comes, to the log (so the log keeps both, in the order they came) and to a file
of its own.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO

# How long the copy goes on after the command's group ended: a process that escaped the group
# and holds a pipe open must not keep the phase waiting.
DRAIN_SECONDS = 1.0
CHUNK = 64 * 1024
WATCHED = 4096  # the end of stdout a watch sees with each new chunk: lines cut between reads
LINE_LIMIT = 1024 * 1024  # a longer line of stdout is copied on, not read line by line


class Tee:
    """Copies each of ``streams`` (a pipe and the files it goes to) on a thread of its own.

    ``watch``, given, reads the first stream as it comes; the first time it says the command
    cannot get anywhere (a CLI reconnecting without a network), ``stop`` is called to end it.
    ``lines``, given, is called with each whole line of the first stream, after the line went to
    its sinks: that stream is then copied a whole line at a time, so that what ``lines`` writes to
    the log between two lines lands between them.
    """

    def __init__(
        self,
        streams: Sequence[tuple[IO[bytes], Sequence[IO[bytes]]]],
        watch: Callable[[bytes], bool] | None = None,
        stop: Callable[[], None] | None = None,
        lines: Callable[[bytes], None] | None = None,
    ) -> None:
        self.streams = [(pipe, list(sinks)) for pipe, sinks in streams]
        self.watch, self.stop, self.seen = watch, stop, b""
        self.lines, self.partial = lines, b""  # the first stream's line begun, not ended
        self.by_line = lines is not None  # so still when a failed ``lines`` was set aside
        self.watched = False  # the watch stopped the command
        self.ended = threading.Event()
        self.error: OSError | None = None  # the first write that failed (a full disk)
        self.thread = threading.Thread(target=self._copy, name="maestro-tee", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        with selectors.DefaultSelector() as selector:
            for pipe, sinks in self.streams:
                selector.register(pipe.fileno(), selectors.EVENT_READ, sinks)
            deadline: float | None = None
            while selector.get_map():
                if self.ended.is_set() and deadline is None:
                    deadline = time.monotonic() + DRAIN_SECONDS
                if deadline is not None and time.monotonic() > deadline:
                    break
                for key, _ in selector.select(timeout=0.1):
                    self._move(selector, key)
        if self.partial:  # a last line without its newline
            self._write(self.streams[0][1], self.partial)
            self._read(self.partial)
        for pipe, _ in self.streams:
            with contextlib.suppress(OSError):
                pipe.close()

    def _move(self, selector: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
        data = os.read(key.fd, CHUNK)
        if not data:
            selector.unregister(key.fd)
            return
        first = key.fd == self.streams[0][0].fileno()
        if self.watch is not None and first:
            self._look(data)
        if self.by_line and first:
            self._lines(key.data, data)
        else:
            self._write(key.data, data)

    def _write(self, sinks: list[IO[bytes]], data: bytes) -> None:
        for sink in list(sinks):
            try:
                sink.write(data)
            except OSError as exc:  # keep reading, so the command never blocks on a full pipe
                self.error = self.error or exc
                sinks.remove(sink)

    def _lines(self, sinks: list[IO[bytes]], data: bytes) -> None:
        ended = (self.partial + data).split(b"\n")
        self.partial = ended.pop()
        for line in ended:
            self._write(sinks, line + b"\n")
            self._read(line + b"\n")
        if len(self.partial) > LINE_LIMIT:  # a line too long to read is copied on, unread
            self._write(sinks, self.partial)
            self.partial = b""

    def _read(self, line: bytes) -> None:
        """``lines`` on one line: should it fail (the log on a full disk), the copy goes on
        without it, as without a reader."""
        if self.lines is None:
            return
        try:
            self.lines(line)
        except Exception as exc:  # the copy must go on, whatever the hook did
            self.lines = None
            if isinstance(exc, OSError):
                self.error = self.error or exc

    def _look(self, data: bytes) -> None:
        self.seen = (self.seen + data)[-WATCHED:]
        if not self.watched and self.watch is not None and self.watch(self.seen):
            self.watched = True
            if self.stop is not None:
                self.stop()

    def finish(self) -> None:
        """Wait for what is left in the pipes (at most ``DRAIN_SECONDS`` more), then raise the
        first failed write, if any."""
        self.ended.set()
        self.thread.join()
        if self.error is not None:
            raise self.error
