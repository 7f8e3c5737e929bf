"""Copilot's premium requests where it reports no tokens, and the marks of a cost, carried from
the runtime to every place a cost shows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.state import read_session
from pytest_maestro.state.model import PhaseState, Tokens

from .helpers import write_plan

FAKES = Path(__file__).parent / "fakes"


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
