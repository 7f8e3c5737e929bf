"""The few git calls: which files changed, committing a phase's declared files, and the plumbing
of isolated phases (snapshots through a temporary index, trees, refs). Every call goes through
``run_git``: one convention, a ``GitError`` naming the command and git's reason when it fails."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

TIMEOUT = 60.0
ARGS_AT_ONCE = 256 * 1024  # bytes of paths on one command line: well below 2 MB (Linux)


class GitError(Exception):
    """A git command did not run or failed: ``git <command>: <reason>``, the reason its last
    line of error output."""

    def __init__(self, command: str, reason: str) -> None:
        super().__init__(f"git {command}: {reason}")
        self.reason = reason


def run_git(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
) -> bytes:
    """``git args`` in ``cwd``, its standard output; GitError when it fails."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            timeout=TIMEOUT,
            env={**os.environ, **env} if env else None,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(_command(args), str(exc)) from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(_command(args), lines[-1] if lines else f"exit {done.returncode}")
    return done.stdout


def _command(args: tuple[str, ...]) -> str:
    """The git command ``args`` run, past the global options (``-c x=y``, ``--literal-…``)."""
    words = iter(args)
    for word in words:
        if word == "-c":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return "?"


def succeeds(cwd: Path, *args: str, env: dict[str, str] | None = None) -> bool:
    """Whether ``git args`` exits 0: git's yes-or-no questions (``--quiet``, ``--is-ancestor``)."""
    try:
        run_git(cwd, *args, env=env)
    except GitError:
        return False
    return True


def git_text(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return run_git(cwd, *args, env=env).decode().strip()


def is_work_tree(root: Path) -> bool:
    try:
        return git_text(root, "rev-parse", "--is-inside-work-tree") == "true"
    except GitError:
        return False


def changed_files(root: Path) -> dict[str, tuple[int, int]] | None:
    """Files under ``root`` that differ from the index or are untracked (not ignored), with
    their (size, mtime) to tell a later change apart; None outside a git work tree."""
    try:
        out = run_git(
            root, "ls-files", "-z", "--modified", "--deleted", "--others", "--exclude-standard"
        )
    except GitError:
        return None
    found: dict[str, tuple[int, int]] = {}
    for path in _names(out):
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


def dirty(root: Path, paths: tuple[str, ...]) -> set[str]:
    """Which of ``paths`` (from ``root``; a folder stands for what is in it) git reports as
    changed, staged or new; empty when root is no git work tree."""
    if not paths:
        return set()
    try:
        prefix = git_text(root, "rev-parse", "--show-prefix")
        reported: set[str] = set()
        for some in _chunks(list(paths)):
            out = run_git(
                root,
                "--literal-pathspecs",
                "status",
                "--porcelain",
                "-z",
                "--untracked-files=all",
                "--",
                *some,
            )
            reported.update(_porcelain(_names(out)))
    except GitError:
        return set()
    # Porcelain names paths from the repository's top, not from root.
    names = {name[len(prefix) :] for name in reported if name.startswith(prefix)}
    return {path for path in paths if any(n == path or n.startswith(path + "/") for n in names)}


def _porcelain(entries: list[str]) -> list[str]:
    """The names in ``git status --porcelain -z``'s entries: each is "XY name", and a rename's
    or copy's old name follows it as an entry of its own."""
    names: list[str] = []
    entries.reverse()
    while entries:
        entry = entries.pop()
        names.append(entry[3:])
        if "R" in entry[:2] or "C" in entry[:2]:
            names.extend(entries.pop() for _ in entries[-1:])
    return names


def commit(root: Path, paths: tuple[str, ...], message: str) -> str:
    """Commit exactly ``paths`` (created, modified or deleted) with ``message``, leaving the rest
    of the index as it is; what happened, in one line."""
    if not is_work_tree(root):
        return f"not committed: {root} is not a git work tree"
    try:
        known = set(_names(run_git(root, "ls-files", "-z", "--", *paths)))
    except GitError:
        known = set()
    present = [p for p in paths if (root / p).exists() or p in known]
    if not present:
        return "not committed: none of its files exists"
    try:
        run_git(root, "add", "-A", "--", *present)
    except GitError as exc:
        return f"not committed: git add failed: {exc.reason}"
    if succeeds(root, "diff", "--cached", "--quiet", "--", *present):
        return "not committed: its files did not change"
    try:
        run_git(root, "commit", "--quiet", "-m", message, "--", *present)
    except GitError as exc:
        return f"not committed: git commit failed: {exc.reason}"
    try:
        return f"committed {git_text(root, 'rev-parse', '--short', 'HEAD')}"
    except GitError:
        return "committed"


def _names(out: bytes) -> list[str]:
    """The names of ``-z`` output, as the file system has them (any bytes come back as were)."""
    return [os.fsdecode(name) for name in out.split(b"\0") if name]


# -- plumbing for isolated phases: snapshots through a temporary index, trees, refs -------------

# Commits this tool makes for its own bookkeeping (snapshots, kept work) carry one identity, so
# they work where the user has none configured and never pass for the user's own.
IDENTITY = {
    "GIT_AUTHOR_NAME": "pytest-maestro",
    "GIT_AUTHOR_EMAIL": "pytest-maestro@localhost",
    "GIT_COMMITTER_NAME": "pytest-maestro",
    "GIT_COMMITTER_EMAIL": "pytest-maestro@localhost",
}
NO_COMMIT = "0" * 40


def rev(cwd: Path, name: str) -> str | None:
    """The object ``name`` names, or None when it names none."""
    try:
        return git_text(cwd, "rev-parse", "--verify", "--quiet", name + "^{object}")
    except GitError:
        return None


# What lets git skip looking at a file: a watcher's word, a cache of directories' stat data.
UNWATCHED = ("-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false")


def snapshot_tree(top: Path, index: Path | None, scratch: Path, force: tuple[str, ...] = ()) -> str:
    """The tree of the work tree at ``top`` as it is, untracked files that are not ignored
    included, written through a temporary index in ``scratch`` so that the real one stays as it
    is. Starting from a copy of ``index`` spares hashing files whose stat git already knows.
    ``force``: paths (from ``top``) taken even when ignored."""
    scratch.parent.mkdir(parents=True, exist_ok=True)
    if index is not None and index.is_file():
        # With its time: git trusts an entry's stat data only if the file was last written
        # before the index (racy git); a copy dated now would vouch for a file rewritten at the
        # same size in the second its stat data was taken.
        shutil.copy2(index, scratch)
    else:
        scratch.unlink(missing_ok=True)
    env = {"GIT_INDEX_FILE": str(scratch)}
    try:
        _look_at_every_file(top, env)
        run_git(top, *UNWATCHED, "add", "-A", env=env)
        present = [p for p in force if (top / p).exists() or (top / p).is_symlink()]
        for some in _chunks(present):
            run_git(top, *UNWATCHED, "add", "-A", "-f", "--", *some, env=env)
        return git_text(top, "write-tree", env=env)
    finally:
        scratch.unlink(missing_ok=True)


def _look_at_every_file(top: Path, env: dict[str, str]) -> None:
    """Clear the bits that tell git not to look at a file (``assume-unchanged``, and
    ``skip-worktree`` where the file is there): whoever set them, its edits count."""
    listed = run_git(top, "ls-files", "-v", "-z", "--full-name", env=env)
    hidden: dict[str, list[str]] = {"--no-assume-unchanged": [], "--no-skip-worktree": []}
    for line in filter(None, listed.split(b"\0")):
        tag, path = line[:1], os.fsdecode(line[2:])
        if tag.islower():
            hidden["--no-assume-unchanged"].append(path)
        if tag in b"Ss" and os.path.lexists(top / path):
            hidden["--no-skip-worktree"].append(path)
    for flag, paths in hidden.items():  # one flag a call: git heeds only the first given
        for some in _chunks(paths):
            run_git(top, "update-index", flag, "--", *some, env=env)


def is_ancestor(cwd: Path, ancestor: str, commit: str) -> bool:
    """Whether ``commit`` descends from ``ancestor`` (or is it)."""
    return succeeds(cwd, "merge-base", "--is-ancestor", ancestor, commit)


def commit_tree(cwd: Path, tree: str, parents: tuple[str, ...], message: str) -> str:
    parent_args = [arg for parent in parents for arg in ("-p", parent)]
    return git_text(cwd, "commit-tree", tree, *parent_args, "-m", message, env=IDENTITY)


def set_ref(cwd: Path, ref: str, commit: str, old: str | None = None) -> None:
    """Point ``ref`` at ``commit``; when ``old`` is given, only if it still points there."""
    run_git(cwd, "update-ref", ref, commit, *((old,) if old else ()))


def delete_ref(cwd: Path, ref: str) -> None:
    with contextlib.suppress(GitError):
        run_git(cwd, "update-ref", "-d", ref)


def changed_paths(cwd: Path, old: str, new: str) -> list[str]:
    """Paths (from the top of the repository) whose entry differs between two tree-ishes."""
    out = run_git(cwd, "diff-tree", "-r", "-z", "--no-renames", "--name-only", old, new)
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


Entry = tuple[str, str]  # (mode, object id)


def entries(cwd: Path, treeish: str, paths: list[str]) -> dict[str, Entry]:
    """The blob entries of ``paths`` in ``treeish``; a path it lacks is missing."""
    wanted = set(paths)
    found: dict[str, Entry] = {}
    for some in _chunks(paths):
        out = run_git(cwd, "ls-tree", "-r", "-z", "--full-tree", treeish, "--", *some)
        for line in filter(None, out.split(b"\0")):
            meta, path = line.split(b"\t", 1)
            mode, _, oid = meta.decode().split()
            name = os.fsdecode(path)  # any bytes a file name may hold come back as they were
            if name in wanted:  # a directory's path lists all under it
                found[name] = (mode, oid)
    return found


def _chunks(paths: list[str]) -> list[list[str]]:
    """``paths`` in runs short enough for one command line each, however many there are."""
    runs: list[list[str]] = []
    size = ARGS_AT_ONCE
    for path in paths:
        length = len(os.fsencode(path)) + 1
        if size + length > ARGS_AT_ONCE:
            runs.append([])
            size = 0
        runs[-1].append(path)
        size += length
    return runs


def blobs(cwd: Path, wanted: list[tuple[str, str]]) -> dict[str, bytes]:
    """Contents of ``(object id, path)`` pairs, through the path's smudge filters, by path."""
    if not wanted:
        return {}
    lines = b"".join(oid.encode() + b" " + os.fsencode(path) + b"\n" for oid, path in wanted)
    out = run_git(cwd, "cat-file", "--batch", "--filters", stdin=lines)
    found: dict[str, bytes] = {}
    at = 0
    for _, path in wanted:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        found[path] = out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
    return found


def hash_files(top: Path, paths: list[str]) -> dict[str, str]:
    """Object ids of regular files as ``git add`` would store them (clean filters applied)."""
    found: dict[str, str] = {}
    for some in _chunks(paths):
        out = git_text(top, "hash-object", "--", *some)
        found.update(zip(some, out.split(), strict=True))
    return found


def hash_bytes(top: Path, data: bytes) -> str:
    return run_git(top, "hash-object", "-w", "--stdin", stdin=data).decode().strip()
