"""A reviewer's answer read into a verdict, and what the verdict decides. Pure: no I/O.

The reviewer ends its answer with one fenced JSON block (``prompt.SHAPE``): a verdict on each
prose criterion, by its number, with evidence (a file and line), and findings, each blocking or
minor. The block is checked against ``REPLY_SCHEMA`` (fastjsonschema) and then against the phase:
every criterion judged exactly once, a met one with its evidence. Anything else is a
``ReplyError`` whose text says, in one line, what was wrong: the reviewer is asked once more with
it, and a second such answer fails the review. A reply this tool cannot read never passes.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..state.model import Tokens
from ..texts import one_line

BLOCKING, MINOR = "blocking", "minor"
_MET, _NOT_MET = "met", ("not met", "not_met")

# A finding, in a phase's review and in the final one (whose findings name the phases they touch).
FINDINGS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["severity", "issue"],
        "properties": {
            "severity": {"enum": [BLOCKING, MINOR]},
            "issue": {"type": "string", "minLength": 1},
            "where": {"type": "string"},
            "phases": {"type": "array", "items": {"type": "string", "minLength": 1}},
        },
    },
}
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["criteria", "findings"],
    "properties": {
        "criteria": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "verdict", "evidence"],
                "properties": {
                    "id": {"type": "integer", "minimum": 1},
                    "verdict": {"enum": [_MET, *_NOT_MET]},
                    "evidence": {"type": "string"},
                },
            },
        },
        "findings": FINDINGS_SCHEMA,
        "summary": {"type": "string"},
    },
}

# A fenced block: its language tag (json, or none) and its body.
_FENCE = re.compile(
    r"^ {0,3}```[ \t]*(\w*)[ \t]*\n(.*?)^ {0,3}```[ \t]*$", re.MULTILINE | re.DOTALL
)


class ReplyError(ValueError):
    """A reviewer's answer outside the shape asked for; ``str()`` says what, in one line."""


@dataclass(frozen=True)
class CriterionVerdict:
    number: int  # 1-based, as the prompt numbered the phase's prose criteria
    criterion: str
    met: bool
    evidence: str  # where it shows: a file and line; for one not met, what is missing

    @property
    def said(self) -> str:
        """``met: the criterion (file:line)``."""
        evidence = f" ({self.evidence})" if self.evidence else ""
        return f"{'met' if self.met else 'not met'}: {self.criterion}{evidence}"

    @property
    def line(self) -> str:
        return f"criterion {self.number} {self.said}"


@dataclass(frozen=True)
class Finding:
    severity: str  # blocking | minor
    issue: str
    where: str = ""  # a file and line, when the reviewer says
    phases: tuple[str, ...] = ()  # the phases whose work it is about (a final review's)

    @property
    def blocking(self) -> bool:
        return self.severity == BLOCKING

    @property
    def line(self) -> str:
        where = f"{self.where}: " if self.where else ""
        named = f" (phases {', '.join(self.phases)})" if self.phases else ""
        return f"[{self.severity}] {where}{self.issue}{named}"


@dataclass(frozen=True)
class Verdict:
    criteria: tuple[CriterionVerdict, ...]
    findings: tuple[Finding, ...]
    summary: str = ""

    @property
    def unmet(self) -> tuple[CriterionVerdict, ...]:
        return tuple(c for c in self.criteria if not c.met)

    @property
    def blocking(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.blocking)

    @property
    def minor(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.blocking)

    @property
    def passed(self) -> bool:
        """Every criterion met and nothing blocking: minor findings are kept, not failures."""
        return not self.unmet and not self.blocking

    @property
    def problem(self) -> str | None:
        """Why it failed, in one line: the first blocking finding, else the first criterion
        not met; None when it passed."""
        if self.blocking:
            return self.blocking[0].line
        return self.unmet[0].line if self.unmet else None

    @property
    def counts(self) -> str:
        """``2/3 criteria met, 1 blocking, 2 minor``: what the verdict comes to."""
        met = len(self.criteria) - len(self.unmet)
        said = [f"{met}/{len(self.criteria)} criteria met"] if self.criteria else []
        said += [f"{len(self.blocking)} blocking"] if self.blocking else []
        said += [f"{len(self.minor)} minor"] if self.minor else []
        return ", ".join(said) or "no findings"


@dataclass(frozen=True)
class Round:
    """One fix round before a review: how the implementer was called, what came of it (the
    review after it, or why there was none), and what the round cost, its review's call
    included."""

    number: int
    how: str
    outcome: str
    tokens: Tokens = field(default_factory=Tokens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.number,
            "how": self.how,
            "outcome": self.outcome,
            "tokens": self.tokens.to_dict(),
        }


@dataclass(frozen=True)
class Review:
    """One review of an attempt: its verdict, or why it gave none (``failure``: the reviewer's
    call failed, its answer could not be read, it changed files, the budget was spent)."""

    mode: str  # spec | spec+quality
    reviewer: str  # the reviewing agent, and its runtime: ``reviewer (claude)``
    verdict: Verdict | None = None
    failure: str | None = None
    blocked: bool = False  # the reviewer cannot run at all (no access, a spent quota)
    tokens: Tokens = field(default_factory=Tokens)
    rounds: tuple[Round, ...] = ()  # the fix rounds before it, in order

    @property
    def passed(self) -> bool:
        return self.failure is None and self.verdict is not None and self.verdict.passed

    @property
    def problem(self) -> str | None:
        """Why the review failed the attempt, in one line; None when it passed."""
        if self.failure is not None:
            return f"review failed: {self.failure}"
        said = self.verdict.problem if self.verdict else "no verdict"
        return None if said is None else f"review: {said}"

    @property
    def outcome(self) -> str:
        """A cell of the summary table: ``passed, 3/3 criteria met, 1 minor``."""
        n = len(self.rounds)
        after = f" after {n} fix round{'s' if n > 1 else ''}" if n else ""
        if self.failure is not None or self.verdict is None:
            return f"failed{after}"  # why, the phase's note says
        return f"{'passed' if self.passed else 'failed'}{after}, {self.verdict.counts}"

    def lines(self) -> list[str]:
        """The review in full: what it came to, then each criterion's verdict and each
        finding, indented."""
        head = f"review by {self.reviewer}, {self.mode}: "
        if self.failure is not None:
            return [f"{head}failed: {self.failure}"]
        verdict = self.verdict or Verdict((), ())
        items = [c.line for c in verdict.criteria] + [f.line for f in verdict.findings]
        return [head + self.outcome, *(f"    {item}" for item in items)]

    def to_dict(self) -> dict[str, Any]:
        """As the session state and a report's facts carry it: plain values."""
        data: dict[str, Any] = {"mode": self.mode, "reviewer": self.reviewer}
        data["passed"] = self.passed
        if self.failure is not None:
            data["failure"] = self.failure
        if self.verdict is not None:
            data["criteria"] = [_criterion_dict(c) for c in self.verdict.criteria]
            data["findings"] = [_finding_dict(f) for f in self.verdict.findings]
            if self.verdict.summary:
                data["summary"] = self.verdict.summary
        if self.tokens != Tokens():
            data["tokens"] = self.tokens.to_dict()
        if self.rounds:
            data["rounds"] = [r.to_dict() for r in self.rounds]
        return data

    @classmethod
    def from_mapping(cls, raw: object) -> Review | None:
        """What ``to_dict`` wrote; None for anything else (a hand-edited session), which then
        shows no review rather than stopping a report."""
        if not isinstance(raw, Mapping):
            return None
        try:
            verdict = None
            if "criteria" in raw or "findings" in raw:
                criteria = tuple(_criterion(c) for c in raw.get("criteria") or ())
                findings = tuple(_finding(f) for f in raw.get("findings") or ())
                verdict = Verdict(criteria, findings, str(raw.get("summary") or ""))
            failure = raw.get("failure")
            return cls(
                str(raw["mode"]),
                str(raw["reviewer"]),
                verdict,
                None if failure is None else str(failure),
                tokens=Tokens.from_mapping(raw.get("tokens") or {}),
                rounds=tuple(_round(r) for r in raw.get("rounds") or ()),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _criterion_dict(c: CriterionVerdict) -> dict[str, Any]:
    return {"id": c.number, "criterion": c.criterion, "met": c.met, "evidence": c.evidence}


def _finding_dict(f: Finding) -> dict[str, Any]:
    data: dict[str, Any] = {"severity": f.severity, "issue": f.issue, "where": f.where}
    if f.phases:
        data["phases"] = list(f.phases)
    return data


def _criterion(raw: Mapping[str, Any]) -> CriterionVerdict:
    return CriterionVerdict(int(raw["id"]), str(raw["criterion"]), raw["met"] is True,
                            str(raw.get("evidence") or ""))  # fmt: skip


def _round(raw: Mapping[str, Any]) -> Round:
    tokens = Tokens.from_mapping(raw.get("tokens") or {})
    return Round(int(raw["round"]), str(raw["how"]), str(raw["outcome"]), tokens)


def _finding(raw: Mapping[str, Any]) -> Finding:
    severity = str(raw["severity"])
    if severity not in (BLOCKING, MINOR):
        raise ValueError(severity)
    phases = tuple(str(p) for p in raw.get("phases") or ())
    return Finding(severity, str(raw["issue"]), str(raw.get("where") or ""), phases)


# -- reading a reply -----------------------------------------------------------------------------


def read_reply(text: str, criteria: Sequence[str]) -> Verdict:
    """The verdict in a reviewer's answer, on the phase's prose ``criteria`` (numbered from 1 in
    the prompt); ReplyError, one line, for an answer outside the shape."""
    data = json_block(text)
    _validator()(data)
    judged: dict[int, CriterionVerdict] = {}
    for item in data["criteria"]:
        number = item["id"]
        if number > len(criteria):
            raise ReplyError(f"a verdict on criterion {number}, of {len(criteria)}")
        if number in judged:
            raise ReplyError(f"two verdicts on criterion {number}")
        met = item["verdict"] == _MET
        evidence = one_line(item["evidence"])
        if met and not evidence:
            raise ReplyError(f"criterion {number} is met without evidence (a file and line)")
        judged[number] = CriterionVerdict(number, criteria[number - 1], met, evidence)
    missing = [n for n in range(1, len(criteria) + 1) if n not in judged]
    if missing:
        raise ReplyError(f"no verdict on criterion {missing[0]}: {criteria[missing[0] - 1]}")
    findings = tuple(
        Finding(f["severity"], one_line(f["issue"]), one_line(f.get("where") or ""))
        for f in data["findings"]
    )
    summary = one_line(data.get("summary") or "")
    return Verdict(tuple(judged[n] for n in sorted(judged)), findings, summary)


def json_block(text: str) -> Any:
    """The last fenced block that holds JSON (tagged json, or untagged), else the whole answer
    when it is JSON; ReplyError when there is none."""
    blocks = [body for tag, body in _FENCE.findall(text) if tag.lower() in ("json", "")]
    candidates = blocks[::-1] or [text.strip()]
    error = "no ```json block in the answer"
    for body in candidates:
        try:
            return json.loads(body)
        except RecursionError:
            error = "its JSON block is nested too deep to read"
        except ValueError as exc:
            if blocks or body.startswith(("{", "[")):
                error = f"its JSON block is not valid JSON: {exc}"
    raise ReplyError(error)


@functools.cache
def _validator() -> Callable[[Any], None]:
    return compile_schema(REPLY_SCHEMA)


def compile_schema(schema: dict[str, Any]) -> Callable[[Any], None]:
    """A check of ``data`` against ``schema`` that raises ReplyError, in the reader's words."""
    # Imported where a reply is first read: a process that reviews nothing imports none of it.
    import fastjsonschema

    validate = fastjsonschema.compile(schema)
    # The class the compiled code raises: the module's at compile time, whatever reloads it.
    invalid = fastjsonschema.JsonSchemaValueException

    def check(data: Any) -> None:
        try:
            validate(data)
        except invalid as exc:
            raise ReplyError(schema_text(exc.message)) from None

    return check


def schema_text(message: str) -> str:
    """fastjsonschema's ``data.criteria[0].verdict must be …`` in the reader's words."""
    return "its JSON " + re.sub(r"^data\b\.?", "", message).strip() if message else "its JSON"
