"""Tool arguments: the quick yes for plain schemas never accepts what jsonschema refuses, and every
refusal still carries jsonschema's own words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from memory_server.app import build_server
from memory_server.storage.store import GraphStore
from protocol.server import Tool, _quick_check

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.sampled_from(
        ["", "a", "name", "cursor", "entities"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "entityType", "observations", "query", "limit", "cursor", "names", "entities",
                         "relations", "from", "to", "relationType", "entityName", "contents", "deletions",
                         "entityNames", "extra"]), inner, max_size=5),
    max_leaves=12)


def _memory_schemas(tmp_path: Path) -> dict[str, dict[str, Any]]:
    server = build_server(GraphStore(tmp_path / "memory.jsonl"))
    return {name: tool.input_schema for name, tool in server.tools.items()}


@pytest.fixture(scope="module")
def memory_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return _memory_schemas(tmp_path_factory.mktemp("schemas"))


PLAIN_SCHEMAS = [
    {},
    {"type": "object"},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"],
     "additionalProperties": False},
    {"type": "object", "properties": {"x": {"type": "number", "minimum": -1.5}, "b": {"type": "boolean"}}},
    {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
]


@settings(max_examples=300, deadline=None)
@given(value=json_values, which=st.integers(0, 100))
def test_a_quick_yes_is_always_a_jsonschema_yes(memory_schemas: dict[str, dict[str, Any]], value: Any,
                                                which: int) -> None:
    schemas = [*memory_schemas.values(), *PLAIN_SCHEMAS]
    schema = schemas[which % len(schemas)]
    check = _quick_check(schema)
    assert check is not None
    if check(value):
        assert Draft202012Validator(schema).is_valid(value)


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_arguments_wrapped_in_each_tools_shape_agree_with_jsonschema(memory_schemas: dict[str, dict[str, Any]],
                                                                     value: Any) -> None:
    # Random values rarely fit a tool's shape: these put them one level inside it.
    for name, schema in memory_schemas.items():
        for key in schema["properties"]:
            for arguments in ({key: value}, {key: [value]}, {**{k: "x" for k in schema["required"]}, key: value}):
                check = _quick_check(schema)
                assert check is not None
                if check(arguments):
                    assert Draft202012Validator(schema).is_valid(arguments), (name, arguments)


def test_the_calls_a_client_makes_most_are_accepted_quickly(memory_schemas: dict[str, dict[str, Any]]) -> None:
    usual = {
        "read_graph": [{}, {"cursor": "abc"}],
        "search_nodes": [{"query": "zephyr"}, {"query": "tea", "limit": 5}, {"query": "x", "cursor": "c"}],
        "open_nodes": [{"names": ["a", "b"]}, {"names": [], "cursor": "c"}],
        "create_entities": [{"entities": [{"name": "a", "entityType": "t", "observations": ["o"]}]}],
        "create_relations": [{"relations": [{"from": "a", "to": "b", "relationType": "knows"}]}],
        "add_observations": [{"observations": [{"entityName": "a", "contents": ["o"]}]}],
        "delete_entities": [{"entityNames": ["a"]}],
        "delete_observations": [{"deletions": [{"entityName": "a", "observations": ["o"]}]}],
        "delete_relations": [{"relations": [{"from": "a", "to": "b", "relationType": "knows"}]}],
    }
    assert usual.keys() == memory_schemas.keys()
    for name, calls in usual.items():
        check = _quick_check(memory_schemas[name])
        assert check is not None
        for arguments in calls:
            assert check(arguments), (name, arguments)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"enum": [1, 2]}}},
    {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
    {"type": "array", "items": [{"type": "string"}]},
    {"type": "string", "pattern": "^a"},
    {"anyOf": [{"type": "string"}]},
    True,
])
def test_schemas_with_more_than_the_plain_keywords_are_left_to_jsonschema(schema: Any) -> None:
    assert _quick_check(schema) is None


@pytest.mark.parametrize(("arguments", "errors"), [
    ({"n": 0}, ["at /n: 0 is less than the minimum of 1"]),
    ({"n": 1.0}, []),  # an integral float is an integer to JSON Schema
    ({"n": True}, ["at /n: True is not of type 'integer'"]),
    ({}, ["at the top level: 'n' is a required property"]),
    ({"n": 2, "m": 1}, ["at the top level: Additional properties are not allowed ('m' was unexpected)"]),
])
def test_refusals_keep_jsonschemas_words(arguments: dict[str, Any], errors: list[str]) -> None:
    async def handler(arguments: dict[str, Any]) -> str:
        return "ok"

    tool = Tool("t", "a tool", PLAIN_SCHEMAS[2], handler)
    assert tool.argument_errors(arguments) == errors
