"""The on-disk index cache: answers equal to the graph's, used only for the bytes it was made of,
rebuilt whatever happens to it, private, and never needed."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from memory_helpers import MemoryServers, era, memory_servers  # noqa: F401  (fixtures)
from write_items import entity_items

from memory_server.model import graph as rules
from memory_server.model import writes
from memory_server.model.graph import EMPTY
from memory_server.model.items import ObservationsToAdd, Relation
from memory_server.model.records import decode_file, join_lines
from memory_server.retrieval import query as retrieval
from memory_server.retrieval import search
from memory_server.retrieval.paging.budget import DEFAULT_BUDGET
from memory_server.retrieval.paging.cursors import request_key
from memory_server.retrieval.paging.pager import Pager
from memory_server.retrieval.paging.pages import Page
from memory_server.retrieval.search import search_nodes
from memory_server.storage import cache_build, index_cache
from memory_server.storage import store as store_module
from memory_server.storage.interface import Until
from memory_server.storage.store import GraphStore, NotInMemory

WAIT = 60.0



def asked(store: GraphStore, tool: str) -> Any:
    """The store's read of this tool (a search through retrieval's pipeline, the others the store's own)."""
    if tool == "search_nodes":
        return lambda *arguments: search_nodes(store, *arguments)
    return getattr(store, tool)

def entity(name: str, entity_type: str = "person", *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": entity_type, "observations": list(observations)}


def cached_file(folder: Path, graph: Any) -> tuple[Path, bytes]:
    """The graph written to a memory file in `folder`, and its index cache built from it."""
    memory = folder / "memory.jsonl"
    content = join_lines(rules.file_lines(graph))
    memory.write_bytes(content)
    assert cache_build.build(memory, graph, content, index_cache.digest_of(content))
    return memory, content


def fresh_cache(memory: Path) -> bool:
    """The cache beside `memory` matches the file's bytes now."""
    data = memory.read_bytes()
    return index_cache.is_current(memory, data, index_cache.digest_of(data))


class CacheAlone:
    """The cache as a search's only candidate source (retrieval/search.py's rules run on it)."""

    def __init__(self, cold: index_cache.ColdIndex) -> None:
        self.containing, self.holding = cold.containing, cold.holding

    def answered(self) -> None:
        pass


def cold_search(cold: index_cache.ColdIndex, query: str, limit: int | None) -> dict[str, Any] | None:
    """search_nodes from the cache by the one pipeline; None for a query only the graph answers."""
    found = search.search([CacheAlone(cold)], search.SearchRequest(query=query, limit=limit))  # type: ignore[list-item]
    assert found is None or isinstance(found, dict)
    return found


# -- cold answers equal warm answers ------------------------------------------------------------

WORDS = ["tea", "Teas", "adopted", "adoption", "the", "café", "北京", "dog", "x\x00y", "Zoë", "chess"]
text = st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join)
items = st.lists(st.fixed_dictionaries({"name": st.sampled_from(["Ann", "Bob", "tea", "Dé", "e", "x\x00y", "n"]),
                                        "entityType": st.sampled_from(["person", "Tea", ""]),
                                        "observations": st.lists(text, max_size=3)}), max_size=7)
queries = st.one_of(text, st.sampled_from(WORDS), st.text(alphabet="aeté北京 \x00", max_size=3))


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(items, st.data())
def test_answers_from_the_cache_equal_answers_from_the_graph(tmp_path: Path, entities: list[dict[str, Any]],
                                                            data: st.DataObject) -> None:
    graph = writes.create_entities(EMPTY, entity_items(entities)).graph
    names = list(graph.entities)
    if names:
        pairs = data.draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(names)), max_size=4))
        graph = writes.create_relations(graph, [Relation(a, b, "r") for a, b in pairs]).graph
        graph = writes.delete_entities(graph, data.draw(st.lists(st.sampled_from(names), max_size=1))).graph
    # Made from the graph as a store holds it after writes, read back against the file's bytes.
    memory, content = cached_file(tmp_path, graph)
    cold = index_cache.ColdIndex.open(memory, content, index_cache.digest_of(content))
    assert cold is not None
    try:
        loaded = rules.graph_from_lines(decode_file(content))
        assert cold.read_graph() == rules.read_graph(loaded)
        wanted = data.draw(st.lists(st.sampled_from([*names, "nobody"]), max_size=4))
        opened = cold.open_nodes(wanted)
        if opened is not None:
            assert opened == rules.open_nodes(loaded, wanted)
        else:
            assert b"\\u" in content  # a name the cache lacks may be spelled with escapes: the graph answers
        for query in data.draw(st.lists(queries, min_size=1, max_size=4)):
            for limit in (None, 1, 3):
                answer = cold_search(cold, query, limit)
                if answer is None:
                    assert "\x00" in query  # the one kind of query left to the graph
                else:
                    assert answer == retrieval.matches(loaded, query, limit), (query, limit)
    finally:
        cold.close()


def test_a_cache_is_only_used_for_the_bytes_it_was_made_of(tmp_path: Path) -> None:
    graph = writes.create_entities(EMPTY, entity_items([entity("Ann", "person", "likes tea")])).graph
    memory, content = cached_file(tmp_path, graph)
    assert index_cache.ColdIndex.open(memory, content + b"\n", index_cache.digest_of(content + b"\n")) is None
    assert index_cache.cache_path(memory).stat().st_mode & 0o777 == 0o600
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl", "memory.jsonl.index"]


# -- the store and its cache --------------------------------------------------------------------


def big_memory(memory: Path) -> list[dict[str, Any]]:
    """A memory file large enough to be worth a cache, written by a store."""
    entities = [entity(f"person {n}", "person", f"Observation about person {n}: enjoys tea and chess " * 3,
                       "Mentioned the Zephyr initiative" if n % 100 == 0 else "Plays the cello")
                for n in range(4500)]
    store = GraphStore(memory, lock_timeout=WAIT)
    store.create_entities(entity_items(entities))
    assert memory.stat().st_size >= index_cache.WORTH_CACHING
    assert store.wait_until(Until.CACHED, WAIT), "the cache of a new memory"
    assert fresh_cache(memory)
    return entities


ASKED: list[tuple[str, Any]] = [
    ("search_nodes", "zephyr"),
    ("search_nodes", "Who plays the cello, person 7?"),
    ("open_nodes", ["person 1", "person 4499", "nobody"]),
    ("read_graph", None),
]


def answers(store: GraphStore) -> list[dict[str, Any]]:
    return [asked(store, tool)(*([] if argument is None else [argument])) for tool, argument in ASKED]


def warm_answers(memory: Path) -> list[dict[str, Any]]:
    """The answers of the graph itself, after the store has loaded it (its cache then unused)."""
    with GraphStore(memory, cache=False) as store:
        return answers(store)


def test_a_new_store_answers_from_a_matching_cache_exactly_as_from_the_file(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    cold = GraphStore(memory)
    first = search_nodes(cold, "zephyr")
    assert cold.cache_answers == 1, "the cache matched the file and answered"
    assert [item["name"] for item in first["entities"]][:2] == ["person 0", "person 100"]
    assert [first, *answers(cold)[1:]] == warm_answers(memory)
    # Loaded meanwhile; until its ranking index is made, the cache still ranks searches by words.
    assert cold.wait_until(Until.WARM, WAIT), "the graph loaded off the request path"
    assert answers(cold) == warm_answers(memory)


@pytest.mark.parametrize("damage", ["delete", "truncate", "corrupt", "empty"])
def test_a_damaged_cache_is_not_used_and_is_rebuilt(tmp_path: Path, damage: str) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    expected = warm_answers(memory)
    cache = index_cache.cache_path(memory)
    if damage == "delete":
        cache.unlink()
    elif damage == "truncate":
        with cache.open("r+b") as file:
            file.truncate(cache.stat().st_size // 2)
    elif damage == "corrupt":
        with cache.open("r+b") as file:
            file.seek(4096)
            file.write(os.urandom(65536))
    else:
        cache.write_bytes(b"")
    store = GraphStore(memory)
    assert answers(store) == expected
    assert store.wait_until(Until.CACHED, WAIT) and fresh_cache(memory), "the rebuilt cache"
    assert answers(GraphStore(memory)) == expected
    assert cache.stat().st_mode & 0o777 == 0o600


def test_a_cache_made_stale_by_another_process_is_not_used_and_is_rebuilt(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    writer = ("import sys; from memory_server.model.items import ObservationsToAdd; "
              "from memory_server.storage.store import GraphStore; "
              "GraphStore(sys.argv[1]).add_observations([ObservationsToAdd('person 7', ['zephyr fan'])])")
    subprocess.run([sys.executable, "-c", writer, str(memory)], check=True, timeout=WAIT)
    store = GraphStore(memory)
    found = search_nodes(store, "zephyr")
    assert "person 7" in [item["name"] for item in found["entities"]]
    assert [found, *answers(store)[1:]] == warm_answers(memory)
    assert store.wait_until(Until.CACHED, WAIT) and fresh_cache(memory), "the cache of the changed file"


def test_a_rewrite_that_keeps_size_inode_and_time_is_caught_by_content(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    before = os.stat(memory)
    content = memory.read_bytes()
    # A plain writer (no server, no lock) changes one letter in place and puts the time back.
    changed = content.replace(b"Plays the cello", b"Plays the cellO", 1)
    assert len(changed) == len(content) and changed != content
    with memory.open("r+b") as file:
        file.write(changed)
    os.utime(memory, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(memory)
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (before.st_size, before.st_ino, before.st_mtime_ns)
    store = GraphStore(memory)
    assert answers(store) == warm_answers(memory)
    assert search_nodes(store, "cellO")["entities"][0]["observations"][1] == "Plays the cellO"
    assert store.wait_until(Until.CACHED, WAIT) and fresh_cache(memory), "the cache of the rewritten file"


def test_writes_keep_the_cache_up_to_date_and_answers_follow_the_file(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    store = GraphStore(memory)
    assert search_nodes(store, "zephyr")["entities"]
    store.create_entities(entity_items([entity("Quinn", "person", "Zephyr initiative lead")]))
    assert search_nodes(store, "Quinn")["entities"] == [entity("Quinn", "person", "Zephyr initiative lead")]
    assert store.wait_until(Until.CACHED, WAIT) and fresh_cache(memory), "the cache after a write"
    assert answers(GraphStore(memory)) == warm_answers(memory)


def test_a_server_started_on_a_cached_memory_answers_as_the_file_says(memory_servers: MemoryServers, era: str,
                                                                      tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    expected = warm_answers(memory)
    client = memory_servers.client(era, memory)
    # Small answers only: a long one may come in pages (a search page is a glance unless told otherwise).
    assert client.ok("search_nodes", {"query": "zephyr", "characters": 80_000}) == expected[0]
    assert client.ok("open_nodes", {"names": ["person 1", "person 4499", "nobody"]}) == expected[2]
    client.ok("add_observations", {"observations": [{"entityName": "person 1", "contents": ["zephyr too"]}]})
    assert "person 1" in [item["name"] for item in client.ok("search_nodes", {"query": "zephyr"})["entities"]]


def looked_ahead(memory: Path) -> GraphStore:
    """A store that has looked at its cache and file ahead of its first read, as a server does at start."""
    store = GraphStore(memory)
    looking = store.look_ahead()
    assert looking is not None
    looking.result(WAIT)
    return store


def test_a_look_ahead_at_a_cached_memory_gives_the_caches_answers(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    store = looked_ahead(memory)
    first = search_nodes(store, "zephyr")
    assert store.cache_answers == 1, "the cache matched the bytes read ahead and answered"
    assert [first, *answers(store)[1:]] == warm_answers(memory)


def test_a_write_after_the_look_ahead_is_in_the_first_answer(tmp_path: Path) -> None:
    # Bytes read ahead are used only while the file's stat signature is theirs.
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    store = looked_ahead(memory)
    GraphStore(memory).add_observations([ObservationsToAdd("person 7", ["zephyr fan"])])
    found = search_nodes(store, "zephyr")
    assert "person 7" in [item["name"] for item in found["entities"]]
    assert [found, *answers(store)[1:]] == warm_answers(memory)


@pytest.mark.parametrize("present", [True, False])
def test_a_look_ahead_without_a_cache_loads_from_what_it_read(tmp_path: Path, present: bool) -> None:
    memory = tmp_path / "memory.jsonl"
    if present:
        big_memory(memory)
        index_cache.cache_path(memory).unlink()
    store = looked_ahead(memory)
    assert answers(store) == warm_answers(memory)
    assert store.cache_answers == 0
    assert memory.exists() is present  # a missing file stays missing: reading creates nothing


def test_read_graph_pages_from_the_cache_equal_the_graphs(tmp_path: Path) -> None:
    # The first read_graph of a new process: the cache gives each object's JSON unparsed and the
    # summary counted when it was made; every page must be what the graph itself gives.
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    writer = GraphStore(memory)
    writer.create_relations([Relation("person 3", f"person {n}", "knows") for n in range(10, 40)])
    assert writer.wait_until(Until.CACHED, WAIT) and fresh_cache(memory), "the cache after a write"
    cold_store = GraphStore(memory)
    cold = cold_store.read_graph_for_pages()
    assert cold_store.cache_answers == 1 and isinstance(cold["entities"][0], msgspec.Raw)
    assert cold["entities"].summarise(DEFAULT_BUDGET)["mostConnected"][0] == {"name": "person 3", "relations": 30}
    warm_store = GraphStore(memory, cache=False)
    warm = warm_store.read_graph_for_pages()
    assert not isinstance(warm["entities"][0], msgspec.Raw)

    def pages(value: dict[str, Any]) -> list[Page]:
        pager, request = Pager(DEFAULT_BUDGET, key=b"k" * 32), request_key("read_graph", {})
        found = [pager.first_page("read_graph", request, value["entities"], value["relations"],
                                  summarise_graph=True)]
        while (cursor := msgspec.json.decode(found[-1].json).get("nextCursor")) is not None:
            found.append(pager.next_page(cursor, "read_graph", request))
        return found

    cold_pages = pages(cold)
    assert len(cold_pages) > 10 and cold_pages == pages(warm)


def refusing(found: Any) -> Any:
    """An in-memory search's answer, NotInMemory when no source could give it (as the tools take it)."""
    if found is None:
        raise NotInMemory
    return found


def test_reads_in_memory_only_are_refused_until_the_graph_and_its_index_match_the_file(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    store = GraphStore(memory)
    reads: list[Callable[[bool], dict[str, Any]]] = [
        lambda in_memory: refusing(search_nodes(store, "zephyr", in_memory=in_memory)),
        lambda in_memory: store.open_nodes(["person 1", "nobody"], in_memory=in_memory),
        lambda in_memory: store.read_graph_for_pages(in_memory=in_memory)]

    def refused(read: Callable[[bool], dict[str, Any]]) -> bool:
        try:
            read(True)
        except NotInMemory:
            return True
        return False

    assert all(map(refused, reads)), "nothing loaded yet: a read would open the cache or the file"
    search_nodes(store, "zephyr")  # the cache answers; the graph and its word index are made meanwhile
    assert store.wait_until(Until.INDEXED, WAIT), "the graph and its word index, made off the request path"
    assert not refused(reads[0])
    assert [read(True) for read in reads] == [read(False) for read in reads]
    GraphStore(memory).add_observations([ObservationsToAdd("person 7", ["zephyr fan"])])
    assert all(map(refused, reads)), "another process wrote the file: the next read loads it"
    assert "person 7" in [item["name"] for item in search_nodes(store, "zephyr")["entities"]]


def test_a_search_by_words_in_memory_only_waits_for_the_rankings_index(tmp_path: Path) -> None:
    # A small memory (no cache, no ranking index made when quiet): the first search by words makes it.
    memory = tmp_path / "memory.jsonl"
    store = GraphStore(memory)
    store.create_entities(entity_items([entity("Ann", "person", "plays the cello"), entity("Bob", "person", "likes tea")]))
    store.poll_external_change()  # makes the word index, as the watcher does
    assert search_nodes(store, "cello", in_memory=True)["entities"][0]["name"] == "Ann"
    assert search_nodes(store, "who plays cello", in_memory=True) is None  # (no source answers in memory)
    by_words = search_nodes(store, "who plays cello")
    assert search_nodes(store, "who plays cello", in_memory=True) == by_words


def test_a_large_graph_is_searched_and_read_by_a_worker_and_opened_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = tmp_path / "memory.jsonl"
    store = GraphStore(memory)
    store.create_entities(entity_items([entity("Ann", "person", "plays the cello"), entity("Bob", "person", "likes tea")]))
    store.poll_external_change()  # makes the word index, as the watcher does
    monkeypatch.setattr(store_module, "INLINE_ITEMS", 1)
    assert search_nodes(store, "cello", in_memory=True) is None
    with pytest.raises(NotInMemory):
        store.read_graph_for_pages(in_memory=True)
    assert store.open_nodes(["Ann"], in_memory=True) == store.open_nodes(["Ann"])
    monkeypatch.setattr(store_module, "INLINE_ITEMS", 2)
    assert search_nodes(store, "cello", in_memory=True) == search_nodes(store, "cello")


# -- the cache is never the source of truth (index_cache C2, C3) -----------------------------------


def tamper(memory: Path, change: Callable[[sqlite3.Connection], None], *, keep_mac: bool = False) -> None:
    """Changes the cache beside `memory` in place; `keep_mac`: and signs it again, as one who can
    read the memory file could, so that only C3 (answers checked against the file) stands."""
    with closing(sqlite3.connect(index_cache.cache_path(memory), isolation_level=None)) as db:
        change(db)
        if keep_mac:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            parts = {name: bytes(blob) for name, blob in db.execute("SELECT name, data FROM parts")}
            for name, blob in parts.items():
                meta[f"mac:{name}"] = index_cache._part_digest(meta["digest"], name, blob)
                db.execute("UPDATE meta SET value = ? WHERE key = ?", (meta[f"mac:{name}"], f"mac:{name}"))
            db.execute("UPDATE meta SET value = ? WHERE key = 'mac'", (index_cache._keyed_digest(meta["digest"], meta),))


def renamed_part(db: sqlite3.Connection, old: str, new: str) -> None:
    (names,) = db.execute("SELECT data FROM parts WHERE name = 'names'").fetchone()
    db.execute("UPDATE parts SET data = ? WHERE name = 'names'",
               (msgspec.json.encode([new if name == old else name for name in msgspec.json.decode(names)]),))


FORGED = 'x"}]}}\n{"jsonrpc":"2.0","id":1,"result":{"forged":true}}'


@pytest.mark.parametrize("how", ["one row", "bytes in place", "crafted row, signed again"])
def test_a_changed_cache_is_detected_not_used_and_rebuilt(tmp_path: Path, how: str) -> None:
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    expected = warm_answers(memory)
    cache = index_cache.cache_path(memory)
    if how == "one row":
        tamper(memory, lambda db: renamed_part(db, "person 1", "person one"))
    elif how == "bytes in place":
        # One observation's search text changed where it lies, file size and all.
        content = cache.read_bytes()
        at = content.index(b"plays the cello")
        with cache.open("r+b") as file:
            file.seek(at)
            file.write(b"plays the viola")
    else:
        tamper(memory, lambda db: renamed_part(db, "person 1", FORGED), keep_mac=True)
    assert not fresh_cache(memory) or how == "crafted row, signed again"
    store = GraphStore(memory)
    assert answers(store) == expected
    assert search_nodes(store, "viola")["entities"] == []
    assert store.open_nodes([FORGED])["entities"] == []
    assert store.wait_until(Until.CACHED, WAIT), "the rebuilt cache"
    assert fresh_cache(memory) and FORGED.encode() not in cache.read_bytes()
    assert answers(GraphStore(memory)) == expected


def test_a_crafted_cache_cannot_break_the_json_of_a_served_read_graph(memory_servers: MemoryServers, era: str,
                                                                      tmp_path: Path) -> None:
    """A row crafted to end the answer early and add a response line of its own, signed again:
    the server still sends one well-formed response, from the file."""
    memory = tmp_path / "memory.jsonl"
    big_memory(memory)
    expected = warm_answers(memory)
    tamper(memory, lambda db: renamed_part(db, "person 1", FORGED), keep_mac=True)
    client = memory_servers.client(era, memory)
    assert client.ok("open_nodes", {"names": ["person 1", "person 4499", "nobody"]}) == expected[2]
    first = client.ok("read_graph", {})
    assert FORGED not in msgspec.json.encode(first).decode()
    assert first["entities"][:3] == expected[3]["entities"][:3]


def test_the_cache_ranks_as_the_graph_and_checks_the_loaded_graphs_places(tmp_path: Path) -> None:
    """The cache's postings, made from a ranking index kept up to date by writes (its ordinals no
    longer the entities' places), rank as the graph does; a loaded graph whose entities are not at
    the cache's places fails the check (C3)."""
    from memory_server.index import ranking
    from memory_server.model import indexes

    graph = indexes.with_term_index(writes.create_entities(EMPTY, entity_items(
        [entity(f"e{n}", "pet" if n % 2 else "person", f"dogs {n}", "a park walk" * (n % 3)) for n in range(8)])).graph)
    graph = writes.delete_entities(graph, ["e0", "e3"]).graph
    graph = writes.create_entities(graph, entity_items([entity("e9", "pet", "adopted dogs")])).graph
    graph = writes.add_observations(graph, [ObservationsToAdd("e1", ["the park"])]).graph
    assert graph.terms is not None and list(graph.terms.names) != list(graph.entities)  # (ordinals kept from before)
    memory, content = cached_file(tmp_path, graph)
    cold = index_cache.ColdIndex.open(memory, content, index_cache.digest_of(content))
    assert cold is not None
    try:
        loaded = rules.graph_from_lines(decode_file(content))
        for query in ("dogs park", "adopted pet", "walk", "nothing here"):
            found = cold.holding(query, loaded)
            assert found.terms is not None
            assert ranking.rank(found.terms, query) == ranking.rank(indexes.with_term_index(loaded).terms, query)  # type: ignore[arg-type]
        other = writes.create_entities(EMPTY, entity_items([entity(name) for name in reversed(list(loaded.entities))])).graph
        cold._placed = None
        with pytest.raises(index_cache.CacheMismatch):
            cold.holding("dogs", other)
        # C7: the loaded graph's ranking index, taken from the postings, is the one made of its texts.
        taken, built = cold.term_index(loaded), indexes.with_term_index(loaded).terms
        assert built is not None
        assert taken.names == built.names and list(taken.spans) == list(built.spans)
        assert taken.total == built.total and taken.columns == built.columns
        with pytest.raises(index_cache.CacheMismatch):
            cold.term_index(other)
    finally:
        cold.close()


def test_c7_a_cache_made_under_other_term_rules_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_server.index import ranking

    graph = writes.create_entities(EMPTY, entity_items([entity("Ann", "person", "adopted a dog")])).graph
    memory, content = cached_file(tmp_path, graph)
    digest = index_cache.digest_of(content)
    cold = index_cache.ColdIndex.open(memory, content, digest)
    assert cold is not None
    cold.close()
    monkeypatch.setattr(ranking, "rules_digest", lambda: "the rules of another version")
    assert index_cache.ColdIndex.open(memory, content, digest) is None
