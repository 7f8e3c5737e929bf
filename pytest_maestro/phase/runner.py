"""PhaseRunner: the attempt loop of one phase. Knows nothing of pytest or xdist.

See docs/architecture.md, "The flow of one phase from plan to JUnit"."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..files.declared import FileSnapshot, OutsideRoot, file_problems
from ..files.putback import Restored, RestoreError, keep_aside
from ..git import changed_files, changed_since
from ..isolation import IsolationError
from ..plan import Phase, Plan
from ..processes.leftovers import RunningRecord
from ..processes.process import LOG_LIMIT, PhaseLog, environment, run_process
from ..runtimes import AgentRequest, AgentResult, Runtime
from ..runtimes.agents import Agent
from ..state.model import Status
from ..state.paths import SessionPaths
from ..texts import shown
from .agent_call import call_agent
from .budget import Budget
from .events import ACTIVITY, RETRY, STARTED, WAITING, Progress, Teller
from .isolated import bring_back, out_of_scope
from .loop_record import LoopRecord, drop, going_on
from .outcome import Attempt, CheckFailure, PhaseOutcome
from .slots import AccountSlots

if TYPE_CHECKING:  # a run without --maestro-isolate, or without reviews, imports none of it
    from ..isolation.worktree import Isolation, Workspace
    from .review import PhaseReview
    from .rounds import FixRound


@dataclass(frozen=True)
class RunConfig:
    plan: Plan
    root: Path
    paths: SessionPaths  # where the phase's log, pre-images and running record go
    timeout: float
    check_timeout: float
    max_retries: int
    agent: Agent | None = None
    model: str | None = None
    autonomous: bool = False
    # An agent CLI's word needs proof: its handoff is asked for, files outside the declared
    # ones are looked for, and a pass without any check command is "unverified".
    agent_cli: bool = False
    strict_files: bool = False  # a change outside the declared files fails the attempt
    max_wait: float = 900.0  # seconds the phase may wait out rate limits
    budget: Budget | None = None
    ignored: tuple[str, ...] = (".maestro/",)  # paths no agent is blamed for (the state dir)
    # Files that phases running beside this one declare: their changes are not this phase's.
    concurrent_files: frozenset[str] = frozenset()
    log_limit: int = LOG_LIMIT  # bytes one attempt may leave in the log
    isolation: Isolation | None = None  # each phase in a worktree of its own, merged back
    progress: Progress | None = None  # told when the phase starts, retries, waits
    slots: AccountSlots | None = None  # the account's call slots: an agent CLI's calls wait
    # The plan's real path (MAESTRO_PLAN), resolved once per run rather than at every phase.
    plan_path: Path | None = None
    review: PhaseReview | None = None  # a reviewer judges each attempt whose checks passed
    definition: str = ""  # the phase's fingerprint, which a loop record must match to go on
    # The root is a copy thrown away after the phase (a remote worker's work tree): nothing is
    # saved to put back; ``scope`` names what the copy's changes could not bring back.
    disposable: bool = False
    scope: Callable[[Phase], list[str]] | None = None
    # Records the phase's start in the session (where this process holds it): while its first
    # command runs, or as it ends when none ran.
    started: Callable[[], object] | None = None


PromptBuilder = Callable[[Phase, int, "Attempt | None"], str]


class PhaseRunner:
    def __init__(self, config: RunConfig, runtime: Runtime, prompt: PromptBuilder) -> None:
        self.config = config
        self.runtime = runtime
        self.prompt = prompt
        self._base_env: dict[str, str] | None = None
        self.root = config.root  # where the phase runs: its worktree when isolated
        self.space: Workspace | None = None  # that worktree
        self.notes: list[str] = []  # for the run's summary: a killed run's loop started over

    def run(self, phase: Phase) -> PhaseOutcome:
        cfg = self.config
        log = cfg.paths.log(phase.id)
        with (
            RunningRecord(cfg.paths.running_record(os.getpid())) as record,
            PhaseLog.hold(log, record, cfg.log_limit) as out,
        ):
            # On disk before the phase runs anything when it has files to put back after a crash
            # of the machine; a phase without declared files only reruns, record or not.
            # An isolated phase writes into the user's tree only when merged back, with
            # pre-images taken first: whatever it declares, its start must be on disk.
            isolated = cfg.isolation is not None
            record.start(phase.id, durable=bool(phase.files.all()) or isolated)
            if cfg.started is not None:
                out.meanwhile.append(cfg.started)
            try:
                outcome = self._isolated(phase, out) if isolated else self._run(phase, out)
            finally:
                out.run_meanwhile()  # no command ran
            if self.notes:
                outcome = replace(outcome, warnings=(*outcome.warnings, *self.notes))
            # Only a phase that ended is cleared: after an exception the next run finds it
            # interrupted, as it may well be. A failed phase's files are back as they were: its
            # pre-images go. A completed one's stay until the session has it completed
            # (``Recorder.settle``): a kill before that makes the next run put its files back
            # and run it again, never run it again on top of its own work.
            if not outcome.ok:
                drop(cfg.paths.loop_record(phase.id))  # first: it needs the pre-images
                cfg.paths.preimage(phase.id).unlink(missing_ok=True)
            record.clear()
        return outcome

    def _run(self, phase: Phase, out: PhaseLog) -> PhaseOutcome:
        cfg = self.config
        log = out.path
        started = time.time()
        retries = cfg.max_retries if phase.max_retries is None else phase.max_retries
        tell = Teller(phase.id, started, retries + 1, cfg.progress)
        tell(STARTED, 1, "")
        blocked = self._preflight(phase, log)
        if blocked is not None:
            return PhaseOutcome(phase.id, Status.BLOCKED, (blocked,), log, started, time.time())
        # A worktree, or a remote worker's copy, is thrown away, not restored.
        restores = cfg.isolation is None and not cfg.disposable
        left, before, stuck = self._left_off(phase, out) if restores else (None, None, None)
        if stuck is not None:  # the files a killed run's loop left could not be put back
            attempt = Attempt(0, AgentResult(Status.FAILED, f"not put back: {stuck}"))
            end = PhaseOutcome(phase.id, Status.FAILED, (attempt,), log, started, time.time())
            return replace(end, not_put_back=stuck)
        if before is None:
            try:
                before = FileSnapshot.take(self.root, phase)
            except OutsideRoot as refused:
                attempt = Attempt(0, AgentResult(Status.BLOCKED, str(refused)))
                return PhaseOutcome(phase.id, Status.BLOCKED, (attempt,), log, started, time.time())
            preimage = cfg.paths.preimage(phase.id)
            if before.contents and restores:
                before.save(preimage)
            else:  # none of its declared files exists yet: an earlier run's are not to be put back
                preimage.unlink(missing_ok=True)
        outcome, ran = self._attempts(phase, out, before, tell, retries, left)
        ran = ran or (left.attempt if left is not None else 0)  # a loop left half-way ran too
        if outcome.ok or not restores or outcome.not_put_back or not before.contents or not ran:
            return outcome
        # A failed phase leaves nothing half-done: its last attempt's output is kept, and named.
        put, error = self._put_back(phase, before, f"attempt-{ran}", out)
        return replace(outcome, put_back=put, not_put_back=error)

    def _attempts(
        self,
        phase: Phase,
        out: PhaseLog,
        before: FileSnapshot,
        tell: Teller,
        retries: int,
        left: LoopRecord | None = None,
    ) -> tuple[PhaseOutcome, int]:
        """Up to ``1 + retries`` attempts, before each retry the declared files put back; and
        the number of the last attempt that ran (0: none did). With ``left``, the first is the
        attempt a killed run's review loop left, going on from there."""
        cfg, started = self.config, tell.started
        attempts: list[Attempt] = []
        status, ran, stuck = Status.FAILED, 0, None
        first = left.attempt if left is not None else 1
        for number in range(first, max(first, retries + 1) + 1):
            spent = cfg.budget.refusal(phase.id, phase.budget_usd) if cfg.budget else None
            if spent is not None:  # no new attempt past a budget; retrying won't help
                attempts.append(Attempt(number, AgentResult(Status.FAILED, spent)))
                break
            if attempts:  # what the failed attempt left half-done, kept aside
                tell(RETRY, number, attempts[-1].problem)
                drop(cfg.paths.loop_record(phase.id))  # that attempt's loop is over
                _, stuck = self._put_back(phase, before, f"attempt-{number - 1}", out)
                if stuck is not None:  # the next attempt would start from half-done files
                    break
            out.begin_attempt()
            previous = attempts[-1] if attempts else None
            if left is not None and not attempts:
                attempt = left.resumed(phase)
            else:
                attempt = self._attempt(phase, number, previous, out, before, tell)
            # Its own checks passed (or a killed run's loop had it reviewed): a reviewer's turn.
            if cfg.review is not None and (attempt.ok or attempt.review is not None):
                from .review import Scene

                redo = partial(self._attempt, phase, number, out=out, before=before, tell=tell)
                mark = partial(self._mark, phase, out) if cfg.isolation is None else None
                scene = Scene(self.root, before, out, self.env(phase, number), tell, redo, mark)
                attempt = cfg.review(phase, attempt, scene)
            attempts.append(attempt)
            ran = number
            if attempt.ok:
                status = Status.COMPLETED
                break
            if attempt.blocked:  # the agent says it cannot, or its reviewer cannot: no retry
                status = Status.BLOCKED
                break
            if attempt.rounds:  # its fix rounds, the late ones afresh, stood in for retries
                break
        # A review that passed verified it, as a check command does.
        verified = bool(attempts) and (attempts[-1].checked or attempts[-1].review is not None)
        unverified = status is Status.COMPLETED and cfg.agent_cli and not verified
        end = PhaseOutcome(
            phase.id,
            status,
            tuple(attempts),
            out.path,
            started,
            time.time(),
            unverified=unverified,
            not_put_back=stuck,
        )
        return end, ran

    def _left_off(
        self, phase: Phase, out: PhaseLog
    ) -> tuple[LoopRecord | None, FileSnapshot | None, str | None]:
        """The loop a killed run left, if it goes on, and the pre-images it goes on against; one
        that does not has its files put back, and the third item says why that failed."""
        cfg = self.config
        why_not = cfg.review.why_not_resume if cfg.review else None
        record, before, why = going_on(cfg.paths, self.root, phase, cfg.definition, why_not)
        if record is not None:
            out.write_line(f"--- goes on with a killed run's review loop after {record.point}")
            return record, before, None
        if why is None:  # none was left
            return None, None, None
        self.notes.append(f"the review loop a killed run left starts over: {why}")
        out.write_line(f"--- {self.notes[-1]}")
        drop(cfg.paths.loop_record(phase.id))
        if before is None:
            return None, None, None
        _, stuck = self._put_back(phase, before, "interrupted", out)
        return None, before, stuck

    def _mark(
        self, phase: Phase, out: PhaseLog, attempt: Attempt, number: int, session: str | None
    ) -> None:
        """Where the review loop stands, on disk: a killed run's next run goes on from here."""
        record = LoopRecord.of(phase, self.config.definition, attempt, number, session, self.root)
        failed = record.keep(self.config.paths.loop_record(phase.id))
        if failed is not None:  # the loop goes on; only a kill now makes it start over
            out.write_line(f"--- where the review loop stands is not kept: {failed}")

    def _put_back(
        self, phase: Phase, before: FileSnapshot, why: str, out: PhaseLog
    ) -> tuple[tuple[Restored, ...], str | None]:
        """The declared files put back, each line in the log; or why they could not be, with
        the pre-images moved to a name no run reuses: the next run of the phase saves its own."""
        cfg = self.config
        restored: tuple[Restored, ...] = ()
        error: str | None = None
        try:
            restored = tuple(before.restore(cfg.paths.replaced(phase.id, why)))
        except RestoreError as exc:
            error = str(exc)
            moved = keep_aside(cfg.paths.preimage(phase.id), cfg.paths.kept_preimage(phase.id))
            if moved is not None:
                error += f"; its files from before the phase are in {shown(moved, self.root)}"
        lines = (
            [r.line(self.root) for r in restored] if error is None else [f"not put back: {error}"]
        )
        with contextlib.suppress(OSError):  # a full disk: the report still says it
            for line in lines:
                out.write_line(f"--- {line}")
        return restored, error

    def _isolated(self, phase: Phase, out: PhaseLog) -> PhaseOutcome:
        """The phase in a worktree of its own; then its result merged back, or kept."""
        cfg = self.config
        assert cfg.isolation is not None
        started = time.time()
        try:
            space = cfg.isolation.open(phase.id)
        except IsolationError as exc:
            attempt = Attempt(0, AgentResult(Status.BLOCKED, f"no worktree for the phase: {exc}"))
            return PhaseOutcome(
                phase.id, Status.BLOCKED, (attempt,), out.path, started, time.time()
            )
        out.write_line(f"--- worktree {space.path} at {space.start[:12]}")
        self.root, self.space = space.root, space
        try:
            outcome = self._run(phase, out)
            return bring_back(space, phase, outcome, out, cfg.paths)
        except BaseException:
            with contextlib.suppress(Exception):  # interrupted: its work outlives the worktree
                kept = space.keep("the phase was interrupted", phase.name)
                if kept:
                    out.write_line(f"--- {kept}")
            raise
        finally:
            for line in space.release():
                out.write_line(f"--- {line}")

    def env(self, phase: Phase, attempt: int) -> dict[str, str]:
        if self._base_env is None:  # copying os.environ is not free: once, not at every attempt
            self._base_env = {
                **environment(),
                "MAESTRO_PLAN": str(self.config.plan_path or self.config.plan.path.resolve()),
                "MAESTRO_ROOT": str(self.root),
                "MAESTRO_PROJECT_ROOT": str(self.config.root),
            }
        return {**self._base_env, "MAESTRO_PHASE_ID": phase.id, "MAESTRO_ATTEMPT": str(attempt)}

    def _attempt(
        self,
        phase: Phase,
        number: int,
        previous: Attempt | None,
        out: PhaseLog,
        before: FileSnapshot,
        tell: Teller,
        fix: FixRound | None = None,
    ) -> Attempt:
        cfg = self.config
        out.write_line(f"=== attempt {number}{fix.label if fix else ''} ===")
        env = self.env(phase, number)
        request = AgentRequest(
            phase,
            self.prompt(phase, number, previous),
            number,
            self.root,
            env,
            self._timeout(phase),
            out.path,
            agent=cfg.agent,
            model=cfg.model,
            autonomous=cfg.autonomous,
            budget_usd=cfg.budget.left(phase.id, phase.budget_usd) if cfg.budget else None,
            activity=lambda did: tell(ACTIVITY, number, did.text(), turn=did.turn),
        )
        if fix is not None:  # a fix round after a review: its own prompt, model, session
            request = fix.apply(request)
        dirty = changed_files(self.root) if cfg.agent_cli else None
        call = call_agent(
            self.runtime,
            request,
            max_wait=cfg.max_wait,
            ask_again=cfg.agent_cli,
            note=out.write_line,
            waiting=lambda delay, why: tell(WAITING, number, why, delay),
            slots=cfg.slots if self.runtime.autonomy else None,  # a command is never paced
        )
        if cfg.budget is not None:
            cfg.budget.add(phase.id, number, call.tokens.cost)
        agent = call.result
        if not agent.ok:
            return Attempt(number, agent, tokens=call.tokens)
        problems = file_problems(self.root, phase, before)
        if self.space is not None:  # what could not come back fails it while it can retry
            problems += out_of_scope(self.space, phase)
        if cfg.scope is not None:
            problems += cfg.scope(phase)
        outside: tuple[str, ...] = ()
        if dirty is not None:
            declared = set(phase.files.all()) | cfg.concurrent_files
            changed = changed_since(self.root, dirty, ignore=cfg.ignored)
            outside = tuple(path for path in changed if path not in declared)
            if outside and cfg.strict_files:
                problems.append(
                    "changed files outside its declared ones (--maestro-strict-files): "
                    + ", ".join(outside)
                )
        return Attempt(
            number,
            agent,
            self._checks(phase, env, out.path),
            tuple(problems),
            call.tokens,
            outside,
            checked=any(check.check for check in phase.acceptance),
        )

    def _timeout(self, phase: Phase) -> float:
        return phase.timeout if phase.timeout is not None else self.config.timeout

    def _checks(self, phase: Phase, env: Mapping[str, str], log: Path) -> tuple[CheckFailure, ...]:
        """Every check runs, so the report shows all that fail, not only the first."""
        failures = []
        for check in phase.acceptance:
            if check.check is None:
                continue
            failure = self._verify(check.check, "check", check.criterion, env, log)
            if failure is not None:
                failures.append(failure)
        return tuple(failures)

    def _preflight(self, phase: Phase, log: Path) -> Attempt | None:
        """A failing blocking assumption ends the phase as BLOCKED without an agent call."""
        for assumption in phase.assumptions:
            if assumption.verify is None:
                continue
            env = self.env(phase, 0)
            failure = self._verify(assumption.verify, "assumption", assumption.claim, env, log)
            if failure is not None and assumption.severity == "blocking":
                message = f"pre-flight assumption failed: {assumption.claim}"
                return Attempt(0, AgentResult(Status.BLOCKED, message), (failure,))
        return None

    def _verify(
        self, command: str, kind: str, claim: str, env: Mapping[str, str], log: Path
    ) -> CheckFailure | None:
        """Run a check's or an assumption's command in the root; how it failed, or None."""
        result = run_process(
            ["bash", "-c", command],
            cwd=self.root,
            env=env,
            timeout=self.config.check_timeout,
            log=log,
            header=f"$ {command}    # {kind}: {claim}",
        )
        if result.ok:
            return None
        return CheckFailure(
            claim, command, result.exit_code, result.timed_out, tuple(result.tail(15))
        )
