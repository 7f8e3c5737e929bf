"""The pacing core (``scheduling/pacing.py``): pure, a moment in, a decision out."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_maestro.scheduling.pacing import (
    CLEAN,
    LEAST_TRIAL,
    LIMITED,
    NEUTRAL,
    QUOTA,
    Pacer,
    cool_off,
    trial_length,
    window,
)

PID = 4242


def ask(pacer: Pacer, ticket: str, now: float = 0.0, ceiling: int | None = None) -> bool:
    return pacer.ask("claude", ticket, PID, now, ceiling).granted


def test_without_a_limit_every_call_starts() -> None:
    pacer = Pacer()
    assert all(ask(pacer, f"t{n}") for n in range(20))


def test_a_known_limit_caps_calls_from_the_start_and_serves_waiters_in_order() -> None:
    pacer = Pacer()
    assert [ask(pacer, t, ceiling=2) for t in ("a", "b", "c", "d")] == [True, True, False, False]
    assert not ask(pacer, "d", ceiling=2)  # d asked before c's turn: c goes first
    pacer.finish("claude", "a", CLEAN, 1.0, ceiling=2)
    assert not ask(pacer, "d", 1.0, ceiling=2)
    assert ask(pacer, "c", 1.0, ceiling=2)
    pacer.finish("claude", "b", CLEAN, 2.0, ceiling=2)
    assert ask(pacer, "d", 2.0, ceiling=2)


def test_a_refusal_with_k_in_flight_makes_the_limit_k_minus_one() -> None:
    pacer = Pacer()
    for ticket in "abcde":
        assert ask(pacer, ticket)
    pacer.finish("claude", "e", LIMITED, 1.0)  # 5 in flight: 4 allowed
    assert pacer.keys["claude"].limit == 4
    assert not ask(pacer, "e", 1.0)  # 4 still in flight: the refused call waits
    pacer.finish("claude", "d", LIMITED, 1.1)  # 4 in flight (e waits): 3
    assert pacer.keys["claude"].limit == 3
    assert not ask(pacer, "f", 1.1)
    pacer.finish("claude", "a", CLEAN, 2.0)
    # A refused call keeps its place at the head of the queue: d, refused last, first.
    assert [entry[0] for entry in pacer.keys["claude"].queue] == ["d", "e", "f"]
    assert ask(pacer, "d", 2.0)
    assert not ask(pacer, "e", 2.0)


def test_a_lone_refusal_closes_the_key_and_cuts_no_limit() -> None:
    pacer = Pacer()
    assert ask(pacer, "a")
    pacer.finish("claude", "a", LIMITED, 10.0)
    state = pacer.keys["claude"]
    assert state.limit is None and state.not_before == 10.0 + cool_off(1)
    assert not ask(pacer, "a", 11.0)
    decision = pacer.ask("claude", "a", PID, 11.0, None)
    assert decision.until == 12.0
    assert ask(pacer, "a", 12.0)
    pacer.finish("claude", "a", LIMITED, 13.0)
    assert pacer.keys["claude"].not_before == 13.0 + cool_off(2) == 17.0


def test_a_refusal_at_a_level_the_account_just_served_is_a_limit_per_minute() -> None:
    pacer = Pacer()
    for ticket in "abcd":
        assert ask(pacer, ticket)
    for ticket in "abcd":
        pacer.finish("claude", ticket, CLEAN, 1.5)  # 4 at once, served: none refused
    for ticket in "efgh":
        assert ask(pacer, ticket, 1.5)
    for ticket in "efgh":  # refused together: one closing of the key, not four doublings
        pacer.finish("claude", ticket, LIMITED, 1.6)
    state = pacer.keys["claude"]
    assert state.limit is None and state.not_before == 1.6 + cool_off(1)
    # Open again, one call first (h, refused last, heads the queue); the rest once the account
    # kept it twice as long as the refusals took to come.
    assert [ask(pacer, ticket, 3.6) for ticket in "hgfe"] == [True, False, False, False]
    opens = 3.6 + trial_length(state.latency, state.refusals)
    assert state.latency == pytest.approx(0.1) and opens == 3.6 + LEAST_TRIAL
    assert pacer.ask("claude", "e", PID, 3.6, None).until == opens
    assert [ask(pacer, ticket, opens) for ticket in "gfe"] == [True] * 3  # limit untouched
    for ticket in "efg":
        pacer.finish("claude", ticket, CLEAN, 5.1)
    assert state.proven == 4 and state.refusals == 0
    # Refused again with as many in flight as the account served: it closes again; the level
    # it served counts one less each time, so that a second refusal there is a cut.
    assert ask(pacer, "i", 5.1)
    pacer.finish("claude", "i", LIMITED, 5.2)  # 2 in flight
    assert state.limit is None and state.proven == 1 and state.not_before == 5.2 + cool_off(1)
    assert ask(pacer, "i", 7.2)
    pacer.finish("claude", "i", LIMITED, 7.3)  # 2 in flight again, over the 1 served
    assert state.limit == 1


def test_lone_refusals_in_a_minute_already_spent_leave_calls_at_once_as_they_were() -> None:
    """An account of 4 calls a minute: 4 served at once, then each call refused alone until the
    minute is over, the key closing longer each time. Once one is served, the 3 that wait start
    together, not one after another as under a limit of one."""
    pacer = Pacer()
    for ticket in "abcd":
        assert ask(pacer, ticket)
    for ticket in "abcd":
        pacer.finish("claude", ticket, CLEAN, 1.5)
    now = 1.5
    for refusals in range(1, 6):
        assert ask(pacer, "e", now)  # the head of the queue: alone in flight
        pacer.finish("claude", "e", LIMITED, now)
        now = pacer.keys["claude"].not_before
        assert now == pytest.approx(1.5 + sum(cool_off(n) for n in range(1, refusals + 1)))
    assert pacer.keys["claude"].limit is None
    assert [ask(pacer, ticket, now) for ticket in "efgh"] == [True, False, False, False]
    pacer.finish("claude", "e", CLEAN, now + 0.5)  # served through before its trial ended
    assert [ask(pacer, ticket, now + 0.5) for ticket in "fgh"] == [True] * 3


def test_after_a_cool_off_one_call_goes_first_for_twice_as_long_as_a_refusal_took() -> None:
    pacer = Pacer()
    assert ask(pacer, "a", 10.0)
    pacer.finish("claude", "a", LIMITED, 10.5)  # refused 0.5 s after it started: alone, it closes
    state = pacer.keys["claude"]
    assert state.latency == 0.5 and state.not_before == 10.5 + cool_off(1) == 12.5
    assert trial_length(0.5, 1) == LEAST_TRIAL  # twice 0.5 s, and a second at the least
    assert [ask(pacer, ticket, 12.5) for ticket in "abc"] == [True, False, False]
    assert pacer.ask("claude", "b", PID, 13.0, None).until == 12.5 + LEAST_TRIAL
    assert not ask(pacer, "b", 13.49)
    assert [ask(pacer, ticket, 13.5) for ticket in "bc"] == [True, True]


def test_a_trial_is_never_longer_than_the_cool_off_before_it() -> None:
    """A refusal that came late (the CLI retried first) would hold every other call back for
    minutes: the trial ends with the cool-off's length."""
    assert trial_length(0.8, 1) == 1.6
    assert trial_length(90.0, 1) == cool_off(1) == 2.0
    assert trial_length(90.0, 5) == cool_off(5) == 32.0


def test_a_trial_refused_closes_the_key_longer_and_the_next_opening_tries_again() -> None:
    pacer = Pacer()
    assert ask(pacer, "a")
    pacer.finish("claude", "a", LIMITED, 0.1)
    state = pacer.keys["claude"]
    assert [ask(pacer, ticket, 2.1) for ticket in "ab"] == [True, False] and state.trial == "a"
    pacer.finish("claude", "a", LIMITED, 2.2)  # the trial refused: a second cool-off, twice as long
    assert state.refusals == 2 and state.not_before == 2.2 + cool_off(2)
    assert state.reopening and state.trial is None
    assert [ask(pacer, ticket, 6.2) for ticket in "ab"] == [True, False] and state.trial == "a"
    # A trial whose process went is handed on, as one that never reached the account is.
    assert pacer.reclaim(lambda pid: False) == ["a", "b"]
    assert [pacer.ask("claude", t, 7, 6.3, None).granted for t in "bc"] == [True, False]
    assert state.trial == "b"
    pacer.cancel("claude", "b")
    assert ask(pacer, "c", 6.4) and state.trial == "c"


def test_an_opening_long_past_or_a_new_run_lets_every_waiting_call_go() -> None:
    pacer = Pacer()
    assert ask(pacer, "a")
    pacer.finish("claude", "a", LIMITED, 0.1)
    pacer.cancel("claude", "a")  # it gave up: nobody asked while the key was closed
    state = pacer.keys["claude"]
    later = state.not_before + 120.0
    assert [ask(pacer, ticket, later) for ticket in "bcd"] == [True] * 3
    assert not state.reopening
    again = Pacer()
    assert ask(again, "a")
    again.finish("claude", "a", LIMITED, 0.1)
    again.cancel("claude", "a")
    again.unblock()  # the next run
    assert [ask(again, ticket, 2.1) for ticket in "bcd"] == [True] * 3
    # A call on trial that ends without reaching the account hands its trial to the next.
    again = Pacer()
    assert ask(again, "a")
    again.finish("claude", "a", LIMITED, 0.5)
    assert [ask(again, ticket, 2.5) for ticket in "ab"] == [True, False]
    again.finish("claude", "a", NEUTRAL, 2.6)
    assert [ask(again, ticket, 2.6) for ticket in "bc"] == [True, False]
    assert again.keys["claude"].trial == "b"


def simulate_account(calls: int, seconds: float, per_minute: int, latency: float = 0.1) -> Run:
    """``calls`` independent calls of ``seconds`` against an account that refuses a call when
    ``per_minute`` calls started in the last 60 s, ``latency`` after it started, driven through
    one `Pacer` as the processes drive it: every waiting call asks every 20 ms, a refused one
    asks again at once."""
    pacer = Pacer()
    waiting = [f"c{n}" for n in range(calls)]
    running: dict[str, tuple[float, bool]] = {}  # ticket -> (its end, refused)
    served: list[float] = []  # when each call the account took started
    refused = 0
    ended = 0.0
    now = 0.0
    while waiting or running:
        for ticket, (end, refusal) in sorted(running.items(), key=lambda item: item[1]):
            if end <= now:
                del running[ticket]
                pacer.finish("claude", ticket, LIMITED if refusal else CLEAN, now)
                if refusal:
                    waiting.insert(0, ticket)
                else:
                    ended = now
        for ticket in list(waiting):
            if pacer.ask("claude", ticket, PID, now, None).granted:
                waiting.remove(ticket)
                if len([at for at in served if at > now - 60.0]) >= per_minute:
                    running[ticket] = (now + latency, True)
                    refused += 1
                else:
                    served.append(now)
                    running[ticket] = (now + seconds, False)
        now = round(now + 0.02, 2)
    return Run(ended, refused)


@dataclass(frozen=True)
class Run:
    span: float
    refused: int


def test_an_account_of_calls_a_minute_is_served_close_to_what_it_allows() -> None:
    """Scenario C of bench/bench_agents.py, the pacer alone: 8 calls of 1.5 s, an account of 4 a
    minute. The last of the second four cannot start before 60 s: the bound is 61.5 s. Opening
    the key to every waiting call after each cool-off, the rounds were refused whole, each
    cutting the limit, and the last calls went one after another: 70 s, 15 calls refused."""
    run = simulate_account(8, 1.5, per_minute=4)
    assert run.span <= 1.1 * 61.5
    # The first round's 4; the 4 that went as the first four ended (nothing said the minute was
    # spent); then one a cool-off (2 + 4 + ... + 32 s), until the minute's end.
    assert run.refused == 4 + 4 + 4


def test_a_retry_after_closes_the_key_until_then() -> None:
    pacer = Pacer()
    assert ask(pacer, "a") and ask(pacer, "b")
    pacer.finish("claude", "b", LIMITED, 5.0, retry_after=30.0)
    pacer.finish("claude", "a", CLEAN, 6.0)
    assert not ask(pacer, "b", 34.9)
    assert ask(pacer, "b", 35.0)


@pytest.mark.parametrize("said", [float("inf"), float("nan"), -1.0, 1e300])
def test_a_retry_after_that_is_no_time_is_taken_as_none_and_the_state_still_reads_back(
    said: float,
) -> None:
    """A CLI's retry-after of 400 digits reads as infinity: kept, the state file held a moment
    its reader refuses, and the next reader started every key afresh, slots held and all."""
    pacer = Pacer()
    assert ask(pacer, "a") and ask(pacer, "b")
    pacer.finish("claude", "b", LIMITED, 5.0, retry_after=said)
    pacer.finish("claude", "a", QUOTA, 6.0, retry_after=said, reason="quota spent")
    written = json.loads(json.dumps(pacer.to_dict()))  # as the file holds it
    assert Pacer.from_dict(written).to_dict() == written
    assert pacer.keys["claude"].blocked_until is None  # a spent quota without a reset time


def test_the_limit_grows_back_by_one_after_a_window_of_clean_calls_while_calls_wait() -> None:
    pacer = Pacer()
    for ticket in "abc":
        assert ask(pacer, ticket)
    pacer.finish("claude", "c", LIMITED, 0.0)  # limit 2; c waits
    now = 1.0
    for n in range(window(2)):
        running = [t for t in pacer.keys["claude"].held]
        pacer.finish("claude", running[0], CLEAN, now)
        assert ask(pacer, "c" if n == 0 else f"n{n}", now)
        now += 1
    assert pacer.keys["claude"].limit == 2  # nobody waited when the window filled
    assert not ask(pacer, "w1", now)  # now one waits
    pacer.finish("claude", next(iter(pacer.keys["claude"].held)), CLEAN, now)
    assert pacer.keys["claude"].limit == 3
    assert ask(pacer, "w1", now) and ask(pacer, "w2", now)


def test_growth_stops_at_the_known_limit() -> None:
    pacer = Pacer()
    assert ask(pacer, "a", ceiling=2) and ask(pacer, "b", ceiling=2)
    pacer.finish("claude", "b", LIMITED, 0.0, ceiling=2)  # learned 1, below the ceiling
    assert pacer.keys["claude"].limit == 1
    waiting = [f"w{n}" for n in range(40)]
    for now in range(1, 40):
        held = next(iter(pacer.keys["claude"].held))
        pacer.finish("claude", held, CLEAN, float(now), ceiling=2)
        for ticket in ["b", *waiting]:
            if ask(pacer, ticket, float(now), ceiling=2) and ticket in waiting:
                waiting.remove(ticket)
        assert len(pacer.keys["claude"].held) <= 2
    assert pacer.keys["claude"].limit == 2


def test_a_spent_quota_blocks_every_remaining_call_until_its_reset() -> None:
    pacer = Pacer()
    assert ask(pacer, "a") and ask(pacer, "b")
    pacer.finish("claude", "a", QUOTA, 0.0, reason="quota spent: resets 3pm", retry_after=60)
    blocked = pacer.ask("claude", "c", PID, 1.0, None)
    assert blocked.blocked == "quota spent: resets 3pm" and not blocked.granted
    assert pacer.keys["claude"].queue == []  # a blocked call does not wait
    assert ask(pacer, "c", 61.0)
    pacer.finish("claude", "b", QUOTA, 70.0, reason="spent")
    assert pacer.ask("claude", "d", PID, 10_000.0, None).blocked == "spent"
    pacer.unblock()  # a new run asks again: no reset time was given
    assert ask(pacer, "d", 10_001.0)


def test_other_runtimes_and_per_model_limits_are_counted_apart() -> None:
    pacer = Pacer()
    assert ask(pacer, "a") and ask(pacer, "b")
    pacer.finish("claude", "b", LIMITED, 0.0)
    assert pacer.ask("codex", "x", PID, 0.0, None).granted
    assert pacer.key("claude", "opus") == "claude"
    pacer.finish("claude", "a", LIMITED, 0.0, per_model="opus", retry_after=5)
    assert pacer.key("claude", "opus") == "claude (opus)"
    assert pacer.key("claude", None) == "claude"
    # The refused call waits in its model's queue, which the retry-after closed; other models
    # are not held back by it.
    assert not pacer.ask("claude (opus)", "a", PID, 1.0, None).granted
    assert ("a", PID) not in pacer.keys["claude"].queue
    assert pacer.keys["claude (opus)"].queue == [("a", PID)]
    assert pacer.ask("claude (sonnet)", "z", PID, 1.0, None).granted
    assert pacer.ask("claude (opus)", "a", PID, 5.0, None).granted


def test_the_calls_of_gone_processes_are_reclaimed() -> None:
    pacer = Pacer()
    assert pacer.ask("claude", "dead", 1, 0.0, 1).granted
    assert not pacer.ask("claude", "alive", 2, 0.0, 1).granted
    assert not pacer.ask("claude", "dead-waiter", 1, 0.0, 1).granted
    assert sorted(pacer.reclaim(lambda pid: pid != 1)) == ["dead", "dead-waiter"]
    assert pacer.ask("claude", "alive", 2, 0.0, 1).granted


def test_state_round_trips_and_refuses_garbage() -> None:
    pacer = Pacer()
    assert ask(pacer, "a") and ask(pacer, "b")
    pacer.finish("claude", "b", LIMITED, 3.0, retry_after=2)
    again = Pacer.from_dict(pacer.to_dict())
    assert again.to_dict() == pacer.to_dict()
    earlier = pacer.to_dict()  # as a version without trials wrote it: read, nothing on trial
    for name in ("since", "latency", "reopening", "trial"):
        del earlier["claude"][name]
    state = Pacer.from_dict(earlier).keys["claude"]
    assert state.since == {} and not state.reopening and state.trial is None
    assert state.held == pacer.keys["claude"].held
    garbage: list[dict[str, object]] = [
        {"trial": "a", "since": {}},  # on trial without a start: ask would fail at every call
        {"trial": ["a"]},
        {"since": [["a", 1.0]]},
        {"since": {"a": "soon"}},
        {"latency": 1e400},
        {"latency": float("nan")},
        {"latency": -1.0},
        # A moment no clock reaches: the key would stay closed, or its quota spent, for good.
        {"not_before": float("nan")},
        {"not_before": float("inf")},
        {"blocked": "quota spent", "blocked_until": float("nan")},
        {"blocked": "quota spent", "blocked_until": float("inf")},
        {"blocked_until": -5.0},
    ]
    for fields in garbage:
        bad = pacer.to_dict()
        bad["claude"].update(fields)
        with pytest.raises((ValueError, TypeError)):
            Pacer.from_dict(bad)
    bad = pacer.to_dict()
    bad["claude"]["limit"] = 0
    with pytest.raises(ValueError):
        Pacer.from_dict(bad)
    with pytest.raises(ValueError):
        pacer.finish("claude", "a", "surprised", 0.0)
    pacer.finish("claude", "a", NEUTRAL, 0.0)
    assert pacer.keys["claude"].held == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["ask", "clean", "limited"]), st.integers(0, 9))))
def test_no_call_starts_past_the_limit_after_a_refusal(steps: list[tuple[str, int]]) -> None:
    """Whatever happens, once a refusal set a limit, no more calls hold a slot than it allows
    (calls already in flight when it fell aside); a refusal with more calls in flight than the
    account served cleanly (and more than one) cuts the limit, one with no more closes the key."""
    pacer = Pacer()
    now = 0.0
    for action, n in steps:
        now += 1.0
        ticket = f"t{n}"
        state = pacer.keys.get("claude")
        before = len(state.held) if state else 0
        if action == "ask":
            granted = pacer.ask("claude", ticket, PID, now, None).granted
            state = pacer.keys["claude"]
            if granted and state.limit is not None and len(state.held) > before:
                assert len(state.held) <= state.limit
        elif state is not None and ticket in state.held:
            proven = state.proven
            pacer.finish("claude", ticket, CLEAN if action == "clean" else LIMITED, now)
            if action == "limited" and before > max(proven, 1):  # a limit on calls at once
                assert state.limit is not None and state.limit <= max(1, before - 1)
            elif action == "limited":  # one per minute: the key closes
                assert state.not_before > now and state.proven == before - 1
        if state is not None and state.limit is not None:
            assert state.limit >= 1


# -- --maestro-max-concurrent-calls ------------------------------------------------------------


def test_call_limits_are_runtime_equals_number_pairs() -> None:
    from pytest_maestro.settings import call_limits

    assert call_limits("claude=3, codex=2\ngemini = 1,", "x") == (
        ("claude", 3),
        ("codex", 2),
        ("gemini", 1),
    )
    assert call_limits("claude=3,claude=1", "x") == (("claude", 1),)


@pytest.mark.parametrize(
    "raw", ["claude", "claude=", "=3", "claude=0", "claude=two", "c=1.5", "c=1_0", "c=\u0663"]
)
def test_a_bad_call_limit_is_one_line_naming_where(raw: str) -> None:
    from pytest_maestro.settings import SettingsError, call_limits

    with pytest.raises(SettingsError) as refused:
        call_limits(f"codex=1,{raw}", "environment MAESTRO_MAX_CONCURRENT_CALLS")
    assert str(refused.value) == (
        f"environment MAESTRO_MAX_CONCURRENT_CALLS: {raw!r} is not RUNTIME=N with N a whole "
        "number >= 1 and <= 10000 (e.g. claude=3)"
    )


def test_a_growth_the_account_takes_back_doubles_the_window_before_the_next() -> None:
    pacer = Pacer()
    for ticket in "abc":
        assert ask(pacer, ticket)
    pacer.finish("claude", "c", LIMITED, 0.0)  # the account allows 2
    state = pacer.keys["claude"]
    now, made = 0.0, 0

    def round_of(calls: int) -> None:
        """``calls`` clean calls, with more calls waiting than the limit lets go."""
        nonlocal now, made
        for _ in range(calls):
            now += 1
            pacer.finish("claude", next(iter(state.held)), CLEAN, now)
            made += 1
            for ticket in [*(entry[0] for entry in list(state.queue)), f"w{made}", f"v{made}"]:
                ask(pacer, ticket, now)
            assert state.queue

    round_of(window(2))
    assert state.limit == 3 and state.probing
    pacer.finish("claude", next(iter(state.held)), LIMITED, now)  # 3 in flight: one too many
    assert state.limit == 2 and state.failed == 1
    round_of(window(2))
    assert state.limit == 2  # not yet: the window is twice as long now
    round_of(window(2))
    assert state.limit == 3 and window(2, 1) == 2 * window(2)
    round_of(window(3, 1))  # this growth held: the next comes after a plain window
    assert state.limit == 4 and state.failed == 0
