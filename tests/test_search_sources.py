"""retrieval/search.py's pipeline answers the same whatever gives the candidates: the same graph in
a memory file answered from its index cache (coldstart COLD), from its records (a first start
without a cache), from its graph in memory (HOT), and in PostgreSQL. Random graphs and requests,
from fixed seeds: rules 1 to 3, limits, windows given by since/until and named by the query."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import comparable, entity, relation
from postgres_helpers import database_url, memory_name  # noqa: F401  (database_url is a fixture)
from write_items import entity_items, relation_items

from memory_server.retrieval import search
from memory_server.storage import cache_build, index_cache
from memory_server.storage.postgres.store import PostgresStore
from memory_server.storage.store import GraphStore, State

SEEDS = range(8)
REQUESTS = 32
"""Requests per graph: with the four start states, about a thousand answers compared."""
STAMP = "2025-03-04T05:06:07Z"
"""When every fact was recorded (the stores' clock)."""
NOW = datetime(2025, 3, 6, 12, tzinfo=UTC)
WORDS = ["tea", "chess", "plays", "the", "jazz", "cello", "adopted", "dog", "coffee", "green", "Porto", "moved",
         "likes", "Zoë"]
NAMES = ["Ann", "Bob", "Cleo", "Dan", "Eve", "tea", "Jazz Club", "x y", "Zoë", "person 1", "Porto", "chess"]
TYPES = ["person", "place", "Tea", ""]
QUESTIONS = ["who plays chess", "what does Ann like", "which dog was adopted", "coffee or tea", "", "e", "TEA",
             "x y", "nothing matches this", "what happened last week", "what did Bob say this week",
             "chess in March 2025", "tea since 2024", "what happened"]
PADDING = "7" * (index_cache.WORTH_CACHING + 1)
"""One observation that makes the file worth a cache (and first answers from its records); no
question holds a 7."""


@pytest.fixture(autouse=True)
def _words_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # Meaning comes from the graph in memory only (a first answer has none): by words, the start
    # states must agree, and this test is about the words' pipeline.
    monkeypatch.setenv("MEMORY_SEMANTIC", "off")


def memory_of(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = rng.sample(NAMES, rng.randint(4, len(NAMES)))
    entities = [entity(name, rng.choice(TYPES),
                       [" ".join(rng.choices(WORDS, k=rng.randint(1, 4))) for _ in range(rng.randint(0, 3))])
                for name in names]
    entities.append(entity("padding", "filler", [PADDING]))
    relations = [relation(rng.choice(names), rng.choice(names), rng.choice(["knows", "likes"]))
                 for _ in range(rng.randint(0, 8))]
    return entities, relations


def requests_of(rng: random.Random, entities: list[dict[str, Any]]) -> Iterator[search.SearchRequest]:
    stamp = datetime.fromisoformat(STAMP)
    windows = [(stamp - timedelta(days=1), stamp + timedelta(days=1)), (stamp + timedelta(days=1), NOW),
               (datetime(2025, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))]
    for _ in range(REQUESTS):
        query = rng.choice([
            rng.choice(QUESTIONS), rng.choice(entities)["name"], rng.choice(WORDS),
            " ".join(rng.sample(WORDS, 2)), rng.choice(WORDS).upper()])
        yield search.SearchRequest(
            query=query, limit=rng.choice([None, None, 1, 3]), characters=rng.choice([None, 1_500, 1_500]),
            window=rng.choice([None, None, None, *windows]), now=NOW)


def asked(store: GraphStore | PostgresStore, request: search.SearchRequest) -> Any:
    with store.sources() as sources:
        return comparable(search.search(sources, request))


def first_start(path: Path, cache: bytes, request: search.SearchRequest, state: str) -> tuple[Any, GraphStore]:
    """The answer of a new process's first search, from the cache ("cache": its bytes put back, as
    a store closed before its graph was made leaves none) or the records ("records")."""
    cache_build.remove(path)
    if state == "cache":
        index_cache.cache_path(path).write_bytes(cache)
        index_cache.cache_path(path).chmod(0o600)
    store = GraphStore(path, clock=lambda: STAMP)
    try:
        answer = asked(store, request)
    finally:
        store.close()
    return answer, store


@pytest.mark.parametrize("seed", SEEDS)
def test_every_start_state_and_both_stores_answer_the_same(seed: int, database_url: str, tmp_path: Path) -> None:
    rng = random.Random(seed)
    entities, relations = memory_of(rng)
    path = tmp_path / "memory.jsonl"
    with GraphStore(path, clock=lambda: STAMP) as writer:
        writer.create_entities(entity_items(entities))
        writer.create_relations(relation_items(relations))
    cache = index_cache.cache_path(path).read_bytes()  # closed after a write: the cache is made (coldstart K2)
    with GraphStore(path, cache=False, clock=lambda: STAMP) as warm, \
            PostgresStore(database_url, memory_name(), clock=lambda: STAMP) as database:
        database.create_entities(entity_items(entities))
        database.create_relations(relation_items(relations))
        assert database.read_graph() == warm.read_graph()
        first_answers = {"cache": 0, "records": 0}
        for request in requests_of(rng, entities):
            expected = asked(warm, request)
            assert asked(database, request) == expected, request
            for state in first_answers:
                answer, store = first_start(path, cache, request, state)
                assert answer == expected, (state, request)
                other = store.record_answers if state == "cache" else store.cache_answers
                assert other == 0, (state, request)  # the start state asked for
                first_answers[state] += store.cache_answers + store.record_answers
        assert warm.cold_state is State.HOT
    # Each first-answer source gave answers of its own (the others were the graph's, as they decline).
    assert first_answers["cache"] > 0 and first_answers["records"] > 0, first_answers
