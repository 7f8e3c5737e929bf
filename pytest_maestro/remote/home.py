"""A remote worker's side of a phase: its repository, brought to the phase's start by the bundle
the controller sent, the phase run in its work tree, and what the phase left as a diff.

Each worker has a directory of its own on its host (``Home``): ``repo/``, a repository whose
work tree the phases run in one after another, and ``state/``, the state dir of the phases'
logs. The first phase of a run empties it: whatever an earlier run left there goes, and the
controller's first bundle to a worker holds the whole base. See docs/architecture.md,
"Remote phases".
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from ..files.declared import remove_tree
from ..git import GitError, changed_paths, git_text, run_git, snapshot_tree
from ..isolation.merge import scope
from ..plan import Phase
from ..state.paths import file_stem
from . import RemoteError
from .wire import Result, Start

# What a diff must be for ``git apply`` on the controller, whatever the worker's git config says.
DIFF = (
    "diff",
    "--binary",
    "--full-index",
    "--find-renames",
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)


@dataclass(frozen=True)
class Home:
    """One worker's directory on its host."""

    path: Path

    @property
    def repo(self) -> Path:
        return self.path / "repo"

    @property
    def results(self) -> Path:
        """Where a diff too large to carry back is kept."""
        return self.path / "results"

    @property
    def host(self) -> str:
        return f"{socket.gethostname()}:{self.path}"

    def clear(self) -> None:
        """What an earlier run left here goes; a new repository."""
        remove_tree(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            run_git(self.path, "init", "-q", str(self.repo))
        except (GitError, OSError) as exc:
            raise RemoteError(f"cannot make a repository on {self.host}: {exc}") from None

    def open(self, start: Start) -> Space:
        """The repository's work tree at the phase's start, checked."""
        bundle = self.path / f"{file_stem(start.phase)}.bundle"
        repo = self.repo
        try:
            bundle.write_bytes(start.bundle)
            run_git(repo, "fetch", "-q", "--no-tags", str(bundle), f"+{start.ref}:{start.ref}")
            run_git(repo, "update-ref", "--no-deref", "HEAD", start.commit)
            run_git(repo, "reset", "--hard", "-q")  # writes only the files that differ
            run_git(repo, "clean", "-ffdxq")
            head = git_text(repo, "rev-parse", "HEAD")
        except (GitError, OSError) as exc:
            raise RemoteError(f"cannot check out the phase's base on {self.host}: {exc}") from None
        finally:
            bundle.unlink(missing_ok=True)
        if head != start.commit:
            raise RemoteError(f"expected {start.commit[:12]} on {self.host}, found {head[:12]}")
        return Space(self, start.phase, start.commit, start.prefix)


@dataclass(frozen=True)
class Space:
    """The work tree one phase runs in, and the commit it started at."""

    home: Home
    phase: str
    start: str
    prefix: str  # the project root from the top of the repository

    @property
    def root(self) -> Path:
        """Where the phase runs: ``MAESTRO_ROOT``."""
        return self.home.repo / self.prefix

    def snapshot(self, phase: Phase) -> str:
        """The work tree as the phase left it; its declared files even where git ignores them."""
        repo = self.home.repo
        forced = tuple(self.prefix + p for p in phase.files.all())
        index = repo / ".git" / "index"
        return snapshot_tree(repo, index, self.home.path / "snapshot.index", forced)

    def changed(self, tree: str) -> list[str]:
        """Paths (from the top) the phase changed: from its start to ``tree``."""
        return changed_paths(self.home.repo, self.start, tree)

    def problems(self, phase: Phase) -> list[str]:
        """A change outside the phase's declared files, as a file problem: it could not come
        back, so the attempt fails while it can retry. (Whether it undoes the user's work only
        the controller knows: its merge looks.)"""
        try:
            _inside, outside = scope(phase, self.changed(self.snapshot(phase)), self.prefix)
        except (GitError, OSError):
            return []  # the controller's merge looks again
        return ["changed files outside its declared ones: " + ", ".join(outside)] if outside else []

    def result(self, phase: Phase, limit: int, logs: dict[str, bytes]) -> Result:
        """What the phase left, as its diff from its start; kept here when over ``limit``."""
        host = self.home.host
        try:
            diff = run_git(self.home.repo, *DIFF, self.start, self.snapshot(phase))
        except (GitError, OSError) as exc:
            return Result(host, self.start, None, 0, problem=f"no diff on {host}: {exc}", logs=logs)
        if len(diff) <= limit:
            return Result(host, self.start, diff, len(diff), logs=logs)
        kept = self.home.results / f"{file_stem(phase.id)}.patch"
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(diff)
        except OSError as exc:
            problem = f"its diff ({len(diff)} bytes) is over the bound, not kept on {host}: {exc}"
            return Result(host, self.start, None, len(diff), problem=problem, logs=logs)
        return Result(host, self.start, None, len(diff), kept=str(kept), logs=logs)


def phase_logs(logs: Path, phase_id: str, limit: int) -> dict[str, bytes]:
    """The phase's files in a state dir's ``logs/`` (its log, each attempt's prompt, reply and
    transcript), each its last ``limit`` bytes, marked where it was cut."""
    stem = file_stem(phase_id)
    found: dict[str, bytes] = {}
    try:
        names = sorted(p.name for p in logs.iterdir())
    except OSError:
        return found
    for name in names:
        if name != f"{stem}.log" and not name.startswith(f"{stem}.attempt-"):
            continue
        try:
            data = (logs / name).read_bytes()
        except OSError:
            continue
        if len(data) > limit:
            cut = f"[... the first {len(data) - limit} bytes are in {logs / name} ...]\n"
            data = cut.encode() + data[-limit:]
        found[name] = data
    return found
