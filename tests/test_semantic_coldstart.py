"""Meaning at a first start: once the warm-up has loaded the graph, the first-answer source's
answers take their semantic candidates from it, before its word index is made (storage/candidates.py
F4), and that index waits for the first answer by meaning (storage/store.py G7, retrieval/semantic 9)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_semantic import model_environment  # noqa: F401  (fixture)
from test_store_cache import WAIT, entity
from write_items import entity_items

from memory_server.model import indexes
from memory_server.retrieval.search import search_nodes
from memory_server.storage import index_cache
from memory_server.storage.store import INDEX_AFTER, GraphStore, State

REPO = Path(__file__).resolve().parents[1]

CHARACTERS = 4000


def cached_memory(memory: Path) -> None:
    """A memory worth a cache, of two distinct facts (so that a search embeds them itself: no
    wait on the background), written by a store closed at once (which leaves its cache: K2)."""
    with GraphStore(memory) as store:
        store.create_entities(entity_items([entity(f"person {n} of a long list of people " * 4, "Plays the cello")
                                            for n in range(5000)] + [entity("Ann", "Has a border collie named Biscuit")]))
    assert memory.stat().st_size >= index_cache.WORTH_CACHING


def facts_of(answer: Any) -> list[str]:
    return [answer.entities[position]["observations"][index] for position, index in answer.order]


def test_f4_the_graph_gives_the_meaning_before_its_word_index_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_environment: None) -> None:
    memory = tmp_path / "memory.jsonl"
    cached_memory(memory)
    with GraphStore(memory, cache=False) as reference:
        expected = search_nodes(reference, "dog", characters=CHARACTERS)
    assert "Has a border collie named Biscuit" in facts_of(expected)  # by meaning alone: no word is shared

    loaded, release = threading.Event(), threading.Event()
    make = indexes.with_word_index

    def held(graph: Any) -> Any:
        loaded.set()  # the warm-up has published the graph, and makes its word index now
        assert release.wait(WAIT)
        return make(graph)

    monkeypatch.setattr(indexes, "with_word_index", held)
    with GraphStore(memory) as store:
        try:
            search_nodes(store, "dog", characters=CHARACTERS)  # the cache answers; the warm-up starts
            assert store.cache_answers == 1
            assert loaded.wait(WAIT)
            graph = store.graph_in_memory
            assert graph is not None and graph.words is None and store.cold_state is State.COLD
            answer = search_nodes(store, "dog", characters=CHARACTERS)
            assert store.cache_answers == 2  # still the cache's words, with the graph's meaning
            assert facts_of(answer) == facts_of(expected)
        finally:
            release.set()


def test_g7_a_first_start_s_word_index_waits_for_index_after(tmp_path: Path, model_environment: None) -> None:
    memory = tmp_path / "memory.jsonl"
    cached_memory(memory)
    asked: list[tuple[Any, float]] = []
    called = threading.Event()

    def index_after(then: Any, timeout: float) -> None:
        asked.append((then, timeout))
        called.set()

    with GraphStore(memory, index_after=index_after) as store:
        search_nodes(store, "dog", characters=CHARACTERS)  # the cache answers; the warm-up starts
        assert called.wait(WAIT)
        (then, timeout), = asked
        assert timeout == INDEX_AFTER
        graph = store.graph_in_memory
        assert graph is not None and graph.words is None and store.cold_state is State.COLD
        assert not store.poll_external_change()  # the watcher's poll leaves the index to the warm-up
        assert store.graph_in_memory is graph and graph.words is None
        answer = search_nodes(store, "dog", characters=CHARACTERS)  # the cache's words, the graph's meaning
        assert "Has a border collie named Biscuit" in facts_of(answer) and store.cache_answers == 2
        made = then()  # the index handed to a worker: its future
        assert made is not None
        made.result(WAIT)
        indexed = store.graph_in_memory
        # (and the ranking's, from the cache: the graph answers everything)
        assert indexed is not None and indexed.words is not None and indexed.terms is not None
        assert store.cold_state is State.HOT
        assert facts_of(search_nodes(store, "dog", characters=CHARACTERS)) == facts_of(answer)


def run_python(code: str, **environment: str) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMORY_SEMANTIC")}
    env.update(environment, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


FIRST_SEARCH = """
import threading
from memory_server.model import writes
from memory_server.model.graph import EMPTY
from memory_server.model.items import Entity
from memory_server.retrieval import semantic
called = []
semantic.after_first_search(lambda: called.append("first"), 600)
print(called)
graph = writes.create_entities(EMPTY, [Entity("u", "person", ["Has a border collie named Biscuit"])]).graph
print(bool(semantic.nearest(graph, "dog", 5)), called)
semantic.after_first_search(lambda: called.append("after"), 600)
print(called)
"""


def test_9_after_first_search_calls_back_once_the_first_search_by_meaning_has_its_answer() -> None:
    assert run_python(FIRST_SEARCH).splitlines() == ["[]", "True ['first']", "['first', 'after']"]
    # No search will answer by meaning: at once.
    assert run_python(FIRST_SEARCH, MEMORY_SEMANTIC="off").splitlines() == [
        "['first']", "False ['first']", "['first', 'after']"]
    # Nobody searches: after the timeout, from a worker of the Background.
    timed_out = ("import threading\nfrom memory_server.retrieval import semantic\n"
                 "called = threading.Event()\nsemantic.after_first_search(called.set, 0.0)\n"
                 "print(called.wait(60))\n")
    assert run_python(timed_out).strip() == "True"


def test_a_side_file_read_not_started_by_the_model_s_load_is_read_by_the_load_itself(tmp_path: Path) -> None:
    from memory_server.retrieval.semantic import lifecycle

    early = lifecycle._Early((tmp_path / "memory.jsonl.vectors", "memory.jsonl"), "0" * 64)
    assert early.result() is None  # every worker was busy: not waited for (the load reads the file)
    early.run()  # its turn comes after: it reads nothing
    assert early.result() is None
    started = lifecycle._Early((tmp_path / "memory.jsonl.vectors", "memory.jsonl"), "0" * 64)
    started.run()
    read = started.result()
    assert read is not None and read.held is None  # read (no file there)
    assert started.result() is read
