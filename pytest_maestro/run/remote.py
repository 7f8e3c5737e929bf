"""Remote phases as the run composes them. On a remote worker: the phase's start received, the
phase run in the work tree there, its result made. On the controller: each start made from the
merged results and the session, and each result brought back into the user's tree, the
controller being the only writer of that tree and of the session. See docs/architecture.md,
"Remote phases"."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..phase.facts import PhaseFacts
from ..phase.prompt import SessionContext
from ..processes.leftovers import RunningRecord
from ..remote import RemoteError
from ..remote.back import Brought, bring_back, write_logs
from ..remote.ship import Shipper
from ..remote.wire import Result, Start
from ..state.model import Status

if TYPE_CHECKING:
    from .lifecycle import Lifecycle


def make_start(life: Lifecycle, phase_id: str, worker: str) -> dict[str, Any]:
    """On the controller: the start ``worker`` is sent for the phase, as a plain mapping; one
    that could not be made says why, and the worker fails the phase with it."""
    shipper = shipper_of(life)
    phase = life.plan.phase(phase_id)
    recorder = life.recorder
    try:
        if shipper is None or recorder is None:
            raise RemoteError("a remote phase needs the run's isolation and session")
        context = SessionContext.of(life.plan, phase, recorder.store.document())
        start = shipper.start(
            phase_id,
            worker,
            session_id=context.session_id,
            dependencies=context.dependencies,
            final_findings=context.final_findings,
        )
    except RemoteError as exc:
        start = Start(phase_id, problem=f"no start on the controller: {exc}")
    return start.to_wire()


def shipper_of(life: Lifecycle) -> Shipper | None:
    if life.shipper is None and life.isolation is not None:
        life.shipper = Shipper(life.isolation)
    return life.shipper


@dataclass(frozen=True)
class BroughtBack:
    """A remote phase's facts once its result was brought in (its diff and logs left out),
    why a phase that passed on its worker did not come back (None: it did, or it had failed),
    and what users should read beside its failure (where its work is kept)."""

    facts: PhaseFacts
    refused: str | None = None
    lines: tuple[str, ...] = ()


def brought_back(life: Lifecycle, facts: PhaseFacts) -> BroughtBack:
    """On the controller: a remote phase's result brought in (merged when it passed, else kept)
    and its logs written."""
    shipper = life.shipper
    sent = shipper.sent.pop(facts.phase, None) if shipper is not None else None
    if shipper is None or sent is None or facts.remote is None:
        return BroughtBack(facts)
    isolation = life.isolation
    assert isolation is not None, "a shipper is made only with the run's isolation"
    try:
        result = Result.from_mapping(facts.remote)
    except RemoteError as exc:
        return BroughtBack(_refused(facts, str(exc)), str(exc) if facts.ok else None)
    if result.start == sent.commit:
        shipper.confirm(sent.worker, sent.commit)
    phase = life.plan.phase(facts.phase)
    if facts.tokens is not None and facts.tokens.cost:  # its host's ledger is not this one
        life.budget.add(phase.id, facts.attempts or 1, facts.tokens.cost)
    cwd = Path.cwd()
    notes = write_logs(result, life.paths.logs, cwd)
    # A kill while its files are written makes the next run put them back from the pre-images
    # the merge saves first: the record names the phase, as a worker's does while it runs one.
    try:
        with RunningRecord(life.paths.running_record(os.getpid())) as record:
            record.start(phase.id)
            brought = bring_back(isolation, phase, sent, result, life.paths, facts.ok)
            record.clear()
    except OSError as exc:  # the record itself: nothing was merged
        why = f"cannot record the merge: {exc}"
        brought = Brought((f"not merged back: {why}",), why if facts.ok else None)
    _append(life.paths.log(phase.id), [*notes, *brought.lines])
    life.notes += notes
    facts = dataclasses.replace(facts, remote=result.without_payload())
    if brought.refused is None or not facts.ok:
        return BroughtBack(facts, None, brought.lines if not facts.ok else ())
    return BroughtBack(_refused(facts, brought.refused), brought.refused, brought.lines)


def _refused(facts: PhaseFacts, why: str) -> PhaseFacts:
    """A phase that passed on its worker, failed here: its result did not come back."""
    if not facts.ok:
        return dataclasses.replace(facts, remote=None)
    failure = " ".join(f"not merged back: {why}".split())[:300]
    return dataclasses.replace(
        facts, status=Status.FAILED, failure=failure, result=failure, remote=None
    )


def _append(log: Path, lines: list[str]) -> None:
    if not lines:
        return
    with contextlib.suppress(OSError), log.open("a", encoding="utf-8") as out:  # else the report
        out.writelines(f"--- {line}\n" for line in lines)
