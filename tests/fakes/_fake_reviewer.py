"""The fake agent CLIs as reviewers: what a fake answers to pytest-maestro's review prompt.

A prompt that starts with "Review of phase" (pytest_maestro/review/prompt.py writes it) is a
reviewer's. The fake then ignores the implementer's markers in the task it quotes and acts on
these, anywhere in the prompt:

  (none)                       every criterion of "## Criteria to judge" met, no findings
  FAKE:REVIEW_UNMET=2          criterion 2 is not met (repeatable)
  FAKE:REVIEW_UNMET_FIRST      criterion 1 is not met on attempt 1 (MAESTRO_ATTEMPT), met after
  FAKE:REVIEW_UNMET_UNTIL_ROUND=2
                               criterion 1 is not met before fix round 2 (MAESTRO_REVIEW_ROUND,
                               0 before any), met from then on
  FAKE:REVIEW_BLOCKING text    a blocking finding: `where: issue` (the rest of the line)
  FAKE:REVIEW_MINOR text       a minor finding, likewise
  FAKE:REVIEW_MALFORMED        an answer without the JSON block, each time
  FAKE:REVIEW_MALFORMED_ONCE   without the JSON block, unless asked again for it
  FAKE:REVIEW_WRITE path=text  write `text` to `path` whatever the CLI's read-only mode says (a
                               reviewer that got past it), then answer as usual

A plan that must stay as its format's example has no markers: the environment says the same of
a phase by its id (MAESTRO_PHASE_ID):

  FAKE_REVIEW_UNMET_UNTIL_ROUND=T006=1
                               as FAKE:REVIEW_UNMET_UNTIL_ROUND=1, for phase T006 only

A prompt that starts with "Final review of plan" is the final review of a run (its prompt quotes
every phase's task, so these markers may be in any of them). Its answer has no criteria; its
findings name phases:

  (none)                       no findings: the final review passes
  FAKE:FINAL_BLOCKING ids where: issue
                               a blocking finding naming the phases `ids` (comma-separated; an id
                               the plan lacks, or `-` for none, makes the answer malformed)
  FAKE:FINAL_BLOCKING_FIRST ids where: issue
                               the same, in the first final review only (the calls logged in
                               $FAKE_AGENT_STATE with MAESTRO_PHASE_ID final-review count them)
  FAKE:FINAL_MINOR ids where: issue
                               a minor finding naming `ids`
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

HEAD = "Review of phase"
FINAL_HEAD = "Final review of plan"
_FINAL = re.compile(
    r"FAKE:FINAL_(BLOCKING_FIRST|BLOCKING|MINOR)[ \t]+(\S+)[ \t]+(.+)$", re.MULTILINE
)
ASKED_AGAIN = "## Your previous answer could not be read"
_CRITERIA = re.compile(r"^## Criteria to judge\n((?:\d+\. .*\n?)*)", re.MULTILINE)
_UNMET = re.compile(r"FAKE:REVIEW_UNMET=(\d+)")
_UNTIL = re.compile(r"FAKE:REVIEW_UNMET_UNTIL_ROUND=(\d+)")
_FINDING = re.compile(r"FAKE:REVIEW_(BLOCKING|MINOR)[ \t]+(.+)$", re.MULTILINE)
_WRITE = re.compile(r"FAKE:REVIEW_WRITE[ \t]+(\S+?)=(.*)$", re.MULTILINE)
_DECLARED = re.compile(r"^- (?:create|modify|delete): (.+?)[ \t]*$", re.MULTILINE)


def is_review(prompt: str) -> bool:
    return prompt.startswith(HEAD)


def criteria(prompt: str) -> int:
    """How many criteria the prompt asks the reviewer to judge."""
    match = _CRITERIA.search(prompt)
    return len(re.findall(r"^\d+\. ", match.group(1), re.MULTILINE)) if match else 0


def final_review(prompt: str) -> str:
    """The final reviewer's answer: findings naming phases, from the FAKE:FINAL_ markers."""
    findings = []
    first = _final_reviews() <= 1
    for kind, ids, text in _FINAL.findall(prompt):
        if kind == "BLOCKING_FIRST" and not first:
            continue
        where, _, issue = text.partition(": ")
        findings.append(
            {
                "severity": "minor" if kind == "MINOR" else "blocking",
                "where": where if issue else "",
                "issue": issue or where,
                "phases": [] if ids == "-" else ids.split(","),
            }
        )
    answer = {"findings": findings, "summary": "fake final review"}
    return f"I read the whole change.\n\n```json\n{json.dumps(answer, indent=2)}\n```\n"


def _final_reviews() -> int:
    """How many final reviews were asked for so far, this one included."""
    state = os.environ.get("FAKE_AGENT_STATE")
    calls = Path(state) / "calls.jsonl" if state else None
    if calls is None or not calls.exists():
        return 1
    lines = calls.read_text().splitlines()
    return sum(json.loads(line)["phase_id"] == "final-review" for line in lines)


def review(prompt: str, root: Path, attempt: int) -> str:
    """The reviewer's answer, after the writes it was told to make."""
    if prompt.startswith(FINAL_HEAD):
        return final_review(prompt)
    for path, text in _WRITE.findall(prompt):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text + "\n")
    asked_again = ASKED_AGAIN in prompt
    if "FAKE:REVIEW_MALFORMED_ONCE" in prompt and not asked_again:
        return "The work looks fine to me."
    if re.search(r"FAKE:REVIEW_MALFORMED\b", prompt):
        return "I reviewed it. Verdict: fine. (No JSON, sorry.)"
    unmet = {int(n) for n in _UNMET.findall(prompt)}
    if "FAKE:REVIEW_UNMET_FIRST" in prompt and attempt <= 1:
        unmet.add(1)
    until = _UNTIL.search(prompt)
    phase, _, by_env = os.environ.get("FAKE_REVIEW_UNMET_UNTIL_ROUND", "").rpartition("=")
    if by_env.isdigit() and phase == os.environ.get("MAESTRO_PHASE_ID"):
        until = re.match(r"(\d+)", by_env)
    if until and int(os.environ.get("MAESTRO_REVIEW_ROUND") or 0) < int(until.group(1)):
        unmet.add(1)
    files = _DECLARED.findall(prompt)
    where = f"{files[0]}:1" if files else "README:1"
    verdicts = [
        {
            "id": n,
            "verdict": "not met" if n in unmet else "met",
            "evidence": "nothing in the change does it" if n in unmet else where,
        }
        for n in range(1, criteria(prompt) + 1)
    ]
    findings = [
        {
            "severity": kind.lower(),
            "where": text.split(": ", 1)[0],
            "issue": text.split(": ", 1)[-1],
        }
        for kind, text in _FINDING.findall(prompt)
    ]
    answer = {"criteria": verdicts, "findings": findings, "summary": "fake review"}
    return f"I read the change.\n\n```json\n{json.dumps(answer, indent=2)}\n```\n"
