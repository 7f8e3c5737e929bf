"""Review gates against the real CLIs: a phase's implementer, then the same CLI as its reviewer,
read-only, both against the fake model APIs (``wire.verdict`` answers a review's prompt)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.runtimes import BUILTIN_RUNTIMES
from pytest_maestro.runtimes.cli import CliRuntime

from ..helpers import git_repo, write_plan
from . import wire
from .clis import environment
from .fake_apis import Running
from .test_realcli import HELLO, fake_api, need, phase_state, run

pytestmark = [pytest.mark.realcli, pytest.mark.slow]

FRIENDLY = "the greeting is friendly"  # a criterion in prose: the reviewer's to judge
REVIEWED = {**HELLO, "acceptance": [*HELLO["acceptance"], FRIENDLY], "max_retries": 0}
USERS = "the user's\n"  # README's content, which no one may change

# How each runs a reviewer (runtimes/*.py): on its command line, but opencode, whose rules are in
# its environment (OPENCODE_PERMISSION).
READ_ONLY = {
    "claude": "--tools Read,Grep,Glob --allowedTools Read,Grep,Glob --permission-mode dontAsk",
    "codex": "--sandbox read-only -",
    "gemini": "--approval-mode default",
    "opencode": "opencode run --format json",
}
# The tools of each that write or run commands: none is offered to a reviewer but codex's shell,
# which its sandbox confines.
WRITERS = {
    "claude": {"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"},
    "codex": {"apply_patch"},
    "gemini": {"write_file", "replace", "run_shell_command"},
    "opencode": {"write", "edit", "bash", "patch"},
}
# What each CLI told the model when the reviewer called its write tool anyway (observed).
REFUSED = {
    "claude": "No such tool available: Write",
    "codex": "README: Read-only file system",
    "gemini": 'Tool \\"write_file\\" not found',
    "opencode": "Model tried to call unavailable tool 'write'",
}
# A fix round's call: it goes on with the implementer's session (SESSION: the attempt's).
RESUMES = {
    "claude": "--resume SESSION",
    "codex": "--sandbox workspace-write resume SESSION -",
    "gemini": "--resume SESSION",
    "opencode": "--session SESSION",
}


def project(root: Path) -> Path:
    """A git work tree with a file of the user's committed, so that the review's tree guard
    watches every file, not only the declared ones."""
    git_repo(root)
    # What pytester writes beside the project is not the project's.
    (root / ".gitignore").write_text(".maestro/\nstdout\nstderr\nplan.yaml\nrunpytest-*\n")
    (root / "README").write_text(USERS)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    return root


def reviewing(api: Running) -> list[dict[str, Any]]:
    """The bodies of the reviewer's requests to the model (those that offer tools)."""
    return [
        s.body
        for s in api.api.seen
        if wire.kind(s.path) and wire.is_review(s.body) and tools(s.body)
    ]


def tools(body: dict[str, Any]) -> set[str]:
    """The names of the tools a request offers the model, in any of the three APIs."""
    names = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            names.add(str(tool.get("name") or tool.get("type")))
            names.update(str(d.get("name")) for d in tool.get("functionDeclarations") or [])
    return names


def log_of(root: Path) -> str:
    return (root / ".maestro" / "logs" / "hello.log").read_text()


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini", "opencode"])
def test_a_reviewer_that_tries_to_write_is_refused_and_its_finding_fails_the_phase(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cli: str
) -> None:
    # The fake model, as reviewer, first calls its CLI's write tool on README (offered or not),
    # then finds the criterion unmet. The CLI's read-only mode must refuse the write, so that the
    # tree guard finds nothing to put back (else the review fails saying so, and gives no
    # verdict); the verdict fails the phase with its finding.
    root = project(pytester.path)
    with fake_api(pytester, monkeypatch, cli, review="unmet", review_writes="README") as api:
        write_plan(pytester, [REVIEWED])
        result = run(pytester, cli, "--maestro-review=spec", "--maestro-review-rounds=0")
    output = result.stdout.str()
    assert result.ret == 1, output[-3000:]
    result.stdout.fnmatch_lines(
        [
            f"attempt 1: review by reviewer ({cli}), spec: failed, 0/1 criteria met, 1 blocking",
            f"    criterion 1 not met: {FRIENDLY} ({wire.UNMET})",
            f"    [blocking] hello.txt:1: {wire.UNMET}",
        ]
    )
    assert (root / "README").read_text() == USERS
    changed = subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
    )
    assert changed.stdout == ""  # the failed attempt's hello.txt put back, nothing else changed
    state = phase_state(root)
    assert state.status.value == "failed" and state.review["passed"] is False, state.review
    log = log_of(root)
    assert "changed files" not in log and "changed files" not in output
    [command] = [line for line in log.splitlines() if line.endswith("review.prompt.md")]
    assert READ_ONLY[cli] in command, command
    asked = reviewing(api)
    assert asked, f"no request of the {cli} reviewer reached the API"
    offered = set().union(*(tools(body) for body in asked))
    assert not offered & WRITERS[cli], sorted(offered)
    told = [b for b in asked if REFUSED[cli] in json.dumps(b, ensure_ascii=False)]
    assert told, f"no request of the {cli} reviewer carried {REFUSED[cli]!r}"


@pytest.mark.parametrize("cli", sorted(RESUMES))
def test_a_fix_round_resumes_the_implementer_s_session_and_the_re_review_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cli: str
) -> None:
    # The first review finds the greeting unfriendly; the fix round goes on with the
    # implementer's own CLI session, which writes the friendly one; the re-review passes it.
    script = {"review": "unmet-first", "fixed_content": "hello, friend\n"}
    with fake_api(pytester, monkeypatch, cli, **script) as api:
        write_plan(pytester, [REVIEWED])
        result = run(pytester, cli, "--maestro-review=spec")
    output = result.stdout.str()
    assert result.ret == 0, output[-3000:]
    assert (pytester.path / "hello.txt").read_text() == "hello, friend\n"  # the round wrote it
    state = phase_state(pytester.path)
    assert state.attempts == 1 and state.review["passed"] is True and not state.unverified
    assert [c["met"] for c in state.review["criteria"]] == [True]
    [fix] = state.review["rounds"]
    assert fix["how"].startswith("resumes session "), fix
    session = fix["how"].removeprefix("resumes session ")
    log = log_of(pytester.path)
    [command] = [line for line in log.splitlines() if line.endswith("round-1.prompt.md")]
    assert RESUMES[cli].replace("SESSION", session) in command, command
    logs = pytester.path / ".maestro" / "logs"
    runtime = next(r for r in BUILTIN_RUNTIMES if r.name == cli)
    assert isinstance(runtime, CliRuntime)
    went_on = runtime.read_reply(0, (logs / "hello.attempt-1.round-1.reply").read_text(), "")
    assert went_on.session_id == session  # the CLI says it went on with the same session
    # And it did: the round's first request to the model carries the attempt's turns (its
    # task, and its answer) before the round's prompt.
    rounds = [
        s.body for s in api.api.seen
        if wire.kind(s.path) and wire.FIX_ROUND in json.dumps(s.body) and tools(s.body)
    ]  # fmt: skip
    assert rounds, f"no request of the {cli} fix round reached the API"
    said = json.dumps(rounds[0], ensure_ascii=False)
    assert said.index("Write hello.txt saying hello.") < said.index(wire.FIX_ROUND)
    assert said.index("COMPLETED: wrote hello.txt") < said.index(wire.FIX_ROUND)
    again = (logs / "hello.attempt-1.round-1.review.prompt.md").read_text()
    assert "## What the last review found (the implementer has tried to fix it since)\n" in again


def test_a_copilot_fix_round_resumes_its_session_under_an_opencode_reviewer(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Copilot has no read-only mode, so another CLI reviews its work: opencode, which speaks
    # the same API (Anthropic's) to the same fake. The round goes on with copilot's session.
    script = {"review": "unmet-first", "fixed_content": "hello, friend\n"}
    with fake_api(pytester, monkeypatch, "copilot", **script) as api:
        need("opencode")
        home = pytester.path.parent / f"{pytester.path.name}-home"
        for name, value in environment("opencode", home, api.url, "sk-fake").items():
            monkeypatch.setenv(name, value)
        agents = pytester.path / "agents"
        agents.mkdir()
        (agents / "checker.md").write_text(
            "---\nname: checker\nruntime: opencode\n---\nYou review a phase's work, read-only.\n"
        )
        write_plan(pytester, [REVIEWED])
        result = run(pytester, "copilot", "--maestro-review=spec", "--maestro-reviewer=checker")
    output = result.stdout.str()
    assert result.ret == 0, output[-3000:]
    assert (pytester.path / "hello.txt").read_text() == "hello, friend\n"  # the round wrote it
    state = phase_state(pytester.path)
    assert state.review["passed"] is True and not state.unverified, state.review
    [fix] = state.review["rounds"]
    assert fix["how"].startswith("resumes session "), fix
    session = fix["how"].removeprefix("resumes session ")
    log = log_of(pytester.path)
    [command] = [line for line in log.splitlines() if line.endswith("round-1.prompt.md")]
    assert f"--resume {session}" in command, command
    logs = pytester.path / ".maestro" / "logs"
    runtime = next(r for r in BUILTIN_RUNTIMES if r.name == "copilot")
    assert isinstance(runtime, CliRuntime)
    went_on = runtime.read_reply(0, (logs / "hello.attempt-1.round-1.reply").read_text(), "")
    assert went_on.session_id == session  # copilot says it went on with the same session
    rounds = [
        s.body for s in api.api.seen
        if wire.kind(s.path) and wire.FIX_ROUND in json.dumps(s.body) and tools(s.body)
    ]  # fmt: skip
    assert rounds, "no request of the copilot fix round reached the API"
    said = json.dumps(rounds[0], ensure_ascii=False)
    assert said.index("Write hello.txt saying hello.") < said.index(wire.FIX_ROUND)
