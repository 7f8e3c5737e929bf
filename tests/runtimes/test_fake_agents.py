"""The fake agent CLIs in tests/fakes speak their real CLI's protocol, found through PATH."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.runtimes.replies import trailing_json_object

from ..helpers import FAKES


def trailing_json(stderr: str) -> dict[str, Any]:
    """The error JSON that ends gemini's stderr, after its warnings."""
    found = trailing_json_object(stderr)
    assert found is not None, stderr
    return found


PROMPT = "Phase: p1 — Write things\nAttempt: 1\n\n## Task\nDo it.\n"
REPORT_HEADINGS = ("## Task Report", "## Downstream Context")

Json = dict[str, Any]


def jsonl(stdout: str) -> list[Json]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@dataclass(frozen=True)
class Cli:
    """How to call one fake and read its answer, as a runtime would."""

    name: str
    argv: list[str]  # a headless run with machine-readable output
    autonomous: list[str]  # the same run, allowed to edit without asking
    unknown_exit: int
    text: Callable[[str], str]  # the agent's final message
    denials: Callable[[str], int]  # edits the CLI reports as refused
    restrictive_env: dict[str, str] = field(default_factory=dict)


def _claude_text(out: str) -> str:
    result = json.loads(out)
    assert result["type"] == "result"
    return str(result["result"])


def _codex_text(out: str) -> str:
    items = [e["item"] for e in jsonl(out) if e["type"] == "item.completed"]
    return "".join(i["text"] for i in items if i["type"] == "agent_message")


def _copilot_text(out: str) -> str:
    messages = [e["data"]["content"] for e in jsonl(out) if e["type"] == "assistant.message"]
    return str(messages[-1]) if messages else ""


def _opencode_text(out: str) -> str:
    return "".join(e["part"]["text"] for e in jsonl(out) if e["type"] == "text")


CLIS = {
    cli.name: cli
    for cli in [
        Cli(
            "claude",
            ["-p", "--output-format", "json"],
            ["-p", "--output-format", "json", "--permission-mode", "bypassPermissions"],
            1,
            _claude_text,
            lambda out: len(json.loads(out)["permission_denials"]),
        ),
        Cli(
            "codex",
            ["exec", "--json", "--skip-git-repo-check", "-"],
            ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", "-"],
            2,
            _codex_text,
            lambda out: sum(
                e["item"]["status"] == "failed"
                for e in jsonl(out)
                if e["type"] == "item.completed"
                and e["item"]["type"] in ("file_change", "command_execution")
            ),
        ),
        Cli(
            "gemini",
            ["--output-format", "json", "--skip-trust"],
            ["--output-format", "json", "--skip-trust", "--approval-mode", "yolo"],
            1,
            lambda out: str(json.loads(out)["response"]),
            lambda out: int(json.loads(out)["stats"]["tools"]["totalFail"]),
        ),
        Cli(
            "copilot",
            ["--output-format", "json", "--no-ask-user"],
            ["--output-format", "json", "--no-ask-user", "--allow-all-tools"],
            1,
            _copilot_text,
            lambda out: sum(
                not e["data"]["success"]
                for e in jsonl(out)
                if e["type"] == "tool.execution_complete"
            ),
        ),
        Cli(
            "opencode",
            ["run", "--format", "json"],
            ["run", "--format", "json", "--auto"],
            1,
            _opencode_text,
            lambda out: sum(
                e["part"]["state"]["status"] == "error"
                for e in jsonl(out)
                if e["type"] == "tool_use"
            ),
            {"OPENCODE_PERMISSION": '{"edit": "ask"}'},
        ),
    ]
}
NAMES = list(CLIS)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def _env(state: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAESTRO_", "OPENCODE_"))}
    env.pop("GEMINI_CLI_TRUST_WORKSPACE", None)
    env.pop("COPILOT_ALLOW_ALL", None)
    return {
        **env,
        "PATH": f"{FAKES}{os.pathsep}{env.get('PATH', '')}",
        "FAKE_AGENT_STATE": str(state),
        **(extra or {}),
    }


class Job:
    """One call of a fake: what to run, where, with what on stdin."""

    def __init__(
        self,
        name: str,
        args: list[str],
        prompt: str,
        cwd: Path,
        state: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv = [name, *args]
        self.prompt, self.cwd, self.env = prompt, cwd, _env(state, env)


def run_many(*jobs: Job) -> list[subprocess.CompletedProcess[str]]:
    """Run the calls side by side (a call costs an interpreter start), in order of the results."""
    processes = []
    for job in jobs:
        job.cwd.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            job.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=job.cwd,
            env={**job.env, "PWD": str(job.cwd)},  # as a shell sets it: opencode works there
            text=True,
        )
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a refusal may exit before reading
            process.stdin.write(job.prompt)  # small: fits the pipe, so nothing blocks
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
        process.stdin = None  # written and closed: communicate() must not flush it
        processes.append(process)
    done = []
    for job, process in zip(jobs, processes, strict=True):
        stdout, stderr = process.communicate(timeout=10)
        done.append(subprocess.CompletedProcess(job.argv, process.returncode, stdout, stderr))
    return done


def run(
    name: str,
    args: list[str],
    prompt: str,
    cwd: Path,
    state: Path,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return run_many(Job(name, args, prompt, cwd, state, env))[0]


def calls(state: Path) -> list[Json]:
    log = state / "calls.jsonl"
    return jsonl(log.read_text()) if log.exists() else []


TOKENS = "FAKE:TOKENS in=100 out=20 cost=0.01\n"

USAGE: dict[str, Callable[[str], tuple[int, int, float | None]]] = {
    "claude": lambda out: (
        json.loads(out)["usage"]["input_tokens"],
        json.loads(out)["usage"]["output_tokens"],
        json.loads(out)["total_cost_usd"],
    ),
    "codex": lambda out: (
        jsonl(out)[-1]["usage"]["input_tokens"],
        jsonl(out)[-1]["usage"]["output_tokens"],
        None,
    ),
    "gemini": lambda out: (
        next(iter(json.loads(out)["stats"]["models"].values()))["tokens"]["prompt"],
        next(iter(json.loads(out)["stats"]["models"].values()))["tokens"]["candidates"],
        None,
    ),
    "copilot": lambda out: next(
        (e["data"]["inputTokens"], e["data"]["outputTokens"], None)
        for e in jsonl(out)
        if e["type"] == "assistant.usage"
    ),
    "opencode": lambda out: next(
        (e["part"]["tokens"]["input"], e["part"]["tokens"]["output"], e["part"]["cost"])
        for e in jsonl(out)
        if e["type"] == "step_finish"
    ),
}


def _real_format(name: str, out: str) -> None:
    if name == "claude":
        result = json.loads(out)
        assert (result["type"], result["subtype"], result["is_error"]) == (
            "result",
            "success",
            False,
        )
        assert {"session_id", "num_turns", "duration_ms"} <= set(result)
    elif name == "codex":
        kinds = [e["type"] for e in jsonl(out)]
        assert kinds[:2] == ["thread.started", "turn.started"] and kinds[-1] == "turn.completed"
        assert set(jsonl(out)[-1]["usage"]) == {
            "input_tokens",
            "cached_input_tokens",
            "output_tokens",
        }
    elif name == "gemini":
        assert set(json.loads(out)) == {"session_id", "response", "stats"}
    elif name == "copilot":
        last = jsonl(out)[-1]
        assert (last["type"], last["exitCode"], last["usage"]["premiumRequests"]) == (
            "result",
            0,
            1,
        )
    else:
        kinds = [e["type"] for e in jsonl(out)]
        assert kinds[0] == "step_start" and kinds[-2:] == ["step_finish", "done"]


EDIT = "FAKE:EDIT out/a.txt=one\\ntwo\n"
# A prompt's file list as prompt.py writes it, for FAKE_AGENT_SOLUTIONS; marked.txt has a marker.
SOLVED = (
    PROMPT
    + "FAKE:EDIT marked.txt=from the marker\n\n"
    + "## Files (change no others)\n- create: marked.txt\n- create: src/new.py\n"
    + "- modify: README.md\n- delete: old.txt\n- create: unsolved.txt\n- read: docs/x.md\n\n"
    + "## Constraints\n- create: not/a/file.txt\n"
)
SOLUTION_FILES = {  # under the solutions directory
    "marked.txt": "from the solutions\n",
    "src/new.py": "print('new')\r\n",  # byte for byte
    "README.md": "# Any phase\n",
    "@p2/README.md": "# Phase p2\n",  # the phase's own wins
    "docs/x.md": "only read\n",
    "not/a/file.txt": "outside the section\n",
}


def _solutions(base: Path) -> Path:
    where = base / "solutions"
    for relative, content in SOLUTION_FILES.items():
        (where / relative).parent.mkdir(parents=True, exist_ok=True)
        (where / relative).write_bytes(content.encode())
    return where


def _starting_project(where: Path) -> None:
    where.mkdir(parents=True)
    (where / "README.md").write_text("# Before\n")
    (where / "old.txt").write_text("to go\n")


class Ran:
    def __init__(self, job: Job, done: subprocess.CompletedProcess[str], state: Path) -> None:
        self.cwd, self.state = job.cwd, state
        self.returncode, self.stdout, self.stderr = done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Ran]:
    """Every CLI's calls for the tests below, all side by side: each in its own directory."""
    base = tmp_path_factory.mktemp("calls")
    prompts = {
        "default": PROMPT + TOKENS,
        "denied": PROMPT + EDIT,
        "allowed": PROMPT + EDIT,
        "unknown": PROMPT,
        "quota": PROMPT + "FAKE:QUOTA\n",
        "error_exit0": PROMPT + "FAKE:ERROR_EXIT0\n",
        "solved": SOLVED,
        "solved_denied": SOLVED,
    }
    solved = {"FAKE_AGENT_SOLUTIONS": str(_solutions(base)), "MAESTRO_PHASE_ID": "p2"}
    jobs: dict[tuple[str, str], tuple[Job, Path]] = {}
    for name, cli in CLIS.items():
        argv = {
            "allowed": cli.autonomous,
            "solved": cli.autonomous,
            "unknown": [*cli.argv, "--no-such-flag"],
        }
        for label, prompt in prompts.items():
            where, state = base / name / label, base / name / f"{label}.state"
            env = cli.restrictive_env
            if label.startswith("solved"):
                _starting_project(where)
                env = {**env, **solved}
            job = Job(name, argv.get(label, cli.argv), prompt, where, state, env)
            jobs[name, label] = job, state
    results = run_many(*(job for job, _ in jobs.values()))
    return {
        key: Ran(job, done, state)
        for (key, (job, state)), done in zip(jobs.items(), results, strict=True)
    }


@pytest.mark.parametrize("name", NAMES)
def test_default_reply_is_a_handoff_in_the_real_format(
    name: str, ran: dict[tuple[str, str], Ran]
) -> None:
    cli, done = CLIS[name], ran[name, "default"]
    assert done.returncode == 0, done.stderr
    _real_format(name, done.stdout)
    text = cli.text(done.stdout)
    assert all(heading in text for heading in REPORT_HEADINGS)
    assert text.rstrip().splitlines()[-1] == "COMPLETED: done"
    tokens_in, tokens_out, cost = USAGE[name](done.stdout)
    assert (tokens_in, tokens_out) == (100, 20)
    assert cost == (0.01 if name in ("claude", "opencode") else None)  # the others report no money


@pytest.mark.parametrize("name", NAMES)
def test_edits_happen_only_with_the_autonomy_flag(
    name: str, ran: dict[tuple[str, str], Ran]
) -> None:
    cli, denied, allowed = CLIS[name], ran[name, "denied"], ran[name, "allowed"]
    assert (denied.returncode, allowed.returncode) == (0, 0), denied.stderr + allowed.stderr
    assert not (denied.cwd / "out" / "a.txt").exists()
    assert cli.text(denied.stdout).rstrip().endswith("COMPLETED: done")  # green, and empty
    assert cli.denials(denied.stdout) == 1
    assert (allowed.cwd / "out" / "a.txt").read_text() == "one\ntwo\n"
    assert cli.text(allowed.stdout).rstrip().endswith("COMPLETED: wrote out/a.txt")
    assert cli.denials(allowed.stdout) == 0


@pytest.mark.parametrize("name", NAMES)
def test_solutions_are_written_for_the_prompt_s_declared_files_with_the_autonomy_flag(
    name: str, ran: dict[tuple[str, str], Ran]
) -> None:
    cli, denied, solved = CLIS[name], ran[name, "solved_denied"], ran[name, "solved"]
    assert (denied.returncode, solved.returncode) == (0, 0), denied.stderr + solved.stderr
    assert sorted(str(p.relative_to(denied.cwd)) for p in denied.cwd.rglob("*")) == [
        "README.md",
        "old.txt",
    ]
    assert (denied.cwd / "README.md").read_text() == "# Before\n"
    assert cli.denials(denied.stdout) == 4  # marked.txt, src/new.py, README.md, old.txt
    assert cli.text(denied.stdout).rstrip().endswith("COMPLETED: done")  # green, and empty
    assert (solved.cwd / "marked.txt").read_text() == "from the marker\n"
    assert (solved.cwd / "src" / "new.py").read_bytes() == b"print('new')\r\n"
    assert (solved.cwd / "README.md").read_text() == "# Phase p2\n"
    for absent in ("old.txt", "unsolved.txt", "docs", "not", "@p2"):
        assert not (solved.cwd / absent).exists(), absent
    assert cli.denials(solved.stdout) == 0
    text = cli.text(solved.stdout)
    assert "- **Files Created**: marked.txt, src/new.py\n" in text
    assert "- **Files Modified**: README.md\n" in text
    assert "- **Files Deleted**: old.txt\n" in text
    last = text.rstrip().splitlines()[-1]
    assert last == "COMPLETED: wrote marked.txt, src/new.py, README.md; deleted old.txt"


@pytest.mark.parametrize("name", NAMES)
def test_unknown_flags_are_refused_before_anything_runs(
    name: str, ran: dict[tuple[str, str], Ran]
) -> None:
    done = ran[name, "unknown"]
    assert done.returncode == CLIS[name].unknown_exit
    assert "no-such-flag" in done.stderr
    assert calls(done.state) == []


def test_opencode_edits_by_default_unless_its_permission_says_otherwise(
    work: Path, state: Path
) -> None:
    """OpenCode's documented default lets `edit` run: no flag is needed, so a runtime must deny."""
    prompt = PROMPT + "FAKE:EDIT a.txt=x\n"
    deny = {"OPENCODE_PERMISSION": '{"edit": "deny"}'}
    plain, auto_denied = run_many(
        Job("opencode", ["run"], prompt, work / "plain", state),
        Job("opencode", ["run", "--auto", "--format", "json"], prompt, work / "deny", state, deny),
    )
    assert plain.returncode == auto_denied.returncode == 0
    assert (work / "plain" / "a.txt").read_text() == "x\n"
    assert not (work / "deny" / "a.txt").exists()  # --auto approves only what is not denied
    done = jsonl(auto_denied.stdout)[-1]
    assert (done["type"], done["rejected"]) == ("done", [])  # denied by a rule, not rejected


def _wait_until_running(state: Path) -> None:
    """Until a fake call holds its slot (its SIGTERM handler is in place by then)."""
    deadline = time.monotonic() + 10
    while not (state / "running").is_dir() or not any((state / "running").iterdir()):
        assert time.monotonic() < deadline, "the fake never started"
        time.sleep(0.01)


def test_a_hanging_agent_dies_on_sigterm_to_its_group(work: Path, state: Path) -> None:
    process = subprocess.Popen(
        ["claude", "-p", "FAKE:HANG"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        cwd=work,
        env={**_env(state), "PWD": str(work)},
        start_new_session=True,
    )
    _wait_until_running(state)
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait(timeout=5) == -signal.SIGTERM
    assert list((state / "running").iterdir()) == []


RATE_LIMITED: dict[str, Callable[[subprocess.CompletedProcess[str]], bool]] = {
    "claude": lambda d: (
        d.returncode == 1
        and json.loads(d.stdout)["is_error"]
        and json.loads(d.stdout)["api_error_status"] == 429
    ),
    "codex": lambda d: (
        d.returncode == 1
        and jsonl(d.stdout)[-1]["type"] == "turn.failed"
        and "429 Too Many Requests" in jsonl(d.stdout)[-1]["error"]["message"]
    ),
    "gemini": lambda d: (
        d.returncode == 429 & 0xFF
        and d.stdout == ""
        and trailing_json(d.stderr)["error"]["code"] == 429
    ),
    "copilot": lambda d: (
        d.returncode == 1
        and any(
            e["type"] == "session.error" and e["data"]["errorType"] == "rate_limit"
            for e in jsonl(d.stdout)
        )
    ),
    "opencode": lambda d: (
        d.returncode == 1
        and any(
            e["type"] == "error" and e["error"]["data"]["statusCode"] == 429
            for e in jsonl(d.stdout)
        )
    ),
}


def test_rate_limited_while_more_calls_run_than_allowed(work: Path, state: Path) -> None:
    holder = subprocess.Popen(  # a call that keeps running: every other call sees two at once
        ["codex", "exec", "--skip-git-repo-check", "FAKE:HANG"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=work,
        env={**_env(state), "PWD": str(work)},
        start_new_session=True,
    )
    try:
        _wait_until_running(state)
        prompt = PROMPT + "FAKE:RATE_LIMIT_OVER=1\n"
        limited = run_many(*(Job(n, CLIS[n].argv, prompt, work, state) for n in NAMES))
        for name, done in zip(NAMES, limited, strict=True):
            assert RATE_LIMITED[name](done), (name, done.returncode, done.stdout, done.stderr)
        fine = run("claude", ["-p"], PROMPT + "FAKE:RATE_LIMIT_OVER=2\n", work, state)
        assert fine.stdout.rstrip().endswith("COMPLETED: done")
    finally:
        os.killpg(holder.pid, signal.SIGTERM)
        holder.wait(timeout=5)


def test_calls_that_died_without_cleaning_up_are_not_counted(work: Path, state: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    (state / "running").mkdir(parents=True)
    (state / "running" / f"claude-{dead.pid}").write_text(str(dead.pid))
    done = run("claude", CLIS["claude"].argv, PROMPT + "FAKE:RATE_LIMIT_OVER=1\n", work, state)
    assert json.loads(done.stdout)["is_error"] is False
    assert list((state / "running").iterdir()) == []


QUOTA: dict[str, Callable[[Ran], bool]] = {
    "claude": lambda d: (
        d.returncode == 1 and json.loads(d.stdout)["result"].startswith("You've hit your limit")
    ),
    "codex": lambda d: (
        d.returncode == 1
        and jsonl(d.stdout)[-1]["error"]["message"].startswith("You've hit your usage limit")
    ),
    "gemini": lambda d: (
        d.returncode == 173 and "quota" in trailing_json(d.stderr)["error"]["message"]
    ),
    "copilot": lambda d: (
        d.returncode == 1 and jsonl(d.stdout)[-1]["exitCode"] == 1 and "quota_exceeded" in d.stdout
    ),
    "opencode": lambda d: d.returncode == 1 and "exceeded your current quota" in d.stdout,
}

ERROR_EXIT0: dict[str, Callable[[str], bool]] = {
    "claude": lambda out: (
        json.loads(out)["is_error"] is True and json.loads(out)["api_error_status"] == 529
    ),
    "codex": lambda out: "error" in {e["type"] for e in jsonl(out)} and _codex_text(out) == "",
    "gemini": lambda out: json.loads(out)["error"]["type"] == "INVALID_STREAM",
    "copilot": lambda out: (
        any(e["type"] == "session.error" for e in jsonl(out)) and jsonl(out)[-1]["exitCode"] == 0
    ),
    "opencode": lambda out: any(
        e["type"] == "tool_use" and e["part"]["state"]["status"] == "error" for e in jsonl(out)
    ),
}


@pytest.mark.parametrize("name", NAMES)
def test_spent_quota_and_errors_behind_exit_0(name: str, ran: dict[tuple[str, str], Ran]) -> None:
    quota, hidden = ran[name, "quota"], ran[name, "error_exit0"]
    assert QUOTA[name](quota), (quota.returncode, quota.stdout, quota.stderr)
    assert hidden.returncode == 0
    assert ERROR_EXIT0[name](hidden.stdout)


def test_status_markers_and_the_attempt(work: Path, tmp_path: Path) -> None:
    second = PROMPT.replace("Attempt: 1", "Attempt: 2")
    failed = "FAILED: fake failure requested (attempt 1)"
    cases = [  # prompt, env, the answer's last line (None: no status, no report), attempt
        (PROMPT + "FAKE:FAIL", {}, failed, 1),
        (PROMPT + "FAKE:BLOCKED", {}, "BLOCKED: fake blocker requested", 1),
        (PROMPT + "FAKE:FAIL_FIRST", {}, failed, 1),
        (PROMPT + "FAKE:FAIL_FIRST", {"MAESTRO_ATTEMPT": "2"}, "COMPLETED: done", 2),
        (second + "FAKE:FAIL_FIRST", {}, "COMPLETED: done", 2),
        (second + "FAKE:FAIL_FIRST", {"MAESTRO_ATTEMPT": "1"}, failed, 1),  # the env wins
        (PROMPT + "FAKE:NO_HANDOFF", {}, None, 1),
    ]
    states = [tmp_path / f"state{n}" for n in range(len(cases))]
    answers = run_many(
        *(
            Job("claude", ["-p"], prompt + "\n", work, state, env)
            for (prompt, env, _, _), state in zip(cases, states, strict=True)
        )
    )
    for (prompt, _, last_line, attempt), done, state in zip(cases, answers, states, strict=True):
        assert calls(state)[0]["attempt"] == attempt, prompt
        if last_line is None:
            assert not any(h in done.stdout for h in REPORT_HEADINGS)
            assert not any(s in done.stdout for s in ("COMPLETED:", "FAILED:", "BLOCKED:"))
        else:
            assert done.stdout.rstrip().splitlines()[-1] == last_line, prompt


def test_every_call_is_logged_with_what_it_was_given(work: Path, state: Path) -> None:
    """Gemini puts piped stdin first and appends the -p text after a blank line."""
    run("gemini", ["--skip-trust", "-p", "Go."], PROMPT, work, state, {"MAESTRO_PHASE_ID": "p1"})
    [record] = calls(state)
    assert record["argv"] == ["gemini", "--skip-trust", "-p", "Go."]
    assert record["cwd"] == str(work)
    assert record["prompt_length"] == len(PROMPT) + len("\n\nGo.")
    assert record["phase_id"] == "p1"


def test_how_each_cli_takes_its_prompt(work: Path, tmp_path: Path) -> None:
    """codex appends piped stdin to a PROMPT argument; copilot ignores it beside -p."""
    codex_state, copilot_state = tmp_path / "codex", tmp_path / "copilot"
    run_many(
        Job("codex", ["exec", "--skip-git-repo-check", "Go."], "more", work, codex_state),
        Job(
            "copilot",
            ["-p", "short", "--allow-all-tools"],
            "FAKE:EDIT a.txt=x\n",
            work,
            copilot_state,
        ),
    )
    assert calls(codex_state)[0]["prompt_length"] == len("Go.\n\n<stdin>\nmore\n</stdin>")
    assert calls(copilot_state)[0]["prompt_length"] == len("short")
    assert not (work / "a.txt").exists()


def test_refusals_the_real_clis_make(work: Path, state: Path) -> None:
    cases = [
        ("codex", ["exec", "-"], 1, "--skip-git-repo-check was not specified"),
        ("gemini", ["-p", "x"], 55, "not running in a trusted directory"),
        ("gemini", ["-y", "--approval-mode", "yolo", "--skip-trust"], 1, "Cannot use both"),
        ("claude", ["-p", "--output-format", "stream-json"], 1, "requires --verbose"),
        ("codex", ["exec", "--ask-for-approval", "never", "-"], 2, "unexpected argument"),
        ("opencode", ["run"], 1, "You must provide a message"),
    ]
    jobs = [
        Job(name, args, "" if name == "opencode" else PROMPT, work, state)
        for name, args, _, _ in cases
    ]
    for (name, args, exit_code, message), done in zip(cases, run_many(*jobs), strict=True):
        assert (done.returncode, message in done.stderr) == (exit_code, True), (
            name,
            args,
            done.stderr,
        )
