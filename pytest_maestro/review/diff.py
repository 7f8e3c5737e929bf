"""An attempt's change, as a unified diff for its reviewer: each declared file against its
content before the phase (the pre-images' content, taken in the root the phase runs in: its
worktree when isolated), then the files it changed outside the declared ones.

Of a file changed outside the declared ones no earlier content was kept: in a git work tree it
is shown against git's HEAD (a new file against nothing), which includes any edit the user had
not committed; elsewhere it is only named.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from ..files.declared import FileSnapshot, OutsideRoot, inside
from ..files.putback import read
from ..git import GitError, run_git

FILE_LIMIT = 200_000  # characters of one file's diff; the rest is cut, with a line that says so


def attempt_diff(root: Path, before: FileSnapshot, outside: Sequence[str]) -> str:
    """The declared files' changes since ``before``, then those of ``outside``."""
    parts = [
        _file_diff(path, old, _now(root, path))
        for path, old in before.contents
        if _now(root, path) != old
    ]
    parts += [_outside_diff(root, path) for path in outside]
    return "".join(part for part in parts if part)


def _now(root: Path, relative: str) -> bytes | None:
    try:
        return read(inside(root, relative))
    except (OutsideRoot, OSError):
        return None


def _file_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    old_text, new_text = _text(old), _text(new)
    if old_text is None or new_text is None:
        sizes = f"{_size(old)} -> {_size(new)}"
        return f"Binary file {path} changed ({sizes})\n"
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        "/dev/null" if old is None else f"a/{path}",
        "/dev/null" if new is None else f"b/{path}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > FILE_LIMIT:
        cut = text[:FILE_LIMIT].rsplit("\n", 1)[0]
        return f"{cut}\n[... {len(text) - len(cut)} more characters of {path}'s diff cut ...]\n"
    return text


def _text(content: bytes | None) -> str | None:
    """The content as text; None for one that is not (a NUL, or not UTF-8)."""
    if content is None:
        return ""
    if b"\0" in content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _size(content: bytes | None) -> str:
    return "absent" if content is None else f"{len(content)} bytes"


def _outside_diff(root: Path, path: str) -> str:
    """A file changed outside the declared ones, against git's HEAD where it has one."""
    head = f"# {path}: changed outside the declared files\n"
    try:
        tracked = bool(run_git(root, "ls-files", "-z", "--", path))
        if tracked:
            return head + run_git(root, "diff", "--no-color", "HEAD", "--", path).decode(
                "utf-8", "replace"
            )
    except GitError:
        return head
    return head + _file_diff(path, None, _now(root, path))
