"""The real agent CLIs, as .ci/run installs them, and how each is pointed at the fake APIs.

Each ``configure_*`` writes the CLI's configuration under a fresh home directory and returns the
environment that points it at ``url`` with a made-up key: nothing here reaches a real service.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".clis" / "node_modules" / ".bin"  # where .ci/run installs .ci/clis.txt
PINS = REPO / ".ci" / "clis.txt"
CLIS = ("claude", "codex", "gemini", "opencode", "copilot")


def installed(cli: str) -> str | None:
    """The path of the pinned ``cli``, when it is installed."""
    return shutil.which(cli, path=str(BIN))


def pinned(cli: str) -> str:
    """The release .ci/clis.txt pins for ``cli``."""
    package = {
        "claude": "@anthropic-ai/claude-code",
        "codex": "@openai/codex",
        "gemini": "@google/gemini-cli",
        "opencode": "opencode-ai",
        "copilot": "@github/copilot",
    }[cli]
    for line in PINS.read_text().splitlines():
        name, _, version = line.rpartition("@")
        if name == package:
            return version
    raise LookupError(f"{package} is not pinned in {PINS.name}")


def environment(cli: str, home: Path, url: str, key: str = "sk-fake") -> dict[str, str]:
    """What the CLI's process gets, beside this run's own environment."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "NO_COLOR": "1",
    }
    return {**env, **_CONFIGURE[cli](home, url, key)}


def _claude(home: Path, url: str, key: str) -> dict[str, str]:
    env = {"ANTHROPIC_BASE_URL": url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    return {**env, "ANTHROPIC_API_KEY": key} if key else env


def _codex(home: Path, url: str, key: str) -> dict[str, str]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "gpt-5-codex"\nmodel_provider = "fake"\n\n[model_providers.fake]\n'
        f'name = "fake"\nbase_url = "{url}/v1"\nenv_key = "FAKE_OPENAI_KEY"\n'
        'wire_api = "responses"\n'
    )
    env = {"CODEX_HOME": str(codex_home)}
    return {**env, "FAKE_OPENAI_KEY": key} if key else env


def _gemini(home: Path, url: str, key: str) -> dict[str, str]:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    # The base URL alone selects an auth type the CLI then refuses (exit 41).
    chosen = {"security": {"auth": {"selectedType": "gemini-api-key"}}, "model": {}}
    settings.write_text(json.dumps(chosen))
    env = {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_MODEL": "gemini-2.5-flash"}
    return {**env, "GEMINI_API_KEY": key} if key else env


def _opencode(home: Path, url: str, key: str) -> dict[str, str]:
    config = home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    options = {"baseURL": f"{url}/v1", **({"apiKey": key} if key else {})}
    provider = {"anthropic": {"options": options}}
    document = {"provider": provider, "model": "anthropic/claude-sonnet-4-5", "autoupdate": False}
    config.write_text(json.dumps(document))
    return {"OPENCODE_DISABLE_AUTOUPDATE": "true", "ANTHROPIC_API_KEY": ""}


def _copilot(home: Path, url: str, key: str) -> dict[str, str]:
    env = {
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": url,
        "COPILOT_PROVIDER_TYPE": "anthropic",
        "COPILOT_MODEL": "claude-sonnet-4.5",
    }
    return {**env, "COPILOT_PROVIDER_API_KEY": key} if key else env


_CONFIGURE = {
    "claude": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "opencode": _opencode,
    "copilot": _copilot,
}
