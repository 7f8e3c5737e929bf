"""One name per declared file, so that two spellings of it are one file to the scheduler.

Lexical forms (``./a``, ``a/``, ``a//b``, ``a/./b``) are made one when the plan is validated;
symlinks inside the project root are resolved once the root is known (``real_paths``); and a
declared folder is the key of every declared path inside it (``claim_keys``), so that a phase
writing ``src`` and one writing ``src/x.py`` conflict. See docs/architecture.md, "The layers".
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
from collections.abc import Iterable, Mapping
from pathlib import Path

from .model import Files, Phase


def normal(path: str) -> str:
    """``path`` without ``.`` segments, repeated or trailing slashes. Plans refuse ``..`` before
    this runs, so no segment is dropped that could change which file is meant."""
    if "//" in path or path.endswith(("/", "/.")) or path == "." or "./" in path:
        return posixpath.normpath(path)
    return path


def normal_phase(phase: Phase) -> Phase:
    """``phase`` with its declared paths in normal form, each listed once per list."""
    files = phase.files
    lists = (files.create, files.modify, files.delete, phase.reads)
    create, modify, delete, reads = (_normal_all(paths) for paths in lists)
    if (create, modify, delete, reads) == lists:
        return phase  # the common case: a plan already written one way
    return dataclasses.replace(phase, files=Files(create, modify, delete), reads=reads)


def _normal_all(paths: tuple[str, ...]) -> tuple[str, ...]:
    normalised = tuple(dict.fromkeys(normal(path) for path in paths))
    return paths if normalised == paths else normalised


def real_paths(root: Path, paths: Iterable[str]) -> dict[str, str]:
    """The declared paths that lead, through a symlink, to another path inside ``root``: each
    mapped to that path. One ``realpath`` per folder, one ``lstat`` per path: plans are big."""
    real_root = os.path.realpath(root)
    folders: dict[str, str] = {}
    found: dict[str, str] = {}
    for path in set(paths):
        try:
            relative = _real(real_root, path, folders)
        except (OSError, ValueError):  # a name no file system takes: no file to share
            continue
        if relative != path and relative != ".." and not relative.startswith("../"):
            found[path] = relative
    return found


def _real(real_root: str, path: str, folders: dict[str, str]) -> str:
    folder, _, name = path.rpartition("/")
    base = folders.get(folder)
    if base is None:
        base = folders[folder] = os.path.realpath(os.path.join(real_root, folder))
    full = os.path.join(base, name)
    if os.path.islink(full):
        full = os.path.realpath(full)
    return os.path.relpath(full, real_root)


def claim_keys(paths: Iterable[str], aliases: Mapping[str, str]) -> dict[str, str]:
    """Each path (through ``aliases``) mapped to the outermost declared path that holds it:
    itself, or a folder declared too. Two paths conflict exactly when their keys are equal."""
    real = {path: aliases.get(path, path) for path in paths}
    declared = set(real.values())
    if "." in declared:  # the whole root
        return dict.fromkeys(real, ".")
    keys: dict[str, str] = {}
    for path, target in real.items():
        key, cut = target, target.find("/")
        while cut != -1:
            if target[:cut] in declared:
                key = target[:cut]
                break
            cut = target.find("/", cut + 1)
        keys[path] = key
    return keys
