"""A memory file whose folders are missing: nothing is created until a write can succeed. A read,
a write that breaks a rule or changes nothing, and a write whose folders cannot all be made
leave the disk as it was; the first write that changes the memory makes the folders (private)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    MemoryServers,
    entity,
    era,
    memory_servers,
    relation,
    undated,
)
from write_items import entity_items

from memory_server.model.items import ObservationsToAdd
from memory_server.storage.files import create_private_directories
from memory_server.storage.store import GraphError, GraphStore

pytestmark = pytest.mark.file_store


def everything_under(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def test_reads_and_writes_that_cannot_succeed_create_no_folder(memory_servers: MemoryServers, era: str,
                                                              tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    memory_file = home / "new" / "deeper" / "memory.jsonl"
    client = memory_servers.client(era, memory_file)
    assert undated(client.graph()) == {"entities": [], "relations": []}
    assert client.ok("search_nodes", {"query": "tea"}) == {"entities": [], "relations": []}
    assert "Nobody" in client.tool_error("add_observations", {"observations": [
        {"entityName": "Nobody", "contents": ["likes tea"]}]})
    assert client.tool_error("create_entities", {"entities": [{**entity("Ann"), "happenedOn": "someday"}]})
    client.ok("delete_entities", {"entityNames": ["Nobody"]})
    client.ok("delete_relations", {"relations": [relation("Ann", "Bo", "knows")]})
    client.ok("delete_observations", {"deletions": [{"entityName": "Nobody", "observations": ["x"]}]})
    assert everything_under(home) == [], "nothing made"
    # The first write that changes the memory makes the folders, private.
    client.ok("create_entities", {"entities": [entity("Ann", "person", ["likes tea"])]})
    assert everything_under(home) == ["new", "new/deeper", "new/deeper/memory.jsonl"]
    assert stat.S_IMODE(os.stat(home / "new").st_mode) == stat.S_IMODE(os.stat(memory_file.parent).st_mode) == 0o700
    assert undated(client.graph())["entities"] == [entity("Ann", "person", ["likes tea"])]


def test_a_write_whose_folders_cannot_all_be_made_leaves_none_behind(memory_servers: MemoryServers, era: str,
                                                                    tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    too_long = "x" * (os.pathconf(home, "PC_NAME_MAX") + 1)
    memory_file = home / "new" / too_long / "memory.jsonl"
    client = memory_servers.client(era, memory_file)
    message = client.tool_error("create_entities", {"entities": [entity("Ann", "person", ["likes tea"])]})
    assert "Cannot create the directory" in message and "Nothing was changed" in message
    assert everything_under(home) == [], "the folder made before the one that failed is gone again"
    assert undated(client.graph()) == {"entities": [], "relations": []}


def test_the_store_makes_folders_only_for_a_write_that_changes_the_memory(tmp_path: Path) -> None:
    memory_file = tmp_path / "a" / "b" / "memory.jsonl"
    store = GraphStore(memory_file)
    with pytest.raises(GraphError):
        store.add_observations([ObservationsToAdd("Nobody", ["x"])])
    assert not store.delete_entities(["Nobody"]).changed
    assert everything_under(tmp_path) == []
    assert store.create_entities(entity_items([entity("Ann")])).changed
    assert everything_under(tmp_path) == ["a", "a/b", "a/b/memory.jsonl"]


def test_directories_made_are_removed_when_a_deeper_one_fails(tmp_path: Path) -> None:
    target = tmp_path / "one" / "two" / ("x" * (os.pathconf(tmp_path, "PC_NAME_MAX") + 1))
    with pytest.raises(OSError):
        create_private_directories(target)
    assert everything_under(tmp_path) == []
    (tmp_path / "kept").mkdir()
    assert create_private_directories(tmp_path / "kept" / "new" / "er") == [tmp_path / "kept" / "new",
                                                                         tmp_path / "kept" / "new" / "er"]
