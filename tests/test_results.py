"""The tools' results declared once (memory_server/results.py): each tool advertises the schema
of its result Struct, and every answer the server gives decodes into that Struct, field for
field, over real pipes in both eras."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    MemoryClient,
    MemoryServers,
    entity_record,
    era,
    memory_servers,
    record_line,
    relation_record,
    write_reference_file,
)

from memory_server import results
from memory_server.tools import TOOLS
from protocol import Server
from protocol.arguments import input_schema, output_schema

RESULT_OF = {row.name: row.result for row in TOOLS}
PEOPLE = [{"name": f"person_{i:02d}", "entityType": ("person", "place")[i % 2],
           "observations": [f"Observation {slot} of person_{i:02d}: enjoys {('tea', 'chess')[i % 2]}"
                            for slot in range(4)]} for i in range(60)]
KNOWS = [{"from": f"person_{i:02d}", "to": f"person_{(i * 7 + 1) % 60:02d}", "relationType": "knows"} for i in range(60)]


def decoded(tool: str, structured: dict[str, Any]) -> msgspec.Struct:
    """`structured` as its tool's result Struct, refused for any field the Struct lacks or mistypes;
    encoded again, it is the same JSON value (nothing the client got is outside the Struct)."""
    value: msgspec.Struct = msgspec.convert(structured, RESULT_OF[tool])
    assert msgspec.to_builtins(value) == structured
    return value


def call(client: MemoryClient, tool: str, arguments: dict[str, Any]) -> Any:
    return decoded(tool, client.ok(tool, arguments))  # ok: also checked against the outputSchema


@pytest.fixture
def memory_file(tmp_path: Path) -> Path:
    path = tmp_path / "memory.jsonl"
    write_reference_file(path, [record_line(entity_record(e)) for e in PEOPLE] +
                         [record_line(relation_record(r)) for r in KNOWS])
    return path


def test_every_tool_advertises_the_schema_of_its_result_struct(memory_file: Path) -> None:
    server = Server("results", "0")
    from memory_server.storage.store import GraphStore
    from memory_server.tools import register_tools

    register_tools(server, GraphStore(memory_file), budget=5_000)
    for name, tool in server.tools.items():
        assert tool.result is RESULT_OF[name]
        assert tool.output_schema == output_schema(RESULT_OF[name])


def test_every_answer_decodes_into_its_result_struct(memory_servers: MemoryServers, era: str,
                                                     memory_file: Path) -> None:
    client = MemoryClient(memory_servers.process(memory_file, env={"MEMORY_ANSWER_BUDGET": "5000"}), era).open()
    created = call(client, "create_entities", {"entities": [
        {"name": "Zed", "entityType": "person", "observations": ["Likes tea"], "happenedOn": "2023-05"},
        PEOPLE[0]]})
    assert isinstance(created, results.CreatedEntities) and created.skipped == ["person_00"]
    call(client, "create_relations", {"relations": [{"from": "Zed", "to": "person_00", "relationType": "knows"}]})
    added = call(client, "add_observations", {"observations": [{"entityName": "Zed", "contents": ["Plays chess"]}]})
    assert added.results[0].added_observations == ["Plays chess"]

    first = call(client, "read_graph", {})
    assert isinstance(first.summary, results.Summary) and isinstance(first.next_cursor, str)
    assert isinstance(call(client, "read_graph", {"cursor": first.next_cursor}), results.GraphPage)
    found = call(client, "search_nodes", {"query": "enjoys tea", "characters": 600})
    assert found.entities and any(isinstance(entity.partial, str) for entity in found.entities)
    opened = call(client, "open_nodes", {"names": ["Zed", "person_01"]})
    assert sorted(entity.name for entity in opened.entities) == ["Zed", "person_01"]

    assert call(client, "delete_observations", {"deletions": [
        {"entityName": "Zed", "observations": ["Plays chess"]}]}).deleted_count == 1
    assert call(client, "delete_relations", {"relations": [
        {"from": "Zed", "to": "person_00", "relationType": "knows"}]}).deleted_count == 1
    assert call(client, "delete_entities", {"entityNames": ["Zed", "Nobody"]}).not_found == ["Nobody"]


def test_a_union_of_plain_types_is_advertised_in_the_short_form() -> None:
    class Row(msgspec.Struct, forbid_unknown_fields=True):
        days: list[str | None]
        either: int | str | None = None

    schema = output_schema(Row)
    assert schema == {"type": "object", "properties": {
        "days": {"type": "array", "items": {"type": ["string", "null"]}},
        "either": {"type": ["integer", "string", "null"], "default": None}},
        "required": ["days"], "additionalProperties": False}
    assert "anyOf" in str(input_schema(Row)), "arguments keep msgspec's form"


def test_a_tool_declares_its_result_one_way_only() -> None:
    server = Server("results", "0")

    class Answer(msgspec.Struct):
        sum: int

    with pytest.raises(TypeError, match="result"):
        server.tool("add", description="Adds.", input_schema={"type": "object"}, result=Answer,
                    output_schema={"type": "object"})
    server.tool("add", description="Adds.", input_schema={"type": "object"}, result=Answer)(lambda: None)  # type: ignore[arg-type, return-value]
    assert server.tools["add"].describe()["outputSchema"] == {
        "type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
