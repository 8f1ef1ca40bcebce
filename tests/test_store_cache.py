"""The store's life and its cache across processes: coldstart.py (S1-S3, K1-K3) and the store's
G5 (the store's own Background, ended by close)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import MemoryServers, era, memory_servers  # noqa: F401  (fixtures)
from write_items import entity_items, relation_items

from memory_server.model import graph as rules
from memory_server.model import indexes
from memory_server.model.items import ObservationsToAdd
from memory_server.model.records import decode_file
from memory_server.retrieval.search import search_nodes
from memory_server.storage import cache_build, index_cache
from memory_server.storage.interface import Until
from memory_server.storage.store import GraphStore, State

WAIT = 60.0


def entity(name: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": list(observations)}


def fresh_cache(memory: Path) -> bool:
    data = memory.read_bytes()
    return index_cache.is_current(memory, data, index_cache.digest_of(data))


def large_memory(memory: Path) -> None:
    """A memory worth a cache, written by a store closed at once (which leaves its cache: K2)."""
    with GraphStore(memory) as store:
        store.create_entities(entity_items([entity(f"person {n}", f"Observation about person {n}: enjoys tea and chess " * 3,
                                                   "Mentioned the Zephyr initiative" if n % 100 == 0 else "Plays the cello")
                                            for n in range(4500)]))
    assert memory.stat().st_size >= index_cache.WORTH_CACHING


def store_threads(memory: Path) -> list[threading.Thread]:
    """The threads of the stores of `memory` (named after its file)."""
    return [thread for thread in threading.enumerate() if thread.name.startswith(f"memory-store[{memory.name}]")]


def test_k2_a_store_closed_right_after_a_write_leaves_a_cache_that_matches_the_file(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    large_memory(memory)
    assert fresh_cache(memory)
    with GraphStore(memory) as store:
        store.add_observations([ObservationsToAdd("person 7", ["a zephyr fan"])])
        assert not index_cache.cache_path(memory).exists()  # K3: removed before the answer
    assert fresh_cache(memory)
    with GraphStore(memory) as store:
        found = search_nodes(store, "zephyr fan")
        assert store.cache_answers == 1 and store.cold_state in (State.COLD, State.WARM, State.HOT)
        assert [item["name"] for item in found["entities"]] == ["person 7"]


def test_g5_close_ends_every_thread_of_the_store(tmp_path: Path) -> None:
    memory = tmp_path / "g5-memory.jsonl"
    large_memory(memory)
    before = set(store_threads(memory))
    store = GraphStore(memory)
    store.look_ahead()
    search_nodes(store, "zephyr")  # COLD: a worker loads the graph
    store.create_entities(entity_items([entity("Quinn")]))  # a quiet wait for the cache, the comparison of a save
    assert set(store_threads(memory)) - before
    store.close()
    assert set(store_threads(memory)) - before == set()
    # Still usable, in the calling thread.
    assert store.open_nodes(["Quinn"])["entities"] == [entity("Quinn")]
    assert store.create_entities(entity_items([entity("Rae")])).changed


def test_s1_the_states_of_a_first_start(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    large_memory(memory)
    with GraphStore(memory) as store:
        assert store.cold_state is State.NEW
        looking = store.look_ahead()
        assert looking is not None and store.cold_state is State.LOOKING
        assert store.look_ahead() is None  # once
        looking.result(WAIT)
        store.open_nodes(["person 1"])
        # (the warm-up may be done already: the graph, its word index and the ranking's from the cache)
        assert store.cache_answers == 1 and store.cold_state in (State.COLD, State.WARM, State.HOT)
    cache_build.remove(memory)
    with GraphStore(memory) as store:
        # No cache: the records answer (S4) while a worker makes the graph of them.
        store.open_nodes(["person 1"])
        assert store.cache_answers == 0 and store.record_answers == 1
        assert store.cold_state in (State.COLD, State.HOT)
        assert store.wait_until(Until.HOT, WAIT), "the graph made of the records"
        assert store.cold_state is State.HOT
        assert store.graph_in_memory is not None
    memory.write_bytes(b'{"type":"entity","name":"small","entityType":"t","observations":[]}\n')
    with GraphStore(memory) as store:
        store.open_nodes(["small"])  # a small file: the graph at once
        assert store.cache_answers == store.record_answers == 0 and store.cold_state is State.HOT


def test_s1_c7_the_warm_up_takes_the_ranking_index_from_the_cache(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    large_memory(memory)
    with GraphStore(memory, cache=False) as reference:
        expected = {query: search_nodes(reference, query) for query in ("zephyr", "initiatives mentioned")}
    built = indexes.with_term_index(rules.graph_from_lines(decode_file(memory.read_bytes()))).terms
    with GraphStore(memory) as store:
        assert search_nodes(store, "zephyr") == expected["zephyr"]
        assert store.cache_answers == 1 and store.cold_state in (State.COLD, State.WARM, State.HOT)
        # The graph, its word index, and the ranking's made of the cache's postings: the graph answers all.
        assert store.wait_until(Until.HOT, WAIT), "the worker's load"
        graph = store.graph_in_memory
        assert graph is not None and graph.terms is not None and built is not None
        assert graph.terms.names == built.names and list(graph.terms.spans) == list(built.spans)
        assert graph.terms.total == built.total and graph.terms.columns == built.columns
        assert search_nodes(store, "zephyr") == expected["zephyr"]
        assert search_nodes(store, "initiatives mentioned") == expected["initiatives mentioned"]
        assert store.cache_answers == 1
        # A write keeps that index up to date, as it does one made of the texts.
        store.add_observations([ObservationsToAdd("person 7", ["an initiative of zephyr mentioned"])])
        reference_graph = rules.graph_from_lines(decode_file(memory.read_bytes()))
        written = store.graph_in_memory
        assert written is not None and written.terms is not None
        assert written.terms.postings == indexes.with_term_index(reference_graph).terms.postings  # type: ignore[union-attr]


def test_f5_once_the_graph_is_loaded_first_answers_are_made_of_its_own_objects(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    large_memory(memory)
    with GraphStore(memory) as store:  # (its close makes the cache again: K2)
        store.create_relations(relation_items([{"from": "person 100", "to": "person 200", "relationType": "knows"},
                                               {"from": "person 7", "to": "person 300", "relationType": "met"}]))
    assert fresh_cache(memory)
    with GraphStore(memory, cache=False) as reference:
        expected = {query: search_nodes(reference, query) for query in ("zephyr", "initiatives mentioned")}
    assert all(len(found["relations"]) == 2 for found in expected.values())

    def the_graphs_own(store: GraphStore, found: dict[str, Any]) -> bool:
        graph = store.graph_in_memory
        assert graph is not None
        return all(item is graph.entities[item["name"]].view for item in found["entities"]) and all(
            item is graph.relations[item["from"], item["to"], item["relationType"]].view for item in found["relations"])

    # Once the warm-up is done the graph ranks, with the index it took from the cache (C7).
    with GraphStore(memory) as store:
        search_nodes(store, "zephyr")
        assert store.wait_until(Until.HOT, WAIT), "the worker's load"
        found = search_nodes(store, "initiatives mentioned")
        assert store.cache_answers == 1
        assert found == expected["initiatives mentioned"] and found["entities"] and the_graphs_own(store, found)
    # The records answer while the graph made of them waits for its word index (store G7).
    cache_build.remove(memory)
    with GraphStore(memory, index_after=lambda then, timeout: None) as store:
        store.open_nodes(["person 1"])
        assert store.wait_until(Until.INDEXED, 0.0) is False
        for _ in range(600):
            if store.graph_in_memory is not None:
                break
            threading.Event().wait(0.05)
        found = search_nodes(store, "zephyr")
        assert store.record_answers == 2 and store.cold_state is State.COLD
        assert found == expected["zephyr"] and found["entities"] and the_graphs_own(store, found)


def test_s1_a_cache_is_let_go_when_the_file_changes(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    large_memory(memory)
    with GraphStore(memory) as reader:
        assert reader.open_nodes(["person 1"])["entities"]
        assert reader.cache_answers == 1
        with GraphStore(memory) as writer:
            writer.add_observations([ObservationsToAdd("person 1", ["changed by another"])])
        assert reader.open_nodes(["person 1"])["entities"][0]["observations"][-1] == "changed by another"
        # The cache would still rank searches by words (WARM), but not for a file that changed.
        assert "person 1" in [item["name"] for item in search_nodes(reader, "who was changed by another")["entities"]]
        assert reader.cache_answers == 1 and reader.cold_state is State.HOT


def test_c5_a_build_whose_file_was_removed_by_a_save_does_not_land(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    large_memory(memory)
    cache_build.remove(memory)
    data = memory.read_bytes()
    graph = rules.graph_from_lines(decode_file(data))
    entered = 0

    class Guard:
        def __enter__(self) -> bool:
            nonlocal entered
            entered += 1
            if entered == 2:  # the build's file is written: a save removes it before the rename
                cache_build.remove(memory)
            return True

        def __exit__(self, *exc_info: object) -> None:
            pass

    assert not cache_build.build(memory, graph, data, index_cache.digest_of(data), Guard)
    assert entered == 2
    assert [path.name for path in tmp_path.iterdir()] == ["memory.jsonl"]


def served(memory: Path, stop: str) -> None:
    """A server that makes one write and is stopped at once: by end of input, or by SIGTERM
    once the write is answered."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "add_observations",
                    "arguments": {"observations": [{"entityName": "person 3", "contents": ["closed at once"]}]}}},
    ]
    environment = {"MEMORY_FILE_PATH": str(memory), "PATH": "/usr/bin:/bin",
                   "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    process = subprocess.Popen([sys.executable, "-m", "memory_server"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment, cwd=memory.parent)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"".join(msg_line(message) for message in requests))
    process.stdin.flush()
    if stop == "end of input":
        process.stdin.close()
    else:
        while b'"id":2' not in process.stdout.readline():
            pass
        process.send_signal(signal.SIGTERM)
    assert process.wait(WAIT) == 0, process.stderr.read() if process.stderr is not None else ""
    if not process.stdin.closed:
        process.stdin.close()
    process.stdout.close()
    if process.stderr is not None:
        process.stderr.close()


def msg_line(message: dict[str, Any]) -> bytes:
    import json

    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize("stop", ["end of input", "SIGTERM"])
def test_k2_a_server_stopped_right_after_a_write_leaves_the_next_start_its_cache(tmp_path: Path, stop: str) -> None:
    memory = tmp_path / "memory.jsonl"
    large_memory(memory)
    served(memory, stop)
    assert b"closed at once" in memory.read_bytes()
    assert fresh_cache(memory)
    # Nothing of the cache's but the cache (the model's vectors, when it has embedded the memory by
    # then, are a side file of their own: retrieval/vectors.py).
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.endswith(".vectors")) == [
        "memory.jsonl", "memory.jsonl.index"]


def test_library_modules_leave_logging_to_the_command_line() -> None:
    program = ("import logging, memory_server.app, memory_server.storage.store, memory_server.tools\n"
               "assert logging.getLogger().handlers == [], logging.getLogger().handlers\n")
    subprocess.run([sys.executable, "-c", program], check=True, timeout=WAIT)
