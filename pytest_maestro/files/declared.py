"""Declared files of a phase: their content before an attempt, what changed, and restoring them;
removing a tree that has read-only parts."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import stat
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from .. import git
from ..plan import Phase
from ..state.journal import open_new
from ..texts import one_line
from ..texts import shown as shown  # where the modules that show paths have it from
from .putback import Restored, RestoreError, keep_aside, put_back, read


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
        return cls.of(root, phase.files.all())

    @classmethod
    def of(cls, root: Path, paths: tuple[str, ...] | list[str]) -> FileSnapshot:
        return cls(root, tuple((p, read(inside(root, p))) for p in paths))

    def changed(self, relative: str) -> bool:
        before = dict(self.contents).get(relative)
        return read(inside(self.root, relative)) != before

    def restore(self, keep: Path) -> list[Restored]:
        """Put the declared files back as they were, and only those, all or none (RestoreError).
        What a restore replaces is not thrown away: it is copied under ``keep`` first, at the
        same relative path; ``keep`` must be a name no other restore uses
        (``SessionPaths.replaced``)."""
        return put_back(self.root, self.contents, keep)

    def save(self, archive: Path) -> None:
        """The pre-images on disk (one tar, synced), before the phase changes anything: a killed
        run's next run restores from them, never from git, which would lose the user's work."""
        manifest = {relative: content is not None for relative, content in self.contents}
        archive.parent.mkdir(parents=True, exist_ok=True)
        tmp = archive.with_name(archive.name + ".tmp")
        with open_new(tmp) as handle:
            with tarfile.open(fileobj=handle, mode="w") as tar:
                _add(tar, "manifest.json", json.dumps(manifest).encode())
                for index, (_, content) in enumerate(self.contents):
                    if content is not None:
                        _add(tar, f"files/{index}", content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, archive)

    @classmethod
    def load(cls, root: Path, archive: Path) -> FileSnapshot | None:
        """The pre-images saved in ``archive``; None when there are none. UnreadablePreimages
        when the file is there but holds no pre-images this tool wrote (damaged)."""
        try:
            with tarfile.open(archive) as tar:
                manifest = json.loads(_member(tar, "manifest.json"))
                if not all(type(p) is str and type(b) is bool for p, b in manifest.items()):
                    raise ValueError("its manifest is not one this tool wrote")
                contents = tuple(
                    (relative, _member(tar, f"files/{index}") if present else None)
                    for index, (relative, present) in enumerate(manifest.items())
                )
        except FileNotFoundError:
            return None
        except OSError as exc:  # the disk, not the file: the next run tries again
            raise RestoreError(f"its pre-images {archive.name} cannot be read now: {exc}") from None
        except (tarfile.TarError, KeyError, ValueError, AttributeError, RecursionError) as exc:
            why = one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 120)
            raise UnreadablePreimages(
                f"its pre-images {archive.name} cannot be read ({why})"
            ) from None
        return cls(root, contents)


class UnreadablePreimages(RestoreError):
    """Pre-images on disk that are not what this tool wrote (a damaged tar or manifest): nothing
    can be put back from them, now or later. A read the disk refused is a plain RestoreError."""


def set_aside(archive: Path, kept: Path, error: UnreadablePreimages) -> Path:
    """Damaged pre-images moved to ``kept`` (a name no run reuses), where they are. RestoreError,
    with nothing moved, when they cannot be: never saved over or deleted."""
    moved = keep_aside(archive, kept)
    if moved is None:
        raise RestoreError(f"{error}, and cannot be moved aside to {kept.parent}")
    return moved


def left_as_they_are(
    files: tuple[str, ...], archive: Path, kept: Path, error: UnreadablePreimages
) -> list[Restored]:
    """A phase's declared files left as they are, its pre-images damaged and set aside
    (``set_aside``): a line for each file saying so."""
    moved = set_aside(archive, kept, error)
    return [Restored(relative, moved, left=str(error)) for relative in files]


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    handle = tar.extractfile(name)
    if handle is None:
        raise KeyError(name)
    return handle.read()


def file_problems(root: Path, phase: Phase, before: FileSnapshot) -> list[str]:
    """Declared ``create`` files must exist; declared ``modify`` files must have changed; and
    none may now lead out of the root (a folder the attempt replaced by a symlink)."""
    out = {p for p in phase.files.all() if not stays_inside(root, p)}
    problems = [f"declared file {p!r} now leads outside the project root" for p in sorted(out)]
    files = phase.files
    create, modify = (tuple(p for p in ps if p not in out) for ps in (files.create, files.modify))
    problems += [f"declared file {p!r} was not created" for p in create if not (root / p).exists()]
    dirty = git.dirty(root, modify)
    problems += [
        f"declared file {p!r} was not modified"
        for p in modify
        if not before.changed(p) and p not in dirty and not (root / p).is_dir()
    ]
    problems += [
        f"declared file {p!r} was not deleted"
        for p in phase.files.delete
        if p not in out and (root / p).exists()
    ]
    return problems


def stays_inside(root: Path, relative: str) -> bool:
    """Whether the path stays in the root (``inside`` without the exception)."""
    try:
        inside(root, relative)
    except OutsideRoot:
        return False
    return True


def remove_tree(path: Path) -> None:
    """Remove a directory tree, read-only parts included (an agent's caches may be)."""

    def writable(function: object, name: str, _info: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name) or ".", stat.S_IRWXU)
            if not os.path.islink(name):  # a link's target may be anything: never touch it
                os.chmod(name, stat.S_IRWXU)
            if os.path.isdir(name) and not os.path.islink(name):
                shutil.rmtree(name, ignore_errors=True)
            else:
                os.unlink(name)

    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif not path.exists():
        return
    elif sys.version_info >= (3, 12):  # onerror is deprecated there
        shutil.rmtree(path, onexc=writable)
    else:
        shutil.rmtree(path, onerror=writable)
