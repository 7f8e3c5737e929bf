"""Numbers at the edge: one check for every number a user or a program hands the tool."""

from __future__ import annotations

import pytest

from pytest_maestro.numbers import RETRIES, TIMEOUT, Bounds, NumberError, reply_dollars


@pytest.mark.parametrize(
    ("bounds", "value", "got"),
    [
        (TIMEOUT, float("nan"), "nan"),
        (TIMEOUT, float("inf"), "inf"),
        (TIMEOUT, 0, "0"),
        (TIMEOUT, True, "True"),
        (TIMEOUT, "5", "'5'"),
        (TIMEOUT, [5], "[5]"),
        (RETRIES, 1.5, "1.5"),
        (RETRIES, 101, "101"),
        (RETRIES, 10**400, "a whole number of 401 digits"),
        (RETRIES, 10**5000, "a whole number of 5001 digits"),
        (TIMEOUT, -(10**400), "a whole number of 401 digits"),
    ],
    ids=lambda value: "-" if isinstance(value, (int, float, Bounds, list)) else str(value),
)
def test_what_is_not_a_number_within_bounds_is_refused_in_words(
    bounds: Bounds, value: object, got: str
) -> None:
    with pytest.raises(NumberError) as raised:
        bounds.check(value)
    assert str(raised.value) == f"must be {bounds.rule()}, got {got}"


def test_what_is_within_bounds_comes_back_as_its_kind() -> None:
    assert TIMEOUT.check(604800) == 604800.0
    assert isinstance(TIMEOUT.check(1), float)
    assert RETRIES.check(3.0) == 3 and isinstance(RETRIES.check(3.0), int)
    assert Bounds(0, 1).check(0) == 0.0


def test_a_reply_number_names_its_field_and_absent_is_zero() -> None:
    assert reply_dollars(None, "cost") == 0.0
    with pytest.raises(NumberError, match=r"^the reply's cost must be a number >= 0 .*got nan$"):
        reply_dollars(float("nan"), "cost")
