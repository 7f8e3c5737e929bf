"""The stand-ins of tests/fakes against the real CLIs: for the same call (the runtime's argv, a
phase that writes one file), what a stand-in prints must have the real CLI's shape, so that the
fast tests cannot drift from the CLIs they stand in for."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_maestro.plan.model import Phase
from pytest_maestro.runtimes import BUILTIN_RUNTIMES, AgentRequest
from pytest_maestro.runtimes.cli import CliRuntime
from pytest_maestro.runtimes.replies import json_lines

from .clis import CLIS, environment, installed
from .fake_apis import Script, serve

pytestmark = [pytest.mark.realcli, pytest.mark.slow]

FAKES = Path(__file__).resolve().parents[1] / "fakes"
# What a stand-in prints that the real CLI was not seen printing here, and why it may.
UNSEEN = {
    "codex": {"item:file_change": "its apply_patch edits; the fake API's model is offered a shell"},
    "copilot": {"assistant.usage": "documented for GitHub's models; absent offline (BYOK)"},
    "opencode": {"done": "in recent releases only (docs/agent-clis.md)"},
}


def shape(cli: str, stdout: str) -> set[str]:
    """The names a runtime reads: the result's keys (claude, gemini) or the event types."""
    if cli in ("claude", "gemini"):
        text = stdout.strip()
        data: Any = json_lines(text)[-1] if json_lines(text) else json.loads(text)
        return set(data)
    names = set()
    for event in json_lines(stdout):
        names.add(str(event.get("type")))
        item = event.get("item")
        if isinstance(item, dict):
            names.add(f"item:{item.get('type')}")
    return names


def call(cli: str, argv: list[str], root: Path, env: dict[str, str], prompt: str) -> str:
    (root / "prompt.md").write_text(prompt)
    with (root / "prompt.md").open() as stdin:
        done = subprocess.run(
            argv, cwd=root, env={**env, "PWD": str(root)}, stdin=stdin, capture_output=True,
            text=True, timeout=180, check=False,
        )  # fmt: skip
    assert done.returncode == 0, f"{cli} exited {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.parametrize("cli", CLIS)
def test_a_stand_in_prints_what_the_real_cli_prints(cli: str, tmp_path: Path) -> None:
    if installed(cli) is None:
        pytest.skip(f"the real {cli} CLI is not installed: .ci/run installs it into .clis/")
    runtime = next(r for r in BUILTIN_RUNTIMES if r.name == cli)
    assert isinstance(runtime, CliRuntime)
    real_root, fake_root = tmp_path / "real", tmp_path / "fake"
    real_root.mkdir()
    fake_root.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "MAESTRO_"))}
    gen = serve(Script(root=str(real_root)))
    api = next(gen)
    try:
        given = {**base, **environment(cli, tmp_path / "home", api.url)}
        request = AgentRequest(
            Phase("p", "P"), "x", 1, real_root, given, 180, tmp_path / "p.log", autonomous=True
        )
        argv, env = runtime.argv(request, tmp_path / "prompt.md"), runtime.environment(request)
        real = shape(cli, call(cli, argv, real_root, env, "Write hello.txt saying hello."))
    finally:
        gen.close()
    fake_argv = [str(FAKES / cli), *argv[1:]]
    fake_argv = [a if a != str(real_root) else str(fake_root) for a in fake_argv]
    env = {**runtime.environment(request), "PATH": f"{FAKES}{os.pathsep}{base['PATH']}"}
    fake = shape(cli, call(cli, fake_argv, fake_root, env, "FAKE:EDIT hello.txt=hello\n"))
    drift = fake - real - set(UNSEEN.get(cli, {}))
    assert not drift, f"the {cli} stand-in prints {sorted(drift)}, the real one {sorted(real)}"
    assert (real_root / "hello.txt").exists() and (fake_root / "hello.txt").exists()
