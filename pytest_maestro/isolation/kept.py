"""What an isolated phase did that does not come back into the user's tree, kept: a commit under
``refs/maestro/<session>/kept/`` and a patch in the state dir's ``kept/``, both named for users.
See docs/architecture.md, "Isolated phases"."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..files.declared import shown
from ..git import commit_tree, rev, run_git, set_ref
from ..state.paths import file_stem
from .shared_refs import ref_part, stamp


@dataclass(frozen=True)
class Keeper:
    """Where a session keeps work: ``refs`` (the session's refs) and ``folder`` (patches)."""

    top: Path
    refs: str
    folder: Path

    def keep(self, phase_id: str, start: str, tree: str, why: str, name: str = "") -> str | None:
        """``tree`` as a commit on ``start`` and as a patch; where, in one line. None: it is
        ``start``'s own tree, nothing to keep."""
        if tree == rev(self.top, start + "^{tree}"):
            return None
        unique, stem = stamp(), file_stem(phase_id)
        title = f"{phase_id}: {name}" if name else phase_id
        message = f"{title}\n\nKept by pytest-maestro: {why}.\n\nPhase: {phase_id}\n"
        commit = commit_tree(self.top, tree, (start,), message)
        ref = f"{self.refs}/kept/{ref_part(stem)}-{unique}"
        set_ref(self.top, ref, commit)
        patch = self.folder / f"{stem}-{unique}.patch"
        try:
            diff = run_git(self.top, "diff-tree", "-p", "--binary", "--no-renames", start, commit)
            patch.parent.mkdir(parents=True, exist_ok=True)
            patch.write_bytes(diff)
        except OSError as exc:  # a full disk: the commit holds it all the same
            patch.unlink(missing_ok=True)
            return f"its work is kept as {ref} (no patch: {exc.strerror or exc})"
        return f"its work is kept as {ref} and {shown(patch, Path.cwd())}"
