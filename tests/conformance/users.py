"""An ordinary user to run an agent CLI as, when the suite runs as root (as CI does).

claude refuses ``--permission-mode bypassPermissions`` as root unless ``IS_SANDBOX=1``; an ordinary
user needs neither. To check that case from a root process, the CLI, and only the CLI, runs as a
system user made for it: ``claude`` on PATH is then a wrapper that drops to that user with
``setpriv`` and executes the real binary with the argv, environment, working directory and
standard streams the runtime gave it.

Why not the whole ``pytest --maestro`` as that user: its interpreter, virtual environment and
checkout may lie where no other user can read them (under root's home, mode 0700, as a pyenv's
Python does), and making them readable means copying an interpreter or changing the modes of
directories this suite does not own. What depends on the user is the CLI's own check; the
runtime passes the same argv and environment either way. So the CLI's binary (one file) is linked,
or else copied, into a directory of its own that the user can reach, beside the project root and
the home the CLI gets, which are the user's.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

NAME = "maestro-realcli"


def mapped_ids(uid_map: str) -> list[range]:
    """The ids a user namespace maps, from ``/proc/<pid>/uid_map`` (or ``gid_map``)."""
    found = []
    for line in uid_map.splitlines():
        inside, _, count = line.split()
        found.append(range(int(inside), int(inside) + int(count)))
    return found


def why_not(uid_map: str) -> str | None:
    """Why this root process cannot run a command as another user: the reason, or None when it
    can (``uid_map``: its user namespace's)."""
    if shutil.which("setpriv") is None:
        return "no setpriv (util-linux) here to drop to another user with"
    if sum(len(ids) for ids in mapped_ids(uid_map)) <= 1:
        return (
            "this user namespace maps root alone (unshare -r): no other user exists in it; as root,"
            " run the suite in a network namespace alone (unshare -n), as .ci/run does"
        )
    return None


def ordinary(maps: Path = Path("/proc/self")) -> pwd.struct_passwd | str:
    """The user to run a CLI as, created when missing; else why this process cannot (``maps``:
    where its user namespace's ``uid_map`` and ``gid_map`` are)."""
    if os.geteuid() != 0:
        return "not root: no user to create or drop to (every other test runs claude as this one)"
    uid_map, gid_map = ((maps / name).read_text() for name in ("uid_map", "gid_map"))
    reason = why_not(uid_map)
    user = _user() if reason is None else reason
    if isinstance(user, str):
        return user
    return unmapped(user, uid_map, gid_map) or user


def _user() -> pwd.struct_passwd | str:
    """The system user ``NAME``, created when missing (no home, no login); else why not."""
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(NAME)
    useradd = shutil.which("useradd")
    if useradd is None:
        return f"no user {NAME} and no useradd to create it"
    done = subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/bin/false", NAME],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    try:  # another run may have made it meanwhile
        return pwd.getpwnam(NAME)
    except KeyError:
        return f"useradd could not create {NAME}: {done.stderr.strip() or done.returncode}"


def unmapped(user: pwd.struct_passwd, uid_map: str, gid_map: str) -> str | None:
    """Why ``user`` cannot be taken on in this user namespace, or None."""
    for what, value, ids in (("uid", user.pw_uid, uid_map), ("gid", user.pw_gid, gid_map)):
        if not any(value in mapped for mapped in mapped_ids(ids)):
            return f"this user namespace does not map {NAME}'s {what} {value}"
    return None


@contextlib.contextmanager
def place(user: pwd.struct_passwd) -> Iterator[Path]:
    """A directory every user can reach (``project`` and ``home`` in it are ``user``'s), removed
    after."""
    top = Path(tempfile.mkdtemp(prefix="maestro-realcli-"))
    try:
        top.chmod(0o755)
        for name in ("project", "home"):
            (top / name).mkdir()
            os.chown(top / name, user.pw_uid, user.pw_gid)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def give(tree: Path, user: pwd.struct_passwd) -> None:
    """``tree`` and everything in it made ``user``'s."""
    for path in [tree, *tree.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def wrapper(cli: str, real: str, user: pwd.struct_passwd, top: Path) -> Path:
    """A directory for the front of PATH whose ``cli`` runs ``real`` as ``user``: ``real`` linked
    to where ``user`` can execute it, else run where it is if ``user`` can, else copied (a CLI is
    hundreds of MB). It refuses to run with ``IS_SANDBOX`` set, which this case is without."""
    bin_dir = top / "bin"
    bin_dir.mkdir()
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    drop = [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--"]
    binary = bin_dir / f"{cli}.real"
    try:
        os.link(Path(real).resolve(), binary)
    except OSError:  # another file system: the binary where it is, if the user can run it there
        reachable = subprocess.run([*drop, "test", "-x", real], check=False).returncode == 0
        binary = Path(real) if reachable else Path(shutil.copy2(Path(real).resolve(), binary))
    script = bin_dir / cli
    refuse = 'echo "IS_SANDBOX is set: not an ordinary run" >&2; exit 97'
    script.write_text(
        f'#!/bin/sh\n[ -z "${{IS_SANDBOX+set}}" ] || {{ {refuse}; }}\n'
        f'exec {shlex.join([*drop, str(binary)])} "$@"\n'
    )
    script.chmod(0o755)
    return bin_dir
