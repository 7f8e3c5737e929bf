"""JSON Schema validation with a fast yes/no path compiled from the schema itself.

jsonschema walks the schema for every value, creating a validator and resolving each ``$ref`` as it
goes: about 1 ms per phase, 10 s for a plan of 10,000 phases. Almost every plan is valid, and for
a valid one the only question is "is it valid?". :func:`compile_check` turns a schema into nested
closures that answer exactly that question, and :class:`SchemaValidator` asks jsonschema for the
errors only when the answer is no, so every message still comes from jsonschema.

The schema stays the one source of truth: the check is derived from it, keyword by keyword, with
jsonschema's semantics (``2.0`` is an integer, ``true`` is not a number, ``minLength`` ignores
non-strings). A keyword the compiler does not implement is refused with :class:`UnsupportedSchema`
rather than ignored, and :class:`SchemaValidator` then lets jsonschema decide everything, so a
schema that grows a new keyword gets slower, never looser.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Any

Check = Callable[[Any], bool]

# Keywords that describe without constraining; "$defs" is reached through "$ref".
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$comment",
        "$defs",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",  # an annotation unless a format checker is given, and none is
    }
)


class UnsupportedSchema(ValueError):
    """The schema uses a keyword (or a form of one) that :func:`compile_check` cannot compile."""


class SchemaValidator:
    """``iter_errors`` like jsonschema's Draft 2020-12 validator, which it consults (and imports)
    only for an instance that the compiled check rejects."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = schema
        self._full: Any = None
        try:
            self._check: Check | None = compile_check(schema)
        except UnsupportedSchema:
            self._check = None

    @property
    def compiled(self) -> bool:
        """Whether valid instances take the fast path."""
        return self._check is not None

    def iter_errors(self, instance: Any) -> Iterator[Any]:
        if self._check is not None and self._check(instance):
            return iter(())
        if self._full is None:
            from jsonschema import Draft202012Validator

            self._full = Draft202012Validator(self._schema)
        errors: Iterator[Any] = self._full.iter_errors(instance)
        return errors


def compile_check(schema: Mapping[str, Any] | bool) -> Check:
    """A function that says whether an instance is valid against ``schema`` (draft 2020-12)."""
    root = schema if isinstance(schema, Mapping) else {}
    return _Compiler(root).schema(schema)


# --- jsonschema's type and equality rules -------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPES: dict[str, Check] = {
    "string": lambda value: isinstance(value, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
    "null": lambda value: value is None,
}


def _equal(one: Any, two: Any) -> bool:
    # jsonschema's equal() for scalar schema values (see _scalars): true is not 1, false is not
    # 0, and a value is equal to itself even when it is NaN.
    if one is two:
        return True
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    if isinstance(one, str) or isinstance(two, str):
        return isinstance(one, str) and isinstance(two, str) and one == two
    return bool(one == two)


def _scalars(values: Any, keyword: str) -> list[Any]:
    if not isinstance(values, list) or any(
        not (value is None or isinstance(value, (str, bool, int, float))) for value in values
    ):
        raise UnsupportedSchema(f"'{keyword}' with values other than scalars")
    return values


# --- the compiler -----------------------------------------------------------------------------


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


# The combinators special-case two operands, the usual number, and loop over more: a generator
# expression (``all(check(value) for ...)``) costs more than the checks it combines.


def _all_of(checks: list[Check]) -> Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda value: first(value) and second(value)
    frozen = tuple(checks)

    def check(value: Any) -> bool:
        for each in frozen:  # noqa: SIM110 (see above)
            if not each(value):
                return False
        return True

    return check


def _any_of(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda value: first(value) or second(value)
    frozen = tuple(checks)

    def check(value: Any) -> bool:
        for each in frozen:  # noqa: SIM110 (see above)
            if each(value):
                return True
        return False

    return check


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def schema(self, schema: Any) -> Check:
        if schema is True:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, Mapping):
            raise UnsupportedSchema(f"a schema must be a mapping or a boolean, not {schema!r}")
        checks: list[Check] = []
        handled = set(_ANNOTATIONS)
        for names, build in self._keywords():
            if any(name in schema for name in names):
                checks.append(build(schema))
                handled.update(names)
        unknown = [key for key in schema if key not in handled and not key.startswith("x-")]
        if unknown:
            raise UnsupportedSchema(f"keyword {unknown[0]!r}")
        return _all_of(checks)

    def _keywords(self) -> list[tuple[tuple[str, ...], Callable[[Mapping[str, Any]], Check]]]:
        # The type test comes first: it is the cheapest and rejects most wrong values.
        return [
            (("type",), _type),
            (("enum", "const"), _enum),
            (("$ref",), self._ref),
            (("properties", "additionalProperties"), self._properties),
            (("required", "minProperties", "maxProperties"), _object_size),
            (("items", "minItems", "maxItems"), self._items),
            (("minLength", "maxLength"), _length),
            (("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), _bounds),
            (("anyOf", "allOf", "oneOf", "not"), self._logic),
        ]

    def _ref(self, schema: Mapping[str, Any]) -> Check:
        pointer = schema["$ref"]
        if pointer not in self.refs:
            # A recursive schema reaches its own $ref while compiling it: forward through the
            # table, which holds the compiled check by the time any instance is checked.
            self.refs[pointer] = lambda value: self.refs[pointer](value)
            self.refs[pointer] = self.schema(self._resolve(pointer))
        return self.refs[pointer]

    def _resolve(self, pointer: Any) -> Any:
        if not isinstance(pointer, str) or not pointer.startswith("#"):
            raise UnsupportedSchema(f"$ref {pointer!r}: only references into the same schema")
        target: Any = self.root
        for part in pointer[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            elif isinstance(target, Mapping) and part in target:
                target = target[part]
            else:
                raise UnsupportedSchema(f"$ref {pointer!r} points nowhere")
        return target

    def _properties(self, schema: Mapping[str, Any]) -> Check:
        if "patternProperties" in schema:
            raise UnsupportedSchema("keyword 'patternProperties'")
        known = {name: self.schema(sub) for name, sub in schema.get("properties", {}).items()}
        extra = (
            self.schema(schema["additionalProperties"])
            if "additionalProperties" in schema
            else None
        )

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            for key, item in value.items():
                sub = known.get(key, extra)
                if sub is not None and not sub(item):
                    return False
            return True

        return check

    def _items(self, schema: Mapping[str, Any]) -> Check:
        if "prefixItems" in schema or isinstance(schema.get("items"), list):
            raise UnsupportedSchema("positional 'items'")
        each = self.schema(schema["items"]) if "items" in schema else None
        low, high = schema.get("minItems", 0), schema.get("maxItems")

        def check(value: Any) -> bool:
            if not isinstance(value, list):
                return True
            if len(value) < low or (high is not None and len(value) > high):
                return False
            if each is not None:
                for item in value:
                    if not each(item):
                        return False
            return True

        return check

    def _logic(self, schema: Mapping[str, Any]) -> Check:
        checks: list[Check] = []
        if "anyOf" in schema:
            checks.append(_any_of([self.schema(sub) for sub in schema["anyOf"]]))
        if "allOf" in schema:
            checks.extend(self.schema(sub) for sub in schema["allOf"])
        if "oneOf" in schema:
            choices = tuple(self.schema(sub) for sub in schema["oneOf"])
            checks.append(lambda value: sum(1 for choice in choices if choice(value)) == 1)
        if "not" in schema:
            negated = self.schema(schema["not"])
            checks.append(lambda value: not negated(value))
        return _all_of(checks)


def _type(schema: Mapping[str, Any]) -> Check:
    names = schema["type"]
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or any(name not in _TYPES for name in names):
        raise UnsupportedSchema(f"type {schema['type']!r}")
    return _any_of([_TYPES[name] for name in names])


def _enum(schema: Mapping[str, Any]) -> Check:
    checks: list[Check] = []
    if "enum" in schema:
        values = tuple(_scalars(schema["enum"], "enum"))
        checks.append(lambda value: any(_equal(value, allowed) for allowed in values))
    if "const" in schema:
        const = _scalars([schema["const"]], "const")[0]
        checks.append(lambda value: _equal(value, const))
    return _all_of(checks)


def _object_size(schema: Mapping[str, Any]) -> Check:
    required = tuple(schema.get("required", ()))
    low, high = schema.get("minProperties", 0), schema.get("maxProperties")

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        if len(value) < low or (high is not None and len(value) > high):
            return False
        return all(name in value for name in required)

    return check


def _length(schema: Mapping[str, Any]) -> Check:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    # jsonschema counts code points, as len() does.
    return lambda value: (
        not isinstance(value, str) or (len(value) >= low and (high is None or len(value) <= high))
    )


# jsonschema's condition for each bound's error. Testing for the error, not for validity, keeps
# its answer for NaN, which fails every comparison and so passes every bound.
_OUT_OF_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": operator.lt,
    "maximum": operator.gt,
    "exclusiveMinimum": operator.le,
    "exclusiveMaximum": operator.ge,
}


def _bounds(schema: Mapping[str, Any]) -> Check:
    limits = [(out, schema[name]) for name, out in _OUT_OF_BOUNDS.items() if name in schema]
    if len(limits) == 1:  # the usual case, without a generator (see _all_of)
        ((out, bound),) = limits
        return lambda value: not _is_number(value) or not out(value, bound)
    return lambda value: (
        not _is_number(value) or not any(out(value, bound) for out, bound in limits)
    )
