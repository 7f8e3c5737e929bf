"""The facts of a transition as the journal stores them: plain JSON, checked once, on the way in."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .model import PhaseError, PhaseState, Tokens, as_time

_FILE_FACTS = ("files_created", "files_modified", "files_deleted")
_TEXT_FACTS = ("worker", "result", "agent")
_FACTS = frozenset(
    {"started", "completed", "attempts", "errors", "tokens", "downstream_context", "unverified"}
    | set(_FILE_FACTS)
    | set(_TEXT_FACTS)
)


def _clean_fact(key: str, value: Any, at: str, agent: str) -> Any:
    """A fact as the journal stores it: plain JSON."""
    if key in ("started", "completed"):
        return as_time(value)
    if key == "attempts":
        return int(value)
    if key == "unverified":
        return bool(value)
    if key in _TEXT_FACTS:
        return None if value is None else str(value)
    if key in _FILE_FACTS:
        return [value] if isinstance(value, str) else [str(f) for f in value]
    if key == "errors":
        errors = [e if isinstance(e, PhaseError) else PhaseError.from_mapping(e) for e in value]
        return [
            replace(e, timestamp=e.timestamp or at, agent=e.agent or agent).to_dict()
            for e in errors
        ]
    if key == "tokens":
        return (value if isinstance(value, Tokens) else Tokens.from_mapping(value)).to_dict()
    return dict(value)  # downstream_context


def clean_facts(facts: dict[str, Any], at: str, phase: PhaseState) -> dict[str, Any]:
    """Facts as the journal stores them; errors default to now and to the phase's agent."""
    unknown = facts.keys() - _FACTS
    if unknown:
        raise TypeError(f"unknown facts {sorted(unknown)}; expected some of {sorted(_FACTS)}")
    agent = str(facts.get("agent") or (phase.agents[0] if phase.agents else ""))
    return {key: _clean_fact(key, value, at, agent) for key, value in facts.items()}
