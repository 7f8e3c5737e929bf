"""Every input besides the plan, fuzzed: options from the command line, the environment and the
ini file; agent files; the agent CLIs' replies. Each gives a value within its stated bounds or
one line naming where it came from: never another exception, never NaN, an infinity, a NUL or a
negative count let through. Examples are few and small, so the whole file takes seconds.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_maestro.plan import PlanError, load_plan
from pytest_maestro.runtimes import BUILTIN_RUNTIMES
from pytest_maestro.runtimes.agents import load_agent
from pytest_maestro.runtimes.cli import CliRuntime, judge
from pytest_maestro.settings import OPTIONS, Option, Settings, SettingsError


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=timedelta(milliseconds=500),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


# What a hostile value of a number looks like, written as text, beside arbitrary text.
_NUMBER_WORDS = ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e12", "1e308", "1e999", "-0"]
_NUMBER_WORDS += [
    "0",
    "1",
    "0.5",
    "1" * 30,
    "1" * 5000,
    "",
    " 7 ",
    "0x10",
    "1_000",
    "\x00",
    "1\x00",
]
number_texts = (
    st.sampled_from(_NUMBER_WORDS)
    | st.floats().map(repr)
    | st.integers(-(10**25), 10**25).map(str)
    | st.text(max_size=8)
)
NUMERIC = [option for option in OPTIONS if option.bounds is not None]


class _Config:
    """What ``Settings.from_config`` reads of a pytest config: options and ini keys."""

    def __init__(self, options: dict[str, Any], ini: dict[str, str]) -> None:
        self.options, self.ini = {"maestro": "plan.yaml", **options}, ini

    def getoption(self, name: str) -> Any:
        return self.options.get(name)

    def getini(self, name: str) -> str:
        return self.ini.get(name, "")


def _resolve(option: Option, source: str, raw: str) -> Settings:
    if source == "cli":  # argparse has converted it, or refused it before maestro sees it
        kind = int if option.kind == "int" else float
        try:
            value = kind(raw)
        except ValueError:
            raise SettingsError("argparse refuses it") from None
        config = _Config({option.ini: value}, {})
        return Settings.from_config(config, {})  # type: ignore[arg-type]
    if source == "env":
        return Settings.from_config(_Config({}, {}), {option.env or "": raw})  # type: ignore[arg-type]
    return Settings.from_config(_Config({}, {option.ini: raw}), {})  # type: ignore[arg-type]


@fuzz(150)
@given(
    option=st.sampled_from(NUMERIC),
    source=st.sampled_from(["cli", "env", "ini"]),
    raw=number_texts,
)
def test_any_text_for_a_number_option_is_a_bounded_number_or_one_line(
    option: Option, source: str, raw: str
) -> None:
    if source == "env" and not option.env:
        source = "ini"
    try:
        got = _resolve(option, source, raw)
    except SettingsError as error:
        text = str(error)
        assert len(text.splitlines()) == 1, text
        return
    value = getattr(got, option.name)  # in the option's unit, whatever the source's
    assert option.bounds is not None
    assert option.bounds.check(value) == value


# -- agent files --------------------------------------------------------------------------------

_AGENT_KEYS = ["name", "description", "runtime", "model", "timeout_mins", "tools", "temperature"]
_AGENT_KEYS += ["max_turns", "command", "prompt_via", "env"]
hostile_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["a\x00b", "A=B", "", "stdin", "file", "inherit", "claude", "1e12"])
)
agent_values = (
    hostile_scalars
    | st.lists(hostile_scalars, max_size=4)
    | st.dictionaries(
        st.text(max_size=5) | st.sampled_from(["A=B", "", "OK", "A\x00"]),
        hostile_scalars,
        max_size=3,
    )
)
agent_meta = st.dictionaries(
    st.sampled_from(_AGENT_KEYS) | st.text(max_size=6), agent_values, max_size=6
)


@fuzz(100)
@given(meta=agent_meta, body=st.text(max_size=40))
def test_any_agent_frontmatter_is_an_agent_within_bounds_or_one_line_naming_the_file(
    tmp_path_factory: pytest.TempPathFactory, meta: dict[str, Any], body: str
) -> None:
    path = tmp_path_factory.mktemp("agents") / "builder.md"
    front = yaml.safe_dump(meta, allow_unicode=False)
    path.write_text(f"---\n{front}---\n{body}", encoding="utf-8", errors="surrogatepass")
    try:
        agent = load_agent(path)
    except PlanError as error:
        text = str(error)
        assert len(text.splitlines()) == 1, text
        assert text.startswith(str(path)), text
        return
    for text in (agent.model or "", *agent.command, *(v for _, v in agent.env)):
        assert "\x00" not in text
    assert all(name and "=" not in name and "\x00" not in name for name, _ in agent.env)
    for value in (agent.timeout_mins, agent.temperature, agent.max_turns):
        assert value is None or (math.isfinite(value) and value >= 0)


# -- the agent CLIs' replies ----------------------------------------------------------------------

_REPLY_KEYS = ["result", "usage", "total_cost_usd", "input_tokens", "output_tokens", "is_error"]
_REPLY_KEYS += ["cache_read_input_tokens", "type", "item", "text", "thread_id", "stats"]
_REPLY_KEYS += ["models", "tokens", "prompt", "candidates", "cached", "response", "part"]
_REPLY_KEYS += ["cost", "data", "inputTokens", "outputTokens", "cached_input_tokens", "error"]
_REPLY_TYPES = ["turn.completed", "item.completed", "agent_message", "assistant.usage"]
_REPLY_TYPES += ["assistant.message", "step_finish", "text", "result", "error", "COMPLETED: ok"]
reply_scalars = hostile_scalars | st.sampled_from(_REPLY_TYPES)
reply_documents = st.recursive(
    reply_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(_REPLY_KEYS), inner, max_size=4)
    ),
    max_leaves=16,
)
CLIS = [runtime for runtime in BUILTIN_RUNTIMES if isinstance(runtime, CliRuntime)]
numbers_of_a_reply = (
    st.integers(-(10**20), 10**20)
    | st.floats()
    | st.sampled_from([0, 1, 5, 10**16, -1, float("nan"), float("inf"), "3", [1], {"n": 1}])
)
n = numbers_of_a_reply
# Each CLI's own shape of usage and cost, its numbers hostile: the fuzzer reaches the readers.
shaped_replies = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("result"),
            "result": st.just("COMPLETED: ok"),
            "usage": st.fixed_dictionaries(
                {},
                optional={
                    "input_tokens": n,
                    "output_tokens": n,
                    "cache_read_input_tokens": n,
                    "cache_creation_input_tokens": n,
                },
            ),
        },
        optional={"total_cost_usd": n},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("turn.completed"),
            "usage": st.fixed_dictionaries(
                {"input_tokens": n, "cached_input_tokens": n, "output_tokens": n}
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "response": st.just("COMPLETED: ok"),
            "stats": st.fixed_dictionaries(
                {
                    "models": st.fixed_dictionaries(
                        {
                            "m": st.fixed_dictionaries(
                                {
                                    "tokens": st.fixed_dictionaries(
                                        {"prompt": n, "candidates": n, "cached": n}
                                    )
                                }
                            )
                        }
                    )
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("assistant.usage"),
            "data": st.fixed_dictionaries({"inputTokens": n, "outputTokens": n}),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("step_finish"),
            "part": st.fixed_dictionaries(
                {
                    "cost": n,
                    "tokens": st.fixed_dictionaries(
                        {"input": n, "output": n, "cache": st.fixed_dictionaries({"read": n})}
                    ),
                }
            ),
        }
    ),
)


def _json_text(document: Any) -> str:
    return json.dumps(document)  # NaN and Infinity as JSON CLIs may print them


@fuzz(120)
@given(
    lines=st.lists(
        (shaped_replies | reply_documents).map(_json_text) | st.text(max_size=20), max_size=4
    ),
    exit_code=st.sampled_from([0, 1, 2, 42, 53, 173]),
    deep=st.booleans(),
)
def test_any_reply_is_read_with_counted_tokens_or_fails_in_one_line(
    lines: list[str], exit_code: int, deep: bool
) -> None:
    """Every agent CLI's reader, on the same output."""
    if deep:  # nested past what the JSON parser recurses to
        lines.append('{"usage": ' + "[" * 3000 + "]" * 3000 + "}")
    for runtime in CLIS:
        reply = runtime.read(exit_code, "\n".join(lines), "")
        tokens = reply.tokens
        if tokens is not None:
            for count in (tokens.input, tokens.output, tokens.cached):
                assert isinstance(count, int) and count >= 0, (runtime.name, tokens)
            assert math.isfinite(tokens.cost) and tokens.cost >= 0, (runtime.name, tokens)
        result = judge(reply, exit_code)
        assert len(result.message.splitlines()) <= 1, result.message


# What the fuzzer found, kept as cases: each failed before its fix.
FOUND = [
    ("codex", '{"type": "turn.completed", "usage": {"input_tokens": 0, "cached_input_tokens": 1}}'),
    (
        "gemini",
        '{"type": "result", "status": "success", "stats": {"input_tokens": 1, "cached": 5}}',
    ),
]


@pytest.mark.parametrize(("name", "stdout"), FOUND, ids=[name for name, _ in FOUND])
def test_what_the_reply_fuzzer_found_fails_the_attempt_in_one_line(name: str, stdout: str) -> None:
    [runtime] = [runtime for runtime in CLIS if runtime.name == name]
    reply = runtime.read(0, stdout, "")
    assert reply.error is not None and "cached tokens" in reply.error, reply
    assert judge(reply, 0).status == "failed"


def test_the_reply_fuzzer_reaches_every_agent_cli() -> None:
    assert {runtime.name for runtime in CLIS} >= {
        "claude",
        "codex",
        "gemini",
        "copilot",
        "opencode",
    }


@pytest.mark.parametrize("bad_id", ["NaN", "Infinity", "-Infinity", "1.5"])
def test_a_phase_id_that_is_no_whole_number_beside_another_error_is_one_line(
    tmp_path: Path, bad_id: str
) -> None:
    """A JSON phase id of NaN or an infinity, in a plan with a second schema error, once
    crashed the error message (``int(nan)``) with an INTERNALERROR."""
    plan = tmp_path / "plan.json"
    phase = '{"id": ID, "name": "A", "run": ["true"], "files": {"create": [5]}}'
    plan.write_text('{"title": "t", "phases": [' + phase.replace("ID", bad_id) + "]}")
    with pytest.raises(PlanError, match=r"plan\.json"):
        load_plan(plan)
