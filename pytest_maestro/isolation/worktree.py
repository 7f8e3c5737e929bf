"""Isolated phases: each runs in a git worktree of its own, under the state dir.

The run starts from a snapshot commit of the work tree as the user left it (the *base*: tracked
changes and untracked, non-ignored files, written through a temporary index so the user's index,
branch and tree stay as they are). A ref holds the base plus the results merged so far; each
phase's worktree starts from it, detached. What a phase leaves that does not come back (it
failed, was blocked or interrupted, or the run was killed) is kept as a commit under
``refs/maestro/`` and as a patch in the state dir. See docs/architecture.md, "Isolated phases".
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import filelock

from ..files.declared import remove_tree
from ..git import (
    GitError,
    changed_paths,
    commit_tree,
    delete_ref,
    git_text,
    rev,
    run_git,
    set_ref,
    snapshot_tree,
)
from ..state.paths import SessionPaths, file_stem
from . import IsolationError
from .kept import Keeper
from .locks import held, state_lock
from .shared_config import put_back_config, save_config
from .shared_refs import (
    Baseline,
    Own,
    Users,
    branches,
    keeper,
    put_back,
    ref_part,
    restash,
    stamp,
    unpin,
)

# What git keeps in a worktree's own directory while an operation is under way.
UNDER_WAY = "MERGE_HEAD CHERRY_PICK_HEAD REVERT_HEAD BISECT_LOG rebase-merge rebase-apply sequencer"
ADD_TRIES = 3
KEPT_REF = "taken off the refs your worktrees share and kept as "


@dataclass(frozen=True)
class Isolation:
    root: Path  # the project root, in the user's work tree
    top: Path  # the top of the user's work tree
    prefix: str  # the root from the top: "" or "sub/dir/"
    common: Path  # the repository's git directory, shared by its worktrees
    paths: SessionPaths  # the session's, in the state dir
    include: tuple[str, ...] = ()  # untracked files each worktree gets a copy of

    @classmethod
    def for_root(cls, root: Path, paths: SessionPaths, include: tuple[str, ...] = ()) -> Isolation:
        try:
            top = Path(git_text(root, "rev-parse", "--show-toplevel")).resolve()
            prefix = git_text(root, "rev-parse", "--show-prefix")
            common = Path(git_text(root, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        except GitError:
            raise IsolationError(
                f"--maestro-isolate=worktree needs a git work tree, and the project root {root} "
                "is not in one"
            ) from None
        for pattern in include:
            if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
                raise IsolationError(
                    f"isolate_include: {pattern!r} must be a path inside the project root"
                )
        return cls(root, top, prefix, common.resolve(), paths, include)

    # -- names -----------------------------------------------------------------------------------

    @property
    def refs(self) -> str:
        return f"refs/maestro/{ref_part(self.paths.name)}"

    @property
    def merged_ref(self) -> str:
        """The base plus every result merged back so far: where a new worktree starts."""
        return f"{self.refs}/merged"

    @property
    def base_ref(self) -> str:
        return f"{self.refs}/base"

    @property
    def pins(self) -> str:
        """Where the user's refs as the run started are held (see ``Users.pin``)."""
        return f"{self.refs}/pin"

    @property
    def worktrees(self) -> Path:
        return self.paths.worktrees

    @property
    def users(self) -> Path:
        """Where the user's refs as the run started are recorded (see ``Users.save``)."""
        return self.paths.worktrees

    @property
    def kept_dir(self) -> Path:
        return self.paths.kept

    def lock(self, name: str) -> filelock.BaseFileLock:
        """A lock shared by every run in this state dir (``locks.py``)."""
        return state_lock(self.paths.shared_lock(name))

    # -- the run ---------------------------------------------------------------------------------

    def start(self) -> list[str]:
        """Before any phase (controller only): keep and remove what a killed run left, then
        snapshot the user's work tree as the run's base. What users should know, as lines."""
        notes = self.salvage("the run that made it was killed")
        try:
            index = Path(
                git_text(self.top, "rev-parse", "--path-format=absolute", "--git-path", "index")
            )
            tree = snapshot_tree(
                self.top, index, self.worktrees.parent / f"{self.paths.name}.index"
            )
            head = rev(self.top, "HEAD")
            base = commit_tree(
                self.top, tree, (head,) if head else (), "pytest-maestro: the run's base"
            )
            set_ref(self.top, self.base_ref, base)
            set_ref(self.top, self.merged_ref, base)
            users = Users.read(self.top)
            users.save(self.users)
            users.pin(self.top, self.pins)
        except (GitError, OSError) as exc:
            raise IsolationError(f"cannot snapshot the work tree {self.top}: {exc}") from None
        return notes

    def finish(self) -> list[str]:
        """At the end of the run (controller only): no worktree left behind."""
        notes = self.salvage("the run ended before its phase did")
        with contextlib.suppress(GitError):  # the user's stash as the run started, whole
            restash(self.top, Users.load(self.users).stash)
            unpin(self.top, self.pins)
        delete_ref(self.top, self.base_ref)
        delete_ref(self.top, self.merged_ref)
        Users.forget(self.users)
        with contextlib.suppress(OSError):
            self.worktrees.rmdir()
        return notes

    def close(self) -> None:
        """At the end of this process's part of the run: its worktree goes."""
        slot = self.slot()
        space = Workspace.load(self, slot.with_name(slot.name + ".json"))
        if space is not None and not space.phase_id:
            space.remove()

    def salvage(self, why: str) -> list[str]:
        """Keep the work of every worktree of this session still on disk, then remove them."""
        if not self.worktrees.is_dir():
            return []
        notes = []
        with held(self.lock("create")):
            for marker in sorted(self.worktrees.glob("*.json")):
                space = Workspace.load(self, marker)
                if space is None:
                    marker.unlink(missing_ok=True)
                    continue
                if space.phase_id:  # a phase was running in it
                    with contextlib.suppress(GitError, OSError):
                        line = space.keep(why)
                        if line:
                            notes.append(f"phase {space.phase_id!r}: {line}")
                    notes += [f"phase {space.phase_id!r}: {line}" for line in space.release()]
                space.remove()
            for stray in self.worktrees.iterdir():
                if stray.is_dir():
                    remove_tree(stray)
            with contextlib.suppress(GitError):
                run_git(self.top, "worktree", "prune")
        return notes

    # -- one phase -------------------------------------------------------------------------------

    def slot(self, name: str | None = None) -> Path:
        """This process's worktree (or its one of that name). Its phases run one after
        another, each from a fresh state: reusing it writes only the files that differ, where a
        new one writes them all."""
        return self.worktrees / (name or f"w{os.getpid()}")

    def open(self, phase_id: str, slot: str | None = None) -> Workspace:
        """A worktree for the phase, detached at a commit of its own on the merged results so
        far (what descends from it is the phase's work), checked."""
        merged = rev(self.top, self.merged_ref)
        if merged is None:
            raise IsolationError(f"the run's base ({self.merged_ref}) is missing")
        try:
            before = tuple(branches(self.top).items())
            message = f"pytest-maestro: phase {phase_id} starts\n\n{stamp()}\n"
            start = commit_tree(self.top, merged + "^{tree}", (merged,), message)
        except GitError as exc:
            raise IsolationError(f"cannot start the phase: {exc}") from None
        space = Workspace(self, phase_id, self.slot(slot), start, before)
        left = Workspace.load(self, space.marker)
        if left is not None and left.phase_id:  # a phase of this process never ended
            with contextlib.suppress(GitError, OSError, IsolationError):
                left.keep("its phase never ended")
                left.put_back_shared()
        self.worktrees.mkdir(parents=True, exist_ok=True)
        space.mark(phase_id)  # before git makes anything: a killed run finds it
        try:
            save_config(self.common, space.config_copy)
            try:
                self._prepare(space, fresh=left is None)
            except (GitError, IsolationError):  # whatever a phase did to it: start again
                self._prepare(space, fresh=True)
            space.verify()
            self._copy_includes(space.root)
        except (GitError, OSError, IsolationError) as exc:
            space.remove()
            raise IsolationError(f"worktree {space.path}: {exc}") from None
        return space

    def _prepare(self, space: Workspace, fresh: bool) -> None:
        """The worktree at the phase's start: made (``fresh``), or the one this process used
        before, detached at the start and cleaned of everything git does not track."""
        path = space.path
        if fresh or not (path / ".git").is_file() or space.busy():
            space.remove(keep_marker=True)
            with held(self.lock("create")):
                self._add(path, space.start)
        else:
            run_git(path, "update-ref", "--no-deref", "HEAD", space.start)
            run_git(path, "clean", "-ffdxq")
        run_git(path, "reset", "--hard", "--quiet")  # writes only files that differ

    def _add(self, path: Path, start: str) -> None:
        """``git worktree add``, retried after a prune: a stale entry or a lock another git
        process held for a moment must not fail the phase."""
        for attempt in range(ADD_TRIES):
            try:
                run_git(
                    self.top, "worktree", "add", "--detach", "--no-checkout", "-q", str(path), start
                )
                return
            except GitError as exc:
                if attempt + 1 == ADD_TRIES:
                    raise IsolationError(f"cannot make a worktree at {path}: {exc}") from None
                remove_tree(path)
                with contextlib.suppress(GitError):
                    run_git(self.top, "worktree", "prune")
                time.sleep(0.2 * (attempt + 1))

    def _copy_includes(self, dest_root: Path) -> None:
        for pattern in self.include:
            for source in sorted(self.root.glob(pattern)):
                target = dest_root / source.relative_to(self.root)
                if target.exists() or target.is_symlink():
                    continue  # the snapshot has it: its version wins
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.is_dir() and not source.is_symlink():
                    shutil.copytree(source, target, symlinks=True)
                else:
                    shutil.copy2(source, target, follow_symlinks=False)


@dataclass(frozen=True)
class Workspace:
    """One phase's worktree: where it is, and the commit it started from."""

    isolation: Isolation
    phase_id: str
    path: Path
    start: str
    branches: tuple[tuple[str, str], ...] | None = None  # every branch, as the phase started

    @classmethod
    def load(cls, isolation: Isolation, marker: Path) -> Workspace | None:
        try:
            data = json.loads(marker.read_text())
            phase = str(data["phase"] or "")  # none: idle, between two phases
            return cls(isolation, phase, marker.with_suffix(""), str(data["start"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @property
    def marker(self) -> Path:
        """Which phase runs in the worktree and from which commit: a killed run's next run
        reads it to keep that phase's work."""
        return self.path.with_name(self.path.name + ".json")

    def mark(self, phase_id: str | None) -> None:
        self.marker.write_text(json.dumps({"phase": phase_id, "start": self.start}))

    def release(self) -> list[str]:
        """The phase is over: what it left in what git shares goes (``put_back_shared``), and
        the worktree waits for the next phase of this process. What was put back, as lines."""
        lines = []
        with contextlib.suppress(GitError, IsolationError, OSError):
            lines = self.put_back_shared()
            self.config_copy.unlink()  # put back: no longer what an idle worktree compares with
        self.mark(None)
        return lines

    @property
    def config_copy(self) -> Path:
        """The shared ``.git/config`` as the phase started."""
        return self.path.with_name(self.path.name + ".config")

    def busy(self) -> bool:
        """A merge, rebase, cherry-pick or bisect a phase left under way in the worktree."""
        with contextlib.suppress(GitError):
            admin = self._admin()
            return any((admin / name).exists() for name in UNDER_WAY.split())
        return True

    @property
    def root(self) -> Path:
        """The project root inside the worktree: where the phase runs."""
        return self.path / self.isolation.prefix

    def verify(self) -> None:
        head = git_text(self.path, "rev-parse", "HEAD")
        top = Path(git_text(self.path, "rev-parse", "--show-toplevel")).resolve()
        if head != self.start or top != self.path.resolve():
            raise IsolationError(
                f"expected a worktree at {self.path} on {self.start[:12]}, "
                f"found {top} on {head[:12]}"
            )

    def snapshot(self, force: tuple[str, ...] = ()) -> str:
        """The worktree's tree as the phase left it (commits, staged or not, untracked);
        ``force``: paths from the project root taken even when git ignores them."""
        index = self._admin() / "index"
        scratch = self.path.with_name(self.path.name + ".index")
        forced = tuple(self.isolation.prefix + p for p in force)
        return snapshot_tree(self.path, index, scratch, forced)

    def changed(self, tree: str) -> list[str]:
        """Paths (from the top) the phase changed: from its start to ``tree``."""
        return changed_paths(self.isolation.top, self.start, tree)

    def keep(self, why: str, name: str = "", tree: str | None = None) -> str | None:
        """Keep the worktree's state (``kept.py``); where, in one line. None: it changed nothing."""
        iso = self.isolation
        keeper = Keeper(iso.top, iso.refs, iso.kept_dir)
        return keeper.keep(self.phase_id, self.start, tree or self.snapshot(), why, name)

    def put_back_shared(self) -> list[str]:
        """Stash entries and branches the phase left in refs the user sees, taken away and
        kept under ``refs/maestro/``, the user's tags and stash entries put back, and the shared
        config as the phase started; what was kept where, as lines. One result's merge or
        another phase's put-back at a time; each of those whatever another's failure."""
        iso = self.isolation
        stem = file_stem(self.phase_id)
        keep = keeper(iso.top, f"{iso.refs}/kept", ref_part(stem))
        with held(iso.lock("merge")):
            config = iso.kept_dir / f"{stem}-config-{stamp()}"
            lines = [put_back_config(iso.common, self.config_copy, config)]
            own = Own.read(iso.top, self.path, self._admin() / "logs" / "HEAD", self.start)
            baseline = Baseline(Users.load(iso.users), rev(iso.top, iso.base_ref))
            before = None if self.branches is None else dict(self.branches)
            refs = put_back(own, self.path, baseline, before, keep)
        return [line for line in lines if line] + [f"{KEPT_REF}{ref}" for ref in refs]

    def remove(self, keep_marker: bool = False) -> None:
        """The worktree and git's record of it; nothing else of the repository."""
        with contextlib.suppress(GitError, IsolationError, OSError):
            self.put_back_shared()
        admin = None
        with contextlib.suppress(GitError, OSError):
            admin = self._admin().resolve()
        remove_tree(self.path)
        if admin is not None and admin.parent == self.isolation.common / "worktrees":
            remove_tree(admin)
        if not keep_marker:
            self.marker.unlink(missing_ok=True)
            self.config_copy.unlink(missing_ok=True)

    def _admin(self) -> Path:
        """git's directory for this worktree (``.git/worktrees/<name>``)."""
        return Path(git_text(self.path, "rev-parse", "--absolute-git-dir"))
