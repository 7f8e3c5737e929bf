"""The session file: Markdown with YAML frontmatter in the shape of Maestro's active-session.md.

Maestro writes JSON between the ``---`` lines; JSON is read first when the block starts with ``{``,
so Maestro's files load too, with its names (``retry_count``, ``agent``, numeric ids) mapped.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ..plan.front_matter import split_front_matter
from ..texts import one_line
from .fields import Fields
from .model import (
    SESSION_DEFAULTS,
    SESSION_FIELDS,
    PhaseState,
    SessionCorrupt,
    SessionDoc,
    Status,
    Tokens,
    as_time,
    unpriced_text,
)

# Reading uses libyaml when present (see FastSafeLoader). Writing uses the small emitter below: a
# snapshot of 10,000 phases is written in a tenth of libyaml's time, which keeps the pause of a
# fold short.
# Plain (unquoted) strings: words, paths and names that YAML 1.1 cannot read as anything else.
_PLAIN = re.compile(r"[A-Za-z_][\w./()+-]*(?: [\w./()+-]+)*")
_RESERVED = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
# What YAML does not allow raw, or reads as a line break, inside a quoted or block scalar.
_UNPRINTABLE = re.compile(
    "[^\t\n\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|[\u2028\u2029\ufeff]"
)


# Keys, statuses, agent and phase names repeat in every snapshot: each is quoted once.
_SHOWN: dict[str, str] = {}
_SHOWN_MAX, _SHOWN_LEN = 8192, 80


def _string(text: str) -> str:
    shown = _SHOWN.get(text)
    if shown is None:
        shown = _quote(text)
        if len(text) <= _SHOWN_LEN and len(_SHOWN) < _SHOWN_MAX:
            _SHOWN[text] = shown
    return shown


def _quote(text: str) -> str:
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    quoted = json.dumps(text, ensure_ascii=False)  # JSON strings are YAML double-quoted scalars
    return _UNPRINTABLE.sub(_escape, quoted)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    # A lone surrogate (undecodable output) has no UTF-8 form and no YAML escape.
    return "\ufffd" if 0xD800 <= code <= 0xDFFF else f"\\u{code:04x}"


def _scalar(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return {"nan": ".nan", "inf": ".inf", "-inf": "-.inf"}[str(value)]
        text = repr(value)  # YAML 1.1 wants a dot in a float: 1e-05 would read as a string
        return text.replace("e", ".0e", 1) if "e" in text and "." not in text else text
    if isinstance(value, Mapping | list | tuple):
        return "{}" if isinstance(value, Mapping) else "[]"
    return _string(str(value))


def _literal(text: str) -> list[str] | None:
    """``text`` as a ``|`` block (header, then lines), when a block keeps it exactly."""
    if "\n" not in text or text[0] in " \t\n" or text.endswith("\n\n") or "\r" in text:
        return None
    lines = text.removesuffix("\n").split("\n")
    if _UNPRINTABLE.search(text) or any(line.isspace() for line in lines):
        return None
    return ["|" if text.endswith("\n") else "|-", *lines]


_ATOMS = frozenset({type(None), bool, int, float})


_EMPTY: dict[type, str] = {dict: "{}", list: "[]", tuple: "[]"}
_WORDS = {None: "null", True: "true", False: "false"}


def _value(head: str, value: Any, pad: str, out: list[str]) -> None:
    # By exact type first: most values are strings, words and empty containers, and an ABC's
    # isinstance costs ten times more.
    kind = type(value)
    if kind is str:
        block = _literal(value) if "\n" in value else None
        if block is None:
            out.append(f"{head} {_string(value)}")
        else:
            out.append(f"{head} {block[0]}")
            out += [f"{pad}  {line}" if line else "" for line in block[1:]]
    elif kind is int:
        out.append(f"{head} {value}")
    elif value is None or kind is bool:
        out.append(f"{head} {_WORDS[value]}")
    elif kind in _EMPTY and not value:
        out.append(f"{head} {_EMPTY[kind]}")
    elif kind in _ATOMS:
        out.append(f"{head} {_scalar(value)}")
    elif isinstance(value, Mapping) and value:
        out.append(head)
        _mapping(value, pad + "  ", out)
    elif isinstance(value, list | tuple) and value:
        out.append(head)
        _sequence(value, pad, out)
    elif isinstance(value, str) and (block := _literal(value)):
        out.append(f"{head} {block[0]}")
        out += [f"{pad}  {line}" if line else "" for line in block[1:]]
    else:
        out.append(f"{head} {_scalar(value)}")


def _mapping(data: Mapping[str, Any], pad: str, out: list[str]) -> None:
    for key, value in data.items():
        _value(f"{pad}{_string(str(key))}:", value, pad, out)


def _sequence(items: list[Any] | tuple[Any, ...], pad: str, out: list[str]) -> None:
    for item in items:
        if isinstance(item, Mapping) and item:
            start = len(out)
            _mapping(item, pad + "  ", out)
            out[start] = f"{pad}- {out[start][len(pad) + 2 :]}"
        elif isinstance(item, list | tuple) and item:
            out.append(f"{pad}-")
            _sequence(item, pad + "  ", out)
        else:
            _value(f"{pad}-", item, pad + "  ", out)


def dump_yaml(data: Mapping[str, Any]) -> str:
    """Block-style YAML for JSON-like data (what ``yaml.safe_load`` reads back as equal)."""
    out: list[str] = []
    _mapping(data, "", out)
    return "\n".join(out) + "\n"


_OWN_KEYS = frozenset(
    {"session_id", "task", "plan", "created", "updated", "status", "stop_reason", "current_phase"}
    | {"run_started"}
    | SESSION_FIELDS
    | {"total_phases", "token_usage", "journal_seq", "phases", "final_review"}
)


class _Generic(Exception):
    """A value the fast path of ``phase_fragment`` does not write: the generic writer does."""


def _one(text: str | None) -> str:
    if text is None:
        return "null"
    if type(text) is not str or "\n" in text:
        raise _Generic
    return _string(text)


def _items(texts: tuple[str, ...]) -> str:
    return "".join(f"\n  - {_one(text)}" for text in texts) if texts else " []"


def phase_fragment(phase: PhaseState) -> str:
    """The phase as an item of the frontmatter's ``phases``: the lines ``_sequence`` writes for
    ``phase.to_dict()``. A phase of the common shape (one-line texts; no error, context, review or
    cost yet) is written in one f-string, five times faster than key by key: every rewrite of the
    snapshot writes each phase that moved, and every phase moves at least twice a run."""
    p, t = phase, phase.tokens
    common = (
        not (p.errors or p.downstream_context or p.review or p.unverified)
        and not (t.cost or t.estimated or t.premium_requests or t.unpriced)
        # Of the types the session reads them as: a 1 for true, 2.0 for 2, go the generic way.
        and type(p.parallel) is bool
        and type(p.downstream_context) is dict
        and type(p.attempts) is type(t.input) is type(t.output) is type(t.cached) is int
    )
    if common:
        try:
            return (
                f"- id: {_one(p.id)}\n  name: {_one(p.name)}\n  status: {_one(p.status.value)}\n"
                f"  agents:{_items(p.agents)}\n  parallel: {_WORDS[p.parallel]}\n"
                f"  blocked_by:{_items(p.blocked_by)}\n  started: {_one(p.started)}\n"
                f"  completed: {_one(p.completed)}\n  attempts: {p.attempts}\n"
                f"  retry_count: {max(p.attempts - 1, 0)}\n"
                f"  files_created:{_items(p.files_created)}\n"
                f"  files_modified:{_items(p.files_modified)}\n"
                f"  files_deleted:{_items(p.files_deleted)}\n"
                f"  downstream_context: {{}}\n  errors: []\n  result: {_one(p.result)}\n"
                f"  worker: {_one(p.worker)}\n  definition: {_one(p.definition)}\n"
                f"  tokens:\n    input: {t.input}\n    output: {t.output}\n"
                f"    cached: {t.cached}"
            )
        except _Generic:
            pass
    lines: list[str] = []
    _sequence([phase.to_dict()], "", lines)
    return "\n".join(lines)


def to_frontmatter(doc: SessionDoc, phases: bool = True) -> dict[str, Any]:
    """The frontmatter's data; the phases last (left out without ``phases``)."""
    usage: dict[str, Any] = {
        "total_input": doc.tokens.input,
        "total_output": doc.tokens.output,
        "total_cached": doc.tokens.cached,
        "by_agent": {agent: t.to_dict() for agent, t in doc.by_agent.items()},
    }
    if doc.tokens.cost:
        usage["total_cost"] = doc.tokens.cost
    if doc.tokens.estimated:
        usage["cost_estimated"] = True
    if doc.tokens.premium_requests:
        usage["total_premium_requests"] = doc.tokens.premium_requests
    if doc.tokens.unpriced:
        usage["unpriced_models"] = list(doc.tokens.unpriced)
    data: dict[str, Any] = {
        "session_id": doc.session_id,
        "task": doc.task,
        "plan": doc.plan,
        "created": doc.created,
        "updated": doc.updated,
        "status": doc.status,
    }
    if doc.run_started:
        data["run_started"] = doc.run_started
    if doc.stop_reason:
        data["stop_reason"] = doc.stop_reason
    data.update(
        execution_mode=doc.execution_mode,
        execution_backend=doc.execution_backend,
        current_batch=doc.current_batch,
        current_phase=doc.current_phase,
        total_phases=len(doc.phases),
        token_usage=usage,
    )
    data.update(doc.extra)
    if doc.final_review:
        data["final_review"] = dict(doc.final_review)
    data["journal_seq"] = doc.journal_seq
    if phases:
        data["phases"] = [p.to_dict() for p in doc.phases.values()]
    return data


def from_frontmatter(data: Mapping[str, Any]) -> SessionDoc:
    """FieldError names a field that is not what this tool writes."""
    f = Fields(data)
    usage = Fields(f.mapping("token_usage"), "token_usage")
    phases = [
        PhaseState.from_mapping(raw, f"phase {n}") for n, raw in enumerate(f.items("phases"), 1)
    ]
    by_agent = usage.mapping("by_agent")
    return SessionDoc(
        session_id=f.text("session_id") or "",
        task=f.text("task") or "",
        plan=f.text("plan") or f.text("implementation_plan") or "",
        created=as_time(f.scalar("created")) or "",
        updated=as_time(f.scalar("updated")) or "",
        status=f.text("status") or "in_progress",
        run_started=as_time(f.scalar("run_started")),
        stop_reason=f.text("stop_reason"),
        execution_mode=f.text("execution_mode") or SESSION_DEFAULTS["execution_mode"],
        execution_backend=f.text("execution_backend") or SESSION_DEFAULTS["execution_backend"],
        current_batch=f.raw.get("current_batch"),
        current_phase=f.text("current_phase"),
        tokens=Tokens(
            usage.count("total_input"),
            usage.count("total_output"),
            usage.count("total_cached"),
            usage.dollars("total_cost"),
            usage.raw.get("cost_estimated") is True,
            usage.count("total_premium_requests"),
            usage.texts("unpriced_models"),
        ),
        by_agent={str(a): Tokens.from_mapping(t, f"by_agent {a}") for a, t in by_agent.items()},
        journal_seq=f.count("journal_seq"),
        phases={p.id: p for p in phases},
        final_review=dict(f.mapping("final_review")) or None,
        extra={k: v for k, v in data.items() if k not in _OWN_KEYS},
    )


def parse_session(text: str, source: str) -> SessionDoc:
    # PyYAML is imported by what reads a session file, not by every process that has the model:
    # an xdist worker running commands reads none.
    import yaml

    from ..plan.yaml_loader import FastSafeLoader

    front = split_front_matter(text.removeprefix("\ufeff"))
    if front is None:
        raise SessionCorrupt(f"{source}: no frontmatter between '---' lines")
    block = front.text
    try:
        if block.lstrip().startswith("{"):
            data = json.loads(block)
        else:
            data = yaml.load(block, FastSafeLoader)
    except (ValueError, yaml.YAMLError, RecursionError) as error:
        raise SessionCorrupt(
            f"{source}: frontmatter is not YAML or JSON: {one_line(str(error))}"
        ) from None
    if not isinstance(data, Mapping):
        raise SessionCorrupt(f"{source}: frontmatter is not a mapping")
    try:
        return from_frontmatter(data)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise SessionCorrupt(f"{source}: {one_line(str(error))}") from None


_MARK = {
    Status.PENDING: "⬜",
    Status.IN_PROGRESS: "🔄",
    Status.COMPLETED: "✅",
    Status.FAILED: "❌",
    Status.BLOCKED: "⛔",
    Status.SKIPPED: "⏭",
}

# The body's run report (diagrams and phase table), rendered by whoever opened the session: the
# state package knows sessions, not how a run is shown.
Report = Callable[[SessionDoc], str]


def render(doc: SessionDoc, report: Report | None = None) -> str:
    return Renderer(report).render(doc)


class Renderer:
    """Renders sessions, and keeps each phase's text for the next render: a phase whose state is
    the same (frozen) object as last time is not rendered again. A session of thousands of phases
    is rewritten every second or so while only the few that moved changed."""

    def __init__(self, report: Report | None = None) -> None:
        self.report = report
        # phase id -> the state last rendered, its frontmatter lines, its body section
        self._texts: dict[str, tuple[PhaseState, str, str]] = {}

    def render(self, doc: SessionDoc) -> str:
        texts = [self._text(phase) for phase in doc.phases.values()]
        front: list[str] = []
        _mapping(to_frontmatter(doc, phases=False), "", front)
        front.append("phases:" if texts else "phases: []")
        front += [fragment for fragment, _ in texts]
        body = self._body(doc, [section for _, section in texts])
        return "---\n" + "\n".join(front) + "\n---\n\n" + body

    def render_body(self, doc: SessionDoc) -> str:
        return self._body(doc, [self._text(phase)[1] for phase in doc.phases.values()])

    def _text(self, phase: PhaseState) -> tuple[str, str]:
        kept = self._texts.get(phase.id)
        if kept is not None and kept[0] is phase:
            return kept[1], kept[2]
        fragment, section = phase_fragment(phase), "\n".join(_phase_section(phase))
        self._texts[phase.id] = (phase, fragment, section)
        return fragment, section

    def _body(self, doc: SessionDoc, sections: list[str]) -> str:
        counts = Counter(p.status for p in doc.phases.values())
        summary = ", ".join(f"{counts[s]} {s.value}" for s in Status if counts[s])
        lines = [
            f"# {doc.task or doc.plan}: session log",
            "",
            f"Plan `{doc.plan}`, session `{doc.session_id}`, status **{doc.status}**, "
            f"updated {doc.updated}. Phases: {summary or 'none'}.",
            "",
        ]
        if doc.stop_reason:
            lines += ["## Stopped", "", doc.stop_reason, ""]
        if self.report is not None:
            lines += [self.report(doc).rstrip("\n"), ""]
        lines += ["## Phase log", ""]
        return "\n".join(lines + sections)


def render_body(doc: SessionDoc, report: Report | None = None) -> str:
    return Renderer(report).render_body(doc)


def _phase_section(phase: PhaseState) -> list[str]:
    facts = [f"attempts {phase.attempts}"] + ([f"worker {phase.worker}"] if phase.worker else [])
    lines = [
        f"### Phase {phase.id}: {phase.name} {_MARK[phase.status]}",
        "",
        f"- Status: {phase.status.value} ({', '.join(facts)})",
    ]
    if phase.started:
        lines.append(f"- Started {phase.started}, completed {phase.completed or '-'}")
    for label, files in (
        ("Created", phase.files_created),
        ("Modified", phase.files_modified),
        ("Deleted", phase.files_deleted),
    ):
        if files:
            lines.append(f"- {label}: " + ", ".join(f"`{f}`" for f in files))
    if phase.tokens != Tokens():
        t = phase.tokens
        lines.append(f"- Tokens: {t.input} in, {t.output} out, {t.cached} cached")
        if t.premium_requests:
            lines.append(f"- Premium requests: {t.premium_requests}")
        if t.cost:
            lines.append(f"- Cost: ${t.cost:.4f}" + (" (estimated)" if t.estimated else ""))
        if t.unpriced:
            lines.append(f"- Cost unknown: {unpriced_text(t.unpriced)}")
    if phase.result:
        lines += ["- Result:", *(f"  > {line}" for line in phase.result.splitlines())]
    if phase.unverified:
        lines.append("- Unverified: no acceptance command checked the agent's work")
    for key, value in phase.downstream_context.items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        lines.append(f"- {key.replace('_', ' ').capitalize()}: {' '.join(shown.split())}")
    for e in phase.errors:
        message = " ".join(e.message.split())
        lines.append(f"- Error ({e.type}, {e.agent or 'no agent'}, {e.timestamp}): {message}")
        lines.append(f"  resolution: {e.resolution}")
    return [*lines, ""]
