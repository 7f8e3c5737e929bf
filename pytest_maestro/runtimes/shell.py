"""The offline runtime: a phase's ``run:`` commands, with bash, one after another."""

from __future__ import annotations

import time

from ..processes.process import ProcessResult, run_process
from ..state.model import Status
from .base import AgentRequest, AgentResult


class ShellRuntime:
    name = "shell"
    autonomy = ""  # the plan's own commands: the plan is the consent

    def run(self, request: AgentRequest) -> AgentResult:
        deadline = time.monotonic() + request.timeout
        done: list[ProcessResult] = []
        for command in request.phase.run:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return AgentResult(
                    Status.FAILED, f"timed out after {request.timeout:g}s", tuple(done)
                )
            result = run_process(
                ["bash", "-c", command],
                cwd=request.root,
                env=request.env,
                timeout=remaining,
                log=request.log,
                header=f"$ {command}",
            )
            done.append(result)
            if result.timed_out:
                return AgentResult(
                    Status.FAILED, f"timed out after {request.timeout:g}s: {command}", tuple(done)
                )
            if result.exit_code != 0:
                return AgentResult(
                    Status.FAILED, f"command exited {result.exit_code}: {command}", tuple(done)
                )
        return AgentResult(Status.COMPLETED, f"{len(done)} command(s) succeeded", tuple(done))
