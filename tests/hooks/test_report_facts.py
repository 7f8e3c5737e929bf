"""A report's facts are decoded once, however many of this plugin's hooks read the report."""

from __future__ import annotations

import pytest

from pytest_maestro.phase.facts import PhaseFacts

from ..helpers import phase, write_plan


def test_each_report_is_decoded_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[str] = []
    from_wire = PhaseFacts.from_wire.__func__  # type: ignore[attr-defined]

    def counting(cls: type[PhaseFacts], data: dict[str, object]) -> PhaseFacts:
        decoded.append(str(data["phase"]))
        return from_wire(cls, data)  # type: ignore[no-any-return]

    monkeypatch.setattr(PhaseFacts, "from_wire", classmethod(counting))
    write_plan(
        pytester,
        [
            phase("a", "true"),
            phase("b", "false", blocked_by=[]),
            phase("c", "true", blocked_by=["b"]),
        ],
    )
    result = pytester.runpytest_inprocess("--maestro", "plan.yaml")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    # one report with facts per phase (a's and b's call, c's skip), each read by the session's
    # record, its status word and the progress line
    assert sorted(decoded) == ["a", "b", "c"]
