"""Options: CLI > MAESTRO_* environment > ini > default, units, validation and the state dir."""

from __future__ import annotations

import re
import subprocess
from datetime import datetime

import pytest

from pytest_maestro.settings import OPTIONS, Settings
from pytest_maestro.state import read_session

from .helpers import REPO, phase, write_plan

ENV_NAMES = [option.env for option in OPTIONS if option.env]


@pytest.fixture(autouse=True)
def _no_maestro_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's MAESTRO_* variables must not decide what these tests see."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def settings(pytester: pytest.Pytester, *args: str, env: dict[str, str] | None = None) -> Settings:
    """The Settings a run with these arguments would get, with ``env`` as the environment."""
    config = pytester.parseconfig("--maestro", "plan.yaml", *args)
    return Settings.from_config(config, {} if env is None else env)


def attempts(pytester: pytest.Pytester, *args: str) -> int:
    """Run a plan whose one phase always fails; the number of attempts it made."""
    tries = pytester.path / "tries.txt"
    tries.unlink(missing_ok=True)
    result = pytester.runpytest("--maestro", "plan.yaml", *args)
    result.assert_outcomes(failed=1)
    return len(tries.read_text().split())


# -- precedence --------------------------------------------------------------------------------


FAILING = [phase("flaky", "echo $MAESTRO_ATTEMPT >> tries.txt", "false")]


def test_max_retries_default_then_ini(pytester: pytest.Pytester) -> None:
    write_plan(pytester, FAILING)
    assert attempts(pytester) == 3  # the default: 2 retries
    pytester.makeini("[pytest]\nmaestro_max_retries = 3\n")
    assert attempts(pytester) == 4


def test_max_retries_cli_beats_environment_beats_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plan(pytester, FAILING)
    pytester.makeini("[pytest]\nmaestro_max_retries = 3\n")
    monkeypatch.setenv("MAESTRO_MAX_RETRIES", "1")
    assert attempts(pytester) == 2
    # 0 on the command line is a value, not a missing option.
    assert attempts(pytester, "--maestro-max-retries", "0") == 1


def test_timeout_cli_beats_environment_beats_ini_beats_default(
    pytester: pytest.Pytester,
) -> None:
    write_plan(pytester, [phase("a", "true")])
    assert settings(pytester).timeout == 600
    pytester.makeini("[pytest]\nmaestro_timeout = 30\n")
    assert settings(pytester).timeout == 30
    assert settings(pytester, env={"MAESTRO_AGENT_TIMEOUT": "2"}).timeout == 120
    cli = settings(pytester, "--maestro-timeout", "7", env={"MAESTRO_AGENT_TIMEOUT": "2"})
    assert cli.timeout == 7


def test_defaults(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true")])
    got = settings(pytester)
    assert (got.timeout, got.max_retries) == (600.0, 2)
    assert (got.check_timeout, got.state_dir, got.fresh) == (300.0, ".maestro", False)
    assert (got.schedule, got.max_concurrent, got.stagger, got.circuit_breaker) == (
        "dag",
        0,
        0.0,
        0.5,
    )
    assert (got.format, got.root, got.analyze) == (None, None, None)


def test_environment_timeout_is_in_minutes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plan(pytester, [phase("slow", "sleep 5", max_retries=0)])
    monkeypatch.setenv("MAESTRO_AGENT_TIMEOUT", "0.01")  # 0.6 seconds
    result = pytester.runpytest("--maestro", "plan.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["attempt 1: timed out after 0.6s: sleep 5"])
    # Ended at its timeout, not waited out: the phase's own record spans well under its sleep.
    (session,) = (pytester.path / ".maestro").glob("plan-*.md")
    slow = read_session(session).phases["slow"]
    assert slow.started is not None and slow.completed is not None
    assert 0.6 <= _seconds(slow.completed) - _seconds(slow.started) < 3


def _seconds(moment: str) -> float:
    """Epoch seconds of a time in the session state (Python 3.10 reads no "Z")."""
    return datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()


def test_command_line_timeout_is_in_seconds_and_beats_the_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plan(pytester, [phase("slow", "sleep 5", max_retries=0)])
    monkeypatch.setenv("MAESTRO_AGENT_TIMEOUT", "10")
    result = pytester.runpytest("--maestro", "plan.yaml", "--maestro-timeout", "0.3")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["attempt 1: timed out after 0.3s: sleep 5"])


def test_environment_twins_are_read(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plan(pytester, [phase("a", "true")])
    monkeypatch.setenv("MAESTRO_MAX_CONCURRENT", "3")
    monkeypatch.setenv("MAESTRO_STAGGER_DELAY", " 0.25 ")
    monkeypatch.setenv("MAESTRO_STATE_DIR", "elsewhere")
    monkeypatch.setenv("MAESTRO_MAX_RETRIES", "5")
    monkeypatch.setenv("MAESTRO_AGENT_TIMEOUT", "1.5")
    config = pytester.parseconfig("--maestro", "plan.yaml")
    got = Settings.from_config(config)  # the process environment, as the plugin reads it
    assert (got.max_concurrent, got.stagger, got.state_dir) == (3, 0.25, "elsewhere")
    assert (got.max_retries, got.timeout) == (5, 90)


def test_blank_environment_variable_counts_as_unset(pytester: pytest.Pytester) -> None:
    write_plan(pytester, [phase("a", "true")])
    pytester.makeini("[pytest]\nmaestro_max_retries = 4\n")
    assert settings(pytester, env={"MAESTRO_MAX_RETRIES": "  "}).max_retries == 4


def test_readme_options_table_matches_the_options() -> None:
    """The README's table (flag, ini key, environment variable, default) says what OPTIONS does."""
    rows: dict[str, list[str]] = {}
    for line in (REPO / "README.md").read_text().splitlines():
        cells = [cell.replace("`", "").strip() for cell in line.strip().strip("|").split("|")]
        if cells[0].startswith("--maestro-") and len(cells) == 5:
            rows[cells[0]] = cells[1:4]
    for option in OPTIONS:
        if isinstance(option.default, bool):
            default = str(option.default).lower()
        elif isinstance(option.default, float):
            default = f"{option.default:g}"
        else:
            default = "" if option.default is None else str(option.default)
        assert option.flag in rows, option.flag
        ini, env, shown = rows[option.flag]
        assert (ini, re.sub(r"\s*\(.*\)$", "", env), shown) == (
            option.ini,
            option.env or "",
            default,
        ), option.flag


# -- bad values --------------------------------------------------------------------------------

BAD = [
    # (id, command-line arguments, environment, ini lines, expected error line)
    (
        "cli-negative",
        ["--maestro-max-retries=-1"],
        {},
        "",
        "ERROR: --maestro-max-retries must be a whole number >= 0 and <= 100, got -1",
    ),
    (
        "cli-zero-timeout",
        ["--maestro-timeout=0"],
        {},
        "",
        "ERROR: --maestro-timeout must be a number > 0 and <= 604800, got 0.0",
    ),
    (
        "cli-not-a-number",
        ["--maestro-max-retries=x"],
        {},
        "",
        "*argument --maestro-max-retries: invalid int value: 'x'",
    ),
    (
        "cli-unknown-choice",
        ["--maestro-schedule=later"],
        {},
        "",
        "*argument --maestro-schedule: invalid choice: 'later' (choose from *dag*waves*)",
    ),
    (
        "env-negative",
        [],
        {"MAESTRO_MAX_RETRIES": "-1"},
        "",
        "ERROR: environment MAESTRO_MAX_RETRIES must be a whole number >= 0 and <= 100, got -1",
    ),
    (
        "env-negative-minutes",
        [],
        {"MAESTRO_AGENT_TIMEOUT": "-2"},
        "",
        "ERROR: environment MAESTRO_AGENT_TIMEOUT must be a number > 0 and <= 10080, got -2",
    ),
    (
        "env-negative-concurrency",
        [],
        {"MAESTRO_MAX_CONCURRENT": "-3"},
        "",
        "ERROR: environment MAESTRO_MAX_CONCURRENT must be a whole number >= 0 and <= 10000, "
        "got -3",
    ),
    (
        "cli-underscored",
        ["--maestro-max-retries=1_0"],
        {},
        "",
        "*argument --maestro-max-retries: invalid int value: '1_0'",
    ),
    (
        "env-underscored",
        [],
        {"MAESTRO_MAX_RETRIES": "1_0"},
        "",
        "ERROR: environment MAESTRO_MAX_RETRIES must be a whole number in the digits 0-9, "
        "got '1_0'",
    ),
    (
        "env-other-digits",
        [],
        {"MAESTRO_MAX_RETRIES": "\u0663"},
        "",
        "ERROR: environment MAESTRO_MAX_RETRIES must be a whole number in the digits 0-9, "
        "got '\u0663'",
    ),
    (
        "ini-underscored-float",
        [],
        {},
        "maestro_timeout = 6_0",
        "ERROR: ini maestro_timeout must be a number in the digits 0-9, got '6_0'",
    ),
    (
        "env-not-a-number",
        [],
        {"MAESTRO_STAGGER_DELAY": "soon"},
        "",
        "ERROR: environment MAESTRO_STAGGER_DELAY must be a number in the digits 0-9, got 'soon'",
    ),
    (
        "ini-negative",
        [],
        {},
        "maestro_stagger = -0.5",
        "ERROR: ini maestro_stagger must be a number >= 0 and <= 600, got -0.5",
    ),
    (
        "ini-out-of-range",
        [],
        {},
        "maestro_circuit_breaker = 2",
        "ERROR: ini maestro_circuit_breaker must be a number >= 0 and <= 1, got 2",
    ),
    (
        "ini-not-a-number",
        [],
        {},
        "maestro_timeout = soon",
        "ERROR: ini maestro_timeout must be a number in the digits 0-9, got 'soon'",
    ),
    (
        "ini-unknown-choice",
        [],
        {},
        "maestro_schedule = later",
        "ERROR: ini maestro_schedule: 'later' is not one of dag, waves",
    ),
    (
        "cli-nan-timeout",
        ["--maestro-timeout=nan"],
        {},
        "",
        "ERROR: --maestro-timeout must be a number > 0 and <= 604800, got nan",
    ),
    (
        "cli-infinite-log-limit",
        ["--maestro-log-limit=inf"],
        {},
        "",
        "ERROR: --maestro-log-limit must be a number > 0 and <= 1.04858e+06, got inf",
    ),
    (
        "cli-nan-log-limit",
        ["--maestro-log-limit=nan"],
        {},
        "",
        "ERROR: --maestro-log-limit must be a number > 0 and <= 1.04858e+06, got nan",
    ),
    (
        "cli-huge-stagger",
        ["--maestro-stagger=1e12"],
        {},
        "",
        "ERROR: --maestro-stagger must be a number >= 0 and <= 600, got 1000000000000.0",
    ),
    (
        "cli-nan-check-timeout",
        ["--maestro-check-timeout=nan"],
        {},
        "",
        "ERROR: --maestro-check-timeout must be a number > 0 and <= 604800, got nan",
    ),
    (
        "cli-huge-retries",
        ["--maestro-max-retries=99999999999999999999"],
        {},
        "",
        "ERROR: --maestro-max-retries must be a whole number >= 0 and <= 100, "
        "got 99999999999999999999",
    ),
    (
        "env-nan-minutes",
        [],
        {"MAESTRO_AGENT_TIMEOUT": "nan"},
        "",
        "ERROR: environment MAESTRO_AGENT_TIMEOUT must be a number > 0 and <= 10080, got nan",
    ),
    (
        "env-infinite-budget",
        [],
        {"MAESTRO_BUDGET_USD": "inf"},
        "",
        "ERROR: environment MAESTRO_BUDGET_USD must be a number >= 0 and <= 1e+06, got inf",
    ),
    (
        "env-nan-budget",
        [],
        {"MAESTRO_BUDGET_USD": "nan"},
        "",
        "ERROR: environment MAESTRO_BUDGET_USD must be a number >= 0 and <= 1e+06, got nan",
    ),
    (
        "env-nan-max-wait",
        [],
        {"MAESTRO_MAX_WAIT": "NaN"},
        "",
        "ERROR: environment MAESTRO_MAX_WAIT must be a number >= 0 and <= 604800, got NaN",
    ),
    (
        "env-infinite-stagger",
        [],
        {"MAESTRO_STAGGER_DELAY": "inf"},
        "",
        "ERROR: environment MAESTRO_STAGGER_DELAY must be a number >= 0 and <= 600, got inf",
    ),
    (
        "env-huge-concurrency",
        [],
        {"MAESTRO_MAX_CONCURRENT": "1" * 30},
        "",
        "ERROR: environment MAESTRO_MAX_CONCURRENT must be a whole number >= 0 and <= 10000, "
        "got " + "1" * 30,
    ),
    (
        "ini-nan-circuit-breaker",
        [],
        {},
        "maestro_circuit_breaker = nan",
        "ERROR: ini maestro_circuit_breaker must be a number >= 0 and <= 1, got nan",
    ),
    (
        "ini-infinite-timeout",
        [],
        {},
        "maestro_timeout = inf",
        "ERROR: ini maestro_timeout must be a number > 0 and <= 604800, got inf",
    ),
    (
        "ini-nul-in-a-model",
        [],
        {},
        "maestro_model = a\x00b",
        "ERROR: ini maestro_model holds a NUL character: 'a\\x00b'",
    ),
    (
        "ini-not-a-bool",
        [],
        {},
        "maestro_fresh = maybe",
        "ERROR: ini maestro_fresh must be one of true, false, yes, no, on, off, 1, 0, got 'maybe'",
    ),
]


@pytest.mark.parametrize(
    ("args", "env", "ini", "expected"), [case[1:] for case in BAD], ids=[case[0] for case in BAD]
)
@pytest.mark.parametrize("analyze", [False, True], ids=["run", "analyze"])
def test_bad_value_is_a_one_line_error_naming_its_source(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    ini: str,
    expected: str,
    analyze: bool,
) -> None:
    write_plan(pytester, [phase("a", "touch ran.txt")])
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    extra = ["--maestro-analyze"] if analyze else []
    result = pytester.runpytest("--maestro", "plan.yaml", *args, *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if "error" in line.lower()]
    if args and "=" in args[0] and "invalid" in expected:  # argparse's usage error
        result.stderr.fnmatch_lines([expected])
    else:
        assert len(errors) == 1, result.stderr.lines
        pytest.LineMatcher(errors).fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "ran.txt").exists()
    assert not (pytester.path / ".maestro").exists()


# -- the state dir -----------------------------------------------------------------------------


def test_state_dir_from_the_environment_holds_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plan(pytester, [phase("a", "true")])
    monkeypatch.setenv("MAESTRO_STATE_DIR", "elsewhere")
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    sessions = list((pytester.path / "elsewhere").glob("plan-*.md"))
    assert len(sessions) == 1
    assert "a:" in sessions[0].read_text() or "'a'" in sessions[0].read_text()
    assert (pytester.path / "elsewhere" / "logs" / "a.log").exists()
    assert not (pytester.path / ".maestro").exists()


def test_state_dir_ignores_everything_in_git(pytester: pytest.Pytester) -> None:
    subprocess.run(["git", "init", "-q"], cwd=pytester.path, check=True)
    write_plan(pytester, [phase("a", "echo out > out.txt")])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    ignore = pytester.path / ".maestro" / ".gitignore"
    assert ignore.read_text().split() == ["*"]
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    paths = sorted(line[3:] for line in status if line)
    assert paths == ["out.txt", "plan.yaml"]  # nothing under .maestro, its .gitignore included


def test_state_dir_keeps_an_existing_gitignore(pytester: pytest.Pytester) -> None:
    (pytester.path / ".maestro").mkdir()
    (pytester.path / ".maestro" / ".gitignore").write_text("logs/\n")
    write_plan(pytester, [phase("a", "true")])
    pytester.runpytest("--maestro", "plan.yaml").assert_outcomes(passed=1)
    assert (pytester.path / ".maestro" / ".gitignore").read_text() == "logs/\n"


@pytest.mark.parametrize("source", ["env", "ini", "absolute"])
def test_state_dir_outside_the_root_is_refused_from_any_source(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    write_plan(pytester, [phase("a", "touch ran.txt")])
    outside = pytester.path.parent / f"{pytester.path.name}-state"
    if source == "env":
        monkeypatch.setenv("MAESTRO_STATE_DIR", f"../{outside.name}")
    elif source == "ini":
        pytester.makeini(f"[pytest]\nmaestro_state_dir = ../{outside.name}\n")
    else:
        monkeypatch.setenv("MAESTRO_STATE_DIR", str(outside))
    result = pytester.runpytest("--maestro", "plan.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: state dir '*' resolves to *, outside the project root *"])
    assert "Traceback" not in result.stderr.str()
    assert not outside.exists()
    assert not (pytester.path / "ran.txt").exists()


@pytest.mark.parametrize("value", ["inf", "1e12", "nan"])
def test_a_stagger_past_its_bounds_under_xdist_is_one_line_before_any_worker_starts(
    pytester: pytest.Pytester, value: str
) -> None:
    write_plan(pytester, [phase("a", "touch a.txt"), phase("b", "touch b.txt")])
    result = pytester.runpytest("--maestro", "plan.yaml", "-n", "2", f"--maestro-stagger={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output
    result.stderr.fnmatch_lines(
        ["ERROR: --maestro-stagger must be a number >= 0 and <= 600, got *"]
    )
    assert not (pytester.path / "a.txt").exists()
