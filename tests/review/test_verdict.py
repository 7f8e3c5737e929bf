"""Reading a reviewer's answer into a verdict, and what the verdict decides."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_maestro.review.verdict import (
    CriterionVerdict,
    Finding,
    ReplyError,
    Review,
    Round,
    Verdict,
    read_reply,
)
from pytest_maestro.state.model import Tokens

CRITERIA = ("it greets", "it is short")


def answer(data: Any, tag: str = "json") -> str:
    return f"I checked the change.\n\n```{tag}\n{json.dumps(data)}\n```\n"


def good(**more: Any) -> dict[str, Any]:
    return {
        "criteria": [
            {"id": 1, "verdict": "met", "evidence": "a.py:3"},
            {"id": 2, "verdict": "met", "evidence": "a.py:4"},
        ],
        "findings": [],
        **more,
    }


def test_a_well_formed_answer_is_read_in_the_criteria_s_order() -> None:
    data = good(summary="fine")
    data["criteria"].reverse()
    verdict = read_reply(answer(data), CRITERIA)
    assert [c.criterion for c in verdict.criteria] == list(CRITERIA)
    assert verdict.criteria[0] == CriterionVerdict(1, "it greets", True, "a.py:3")
    assert verdict.passed and verdict.problem is None and verdict.summary == "fine"
    assert verdict.counts == "2/2 criteria met"


def test_the_last_json_block_counts_and_an_untagged_one_will_do() -> None:
    first = good()
    first["criteria"][0]["verdict"] = "not met"
    text = answer(first) + "\nOn second thought:\n" + answer(good(), tag="")
    assert read_reply(text, CRITERIA).passed


def test_an_answer_that_is_only_json_will_do() -> None:
    assert read_reply(json.dumps(good()), CRITERIA).passed


def test_an_unmet_criterion_or_a_blocking_finding_fails_and_minor_ones_do_not() -> None:
    data = good(
        findings=[
            {"severity": "minor", "issue": "could be shorter"},
            {"severity": "blocking", "where": "a.py:9", "issue": "greets no one"},
        ]
    )
    data["criteria"][1] = {"id": 2, "verdict": "not_met", "evidence": "it is long"}
    verdict = read_reply(answer(data), CRITERIA)
    assert not verdict.passed
    assert verdict.problem == "[blocking] a.py:9: greets no one"  # the first blocking finding
    assert [c.number for c in verdict.unmet] == [2]
    assert verdict.counts == "1/2 criteria met, 1 blocking, 1 minor"
    only_minor = Verdict(verdict.criteria[:1], verdict.minor)
    assert only_minor.passed
    assert Verdict(verdict.criteria, ()).problem == "criterion 2 not met: it is short (it is long)"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Looks good to me.", "no ```json block in the answer"),
        ('```json\n{"criteria": [\n```', "its JSON block is not valid JSON: "),
        ("```json\n" + "[" * 100_000 + "]" * 100_000 + "\n```", "nested too deep"),
        (answer({"criteria": []}), "its JSON must contain ['findings'] properties"),
        (answer(good(findings=[{"severity": "major", "issue": "x"}])), "findings[0].severity"),
        (answer({**good(), "criteria": "all met"}), "criteria must be array"),
    ],
    ids=["prose", "broken", "deep", "no-findings", "severity", "not-a-list"],
)
def test_an_answer_outside_the_shape_says_what_is_wrong_in_one_line(text: str, error: str) -> None:
    with pytest.raises(ReplyError) as raised:
        read_reply(text, CRITERIA)
    assert error in str(raised.value) and "\n" not in str(raised.value)


def met(number: int) -> dict[str, Any]:
    return {"id": number, "verdict": "met", "evidence": "a.py:1"}


@pytest.mark.parametrize(
    ("criteria", "error"),
    [
        (
            [{"id": 1, "verdict": "met", "evidence": "a:1"}],
            "no verdict on criterion 2: it is short",
        ),
        (
            [met(n) for n in (1, 2, 2)],
            "two verdicts on criterion 2",
        ),
        (
            [met(n) for n in (1, 2, 3)],
            "a verdict on criterion 3, of 2",
        ),
        (
            [
                {"id": 1, "verdict": "met", "evidence": " "},
                {"id": 2, "verdict": "met", "evidence": "a"},
            ],
            "criterion 1 is met without evidence",
        ),
    ],
    ids=["missing", "twice", "out-of-range", "no-evidence"],
)
def test_every_criterion_is_judged_once_and_a_met_one_with_evidence(
    criteria: list[dict[str, Any]], error: str
) -> None:
    with pytest.raises(ReplyError, match=error):
        read_reply(answer({"criteria": criteria, "findings": []}), CRITERIA)


def test_no_criteria_to_judge_takes_an_empty_list() -> None:
    verdict = read_reply(answer({"criteria": [], "findings": []}), ())
    assert verdict.passed and verdict.counts == "no findings"


def test_a_review_without_a_verdict_never_passes() -> None:
    assert not Review("spec", "reviewer (claude)").passed
    failed = Review("spec", "r (codex)", Verdict((), ()), failure="it changed files: a")
    assert not failed.passed
    assert failed.problem == "review failed: it changed files: a"
    assert failed.outcome == "failed"
    assert failed.lines() == ["review by r (codex), spec: failed: it changed files: a"]


def test_a_review_s_lines_say_each_verdict_and_finding() -> None:
    verdict = Verdict(
        (CriterionVerdict(1, "it greets", False, "no greeting"),),
        (Finding("minor", "tidy up", "a.py:1"),),
    )
    review = Review("spec+quality", "reviewer (claude)", verdict)
    assert review.problem == "review: criterion 1 not met: it greets (no greeting)"
    assert review.lines() == [
        "review by reviewer (claude), spec+quality: failed, 0/1 criteria met, 1 minor",
        "    criterion 1 not met: it greets (no greeting)",
        "    [minor] a.py:1: tidy up",
    ]


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
criterion_verdicts = st.builds(CriterionVerdict, st.integers(1, 50), texts, st.booleans(), texts)
findings = st.builds(Finding, st.sampled_from(["blocking", "minor"]), texts, texts)
tokens = st.builds(Tokens, st.integers(0, 10**6), st.integers(0, 10**6))
reviews = st.builds(
    Review,
    st.sampled_from(["spec", "spec+quality"]),
    texts,
    st.none() | st.builds(Verdict, st.tuples(criterion_verdicts), st.tuples(findings), texts),
    st.none() | texts,
    st.just(False),
    tokens,
    st.lists(st.builds(Round, st.integers(1, 5), texts, texts, tokens), max_size=3).map(tuple),
)


@given(reviews)
def test_a_review_travels_as_plain_values_and_comes_back_the_same(review: Review) -> None:
    data = json.loads(json.dumps(review.to_dict()))  # as the wire and the session carry it
    back = Review.from_mapping(data)
    assert back is not None
    assert (back.mode, back.reviewer, back.failure, back.passed, back.rounds) == (
        review.mode,
        review.reviewer,
        review.failure,
        review.passed,
        review.rounds,
    )
    assert back.outcome == review.outcome
    if review.verdict is not None and (review.verdict.criteria or review.verdict.findings):
        assert back.verdict is not None
        assert (back.verdict.criteria, back.verdict.findings) == (
            review.verdict.criteria,
            review.verdict.findings,
        )


@pytest.mark.parametrize(
    "raw",
    [None, "passed", [], {"mode": "spec"}, {"mode": "spec", "reviewer": "r", "criteria": [1]}],
)
def test_a_review_the_session_holds_in_another_shape_is_no_review(raw: object) -> None:
    assert Review.from_mapping(raw) is None
