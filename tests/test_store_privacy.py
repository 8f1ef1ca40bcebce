"""What is deleted is gone from the cache: once a write that removed something is acknowledged,
the removed text is in no file of the cache beside the memory file (storage/index_cache.py), and
a delete that takes the memory below the caching size leaves no cache at all."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from write_items import entity_items

from memory_server.model import graph as rules
from memory_server.model.items import ObservationsToAdd, ObservationsToDelete, Relation
from memory_server.model.records import decode_file
from memory_server.retrieval.search import search_nodes
from memory_server.storage import cache_build, index_cache
from memory_server.storage.store import GraphStore

SECRET = "PIN 4821-7730 for the garage"


def entity(name: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": list(observations)}


def cache_files(memory: Path) -> list[Path]:
    """Every file of the cache beside `memory`: the cache, its temporaries, journals."""
    return [path for path in memory.parent.iterdir() if path.name.startswith(memory.name + ".index")]


def holding(memory: Path, text: str) -> list[str]:
    needles = {text.encode(), text.lower().encode()}  # the cache holds search texts, in lower case
    return [path.name for path in [memory, *cache_files(memory)]
            if any(needle in path.read_bytes() for needle in needles)]


def cached_memory(memory: Path, people: int = 4500) -> None:
    """A memory large enough for a cache, with SECRET in it, and its cache made."""
    entities = [entity(f"person {n}", f"Observation about person {n}: enjoys tea and chess " * 3)
                for n in range(people)]
    entities.append(entity("Ann", SECRET, "likes tea"))
    with GraphStore(memory) as store:
        store.create_entities(entity_items(entities))
        store.create_relations([Relation("Ann", "person 1", SECRET)])
    data = memory.read_bytes()
    assert cache_build.build(memory, rules.graph_from_lines(decode_file(data)), data, index_cache.digest_of(data))
    assert holding(memory, SECRET) == [memory.name, memory.name + ".index"]


DELETES: dict[str, Callable[[GraphStore], Any]] = {
    "delete_observations": lambda store: store.delete_observations([ObservationsToDelete("Ann", [SECRET])]),
    "delete_entities": lambda store: store.delete_entities(["Ann"]),
}


@pytest.mark.parametrize("delete", DELETES)
@pytest.mark.parametrize("restart", [False, True], ids=["same store", "new store"])
def test_deleted_text_is_in_no_cache_file_once_the_delete_is_answered(tmp_path: Path, delete: str,
                                                                        restart: bool) -> None:
    memory = tmp_path / "memory.jsonl"
    cached_memory(memory)
    with GraphStore(memory) as store:
        assert search_nodes(store, "garage")["entities"][0]["name"] == "Ann"
        if delete == "delete_observations":
            # Its relation names the secret too: gone with a relation delete.
            store.delete_relations([Relation("Ann", "person 1", SECRET)])
        assert DELETES[delete](store).changed
        assert holding(memory, SECRET) == []
    if restart:
        with GraphStore(memory) as store:
            assert search_nodes(store, "garage")["entities"] == []
        assert holding(memory, SECRET) == []


def test_a_delete_below_the_caching_size_leaves_no_cache(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    cached_memory(memory)
    with GraphStore(memory) as store:
        store.delete_entities([f"person {n}" for n in range(4500)])
        assert memory.stat().st_size < index_cache.WORTH_CACHING
        assert cache_files(memory) == []
        store.add_observations([ObservationsToAdd("Ann", ["a third"])])
    with GraphStore(memory) as store:
        assert store.open_nodes(["Ann"])["entities"][0]["observations"][-1] == "a third"
    assert cache_files(memory) == []
