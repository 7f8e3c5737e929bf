"""The few git calls: which files changed, and committing a phase's declared files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TIMEOUT = 60.0


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def is_work_tree(root: Path) -> bool:
    done = _git(root, "rev-parse", "--is-inside-work-tree")
    return done is not None and done.returncode == 0 and done.stdout.strip() == "true"


def changed_files(root: Path) -> dict[str, tuple[int, int]] | None:
    """Files under ``root`` that differ from the index or are untracked (not ignored), with
    their (size, mtime) to tell a later change apart; None outside a git work tree."""
    done = _git(root, "ls-files", "-z", "--modified", "--deleted", "--others", "--exclude-standard")
    if done is None or done.returncode != 0:
        return None
    found: dict[str, tuple[int, int]] = {}
    for path in filter(None, done.stdout.split("\0")):
        try:
            stat = os.lstat(root / path)
            found[path] = (stat.st_size, stat.st_mtime_ns)
        except FileNotFoundError:
            found[path] = (-1, -1)  # deleted
    return found


def changed_since(
    root: Path, before: dict[str, tuple[int, int]], ignore: tuple[str, ...] = ()
) -> list[str]:
    """Files changed since ``before`` was taken, but for those under the ``ignore`` prefixes."""
    after = changed_files(root)
    if after is None:
        return []
    changed = {p for p, sig in after.items() if before.get(p) != sig}
    changed |= {p for p in before if p not in after}  # put back as it was in the index
    return sorted(p for p in changed if not p.startswith(ignore))


def commit(root: Path, paths: tuple[str, ...], message: str) -> str:
    """Commit exactly ``paths`` (created, modified or deleted) with ``message``, leaving the rest
    of the index as it is; what happened, in one line."""
    if not is_work_tree(root):
        return f"not committed: {root} is not a git work tree"
    tracked = _git(root, "ls-files", "-z", "--", *paths)
    known = set(filter(None, tracked.stdout.split("\0"))) if tracked else set()
    present = [p for p in paths if (root / p).exists() or p in known]
    if not present:
        return "not committed: none of its files exists"
    added = _git(root, "add", "-A", "--", *present)
    if added is None or added.returncode != 0:
        return f"not committed: git add failed: {_last(added)}"
    staged = _git(root, "diff", "--cached", "--quiet", "--", *present)
    if staged is not None and staged.returncode == 0:
        return "not committed: its files did not change"
    done = _git(root, "commit", "--quiet", "-m", message, "--", *present)
    if done is None or done.returncode != 0:
        return f"not committed: git commit failed: {_last(done)}"
    head = _git(root, "rev-parse", "--short", "HEAD")
    return f"committed {head.stdout.strip() if head else ''}".strip()


def _last(done: subprocess.CompletedProcess[str] | None) -> str:
    if done is None:
        return "git did not run"
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"
