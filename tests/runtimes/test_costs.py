"""Cost where an agent CLI reports only tokens (estimated from a price table), and copilot's
premium requests where it reports no tokens: from the price lookup to every place a cost shows."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from pytest_maestro.runtimes.prices import estimate
from pytest_maestro.state import read_session
from pytest_maestro.state.model import PhaseState, Tokens

from ..helpers import FAKES, write_plan


def test_a_known_model_s_tokens_are_priced_and_marked_estimated() -> None:
    # gpt-5-codex: $1.25 per million input tokens, $0.125 cached, $10 output.
    priced = estimate(Tokens(900_000, 100_000, 100_000), "gpt-5-codex", "openai")
    assert (round(priced.cost, 6), priced.estimated, priced.unpriced) == (2.1375, True, ())
    # opencode's provider/model names its own provider.
    assert estimate(Tokens(100_000), "anthropic/claude-sonnet-4-5").cost == pytest.approx(0.3)


def test_an_unknown_model_gets_no_cost_and_says_so() -> None:
    assert estimate(Tokens(10, 5), "no-such-model-9", "openai") == Tokens(
        10, 5, unpriced=("no-such-model-9",)
    )
    assert estimate(Tokens(10, 5), None, "openai").unpriced == ("",)  # no model named


def test_a_cost_the_cli_gave_or_no_tokens_are_left_as_they_are() -> None:
    assert estimate(Tokens(10, 5, 0, 0.5), "gpt-5-codex", "openai") == Tokens(10, 5, 0, 0.5)
    assert estimate(Tokens(premium_requests=2), None, "openai") == Tokens(premium_requests=2)


def test_estimates_and_premium_requests_survive_the_session_and_old_ones_load() -> None:
    spent = Tokens(1, 2, 0, 0.25, estimated=True) + Tokens(premium_requests=2, unpriced=("x",))
    raw = PhaseState("p", "p", tokens=spent).to_dict()
    assert PhaseState.from_mapping(raw).tokens == spent
    old = {"id": "p", "tokens": {"input": 1, "output": 2, "cached": 0, "cost": 0.25}}
    assert PhaseState.from_mapping(old).tokens == Tokens(1, 2, 0, 0.25)


@pytest.fixture
def fakes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")


def _phase(pid: str, task: str, **fields: Any) -> dict[str, Any]:
    return {"id": pid, "name": f"Phase {pid}", "description": task, "reads": ["R"], **fields}


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any], str]:
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--junitxml=out.xml", "--maestro-report=report.md",
        "-p", "no:randomly", *args,
    )  # fmt: skip
    summary = json.loads((pytester.path / ".maestro" / "summary.json").read_text())
    return result, summary, (pytester.path / "out.xml").read_text()


@pytest.mark.usefixtures("fakes")
def test_codex_and_gemini_costs_are_estimated_and_an_unknown_model_says_so(
    pytester: pytest.Pytester,
) -> None:
    write_plan(
        pytester,
        [
            _phase("cx", "FAKE:TOKENS in=1000000 out=100000", runtime="codex", model="gpt-5-codex"),
            # no model given: the one gemini reports in its stats
            _phase("gm", "FAKE:TOKENS in=100000 out=10000", runtime="gemini"),
            _phase("odd", "FAKE:TOKENS in=10 out=5", runtime="codex", model="m-unknown"),
        ],
    )
    result, summary, junit = _run(pytester)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "cx *1000000/100000*$2.25 estimated*",
            "gm *100000/10000*$0.2250 estimated*",
            "odd *10/5*unknown model m-unknown*",
            "*; cost $2.48 (estimated; unknown model m-unknown: not counted)",
        ]
    )
    phases = {p["id"]: p for p in summary["phases"]}
    assert (phases["cx"]["cost"], phases["cx"]["cost_estimated"]) == (2.25, True)
    assert (phases["odd"]["cost"], phases["odd"]["unpriced_models"]) == (0, ["m-unknown"])
    assert (summary["cost"], summary["cost_estimated"]) == (2.475, True)
    assert '<property name="maestro.cx.cost_estimated" value="True"' in junit
    assert '<property name="maestro.odd.unpriced" value="unknown model m-unknown"' in junit
    assert 'name="maestro.odd.cost"' not in junit  # no figure made up
    assert "| $2.25 estimated |" in (pytester.path / "report.md").read_text()
    status = pytester.runpytest("--maestro", "plan.yaml", "--maestro-status")
    status.stdout.fnmatch_lines(["gm *$0.2250 estimated*"])


@pytest.mark.usefixtures("fakes")
def test_the_run_budget_counts_estimated_costs(pytester: pytest.Pytester) -> None:
    costly = "FAKE:TOKENS in=1000000 out=100000"
    write_plan(
        pytester,
        [
            _phase("a", costly, runtime="codex", model="gpt-5-codex"),
            _phase("b", costly, runtime="codex", model="gpt-5-codex", blocked_by=["a"]),
        ],
    )
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-budget-usd=2", "-p", "no:randomly"
    )
    result.stdout.fnmatch_lines(["*the run's budget of $2 is spent*"])
    [snapshot] = (pytester.path / ".maestro").glob("plan-*.md")
    assert read_session(snapshot).phases["b"].status.value == "pending"


@pytest.mark.usefixtures("fakes")
def test_copilot_s_premium_requests_are_shown_where_it_reports_no_tokens(
    pytester: pytest.Pytester,
) -> None:
    write_plan(pytester, [_phase("cp", "FAKE:TOKENS in=0 out=0 premium=2", runtime="copilot")])
    result, summary, junit = _run(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["cp *2 premium requests*", "*0 cached, 2 premium requests; *"])
    [phase] = summary["phases"]
    assert (phase["premium_requests"], phase["tokens"]["input"]) == (2, 0)
    assert summary["premium_requests"] == 2
    assert '<property name="maestro.cp.premium_requests" value="2"' in junit
    assert "| 2 premium requests |" in (pytester.path / "report.md").read_text()
    [snapshot] = (pytester.path / ".maestro").glob("plan-*.md")
    assert read_session(snapshot).phases["cp"].tokens.premium_requests == 2
    assert "- Premium requests: 2" in snapshot.read_text()
