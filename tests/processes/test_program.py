"""The file a command's name runs: found on its PATH once, as ``execvpe`` finds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_maestro.processes.process import program, run_process

pytestmark = pytest.mark.skipif(os.name != "posix", reason="PATH lookup as POSIX does it")


def _tool(folder: Path, says: str, mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "tool"
    tool.write_text(f"#!/bin/sh\necho {says}\n")
    tool.chmod(mode)
    return tool


def _path(*folders: Path) -> str:
    return os.pathsep.join(str(folder) for folder in folders)


def test_the_first_executable_file_of_that_name_on_the_path(tmp_path: Path) -> None:
    """As the new process would: a file it may not run and a folder of that name are passed
    over, as ``execve`` failing on them would be."""
    _tool(tmp_path / "a", "a", mode=0o644)
    (tmp_path / "b" / "tool").mkdir(parents=True)
    found = _tool(tmp_path / "c", "c")
    _tool(tmp_path / "d", "d")
    path = _path(*(tmp_path / name for name in "abcd"))
    assert program("tool", path) == str(found)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("tool", "relative/bin"),  # resolves in the command's directory, not ours
        ("tool", ""),
        ("./tool", "{abs}"),  # a name with a slash is a path already
        ("absent-tool", "{abs}"),
    ],
)
def test_none_where_popen_must_look_itself(tmp_path: Path, name: str, path: str) -> None:
    _tool(tmp_path / "bin", "bin")
    path = path.replace("{abs}", str(tmp_path / "bin"))
    assert program(name, path) is None
    assert program("tool", f"{tmp_path / 'bin'}{os.pathsep}{os.pathsep}/usr/bin") is None


def test_a_file_gone_since_it_was_found_is_looked_for_again(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _tool(first, "from-first")
    env = {**os.environ, "PATH": _path(first, second, Path("/usr/bin"), Path("/bin"))}
    log = tmp_path / "log"
    assert run_process(["tool"], cwd=tmp_path, env=env, timeout=30, log=log).ok
    (first / "tool").unlink()
    _tool(second, "from-second")
    result = run_process(["tool"], cwd=tmp_path, env=env, timeout=30, log=log)
    assert result.ok
    assert log.read_text().split() == ["from-first", "from-second"]


def test_a_file_that_is_no_program_is_passed_over_as_the_new_process_would(
    tmp_path: Path,
) -> None:
    """Executable but no program (no ``#!``, no binary): ``execve`` fails with ENOEXEC, and the
    new process went on to the next entry of the PATH; so does a command started from it."""
    garbage = tmp_path / "first" / "tool"
    garbage.parent.mkdir()
    garbage.write_bytes(b"\x00\x01 not a program\n")
    garbage.chmod(0o755)
    second = tmp_path / "second"
    _tool(second, "from-second")
    env = {**os.environ, "PATH": _path(garbage.parent, second, Path("/usr/bin"), Path("/bin"))}
    log = tmp_path / "log"
    assert run_process(["tool"], cwd=tmp_path, env=env, timeout=30, log=log).ok
    assert log.read_text().split() == ["from-second"]
