"""Each runtime end to end through ``pytest --maestro``, against its real CLI and a fake API."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.plan.model import Phase
from pytest_maestro.runtimes import BUILTIN_RUNTIMES, AgentRequest
from pytest_maestro.runtimes.agents import Agent
from pytest_maestro.runtimes.cli import CliRuntime
from pytest_maestro.state import read_session

from ..helpers import write_plan
from . import users
from .clis import CLIS, environment, installed, pinned
from .fake_apis import Running, Script, serve

pytestmark = [pytest.mark.realcli, pytest.mark.slow]

HELLO = {
    "id": "hello",
    "name": "Write hello",
    "description": "Write hello.txt saying hello.",
    "files": {"create": ["hello.txt"]},
    "acceptance": [{"criterion": "hello.txt says hello", "check": "grep -q hello hello.txt"}],
    "timeout": 120,
}


def need(cli: str) -> None:
    if installed(cli) is None:
        pytest.skip(
            f"the real {cli} CLI is not installed: .ci/run installs the pinned releases"
            " (.ci/clis.txt) into .clis/"
        )


@contextlib.contextmanager
def fake_api(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cli: str, key: str = "sk-fake",
    root: Path | None = None, home: Path | None = None, **script: Any,
) -> Iterator[Running]:  # fmt: skip
    """The fake API serving ``script``, and this test's environment pointing ``cli`` at it, its
    home ``home`` (one beside the pytester directory if not given), the project in ``root`` (the
    pytester directory if not given)."""
    need(cli)
    gen = serve(Script(root=str(root or pytester.path), **script))
    running = next(gen)
    try:
        home = home or pytester.path.parent / f"{pytester.path.name}-home"
        for name, value in environment(cli, home, running.url, key).items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("IS_SANDBOX", raising=False)  # the suite's own, for the stand-ins
        if cli == "claude" and os.geteuid() == 0:
            monkeypatch.setenv("IS_SANDBOX", "1")  # as a user trusting this container would
        yield running
    finally:
        gen.close()


def run(pytester: pytest.Pytester, cli: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--maestro", "plan.yaml", f"--maestro-runtime={cli}", "--maestro-autonomous", *extra,
        timeout=300,
    )  # fmt: skip


def phase_state(root: Path) -> Any:
    [snapshot] = (root / ".maestro").glob("plan-*.md")
    return read_session(snapshot).phases["hello"]


@pytest.mark.parametrize("cli", CLIS)
def test_a_phase_passes_with_its_file_in_the_root_and_its_tokens_recorded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cli: str
) -> None:
    with fake_api(pytester, monkeypatch, cli) as api:
        write_plan(pytester, [{**HELLO, "max_retries": 0}])
        started = time.monotonic()
        result = run(pytester, cli)
    print(f"{cli} {pinned(cli)}: {time.monotonic() - started:.1f}s, {len(api.api.seen)} requests")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert (pytester.path / "hello.txt").read_text().strip() == "hello"
    tokens = phase_state(pytester.path).tokens
    print(f"{cli} tokens {tokens}")
    if cli != "copilot":  # its events carry no token counts
        assert tokens.input > 0 and tokens.output > 0, tokens


# One CLI per API the fakes speak (each case runs its CLI twice, for seconds): opencode and copilot
# speak claude's API (Anthropic Messages), so they add no wire format.
@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_a_retry_carries_the_failure_to_the_model(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cli: str
) -> None:
    # The fake model writes "goodbye" until a request carries a retry's prompt: the first
    # attempt's check fails, and the second attempt's prompt must reach the API with why.
    with fake_api(pytester, monkeypatch, cli, first_content="goodbye\n") as api:
        write_plan(pytester, [{**HELLO, "max_retries": 1}])
        result = run(pytester, cli)
    output = result.stdout.str()
    assert result.ret == 0, output[-3000:]
    assert (pytester.path / "hello.txt").read_text().strip() == "hello"
    assert phase_state(pytester.path).attempts == 2
    failure = "check failed: hello.txt says hello (`grep -q hello hello.txt`, exit 1)"
    told = [s for s in api.api.seen if failure in json.dumps(s.body, ensure_ascii=False)]
    assert told, f"no request to the {cli} API carried {failure!r}"


# Flags a CLI accepts though its --help leaves them out (each used by a test below).
HIDDEN = {"claude": {"--max-turns"}}


def help_text(cli: str) -> str:
    sub = {"codex": ["exec"], "opencode": ["run"]}.get(cli, [])
    found = installed(cli)
    assert found is not None
    done = subprocess.run(
        [found, *sub, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("cli", CLIS)
def test_every_flag_a_runtime_passes_is_in_the_clis_help(cli: str, tmp_path: Path) -> None:
    need(cli)
    runtime = next(r for r in BUILTIN_RUNTIMES if r.name == cli)
    assert isinstance(runtime, CliRuntime)
    text = help_text(cli)
    agent = Agent("a", "", max_turns=3)
    # Each kind of call: with and without consent, a reviewer's (read-only), a fix round's.
    for autonomous, read_only, resume in ((True, False, None), (False, False, None),
                                          (True, True, None), (True, False, "s-1")):  # fmt: skip
        request = AgentRequest(
            Phase("p", "P"), "x", 1, tmp_path, {}, 60, tmp_path / "p.log", agent, "m",
            autonomous, budget_usd=1.0, read_only=read_only, resume=resume,
        )  # fmt: skip
        argv = runtime.argv(request, tmp_path / "p.md")
        flags = [a.split("=")[0] for a in argv[1:] if a.startswith("-") and a != "-"]
        missing = [f for f in flags if f not in text and f not in HIDDEN.get(cli, ())]
        assert not missing, f"{cli} --help names none of {missing}: {json.dumps(argv)}"


# How each CLI is left without access, and the words it then says (observed).
NO_ACCESS = {
    "claude": ({"key": ""}, "Not logged in"),
    "codex": ({"unauthorized": True}, "401 Unauthorized"),
    "gemini": ({"key": ""}, "GEMINI_API_KEY"),
    "opencode": ({"unauthorized": True}, "invalid x-api-key"),
    "copilot": ({"offline": False}, "No authentication information found"),
}


@pytest.mark.parametrize("cli", CLIS)
def test_no_credentials_blocks_the_phase_in_seconds_with_the_cli_s_words(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cli: str
) -> None:
    how, words = NO_ACCESS[cli]
    key = str(how.get("key", "sk-fake"))
    script = {k: v for k, v in how.items() if k == "unauthorized"}
    for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GITHUB_TOKEN", "GH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with fake_api(pytester, monkeypatch, cli, key, **script):
        if how.get("offline") is False:
            for name in ("COPILOT_OFFLINE", "COPILOT_PROVIDER_BASE_URL", "COPILOT_PROVIDER_TYPE"):
                monkeypatch.delenv(name)
        write_plan(pytester, [{**HELLO, "max_retries": 2}])
        started = time.monotonic()
        result = run(pytester, cli)
    took = time.monotonic() - started
    print(f"{cli}: blocked in {took:.1f}s")
    output = result.stdout.str()
    assert "blocked" in output and words in output, output[-3000:]
    assert "attempt 2" not in output  # no retry spent
    assert took < 90


def test_claude_as_root_without_a_sandbox_is_blocked_saying_how_to_allow_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("claude refuses only as root")
    with fake_api(pytester, monkeypatch, "claude"):
        monkeypatch.delenv("IS_SANDBOX")
        write_plan(pytester, [HELLO])
        result = run(pytester, "claude")
    output = result.stdout.str()
    assert "cannot be used with root/sudo privileges" in output, output[-3000:]
    assert "IS_SANDBOX=1" in output and "attempt 2" not in output


def test_claude_as_an_ordinary_user_passes_without_is_sandbox(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the CLI runs as the user (users.py says why): `claude` on PATH drops to it.
    need("claude")
    user = users.ordinary()
    if isinstance(user, str):
        pytest.skip(f"claude as an ordinary user: {user}")
    with users.place(user) as top:
        project, home = top / "project", top / "home"
        with fake_api(pytester, monkeypatch, "claude", root=project, home=home) as api:
            users.give(home, user)  # with the configuration the fake API's case wrote there
            real = installed("claude")
            assert real is not None
            front = users.wrapper("claude", real, user, top)
            monkeypatch.setenv("PATH", f"{front}{os.pathsep}{os.environ['PATH']}")
            monkeypatch.delenv("IS_SANDBOX", raising=False)
            write_plan(pytester, [{**HELLO, "max_retries": 0}])
            result = run(pytester, "claude", f"--maestro-root={project}")
        output = result.stdout.str()
        assert result.ret == 0, output[-3000:]
        written = project / "hello.txt"
        assert written.read_text().strip() == "hello"
        assert written.stat().st_uid == user.pw_uid  # claude wrote it, as the user
        tokens = phase_state(project).tokens
        assert tokens.input > 0 and tokens.output > 0 and tokens.cost > 0, tokens
        assert len(api.api.seen) >= 2


def test_a_rate_limit_from_the_api_reaches_this_tool_s_backoff_claude(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # claude's own retries are bounded (CLAUDE_CODE_MAX_RETRIES=2): three 429s end its first call.
    with fake_api(pytester, monkeypatch, "claude", limited=3) as api:
        write_plan(pytester, [{**HELLO, "max_retries": 0}])
        result = run(pytester, "claude")
    output = result.stdout.str()
    assert result.ret == 0, output[-3000:]
    assert "for a rate limit" in output
    assert len(api.api.seen) >= 5


# Each answers an API that rate-limits every request by retrying on its own, then failing with the
# limit named (measured: docs/agent-clis.md); none has a setting this tool can bound it with.
@pytest.mark.parametrize("cli", ["codex", "copilot", "opencode"])
def test_a_rate_limit_the_cli_gives_up_on_reaches_this_tool_s_backoff(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cli: str
) -> None:
    with fake_api(pytester, monkeypatch, cli, limited=10**9) as api:
        write_plan(pytester, [{**HELLO, "max_retries": 0, "timeout": 150}])
        started = time.monotonic()
        result = run(pytester, cli, "--maestro-max-wait=1")
    took = time.monotonic() - started
    output = result.stdout.str()
    print(f"{cli} {pinned(cli)}: {took:.1f}s, {len(api.api.seen)} requests")
    assert "for a rate limit" in output, output[-3000:]  # waited, then called again
    assert "rate limited:" in output and "--maestro-max-wait" in output
    assert result.ret != 0 and "timed out" not in output


def test_a_rate_limit_gemini_retries_for_good_ends_at_the_phase_timeout(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gemini retries a 429 ten times over minutes, silently on stdout; only its settings.json
    # (general.maxAttempts) bounds that, and this tool does not write a user's settings. Its
    # stderr says it is retrying: the timeout names that, in its words.
    with fake_api(pytester, monkeypatch, "gemini", limited=10**9):
        write_plan(pytester, [{**HELLO, "max_retries": 0, "timeout": 20}])
        started = time.monotonic()
        result = run(pytester, "gemini")
    took = time.monotonic() - started
    output = result.stdout.str()
    print(f"gemini {pinned('gemini')}: {took:.1f}s")
    assert "timed out after 20s while gemini was retrying a rate limit" in output, output[-3000:]
    assert "failed with status 429. Retrying with backoff" in output
    assert "general.maxAttempts" in output
    assert took < 60


def test_codex_without_a_network_is_blocked_at_once_not_at_the_timeout(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_api(pytester, monkeypatch, "codex") as api:
        config = Path(os.environ["CODEX_HOME"]) / "config.toml"
        config.write_text(config.read_text().replace(api.url, "http://127.0.0.1:9"))  # closed
        write_plan(pytester, [{**HELLO, "timeout": 300}])
        started = time.monotonic()
        result = run(pytester, "codex")
    took = time.monotonic() - started
    output = result.stdout.str()
    print(f"codex without a network: {took:.1f}s")
    assert "blocked" in output and "Reconnecting" in output, output[-3000:]
    assert took < 60


def test_a_write_claude_denies_is_named_in_the_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read-only phase needs no consent: claude runs under dontAsk, and the fake model's Write
    # is denied. The CLI exits 0 with is_error false; the denial is in permission_denials.
    with fake_api(pytester, monkeypatch, "claude"):
        (pytester.path / "notes.md").write_text("notes\n")
        reading = {k: v for k, v in HELLO.items() if k not in ("files", "acceptance")}
        write_plan(pytester, [{**reading, "reads": ["notes.md"], "max_retries": 0}])
        result = pytester.runpytest_subprocess(
            "--maestro", "plan.yaml", "--maestro-runtime=claude", timeout=300
        )
    output = result.stdout.str()
    assert "permission denied: Write" in output and "hello.txt" in output, output[-3000:]
    assert not (pytester.path / "hello.txt").exists()


def test_a_write_codex_s_sandbox_refuses_is_named_in_the_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read-only phase needs no consent: codex runs in its read-only sandbox, the fake model's
    # shell write fails ("Read-only file system"), and codex exits 0 with the agent's "COMPLETED".
    with fake_api(pytester, monkeypatch, "codex"):
        (pytester.path / "notes.md").write_text("notes\n")
        reading = {k: v for k, v in HELLO.items() if k not in ("files", "acceptance")}
        write_plan(pytester, [{**reading, "reads": ["notes.md"], "max_retries": 0}])
        result = pytester.runpytest_subprocess(
            "--maestro", "plan.yaml", "--maestro-runtime=codex", timeout=300
        )
    output = result.stdout.str()
    assert not (pytester.path / "hello.txt").exists()
    # codex 0.169.0 prints the refused command's item in some runs only (in others no item at all
    # for it, though the API got its "Read-only file system" output): when it does, it is named.
    replies = "".join(p.read_text() for p in (pytester.path / ".maestro").rglob("*.reply"))
    if '"command_execution"' in replies:
        assert "permission denied: /bin/bash" in output and "hello.txt" in output, output[-3000:]
    else:
        assert "passed unverified" in output, output[-3000:]  # nothing to name; nothing checked
