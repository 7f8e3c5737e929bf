"""Typed reads of a session file's mappings: a field of the wrong shape is told in words that
name it (``phase 'a': field 'attempts' must be a whole number >= 0 …, got 'often'``), never in
Python's (``'id'``, ``string indices must be integers``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import numbers

# What a session may count and have spent over all its runs: finite, never negative.
COUNT = numbers.Bounds(0, 10**18, whole=True)
DOLLARS = numbers.Bounds(0, 10**12)


class FieldError(ValueError):
    """A field of a session file that is not what this tool writes; ``str()`` names it."""


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Fields:
    """One mapping of a session file, and where it is (``phase 'a'``, ``entry 7``)."""

    # Each read checks the value's exact type first: what this tool writes (a dict, a str, an
    # int) passes at once, where an isinstance against an ABC costs ten times more; a session
    # file is read a field at a time, and every transition is applied through here.

    def __init__(self, raw: Any, where: str = "") -> None:
        self.where = where
        if type(raw) is not dict and not isinstance(raw, Mapping):
            raise FieldError(f"{self._at()}must be a mapping, got {shown(raw)}")
        self.raw: Mapping[str, Any] = raw

    def _at(self) -> str:
        return f"{self.where}: " if self.where else ""

    def error(self, key: str, rule: str, value: Any) -> FieldError:
        return FieldError(f"{self._at()}field {key!r} must be {rule}, got {shown(value)}")

    def required(self, key: str) -> str:
        """A text that must be there (an id, a status)."""
        value = self.text(key)
        if not value:
            raise FieldError(f"{self._at()}field {key!r} is missing")
        return value

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.raw.get(key)
        if type(value) is str:
            return value
        if value is None:
            return default
        if isinstance(value, (Mapping, list)):
            raise self.error(key, "text", value)
        return str(value)

    def choice(self, key: str, choices: tuple[str, ...], default: str | None = None) -> str:
        value = self.text(key) or default
        if value is None:
            raise FieldError(f"{self._at()}field {key!r} is missing")
        if value not in choices:
            raise self.error(key, "one of " + ", ".join(choices), value)
        return value

    def scalar(self, key: str) -> Any:
        """The value, if it is neither a mapping nor a list (a time, a batch)."""
        value = self.raw.get(key)
        if type(value) is str or value is None:
            return value
        if isinstance(value, (Mapping, list)):
            raise self.error(key, "a single value", value)
        return value

    def count(self, key: str) -> int:
        """A whole number >= 0; absent is 0."""
        value = self.raw.get(key)
        if value is None:
            return 0
        if type(value) is int and 0 <= value <= COUNT.most:
            return value
        try:
            return int(COUNT.check(value))
        except numbers.NumberError:
            raise self.error(key, COUNT.rule(), value) from None

    def dollars(self, key: str) -> float:
        value = self.raw.get(key)
        if value is None:
            return 0.0
        try:
            return float(DOLLARS.check(value))
        except numbers.NumberError:
            raise self.error(key, DOLLARS.rule(), value) from None

    def mapping(self, key: str) -> Mapping[str, Any]:
        value = self.raw.get(key)
        if value is None:
            return {}
        if type(value) is not dict and not isinstance(value, Mapping):
            raise self.error(key, "a mapping", value)
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.raw.get(key)
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)) or any(
            isinstance(item, (Mapping, list)) for item in value
        ):
            raise self.error(key, "a list of text", value)
        return tuple(str(item) for item in value)

    def items(self, key: str) -> list[Any]:
        """A list whose items each become ``Fields`` of their own (phases, errors)."""
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, (list, tuple)):
            raise self.error(key, "a list of mappings", value)
        return list(value)
