"""The final review step: once every phase passed, a reviewer judges the run's whole change
against the plan, read-only, as the phase reviews judge an attempt (``review.py``: the same
call through ``call_agent``, paced and counted against the budget, an answer outside the shape
asked for once more, the tree watched around it).

It runs in the process the final item runs in (a worker under xdist), under a running record
of its own, so a killed run's next ends what its reviewer's CLI left; its log and files are
``logs/final-review.*``. See docs/architecture.md, "The final review".
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..files.declared import FileSnapshot
from ..plan import Files, Phase, Plan
from ..processes.leftovers import RunningRecord
from ..processes.process import PhaseLog
from ..review.base import RunBase
from ..review.final import (
    FINAL_NAME,
    FinalBrief,
    FinalRecord,
    final_prompt,
    read_final_reply,
)
from ..review.guard import TreeGuard
from ..review.verdict import Review, Verdict
from ..texts import os_error_text
from .events import ACTIVITY, STARTED, Progress, Teller
from .review import PhaseReview, Scene


@dataclass(frozen=True)
class _FinalAsker(PhaseReview):
    """The phase review's call and checks, reading the final review's answer."""

    def verdict(self, phase: Phase, text: str) -> Verdict:
        return read_final_reply(text, self.plan.ids)


def final_phase(plan: Plan, declared: tuple[str, ...]) -> Phase:
    """What the final review's calls go under: its name for the log, the budget and the
    environment, every declared file for the watch on the tree."""
    return Phase(FINAL_NAME, "final review", files=Files(modify=declared))


@dataclass(frozen=True)
class FinalStep:
    asker: PhaseReview  # who reviews, the budget, the account's slots, the session's paths
    root: Path
    base: RunBase
    plan_path: Path
    progress: Progress | None = None

    @classmethod
    def of(
        cls, review: PhaseReview, root: Path, base: RunBase, plan_path: Path,
        progress: Progress | None = None,
    ) -> FinalStep:  # fmt: skip
        asker = _FinalAsker(**{f: getattr(review, f) for f in review.__dataclass_fields__})
        return cls(asker, root, base, plan_path, progress)

    def __call__(self, record: FinalRecord, results: Mapping[str, str]) -> Review:
        """The final review of the change since ``record``'s base; ``results``: each phase's
        status line, as the session has it."""
        paths = self.asker.paths
        phase = final_phase(self.asker.plan, self.base.declared)
        with (
            RunningRecord(paths.running_record(os.getpid())) as running,
            PhaseLog.hold(paths.log(FINAL_NAME), running) as out,
        ):
            running.start(FINAL_NAME, durable=False)  # it writes nothing to put back
            tell = Teller(FINAL_NAME, time.time(), 1, self.progress)
            tell(STARTED, 1, "")
            review = self._review(phase, record, results, Scene(
                self.root, FileSnapshot(self.root, ()), out, self._env(), tell
            ))  # fmt: skip
            for line in review.lines():
                out.write_line(f"--- {line}")
            running.clear()
        return review

    def _review(
        self, phase: Phase, record: FinalRecord, results: Mapping[str, str], scene: Scene
    ) -> Review:
        asker = self.asker
        who = asker.reviewer
        if record.base is None:  # the controller took it when the run opened the session
            return Review(who.mode, who.name, failure="the session has no base to diff from")
        spent = asker.budget.refusal(phase.id, None) if asker.budget else None
        if spent is not None:
            return Review(who.mode, who.name, failure=f"no final review: {spent}")
        scene.tell(ACTIVITY, 1, f"final review by {who.name}")
        request = asker.request(phase, 1, scene, 0)
        diff_file = request.attempt_file(".diff")
        try:
            diff = self.base.change(record.base)
            diff_file.write_text(diff)
        except OSError as exc:
            why = f"cannot write the change for the reviewer: {os_error_text(exc)}"
            return Review(who.mode, who.name, failure=why)
        since = record.since or "the session began"
        brief = FinalBrief(asker.plan, who.agent, results, diff, diff_file, since)
        request = replace(request, prompt=final_prompt(brief))
        guard = TreeGuard.take(self.root, phase.files.all(), asker.ignored)
        review = asker.ask(phase, request, scene)
        return asker.guarded(phase, review, guard, scene)

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "MAESTRO_PLAN": str(self.plan_path),
            "MAESTRO_ROOT": str(self.root),
            "MAESTRO_PROJECT_ROOT": str(self.root),
            "MAESTRO_PHASE_ID": FINAL_NAME,
            "MAESTRO_ATTEMPT": "1",
        }
