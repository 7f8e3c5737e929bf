"""Reading a session file's frontmatter: Maestro's JSON or this project's YAML, as written on any
system."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_maestro.state import SessionCorrupt, document
from pytest_maestro.state.document import Renderer, parse_session, phase_fragment, render
from pytest_maestro.state.model import PhaseError, PhaseState, SessionDoc, Status, Tokens

from ..helpers import FIXTURES


def doc() -> SessionDoc:
    session = SessionDoc(
        session_id="s", task="t", plan="p.yaml", created="2026-01-01", updated="2026-01-01"
    )
    session.phases = {"a": PhaseState("a", "A", status=Status.COMPLETED)}
    return session


def test_a_session_with_a_bom_and_windows_line_ends_loads() -> None:
    maestro = (FIXTURES / "maestro-active-session.md").read_text(encoding="utf-8")
    for text in (maestro, render(doc())):
        expected = parse_session(text, "plain")
        windows = "\ufeff" + text.replace("\n", "\r\n")
        assert parse_session(windows, "windows") == expected
    assert parse_session(render(doc()), "ours").phases["a"].status is Status.COMPLETED


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no frontmatter\n", "s.md: no frontmatter between '---' lines"),
        ("---\nsession_id: s\n", "s.md: no frontmatter between '---' lines"),
        ("---\n- a\n---\n", "s.md: frontmatter is not a mapping"),
        ('---\n{"phases": [}\n---\n', "s.md: frontmatter is not YAML or JSON: Expecting value:"),
        ("---\nphases: " + "[" * 5000 + "\n---\n", "s.md: frontmatter is not YAML or JSON"),
    ],
)
def test_an_unreadable_session_is_one_line(text: str, message: str) -> None:
    with pytest.raises(SessionCorrupt) as error:
        parse_session(text, "s.md")
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_a_renderer_renders_again_only_the_phases_that_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The snapshot is rewritten about every second: a phase whose state did not move since the
    last rewrite reuses its text, and what is written is what a fresh render writes."""
    session = doc()
    session.phases |= {p: PhaseState(p, p.upper()) for p in ("b", "c")}
    renderer = Renderer()
    renderer.render(session)
    rendered: list[str] = []

    def counted(phase: PhaseState) -> str:
        rendered.append(phase.id)
        return phase_fragment(phase)

    monkeypatch.setattr(document, "phase_fragment", counted)
    session.phases["b"] = replace(session.phases["b"], status=Status.IN_PROGRESS, worker="gw1")
    text = renderer.render(session)
    assert rendered == ["b"]
    assert text == render(session)
    assert parse_session(text, "s.md").phases["b"].worker == "gw1"


TEXT = st.text(st.characters() | st.sampled_from("\n \t#:-|>'\"\r\x85\u2028yYn"), max_size=12)
TEXTS = st.lists(TEXT, max_size=3).map(tuple)
SOME = st.none() | TEXT
COUNT = st.integers(0, 2**40)
FIELDS = dict(
    id=TEXT,
    name=TEXT | st.sampled_from(["null", "true", "1.5", "- x", "a: b"]),
    status=st.sampled_from(Status),
    agents=TEXTS,
    parallel=st.booleans(),
    blocked_by=TEXTS,
    started=SOME,
    completed=SOME,
    attempts=st.integers(0, 5),
    files_created=TEXTS,
    files_modified=TEXTS,
    files_deleted=TEXTS,
    result=SOME,
    worker=SOME,
    definition=SOME,
    tokens=st.just(Tokens()) | st.builds(Tokens, COUNT, COUNT, COUNT),
)
# The common shape (what the fast path writes), and any shape at all.
COMMON = st.builds(PhaseState, **FIELDS)
ANY = st.builds(
    PhaseState,
    **FIELDS
    | dict(
        downstream_context=st.dictionaries(TEXT, TEXT, max_size=2),
        errors=st.lists(st.builds(PhaseError, TEXT, TEXT, TEXT, TEXT), max_size=1).map(tuple),
        tokens=st.builds(Tokens, COUNT, COUNT, COUNT, st.floats(0, 9), st.booleans(), COUNT, TEXTS),
        unverified=st.booleans(),
        review=st.none() | st.just({"passed": True}),
    ),
)


def written_key_by_key(phase: PhaseState) -> str:
    lines: list[str] = []
    document._sequence([phase.to_dict()], "", lines)
    return "\n".join(lines)


@settings(max_examples=300, deadline=None)
@given(COMMON | ANY)
@example(PhaseState("a", "A"))  # a pending phase as a new session writes it
@example(PhaseState("a", "A", result="two\nlines"))  # a block: the generic writer's
# Values of a type the session never reads them as: the generic writer's too.
@example(PhaseState("a", "A", parallel=1))  # type: ignore[arg-type]
@example(PhaseState("a", "A", attempts=True))
@example(PhaseState("a", "A", attempts=2.0))  # type: ignore[arg-type]
@example(PhaseState("a", "A", tokens=Tokens(1.0)))  # type: ignore[arg-type]
def test_a_phase_is_written_as_the_generic_writer_writes_its_fields(phase: PhaseState) -> None:
    """The fast path for the common phase writes the very text the key-by-key writer does, for
    every shape of phase, so the file reads back the same whichever wrote it."""
    assert phase_fragment(phase) == written_key_by_key(phase)


@pytest.mark.parametrize("key", ["5", "true", "1.5", "null"])
def test_a_context_key_yaml_reads_as_no_text_is_read_as_text(key: str) -> None:
    """A hand-edited session (``downstream_context: {5: x}``) is read, its keys as text, and
    written again: not an error deep in the next run's first rewrite."""
    text = render(doc()).replace("downstream_context: {}", f"downstream_context: {{{key}: x}}", 1)
    read = parse_session(text, "s.md")
    assert read.phases["a"].downstream_context == {str(yaml.safe_load(key)): "x"}
    assert parse_session(render(read), "s.md") == read
