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
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

HEAD = "Review of phase"
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


def review(prompt: str, root: Path, attempt: int) -> str:
    """The reviewer's answer, after the writes it was told to make."""
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
