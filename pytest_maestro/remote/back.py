"""The controller brings a remote phase's result into the user's tree, by isolation's rules.

The diff the worker sent is applied, through a scratch index, to the tree the phase started
from: that gives the tree the phase left, in the user's repository. From there it is an isolated
phase's result like any other: a passed phase's declared files merged back (``merge_back``:
conflicts named, all or none, pre-images first), anything else kept under ``refs/maestro/`` and
as a patch. The phase's logs are written into the controller's ``logs/``. See
docs/architecture.md, "Remote phases".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..git import GitError, git_text, run_git
from ..isolation import IsolationError
from ..isolation.merge import merge_back
from ..isolation.worktree import Isolation, Workspace
from ..plan import Phase
from ..state.paths import SessionPaths
from ..texts import shown
from .ship import Sent
from .wire import Result


@dataclass(frozen=True)
class Brought:
    """What bringing a result back did: lines for the phase's log, and why it failed, if the
    phase passed on the worker but its result could not come in."""

    lines: tuple[str, ...] = ()
    refused: str | None = None


def bring_back(
    isolation: Isolation, phase: Phase, sent: Sent, result: Result, paths: SessionPaths, ok: bool
) -> Brought:
    """``result`` of the phase that ``sent`` started, merged when ``ok`` (it passed), else kept."""
    space = Workspace(isolation, phase.id, isolation.slot(f"remote-{sent.worker}"), sent.start)
    if result.diff is None:
        why = result.problem or (
            f"its diff ({result.size} bytes) is larger than a report carries; it is kept on "
            f"{result.host} as {result.kept}"
        )
        return Brought((f"not merged back: {why}",), why if ok else None)
    lines: list[str] = []
    refused = None
    why = "its result was not merged back" if ok else "the phase did not complete"
    try:
        tree = apply_diff(isolation, sent.start, result.diff, space.path)
    except (GitError, OSError) as exc:
        refused = f"its diff from {result.host} does not apply: {exc}"
        return Brought((f"not merged back: {refused}",), refused if ok else None)
    if ok:
        try:
            merged = merge_back(
                space, phase, tree, paths.preimage(phase.id), paths.replaced(phase.id, "merge")
            )
        except (GitError, IsolationError, OSError) as exc:
            refused = str(exc)
        else:
            refused = merged.refused
            if refused is None:
                return Brought((merged.line(Path.cwd()),))
        lines.append(f"not merged back: {refused}")
    try:  # whatever went wrong above, the work is kept
        kept = space.keep(why, phase.name, tree)
    except (GitError, IsolationError, OSError) as exc:
        kept = f"its work not kept: {exc}"
    if kept:
        lines.append(kept)
    return Brought(tuple(lines), refused)


def apply_diff(isolation: Isolation, start: str, diff: bytes, scratch: Path) -> str:
    """The tree ``diff`` makes of ``start``'s, written through a scratch index beside
    ``scratch``: neither the user's index nor the work tree is touched."""
    top = isolation.top
    index = scratch.with_name(scratch.name + ".apply-index")
    index.parent.mkdir(parents=True, exist_ok=True)
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        run_git(top, "read-tree", start, env=env)
        if diff:
            run_git(
                top, "apply", "--cached", "--binary", "--whitespace=nowarn", env=env, stdin=diff
            )
        return git_text(top, "write-tree", env=env)
    finally:
        index.unlink(missing_ok=True)


def write_logs(result: Result, logs: Path, cwd: Path) -> list[str]:
    """The phase's log files from the worker, into the controller's ``logs/``; what could not
    be written, as lines."""
    lines = []
    for name, data in result.logs.items():
        if Path(name).name != name or name.startswith("."):
            continue  # a name the worker made is one file in logs/, never a path elsewhere
        target = logs / name
        try:
            logs.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as exc:
            lines.append(f"log {shown(target, cwd)} from {result.host} not written: {exc}")
    return lines
