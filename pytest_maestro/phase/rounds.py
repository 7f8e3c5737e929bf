"""Fix rounds: after a review that found what to fix, the implementer fixes it and the work is
reviewed again, up to ``--maestro-review-rounds`` times, counted apart from attempts.

Rounds 1 to ``RESUMED`` go on with the implementer's own CLI session, told only the findings: it
knows the task and what it did, so such a round costs little. A runtime that cannot go on with a
session, or a call that named none, starts afresh instead, with the whole task and the findings.
Later rounds start afresh on the escalation model (``escalate_model:``, else
``--maestro-escalate-model``, else the phase's own). A round's files are the attempt's as it left
them: it fixes the work, it does not redo it. See docs/architecture.md, "Review gates".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..runtimes import AgentRequest, Runtime
from .outcome import Attempt
from .prompt import OUTPUT_FORMAT, failure_summary

RESUMED = 3  # rounds that go on with the implementer's session; later ones start afresh


@dataclass(frozen=True)
class FixRound:
    """How one fix round calls the implementer."""

    number: int  # 1-based
    how: str  # what the log and the progress line say of it
    prompt: str | None = None  # a resumed round's; None: the phase's own, with what failed
    model: str | None = None  # None: the phase's
    resume: str | None = None  # the CLI session it goes on with

    @property
    def label(self) -> str:
        """What the log's attempt header adds: ``, fix round 2: resumes session …``."""
        return f", fix round {self.number}: {self.how}"

    def apply(self, request: AgentRequest) -> AgentRequest:
        """The attempt's request made this round's: its prompt (a resumed round's own), model,
        session, its files apart (``round-N``), and MAESTRO_REVIEW_ROUND in its environment."""
        env = {**request.env, "MAESTRO_REVIEW_ROUND": str(self.number)}
        return replace(
            request,
            prompt=self.prompt or request.prompt,
            env=env,
            model=self.model or request.model,
            resume=self.resume,
            role=f"round-{self.number}",
        )


def plan_round(
    number: int, runtime: Runtime, last: Attempt, session: str | None, escalate: str | None
) -> FixRound:
    """Round ``number`` after ``last``, whose implementer's session was ``session``."""
    if number > RESUMED:
        how = f"afresh on model {escalate}" if escalate else "afresh"
        return FixRound(number, how, model=escalate)
    if session and getattr(runtime, "resumes", False):
        prompt = fix_prompt(last, number)
        return FixRound(number, f"resumes session {session}", prompt, resume=session)
    why = "no session to resume" if session is None else f"{runtime.name} resumes no session"
    return FixRound(number, f"afresh ({why})")


def fix_prompt(last: Attempt, number: int) -> str:
    """What a resumed session is told: what the review found (and what still fails), and to
    report as before."""
    return "\n\n".join(
        [
            f"Fix round: {number}",
            "## What the review of your work found\n" + failure_summary(last),
            "Fix every blocking finding and every criterion not met, in the files the phase "
            "declares and no others; run the acceptance criteria's commands again. Do not "
            "stage or commit.",
            OUTPUT_FORMAT,
        ]
    )
