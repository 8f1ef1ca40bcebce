"""memory://knowledge-graph holds the same graph as read_graph (README: "the same graph, as a
resource"), dates included, in both eras, from a memory just written and from one a later server
opens (its index cache then answers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    GRAPH_URI,
    MemoryClient,
    MemoryServers,
    entity,
    era,
    memory_servers,
    relation,
)
from test_index_cache import WAIT, fresh_cache
from write_items import entity_items, relation_items

from memory_server.model import dates
from memory_server.model import graph as rules
from memory_server.model.records import decode_file
from memory_server.storage import index_cache
from memory_server.storage.interface import Until
from memory_server.storage.store import GraphStore

DATED = {"MEMORY_DATES": "on"}


def resource_graph(client: MemoryClient) -> dict[str, Any]:
    contents = client.request("resources/read", {"uri": GRAPH_URI})["contents"]
    assert [item["uri"] for item in contents] == [GRAPH_URI] and contents[0]["mimeType"] == "application/json"
    return json.loads(contents[0]["text"])


def read_graph(client: MemoryClient) -> dict[str, Any]:
    answer = client.ok("read_graph")
    assert "nextCursor" not in answer
    return {"entities": answer["entities"], "relations": answer["relations"]}


def test_the_resource_is_the_graph_read_graph_answers(memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client(era, memory_file, env=DATED)
    client.ok("create_entities", {"entities": [{**entity("Ann", "person", ["joined the choir"]),
                                                "happenedOn": "2023-05-07"}, entity("Choir", "group")]})
    client.ok("add_observations", {"observations": [{"entityName": "Choir", "contents": ["sings on Sundays"]}]})
    client.ok("create_relations", {"relations": [relation("Ann", "Choir", "sings in")]})
    graph = read_graph(client)
    assert graph["entities"][0]["observationDates"][0].startswith("happened 2023-05-07, recorded ")
    assert resource_graph(client) == graph
    # A later server reads the file cold.
    later = memory_servers.client(era, memory_file, env=DATED)
    assert resource_graph(later) == read_graph(later) == graph


def test_the_resource_of_an_undated_memory_is_the_reference_graph(memory_servers: MemoryServers, era: str,
                                                                  tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client(era, memory_file, env={"MEMORY_DATES": "off"})
    client.ok("create_entities", {"entities": [entity("Bo", "robot", ["beeps"])]})
    assert resource_graph(client) == read_graph(client) == {"entities": [entity("Bo", "robot", ["beeps"])],
                                                            "relations": []}


def dated_big_memory(memory: Path) -> dict[str, Any]:
    """A dated memory large enough for an index cache (made, and fresh); the graph it holds, as read_graph."""
    store = GraphStore(memory, clock=dates.now_stamp)
    store.create_entities(entity_items([{**entity(f"person {n}", "person", [f"Observation about person {n}: enjoys tea " * 4,
                                                                           "Plays the cello"]),
                                         **({"happenedOn": "2023-05-07"} if n % 3 == 0 else {})} for n in range(4000)]))
    store.create_relations(relation_items([relation("person 1", f"person {n}", "knows") for n in range(2, 40)]))
    assert memory.stat().st_size >= index_cache.WORTH_CACHING
    assert store.wait_until(Until.CACHED, WAIT) and fresh_cache(memory), "the cache of a new memory"
    whole = rules.read_graph(rules.graph_from_lines(decode_file(memory.read_bytes())))
    return {"entities": list(whole["entities"]), "relations": whole["relations"]}


def test_a_memory_answered_from_its_index_cache_shows_its_dates_in_the_resource_and_every_read(
        memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    graph = dated_big_memory(memory_file)
    assert graph["entities"][0]["observationDates"][0].startswith("happened 2023-05-07, recorded ")
    assert "createdAt" in graph["entities"][1] and "recordedAt" not in graph["entities"][1]
    env = {**DATED, "MEMORY_ANSWER_BUDGET": str(1 << 40)}
    assert resource_graph(memory_servers.client(era, memory_file, env=env)) == graph
    assert read_graph(memory_servers.client(era, memory_file, env=env)) == graph
    client = memory_servers.client(era, memory_file, env=env)
    opened = client.ok("open_nodes", {"names": ["person 0", "person 1", "nobody"]})
    assert opened["entities"] == graph["entities"][:2]
    assert resource_graph(client) == read_graph(client) == graph
