"""Reading a session file's frontmatter: Maestro's JSON or this project's YAML, as written on any
system."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_maestro.state import SessionCorrupt
from pytest_maestro.state.document import Renderer, parse_session, render
from pytest_maestro.state.model import PhaseState, SessionDoc, Status

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
    to_dict = PhaseState.to_dict

    def counted(self: PhaseState) -> dict[str, object]:
        rendered.append(self.id)
        return to_dict(self)

    monkeypatch.setattr(PhaseState, "to_dict", counted)
    session.phases["b"] = replace(session.phases["b"], status=Status.IN_PROGRESS, worker="gw1")
    text = renderer.render(session)
    assert rendered == ["b"]
    assert text == render(session)
    assert parse_session(text, "s.md").phases["b"].worker == "gw1"
