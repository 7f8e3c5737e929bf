"""SessionStore: session file shape, phase state machine, journal, crash safety, locking, resume."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_maestro.plan.graph import PlanGraph
from pytest_maestro.plan.model import Files, Phase, Plan
from pytest_maestro.state import (
    Interrupted,
    InvalidTransition,
    PhaseChange,
    PhaseError,
    SessionBusy,
    SessionCorrupt,
    SessionPaths,
    SessionStore,
    StateError,
    Status,
    Tokens,
    fingerprints,
    read_session,
)
from pytest_maestro.state import journal as journal_module
from pytest_maestro.state import store as store_module
from pytest_maestro.state.document import dump_yaml, parse_session
from pytest_maestro.state.journal import read_journal
from pytest_maestro.state.live import next_wait
from pytest_maestro.state.lock import holder_of, process_exists
from pytest_maestro.state.model import PhaseState, evolve
from pytest_maestro.state.resume import INTERRUPTED
from pytest_maestro.views.markdown_report import session_report

from ..helpers import FIXTURES, REPO

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")


def demo_plan(**changes: Phase) -> Plan:
    """a -> b -> c, and d on its own; ``changes`` replaces phases by id."""
    phases = [
        Phase(
            "a",
            "Models",
            agent="coder",
            files=Files(create=("src/a.py",), modify=("README.md",)),
            run=("python -c 'print(1)'",),
        ),
        Phase("b", "Repository", agent="coder", blocked_by=("a",), run=("true",)),
        Phase("c", "Routes", agent="tester", blocked_by=("b",)),
        Phase("d", "Docs", agent="writer"),
    ]
    phases = [changes.get(p.id, p) for p in phases]
    return Plan(path=Path("plans/demo.yaml"), format="native", phases=tuple(phases), title="Demo")


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative plan path is relative to where pytest runs: here, the project root."""
    monkeypatch.chdir(tmp_path)


def open_store(root: Path, plan: Plan | None = None, **options: bool) -> SessionStore:
    return SessionStore.open(root / ".maestro", PlanGraph(plan or demo_plan()), root, **options)


def error(
    message: str, kind: str = "error", *, agent: str = "", resolution: str = "pending"
) -> PhaseError:
    """An error as a move says it: the store stamps a blank time and agent."""
    return PhaseError(agent, "", kind, message, resolution)


def complete(store: SessionStore, *ids: str) -> None:
    for pid in ids:
        store.record(pid, Status.IN_PROGRESS, PhaseChange(attempts=1))
        store.record(pid, Status.COMPLETED, PhaseChange(result=f"{pid} done"))


def frontmatter(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text.split("\n---\n", 1)[0].removeprefix("---\n"))
    assert isinstance(data, dict)
    return data


def body(path: Path) -> str:
    return path.read_text(encoding="utf-8").split("\n---\n", 1)[1]


def journal_lines(path: Path) -> list[bytes]:
    """The journal's lines, without the zeros written ahead of them."""
    return path.read_bytes().rstrip(b"\0").splitlines()


def child(root: Path, code: str, **popen: object) -> subprocess.Popen[str]:
    """A second Python process running ``code`` on the demo plan in ``root``."""
    prelude = "import os, sys, signal, time\nfrom pathlib import Path\n"
    prelude += "from pytest_maestro.state import PhaseChange, Tokens\n"
    prelude += "from tests.state.test_state import demo_plan, open_store, complete\n"
    prelude += "root = Path(sys.argv[1])\n"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-c", prelude + textwrap.dedent(code), str(root)],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,  # type: ignore[call-overload]
    )


def run_child(root: Path, code: str) -> subprocess.CompletedProcess[str]:
    process = child(root, code)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


# -- the session file --------------------------------------------------------------------------


def test_round_trip_keeps_every_fact(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.record("a", "in_progress", PhaseChange(attempts=1, worker="gw1"))
        store.record(
            "a",
            "completed",
            PhaseChange(
                tokens=Tokens(input=100, output=20, cached=5, cost=0.25),
                attempts=2,
                files_created=("src/a.py",),
                files_modified=("README.md",),
                result="line one\n  indented: yes\nüñí 'quotes' \"too\"\n",
                downstream_context={"key_interfaces_introduced": ["A()"], "warnings": []},
                errors=(error("1 failing", "validation", agent="coder", resolution="retry"),),
            ),
        )
        store.record("b", "in_progress")
        store.record("b", "failed", PhaseChange(result="exit 1"))
        store.record("c", "skipped")
        recorded = store.phases()
    assert read_session(store.path).phases == {p.id: p for p in recorded}
    with open_store(tmp_path) as again:
        assert again.phases() == recorded
        assert again.phase("a").tokens == Tokens(100, 20, 5, 0.25)
        assert again.phase("a").result == "line one\n  indented: yes\nüñí 'quotes' \"too\"\n"


def test_frontmatter_has_maestro_fields_and_subsecond_times(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        complete(store, "a")
        store.record("b", "in_progress", PhaseChange(worker="gw0"))
        store.record("b", "failed", PhaseChange(errors=(error("boom", "runtime"),)))
    data = frontmatter(store.path)
    assert list(data)[:6] == ["session_id", "task", "plan", "created", "updated", "status"]
    assert data["task"] == "Demo"
    assert data["plan"] == "plans/demo.yaml"
    assert data["status"] == "failed"
    assert data["total_phases"] == 4
    assert {"execution_mode", "execution_backend", "current_batch", "token_usage"} <= set(data)
    assert set(data["token_usage"]) >= {"total_input", "total_output", "total_cached", "by_agent"}
    phases = {p["id"]: p for p in data["phases"]}
    assert list(phases) == ["a", "b", "c", "d"]
    a, b = phases["a"], phases["b"]
    assert set(a) >= {
        "id", "name", "status", "agents", "parallel", "blocked_by", "started", "completed",
        "attempts", "files_created", "files_modified", "files_deleted", "downstream_context",
        "errors", "result", "worker", "definition",
    }  # fmt: skip
    assert (a["status"], a["agents"], a["attempts"], a["result"]) == (
        "completed",
        ["coder"],
        1,
        "a done",
    )
    assert b["blocked_by"] == ["a"] and b["worker"] == "gw0"
    for moment in (
        data["created"],
        data["updated"],
        a["started"],
        a["completed"],
        b["errors"][0]["timestamp"],
    ):
        assert isinstance(moment, str) and TIME.match(moment), moment
    assert a["started"] < a["completed"] <= b["started"]
    assert b["errors"][0] == {
        "agent": "coder",
        "timestamp": b["errors"][0]["timestamp"],
        "type": "runtime",
        "message": "boom",
        "resolution": "pending",
    }
    assert (tmp_path / ".maestro" / ".gitignore").read_text() == "*\n"


def test_body_is_a_readable_log_with_the_run_report(tmp_path: Path) -> None:
    store = SessionStore.open(
        tmp_path / ".maestro", PlanGraph(demo_plan()), tmp_path, report=session_report
    )
    with store:
        complete(store, "a")
        store.record("b", "in_progress")
        store.record(
            "b", "failed", PhaseChange(files_created=("src/b.py",), result="2 checks failed")
        )
    text = body(store.path)
    assert "```mermaid\nflowchart TD\n" in text
    assert re.search(r'p0_a\["a: Models"\]:::completed', text)
    assert re.search(r'p1_b\["b: Repository"\]:::failed', text)
    edges = re.findall(r"^\s+(p\d_\w) --> (p\d_\w)$", text, re.M)
    assert sorted(edges) == [("p0_a", "p1_b"), ("p1_b", "p2_c")]
    assert "| b | failed |" in text
    section = text[text.index("### Phase b: Repository") :].split("### Phase c")[0]
    assert "- Status: failed (attempts 0)" in section
    assert "- Created: `src/b.py`" in section
    assert "> 2 checks failed" in section


def test_body_without_a_report_is_the_log_alone(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        complete(store, "a")
    text = body(store.path)
    assert "```mermaid" not in text
    assert "### Phase a: Models ✅" in text


TEXT = st.text(st.characters() | st.sampled_from("\n\n \t#:-|>'\"\r\x85\u2028\ufeffyYn"))
JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


def without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub("[\ud800-\udfff]", "\ufffd", value)
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(TEXT, JSON_LIKE, min_size=1, max_size=5))
@example({"": "\t0\n"})  # a block whose first line opens with a tab: libyaml refuses it
def test_frontmatter_writer_round_trips_through_yaml(data: dict[str, Any]) -> None:
    text = dump_yaml(data)
    expected = without_surrogates(data)  # lone surrogates cannot be written as UTF-8
    assert yaml.safe_load(text) == expected
    assert yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) == expected


def test_session_file_name_comes_from_the_plan_path(tmp_path: Path) -> None:
    one = SessionPaths.for_plan(tmp_path, demo_plan(), tmp_path)
    other = SessionPaths.for_plan(
        tmp_path, replace(demo_plan(), path=Path("old/demo.yaml")), tmp_path
    )
    absolute = SessionPaths.for_plan(
        tmp_path, replace(demo_plan(), path=tmp_path / "plans/demo.yaml"), tmp_path
    )
    assert re.fullmatch(r"demo-[0-9a-f]{8}", one.name)
    assert one.name != other.name
    assert absolute == one


# -- the phase state machine -------------------------------------------------------------------

VALID_PATHS = [
    ["in_progress", "completed"],
    ["in_progress", "failed", "in_progress", "completed"],
    ["in_progress", "blocked", "in_progress", "failed"],
    ["skipped", "in_progress", "completed"],
    ["in_progress", "failed", "skipped", "skipped", "in_progress", "blocked", "skipped"],
]


@pytest.mark.parametrize("path", VALID_PATHS, ids="-".join)
def test_valid_transitions_are_recorded(tmp_path: Path, path: list[str]) -> None:
    with open_store(tmp_path) as store:
        for status in path:
            assert store.record("a", status).status == Status(status)
    assert read_session(store.path).phases["a"].status == Status(path[-1])


INVALID = [
    ([], "completed"),
    ([], "failed"),
    ([], "blocked"),
    ([], "pending"),
    (["in_progress"], "in_progress"),
    (["in_progress"], "skipped"),
    (["in_progress"], "pending"),
    (["in_progress", "completed"], "in_progress"),
    (["in_progress", "completed"], "failed"),
    (["in_progress", "completed"], "skipped"),
    (["in_progress", "failed"], "completed"),
    (["skipped"], "completed"),
]


@pytest.mark.parametrize(
    ("before", "status"), INVALID, ids=lambda v: "-".join(v) if isinstance(v, list) else v
)
def test_invalid_transitions_raise_and_change_nothing(
    tmp_path: Path, before: list[str], status: str
) -> None:
    with open_store(tmp_path) as store:
        for earlier in before:
            store.record("a", earlier)
        journal = store.paths.journal.read_bytes()
        old = store.phase("a")
        with pytest.raises(InvalidTransition) as error:
            store.record("a", status)
        assert (
            str(error.value)
            == f"phase 'a': {old.status.value} -> {status} is not a valid transition"
        )
        assert store.phase("a") == old
        assert store.paths.journal.read_bytes() == journal


def test_wrong_status_or_phase_is_a_clear_error(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        with pytest.raises(ValueError, match="unknown phase status 'done'"):
            store.record("a", "done")
        with pytest.raises(KeyError, match=r"phase 'zz' is not in plan plans/demo\.yaml"):
            store.record("zz", "in_progress")
        assert store.phase("a").status is Status.PENDING


EARLIER = "2025-01-02T03:04:05.000006Z"
# A value for each fact a change can say, none of them what the phase would hold without it.
SAID: dict[str, Any] = {
    "started": EARLIER,
    "completed": EARLIER,
    "attempts": 3,
    "worker": "gw2",
    "agent": "reviewer",
    "result": "3 checks passed",
    "errors": (PhaseError("coder", EARLIER, "validation", "flaky", "retried"),),
    "files_created": ("src/new.py", "src/other.py"),
    "files_modified": ("README.md",),
    "files_deleted": ("old.py",),
    "downstream_context": {"key_interfaces_introduced": ["A()"], "warnings": ["slow"]},
    "tokens": Tokens(input=10, output=2, cached=1, cost=0.5, unpriced=("m",)),
    "unverified": True,
    "review": {"mode": "spec", "reviewer": "reviewer (claude)", "passed": True, "criteria": []},
}


def held(phase: Any, fact: str) -> Any:
    """What a phase state holds of a fact a change said."""
    return phase.agents[-1] if fact == "agent" else getattr(phase, fact)


@pytest.mark.parametrize("fact", [f.name for f in fields(PhaseChange)])
def test_each_fact_of_a_change_reaches_the_phase_through_the_journal(
    tmp_path: Path, fact: str
) -> None:
    """Each fact of the typed record is written to the journal (alone with what the store fills
    in), and the phase holds it: in memory, replayed from the journal, and from the snapshot."""
    with open_store(tmp_path) as store:
        store.record("a", Status.IN_PROGRESS)
        store.record("a", Status.COMPLETED, PhaseChange(**{fact: SAID[fact]}))
        entry = read_journal(store.paths.journal)[0][-1]
        assert set(entry["facts"]) == {fact, "completed"}
        assert held(store.phase("a"), fact) == SAID[fact]
        assert held(read_session(store.path).phases["a"], fact) == SAID[fact]
    assert store.paths.journal.read_bytes() == b""  # folded: now the snapshot holds it
    assert held(read_session(store.path).phases["a"], fact) == SAID[fact]


def test_a_fact_not_said_is_kept_but_a_skip_says_its_result(tmp_path: Path) -> None:
    """A skip did not run: the result of a run before it no longer describes the phase."""
    with open_store(tmp_path) as store:
        store.record("a", "in_progress", PhaseChange(worker="gw1", attempts=2))
        failed = store.record("a", "failed", PhaseChange(result="exit 1"))
        assert (failed.worker, failed.attempts, failed.result) == ("gw1", 2, "exit 1")
        why = "dependency 'x' failed"
        assert store.record("a", "skipped", PhaseChange(result=why)).result == why
        skipped = store.record("a", "skipped")
        assert (skipped.worker, skipped.attempts, skipped.result) == ("gw1", 2, None)
    assert read_session(store.path).phases["a"] == skipped


def test_reset_lets_a_completed_phase_run_again(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        complete(store, "a")
        with pytest.raises(InvalidTransition):
            store.record("a", "in_progress")
        reset = store.reset("a", "definition changed")
        assert (reset.status, reset.started, reset.completed, reset.result) == (
            Status.PENDING,
            None,
            None,
            None,
        )
        assert (reset.errors[-1].type, reset.errors[-1].message) == ("reset", "definition changed")
        assert store.record("a", "in_progress").status is Status.IN_PROGRESS


def test_a_rerun_clears_what_the_last_run_produced(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.record("a", "in_progress", PhaseChange(attempts=1))
        store.record("a", "failed", PhaseChange(files_created=("half.py",), result="boom"))
        rerun = store.record("a", "in_progress", PhaseChange(attempts=1))
    assert (rerun.files_created, rerun.result, rerun.completed) == ((), None, None)
    assert rerun.started is not None


def test_tokens_add_up_by_phase_and_agent(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.record("a", "in_progress", PhaseChange(tokens=Tokens(input=10, output=1)))
        store.record("a", "completed", PhaseChange(tokens=Tokens(input=5, cached=2)))
        change = PhaseChange(tokens=Tokens(input=7, output=3), agent="reviewer")
        store.record("d", "in_progress", change)
    data = frontmatter(store.path)
    assert data["token_usage"] == {
        "total_input": 22,
        "total_output": 4,
        "total_cached": 2,
        "by_agent": {
            "coder": {"input": 15, "output": 1, "cached": 2},
            "reviewer": {"input": 7, "output": 3, "cached": 0},
        },
    }
    assert store.phase("d").agents == ("writer", "reviewer")


def test_stop_records_the_reason(tmp_path: Path) -> None:
    reason = "circuit breaker: 3 of 4 pending phases would be skipped"
    with open_store(tmp_path) as store:
        store.record("a", "in_progress")
        store.record("a", "failed")
        store.stop(reason)
        store.record("b", "skipped")  # phases still settle after the stop
    assert (store.status, store.stop_reason) == ("stopped", reason)
    data = frontmatter(store.path)
    assert (data["status"], data["stop_reason"]) == ("stopped", reason)
    assert f"## Stopped\n\n{reason}\n" in body(store.path)


def test_session_fields_and_final_status(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.set_session(execution_mode="parallel", execution_backend="xdist", current_batch=2)
        with pytest.raises(ValueError, match="execution_mode 'fast'"):
            store.set_session(execution_mode="fast")
        complete(store, "a", "b", "c", "d")
    data = frontmatter(store.path)
    assert (data["execution_mode"], data["execution_backend"], data["current_batch"]) == (
        "parallel",
        "xdist",
        2,
    )
    assert data["status"] == "completed"
    with pytest.raises(RuntimeError, match="is closed"):
        store.reset("a")


# -- journal and crash safety ------------------------------------------------------------------


def test_each_transition_is_on_disk_when_record_returns(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        snapshot = store.path.read_text(encoding="utf-8")
        complete(store, "a")
        store.record("b", "in_progress")
        assert store.path.read_text(encoding="utf-8") == snapshot  # the snapshot did not move
        lines = journal_lines(store.paths.journal)
        assert [json.loads(line)["seq"] for line in lines] == [1, 2, 3]
        replayed = read_session(store.path)  # another reader: snapshot + journal
        assert replayed.phases["a"].status is Status.COMPLETED
        assert replayed.phases["b"].status is Status.IN_PROGRESS
        assert parse_session(snapshot, "snapshot").phases["a"].status is Status.PENDING


def test_journal_is_replayed_after_the_process_dies(tmp_path: Path) -> None:
    done = run_child(
        tmp_path,
        """
        store = open_store(root)
        complete(store, "a")
        store.record("d", "in_progress")
        store.record("d", "completed", PhaseChange(tokens=Tokens(input=3)))
        os._exit(0)  # no close(): the snapshot never saw these
        """,
    )
    assert done.returncode == 0, done.stderr
    with open_store(tmp_path) as store:
        assert store.phase("a").status is Status.COMPLETED
        assert store.phase("d").tokens == Tokens(input=3)
        assert store.completed_earlier("a") == store.phase("a").completed
        assert store.paths.journal.read_bytes() == b""  # folded into the snapshot on open


def test_journal_without_its_snapshot_still_counts(tmp_path: Path) -> None:
    done = run_child(tmp_path, "complete(open_store(root), 'a'); os._exit(0)")
    assert done.returncode == 0, done.stderr
    SessionPaths.for_plan(tmp_path / ".maestro", demo_plan(), tmp_path).snapshot.unlink()
    with open_store(tmp_path) as store:
        assert store.phase("a").status is Status.COMPLETED


def test_torn_last_journal_line_is_ignored(tmp_path: Path) -> None:
    done = run_child(
        tmp_path,
        """
        store = open_store(root)
        complete(store, "a")
        with open(store.paths.journal, "ab") as journal:
            journal.write(b'{"seq": 3, "at": "2025-01-01T00:00:00.0Z", "op": "rec')
        os._exit(0)
        """,
    )
    assert done.returncode == 0, done.stderr
    paths = SessionPaths.for_plan(tmp_path / ".maestro", demo_plan(), tmp_path)
    assert read_session(paths.snapshot).phases["a"].status is Status.COMPLETED
    with open_store(tmp_path) as store:
        assert store.phase("a").status is Status.COMPLETED
        assert store.paths.journal.read_bytes() == b""  # the torn tail is gone
        store.record("b", "in_progress")
        assert read_session(paths.snapshot).phases["b"].status is Status.IN_PROGRESS


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"seq": 10**23, "op": "stop", "reason": "r"}, "field 'seq' must be a whole number"),
        (
            {"seq": 9, "op": "session", "fields": {"execution_backend": {"a": 1}}},
            "fields: field 'execution_backend' must be text",
        ),
    ],
    ids=["seq-past-any-count", "a-session-field-of-no-text"],
)
def test_a_journal_entry_the_snapshot_would_refuse_is_refused_as_it_is_read(
    tmp_path: Path, entry: dict[str, Any], said: str
) -> None:
    """Read once, it went into the snapshot, which the run after refused: a run that worked,
    then one that did not. Now the first run refuses it in one line, the files as they were."""
    with open_store(tmp_path) as store:
        complete(store, "a")
        journal = store.paths.journal
    journal.write_bytes(journal.read_bytes().rstrip(b"\0") + json.dumps(entry).encode() + b"\n")
    before = {path: path.read_bytes() for path in (journal, journal.with_suffix(".md"))}
    with pytest.raises(SessionCorrupt) as refused:
        open_store(tmp_path)
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert {path: path.read_bytes() for path in before} == before


def test_a_session_field_left_empty_in_the_journal_reads_as_the_snapshot_reads_it(
    tmp_path: Path,
) -> None:
    with open_store(tmp_path) as store:
        journal = store.paths.journal
    entry = {
        "seq": 99,
        "op": "session",
        "fields": {"execution_mode": None, "execution_backend": ""},
    }
    journal.write_bytes(journal.read_bytes().rstrip(b"\0") + json.dumps(entry).encode() + b"\n")
    replayed = read_session(journal.with_suffix(".md"))
    assert (replayed.execution_mode, replayed.execution_backend) == ("sequential", "pytest")
    with open_store(tmp_path) as store:  # folded into the snapshot, and read back the same
        assert store.document().execution_mode == "sequential"
    assert read_session(journal.with_suffix(".md")).execution_backend == "pytest"


def test_appends_overwrite_zeros_written_ahead(tmp_path: Path) -> None:
    """An append that leaves the file's size alone syncs without a file-system journal commit."""
    with open_store(tmp_path) as store:
        store.record("a", "in_progress")
        size = store.paths.journal.stat().st_size
        complete(store, "d")
        store.record("a", "failed", PhaseChange(result="x" * 1000))
        assert (
            store.paths.journal.stat().st_size
            == size
            > len(b"".join(journal_lines(store.paths.journal)))
        )
        assert len(read_journal(store.paths.journal)[0]) == 4
    assert store.paths.journal.read_bytes() == b""  # folded at close: no zeros left behind


def test_a_record_not_durable_goes_to_disk_with_the_next_durable_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[list[int]] = []  # the seqs the journal file held at each sync
    sync_data = journal_module._sync_data

    def sync_and_note(fd: int) -> None:
        sync_data(fd)
        synced.append([entry["seq"] for entry in read_journal(store.paths.journal)[0]])

    with open_store(tmp_path) as store:
        monkeypatch.setattr(journal_module, "_sync_data", sync_and_note)
        store.record("a", "in_progress", durable=False)
        store.record("d", "in_progress", durable=False)
        assert synced == []
        store.record("a", "completed")
        assert synced == [[1, 2, 3]]  # one sync for the three
        store.record("d", "failed")
        assert synced == [[1, 2, 3], [1, 2, 3, 4]]
        monkeypatch.undo()
    assert read_session(store.path).phases["d"].status is Status.FAILED


def test_a_record_not_durable_survives_the_death_of_its_process(tmp_path: Path) -> None:
    done = run_child(
        tmp_path,
        """
        store = open_store(root)
        store.record("a", "in_progress", durable=False)
        os._exit(0)
        """,
    )
    assert done.returncode == 0, done.stderr
    with open_store(tmp_path) as store:
        assert [i.id for i in store.interrupted] == ["a"]


def test_interrupt_resets_what_other_records_say_was_running(tmp_path: Path) -> None:
    """A worker's record of a start, where the session's own record of it never reached the disk:
    the phase is reset and reported interrupted, unless the session has it completed."""
    with open_store(tmp_path) as first:
        complete(first, "a")
        first.record("b", "in_progress")
        first.record("b", "failed")
    files = demo_plan().phase("a").files
    with open_store(tmp_path) as store:
        assert store.interrupted == ()
        reset = store.interrupt(
            [Interrupted("a", files), Interrupted("b", Files()), Interrupted("d", Files())]
        )
        assert [i.id for i in reset] == ["b", "d"]  # a ended before the kill: it completed
        assert store.interrupted == reset
        assert store.interrupt([Interrupted("b", Files())]) == ()  # once is enough
        assert store.phase("b").status is Status.PENDING
        assert store.phase("b").errors[-1].message == INTERRUPTED
        assert store.completed_earlier("a") is not None
    doc = read_session(store.path)
    assert [doc.phases[p].errors[-1].message for p in "bd"] == [INTERRUPTED, INTERRUPTED]


def test_entries_already_in_the_snapshot_are_not_applied_twice(tmp_path: Path) -> None:
    """A crash after the snapshot was written but before the journal was emptied."""
    with open_store(tmp_path) as store:
        store.record("a", "in_progress")
        change = PhaseChange(tokens=Tokens(input=5), errors=(error("once"),), files_created=("x",))
        store.record("a", "failed", change)
        journal = store.paths.journal.read_bytes()
    store.paths.journal.write_bytes(journal)
    doc = read_session(store.path)
    assert doc.tokens == Tokens(input=5)
    assert [e.message for e in doc.phases["a"].errors] == ["once"]


def test_compaction_keeps_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_MIN_JOURNAL", 3)
    monkeypatch.setattr(store_module, "_JOURNAL_PER_PHASE", 1)  # bound: 4 entries for 4 phases
    with open_store(tmp_path) as store:
        for attempt in range(1, 4):
            store.record("a", "in_progress", PhaseChange(attempts=attempt, tokens=Tokens(input=1)))
            store.record("a", "failed", PhaseChange(errors=(error(f"attempt {attempt}"),)))
        complete(store, "d")
        assert len(journal_lines(store.paths.journal)) <= 5
        assert frontmatter(store.path)["journal_seq"] >= 5
        before = store.phases()
        assert read_session(store.path).phases == {p.id: p for p in before}
    assert [e.message for e in store.phase("a").errors] == ["attempt 1", "attempt 2", "attempt 3"]
    with open_store(tmp_path) as again:
        assert again.phases() == before
        assert again.phase("a").tokens == Tokens(input=3)


def test_failed_snapshot_write_leaves_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path)
    complete(store, "a")
    old = store.path.read_bytes()

    def no_rename(source: object, target: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched, pytest.raises(StateError, match=r"\(No space left"):
        patched.setattr(os, "replace", no_rename)
        store.close()
    assert store.path.read_bytes() == old
    assert not list(store.paths.state_dir.glob("*.tmp")) and not list(
        store.paths.state_dir.glob(".*.tmp")
    )
    with open_store(tmp_path) as again:  # the journal still holds what the snapshot missed
        assert again.phase("a").status is Status.COMPLETED


@POSIX_ONLY
def test_crash_between_temp_write_and_rename_keeps_the_old_snapshot(tmp_path: Path) -> None:
    done = run_child(
        tmp_path,
        """
        store = open_store(root)
        complete(store, "a")
        os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
        store.close()
        """,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    paths = SessionPaths.for_plan(tmp_path / ".maestro", demo_plan(), tmp_path)
    temps = list(paths.state_dir.glob(f".{paths.name}.md.*.tmp"))
    assert len(temps) == 1 and "status: completed" in temps[0].read_text()
    snapshot = parse_session(paths.snapshot.read_text(encoding="utf-8"), "old snapshot")
    assert snapshot.phases["a"].status is Status.PENDING  # the snapshot open() wrote, whole
    with open_store(tmp_path) as store:
        assert store.phase("a").status is Status.COMPLETED
        assert not list(paths.state_dir.glob("*.tmp")) and not list(paths.state_dir.glob(".*.tmp"))


def test_unreadable_snapshot_is_a_one_line_error(tmp_path: Path) -> None:
    paths = SessionPaths.for_plan(tmp_path / ".maestro", demo_plan(), tmp_path)
    paths.state_dir.mkdir()
    paths.snapshot.write_text("---\nphases: [\n---\n")
    for _ in range(2):  # the lock is released after the error
        with pytest.raises(SessionCorrupt) as error:
            open_store(tmp_path)
        assert "\n" not in str(error.value)
        assert str(error.value).startswith(f"{paths.snapshot}: frontmatter is not YAML or JSON")


# -- locking -----------------------------------------------------------------------------------


def test_second_process_on_the_same_plan_gets_session_busy(tmp_path: Path) -> None:
    with open_store(tmp_path):
        done = run_child(
            tmp_path,
            """
            from pytest_maestro.state import SessionBusy
            try:
                open_store(root)
            except SessionBusy as error:
                print(error)
                sys.exit(3)
            """,
        )
    assert done.returncode == 3, done.stderr
    assert re.fullmatch(
        rf"plan plans/demo.yaml is already running \(pid {os.getpid()} since \S+Z\)\n", done.stdout
    )


def test_second_store_in_the_same_process_is_busy_too(tmp_path: Path) -> None:
    with open_store(tmp_path), pytest.raises(SessionBusy, match=f"pid {os.getpid()} since"):
        open_store(tmp_path)
    open_store(tmp_path).close()  # released by close()


@POSIX_ONLY
def test_sigkilled_holder_does_not_block_and_its_phase_is_reset(tmp_path: Path) -> None:
    holder = child(
        tmp_path,
        """
        store = open_store(root)
        complete(store, "d")
        store.record("a", "in_progress", PhaseChange(attempts=1))
        print("ready", flush=True)
        time.sleep(120)
        """,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        with pytest.raises(SessionBusy, match=f"pid {holder.pid} since"):
            open_store(tmp_path)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    with open_store(tmp_path) as store:
        assert store.interrupted == (
            Interrupted("a", Files(create=("src/a.py",), modify=("README.md",))),
        )
        a = store.phase("a")
        assert (a.status, a.started, a.errors[-1].type) == (Status.PENDING, None, "reset")
        assert store.completed_earlier("d") is not None
        assert json.loads(store.paths.info.read_text())["pid"] == os.getpid()


# -- resume ------------------------------------------------------------------------------------


def test_unchanged_completed_phases_are_completed_earlier(tmp_path: Path) -> None:
    with open_store(tmp_path) as first:
        complete(first, "a", "b", "c", "d")
        created = first.phase("c").completed
    with open_store(tmp_path) as second:
        assert second.changed == () and second.interrupted == ()
        assert second.completed_earlier("c") == created
        assert all(second.completed_earlier(p.id) == p.completed for p in second.phases())
        assert frontmatter(second.path)["created"] == frontmatter(first.path)["created"]


def test_a_changed_phase_and_its_dependents_run_again(tmp_path: Path) -> None:
    with open_store(tmp_path) as first:
        complete(first, "a", "b", "c", "d")
    b = demo_plan().phase("b")
    changed = demo_plan(b=replace(b, run=("make build",)))
    with open_store(tmp_path, changed) as second:
        assert second.changed == ("b", "c")
        assert second.completed_earlier("a") and second.completed_earlier("d")
        assert second.completed_earlier("b") is None and second.completed_earlier("c") is None
        assert second.last_status("c") is Status.PENDING
        assert second.phase("c").errors[-1].type == "reset"
    moved = demo_plan(b=replace(b, line=99, estimate=30.0, timeout=5.0, tags=("slow",)))
    with open_store(tmp_path, moved) as third:  # where and how long is not what it does
        assert third.changed == ()


def test_fingerprints_are_stable_and_follow_dependencies() -> None:
    plan = demo_plan()
    prints = fingerprints(PlanGraph(plan))
    assert prints == fingerprints(PlanGraph(demo_plan())) and len(set(prints.values())) == 4
    a = plan.phase("a")
    edited = fingerprints(PlanGraph(demo_plan(a=replace(a, files=Files(create=("src/other.py",))))))
    assert [pid for pid in prints if prints[pid] != edited[pid]] == ["a", "b", "c"]
    chain = tuple(
        Phase(str(i), f"p{i}", blocked_by=(str(i - 1),) if i else ()) for i in range(5000)
    )
    long = fingerprints(PlanGraph(Plan(path=Path("long.yaml"), format="native", phases=chain)))
    assert len(long) == 5000


def test_fresh_archives_the_old_session(tmp_path: Path) -> None:
    with open_store(tmp_path) as first:
        complete(first, "a")
        first.record("b", "in_progress")
        name = first.paths.name
    with open_store(tmp_path, fresh=True) as second:
        assert second.archived is not None
        assert all(p.status is Status.PENDING for p in second.phases())
        assert second.completed_earlier("a") is None
    archived = sorted(p.name for p in (tmp_path / ".maestro" / "archive").iterdir())
    assert len(archived) == 1 and re.fullmatch(rf"{name}-\d{{8}}T\d{{12}}Z\.md", archived[0])
    assert read_session(second.archived).phases["a"].status is Status.COMPLETED


# -- Maestro's own session files ---------------------------------------------------------------


def maestro_plan() -> Plan:
    phases = (
        Phase("1", "Data model", agent="architect", parallel=False),
        Phase("2", "Repository layer", agent="coder", blocked_by=("1",)),
        Phase(
            "3",
            "HTTP routes",
            agent="coder",
            blocked_by=("2",),
            files=Files(create=("src/routes.ts",)),
        ),
        Phase("4", "API docs", agent="technical_writer", blocked_by=("3",)),
    )
    return Plan(
        path=Path("docs/maestro/plans/todo-impl-plan.md"), format="maestro-md", phases=phases
    )


def test_maestro_json_session_loads() -> None:
    doc = read_session(FIXTURES / "maestro-active-session.md")
    assert (doc.session_id, doc.status, doc.execution_mode, doc.current_batch) == (
        "2025-06-02-todo-api",
        "in_progress",
        "parallel",
        "batch-2",
    )
    assert doc.plan == "docs/maestro/plans/2025-06-02-todo-api-impl-plan.md"
    assert doc.tokens == Tokens(48210, 12007, 9100)
    assert doc.by_agent["architect"] == Tokens(12000, 3100, 4000)
    assert list(doc.phases) == ["1", "2", "3", "4"]
    assert [p.status.value for p in doc.phases.values()] == [
        "completed",
        "completed",
        "in_progress",
        "pending",
    ]
    two = doc.phases["2"]
    assert (two.attempts, two.blocked_by, two.agents, two.files_modified) == (
        2,
        ("1",),
        ("coder",),
        ("src/models/todo.ts",),
    )
    assert (two.errors[0].type, two.errors[0].resolution) == ("validation", "retry")
    assert two.downstream_context["integration_points"] == ["src/repo/index.ts"]
    assert doc.extra["workflow_mode"] == "standard"


def test_maestro_session_resumes_under_the_store(tmp_path: Path) -> None:
    plan = maestro_plan()
    paths = SessionPaths.for_plan(tmp_path / ".maestro", plan, tmp_path)
    paths.state_dir.mkdir()
    shutil.copy(FIXTURES / "maestro-active-session.md", paths.snapshot)
    with SessionStore.open(paths.state_dir, PlanGraph(plan), tmp_path) as store:
        assert store.completed_earlier("2") == "2025-06-02T10:02:19.633Z"
        assert store.interrupted == (Interrupted("3", Files(create=("src/routes.ts",))),)
        assert store.session_id == "2025-06-02-todo-api"
        store.record("3", "in_progress")
        store.record("3", "completed")
    data = frontmatter(paths.snapshot)
    assert data["workflow_mode"] == "standard"  # Maestro's own fields survive
    assert [p["status"] for p in data["phases"]] == [
        "completed",
        "completed",
        "completed",
        "pending",
    ]
    assert all(p["definition"] for p in data["phases"])


# -- the live snapshot ---------------------------------------------------------------------------


def _snapshot_alone(path: Path) -> dict[str, str]:
    doc = parse_session(path.read_text(encoding="utf-8"), str(path))
    return {p.id: p.status.value for p in doc.phases.values()}


def _until(condition: Any, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.01)


def test_refresh_rewrites_the_snapshot_and_keeps_the_journal(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    try:
        store.start_refresh(0.02)
        complete(store, "a")
        store.record("b", "in_progress", durable=False)
        _until(lambda: _snapshot_alone(store.path)["b"] == "in_progress")
        assert _snapshot_alone(store.path)["a"] == "completed"
        assert len(read_journal(store.paths.journal)[0]) == 3  # a reader still replays it
        assert read_session(store.path).phases["b"].status is Status.IN_PROGRESS
    finally:
        store.close()
    assert [t for t in threading.enumerate() if t.name == "maestro-snapshot"] == []
    assert _snapshot_alone(store.path)["b"] == "in_progress"


def test_a_slow_refresh_never_puts_back_an_older_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh that rendered before a fold wrote a newer snapshot (and emptied the journal)
    must not replace it: the changes in between would be lost."""
    store = open_store(tmp_path)
    try:
        complete(store, "a")
        rendered = threading.Event()
        folded = threading.Event()
        real_render = store._render

        def slow_render(doc: Any) -> str:
            text = real_render(doc)
            if threading.current_thread().name == "maestro-snapshot":
                rendered.set()
                folded.wait(10)
            return text

        monkeypatch.setattr(store, "_render", slow_render)
        stale: list[bool] = []  # what the refresh that rendered before the fold returned
        returned = threading.Event()
        real_refresh = store._refresh

        def refresh() -> bool:
            wrote = real_refresh()
            if folded.is_set() and not returned.is_set():
                stale.append(wrote)
                returned.set()
            return wrote

        monkeypatch.setattr(store, "_refresh", refresh)
        store.start_refresh(0.01)
        assert rendered.wait(10)
        store.record("b", "in_progress")
        store.record("b", "completed")
        monkeypatch.setattr(store_module, "_MIN_JOURNAL", 0)  # the next write folds
        monkeypatch.setattr(store_module, "_JOURNAL_PER_PHASE", 0)
        store.record("c", "in_progress")
        assert read_journal(store.paths.journal)[0] == []  # folded
        folded.set()
        assert returned.wait(10)
        assert stale == [False]  # it saw the newer snapshot and wrote nothing
        assert read_session(store.path).phases["b"].status is Status.COMPLETED
        assert _snapshot_alone(store.path)["c"] == "in_progress"
    finally:
        store.close()


def test_a_refresh_that_cannot_write_only_lags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path)
    failures = []

    def full_disk(path: Path, text: str) -> None:
        failures.append(path)
        raise OSError(28, "No space left on device")

    try:
        monkeypatch.setattr(store_module, "atomic_write", full_disk)
        store.start_refresh(0.01)
        complete(store, "a")
        _until(lambda: len(failures) >= 2)  # it tried, and tries again
        monkeypatch.undo()
        _until(lambda: _snapshot_alone(store.path)["a"] == "completed")
    finally:
        store.close()
    assert store.lag is not None
    assert re.fullmatch(
        r"([2-9]|\d\d+) of its rewrites failed \(No space left on device\)", store.lag
    )


def test_a_refresh_that_never_failed_says_no_lag(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.start_refresh(0.01)
    complete(store, "a")
    _until(lambda: _snapshot_alone(store.path)["a"] == "completed")
    store.close()
    assert store.lag is None


def test_a_rewrite_that_takes_long_comes_less_often() -> None:
    """The live view's thread renders in Python, under the GIL: a plan whose snapshot takes
    40 ms to write is rewritten every 2 s, so the thread never takes over 2% of the run."""
    assert next_wait(1.0, 0.005) == 1.0
    assert next_wait(1.0, 0.04) == pytest.approx(2.0)
    assert next_wait(1.0, 0.4) == pytest.approx(20.0)


def test_the_first_rewrite_is_spaced_by_the_fold_that_opened_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan whose opening fold took long is not rewritten a second later: the first rewrite
    waits as a rewrite after it would."""
    store = open_store(tmp_path)
    monkeypatch.setattr(store, "_fold_took", 0.04)
    try:
        store.start_refresh(0.01)
        assert store._refresher is not None
        assert store._refresher.first_wait == pytest.approx(2.0)
    finally:
        store.close()


def test_evolve_is_replace_for_fields_and_refuses_others() -> None:
    old = PhaseState("a", "A", agents=("coder",), attempts=2)
    new = evolve(old, {"status": Status.COMPLETED, "attempts": 3, "result": "done"})
    assert new == replace(old, status=Status.COMPLETED, attempts=3, result="done")
    assert old.attempts == 2 and old.status is Status.PENDING  # the old state is untouched
    with pytest.raises(TypeError, match="no fields \\['colour'\\]"):
        evolve(old, {"colour": "red"})


@pytest.mark.parametrize(
    "info",
    [
        '{"pid": 1e400, "since": "x"}',  # infinity: int() of it overflows
        '{"pid": 1' + "0" * 40 + ', "since": "x"}',  # past any pid: os.kill overflows
        '{"pid": -1, "since": "x"}',  # signal 0 to -1 asks about every process
        '{"pid": 0, "since": "x"}',  # and to 0 about our own group
        '{"pid": true, "since": {"a": 1}}',
        '{"pid": 12, "since": {"a": 1}}',
        "[" * 100_000,
        "[1]",
    ],
)
def test_a_lock_info_this_tool_did_not_write_names_no_holder(tmp_path: Path, info: str) -> None:
    paths = SessionPaths(tmp_path, "s")
    paths.info.write_text(info)
    assert holder_of(paths) is None
    assert holder_of(paths, alive=True) is None


def test_no_process_exists_past_the_ids_a_process_may_have() -> None:
    assert process_exists(os.getpid())
    assert not any(process_exists(pid) for pid in (0, -1, 2**31, 10**40))
