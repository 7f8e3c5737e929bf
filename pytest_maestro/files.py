"""Declared files of a phase: their content before an attempt, what changed, and restoring them."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .plan import Phase


class OutsideRoot(ValueError):
    pass


def inside(root: Path, relative: str) -> Path:
    """``root / relative``, refusing a path that resolves (through symlinks too) outside root."""
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise OutsideRoot(f"declared file {relative!r} resolves outside the project root {root}")
    return path


@dataclass(frozen=True)
class FileSnapshot:
    """The content of a phase's declared files before an attempt (None: absent)."""

    root: Path
    contents: tuple[tuple[str, bytes | None], ...]

    @classmethod
    def take(cls, root: Path, phase: Phase) -> FileSnapshot:
        return cls(root, tuple((p, _read(inside(root, p))) for p in phase.files.all()))

    def changed(self, relative: str) -> bool:
        before = dict(self.contents).get(relative)
        return _read(inside(self.root, relative)) != before

    def restore(self) -> None:
        """Put declared files back as they were: what the attempt created goes away."""
        for relative, content in self.contents:
            path = inside(self.root, relative)
            if content is None:
                if path.is_file() or path.is_symlink():
                    path.unlink()
            elif _read(path) != content:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def file_problems(root: Path, phase: Phase, before: FileSnapshot) -> list[str]:
    """Declared ``create`` files must exist; declared ``modify`` files must have changed."""
    problems = [
        f"declared file {p!r} was not created"
        for p in phase.files.create
        if not inside(root, p).exists()
    ]
    dirty = git_dirty(root, phase.files.modify) if phase.files.modify else set()
    problems += [
        f"declared file {p!r} was not modified"
        for p in phase.files.modify
        if not before.changed(p) and p not in dirty and not inside(root, p).is_dir()
    ]
    problems += [
        f"declared file {p!r} was not deleted"
        for p in phase.files.delete
        if inside(root, p).exists()
    ]
    return problems


def git_dirty(root: Path, paths: tuple[str, ...]) -> set[str]:
    """Which of ``paths`` git reports as changed or new; empty when root is no git work tree.

    This lets a phase rerun after an earlier run already made its change count as modified.
    One call per path: porcelain output names paths from the repository's top, not from root.
    """
    return {path for path in paths if _git_status(root, path)}


def _git_status(root: Path, path: str) -> bool:
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all", "--", path],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def restore_from_git(root: Path, paths: tuple[str, ...]) -> list[str]:
    """Put back, from git's index, the files git knows; returns those it restored.

    Used for the declared files of a phase a killed run left half-done. Files git does not know
    are left alone: their earlier content (if any) is unknown, and they may be the user's.
    """
    restored = []
    for path in paths:
        known = _git(root, "ls-files", "--error-unmatch", "--", path)
        if known and _git(root, "checkout", "--", path):
            restored.append(path)
    return restored


def _git(root: Path, *args: str) -> bool:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
