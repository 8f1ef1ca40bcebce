"""Tool arguments declared once (protocol/arguments.py): the memory tools' msgspec Structs advertise
exactly the schemas served before they were Structs, a call is accepted exactly when that schema
accepts it, and every refusal carries jsonschema's own words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from msgspec import Meta

from memory_server.app import build_server
from memory_server.storage.store import GraphStore
from memory_server.tools import TOOLS, SearchNodes
from protocol import Server
from protocol.arguments import input_schema
from protocol.server import Tool

REPO = Path(__file__).resolve().parent.parent
CAPTURED = Path(__file__).with_name("memory_tools_list.json")
"""The nine tools' tools/list entries as served before the tools were a table (hand-written schemas)."""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.sampled_from(
        ["", "a", "name", "cursor", "entities"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "entityType", "observations", "query", "limit", "cursor", "names", "entities",
                         "relations", "from", "to", "relationType", "entityName", "contents", "deletions",
                         "entityNames", "extra"]), inner, max_size=5),
    max_leaves=12)


@pytest.fixture(scope="module")
def memory_tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Tool]:
    return build_server(GraphStore(tmp_path_factory.mktemp("schemas") / "memory.jsonl")).tools


def jsonschema_words(schema: dict[str, Any], value: Any) -> list[str]:
    found = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    return [f"at {'/' + '/'.join(map(str, e.absolute_path)) if e.absolute_path else 'the top level'}: {e.message}"
            for e in found]


# --- what is advertised -------------------------------------------------------------------------------------

def test_the_tool_list_is_byte_for_byte_what_was_served_before(memory_tools: dict[str, Tool]) -> None:
    served = msgspec.json.encode([tool.describe() for tool in memory_tools.values()])
    # Decoding keeps each object's key order, so this compares order as well as content.
    captured = msgspec.json.encode(msgspec.json.decode(CAPTURED.read_bytes()))
    assert served == captured
    assert [row.name for row in TOOLS] == list(memory_tools) == [entry["name"] for entry in json.loads(captured)]


class Inner(msgspec.Struct):
    """A docstring that must not become the schema's description."""
    type: Annotated[str, Meta(description="a property named like a keyword")]
    description: int


class Outer(msgspec.Struct):
    inner: Annotated[list[Inner], Meta(description="the items")]
    one: Annotated[Inner, Meta(description="just one")]
    count: Annotated[int, Meta(ge=1)] | msgspec.UnsetType = msgspec.UNSET


def test_a_structs_schema_is_inlined_without_msgspecs_titles_and_in_the_fixed_keyword_order() -> None:
    schema = input_schema(Outer)
    inner = {"type": "object", "properties": {
        "type": {"type": "string", "description": "a property named like a keyword"},
        "description": {"type": "integer"}}, "required": ["type", "description"]}
    expected = {"type": "object", "properties": {
        "inner": {"type": "array", "items": inner, "description": "the items"},
        "one": {**inner, "description": "just one"},
        "count": {"type": "integer", "minimum": 1}}, "required": ["inner", "one"]}
    assert msgspec.json.encode(schema) == msgspec.json.encode(expected)


def test_a_tool_declares_its_arguments_one_way_only() -> None:
    server = Server("t", "1")

    async def handler(arguments: Any) -> str:
        return "ok"

    with pytest.raises(TypeError, match="either"):
        server.tool("both", description="d", input_schema={"type": "object"}, arguments=SearchNodes)(handler)
    with pytest.raises(TypeError, match="either"):
        server.tool("neither", description="d")(handler)
    assert server.tools == {}


# --- what is accepted ---------------------------------------------------------------------------------------

def check_agrees_with_jsonschema(tool: Tool, value: Any) -> None:
    parsed, problems = tool.parse_arguments(value)
    words = jsonschema_words(tool.input_schema, value)
    assert problems == words[:20], (tool.name, value)
    if not problems:
        assert isinstance(parsed, tool.arguments), (tool.name, value)
        # What the handler gets is what the client sent, as far as the schema names it.
        named = {key: item for key, item in value.items() if key in tool.input_schema["properties"]}
        assert msgspec.to_builtins(parsed) == named or any(isinstance(v, float) for v in named.values())


@settings(max_examples=300, deadline=None)
@given(value=json_values, which=st.integers(0, 8))
def test_a_call_is_accepted_exactly_when_the_advertised_schema_accepts_it(memory_tools: dict[str, Tool],
                                                                         value: Any, which: int) -> None:
    tool = list(memory_tools.values())[which]
    if isinstance(value, dict):  # tools/call refuses other arguments before any tool sees them
        check_agrees_with_jsonschema(tool, value)


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_values_one_level_inside_each_tools_shape_are_judged_as_jsonschema_judges(
        memory_tools: dict[str, Tool], value: Any) -> None:
    # Random values rarely fit a tool's shape: these put them one level inside it.
    for tool in memory_tools.values():
        schema = tool.input_schema
        for key in schema["properties"]:
            for arguments in ({key: value}, {key: [value]}, {**{k: "x" for k in schema["required"]}, key: value}):
                check_agrees_with_jsonschema(tool, arguments)


def test_the_calls_a_client_makes_most_are_decoded_into_their_structs(memory_tools: dict[str, Tool]) -> None:
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
    assert usual.keys() == memory_tools.keys()
    for name, calls in usual.items():
        for arguments in calls:
            parsed, problems = memory_tools[name].parse_arguments(arguments)
            assert problems == [] and isinstance(parsed, memory_tools[name].arguments), (name, arguments)
            assert msgspec.to_builtins(parsed) == arguments


def test_valid_calls_never_import_jsonschema_and_the_first_refusal_does() -> None:
    # A process of its own: whether a module was imported is a property of the whole process.
    script = """
import sys, tempfile, pathlib
from memory_server.app import build_server
from memory_server.storage.store import GraphStore
tools = build_server(GraphStore(pathlib.Path(tempfile.mkdtemp()) / "m.jsonl")).tools
assert tools["search_nodes"].parse_arguments({"query": "tea", "limit": 3})[1] == []
assert tools["create_entities"].parse_arguments({"entities": [{"name": "a", "entityType": "t", "observations": []}]})[1] == []
before = "jsonschema" in sys.modules
problems = tools["open_nodes"].parse_arguments({"names": 5})[1]
print(before, "jsonschema" in sys.modules, problems)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    assert done.stdout.strip() == "False True [\"at /names: 5 is not of type 'array'\"]", done.stderr


def test_an_integral_float_is_an_integer_as_json_schema_says(memory_tools: dict[str, Tool]) -> None:
    parsed, problems = memory_tools["search_nodes"].parse_arguments({"query": "tea", "limit": 2.0})
    assert problems == [] and parsed.limit == 2 and isinstance(parsed.limit, int)
    _, problems = memory_tools["search_nodes"].parse_arguments({"query": "tea", "limit": 2.5})
    assert problems == ["at /limit: 2.5 is not of type 'integer'"]
    _, problems = memory_tools["search_nodes"].parse_arguments({"query": "tea", "limit": 0})
    assert problems == ["at /limit: 0 is less than the minimum of 1"]


def test_unknown_fields_are_allowed_and_not_passed_on(memory_tools: dict[str, Tool]) -> None:
    parsed, problems = memory_tools["create_relations"].parse_arguments(
        {"relations": [{"from": "a", "to": "b", "relationType": "knows", "weight": 3}], "note": "x"})
    assert problems == []
    assert msgspec.to_builtins(parsed) == {"relations": [{"from": "a", "to": "b", "relationType": "knows"}]}


# --- a hand-written schema -----------------------------------------------------------------------------------

PLAIN_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"],
                "additionalProperties": False}


@pytest.mark.parametrize(("arguments", "errors"), [
    ({"n": 0}, ["at /n: 0 is less than the minimum of 1"]),
    ({"n": 1.0}, []),  # an integral float is an integer to JSON Schema
    ({"n": True}, ["at /n: True is not of type 'integer'"]),
    ({}, ["at the top level: 'n' is a required property"]),
    ({"n": 2, "m": 1}, ["at the top level: Additional properties are not allowed ('m' was unexpected)"]),
])
def test_a_hand_written_schemas_refusals_keep_jsonschemas_words(arguments: dict[str, Any], errors: list[str]) -> None:
    async def handler(arguments: dict[str, Any]) -> str:
        return "ok"

    tool = Tool("t", "a tool", PLAIN_SCHEMA, handler)
    parsed, problems = tool.parse_arguments(arguments)
    assert problems == errors
    assert parsed == (None if errors else arguments), "the handler of a hand-written schema gets the dict itself"


def test_at_most_twenty_violations_are_listed() -> None:
    async def handler(arguments: dict[str, Any]) -> str:
        return "ok"

    tool = Tool("t", "a tool", {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}}},
                handler)
    _, problems = tool.parse_arguments({"names": list(range(30))})
    assert len(problems) == 20 and problems[0] == "at /names/0: 0 is not of type 'string'"
