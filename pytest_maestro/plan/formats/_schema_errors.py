"""JSON Schema validation of plans, and the first error as one plain line: file, line, phase,
field, what is wrong.

fastjsonschema compiles each schema into Python code that says whether a plan is valid, tens of
times faster than jsonschema, which walks the schema for every value. Almost every plan
is valid; for one that is not, jsonschema finds the errors, with the paths and schema keywords
the message is made of. Both read draft 2020-12 the same way for the keywords these schemas use,
which the tests check on many plans.

jsonschema's own messages dump whole instances; users get ``plan.yaml:12: phase 'build' field
'timeout' must be a number, got 'ten'`` instead. A schema may give a subschema an ``x-expected``
annotation (``"a list of paths or a mapping with create, modify and delete lists"``) that names the
expected value in plain words; JSON Schema ignores unknown keywords, so the schema stays standard.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ...texts import escaped
from ..errors import PlanError
from ._json_lines import DataPath, path_text
from ._structured import Document, describe

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
}


class SchemaValidator:
    """``iter_errors`` like jsonschema's draft 2020-12 validator, which is consulted only for an
    instance that fastjsonschema finds invalid."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        # Imported here, not with the readers: detecting a plan's format needs no schema.
        import fastjsonschema

        self._schema = schema
        # use_default=False: a schema's default values must not be written into the plan.
        # detailed_exceptions=False: what an error says comes from jsonschema (``iter_errors``);
        # without the schema's text in every raise the generated code compiles in a third of
        # the time (the native plan's: 48 ms to 16 ms, in every process that reads a plan).
        # fastjsonschema (2.21 to 2.22 at least) cannot generate ``const`` so: a KeyError, and a
        # schema with one gets the detailed form. None of the plans' schemas has one.
        inlined = inline_refs(schema)
        try:
            self._check = fastjsonschema.compile(
                inlined, use_default=False, use_formats=False, detailed_exceptions=False
            )
        except KeyError:
            self._check = fastjsonschema.compile(inlined, use_default=False, use_formats=False)
        self._invalid = fastjsonschema.JsonSchemaValueException

    def is_valid(self, instance: Any) -> bool:
        try:
            self._check(instance)
        except self._invalid:
            return False
        return True

    def iter_errors(self, instance: Any) -> Iterator[Any]:
        if self.is_valid(instance):
            return iter(())
        errors: Iterator[Any] = self._explaining.iter_errors(instance)
        return errors

    @cached_property
    def _explaining(self) -> Any:
        # Imported for an invalid plan only: importing jsonschema takes longer than checking a
        # plan of thousands of phases.
        from jsonschema import Draft202012Validator

        return Draft202012Validator(self._schema)


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with each ``{"$ref": "#/$defs/NAME"}`` replaced by that definition, for the
    fast check only: fastjsonschema makes a ``$ref`` a function call that first formats the
    item's path (``phases[7]``) from ``locals()``, for every phase and every id in its
    ``blocked_by``; inlined, a valid plan builds no such string. Keywords beside a ``$ref``
    apply too, as in draft 2020-12 (fastjsonschema alone would ignore them). A definition that
    refers to itself stays a ``$ref``."""
    defs = schema.get("$defs") or {}

    def walk(node: Any, inside: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [walk(item, inside) for item in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        name = ref.removeprefix("#/$defs/") if isinstance(ref, str) else ""
        if name not in defs or name in inside:
            return {key: walk(value, inside) for key, value in node.items()}
        definition = walk(defs[name], inside | {name})
        beside = {key: walk(value, inside) for key, value in node.items() if key != "$ref"}
        return {"allOf": [definition], **beside} if beside else definition

    return dict(walk(schema, frozenset()))


@dataclass(frozen=True)
class Items:
    """Where a format keeps its phases, and how an error names one of them."""

    container: DataPath  # ("phases",), ("tasks",), or () for a bare list
    id_of: Callable[[Any, int], str | None]  # the phase id of a raw item, None when it has none
    noun: str = "phase"


def raise_first_error(
    errors: Iterable[Any], data: Any, document: Document, path: Path, items: Items
) -> None:
    """Raise the error that comes first in the file as a ``PlanError``; return if there is none."""
    specific = [_specific(error) for error in errors]
    if not specific:
        return
    first = min(specific, key=lambda error: _rank(error, document))
    raise _plan_error(first, data, document, path, items)


def _rank(error: Any, document: Document) -> tuple[int, bool, str]:
    # An unknown field explains a missing one on the same line ("idd:" for "id:"), so it wins.
    line = document.line_of(_error_path(error)) or 0
    return (line, error.validator != "additionalProperties", str(list(error.absolute_path)))


def _specific(error: Any) -> Any:
    """For ``anyOf``/``oneOf``, the error inside the one branch whose type the value has."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return error
    branches: dict[Any, list[Any]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    matching = [
        subs
        for subs in branches.values()
        if not any(sub.validator == "type" and not sub.relative_path for sub in subs)
    ]
    if len(matching) == 1:
        return _specific(matching[0][0])
    return error


def _error_path(error: Any) -> DataPath:
    at = tuple(error.absolute_path)
    extras = _unknown_fields(error) if error.validator == "additionalProperties" else []
    return (*at, extras[0]) if extras else at


def _unknown_fields(error: Any) -> list[Any]:
    known = error.schema.get("properties", {})
    return [key for key in error.instance if key not in known]


def _plan_error(error: Any, data: Any, document: Document, path: Path, items: Items) -> PlanError:
    at = tuple(error.absolute_path)
    size = len(items.container)
    line = document.line_of(_error_path(error))
    if at[:size] == items.container and len(at) > size and isinstance(at[size], int):
        index = at[size]
        # A phase whose id is what is wrong is named by its position, not by that id.
        bad_id = at[size + 1 : size + 2] == ("id",)
        phase_id = None if bad_id else items.id_of(_get(data, at[: size + 1]), index)
        label = "" if phase_id is not None else f"{items.noun} #{index + 1} "
        return PlanError(label + _what(error, at[size + 1 :], True), path, line, phase_id)
    return PlanError(_what(error, at, False), path, line)


def _get(data: Any, at: DataPath) -> Any:
    for part in at:
        data = data[part]
    return data


def _what(error: Any, field: DataPath, in_phase: bool) -> str:
    """The message after file, line and phase: what is wrong with which field."""
    validator, value, expected = error.validator, error.validator_value, error.validator_value
    subject = f"field '{path_text(field)}' " if field else ("" if in_phase else "the plan ")
    if validator == "required":
        missing = next(name for name in expected if name not in error.instance)
        return f"{subject}is missing required field '{missing}'"
    if validator == "additionalProperties":
        return _unknown_field_message(error, field, in_phase)
    got = describe(error.instance)
    if "x-expected" in error.schema:
        return f"{subject}must be {error.schema['x-expected']}, got {got}"
    if validator == "type":
        names = [value] if isinstance(value, str) else list(value)
        return f"{subject}must be {' or '.join(_TYPE_WORDS.get(n, n) for n in names)}, got {got}"
    if validator == "minItems":
        return f"{subject}must not be an empty list"
    if validator == "minLength":
        return f"{subject}must not be empty"
    if validator == "minimum":
        return f"{subject}must be at least {value}, got {got}"
    if validator == "exclusiveMinimum":
        return f"{subject}must be greater than {value}, got {got}"
    if validator == "enum":
        return f"{subject}must be one of {', '.join(describe(v) for v in value)}, got {got}"
    message = " ".join(str(error.message).split())
    return f"{subject}is invalid: {message[:120]}"


def _unknown_field_message(error: Any, field: DataPath, in_phase: bool) -> str:
    extra = escaped(str(_unknown_fields(error)[0]))
    known = [str(name) for name in error.schema.get("properties", {})]
    close = difflib.get_close_matches(str(extra), known, n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else f" (known fields: {', '.join(known)})"
    if field:
        owner = "" if in_phase else "the plan "
        return f"{owner}has unknown field '{extra}' in '{path_text(field)}'{hint}"
    if in_phase:
        return f"has unknown field '{extra}'{hint}"
    return f"unknown top-level field '{extra}'{hint}"
