"""What the real agent CLIs were seen doing (tests/conformance), through their stand-ins in
tests/fakes, which now do the same: no credentials, caps, refused calls, root, retries, PWD."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.plan.model import Phase
from pytest_maestro.processes.process import ProcessResult
from pytest_maestro.runtimes import AgentRequest, cli
from pytest_maestro.runtimes.cli import CliRuntime

from ..helpers import FIXTURES
from .test_runtimes import AGENT_CLIS, FAKES, RUNTIMES, run

# The CLI's own words, as each stand-in prints them (from the real releases in .ci/clis.txt).
NO_AUTH_WORDS = {
    "claude": "Not logged in · Please run /login",
    "codex": "401 Unauthorized",
    "gemini": "exited 41 (authentication failed)",
    "copilot": "Error: No authentication information found.",
    "opencode": "invalid x-api-key",
}


@pytest.fixture(autouse=True)
def _fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_AGENT_STATE", str(tmp_path / "fake-state"))


@pytest.mark.parametrize("name", AGENT_CLIS)
def test_no_credentials_blocks_at_once_with_the_cli_s_words(name: str, tmp_path: Path) -> None:
    result = run(name, tmp_path, "Attempt: 1\nFAKE:NO_AUTH\n", autonomous=True)
    assert result.status == "blocked", result.message
    assert NO_AUTH_WORDS[name] in result.message
    assert "\n" not in result.message


def test_claude_at_its_budget_cap_says_why_and_counts_the_tokens(tmp_path: Path) -> None:
    result = run("claude", tmp_path, "Attempt: 1\nFAKE:CAP\nFAKE:TOKENS in=300 out=40 cost=0.02")
    assert result.status == "failed"
    assert result.message.endswith("error_max_budget_usd: Reached maximum budget ($0.001)")
    assert result.tokens is not None
    assert (result.tokens.input, result.tokens.output, result.tokens.cost) == (300, 40, 0.02)


def test_claude_as_root_without_a_sandbox_says_what_it_refuses_and_how_to_allow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("claude refuses only as root")
    monkeypatch.delenv("IS_SANDBOX")
    result = run("claude", tmp_path, "Attempt: 1\nFAKE:SUCCEED\n", autonomous=True)
    assert result.status == "blocked"
    assert "cannot be used with root/sudo privileges" in result.message
    assert "IS_SANDBOX=1" in result.message and "never sets it" in result.message


def request(tmp_path: Path, env: dict[str, str]) -> AgentRequest:
    return AgentRequest(Phase("p", "P"), "x", 1, tmp_path, env, 60, tmp_path / "p.log")


@pytest.mark.parametrize("name", AGENT_CLIS)
def test_every_cli_runs_with_pwd_naming_the_project_root(name: str, tmp_path: Path) -> None:
    runtime = RUNTIMES[name]
    assert isinstance(runtime, CliRuntime)
    env = runtime.environment(request(tmp_path, {"PWD": "/elsewhere"}))
    assert env["PWD"] == str(tmp_path)


def test_claude_s_own_silent_retries_are_bounded_unless_the_user_set_them(
    tmp_path: Path,
) -> None:
    runtime = RUNTIMES["claude"]
    assert isinstance(runtime, CliRuntime)
    assert runtime.environment(request(tmp_path, {}))["CLAUDE_CODE_MAX_RETRIES"] == "2"
    mine = runtime.environment(request(tmp_path, {"CLAUDE_CODE_MAX_RETRIES": "7"}))
    assert mine["CLAUDE_CODE_MAX_RETRIES"] == "7"


def test_codex_without_a_network_is_ended_and_blocked_at_its_first_reconnect(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    result = run("codex", tmp_path, "Attempt: 1\nFAKE:NO_NETWORK\n", autonomous=True, timeout=60)
    assert result.status == "blocked", result.message
    assert "failed to lookup address information" in result.message
    assert time.monotonic() - started < 20  # not the phase's timeout


# What gemini 0.61.0 printed on stderr, retrying an API that answered every request 429
# (tests/conformance), its bundle's path made /repo/.clis: stack traces between the lines that
# say so.
GEMINI_RETRYING = (FIXTURES / "streams" / "gemini-429.stderr").read_text()
GEMINI_NOTICES = (
    "Warning: 256-color support not detected. Using a terminal with at least 256-color support is"
    " recommended for a better visual experience.\n"
    "YOLO mode is enabled. All tool calls will be automatically approved.\n"
)


def timed_out_with(stderr: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The message of a gemini call that ran into its 20 s timeout having printed ``stderr``."""

    def timing_out(argv: list[str], **given: Any) -> ProcessResult:
        given["stderr_file"].write_text(stderr)
        return ProcessResult(tuple(argv), -15, True, 20.0, given["log"], 0)

    monkeypatch.setattr(cli, "run_process", timing_out)
    runtime = RUNTIMES["gemini"]
    result = runtime.run(replace(request(tmp_path, {}), timeout=20, autonomous=True))
    assert result.status == "failed" and not result.limited
    return result.message


def test_a_gemini_timeout_says_it_was_retrying_a_rate_limit_in_its_own_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = timed_out_with(GEMINI_RETRYING, tmp_path, monkeypatch)
    assert message.startswith("timed out after 20s while gemini was retrying a rate limit")
    assert "general.maxAttempts" in message  # what bounds its retries
    assert message.endswith(
        ": Attempt 2 failed with status 429. Retrying with backoff... _ApiError: "
        '{"error":{"code":429,"message":"Rate limit reached for requests",'
        '"status":"RESOURCE_EXHAUSTED"}}'
    )


def test_a_gemini_timeout_without_a_rate_limit_on_its_stderr_says_only_that(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert timed_out_with(GEMINI_NOTICES, tmp_path, monkeypatch) == "timed out after 20s"
