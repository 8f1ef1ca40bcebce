"""Meaning at a first start (storage/candidates.py F4): once the warm-up has loaded the graph,
the first-answer source's answers take their semantic candidates from it, before its word index
is made, and they are the graph's own answers."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from test_semantic import model_environment  # noqa: F401  (fixture)
from test_store_cache import WAIT, entity

from memory_server.model import indexes
from memory_server.retrieval.search import search_nodes
from memory_server.storage import index_cache
from memory_server.storage.store import GraphStore, State

CHARACTERS = 4000


def cached_memory(memory: Path) -> None:
    """A memory worth a cache, of two distinct facts (so that a search embeds them itself: no
    wait on the background), written by a store closed at once (which leaves its cache: K2)."""
    with GraphStore(memory) as store:
        store.create_entities([entity(f"person {n} of a long list of people " * 4, "Plays the cello")
                               for n in range(5000)] + [entity("Ann", "Has a border collie named Biscuit")])
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
