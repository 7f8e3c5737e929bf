"""PhaseRunner: the attempt loop of one phase. Knows nothing of pytest or xdist."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .files import FileSnapshot, OutsideRoot, file_problems
from .plan import Phase, Plan
from .process import PhaseLog, RunningRecord, run_process, running_record_path
from .runtimes import AgentRequest, AgentResult, Runtime
from .state.lock import SessionPaths


@dataclass(frozen=True)
class CheckFailure:
    criterion: str
    command: str
    exit_code: int
    timed_out: bool
    tail: tuple[str, ...]


@dataclass(frozen=True)
class Attempt:
    number: int
    agent: AgentResult
    check_failures: tuple[CheckFailure, ...] = ()
    file_problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.agent.ok and not self.check_failures and not self.file_problems


@dataclass(frozen=True)
class PhaseOutcome:
    phase_id: str
    status: str  # completed | failed | blocked
    attempts: tuple[Attempt, ...]
    log: Path
    started: float  # epoch seconds
    finished: float

    @property
    def ok(self) -> bool:
        return self.status == "completed"


@dataclass(frozen=True)
class RunConfig:
    plan: Plan
    root: Path
    log_dir: Path
    timeout: float
    check_timeout: float
    max_retries: int


PromptBuilder = Callable[[Phase, int, "Attempt | None"], str]


def log_path(log_dir: Path, phase_id: str) -> Path:
    return log_dir / (re.sub(r"[^\w.-]+", "_", phase_id) + ".log")


class PhaseRunner:
    def __init__(self, config: RunConfig, runtime: Runtime, prompt: PromptBuilder) -> None:
        self.config = config
        self.runtime = runtime
        self.prompt = prompt
        self._base_env: dict[str, str] | None = None

    def run(self, phase: Phase) -> PhaseOutcome:
        cfg = self.config
        log = log_path(cfg.log_dir, phase.id)
        session = SessionPaths.for_plan(cfg.log_dir, cfg.plan, cfg.root).name
        with (
            RunningRecord(running_record_path(cfg.log_dir, session, os.getpid())) as record,
            PhaseLog.hold(log, record) as out,
        ):
            record.start(phase.id)  # on disk before the phase runs anything
            outcome = self._run(phase, out)
            # Only a phase that ended is cleared: after an exception the next run finds it
            # interrupted, as it may well be.
            record.clear()
        return outcome

    def _run(self, phase: Phase, out: PhaseLog) -> PhaseOutcome:
        cfg = self.config
        log = out.path
        started = time.time()
        blocked = self._preflight(phase, log)
        if blocked is not None:
            return PhaseOutcome(phase.id, "blocked", (blocked,), log, started, time.time())
        retries = cfg.max_retries if phase.max_retries is None else phase.max_retries
        try:
            before = FileSnapshot.take(cfg.root, phase)
        except OutsideRoot as refused:
            attempt = Attempt(0, AgentResult("blocked", str(refused)))
            return PhaseOutcome(phase.id, "blocked", (attempt,), log, started, time.time())
        attempts: list[Attempt] = []
        for number in range(1, retries + 2):
            if attempts:
                before.restore()  # what the failed attempt left half-done
            attempt = self._attempt(phase, number, attempts[-1] if attempts else None, out, before)
            attempts.append(attempt)
            if attempt.ok:
                return PhaseOutcome(
                    phase.id, "completed", tuple(attempts), log, started, time.time()
                )
            if attempt.agent.status == "blocked":  # the agent says it cannot: retrying won't help
                return PhaseOutcome(phase.id, "blocked", tuple(attempts), log, started, time.time())
        return PhaseOutcome(phase.id, "failed", tuple(attempts), log, started, time.time())

    def env(self, phase: Phase, attempt: int) -> dict[str, str]:
        if self._base_env is None:  # copying os.environ is not free: once, not at every attempt
            self._base_env = {
                **os.environ,
                "MAESTRO_PLAN": str(self.config.plan.path.resolve()),
                "MAESTRO_ROOT": str(self.config.root),
            }
        return {**self._base_env, "MAESTRO_PHASE_ID": phase.id, "MAESTRO_ATTEMPT": str(attempt)}

    def _attempt(
        self,
        phase: Phase,
        number: int,
        previous: Attempt | None,
        out: PhaseLog,
        before: FileSnapshot,
    ) -> Attempt:
        cfg = self.config
        out.write_line(f"=== attempt {number} ===")
        env = self.env(phase, number)
        request = AgentRequest(
            phase,
            self.prompt(phase, number, previous),
            number,
            cfg.root,
            env,
            self._timeout(phase),
            out.path,
        )
        agent = self.runtime.run(request)
        if not agent.ok:
            return Attempt(number, agent)
        return Attempt(
            number,
            agent,
            self._checks(phase, env, out.path),
            tuple(file_problems(cfg.root, phase, before)),
        )

    def _timeout(self, phase: Phase) -> float:
        return phase.timeout if phase.timeout is not None else self.config.timeout

    def _checks(self, phase: Phase, env: Mapping[str, str], log: Path) -> tuple[CheckFailure, ...]:
        """Every check runs, so the report shows all that fail, not only the first."""
        failures = []
        for check in phase.acceptance:
            if check.check is None:
                continue
            result = run_process(
                ["bash", "-c", check.check],
                cwd=self.config.root,
                env=env,
                timeout=self.config.check_timeout,
                log=log,
                header=f"$ {check.check}    # check: {check.criterion}",
            )
            if not result.ok:
                failures.append(
                    CheckFailure(
                        check.criterion,
                        check.check,
                        result.exit_code,
                        result.timed_out,
                        tuple(result.tail(15)),
                    )
                )
        return tuple(failures)

    def _preflight(self, phase: Phase, log: Path) -> Attempt | None:
        """A failing blocking assumption ends the phase as BLOCKED without an agent call."""
        for assumption in phase.assumptions:
            if assumption.verify is None:
                continue
            env = self.env(phase, 0)
            result = run_process(
                ["bash", "-c", assumption.verify],
                cwd=self.config.root,
                env=env,
                timeout=self.config.check_timeout,
                log=log,
                header=f"$ {assumption.verify}    # assumption: {assumption.claim}",
            )
            if not result.ok and assumption.severity == "blocking":
                failure = CheckFailure(
                    assumption.claim,
                    assumption.verify,
                    result.exit_code,
                    result.timed_out,
                    tuple(result.tail(15)),
                )
                message = f"pre-flight assumption failed: {assumption.claim}"
                return Attempt(0, AgentResult("blocked", message), (failure,))
        return None
