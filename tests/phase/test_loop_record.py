"""The loop record's pure parts: what it keeps, reading it back, and when it still holds."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from pathlib import Path

import pytest

from pytest_maestro.files.declared import FileSnapshot
from pytest_maestro.phase.loop_record import LoopRecord, LoopRecordError, left_off
from pytest_maestro.phase.outcome import Attempt
from pytest_maestro.plan.model import Check, Files, Phase
from pytest_maestro.review.verdict import CriterionVerdict, Review, Round, Verdict
from pytest_maestro.runtimes import AgentResult
from pytest_maestro.runtimes.handoff import parse_handoff
from pytest_maestro.state.model import Status, Tokens
from pytest_maestro.state.paths import SessionPaths

REPLY = "## Task Report\n- **Status**: success\n\nCOMPLETED: wrote out.txt"


def _phase() -> Phase:
    return Phase(
        id="greet",
        name="Greet",
        files=Files(create=("out.txt",), modify=("notes.txt",)),
        acceptance=(Check("says hello", "grep -q hello out.txt"),),
    )


def _attempt(passed: bool) -> Attempt:
    criteria = (CriterionVerdict(1, "the greeting is friendly", passed, "out.txt:1"),)
    rounds = (Round(1, "resumes session s-1", "failed, 0/1 criteria met", Tokens(5, 1)),)
    review = Review("spec", "reviewer (claude)", Verdict(criteria, ()), rounds=rounds)
    agent = AgentResult(Status.COMPLETED, "COMPLETED: wrote out.txt", text=REPLY,
                        session_id=None, handoff=parse_handoff(REPLY))  # fmt: skip
    return Attempt(2, agent, tokens=Tokens(10, 2, cost=0.5), outside=("x.log",), review=review)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, SessionPaths]:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("before\n")
    paths = SessionPaths(root / ".maestro", "plan-1")
    FileSnapshot.take(root, _phase()).save(paths.preimage("greet"))
    (root / "out.txt").write_text("hello\n")
    (root / "notes.txt").write_text("after\n")
    return root, paths


def _keep(root: Path, paths: SessionPaths, passed: bool = False) -> LoopRecord:
    record = LoopRecord.of(_phase(), "def-1", _attempt(passed), 1, "s-1", root)
    assert record.keep(paths.loop_record("greet")) is None
    return record


def test_a_record_reads_back_as_written_and_gives_back_its_attempt(
    project: tuple[Path, SessionPaths],
) -> None:
    root, paths = project
    record = _keep(root, paths)
    assert LoopRecord.load(paths.loop_record("greet")) == record
    attempt = record.resumed(_phase())
    assert (attempt.number, attempt.rounds, attempt.agent.session_id) == (2, 1, "s-1")
    assert attempt.agent.handoff.status_line == "COMPLETED: wrote out.txt"
    assert attempt.review == record.review and len(attempt.review.rounds) == 1
    assert attempt.tokens == Tokens(10, 2, cost=0.5) and attempt.outside == ("x.log",)
    assert attempt.checked and not attempt.ok  # its criterion was not met: a round is due
    assert _keep(root, paths, passed=True).resumed(_phase()).ok
    assert record.point == "fix round 1's review"


def test_a_loop_holds_while_the_phase_and_its_files_are_as_reviewed(
    project: tuple[Path, SessionPaths],
) -> None:
    root, paths = project
    assert left_off(paths, root, _phase(), "def-1") is None  # none left
    _keep(root, paths)
    left = left_off(paths, root, _phase(), "def-1")
    assert left is not None
    _, before = left
    assert dict(before.contents) == {"out.txt": None, "notes.txt": b"before\n"}  # pre-images
    with pytest.raises(LoopRecordError, match=r"^the phase changed since fix round 1's review$"):
        left_off(paths, root, _phase(), "def-2")
    (root / "notes.txt").write_text("edited\n")
    with pytest.raises(LoopRecordError, match=r"^notes\.txt changed since fix round 1's review$"):
        left_off(paths, root, _phase(), "def-1")
    (root / "notes.txt").write_text("after\n")
    (root / "out.txt").unlink()
    with pytest.raises(LoopRecordError, match=r"^out\.txt changed since"):
        left_off(paths, root, _phase(), "def-1")
    (root / "out.txt").write_text("hello\n")
    paths.preimage("greet").write_bytes(b"not a tar")
    with pytest.raises(LoopRecordError, match=r"pre-images\) cannot be read$"):
        left_off(paths, root, _phase(), "def-1")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "it is not JSON: Expecting value*"),
        ("[1, 2]", "it cannot be read: must be a mapping, got *1, 2*"),
        ('{"version": 7}', "it is not in the shape this version of the tool writes"),
        ('{"version": 1, "phase": "greet"}', "it cannot be read: field 'review' is not a review*"),
        ("\xff", "it cannot be read: it is not text"),
        ("[" * 100_000, "it is not JSON*"),
    ],
    ids=["empty", "a-list", "another-version", "no-review", "not-utf8", "deep"],
)
def test_a_record_that_cannot_be_read_is_one_line(
    project: tuple[Path, SessionPaths], text: str, why: str
) -> None:
    root, paths = project
    path = paths.loop_record("greet")
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(LoopRecordError) as caught:
        left_off(paths, root, _phase(), "def-1")
    assert "\n" not in str(caught.value)
    assert fnmatch(str(caught.value), why), str(caught.value)


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("attempt", 0, "field 'attempt' must be a whole number >= 1, got 0"),
        ("round", -1, "field 'round' must be *, got -1"),
        ("files", {"out.txt": 3}, "field 'files' must be a mapping of paths to content hashes*"),
        ("tokens", {"input": "many"}, "field 'input' must be *"),
        ("phase", None, "field 'phase' is missing"),
    ],
)
def test_a_hand_edited_record_names_its_field(
    project: tuple[Path, SessionPaths], field: str, value: object, why: str
) -> None:
    root, paths = project
    _keep(root, paths)
    path = paths.loop_record("greet")
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    with pytest.raises(LoopRecordError) as caught:
        LoopRecord.load(path)
    text = str(caught.value)
    assert text.startswith("it cannot be read: ") and "\n" not in text
    assert fnmatch(text, f"it cannot be read: {why}"), text


def test_another_phase_s_record_does_not_hold(project: tuple[Path, SessionPaths]) -> None:
    root, paths = project
    record = LoopRecord.of(_phase(), "def-1", _attempt(False), 0, None, root)
    other = Phase(id="other", name="Other", files=_phase().files)
    record.keep(paths.loop_record("other"))
    with pytest.raises(LoopRecordError, match=r"^it was written for phase 'greet'$"):
        left_off(paths, root, other, "def-1")
