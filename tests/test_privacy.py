"""What is deleted is gone (issue 20 §1), as a person would check it: real servers over real pipes,
then every file in the memory's directory searched for the deleted text. For each kind of delete
(observation, entity, relation), a small memory and one above the cache's threshold (1 MB, with its
cache made and proven to hold the text first), with and without a restart after the delete."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import (
    MemoryClient,
    MemoryServers,
    entity,
    entity_record,
    memory_servers,  # noqa: F401  (a fixture)
    record_line,
    relation,
    relation_record,
    write_reference_file,
)

from memory_server.storage.index_cache import WORTH_CACHING, cache_path
from memory_server.storage.store import GraphStore

SECRET_OBSERVATION = "PIN 4711-0815 opens the garage"
SECRET_NAME = "Zorblax Quennington"
SECRET_ADDRESS = "lives at 12 Hidden Lane"
SECRET_RELATION = "secretly-dating"

DELETES: dict[str, tuple[Callable[[MemoryClient], Any], tuple[str, ...]]] = {
    "observation": (lambda client: client.ok("delete_observations", {"deletions": [
        {"entityName": "Ann", "observations": [SECRET_OBSERVATION]}]}), (SECRET_OBSERVATION,)),
    "entity": (lambda client: client.ok("delete_entities", {"entityNames": [SECRET_NAME]}),
               (SECRET_NAME, SECRET_ADDRESS)),
    "relation": (lambda client: client.ok("delete_relations", {"relations": [
        relation("Ann", "Bob", SECRET_RELATION)]}), (SECRET_RELATION,)),
}


def memory_with_secrets(memory: Path, large: bool) -> None:
    lines = [record_line(entity_record(entity("Ann", "person", [SECRET_OBSERVATION, "likes tea"]))),
             record_line(entity_record(entity("Bob", "person", ["plays chess"]))),
             record_line(entity_record(entity(SECRET_NAME, "person", [SECRET_ADDRESS])))]
    if large:
        lines += [record_line(entity_record(entity(f"person {n:05d}", "person",
                                                   [f"observation about person {n}: enjoys tea and chess " * 3])))
                  for n in range(6000)]
    lines += [record_line(relation_record(relation("Ann", "Bob", SECRET_RELATION))),
              record_line(relation_record(relation(SECRET_NAME, "Bob", "knows"))),
              record_line(relation_record(relation("Bob", "Ann", "knows")))]
    write_reference_file(memory, lines)
    assert (memory.stat().st_size >= WORTH_CACHING) == large


def files_holding(directory: Path, texts: tuple[str, ...]) -> list[str]:
    """Every file under `directory` whose bytes hold one of `texts` (as written or in lower case:
    search indexes keep folded text)."""
    needles = {variant.encode() for text in texts for variant in (text, text.lower(), text.casefold())}
    found = []
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(needle in data for needle in needles):
                found.append(str(path.relative_to(directory)))
    return found


def make_cache(memory: Path) -> None:
    """The cache beside a memory above 1 MB, made as a server makes it: by a store that read the
    memory, when it closes (coldstart K2; `cache=False`: the graph is read at once, not while the
    records answer). It holds where each line lies and the entities' search texts, so the secrets too."""
    with GraphStore(memory, cache=False) as store:
        store.read_graph()
    assert cache_path(memory).exists(), "no cache beside a memory above 1 MB"


@pytest.mark.parametrize("restart", [False, True], ids=["same server", "after a restart"])
@pytest.mark.parametrize("large", [False, True], ids=["small memory", "large memory"])
@pytest.mark.parametrize("kind", DELETES)
def test_deleted_text_is_in_no_file_beside_the_memory(memory_servers: MemoryServers, tmp_path: Path,
                                                      kind: str, large: bool, restart: bool) -> None:
    home = tmp_path / "home"
    home.mkdir()
    memory = home / "memory.jsonl"
    memory_with_secrets(memory, large)
    delete, secrets = DELETES[kind]
    if large:
        make_cache(memory)  # the server answers from it first: the delete must leave no trace of them in it either
        # (A relation's type is no search text: the cache holds only where its line lies.)
        assert ("memory.jsonl.index" in files_holding(home, secrets)) is (kind != "relation")
    client = memory_servers.client("legacy", memory)
    assert client.ok("open_nodes", {"names": ["Ann"]})["entities"]
    delete(client)
    # Acknowledged: from now on the text is in no file, not even for a moment after.
    assert files_holding(home, secrets) == []
    if restart:
        client.process.finish()
        client = memory_servers.client("legacy", memory)
        assert client.ok("open_nodes", {"names": ["Ann"]})["entities"]
        assert files_holding(home, secrets) == []
    graph = client.graph()
    assert not any(text in repr(graph) for text in secrets)
    client.process.finish()
    assert files_holding(home, secrets) == []
    # Nothing of ours but the memory file and, beside a large one, its cache, and the model's vectors
    # (which hold no deleted fact's vector: retrieval/vectors.py, tested in tests/test_vectors.py).
    side_files = {"memory.jsonl.index", "memory.jsonl.vectors"}
    assert sorted(path.name for path in home.iterdir() if path.name not in side_files) == ["memory.jsonl"]
