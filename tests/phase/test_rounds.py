"""How each fix round calls the implementer: resumed, afresh, or afresh on the escalation
model; and what it makes of the attempt's request."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_maestro.phase.outcome import Attempt
from pytest_maestro.phase.rounds import RESUMED, FixRound, plan_round
from pytest_maestro.plan import Phase
from pytest_maestro.review.verdict import CriterionVerdict, Review, Verdict
from pytest_maestro.runtimes import BUILTIN_RUNTIMES, AgentRequest, AgentResult
from pytest_maestro.runtimes.cli import CliRuntime
from pytest_maestro.state.model import Status

RUNTIMES = {runtime.name: runtime for runtime in BUILTIN_RUNTIMES}
VERDICT = Verdict((CriterionVerdict(1, "it greets", False, "no greeting"),), ())
LAST = Attempt(
    1,
    AgentResult(Status.COMPLETED, "COMPLETED: done", session_id="s-1"),
    review=Review("spec", "reviewer (claude)", VERDICT),
)


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini", "opencode", "copilot"])
@pytest.mark.parametrize("number", range(1, RESUMED + 1))
def test_the_first_rounds_go_on_with_the_implementer_s_session(number: int, cli: str) -> None:
    fix = plan_round(number, RUNTIMES[cli], LAST, "s-1", "big")
    assert (fix.resume, fix.model, fix.how) == ("s-1", None, "resumes session s-1")
    assert fix.prompt is not None and fix.prompt.startswith(f"Fix round: {number}\n")
    assert "criterion 1 not met: it greets (no greeting)" in fix.prompt
    assert fix.prompt.rstrip().endswith("BLOCKED: <what stops you>")  # the status line asked for


def test_a_runtime_without_sessions_or_a_call_that_named_none_starts_afresh() -> None:
    # An agent's own command: how it would go on with a session is not known.
    command = plan_round(1, RUNTIMES["command"], LAST, "s-1", "big")
    assert (command.resume, command.prompt, command.how) == (
        None,
        None,
        "afresh (command resumes no session)",
    )
    unnamed = plan_round(2, RUNTIMES["codex"], LAST, None, "big")
    assert (unnamed.resume, unnamed.how) == (None, "afresh (no session to resume)")


def test_later_rounds_start_afresh_on_the_escalation_model_or_the_phase_s() -> None:
    late = plan_round(RESUMED + 1, RUNTIMES["claude"], LAST, "s-1", "big")
    assert (late.resume, late.prompt, late.model, late.how) == (
        None,
        None,
        "big",
        "afresh on model big",
    )
    assert plan_round(5, RUNTIMES["claude"], LAST, "s-1", None).model is None


def test_a_round_makes_the_attempt_s_request_its_own(tmp_path: Path) -> None:
    request = AgentRequest(
        Phase("p", "P"), "the phase's prompt", 1, tmp_path, {"A": "1"}, 60, tmp_path / "p.log",
        model="small",
    )  # fmt: skip
    resumed = FixRound(2, "resumes session s-1", "fix it", resume="s-1").apply(request)
    assert (resumed.prompt, resumed.model, resumed.resume) == ("fix it", "small", "s-1")
    assert resumed.env == {"A": "1", "MAESTRO_REVIEW_ROUND": "2"}
    assert resumed.attempt_file(".prompt.md").name == "p.attempt-1.round-2.prompt.md"
    fresh = FixRound(4, "afresh on model big", model="big").apply(request)
    assert (fresh.prompt, fresh.model, fresh.resume) == ("the phase's prompt", "big", None)


# How each CLI that ``resumes`` goes on with a session, from its own --help.
GOES_ON = {
    "claude": ["--resume", "s-1"],
    "codex": ["resume", "s-1"],
    "gemini": ["--resume", "s-1"],
    "opencode": ["--session", "s-1"],
    "copilot": ["--resume", "s-1"],
}


@pytest.mark.parametrize("cli", sorted(GOES_ON))
def test_a_resumed_round_names_the_session_on_the_cli_s_command_line(
    tmp_path: Path, cli: str
) -> None:
    runtime = RUNTIMES[cli]
    assert isinstance(runtime, CliRuntime) and runtime.resumes
    request = AgentRequest(
        Phase("p", "P"), "fix it", 1, tmp_path, {}, 60, tmp_path / "p.log", model="small"
    )
    prompt = tmp_path / "p.prompt.md"
    fresh = runtime.argv(request, prompt)
    resumed = runtime.argv(replace(request, resume="s-1"), prompt)
    words = GOES_ON[cli]
    assert "s-1" not in fresh
    at = resumed.index(words[0])
    assert resumed[at : at + 2] == words, resumed
