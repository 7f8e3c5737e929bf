"""The controller's side of a remote phase's start: the phase's base, as isolation makes it,
bundled for the worker that runs it.

Each phase starts, as an isolated phase does, at a commit of its own on the merged results so
far (``Sent.start``): its diff comes back against that commit's tree. The worker is sent the same
tree on a chain of commits of its own (``Sent.commit``), whose first has no parent: a bundle of it
holds the tree and none of the user's history. Once a worker has confirmed a commit, the next
bundle holds only what follows it (``git bundle create … ^has``): what the merged results
changed since, not the repository again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..git import GitError, commit_tree, delete_ref, rev, run_git, set_ref
from ..isolation.shared_refs import ref_part, stamp
from ..isolation.worktree import Isolation
from ..phase.prompt import DependencyResult
from . import RemoteError
from .wire import Start


@dataclass(frozen=True)
class Sent:
    """What the controller sent a worker for a phase."""

    phase: str
    worker: str
    start: str  # the phase's start on the merged results: what its diff applies to
    commit: str  # the commit the worker checks out: the same tree
    size: int  # the bundle's bytes


@dataclass
class Shipper:
    """Bundles for each remote worker, and what each has confirmed it holds."""

    isolation: Isolation
    confirmed: dict[str, str] = field(default_factory=dict)  # worker -> a commit it holds
    sent: dict[str, Sent] = field(default_factory=dict)  # phase -> its start, until it ends
    workers: set[str] = field(default_factory=set)  # every worker sent a phase: its ref to go

    def ref(self, worker: str) -> str:
        """Names the last commit sent to a worker: a bundle needs a ref, and git keeps what a
        ref names."""
        return f"{self.isolation.refs}/remote/{ref_part(worker)}"

    def start(
        self,
        phase_id: str,
        worker: str,
        *,
        session_id: str = "",
        dependencies: tuple[DependencyResult, ...] = (),
        final_findings: tuple[str, ...] = (),
    ) -> Start:
        """The phase's start for ``worker``, with the bundle that brings it there."""
        iso = self.isolation
        merged = rev(iso.top, iso.merged_ref)
        if merged is None:
            raise RemoteError(f"the run's base ({iso.merged_ref}) is missing")
        has = self.confirmed.get(worker)
        message = f"pytest-maestro: phase {phase_id} starts\n\n{stamp()}\n"
        tree = merged + "^{tree}"
        ref = self.ref(worker)
        try:
            start = commit_tree(iso.top, tree, (merged,), message)
            commit = commit_tree(iso.top, tree, (has,) if has else (), message)
            set_ref(iso.top, ref, commit)
            bundle = run_git(
                iso.top, "bundle", "create", "-q", "-", ref, *((f"^{has}",) if has else ())
            )
        except GitError as exc:
            raise RemoteError(f"cannot bundle the phase's base: {exc}") from None
        self.sent[phase_id] = Sent(phase_id, worker, start, commit, len(bundle))
        self.workers.add(worker)
        return Start(
            phase_id,
            commit,
            bundle,
            has,
            ref,
            iso.prefix,
            session_id,
            dependencies,
            final_findings,
        )

    def confirm(self, worker: str, commit: str) -> None:
        """``worker`` holds ``commit``: its next bundle needs only what follows."""
        self.confirmed[worker] = commit

    def finish(self) -> None:
        """At the run's end: the refs that named what was sent go."""
        for worker in self.workers:
            delete_ref(self.isolation.top, self.ref(worker))
