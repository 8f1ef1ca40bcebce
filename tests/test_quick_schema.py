"""The quick check of tool arguments says "valid" only where jsonschema says so too, and says it
for the plain valid arguments of this server's tools (so their first call needs no jsonschema)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings
from jsonschema import Draft202012Validator

from memory_server.app import build_server
from memory_server.store import GraphStore
from protocol.quick_schema import surely_valid

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 1.5, -2.5]) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=8)

type_names = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null", "thing"])
bounds = st.one_of(st.integers(-2, 3), st.sampled_from([0.5, 1.0, "1", None]))
leaf_keywords = st.fixed_dictionaries({}, optional={
    "type": st.one_of(type_names, st.lists(type_names, min_size=1, max_size=2, unique=True)),
    "minimum": bounds, "maximum": bounds, "minLength": bounds, "maxLength": bounds,
    "minItems": bounds, "maxItems": bounds, "description": st.text(max_size=2),
    "enum": st.lists(json_values, max_size=2), "pattern": st.just("^a"), "$schema": st.just("x")})
schemas = st.recursive(
    st.one_of(st.booleans(), leaf_keywords),
    lambda inner: st.one_of(
        st.builds(lambda base, items: {**base, "items": items}, leaf_keywords, inner),
        st.builds(lambda base, props, required, extra: {**base, "properties": props, "required": required,
                                                        **({} if extra is None else {"additionalProperties": extra})},
                  leaf_keywords, st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                  st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
                  st.one_of(st.none(), inner))),
    max_leaves=6)


def conforms(schema: Any, instance: Any) -> bool:
    return Draft202012Validator(schema).is_valid(instance)


@settings(max_examples=1500, deadline=None)
@given(schemas, json_values)
def test_a_quick_yes_is_always_a_yes_of_jsonschema(schema: Any, instance: Any) -> None:
    if surely_valid(schema, instance):
        assert conforms(schema, instance)


def tool_schemas(tmp_path: Path) -> dict[str, Any]:
    server = build_server(GraphStore(tmp_path / "memory.jsonl"))
    return {name: tool.input_schema for name, tool in server.tools.items()}


PLAIN_CALLS = {
    "search_nodes": [{"query": "tea"}, {"query": "Alice coffee", "limit": 5}, {"query": "x", "cursor": "abc"}],
    "open_nodes": [{"names": ["Alice", "Bob"]}, {"names": []}],
    "read_graph": [{}, {"cursor": "abc"}],
    "create_entities": [{"entities": [{"name": "A", "entityType": "person", "observations": ["likes tea"]}]}],
    "create_relations": [{"relations": [{"from": "A", "to": "B", "relationType": "knows"}]}],
    "add_observations": [{"observations": [{"entityName": "A", "contents": ["x"]}]}],
    "delete_entities": [{"entityNames": ["A"]}],
    "delete_observations": [{"deletions": [{"entityName": "A", "observations": ["x"]}]}],
    "delete_relations": [{"relations": [{"from": "A", "to": "B", "relationType": "knows"}]}],
}


def test_plain_valid_arguments_of_every_tool_are_a_quick_yes(tmp_path: Path) -> None:
    schemas = tool_schemas(tmp_path)
    assert set(schemas) == set(PLAIN_CALLS)
    for name, calls in PLAIN_CALLS.items():
        for arguments in calls:
            assert conforms(schemas[name], arguments), (name, arguments)
            assert surely_valid(schemas[name], arguments), (name, arguments)


def test_invalid_arguments_are_never_a_quick_yes(tmp_path: Path) -> None:
    schemas = tool_schemas(tmp_path)
    for name, arguments in [("search_nodes", {}), ("search_nodes", {"query": 3}), ("search_nodes", {"query": "a", "limit": 0}),
                            ("search_nodes", {"query": "a", "limit": True}), ("search_nodes", {"query": "a", "limit": 2.5}),
                            ("open_nodes", {"names": "Alice"}), ("open_nodes", {"names": [1]}),
                            ("create_entities", {"entities": [{"name": "A"}]})]:
        assert not conforms(schemas[name], arguments), (name, arguments)
        assert not surely_valid(schemas[name], arguments), (name, arguments)
