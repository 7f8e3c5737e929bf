"""The review step: once an attempt's own checks passed, a reviewer agent judges it, read-only.

The reviewer gets the phase's task, its prose criteria, the implementer's report and the
attempt's change (``review/``), and answers in one parsed shape; an answer outside it is asked
for once more, then fails the review. Its calls go through ``call_agent`` as any agent's do
(paced by the account, rate limits waited out) and count against the budgets; a spent budget
means no review, which fails the attempt: a review never passes by default. The tree is watched
around the review (``TreeGuard``): a file the review changed is put back, and fails it.

See docs/architecture.md, "Review gates".
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from ..files.declared import FileSnapshot
from ..files.putback import RestoreError
from ..plan import Phase, Plan
from ..processes.process import PhaseLog
from ..review.diff import attempt_diff
from ..review.guard import TreeGuard
from ..review.prompt import ReviewBrief, ask_again, prose_criteria, review_prompt
from ..review.verdict import ReplyError, Review, Round, Verdict, read_reply
from ..runtimes import AgentRequest, AgentResult, Runtime
from ..runtimes.agents import Agent
from ..runtimes.cli import NO_STATUS_LINE
from ..state.model import Status, Tokens
from ..state.paths import SessionPaths
from ..texts import os_error_text
from .agent_call import call_agent
from .budget import Budget
from .events import ACTIVITY, WAITING, Teller
from .loop_record import LoopRecord
from .outcome import Attempt
from .rounds import FixRound, plan_round
from .slots import AccountSlots


class Redo(Protocol):
    """The implementer called again for a fix round after ``previous``, its checks run: the
    runner's attempt, redone in the same scene."""

    def __call__(self, previous: Attempt, *, fix: FixRound) -> Attempt: ...


# Where the loop stands, kept by the runner after each review: ``attempt`` reviewed after fix
# round N (0: none), the implementer's session the next round goes on with.
Mark = Callable[[Attempt, int, "str | None"], None]


@dataclass(frozen=True)
class Reviewer:
    """Who reviews a phase, and how: resolved once for the phase (``run/reviewers.py``)."""

    mode: str  # spec | spec+quality
    agent: Agent
    runtime: Runtime  # one with a read-only mode
    model: str | None
    timeout: float  # seconds per call

    @property
    def name(self) -> str:
        return f"{self.agent.name} ({self.runtime.name})"


@dataclass(frozen=True)
class Scene:
    """Where the attempt under review ran: its root (a worktree when isolated), its declared
    files before the phase, its log, its environment, its progress line."""

    root: Path
    before: FileSnapshot
    out: PhaseLog
    env: Mapping[str, str]
    tell: Teller
    redo: Redo | None = None  # None: no fix round can be made
    mark: Mark | None = None  # None: where the loop stands is not kept (an isolated phase)


@dataclass(frozen=True)
class PhaseReview:
    """The review step of one phase's attempts; what the run shares (the budget, the account's
    slots) comes with it."""

    reviewer: Reviewer
    plan: Plan
    paths: SessionPaths
    max_wait: float
    budget: Budget | None = None
    slots: AccountSlots | None = None
    ignored: tuple[str, ...] = (".maestro/",)  # never watched: the state dir, the logs in it
    rounds: int = 0  # fix rounds after a failed review (``--maestro-review-rounds``)
    implementer: Runtime | None = None  # whose session a fix round goes on with
    escalate: str | None = None  # the model of the rounds that start afresh

    def __call__(self, phase: Phase, attempt: Attempt, scene: Scene) -> Attempt:
        """The attempt with its review, after the fix rounds it took; every call's tokens
        among its own. An attempt a killed run's loop left (``LoopRecord.resumed``) has its
        review: it goes on with the round after its last."""
        if attempt.review is None:
            review = self._review(phase, attempt, scene)
            attempt = replace(attempt, review=review, tokens=attempt.tokens + review.tokens)
            _mark(scene, attempt, 0, attempt.agent.session_id)
        return self._fix_rounds(phase, attempt, scene)

    def why_not_resume(self, record: LoopRecord) -> str | None:
        """Why a killed run's loop cannot go on in this run (it starts over), or None: its
        review passed, or it failed on findings and a fix round is left."""
        review = record.review
        if review.passed:
            return None
        if review.failure is not None:
            return f"its last review gave no verdict ({review.failure})"
        if record.round >= self.rounds or self.implementer is None:
            return f"{record.point} failed and no fix round is left"
        return None

    def _fix_rounds(self, phase: Phase, attempt: Attempt, scene: Scene) -> Attempt:
        """Fix rounds while a review found what to fix and rounds are left: each calls the
        implementer again (``plan_round`` says how), runs the checks, and reviews again. A
        resumed attempt has made ``attempt.rounds`` already."""
        review, session = attempt.review, attempt.agent.session_id
        notes = list(review.rounds) if review is not None else []
        for number in range(attempt.rounds + 1, self.rounds + 1):
            if not _fixable(attempt) or scene.redo is None or self.implementer is None:
                break
            spent = self.budget.refusal(phase.id, phase.budget_usd) if self.budget else None
            if spent is not None:  # the attempt stays failed by its review
                scene.out.write_line(f"--- no fix round {number}: {spent}")
                break
            fix = plan_round(number, self.implementer, attempt, session, self.escalate)
            scene.tell(ACTIVITY, attempt.number, f"fix round {number}: {fix.how}")
            fixed = scene.redo(attempt, fix=fix)
            session = fixed.agent.session_id or session
            cost, outcome = fixed.tokens, fixed.problem
            if fixed.ok:  # its checks pass again: reviewed again, the last findings in view
                review = self._review(phase, fixed, scene, number, review)
                cost, outcome = cost + review.tokens, review.outcome
            notes.append(Round(number, fix.how, outcome, cost))
            attempt = replace(fixed, review=review, tokens=attempt.tokens + cost, rounds=number)
            if fixed.ok and review is not None:
                _mark(scene, replace(attempt, review=replace(review, rounds=tuple(notes))),
                      number, session)  # fmt: skip
        if notes and attempt.review is not None:
            attempt = replace(attempt, review=replace(attempt.review, rounds=tuple(notes)))
        return attempt

    def _review(
        self,
        phase: Phase,
        attempt: Attempt,
        scene: Scene,
        number: int = 0,
        earlier: Review | None = None,
    ) -> Review:
        """The review of ``attempt`` (after fix round ``number``, 0: none), in the log."""
        review = self._judge(phase, attempt, scene, number, earlier)
        for line in review.lines():
            scene.out.write_line(f"--- {line}")
        return review

    def _judge(
        self, phase: Phase, attempt: Attempt, scene: Scene, number: int, earlier: Review | None
    ) -> Review:
        who = self.reviewer
        spent = self.budget.refusal(phase.id, phase.budget_usd) if self.budget else None
        if spent is not None:
            return Review(who.mode, who.name, failure=f"no review: {spent}")
        scene.tell(ACTIVITY, attempt.number, f"review by {who.name}")
        request = self.request(phase, attempt.number, scene, number)
        try:
            diff = attempt_diff(scene.root, scene.before, attempt.outside)
            request.attempt_file(".diff").write_text(diff)
        except OSError as exc:
            failure = f"cannot write the change for the reviewer: {os_error_text(exc)}"
            return Review(who.mode, who.name, failure=failure)
        brief = ReviewBrief(
            self.plan, phase, who.mode, who.agent, attempt.agent.text, diff,
            request.attempt_file(".diff"), tuple(earlier.lines()) if earlier else (),
        )  # fmt: skip
        request = replace(request, prompt=review_prompt(brief))
        guard = TreeGuard.take(scene.root, phase.files.all(), self.ignored)
        review = self.ask(phase, request, scene)
        return self.guarded(phase, review, guard, scene)

    def request(self, phase: Phase, attempt: int, scene: Scene, number: int) -> AgentRequest:
        """The reviewer's request for ``attempt`` of the phase (after fix round ``number``), its
        prompt still to be written."""
        env = dict(scene.env)
        if number:
            env["MAESTRO_REVIEW_ROUND"] = str(number)
        budget = self.budget.left(phase.id, phase.budget_usd) if self.budget else None
        return AgentRequest(
            phase,
            "",
            attempt,
            scene.root,
            env,
            self.reviewer.timeout,
            scene.out.path,
            agent=self.reviewer.agent,
            model=self.reviewer.model,
            budget_usd=budget,
            activity=lambda did: scene.tell(ACTIVITY, attempt, f"review: {did.text()}"),
            read_only=True,
            role=f"round-{number}.review" if number else "review",
        )

    def ask(self, phase: Phase, request: AgentRequest, scene: Scene) -> Review:
        """The reviewer's verdict; an answer outside the shape is asked for once more."""
        result, tokens = self._call(phase, request, scene)
        read = self._read(phase, result, tokens)
        if not isinstance(read, ReplyError):
            return read
        scene.out.write_line(f"--- the reviewer's answer could not be read: {read}; asking again")
        again = replace(
            request, prompt=ask_again(request.prompt, str(read)), role=request.role + "-2"
        )
        result, more = self._call(phase, again, scene)
        read = self._read(phase, result, tokens + more)
        if isinstance(read, ReplyError):
            why = f"the reviewer's answer is not in the shape asked for, twice: {read}"
            return Review(self.reviewer.mode, self.reviewer.name, failure=why, tokens=tokens + more)
        return read

    def _read(self, phase: Phase, result: AgentResult, tokens: Tokens) -> Review | ReplyError:
        """The review an answer gives, or what is wrong with its shape."""
        who = self.reviewer
        if not _answered(result):
            why = f"the reviewer's call failed: {result.message}"
            blocked = result.status is Status.BLOCKED  # no access, a spent quota: retry won't do
            return Review(who.mode, who.name, failure=why, blocked=blocked, tokens=tokens)
        try:
            return Review(who.mode, who.name, self.verdict(phase, result.text), tokens=tokens)
        except ReplyError as error:
            return error

    def verdict(self, phase: Phase, text: str) -> Verdict:
        """The verdict in the reviewer's answer on ``phase``; ReplyError outside the shape."""
        return read_reply(text, prose_criteria(phase))

    def _call(
        self, phase: Phase, request: AgentRequest, scene: Scene
    ) -> tuple[AgentResult, Tokens]:
        """One question to the reviewer, waits for the account and rate limits included; what
        it cost goes to the budget's ledger at once."""
        runtime = self.reviewer.runtime
        number = request.attempt
        call = call_agent(
            runtime,
            request,
            max_wait=self.max_wait,
            ask_again=False,  # its own shape is asked for again, not a status line
            note=scene.out.write_line,
            waiting=lambda delay, why: scene.tell(WAITING, number, why, delay),
            slots=self.slots if runtime.autonomy else None,
        )
        if self.budget is not None:
            self.budget.add(phase.id, number, call.tokens.cost)
        return call.result, call.tokens

    def guarded(self, phase: Phase, review: Review, guard: TreeGuard, scene: Scene) -> Review:
        """The review, failed when it changed files; those put back as they were."""
        changed = guard.changed()
        if not changed:
            return review
        why = "the reviewer changed files: " + ", ".join(changed)
        try:
            done, lost = guard.put_back(changed, self.paths.replaced(phase.id, "review"))
        except RestoreError as exc:
            return replace(review, failure=f"{why}; not put back: {exc}")
        with contextlib.suppress(OSError):  # a full disk: the failure still says it
            for restored in done:
                scene.out.write_line(f"--- {restored.line(Path.cwd())}")
        said = f"; not put back, too large to have been kept: {', '.join(lost)}" if lost else ""
        return replace(review, failure=f"{why} (put back{said})")


def _mark(scene: Scene, attempt: Attempt, number: int, session: str | None) -> None:
    if scene.mark is not None:
        scene.mark(attempt, number, session)


def _answered(result: AgentResult) -> bool:
    """The reviewer's CLI answered: it did not fail, whatever status line its text has or lacks."""
    return result.handoff.status is not None or result.message == NO_STATUS_LINE


def _fixable(attempt: Attempt) -> bool:
    """A fix round can help: the attempt failed on its review's findings or on its checks,
    not on a reviewer that gave no verdict, nor on an implementer that is blocked."""
    if attempt.ok or attempt.blocked:
        return False
    return attempt.review is None or attempt.review.failure is None
