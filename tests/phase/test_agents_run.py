"""Phases handed to agent CLIs, end to end: ``pytest --maestro … --maestro-runtime=<cli>`` with
the fake CLIs of tests/fakes first on PATH (they act on ``FAKE:`` markers in the prompt)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pytest import LineMatcher

from pytest_maestro.phase.prompt import SessionContext
from pytest_maestro.plan import load_plan
from pytest_maestro.state import read_session

from ..helpers import FAKES, git_repo, write_plan

CLIS = ["claude", "codex", "gemini", "copilot", "opencode"]


@pytest.fixture(autouse=True)
def fakes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    state = pytester.path / "fake-state"
    monkeypatch.setenv("FAKE_AGENT_STATE", str(state))
    return state


def agent_phase(pid: str, task: str, **fields: Any) -> dict[str, Any]:
    return {"id": pid, "name": f"Phase {pid}", "description": task, **fields}


def calls(state: Path) -> list[dict[str, Any]]:
    path = state / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def session(pytester: pytest.Pytester) -> Any:
    [snapshot] = (pytester.path / ".maestro").glob("plan-*.md")
    return read_session(snapshot)


def prompts(pytester: pytest.Pytester, pid: str) -> list[str]:
    logs = pytester.path / ".maestro" / "logs"
    return [p.read_text() for p in sorted(logs.glob(f"{pid}.attempt-*.prompt.md"))]


EDITING = agent_phase(
    "write",
    "FAKE:EDIT out.txt=hello",
    files={"create": ["out.txt"]},
    acceptance=[{"criterion": "out.txt says hello", "check": "grep -q hello out.txt"}],
)


@pytest.mark.parametrize("cli", CLIS)
def test_an_editing_phase_needs_consent_and_then_runs(
    pytester: pytest.Pytester, fakes: Path, cli: str
) -> None:
    write_plan(pytester, [EDITING])
    refused = pytester.runpytest("--maestro", "plan.yaml", f"--maestro-runtime={cli}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: phases go to agent CLIs ({cli}) *--maestro-autonomous*"])
    assert calls(fakes) == []  # refused before any call
    result = pytester.runpytest(
        "--maestro", "plan.yaml", f"--maestro-runtime={cli}", "--maestro-autonomous"
    )
    result.assert_outcomes(passed=1)
    assert (pytester.path / "out.txt").read_text() == "hello\n"
    [call] = calls(fakes)
    assert call["cli"] == cli and call["phase_id"] == "write"
    state = session(pytester).phases["write"]
    assert state.status.value == "completed"
    assert state.result.startswith("COMPLETED: ")
    assert state.tokens.input + state.tokens.cached > 0 and state.tokens.output > 0


def test_an_agent_that_says_done_but_changed_nothing_fails(pytester: pytest.Pytester) -> None:
    # A command whose permission mode denies edits: the agent still answers "COMPLETED".
    agents = pytester.path / "agents"
    agents.mkdir()
    (agents / "denied.md").write_text(
        "---\nname: denied\nruntime: command\ncommand: [claude, -p]\n---\nA coder.\n"
    )
    write_plan(pytester, [{**EDITING, "agent": "denied", "max_retries": 0}])
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*attempt 1: declared file 'out.txt' was not created*"])


def test_a_failed_attempt_is_retried_with_the_failure_in_the_prompt(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    write_plan(pytester, [agent_phase("p", "FAKE:FAIL_FIRST", reads=["README"])])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=claude")
    result.assert_outcomes(passed=1)
    first, second = prompts(pytester, "p")
    assert "previous attempt failed" not in first
    assert "## The previous attempt failed\nFAILED: fake failure requested (attempt 1)" in second
    assert [c["attempt"] for c in calls(fakes)] == [1, 2]


def test_blocked_is_not_retried(pytester: pytest.Pytester, fakes: Path) -> None:
    write_plan(pytester, [agent_phase("p", "FAKE:BLOCKED", reads=["README"])])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=codex")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*phase 'p' (Phase p) was blocked after 1 attempt*"])
    assert len(calls(fakes)) == 1


def test_a_reply_without_handoff_is_asked_for_once_more_then_fails(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    write_plan(pytester, [agent_phase("p", "FAKE:NO_HANDOFF", reads=["R"], max_retries=0)])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=gemini")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*attempt 1: the reply has no status line*"])
    assert len(calls(fakes)) == 2  # the attempt, and the one question again


def test_a_passing_phase_without_a_check_is_unverified(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [agent_phase("p", "Explain the code.", reads=["README"])])
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-runtime=claude", "--junitxml=out.xml"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*phase 'p' passed unverified*"])
    assert 'name="maestro.p.unverified" value="True"' in (pytester.path / "out.xml").read_text()
    assert session(pytester).phases["p"].unverified
    [snapshot] = (pytester.path / ".maestro").glob("plan-*.md")
    assert "unverified: true" in snapshot.read_text()


def test_a_failed_check_goes_to_the_next_attempt_s_prompt(pytester: pytest.Pytester) -> None:
    check = {
        "criterion": "the second try",
        "check": 'echo "try $MAESTRO_ATTEMPT"; test "$MAESTRO_ATTEMPT" = 2',
    }
    write_plan(
        pytester,
        [agent_phase("p", "do it", reads=["R"], acceptance=[check], fallback="Try harder.")],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=claude")
    result.assert_outcomes(passed=1)
    first, second = prompts(pytester, "p")
    assert "- [ ] the second try: `echo" in first  # the criterion, with its command
    assert "check failed: the second try (`echo" in second
    assert "exit 1)\n    try 1\n" in second  # the check's own output
    assert "## Fallback strategy\nTry harder." in second
    assert not session(pytester).phases["p"].unverified


def test_changes_outside_the_declared_files_are_reported_and_fail_when_strict(
    pytester: pytest.Pytester,
) -> None:
    subprocess.run(["git", "init", "-q"], cwd=pytester.path, check=True)
    (pytester.path / ".gitignore").write_text("fake-state/\n")  # the fakes' own records
    task = "FAKE:EDIT out.txt=hello\nFAKE:EDIT stray.txt=oops"
    write_plan(pytester, [{**EDITING, "description": task, "max_retries": 0}])
    args = ["--maestro", "plan.yaml", "--maestro-runtime=claude", "--maestro-autonomous"]
    lenient = pytester.runpytest(*args)
    lenient.assert_outcomes(passed=1)
    lenient.stdout.fnmatch_lines(
        ["*phase 'write' changed files outside its declared ones: stray.txt"]
    )
    strict = pytester.runpytest(*args, "--maestro-strict-files", "--maestro-fresh")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*outside its declared ones (--maestro-strict-files): stray.txt"])


@pytest.mark.parametrize(
    ("cli", "marker", "line"),
    [
        ("claude", "FAKE:QUOTA", "*attempt 1: quota spent: *"),
        ("codex", "FAKE:ERROR_EXIT0", "*attempt * the reply has no status line*"),
        ("gemini", "FAKE:ERROR_EXIT0", "*attempt 1: the agent CLI failed: INVALID_STREAM*"),
    ],
)
def test_the_cli_s_own_failures_fail_the_attempt(
    pytester: pytest.Pytester, cli: str, marker: str, line: str
) -> None:
    write_plan(pytester, [agent_phase("p", marker, reads=["R"], max_retries=0)])
    result = pytester.runpytest("--maestro", "plan.yaml", f"--maestro-runtime={cli}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([line])


def test_a_hanging_agent_is_ended_at_the_timeout(pytester: pytest.Pytester, fakes: Path) -> None:
    write_plan(pytester, [agent_phase("p", "FAKE:HANG", reads=["R"], timeout=1, max_retries=0)])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=claude")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*attempt 1: timed out after 1s*"])
    [call] = calls(fakes)
    with pytest.raises(ProcessLookupError):
        os.kill(call["pid"], 0)


HOLDER = """
import os, sys, time
from pathlib import Path
state = Path(sys.argv[1])
(state / "running").mkdir(parents=True, exist_ok=True)
for n in range(3):  # three calls "running" elsewhere: every new call is one too many
    (state / "running" / f"holder-{n}").write_text(str(os.getpid()))
refused = state / "refused"  # a phase id a line, written as the fake refuses its call
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    # Not calls.jsonl: a call is written there before it decides whether it is one too many.
    seen = set(refused.read_text().splitlines()) if refused.exists() else set()
    if len(seen) >= int(sys.argv[2]):
        break  # every phase has been refused once
    time.sleep(0.02)
for n in range(3):  # gone before this process ends: a zombie would still count as running
    (state / "running" / f"holder-{n}").unlink()
"""


def test_rate_limits_are_waited_out_without_counting_attempts(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    # 4 phases at -n 4 against a CLI that refuses more than 3 concurrent calls. While a holder
    # keeps 3 calls "running", the phases' first calls are refused, however many run at once
    # (the account's slots then keep the others waiting); then they all complete.
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(fakes), "1"])
    try:
        held = fakes / "running" / "holder-2"
        deadline = time.monotonic() + 60
        while not held.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        task = "FAKE:RATE_LIMIT_OVER=3\nFAKE:SLEEP=0.2"
        phases = [agent_phase(f"p{n}", task, reads=["R"], max_retries=0) for n in range(4)]
        write_plan(pytester, phases)
        result = pytester.runpytest_subprocess(
            "--maestro", "plan.yaml", "--maestro-runtime=claude", "-n", "4",
            "--maestro-stagger=0.05", "--maestro-max-wait=120",
        )  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    result.assert_outcomes(passed=4)
    made = calls(fakes)
    per_phase = [sum(c["phase_id"] == f"p{n}" for c in made) for n in range(4)]
    assert max(per_phase) >= 2  # refused at least once and called again
    assert {c["attempt"] for c in made} == {1}  # a wait is not an attempt
    logs = "".join(p.read_text() for p in (pytester.path / ".maestro" / "logs").glob("p*.log"))
    assert "rate limited: " in logs and "waiting" in logs


def test_a_limit_past_max_wait_fails_the_attempt(pytester: pytest.Pytester, fakes: Path) -> None:
    running = fakes / "running"
    running.mkdir(parents=True)
    (running / "held").write_text(str(os.getpid()))  # one call always "running"
    write_plan(pytester, [agent_phase("p", "FAKE:RATE_LIMIT_OVER=1", reads=["R"], max_retries=0)])
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-runtime=codex", "--maestro-max-wait=1"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*attempt 1: rate limited: *--maestro-max-wait)"])


def test_the_run_budget_stops_new_phases_and_a_phase_budget_stops_retries(
    pytester: pytest.Pytester, fakes: Path
) -> None:
    costly = "FAKE:TOKENS in=10 out=5 cost=0.4\nFAKE:FAIL"
    write_plan(
        pytester,
        [
            agent_phase("a", costly, reads=["R"], max_retries=5, budget_usd=0.7),
            agent_phase("b", "cheap", reads=["R"], blocked_by=["a"]),
            agent_phase("c", "FAKE:TOKENS in=1 out=1 cost=0.5", reads=["R"]),
            agent_phase("d", "never", reads=["R"]),
        ],
    )
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-runtime=claude", "--maestro-budget-usd=1",
        "--maestro-circuit-breaker=0", "-p", "no:randomly",
    )  # fmt: skip
    # a: two attempts cost $0.8 > its $0.7, so no third; c then spends the run's last dollar.
    assert [c["phase_id"] for c in calls(fakes)] == ["a", "a", "c"]
    result.stdout.fnmatch_lines(["*the phase's budget of $0.7 is spent*"])
    result.stdout.fnmatch_lines(["*the run's budget of $1 is spent*"])
    doc = session(pytester)
    assert round(doc.tokens.cost, 6) == 1.3
    assert doc.phases["d"].status.value == "pending"


def test_commit_records_each_completed_phase(pytester: pytest.Pytester) -> None:
    git_repo(pytester.path)
    (pytester.path / "user.txt").write_text("the user's own\n")
    write_plan(pytester, [EDITING])
    result = pytester.runpytest(
        "--maestro", "plan.yaml", "--maestro-runtime=claude", "--maestro-autonomous",
        "--maestro-commit",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*phase 'write': committed *"])
    log = subprocess.run(
        ["git", "log", "--format=%s", "--name-only"], cwd=pytester.path, capture_output=True,
        text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert log == ["write:", "Phase", "write", "out.txt"]


def test_a_plugin_can_add_a_runtime(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from pytest_maestro.runtimes import AgentResult

        class Echo:
            name = "echo"
            autonomy = ""

            def run(self, request):
                (request.root / "echo.txt").write_text(request.phase.id)
                return AgentResult("completed", "COMPLETED: echoed")

        def pytest_maestro_runtimes(config):
            return [Echo()]
        """
    )
    write_plan(pytester, [agent_phase("p", "say it", files={"create": ["echo.txt"]})])
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=echo")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "echo.txt").read_text() == "p"


def test_an_agent_named_nowhere_is_played_generically_with_one_warning(
    pytester: pytest.Pytester,
) -> None:
    write_plan(
        pytester,
        [
            agent_phase("a", "x", agent="code_reviewer", reads=["R"]),
            agent_phase("b", "y", agent="code-reviewer", reads=["R"]),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=claude")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("agents defined nowhere") == 1
    result.stdout.fnmatch_lines(
        ["*played by a generic role of their name: code_reviewer (looked in*"]
    )
    assert prompts(pytester, "a")[0].startswith("Agent: code_reviewer\n")
    assert "You are the code reviewer of this project." in prompts(pytester, "a")[0]


def test_a_malformed_agent_file_is_one_line_naming_file_and_line(
    pytester: pytest.Pytester,
) -> None:
    agents = pytester.path / "agents"
    agents.mkdir()
    (agents / "bad.md").write_text("---\nname: bad\nruntime: claude\n  tools: [\n---\nBody\n")
    write_plan(pytester, [agent_phase("p", "x", agent="bad")])
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *agents/bad.md:4: invalid agent definition: *"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_dependents_get_the_handoff_of_their_dependencies(pytester: pytest.Pytester) -> None:
    write_plan(
        pytester,
        [
            agent_phase("first", "do it", reads=["R"]),
            agent_phase("second", "then this", reads=["R"], blocked_by=["first"]),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-runtime=claude")
    result.assert_outcomes(passed=2)
    [prompt] = prompts(pytester, "second")
    assert "## Dependency results\n### first: Phase first\nCOMPLETED: done" in prompt
    assert "- key interfaces introduced: none" in prompt
    state = session(pytester).phases["first"]
    assert state.downstream_context["warnings"] == "none"


# The session's journal moved out of the way, a folder in its place: the run goes on writing to the
# journal it holds open, and whoever reads the session from its files now cannot.
UNREADABLE = 'cd .maestro && for j in plan-*.journal; do mv "$j" moved.journal; mkdir "$j"; done'


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["sequential", "xdist"])
def test_a_prompt_without_its_dependencies_results_is_a_warning(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    write_plan(
        pytester,
        [
            {"id": "first", "runtime": "shell", "run": [UNREADABLE]},
            agent_phase("second", "then this", reads=["R"], blocked_by=["first"]),
        ],
    )
    result = pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", "--maestro-runtime=claude", *workers
    )
    result.assert_outcomes(passed=2)
    [prompt] = prompts(pytester, "second")
    assert "## Dependency results\n### first: first\nCOMPLETED\n\n" in prompt  # nothing handed on
    said = (
        "its prompt went without its dependencies' results (first) and the session's id: "
        "cannot read the session: Is a directory: *plan-*.journal"
    )
    result.stdout.fnmatch_lines([f"phase 'second': warning: {said}"])  # the run's summary
    log = (pytester.path / ".maestro" / "logs" / "second.log").read_text()
    assert LineMatcher(log.splitlines()).fnmatch_lines([f"--- warning: {said}"]) is None


def test_a_session_that_cannot_be_read_leaves_the_prompt_without_it(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("phases:\n  - {id: a, run: [x]}\n  - {id: b, run: [x], blocked_by: [a]}\n")
    plan = load_plan(path)
    missing = tmp_path / ".maestro" / "plan.md"
    first = SessionContext.read(plan, plan.phase("a"), missing)
    assert first.session_id == "" and first.dependencies == ()
    assert first.warnings == (
        "its prompt went without the session's id: cannot read the session: "
        f"No such file or directory: {missing}",
    )
    second = SessionContext.read(plan, plan.phase("b"), missing)
    assert [(d.id, d.result) for d in second.dependencies] == [("a", None)]
    assert second.warnings[0].startswith("its prompt went without its dependencies' results (a)")


def test_agent_fields_a_cli_is_not_given_are_one_warning(pytester: pytest.Pytester) -> None:
    agents = pytester.mkdir("agents")
    careful = "name: careful\nruntime: claude\ntools: Read, Grep\ntemperature: 0.2\n"
    (agents / "careful.md").write_text(f"---\n{careful}---\nBe careful.\n")
    (agents / "other.md").write_text("---\nname: other\nruntime: codex\ntools: [Read]\n---\nGo.\n")
    write_plan(
        pytester,
        [
            agent_phase("a", "x", agent="careful", reads=["R"]),
            agent_phase("b", "y", agent="careful", reads=["R"]),
            agent_phase("c", "z", agent="other", reads=["R"]),
        ],
    )
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*maestro plan warnings*",
            "agent 'careful' (agents/careful.md): 'temperature' is ignored for runtime 'claude', "
            "which has no option for it",
            "agent 'other' (agents/other.md): 'tools' is ignored for runtime 'codex', which has no "
            "option for it",
        ]
    )
    assert out.count("agent 'careful' (") == 1  # one line, for two phases
    by_cli = {call["cli"]: call["argv"] for call in calls(pytester.path / "fake-state")}
    assert "--tools" in by_cli["claude"] and "Read,Grep" in by_cli["claude"]
