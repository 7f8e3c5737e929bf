"""One frozen Settings object: CLI > MAESTRO_* environment > ini > default.

Every option is declared once in ``OPTIONS``; ``plugin.py`` registers the CLI flags and ini keys
from it, a test keeps the README's options table in step with it, and a bad value names where it
came from.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from . import numbers
from .numbers import Bounds
from .plan import FORMAT_NAMES
from .plan.model import REVIEW_MODES

SCHEDULES = ("dag", "waves")
ISOLATIONS = ("none", "worktree")


@dataclass(frozen=True)
class Option:
    name: str  # the Settings field; CLI flag --maestro-<name with dashes>, ini maestro_<name>
    help: str
    # str | int | float | bool | choice | limits (RUNTIME=N, …) | workers (WORKER:RUNTIME,…)
    kind: str = "str"
    default: Any = None
    env: str | None = None
    env_scale: float = 1.0  # MAESTRO_AGENT_TIMEOUT is in minutes, the option in seconds
    choices: tuple[str, ...] = ()
    bounds: Bounds | None = None  # what a number must be: finite, within these

    @property
    def flag(self) -> str:
        return "--maestro-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "maestro_" + self.name


OPTIONS: tuple[Option, ...] = (
    Option(
        "format",
        "plan format, detected from the content when not given",
        "choice",
        choices=FORMAT_NAMES,
    ),
    Option(
        "tag",
        "Taskmaster tag of a tasks.json to read (default: .taskmaster/state.json's currentTag, "
        "else master)",
    ),
    Option("root", "project root where phases run; beats the plan's root:, which beats rootdir"),
    Option(
        "timeout",
        "seconds a phase attempt may take before its process group is killed",
        "float",
        600.0,
        env="MAESTRO_AGENT_TIMEOUT",
        env_scale=60.0,
        bounds=numbers.TIMEOUT,
    ),
    Option(
        "check_timeout",
        "seconds one acceptance check may take",
        "float",
        300.0,
        bounds=numbers.TIMEOUT,
    ),
    Option(
        "max_retries",
        "extra attempts after a failed one",
        "int",
        2,
        env="MAESTRO_MAX_RETRIES",
        bounds=numbers.RETRIES,
    ),
    Option(
        "state_dir",
        "session state directory, inside the project root",
        "str",
        ".maestro",
        env="MAESTRO_STATE_DIR",
    ),
    Option("fresh", "archive the saved session and run every phase again", "bool", False),
    Option(
        "schedule",
        "parallel strategy under -n: dag, or waves (a barrier after each wave)",
        "choice",
        "dag",
        choices=SCHEDULES,
    ),
    Option(
        "max_concurrent",
        "most phases running at once under -n (0: one per worker)",
        "int",
        0,
        env="MAESTRO_MAX_CONCURRENT",
        bounds=numbers.CONCURRENT,
    ),
    Option(
        "stagger",
        "seconds between two phase starts under -n",
        "float",
        0.0,
        env="MAESTRO_STAGGER_DELAY",
        bounds=numbers.STAGGER,
    ),
    Option(
        "circuit_breaker",
        "stop when this share of pending phases would be skipped (0: off)",
        "float",
        0.5,
        bounds=numbers.SHARE,
    ),
    Option(
        "runtime",
        "runtime of phases whose agent names none (claude, codex, gemini, copilot, opencode, "
        "command, shell, or one a plugin adds); phases with run: commands default to shell",
        env="MAESTRO_RUNTIME",
    ),
    Option("model", "model of phases whose agent names none", env="MAESTRO_DEFAULT_MODEL"),
    Option(
        "agents_dir", "a directory of agent definitions, searched first", env="MAESTRO_AGENTS_DIR"
    ),
    Option(
        "autonomous",
        "let agent CLIs edit files and run commands without asking (their approval flags)",
        "bool",
        False,
        env="MAESTRO_AUTONOMOUS",
    ),
    Option(
        "strict_files",
        "fail a phase whose agent changed files outside those it declares",
        "bool",
        False,
    ),
    Option(
        "review",
        "review each agent phase once its checks passed: none, spec (its task and criteria), "
        "spec+quality (and the code's quality); a phase's review: and its agent's beat it",
        "choice",
        "none",
        env="MAESTRO_REVIEW",
        choices=REVIEW_MODES,
    ),
    Option(
        "reviewer",
        "the agent that reviews phases, read-only (default: the built-in reviewer)",
        env="MAESTRO_REVIEWER",
    ),
    Option(
        "review_rounds",
        "fix rounds after a failed review, each followed by a review: the first 3 go on with "
        "the implementer's own session, the rest start afresh on the escalation model",
        "int",
        5,
        env="MAESTRO_REVIEW_ROUNDS",
        bounds=numbers.RETRIES,
    ),
    Option(
        "escalate_model",
        "model of the fix rounds past the third (a phase's escalate_model: beats it; default: "
        "the phase's own)",
        env="MAESTRO_ESCALATE_MODEL",
    ),
    Option(
        "final_review",
        "once every selected phase passed, one more item (<plan>::final-review) reviews the "
        "run's whole change against the plan, read-only",
        "bool",
        False,
        env="MAESTRO_FINAL_REVIEW",
    ),
    Option(
        "final_review_model",
        "model of the final review (default: --maestro-escalate-model on the reviewer's "
        "runtime, else the reviewer's own model)",
        env="MAESTRO_FINAL_REVIEW_MODEL",
    ),
    Option(
        "budget_usd",
        "dollars the session may spend on agent CLIs; no phase or attempt starts past it (0: none)",
        "float",
        0.0,
        env="MAESTRO_BUDGET_USD",
        bounds=numbers.DOLLARS,
    ),
    Option(
        "max_wait",
        "seconds a phase may wait out an agent CLI's rate limits, in all",
        "float",
        900.0,
        env="MAESTRO_MAX_WAIT",
        bounds=numbers.WAIT,
    ),
    Option(
        "max_concurrent_calls",
        "most agent calls of a runtime at once, as the account allows: RUNTIME=N, repeatable or "
        "comma-separated (claude=3,codex=2); otherwise learned from the account's rate limits",
        "limits",
        env="MAESTRO_MAX_CONCURRENT_CALLS",
    ),
    Option(
        "log_limit",
        "megabytes one attempt may leave in its phase's log; the middle of more is cut",
        "float",
        10.0,
        bounds=numbers.LOG_MEGABYTES,
    ),
    Option(
        "commit",
        "commit each completed phase's declared files as '<phase id>: <phase name>'",
        "bool",
        False,
    ),
    Option(
        "isolate",
        "worktree: run each phase in a git worktree of its own and merge back its declared files",
        "choice",
        "none",
        env="MAESTRO_ISOLATE",
        choices=ISOLATIONS,
    ),
    Option(
        "isolate_include",
        "untracked files each phase's worktree gets a copy of (comma-separated globs: .env)",
    ),
    Option(
        "remote",
        "run every xdist worker's phases as remote ones: base out as a git bundle, diff back "
        "(a --tx spec with ssh=, socket= or chdir= is remote anyway)",
        "bool",
        False,
    ),
    Option(
        "worker_runtimes",
        "the runtimes an xdist worker has, instead of those found on its PATH at its start: "
        "WORKER:RUNTIME,RUNTIME, repeatable or ';'-separated, WORKER a gateway id (gw0) or "
        "parts of a --tx spec (ssh=me@build1); a worker gets only phases it has the runtimes of",
        "workers",
        env="MAESTRO_WORKER_RUNTIMES",
    ),
    Option(
        "remote_diff_limit",
        "megabytes of a remote phase's diff its report carries back; a larger one stays on "
        "the worker, named",
        "float",
        64.0,
        bounds=numbers.DIFF_MEGABYTES,
    ),
    Option(
        "report",
        "write the run's Markdown report (Mermaid flowchart and Gantt chart, phase table) here",
    ),
)


class SettingsError(Exception):
    pass


class Config(Protocol):
    """What settings read of a ``pytest.Config``: so that this module needs no pytest."""

    def getoption(self, name: str) -> Any: ...

    def getini(self, name: str) -> Any: ...


@dataclass(frozen=True)
class Settings:
    plan: Path
    analyze: str | None
    status: str | None
    format: str | None
    tag: str | None
    root: str | None
    timeout: float
    check_timeout: float
    max_retries: int
    state_dir: str
    fresh: bool
    schedule: str
    max_concurrent: int
    stagger: float
    circuit_breaker: float
    runtime: str | None
    model: str | None
    agents_dir: str | None
    autonomous: bool
    strict_files: bool
    review: str
    reviewer: str | None
    review_rounds: int
    escalate_model: str | None
    final_review: bool
    final_review_model: str | None
    budget_usd: float
    max_wait: float
    max_concurrent_calls: tuple[tuple[str, int], ...] | None
    log_limit: float
    commit: bool
    isolate: str
    isolate_include: str | None
    remote: bool
    worker_runtimes: tuple[tuple[str, tuple[str, ...]], ...] | None
    remote_diff_limit: float
    report: str | None

    @property
    def call_limits(self) -> dict[str, int]:
        """The known limit of agent calls at once, by runtime."""
        return dict(self.max_concurrent_calls or ())

    @property
    def include(self) -> tuple[str, ...]:
        """``isolate_include`` as a list: commas or new lines between the patterns."""
        text = (self.isolate_include or "").replace("\n", ",")
        return tuple(part.strip() for part in text.split(",") if part.strip())

    def to_wire(self) -> str:
        """The settings as text, for a worker on another machine: it runs as the controller's
        command line, environment and ini say, not as its own."""
        return json.dumps({**dataclasses.asdict(self), "plan": str(self.plan)})

    @classmethod
    def from_wire(cls, text: str) -> Settings:
        data = json.loads(text)
        limits, workers = data["max_concurrent_calls"], data["worker_runtimes"]
        return cls(
            **{
                **data,
                "plan": Path(data["plan"]),
                "max_concurrent_calls": None if limits is None else tuple(map(tuple, limits)),
                "worker_runtimes": None
                if workers is None
                else tuple((key, tuple(names)) for key, names in workers),
            }
        )

    @classmethod
    def from_config(cls, config: Config, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {
            "plan": Path(config.getoption("maestro")),
            "analyze": config.getoption("maestro_analyze"),
            "status": config.getoption("maestro_status"),
        }
        origins: dict[str, tuple[str, str]] = {}
        for option in OPTIONS:
            values[option.name], origins[option.name] = _resolve(option, config, env)
        settings = cls(**values)
        settings._check(origins)
        return settings

    def _check(self, origins: Mapping[str, tuple[str, str]]) -> None:
        """``origins``: per field, where its value came from and the value as written there.
        Every number is checked against its option's bounds, in the unit of its source."""
        for option in OPTIONS:
            if option.bounds is None:
                continue
            source, raw = origins[option.name]
            bounds = option.bounds
            if source.startswith("environment") and option.env_scale != 1.0:
                scale = option.env_scale
                bounds = Bounds(bounds.least / scale, bounds.most / scale, bounds.above)
                value = getattr(self, option.name) / scale
            else:
                value = getattr(self, option.name)
            try:
                bounds.check(value)
            except numbers.NumberError:
                raise SettingsError(f"{source} must be {bounds.rule()}, got {raw}") from None
        texts = (
            "model",
            "root",
            "state_dir",
            "runtime",
            "reviewer",
            "escalate_model",
            "final_review_model",
            "agents_dir",
            "report",
            "tag",
            "isolate_include",
        )
        for name in texts:
            if "\x00" in (getattr(self, name) or ""):
                source, raw = origins[name]
                raise SettingsError(f"{source} holds a NUL character: {raw!r}")


def _resolve(option: Option, config: Config, env: Mapping[str, str]) -> tuple[Any, tuple[str, str]]:
    """The option's value, and where it came from with the value as written there."""
    cli = config.getoption("maestro_" + option.name)
    if option.kind in ("limits", "workers") and cli:  # repeatable: every one given
        raw = (";" if option.kind == "workers" else ",").join(cli)
        return _convert(option, raw, option.flag), (option.flag, raw)
    if cli is not None and cli is not False:
        return cli, (option.flag, str(cli))
    if option.env and env.get(option.env, "").strip():
        source, raw = f"environment {option.env}", env[option.env].strip()
        return _convert(option, raw, source), (source, raw)
    ini = config.getini(option.ini)
    if ini not in ("", None, []):
        source, raw = f"ini {option.ini}", str(ini).strip()
        return _convert(option, raw, source), (source, raw)
    return option.default, (option.flag, str(option.default))


def call_limits(raw: str, source: str) -> tuple[tuple[str, int], ...]:
    """``claude=3,codex=2`` (commas or new lines between them) as pairs; a runtime named twice
    keeps its last number. SettingsError, one line, for anything else."""
    limits: dict[str, int] = {}
    for part in raw.replace("\n", ",").split(","):
        if not part.strip():
            continue
        name, equals, number = (text.strip() for text in part.partition("="))
        try:
            limit = written_int(number)
            numbers.CALLS.check(limit)
        except (ValueError, numbers.NumberError):
            limit = 0
        if not equals or not name or not limit or "\x00" in name:
            raise SettingsError(
                f"{source}: {part.strip()!r} is not RUNTIME=N with N {numbers.CALLS.rule()} "
                "(e.g. claude=3)"
            )
        limits[name] = limit
    return tuple(limits.items())


def worker_runtimes(raw: str, source: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``gw0:claude,shell;ssh=me@build1:codex`` (``;`` or new lines between them) as pairs of
    a worker and its runtimes; the worker is what comes before the last ``:`` (a spec may hold
    one: ``socket=host:8888:shell``). SettingsError, one line, for anything else."""
    pairs = []
    for part in raw.replace("\n", ";").split(";"):
        if not part.strip():
            continue
        worker, colon, names = (text.strip() for text in part.rpartition(":"))
        runtimes = tuple(name.strip() for name in names.split(",") if name.strip())
        if not colon or not worker or "\x00" in part or any(" " in name for name in runtimes):
            key, equals, given = part.strip().rpartition("=")
            hint = f"; did you mean {key}:{given}?" if equals and not colon else ""
            raise SettingsError(
                f"{source}: {part.strip()!r} is not WORKER:RUNTIME,RUNTIME (e.g. gw0:claude,shell "
                f"or ssh=me@build1:codex){hint}"
            )
        pairs.append((worker, runtimes))
    return tuple(pairs)


def _convert(option: Option, raw: str, source: str) -> Any:
    if option.kind == "limits":
        return call_limits(raw, source)
    if option.kind == "workers":
        return worker_runtimes(raw, source)
    converters: dict[str, Callable[[str], Any]] = {
        "int": written_int,
        "float": written_float,
        "bool": _parse_bool,
        "str": str,
        "choice": str,
    }
    try:
        value = converters[option.kind](raw)
    except ValueError:
        expected = _EXPECTED.get(option.kind, option.kind)
        raise SettingsError(f"{source} must be {expected}, got {raw!r}") from None
    if option.kind in ("int", "float") and option.env_scale != 1.0 and source.startswith("env"):
        value = value * option.env_scale
    if option.choices and value not in option.choices:
        raise SettingsError(f"{source}: {raw!r} is not one of {', '.join(option.choices)}")
    return value


# What a value that does not convert should have been, in the words of the range checks.
_EXPECTED = {
    "int": "a whole number in the digits 0-9",
    "float": "a number in the digits 0-9",
    "bool": "one of true, false, yes, no, on, off, 1, 0",
}


def written_int(raw: str) -> int:
    """``int`` of a number as people write one. Python's own also reads digits of other scripts
    and underscores (``٣``, ``1_0``): a value no one types on purpose is refused, not guessed."""
    if not raw.isascii() or "_" in raw:
        raise ValueError(raw)
    return int(raw)


def written_float(raw: str) -> float:
    """``float``, as ``written_int`` reads an ``int``."""
    if not raw.isascii() or "_" in raw:
        raise ValueError(raw)
    return float(raw)


# argparse names the type in its error ("invalid int value: '1_0'"), as it did with int.
written_int.__name__, written_float.__name__ = "int", "float"


def _parse_bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)
