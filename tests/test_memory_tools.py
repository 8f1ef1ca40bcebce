"""The nine memory tools, the knowledge-graph resource and the memory file, end to end over real pipes.

Each test starts `python -m memory_server` on its own memory file and speaks to it in one era
(every test runs in both): legacy = the initialize handshake then bare requests, modern = every
request with the 2026-07-28 `_meta`. Every successful tool result is checked against its tool's
outputSchema, and its first text item against structuredContent (memory_helpers.MemoryClient.call).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    ADD_TOOLS,
    DELETE_TOOLS,
    GRAPH_URI,
    READ_TOOLS,
    TOOL_NAMES,
    MemoryClient,
    MemoryServers,
    entity,
    entity_record,
    era,
    file_lines,
    memory_servers,
    mode_of,
    record_line,
    reference_lines,
    relation,
    relation_record,
    texts,
    undated,
    undated_lines,
    write_reference_file,
)

ALICE = entity("Alice", "person", ["Loves Jazz", "Lives in Berlin"])
BOB = entity("Bob", "person", ["Plays chess"])
ACME = entity("ACME", "organization", ["Makes anvils"])
CAROL = entity("Carol", "robot")
WORKS_AT = relation("Alice", "ACME", "works_at")
KNOWS = relation("Bob", "Carol", "knows")
EMPLOYS = relation("ACME", "Bob", "employs")
SEED = {"entities": [ALICE, BOB, ACME, CAROL], "relations": [WORKS_AT, KNOWS, EMPLOYS]}


@pytest.fixture
def memory_file(tmp_path: Path) -> Path:
    return tmp_path / "memory.jsonl"


@pytest.fixture
def client(memory_servers: MemoryServers, era: str, memory_file: Path) -> MemoryClient:
    return memory_servers.client(era, memory_file)


@pytest.fixture
def seeded(client: MemoryClient) -> MemoryClient:
    """A client whose graph holds SEED, created through the tools."""
    assert client.ok("create_entities", {"entities": SEED["entities"]}) == {"entities": SEED["entities"]}
    assert client.ok("create_relations", {"relations": SEED["relations"]}) == {"relations": SEED["relations"]}
    return client


def by_name(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda item: item["name"])


def triples(relations: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted((item["from"], item["to"], item["relationType"]) for item in relations)


# --- discovery --------------------------------------------------------------------------------------------

def test_tools_list_names_titles_and_annotations(client: MemoryClient) -> None:
    tools = client.tools
    assert sorted(tools) == sorted(TOOL_NAMES)
    for name, tool in tools.items():
        assert isinstance(tool.get("title"), str) and tool["title"].strip(), tool
        assert isinstance(tool.get("description"), str) and tool["description"].strip(), tool
        assert tool["inputSchema"]["type"] == "object", tool
        assert tool["outputSchema"]["type"] == "object", tool
        hints = tool["annotations"]
        assert hints["openWorldHint"] is False, tool
        if name in READ_TOOLS:
            assert hints["readOnlyHint"] is True, tool
        else:
            assert hints.get("readOnlyHint", False) is False, tool
        if name in DELETE_TOOLS:
            assert hints["destructiveHint"] is True and hints["idempotentHint"] is True, tool
        if name in ADD_TOOLS:
            assert hints["idempotentHint"] is False, tool
            assert hints.get("destructiveHint", True) is False, tool


def test_tools_list_advertises_the_schemas_served_before_the_tools_were_a_table(client: MemoryClient) -> None:
    # The capture was taken from the hand-written schemas; json keeps each object's key order.
    captured = json.loads(Path(__file__).with_name("memory_tools_list.json").read_text())
    assert json.dumps(list(client.tools.values())) == json.dumps(captured)


def test_instructions_are_given_at_the_start(client: MemoryClient) -> None:
    # client.opening is the initialize result (legacy) or the server/discover result (modern)
    instructions = client.opening.get("instructions")
    assert isinstance(instructions, str) and instructions.strip()
    assert "search_nodes" in instructions and "add_observations" in instructions


# --- create_entities ----------------------------------------------------------------------------------------

def test_create_entities_returns_what_it_created_and_nothing_skipped(client: MemoryClient) -> None:
    result = client.call("create_entities", {"entities": [ALICE, BOB]})
    assert result["structuredContent"] == {"entities": [ALICE, BOB]}
    assert "skipped" not in result["structuredContent"]
    assert len(texts(result)) == 1, "no skip, so no remark"
    assert undated(client.graph()) == {"entities": [ALICE, BOB], "relations": []}


def test_create_entities_skips_existing_names_and_repeats(seeded: MemoryClient) -> None:
    dan = entity("Dan", "person", ["first Dan"])
    result = seeded.call("create_entities", {"entities": [
        dan,
        entity("Dan", "robot", ["second Dan"]),
        entity("Alice", "robot", ["should not be added"]),
    ]})
    structured = result["structuredContent"]
    assert structured["entities"] == [dan]
    assert sorted(structured["skipped"]) == ["Alice", "Dan"]
    remarks = texts(result)[1:]
    assert len(remarks) == 1, result
    assert "Alice" in remarks[0] and "Dan" in remarks[0] and "add_observations" in remarks[0]

    graph = undated(seeded.graph())
    assert graph["entities"] == [*SEED["entities"], dan], "observations of skipped entities are not added"


@pytest.mark.file_store
def test_create_entities_of_only_existing_names_changes_nothing(seeded: MemoryClient, memory_file: Path) -> None:
    before = memory_file.read_bytes()
    structured = seeded.ok("create_entities", {"entities": [entity("Bob", "x", ["new fact"])]})
    assert structured == {"entities": [], "skipped": ["Bob"]}
    assert memory_file.read_bytes() == before


# --- create_relations ---------------------------------------------------------------------------------------

def test_create_relations_skips_duplicates_also_within_the_call(seeded: MemoryClient) -> None:
    likes = relation("Carol", "Alice", "likes")
    structured = seeded.ok("create_relations", {"relations": [WORKS_AT, likes, likes, KNOWS]})
    assert structured == {"relations": [likes]}
    assert undated(seeded.graph())["relations"] == [*SEED["relations"], likes]


@pytest.mark.file_store
def test_create_relations_with_missing_entities_fails_naming_each_and_changes_nothing(
        seeded: MemoryClient, memory_file: Path) -> None:
    before = memory_file.read_bytes()
    message = seeded.tool_error("create_relations", {"relations": [
        relation("Alice", "Bob", "knows"),
        relation("Alice", "Ghost", "haunts"),
        relation("Phantom", "Bob", "scares"),
    ]})
    assert "Ghost" in message and "Phantom" in message
    assert memory_file.read_bytes() == before
    assert undated(seeded.graph()) == SEED, "the valid relation of the failed call is not created either"


# --- add_observations ---------------------------------------------------------------------------------------

def test_add_observations_deduplicates_and_reports_per_entity(seeded: MemoryClient) -> None:
    structured = seeded.ok("add_observations", {"observations": [
        {"entityName": "Alice", "contents": ["Loves Jazz", "Speaks Spanish", "Speaks Spanish"]},
        {"entityName": "Carol", "contents": ["Beeps"]},
        {"entityName": "Bob", "contents": ["Plays chess"]},
    ]})
    assert structured == {"results": [
        {"entityName": "Alice", "addedObservations": ["Speaks Spanish"]},
        {"entityName": "Carol", "addedObservations": ["Beeps"]},
        {"entityName": "Bob", "addedObservations": []},
    ]}
    entities = {item["name"]: item for item in undated(seeded.graph())["entities"]}
    assert entities["Alice"]["observations"] == ["Loves Jazz", "Lives in Berlin", "Speaks Spanish"]
    assert entities["Carol"]["observations"] == ["Beeps"]
    assert entities["Bob"]["observations"] == ["Plays chess"]


@pytest.mark.file_store
def test_add_observations_to_a_missing_entity_fails_and_adds_nothing(seeded: MemoryClient,
                                                                     memory_file: Path) -> None:
    before = memory_file.read_bytes()
    message = seeded.tool_error("add_observations", {"observations": [
        {"entityName": "Alice", "contents": ["Would be new"]},
        {"entityName": "Ghost", "contents": ["Boo"]},
    ]})
    assert "Ghost" in message and "not found" in message
    assert memory_file.read_bytes() == before
    assert undated(seeded.graph()) == SEED


# --- deletions ------------------------------------------------------------------------------------------------

def test_delete_entities_cascades_and_reports_not_found(seeded: MemoryClient) -> None:
    structured = seeded.ok("delete_entities", {"entityNames": ["Bob", "Ghost"]})
    assert structured["success"] is True
    assert isinstance(structured["message"], str) and structured["message"]
    assert structured["notFound"] == ["Ghost"]
    assert undated(seeded.graph()) == {"entities": [ALICE, ACME, CAROL], "relations": [WORKS_AT]}


@pytest.mark.file_store
def test_delete_entities_of_unknown_names_only_reports_them(seeded: MemoryClient, memory_file: Path) -> None:
    before = memory_file.read_bytes()
    structured = seeded.ok("delete_entities", {"entityNames": ["Ghost"]})
    assert structured["success"] is True and structured["notFound"] == ["Ghost"]
    assert memory_file.read_bytes() == before


@pytest.mark.file_store
def test_delete_observations_is_silent_for_unknowns_and_counts(seeded: MemoryClient, memory_file: Path) -> None:
    structured = seeded.ok("delete_observations", {"deletions": [
        {"entityName": "Alice", "observations": ["Loves Jazz", "never said"]},
        {"entityName": "Ghost", "observations": ["Boo"]},
    ]})
    assert structured["success"] is True and isinstance(structured["message"], str)
    assert structured["deletedCount"] == 1
    alice = next(item for item in undated(seeded.graph())["entities"] if item["name"] == "Alice")
    assert alice["observations"] == ["Lives in Berlin"]

    before = memory_file.read_bytes()
    again = seeded.ok("delete_observations", {"deletions": [{"entityName": "Alice", "observations": ["Loves Jazz"]}]})
    assert again["deletedCount"] == 0
    assert memory_file.read_bytes() == before


@pytest.mark.file_store
def test_delete_relations_is_silent_for_unknowns_and_counts(seeded: MemoryClient, memory_file: Path) -> None:
    structured = seeded.ok("delete_relations", {"relations": [KNOWS, relation("Alice", "Bob", "never")]})
    assert structured["success"] is True and isinstance(structured["message"], str)
    assert structured["deletedCount"] == 1
    assert undated(seeded.graph()) == {"entities": SEED["entities"], "relations": [WORKS_AT, EMPLOYS]}

    before = memory_file.read_bytes()
    assert seeded.ok("delete_relations", {"relations": [KNOWS]})["deletedCount"] == 0
    assert memory_file.read_bytes() == before


# --- reads -----------------------------------------------------------------------------------------------------

def test_read_graph_of_an_empty_memory(client: MemoryClient, memory_file: Path) -> None:
    assert undated(client.graph()) == {"entities": [], "relations": []}
    assert not memory_file.exists(), "a read creates no file"


SEARCHES = [
    ("jazz", ["Alice"], [WORKS_AT]),  # observation, other case; one matched endpoint is enough
    ("PERSON", ["Alice", "Bob"], [WORKS_AT, KNOWS, EMPLOYS]),  # entity type
    ("acme", ["ACME"], [WORKS_AT, EMPLOYS]),  # name
    ("car", ["Carol"], [KNOWS]),
    ("nothing like this", [], []),
]


def test_search_nodes_matches_name_type_and_observations_case_insensitively(seeded: MemoryClient) -> None:
    known = {item["name"]: item for item in SEED["entities"]}
    for query, names, relations in SEARCHES:
        found = undated(seeded.ok("search_nodes", {"query": query}))
        assert found["entities"] == [known[name] for name in names], query
        assert triples(found["relations"]) == triples(relations), query


def test_open_nodes_skips_unknown_and_returns_relations_touching_any(seeded: MemoryClient) -> None:
    found = undated(seeded.ok("open_nodes", {"names": ["Bob", "Ghost"]}))
    assert found["entities"] == [BOB]
    assert triples(found["relations"]) == triples([KNOWS, EMPLOYS])

    found = undated(seeded.ok("open_nodes", {"names": ["ACME", "Alice"]}))
    assert by_name(found["entities"]) == by_name([ALICE, ACME])
    assert triples(found["relations"]) == triples([WORKS_AT, EMPLOYS])

    assert undated(seeded.ok("open_nodes", {"names": ["Ghost"]})) == {"entities": [], "relations": []}


# --- bad arguments ---------------------------------------------------------------------------------------------

BAD_ARGUMENTS = [
    ("create_entities", {}, "entities"),
    ("create_entities", {"entities": "Alice"}, "/entities"),
    ("create_entities", {"entities": [{"name": "Dan", "entityType": "person"}]}, "observations"),
    ("create_entities", {"entities": [{"name": 7, "entityType": "person", "observations": []}]}, "/entities/0/name"),
    ("create_entities", {"entities": [{"name": "Dan", "entityType": "p", "observations": [1]}]},
     "/entities/0/observations/0"),
    ("create_relations", {"relations": [{"from": "Alice", "to": "Bob"}]}, "relationType"),
    ("create_relations", {"relations": [{"from": "Alice", "to": ["Bob"], "relationType": "knows"}]},
     "/relations/0/to"),
    ("add_observations", {"observations": [{"entityName": "Alice", "contents": "x"}]}, "/observations/0/contents"),
    ("add_observations", {"observations": [{"contents": ["x"]}]}, "entityName"),
    ("delete_entities", {"entityNames": [None]}, "/entityNames/0"),
    ("delete_observations", {"deletions": {"entityName": "Alice"}}, "/deletions"),
    ("delete_relations", {"relations": [["Alice", "ACME", "works_at"]]}, "/relations/0"),
    ("search_nodes", {"query": 5}, "/query"),
    ("search_nodes", {}, "query"),
    ("open_nodes", {"names": "Alice"}, "/names"),
]


@pytest.mark.file_store
def test_invalid_arguments_are_a_tool_error_naming_the_path(seeded: MemoryClient, memory_file: Path) -> None:
    before = memory_file.read_bytes()
    for tool, arguments, named in BAD_ARGUMENTS:
        message = seeded.tool_error(tool, arguments)
        assert named in message, (tool, arguments, message)
        assert memory_file.read_bytes() == before, (tool, arguments)
    assert undated(seeded.graph()) == SEED, "the server keeps serving"
    error = seeded.request_error("tools/call", {"name": "create_entities", "arguments": ["not", "an", "object"]})
    assert error["code"] == -32602
    assert undated(seeded.graph()) == SEED


@pytest.mark.file_store
def test_unknown_tool_is_an_invalid_params_error(seeded: MemoryClient, memory_file: Path) -> None:
    before = memory_file.read_bytes()
    error = seeded.request_error("tools/call", {"name": "drop_everything", "arguments": {}})
    assert error["code"] == -32602 and "drop_everything" in error["message"]
    assert memory_file.read_bytes() == before
    assert undated(seeded.graph()) == SEED


# --- the resource ------------------------------------------------------------------------------------------------

def test_the_graph_resource_is_listed_and_reads_like_read_graph(seeded: MemoryClient) -> None:
    listed = seeded.request("resources/list")["resources"]
    assert len(listed) == 1
    resource = listed[0]
    assert resource["uri"] == GRAPH_URI and resource["name"] == "knowledge-graph"
    assert resource["mimeType"] == "application/json"
    assert isinstance(resource.get("title"), str) and resource["title"].strip()

    result = seeded.request("resources/read", {"uri": GRAPH_URI})
    (content,) = result["contents"]
    assert content["uri"] == GRAPH_URI and content["mimeType"] == "application/json"
    assert json.loads(content["text"]) == seeded.graph(), "the resource shows the dates read_graph shows"
    assert undated(seeded.graph()) == SEED
    if seeded.era == "modern":
        assert result["cacheScope"] == "private" and result["ttlMs"] == 0
    else:
        assert "cacheScope" not in result and "ttlMs" not in result


def test_an_unknown_resource_is_an_error_and_the_server_goes_on(seeded: MemoryClient) -> None:
    unknown = "memory://another-graph"
    error = seeded.request_error("resources/read", {"uri": unknown})
    assert error["code"] == (-32002 if seeded.era == "legacy" else -32602)
    assert error["data"]["uri"] == unknown
    if seeded.era == "legacy":
        assert seeded.request_error("resources/subscribe", {"uri": unknown})["data"]["uri"] == unknown
    assert undated(seeded.graph()) == SEED


# --- the memory file ----------------------------------------------------------------------------------------------

@pytest.mark.file_store
@pytest.mark.reference_exact
def test_the_file_holds_exactly_the_reference_records(seeded: MemoryClient, memory_file: Path) -> None:
    zoe = entity("Zoë", "person", ['Said "hi"\nthen left', "Ünïcode ✓"])
    seeded.ok("create_entities", {"entities": [zoe]})
    met = relation("Zoë", "Alice", "met")
    seeded.ok("create_relations", {"relations": [met]})
    graph = {"entities": [*SEED["entities"], zoe], "relations": [*SEED["relations"], met]}
    assert file_lines(memory_file) == reference_lines(graph)
    # `type` belongs to the file only
    assert undated(seeded.graph()) == graph


@pytest.mark.file_store
def test_a_file_the_reference_wrote_is_read_as_is(memory_servers: MemoryServers, era: str, memory_file: Path) -> None:
    write_reference_file(memory_file, reference_lines(SEED))
    client = memory_servers.client(era, memory_file)
    assert undated(client.graph()) == SEED
    client.ok("add_observations", {"observations": [{"entityName": "Carol", "contents": ["Beeps"]}]})
    carol = entity("Carol", "robot", ["Beeps"])
    after = reference_lines({"entities": [ALICE, BOB, ACME, carol], "relations": SEED["relations"]})
    assert undated_lines(memory_file) == after
    unchanged = [index for index, line in enumerate(after) if "Carol" not in line or '"relation"' in line]
    assert [file_lines(memory_file)[index] for index in unchanged] == [after[index] for index in unchanged], \
        "the lines the write did not change stay the reference's, byte for byte"


@pytest.mark.file_store
def test_unknown_records_and_fields_survive_a_write(memory_servers: MemoryServers, era: str,
                                                    memory_file: Path) -> None:
    note = record_line({"type": "note", "text": "kept by another tool", "pinned": True})
    write_reference_file(memory_file, [
        record_line({**entity_record(ALICE), "color": "blue"}),
        note,
        record_line({**relation_record(WORKS_AT), "since": 2019}),
        record_line(entity_record(ACME)),
    ])
    client = memory_servers.client(era, memory_file)
    assert undated(client.graph()) == {"entities": [ALICE, ACME], "relations": [WORKS_AT]}, "extra fields are not shown"
    client.ok("create_entities", {"entities": [BOB]})

    lines = file_lines(memory_file)
    assert note in lines, "an unknown record is kept verbatim"
    records = [json.loads(line) for line in lines]
    alice = next(record for record in records if record.get("name") == "Alice")
    assert alice["color"] == "blue"
    works_at = next(record for record in records if record.get("type") == "relation")
    assert works_at["since"] == 2019
    assert [record["name"] for record in records if record.get("type") == "entity"] == ["Alice", "ACME", "Bob"]
    assert undated(client.graph()) == {"entities": [ALICE, ACME, BOB], "relations": [WORKS_AT]}


@pytest.mark.file_store
def test_an_unreadable_line_is_moved_to_the_rejected_file(memory_servers: MemoryServers, era: str,
                                                          memory_file: Path) -> None:
    garbage = b'{"type":"entity","name":"Half'
    invalid_utf8 = b'{"type":"entity","name":"\xff\xfe"}'
    memory_file.write_bytes(b"\n".join([
        record_line(entity_record(ALICE)).encode(), garbage, invalid_utf8, record_line(entity_record(BOB)).encode()]))
    client = memory_servers.client(era, memory_file)
    assert undated(client.graph()) == {"entities": [ALICE, BOB], "relations": []}, "the readable lines are served"

    result = client.call("create_entities", {"entities": [CAROL]})
    assert not result.get("isError"), result
    rejected = memory_file.with_name(memory_file.name + ".rejected")
    assert any(str(rejected) in text for text in texts(result)[1:]), f"the result says nothing of it: {result}"

    moved = rejected.read_bytes()
    assert garbage in moved and invalid_utf8 in moved
    assert mode_of(rejected) == 0o600
    assert undated_lines(memory_file) == reference_lines({"entities": [ALICE, BOB, CAROL], "relations": []})


@pytest.mark.file_store
def test_the_file_is_private_its_parents_made_and_the_lock_gone_after_a_write(
        memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "deeper" / "still" / "memory.jsonl"
    client = memory_servers.client(era, memory_file)
    client.ok("create_entities", {"entities": [ALICE]})
    assert mode_of(memory_file) == 0o600
    assert not memory_file.with_name(memory_file.name + ".lock").exists()
    assert [path.name for path in memory_file.parent.iterdir()] == ["memory.jsonl"], "no lock, temporary or side file"


@pytest.mark.file_store
@pytest.mark.parametrize("obstacle", ["a file where the parent directory should be", "a directory at the path"])
def test_an_unusable_memory_path_gives_clear_errors_and_the_server_recovers(
        memory_servers: MemoryServers, era: str, tmp_path: Path, obstacle: str) -> None:
    if obstacle.startswith("a file"):
        blocker = tmp_path / "blocker"
        blocker.write_text("not a directory")
        memory_file = blocker / "memory.jsonl"
    else:
        memory_file = blocker = tmp_path / "memory.jsonl"
        blocker.mkdir()
    client = memory_servers.client(era, memory_file)
    for tool, arguments in [("read_graph", {}), ("search_nodes", {"query": "x"}), ("open_nodes", {"names": ["x"]}),
                            ("create_entities", {"entities": [ALICE]})]:
        result = client.call(tool, arguments)
        assert result.get("isError") is True, f"{tool}: a tool error is expected, got {result}"
        assert str(blocker) in texts(result)[0], result
    error = client.request_error("resources/read", {"uri": GRAPH_URI})
    assert str(blocker) in error["message"], f"the error does not say what is wrong: {error}"

    # the obstacle removed, the same server serves and writes again
    if blocker.is_dir():
        blocker.rmdir()
    else:
        blocker.unlink()
    client.ok("create_entities", {"entities": [ALICE]})
    assert undated(client.graph()) == {"entities": [ALICE], "relations": []}
    assert undated_lines(memory_file) == [record_line(entity_record(ALICE))]
