"""A mixed pool: workers that lack what some jobs need (a runtime's CLI, git). The policies
offer a worker only what it can run, and a job no worker can run is refused, not waited for."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_maestro.scheduling.policy import DagPolicy, Job, Policy, WavePolicy
from pytest_maestro.scheduling.pool import Pool, WorkerTools
from pytest_maestro.scheduling.simulation import simulate

from .test_policy import ancestors, assert_no_clash_overlaps, job, plans

PolicyClass = Callable[[Sequence[Job], int], Policy]
POLICIES = [DagPolicy, WavePolicy]
CLAUDE, SHELL = frozenset({"claude"}), frozenset({"shell"})


def needing(needs: frozenset[str], base: Job) -> Job:
    return dataclasses.replace(base, needs=needs)


@pytest.mark.parametrize("policy_class", POLICIES)
def test_a_worker_is_offered_only_what_it_has(policy_class: PolicyClass) -> None:
    jobs = [needing(CLAUDE, job("agent", duration=5.0)), needing(SHELL, job("cmd"))]
    policy = policy_class(jobs, 2)
    assert policy.next_job(SHELL) == "cmd"  # the better job needs what it lacks
    assert policy.next_job(CLAUDE) == "agent"
    assert policy.next_job(frozenset()) is None
    assert policy.next_job() == "agent"  # None: a worker that has everything
    policy.start("cmd", SHELL)
    with pytest.raises(ValueError, match="may not start now"):
        policy.start("agent", SHELL)
    policy.start("agent", CLAUDE | SHELL)
    assert policy.running == {"agent", "cmd"}


def test_dag_keeps_priority_within_what_a_worker_has() -> None:
    jobs = [
        needing(SHELL, job("short", duration=1.0)),
        needing(CLAUDE, job("long", duration=9.0)),
        needing(SHELL, job("mid", duration=4.0)),
    ]
    policy = DagPolicy(jobs, 3)
    assert policy.next_job(SHELL) == "mid"
    assert policy.next_job(SHELL | CLAUDE) == "long"


@pytest.mark.parametrize("policy_class", POLICIES)
def test_a_refused_job_fails_unrun_and_dooms_its_dependents(policy_class: PolicyClass) -> None:
    jobs = [needing(CLAUDE, job("a")), job("b", deps=["a"]), job("c")]
    policy = policy_class(jobs, 2)
    assert policy.refuse("a") == [("b", "a")]
    assert policy.finished == {"a": False}
    assert dict(policy.doomed) == {"b": "a"}
    assert policy.next_job() == "c"
    with pytest.raises(ValueError, match="not pending"):
        policy.refuse("a")


def test_simulate_sends_each_job_to_a_worker_that_has_what_it_needs() -> None:
    # Worker 0 has no claude: the agent phases go to worker 1 while it runs the commands.
    jobs = [needing(CLAUDE, job(f"agent{i}", duration=2.0)) for i in range(3)]
    jobs += [needing(SHELL, job(f"cmd{i}")) for i in range(3)]
    schedule = simulate(DagPolicy, jobs, 2, has=[SHELL, CLAUDE | SHELL])
    assert {name for name, slot in schedule.slots.items() if slot.worker == 0} <= {
        "cmd0",
        "cmd1",
        "cmd2",
    }
    assert all(schedule.slots[f"agent{i}"].worker == 1 for i in range(3))
    assert schedule.makespan == 6.0


@pytest.mark.parametrize("policy_class", POLICIES)
def test_simulate_refuses_what_no_worker_can_run(policy_class: PolicyClass) -> None:
    jobs = [needing(CLAUDE, job("a")), job("b", deps=["a"]), job("c")]
    schedule = simulate(policy_class, jobs, 2, has=[SHELL, frozenset()])
    assert schedule.refused == ("a",)
    assert dict(schedule.doomed) == {"b": "a"}
    assert set(schedule.slots) == {"c"}


NEEDS = st.sampled_from([frozenset(), SHELL, CLAUDE, CLAUDE | SHELL])


@pytest.mark.parametrize("policy_class", POLICIES)
@settings(max_examples=100, deadline=None)
@given(jobs=plans(), pool=st.lists(NEEDS, min_size=1, max_size=5), data=st.data())
def test_a_mixed_pool_runs_every_job_some_worker_can_on_one_that_can(
    policy_class: PolicyClass, jobs: list[Job], pool: list[frozenset[str]], data: st.DataObject
) -> None:
    jobs = [needing(data.draw(NEEDS), j) for j in jobs]
    schedule = simulate(policy_class, jobs, len(pool), has=pool)
    slots, refused, doomed = schedule.slots, set(schedule.refused), schedule.doomed
    above = ancestors(jobs)
    for j in jobs:
        runnable = any(j.needs <= has for has in pool)
        assert [j.id in slots, j.id in refused, j.id in doomed].count(True) == 1, j.id
        assert (j.id in refused) <= (not runnable)
        if j.id not in refused:  # one refused before its refused dependency is not doomed
            assert (j.id in doomed) == bool(above[j.id] & refused), j.id
        if j.id in slots:
            assert j.needs <= pool[slots[j.id].worker]
            for dep in j.deps & slots.keys():
                assert slots[dep].finish <= slots[j.id].start
    assert_no_clash_overlaps(jobs, slots)


# --- the pool: what workers said, and a job none of them can run -------------------------------


def tools(worker: str, has: set[str], **fields: object) -> WorkerTools:
    return WorkerTools(worker, "host", "/root", frozenset(has), **fields)  # type: ignore[arg-type]


def test_a_worker_s_tools_come_back_as_they_went_and_anything_else_is_none() -> None:
    said = tools("gw0", {"git", "shell"}, lacks=(("claude", "no claude on its PATH"),))
    assert WorkerTools.from_wire(said.to_wire()) == said
    for other in ('{"kind": "started", "phase": "a"}', "not json", "[1]", '{"maestro_tools": 1}'):
        assert WorkerTools.from_wire(other) is None


def test_a_pool_refuses_only_once_every_worker_said_and_none_can() -> None:
    pool = Pool(2)
    pool.add(tools("gw0", {"git", "shell"}, lacks=(("claude", "no claude on its PATH"),)))
    needs = frozenset({"claude", "git"})
    assert pool.has("gw1") is None  # not said yet: it gets nothing meanwhile
    assert pool.refusal(needs, "phase 'a'") is None  # gw1 may have it
    pool.add(tools("gw1", {"shell"}, lacks=(("git", "no git on its PATH"),)))
    assert pool.refusal(needs, "phase 'a'") == (
        "phase 'a' needs claude and git, and no worker has all: "
        "gw0 on host: no claude on its PATH | gw1 on host: no claude; no git on its PATH"
    )
    assert pool.refusal(frozenset({"shell"}), "phase 'b'") is None
    pool.add(tools("gw2", {"claude", "git"}))  # a replacement, or a late worker
    assert pool.refusal(needs, "phase 'a'") is None


def test_an_override_gives_the_runtimes_and_keeps_git_as_found() -> None:
    found = tools("gw1", {"git", "claude"}, lacks=(("codex", "no codex on its PATH"),))
    given = found.given("ssh=b1", ["shell"])
    assert given.has == {"git", "shell"}
    assert (
        given.why_not({"claude"}) == "gw1 on host: --maestro-worker-runtimes gives it ssh=b1:shell"
    )


def test_a_refused_worker_runs_nothing_and_says_why() -> None:
    pool = Pool(1)
    pool.add(tools("gw0", {"git", "shell"}, refused="its rootdir /x is not the controller's /y"))
    assert pool.has("gw0") == frozenset()
    assert pool.refusal(frozenset({"shell"}), "phase 'a'") == (
        "phase 'a' needs shell, which no worker has: "
        "gw0 on host: its rootdir /x is not the controller's /y"
    )


def test_a_refusal_names_the_workers_in_gateway_order_whichever_said_first() -> None:
    pool = Pool(3)
    for worker in ("gw10", "gw2", "gw1"):  # as their reports came in
        pool.add(tools(worker, {"git", "shell"}, lacks=(("claude", "no claude on its PATH"),)))
    refusal = pool.refusal(frozenset({"claude"}), "phase 'a'")
    assert refusal is not None
    assert [part.split()[0] for part in refusal.split(": ", 1)[1].split(" | ")] == [
        "gw1",
        "gw2",
        "gw10",
    ]
