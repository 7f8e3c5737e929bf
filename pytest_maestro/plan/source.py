"""A plan file's text, and the forms the readers parse it into, each computed once.

BOM, CRLF and the Markdown block structure (code fences, HTML comments, headings) are handled
here for every reader.
"""

from __future__ import annotations

import json
import re
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .blocks import Blocks, ListItem, parse_blocks
from .blocks import Line as Line  # re-exported: the readers name lines with it
from .errors import PlanError
from .front_matter import FrontMatter, split_front_matter

_HUGE_NUMBER = re.compile(r"\d{4000,}")


# Far above any real plan (the largest seen are well under 1 MB); a plan past it is refused
# rather than read into memory whole.
MAX_PLAN_BYTES = 8 * 1024 * 1024


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """A regular file's bytes, refusing what could block or exhaust memory: a FIFO, a device
    (``/dev/zero``), a socket, or a file over ``limit`` bytes."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise PlanError(f"{what} not found", path) from None
    except OSError as exc:
        raise PlanError(f"cannot read {what}: {exc.strerror}", path) from None
    if stat.S_ISDIR(info.st_mode):
        raise PlanError(f"is a directory, not a {what}", path)
    if not stat.S_ISREG(info.st_mode):
        raise PlanError(f"is not a regular file (a FIFO, device or socket): not a {what}", path)
    if info.st_size > limit:
        raise PlanError(
            f"is {info.st_size:,} bytes, too large: a {what} may have {limit // 1024 // 1024} MB",
            path,
        )
    try:
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise PlanError(f"cannot read {what}: {exc.strerror}", path) from None
    if len(raw) > limit:  # it grew while we looked
        raise PlanError(f"is over {limit:,} bytes, too large for a {what}", path)
    return raw


def read_text(path: Path) -> str:
    """The plan's text with a UTF-8 BOM removed and line endings normalised to ``\\n``."""
    raw = read_bounded(path, MAX_PLAN_BYTES, "plan file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PlanError("not UTF-8 text", path, line) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True)
class DecodedJson:
    """The text as JSON: the data, or the error that says why it is not JSON."""

    data: Any = None
    duplicate_keys: bool = False  # some object repeats a key (json.loads keeps the last)
    error: json.JSONDecodeError | None = None
    too_deep: bool = False  # nested deeper than the decoder's recursion allows

    @property
    def ok(self) -> bool:
        return self.error is None and not self.too_deep


@dataclass(frozen=True)
class Source:
    """One plan file, handed to every reader's ``detect`` and then to the chosen one's ``read``.

    Each parsed form (Markdown lines, JSON, YAML) is computed on first use and kept, so a file is
    parsed once however many readers look at it. Readers must not mutate what they are given.
    """

    path: Path
    text: str
    tag: str | None = None  # the Taskmaster tag to read (--maestro-tag)

    @classmethod
    def read(cls, path: Path, tag: str | None = None) -> Source:
        return cls(path, read_text(path), tag)

    @cached_property
    def normal_text(self) -> str:
        """The text without a BOM and with ``\\n`` line ends: what ``read_text`` gives already,
        for a Source built from other text."""
        return self.text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")

    @cached_property
    def blocks(self) -> Blocks:
        """The Markdown block structure, parsed once (the frontmatter, if any, left out)."""
        block = self.front_matter
        return parse_blocks(self.normal_text, block.closing_line if block is not None else 0)

    @property
    def lines(self) -> tuple[Line, ...]:
        """The Markdown lines, each flagged: literal text (code, HTML), or a heading."""
        return self.blocks.lines

    @property
    def list_items(self) -> tuple[ListItem, ...]:
        """The Markdown list items, in document order, with their nesting."""
        return self.blocks.items

    @cached_property
    def front_matter(self) -> FrontMatter | None:
        """The ``---`` block that opens a Markdown document, if it has one."""
        return split_front_matter(self.normal_text)

    @cached_property
    def looks_like_json(self) -> bool:
        return self.text.lstrip().startswith(("{", "["))

    @cached_property
    def json(self) -> DecodedJson:
        """The text decoded as JSON (whatever it looks like: a ``.json`` file is JSON)."""
        return decode_json(self.text)

    @property
    def json_data(self) -> Any:
        """The JSON data when the text looks like JSON and is, else None: for ``detect``."""
        return self.json.data if self.looks_like_json and self.json.ok else None

    @cached_property
    def yaml_data(self) -> Any:
        """The YAML data, or None when the text is not YAML: for ``detect``."""
        # Imported here: only a document that neither its name nor its first character shows
        # to be JSON, YAML or Markdown needs PyYAML to be told.
        import yaml

        from .yaml_loader import FastSafeLoader

        try:
            return yaml.load(self.text, FastSafeLoader)
        except (yaml.YAMLError, RecursionError):
            return None


def decode_json(text: str) -> DecodedJson:
    duplicates = False

    def mapping(members: list[tuple[str, Any]]) -> dict[str, Any]:
        # json.loads keeps the last of duplicate keys silently; counting them here is cheap, and
        # only a document that has one pays for the scan that says where.
        nonlocal duplicates
        result = dict(members)
        duplicates = duplicates or len(result) != len(members)
        return result

    try:
        data = json.loads(text, object_pairs_hook=mapping)
    except json.JSONDecodeError as exc:
        return DecodedJson(error=exc)
    except ValueError as exc:  # an integer of thousands of digits: Python's own limit
        found = _HUGE_NUMBER.search(text)
        at = found.start() if found else 0
        why = str(exc).split(";")[0]
        return DecodedJson(error=json.JSONDecodeError(f"number too long ({why})", text, at))
    except RecursionError:
        return DecodedJson(too_deep=True)
    return DecodedJson(data, duplicates)
