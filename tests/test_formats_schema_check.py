"""The fast path of the structured readers' schema validation: the compiled schema check.

It must give exactly the answers of jsonschema, which it stands in front of, so most tests here
compare the two on many inputs.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pytest_maestro.plan.formats import design_v2, maestro_json, native
from pytest_maestro.plan.formats._schema_check import (
    SchemaValidator,
    UnsupportedSchema,
    compile_check,
)

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "example_plans"

SHIPPED = {
    "native": native.schema(),
    "design-v2": design_v2._PLAN,
    "maestro-json": maestro_json._PHASES,
}


def agrees(schema: Any, instance: Any) -> bool:
    """Whether the compiled check and jsonschema give the same verdict (returned: the verdict)."""
    expected = Draft202012Validator(schema).is_valid(instance)
    assert compile_check(schema)(instance) is expected, (schema, instance)
    return expected


# --- the compiled check, keyword by keyword --------------------------------------------------

KEYWORD_CASES: list[tuple[dict[str, Any], Any, bool]] = [
    ({"type": "integer"}, 2.0, True),  # JSON Schema counts 2.0 as an integer
    ({"type": "integer"}, 2.5, False),
    ({"type": "integer"}, True, False),  # a boolean is not a number here, unlike in Python
    ({"type": "number"}, False, False),
    ({"type": "number"}, 1, True),
    ({"type": ["string", "null"]}, None, True),
    ({"type": ["string", "null"]}, 0, False),
    ({"type": "object"}, [], False),
    ({"type": "array"}, {}, False),
    ({"type": "boolean"}, 0, False),
    ({"enum": [1, "a"]}, True, False),  # true is not 1
    ({"enum": [True]}, 1, False),
    ({"enum": [1]}, 1.0, True),
    ({"enum": ["blocking", None]}, None, True),
    ({"const": False}, 0, False),
    ({"const": "x"}, "x", True),
    ({"minLength": 2}, 5, True),  # string keywords ignore other types
    ({"minLength": 2}, "é", False),  # code points, not bytes
    ({"maxLength": 1}, "ab", False),
    ({"minimum": 0}, -1, False),
    ({"minimum": 0}, math.nan, True),  # NaN fails every comparison, so it breaks no bound
    ({"exclusiveMinimum": 0}, 0, False),
    ({"exclusiveMinimum": 0}, math.nan, True),
    ({"maximum": 3}, 3, True),
    ({"exclusiveMaximum": 3}, 3, False),
    ({"minimum": 0}, "-1", True),
    ({"required": ["id"]}, {"name": 1}, False),
    ({"required": ["id"]}, ["id"], True),  # object keywords ignore other types
    ({"minProperties": 1}, {}, False),
    ({"maxProperties": 1}, {"a": 1, "b": 2}, False),
    ({"properties": {"a": {"type": "string"}}}, {"a": 1}, False),
    ({"properties": {"a": {"type": "string"}}}, {"b": 1}, True),
    ({"properties": {"a": True}, "additionalProperties": False}, {"a": 1, "b": 2}, False),
    ({"additionalProperties": {"type": "integer"}}, {"a": 1, "b": "x"}, False),
    ({"additionalProperties": {"type": "integer"}}, {1: 2}, True),  # a YAML int key
    ({"items": {"type": "string"}}, ["a", 1], False),
    ({"items": False}, [], True),
    ({"items": False}, [1], False),
    ({"minItems": 1}, [], False),
    ({"maxItems": 1}, [1, 2], False),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1, True),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1.5, False),
    ({"anyOf": []}, 1, False),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1, False),  # both match
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1.5, True),
    ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "a", False),
    ({"not": {"type": "string"}}, "a", False),
    ({"$defs": {"n": {"type": "integer"}}, "items": {"$ref": "#/$defs/n"}}, [1, "x"], False),
    ({"$defs": {"a/b": {"type": "integer"}}, "$ref": "#/$defs/a~1b"}, 1, True),
    ({"title": "t", "description": "d", "x-expected": "anything"}, object(), True),
]


@pytest.mark.parametrize(("schema", "instance", "valid"), KEYWORD_CASES)
def test_compiled_check_agrees_with_jsonschema(schema: Any, instance: Any, valid: bool) -> None:
    assert agrees(schema, instance) is valid


def test_recursive_references_compile_and_check_every_level() -> None:
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "required": ["name"],
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    }
    assert agrees(tree, {"name": 1, "children": [{"name": 2, "children": []}]})
    assert not agrees(tree, {"name": 1, "children": [{"name": 2, "children": [{}]}]})


@pytest.mark.parametrize(
    "schema",
    [
        {"pattern": "^a"},
        {"patternProperties": {"^a": {}}},
        {"prefixItems": [{}]},
        {"items": [{"type": "string"}]},
        {"$ref": "https://example.com/schema.json"},
        {"$ref": "#/$defs/missing"},
        {"type": "decimal"},
        {"enum": [[1, 2]]},
        {"dependentRequired": {"a": ["b"]}},
        {"properties": {"a": {"uniqueItems": True}}},
    ],
)
def test_keywords_it_cannot_compile_are_refused_not_ignored(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedSchema):
        compile_check(schema)


def test_a_schema_it_cannot_compile_is_left_to_jsonschema() -> None:
    validator = SchemaValidator({"type": "object", "properties": {"a": {"pattern": "^x"}}})
    assert not validator.compiled
    assert [error.validator for error in validator.iter_errors({"a": "y"})] == ["pattern"]
    assert list(validator.iter_errors({"a": "xy"})) == []


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_readers_schemas_take_the_fast_path(name: str) -> None:
    assert SchemaValidator(SHIPPED[name]).compiled


def test_a_valid_plan_never_reaches_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("jsonschema was consulted for a valid plan")

    validator = SchemaValidator(native.schema())  # a new one: nothing cached
    monkeypatch.setattr(jsonschema, "Draft202012Validator", refuse)
    assert list(validator.iter_errors({"phases": [{"id": "a", "run": "make"}]})) == []
    with pytest.raises(AssertionError, match="consulted"):
        list(validator.iter_errors({"phases": [{"id": "a", "run": 3}]}))


# --- the compiled check on the readers' schemas: documents one mutation away from valid --------

FULL_PHASE = {
    "id": "build",
    "name": "Build",
    "agent": "coder",
    "model": "fast",
    "blocked_by": ["setup", 2],
    "files": {"create": ["src/a.py"], "modify": ["src/b.py"], "delete": []},
    "reads": ["README.md"],
    "run": ["make"],
    "acceptance": ["it builds", {"criterion": "tests pass", "check": "make test"}, {"check": None}],
    "description": "Build it.",
    "prompt": "Carefully.",
    "parallel": False,
    "timeout": 1.5,
    "max_retries": 0,
    "estimate": 0,
    "tags": ["core"],
    "assumptions": [{"claim": "make exists", "verify": None, "severity": "warning"}],
    "fallback": "Ask.",
    "rollback_triggers": ["tests fail"],
    "constraints": ["no new dependencies"],
}
BASES = {
    "native": {"title": "t", "root": ".", "context": "c", "tags": [], "phases": [FULL_PHASE]},
    "design-v2": json.loads((EXAMPLES / "design-plan.json").read_text()),
    "maestro-json": json.loads((EXAMPLES / "maestro-phases.json").read_text())["phases"],
}

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.floats(allow_infinity=False)
    | st.sampled_from(["", "x", "blocking", "warning", "src/a.py", "2"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["create", "check", "claim", "id", "zz"]), children)
    ),
    max_leaves=6,
)


def _mutate(data: st.DataObject, document: Any) -> Any:
    """Replace, delete or add one value somewhere in ``document`` (a copy)."""
    document = copy.deepcopy(document)
    parent: Any = None
    key: Any = None
    node = document
    while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
        parent = node
        key = data.draw(
            st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))
        )
        node = node[key]
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if parent is None:
        return data.draw(_VALUES) if action == "replace" else document
    if action == "replace":
        parent[key] = data.draw(_VALUES)
    elif action == "delete":
        del parent[key]
    elif isinstance(parent, dict):
        parent[data.draw(st.sampled_from(["idd", "zz", "name", "files"]))] = data.draw(_VALUES)
    else:
        parent.append(data.draw(_VALUES))
    return document


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_unmutated_bases_are_valid(name: str) -> None:
    assert agrees(SHIPPED[name], BASES[name])


@pytest.mark.parametrize("name", sorted(SHIPPED))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_compiled_check_agrees_on_mutated_plans(name: str, data: st.DataObject) -> None:
    agrees(SHIPPED[name], _mutate(data, BASES[name]))
