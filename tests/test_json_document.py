"""An export (one JSON document, as `export --format json` writes it) where the memory file should be:
every read and write is refused with a tool error saying to import it, and nothing on disk changes.
Following the advice (move it aside, import it) gives the memory it holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    GRAPH_URI,
    MemoryClient,
    MemoryServers,
    entity,
    era,
    memory_servers,
    relation,
)
from test_cli_commands import cli, export, write_memory

pytestmark = pytest.mark.file_store

GRAPH = {"entities": [entity("Ann", "person", ["likes tea", "sings"]), entity("Choir", "group", ["meets weekly"])],
         "relations": [relation("Ann", "Choir", "sings in")]}


def disk(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def refused_everywhere(client: MemoryClient, memory_file: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_graph", {}), ("search_nodes", {"query": "tea"}), ("open_nodes", {"names": ["Ann"]}),
        ("create_entities", {"entities": [entity("Bo", "robot", ["beeps"])]}),
        ("add_observations", {"observations": [{"entityName": "Ann", "contents": ["paints"]}]}),
        ("create_relations", {"relations": [relation("Ann", "Ann", "is")]}),
        ("delete_entities", {"entityNames": ["Ann"]}),
        ("delete_observations", {"deletions": [{"entityName": "Ann", "observations": ["sings"]}]}),
        ("delete_relations", {"relations": [relation("Ann", "Choir", "sings in")]}),
    ]
    for name, arguments in calls:
        message = client.tool_error(name, arguments)
        assert "holds one JSON document" in message and "mcp-server-memory import" in message, (name, message)
        assert str(memory_file) in message and "nothing was changed" in message
    error = client.request_error("resources/read", {"uri": GRAPH_URI})
    assert "holds one JSON document" in error["message"]


@pytest.mark.parametrize("shape", ["indented", "one line"])
def test_an_export_at_the_memory_path_is_refused_and_left_as_it_is(memory_servers: MemoryServers, era: str,
                                                                  tmp_path: Path, shape: str) -> None:
    source = tmp_path / "source" / "memory.jsonl"
    source.parent.mkdir()
    write_memory(source, GRAPH)
    exported = export(source, "json")
    assert exported.startswith(b"{\n")
    home = tmp_path / "home"
    home.mkdir()
    memory_file = home / "memory.jsonl"
    memory_file.write_bytes(exported if shape == "indented" else json.dumps(json.loads(exported)).encode())
    before = disk(home)
    client = memory_servers.client(era, memory_file)
    refused_everywhere(client, memory_file)
    assert disk(home) == before, "nothing on disk changed: no .rejected, no fragments"
    assert client.process.stderr.count("holds one JSON document") == 1, "said once on stderr"


def test_a_large_indented_export_is_refused_too(memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    # Over the size where the first answers come from the records, before the graph is made.
    graph = {"entities": [entity(f"person {n}", "person", [f"Observation {n} about tea and chess " * 4])
                          for n in range(5000)], "relations": []}
    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_text(json.dumps(graph, indent=2))
    assert memory_file.stat().st_size > 1 << 20
    before = disk(tmp_path)
    client = memory_servers.client(era, memory_file)
    refused_everywhere(client, memory_file)
    assert disk(tmp_path) == before


def test_the_advice_given_gives_the_memory(memory_servers: MemoryServers, tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    write_memory(source, GRAPH)
    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_bytes(export(source, "json"))
    message = memory_servers.client("legacy", memory_file).tool_error("read_graph", {})
    aside = tmp_path / "memory.jsonl.export.json"
    assert f"mv {memory_file} {aside}" in message and f"mcp-server-memory import {aside}" in message
    memory_file.rename(aside)
    done = cli("import", str(aside), memory=memory_file)
    assert done.returncode == 0, done.stderr
    assert memory_servers.client("modern", memory_file).graph() == GRAPH
