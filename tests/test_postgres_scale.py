"""The database answers without a replica (memory_server/storage/postgres/, P1-P12): the same
answers as a file for random graphs, writes and queries; the search's candidates a superset of
its matches whatever the names hold; the memory's counts exact after every write; a memory with
no pg_trgm; a version 1 database upgraded in place with every row kept."""

from __future__ import annotations

import datetime
import random
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import WAIT_SECONDS, Deadline
from memory_helpers import comparable, entity, relation
from postgres_helpers import database_url, memory_name, private_database  # noqa: F401  (fixtures)
from write_items import entity_items, relation_items

from memory_server.index import ranking
from memory_server.model import graph as rules
from memory_server.model.items import Entity, ObservationsToAdd, ObservationsToDelete, Relation
from memory_server.model.records import EntityRecord
from memory_server.retrieval.search import search_nodes, search_within
from memory_server.storage.postgres.schema import SCHEMA_TERMS, SCHEMA_VERSION
from memory_server.storage.postgres.statements import haystack_of, like_pattern
from memory_server.storage.postgres.store import PostgresStore
from memory_server.storage.store import GraphStore

# Characters a LIKE pattern, a regular expression or a C string would take for something else.
TRICKY = ["%", "_", "\\", "\x00", ".*", "(a|b)", "[x]", "'", "\"", "$1", "^"]
WORDS = ["jazz", "chess", "coffee", "tea", "border", "collie", "portuguese", "running", "runs", "café", "Café",
         "project", "deadline", "日本語", "the", "what", "kind", *TRICKY]


@pytest.fixture
def on_file(tmp_path: Path) -> Iterator[GraphStore]:
    with GraphStore(tmp_path / "memory.jsonl") as store:
        yield store


def _graph(store: GraphStore) -> rules.Graph:
    store.read_graph()  # loaded, if it was not
    graph = store.graph_in_memory
    assert graph is not None
    return graph


@pytest.fixture(autouse=True)
def _words_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # Words alone: meaning on the database (P11) is compared with a file's in tests/test_postgres_meaning.py.
    monkeypatch.setenv("MEMORY_SEMANTIC", "off")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _name(rng: random.Random, index: int) -> str:
    return f"{rng.choice(['Ann', 'Bo', 'Cy', 'x'])}{rng.choice(['', *TRICKY])}{index}"


def _operations(rng: random.Random, names: list[str]) -> Iterator[tuple[str, Any]]:
    """A random stream of writes (some of which break a rule or change nothing)."""
    for step in range(40):
        kind = rng.choice(["create", "create", "relate", "observe", "forget", "unrelate", "delete"])
        if kind == "create" or not names:
            made = [_name(rng, len(names) + offset) for offset in range(rng.randint(1, 4))]
            names.extend(made)
            yield "create_entities", [Entity(name, rng.choice(["person", "project", "p%_"]),
                                             [_text(rng, rng.randint(1, 6)) for _ in range(rng.randint(0, 3))])
                                      for name in [*made, rng.choice(names)]]
        elif kind == "relate":
            yield "create_relations", [Relation(rng.choice(names), rng.choice(names), rng.choice(["knows", "a_b", "%"]))
                                       for _ in range(rng.randint(1, 3))]
        elif kind == "observe":
            yield "add_observations", [ObservationsToAdd(rng.choice(names), [_text(rng, 3), f"step {step}"])]
        elif kind == "forget":
            yield "delete_observations", [ObservationsToDelete(rng.choice(names), [f"step {step - 1}"])]
        elif kind == "unrelate":
            yield "delete_relations", [Relation(rng.choice(names), rng.choice(names), "knows")]
        else:
            yield "delete_entities", [rng.choice(names), "nobody"]


def _apply(store: GraphStore | PostgresStore, operation: str, argument: Any) -> Any:
    try:
        return getattr(store, operation)(argument).value
    except rules.GraphError as error:
        return ("error", str(error))


def _queries(rng: random.Random, names: list[str]) -> list[str]:
    picked = [rng.choice(names) for _ in range(3)] if names else []
    return ["jazz", "JAZZ coffee", "what kind of tea", "run", "caf", "cafe", "o", "", " ", "zz", *TRICKY,
            "ann%", "bo_", "x\\", *picked, *(name[1:4] for name in picked), _text(rng, 2), _text(rng, 3)]


def _same_answers(on_file: GraphStore, in_database: PostgresStore, rng: random.Random, names: list[str]) -> None:
    for query in _queries(rng, names):
        for limit in (None, 2):
            assert search_nodes(in_database, query, limit) == search_nodes(on_file, query, limit), (query, limit)
        for characters in (600, 1_500):
            assert comparable(search_nodes(in_database, query, characters=characters)) == \
                comparable(search_nodes(on_file, query, characters=characters)), (query, characters)
    wanted = [*rng.sample(names, min(4, len(names))), "nobody"]
    assert in_database.open_nodes(wanted) == on_file.open_nodes(wanted)
    assert in_database.read_graph() == on_file.read_graph()
    assert in_database.read_graph_for_pages() == on_file.read_graph_for_pages()


@pytest.mark.parametrize("seed", range(3))
def test_random_writes_and_queries_answer_as_on_a_file(database_url: str, on_file: GraphStore, seed: int) -> None:
    """Writes on the rows they read equal the whole graph's rule (P10), and answers equal (P9)."""
    rng = random.Random(seed)
    names: list[str] = []
    memory = memory_name()
    with PostgresStore(database_url, memory) as in_database:
        for number, (operation, argument) in enumerate(_operations(rng, names)):
            assert _apply(in_database, operation, argument) == _apply(on_file, operation, argument), (operation, argument)
            if number % 10 == 9:
                _same_answers(on_file, in_database, rng, names)
                _counts_are_exact(database_url, memory, on_file)
        assert list(rules.file_lines(in_database.graph())) == list(rules.file_lines(_graph(on_file)))


def _counts_are_exact(url: str, memory: str, on_file: GraphStore) -> None:
    """The memory's counts (P9) are those of its graph, whatever was deleted."""
    graph = _graph(on_file)
    index = ranking.TermIndex.build((name, node.text) for name, node in graph.entities.items())
    with psycopg.connect(url, autocommit=True) as connection:
        counts = connection.execute("SELECT entities, total_length FROM kg_memories WHERE name = %s", (memory,)).fetchone()
        stored = connection.execute("SELECT count(*), coalesce(sum(length), 0) FROM kg_entities WHERE memory = %s",
                                    (memory,)).fetchone()
        terms = dict(connection.execute("SELECT name, terms FROM kg_entities WHERE memory = %s", (memory,)).fetchall())
    assert counts == (len(graph.entities), index.total)
    assert stored == counts
    by_entity: dict[str, set[str]] = {}
    for term, holders in index.postings.items():
        for name in holders:
            by_entity.setdefault(name, set()).add(term)
    assert {bytes(name).decode(): set(held) for name, held in terms.items()} == \
        {name: by_entity.get(name, set()) for name in graph.entities}


def test_the_counts_stay_exact_after_deletes(database_url: str, on_file: GraphStore) -> None:
    memory = memory_name()
    with PostgresStore(database_url, memory) as in_database:
        for store in (on_file, in_database):
            store.create_entities(entity_items([entity("Ann", "person", ["runs daily", "likes jazz"]),
                                                entity("Bo", "person", ["jazz"])]))
            store.create_relations(relation_items([relation("Ann", "Bo", "knows")]))
            store.delete_observations([ObservationsToDelete("Ann", ["likes jazz"])])
            store.delete_entities(["Bo"])
        _counts_are_exact(database_url, memory, on_file)
        assert search_nodes(in_database, "jazz music") == search_nodes(on_file, "jazz music") == {
            "entities": [], "relations": []}
        for store in (on_file, in_database):
            store.delete_entities(["Ann"])
        _counts_are_exact(database_url, memory, on_file)
        assert search_nodes(in_database, "run") == {"entities": [], "relations": []}


@pytest.mark.parametrize("needle", ["%", "_", "\\", "\x00", "a%b", "a_b", "\\%", "100%", ".*", "(x|y)", "[ab]", "",
                                    "ab\x00cd", "'; --"])
def test_a_search_s_candidates_hold_every_match_whatever_the_query_holds(database_url: str, on_file: GraphStore,
                                                                         needle: str) -> None:
    """The prefilter (P9) is a superset: each LIKE wildcard, NUL and regular-expression character is itself."""
    held = ["100% sure", "a_b", "axb", "a%b", "back\\slash \\%", "ab\x00cd", ".* star", "(x|y) or", "[ab] set",
            "'; -- quote", "plain"]
    entities = [entity(f"e{index} {text}", "t", [text, "filler"]) for index, text in enumerate(held)]
    entities.append(entity("nul\x00name", "t\x00ype", ["\x00"]))
    with PostgresStore(database_url, memory_name()) as in_database:
        for store in (on_file, in_database):
            store.create_entities(entity_items(entities))
        expected = search_nodes(on_file, needle)
        assert search_nodes(in_database, needle) == expected
        # Every entity the rule matches is among the rows the pattern finds (with the trigram index and without).
        lowered = needle.lower()
        matched = {item["name"] for item in expected["entities"]} if expected["entities"] and any(
            lowered in node.text for node in _graph(on_file).entities.values()) else set()
        with psycopg.connect(database_url, autocommit=True) as connection:
            found = {bytes(name).decode() for (name,) in connection.execute(
                "SELECT name FROM kg_entities WHERE memory = %s AND haystack LIKE %s", (in_database.memory,
                                                                                       like_pattern(lowered)))}
        assert matched <= found
        assert all(haystack_of(lowered) in haystack_of(_graph(on_file).entities[name].text) for name in found)


def test_a_search_reads_only_its_own_memorys_matches(database_url: str) -> None:
    """The trigram index holds the memory's name too (btree_gin): a whole-query search of one memory
    is one bitmap of its own rows, not every memory's rows that share its trigrams."""
    crowd, ours = memory_name(), memory_name()
    with PostgresStore(database_url, crowd) as other, PostgresStore(database_url, ours) as store:
        other.create_entities(entity_items([entity(f"c{index}", "t", ["zephyr breeze"]) for index in range(200)]))
        store.create_entities(entity_items([entity("mine", "t", ["a zephyr here"]), entity("plain", "t", ["nothing"])]))
        assert [item["name"] for item in search_nodes(store, "zephyr")["entities"]] == ["mine"]
    with psycopg.connect(database_url, autocommit=True) as connection:
        definition = connection.execute("SELECT pg_get_indexdef(to_regclass('kg_entities_by_trigram'))").fetchone()
    assert definition is not None and "(memory, haystack gin_trgm_ops)" in definition[0], definition


def test_a_query_is_never_a_pattern(database_url: str) -> None:
    with PostgresStore(database_url, memory_name()) as store:
        store.create_entities(entity_items([entity("abc", "t", ["xyz"]), entity("a_c", "t", []), entity("a%c", "t", [])]))
        assert [item["name"] for item in search_nodes(store, "a_c")["entities"]] == ["a_c"]
        assert [item["name"] for item in search_nodes(store, "a%c")["entities"]] == ["a%c"]
        # Not a regular expression: "a.c" is not in "abc" (its word "c" finds the others, by rule 2).
        assert "abc" not in [item["name"] for item in search_nodes(store, "a.c")["entities"]]
        assert [item["name"] for item in search_nodes(store, "ab_")["entities"]] == []


# --- a database without pg_trgm ------------------------------------------------------------------------------

@pytest.fixture
def plain_role_database(database_url: str) -> Iterator[str]:
    """A database of its own, and a role that may make tables in it but no extension (no CREATE on it)."""
    suffix = uuid.uuid4().hex[:10]
    database, role = f"kg_plain_{suffix}", f"kg_plain_{suffix}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(database)))
        admin.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN").format(psycopg.sql.Identifier(role)))
        admin.execute(psycopg.sql.SQL("REVOKE CREATE ON DATABASE {} FROM PUBLIC").format(psycopg.sql.Identifier(database)))
    owner_url = _on_database(database_url, database)
    with psycopg.connect(owner_url, autocommit=True) as owner:
        owner.execute(psycopg.sql.SQL("GRANT CREATE, USAGE ON SCHEMA public TO {}").format(psycopg.sql.Identifier(role)))
    try:
        yield _on_database(database_url, database, user=role)
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(psycopg.sql.Identifier(database)))
            admin.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(role)))


def _on_database(url: str, database: str, user: str | None = None) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = database
    if user is not None:
        info["user"] = user
    return psycopg.conninfo.make_conninfo(**info)


def test_without_pg_trgm_a_search_scans_and_answers_the_same(plain_role_database: str, on_file: GraphStore,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    people = [entity(f"Person {index}", "person", [f"Works on project {index % 7}", "Drinks coffee"]) for index in range(30)]
    with caplog.at_level("WARNING"), PostgresStore(plain_role_database, "team") as in_database:
        for store in (on_file, in_database):
            store.create_entities(entity_items(people))
        for query in ("coffee", "project 3", "Person 1", "pe", "nothing here", "works coffee"):
            assert search_nodes(in_database, query) == search_nodes(on_file, query), query
    assert "no trigram index" in caplog.text
    with psycopg.connect(plain_role_database, autocommit=True) as connection:
        assert connection.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'").fetchone() == (0,)
        assert connection.execute("SELECT to_regclass('kg_entities_by_trigram')").fetchone() == (None,)


# --- version 1, upgraded -------------------------------------------------------------------------------------

VERSION_1 = (  # the tables of the release before (storage/postgres/schema.py, SCHEMA_VERSION 1)
    "CREATE TABLE kg_schema (version integer NOT NULL)",
    """CREATE TABLE kg_memories (name text PRIMARY KEY, revision bigint NOT NULL DEFAULT 0,
        removals bigint NOT NULL DEFAULT 0, next_seq bigint NOT NULL DEFAULT 0)""",
    """CREATE TABLE kg_entities (memory text NOT NULL REFERENCES kg_memories (name) ON DELETE CASCADE,
        name bytea NOT NULL, seq bigint NOT NULL, revision bigint NOT NULL, line bytea NOT NULL,
        PRIMARY KEY (memory, name))""",
    "CREATE INDEX kg_entities_by_revision ON kg_entities (memory, revision)",
    """CREATE TABLE kg_relations (memory text NOT NULL REFERENCES kg_memories (name) ON DELETE CASCADE,
        source bytea NOT NULL, target bytea NOT NULL, relation_type bytea NOT NULL, seq bigint NOT NULL,
        revision bigint NOT NULL, line bytea NOT NULL, PRIMARY KEY (memory, source, target, relation_type))""",
    "CREATE INDEX kg_relations_by_revision ON kg_relations (memory, revision)",
    "INSERT INTO kg_schema (version) VALUES (1)",
)


@pytest.fixture
def empty_database(database_url: str) -> Iterator[str]:
    database = f"kg_v1_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(database)))
    try:
        yield _on_database(database_url, database)
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(psycopg.sql.Identifier(database)))


def _analyses(url: str) -> int:
    """How many times kg_entities was analysed by hand (ANALYZE, not autovacuum)."""
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'kg_entities'").fetchone()
    assert row is not None
    return int(row[0])


def _analysed_by_the_server(url: str, times: int) -> None:
    deadline = Deadline(WAIT_SECONDS)
    while _analyses(url) < times:  # (analysed in the server's thread, after a write)
        time.sleep(min(0.05, deadline.remaining()))


def _expected_rows(url: str, memory: str, table: str = "kg_entities") -> int:
    statement = {"kg_entities": "EXPLAIN (FORMAT JSON) SELECT 1 FROM kg_entities WHERE memory = %s",
                 "kg_relations": "EXPLAIN (FORMAT JSON) SELECT 1 FROM kg_relations WHERE memory = %s"}[table]
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(statement, (memory,)).fetchone()
    assert row is not None
    return int(row[0][0]["Plan"]["Plan Rows"])


def test_a_memory_grown_by_the_tools_is_analysed_when_the_planner_does_not_know_its_size(empty_database: str) -> None:
    """P13: in a table the planner has statistics of (another memory, imported), a memory grown by
    writes smaller than an import looks like a row or two. Once the server has written
    STATISTICS_ROWS rows (its entities), and again once it has written as many as the memory
    then held (its relations), the memory's columns are analysed; after which a search reads the
    relations of the entities it found by their ends, not every relation of the memory for each."""
    from memory_server.storage.postgres import statements, statistics

    with PostgresStore(empty_database, "imported") as imported:
        imported.merge([(EntityRecord(f"seeded {index}", "t", [f"note {index}"]), None) for index in range(3_000)], [])
    with psycopg.connect(empty_database, autocommit=True) as connection:  # only the server analyses, in this test
        connection.execute("ALTER TABLE kg_entities SET (autovacuum_enabled = false)")
        connection.execute("ALTER TABLE kg_relations SET (autovacuum_enabled = false)")
    analysed = _analyses(empty_database)
    size = statistics.STATISTICS_ROWS + 200
    with PostgresStore(empty_database, "grown") as store:
        for start in range(0, size, 200):
            if start + 200 < statistics.STATISTICS_ROWS:
                assert _analyses(empty_database) == analysed  # not yet
            store.create_entities(entity_items([entity(f"grown {index}", "t",
                                                       [f"zephyr {index}" if index % 100 == 0 else "plain"])
                                                for index in range(start, start + 200)]))
        _analysed_by_the_server(empty_database, analysed + 1)
        assert 2 * _expected_rows(empty_database, "grown") >= size
        assert _expected_rows(empty_database, "grown", "kg_relations") <= 1  # analysed before it had any
        for start in range(0, 2 * size, 400):
            store.create_relations(relation_items([relation(f"grown {index % size}", f"grown {(index + 1) % size}",
                                                            f"r{index // size}")
                                                   for index in range(start, start + 400)]))
        _analysed_by_the_server(empty_database, analysed + 2)
        assert 2 * _expected_rows(empty_database, "grown", "kg_relations") >= 2 * size
        with psycopg.connect(empty_database, autocommit=True) as connection:
            plan = "\n".join(row[0] for row in connection.execute(
                "EXPLAIN " + statements.CONTAINING, {"memory": "grown", "value": like_pattern("zephyr")}, prepare=False))
        assert "Index Cond: ((target = found_2.name) AND (memory = 'grown'::text))" in plan, plan
        assert len(search_nodes(store, "zephyr")["entities"]) == size // 100
        store.create_entities(entity_items([entity("one more", "t", ["plain"])]))  # far fewer rows than the memory holds
    assert _analyses(empty_database) == analysed + 2


def _pending_limits(url: str) -> dict[str, list[str] | None]:
    with psycopg.connect(url, autocommit=True) as connection:
        return dict(connection.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN "
                                       "('kg_entities_by_term', 'kg_entities_by_trigram') ORDER BY relname").fetchall())


def test_the_gin_pending_lists_are_bounded_without_waiting_for_a_write(empty_database: str) -> None:
    """P14: the server bounds both GIN indexes' pending lists (which every search reads through);
    a start while a write holds the tables does not wait for it (ALTER INDEX would lock every
    search out meanwhile), and a later start bounds them."""
    from memory_server.storage.postgres import statistics

    bounded = [f"gin_pending_list_limit={statistics.GIN_PENDING_KB}"]
    with PostgresStore(empty_database, memory_name()) as store:
        store.create_entities(entity_items([entity("Ann", "person", ["jazz"])]))
    assert _pending_limits(empty_database) == {"kg_entities_by_term": bounded, "kg_entities_by_trigram": bounded}
    with psycopg.connect(empty_database, autocommit=True) as connection:
        connection.execute("ALTER INDEX kg_entities_by_term RESET (gin_pending_list_limit)")
        connection.execute("ALTER INDEX kg_entities_by_trigram RESET (gin_pending_list_limit)")
    with psycopg.connect(empty_database) as writer:  # a write under way: its transaction left open
        writer.execute("UPDATE kg_entities SET length = length")
        with PostgresStore(empty_database, memory_name()) as store:
            assert search_nodes(store, "jazz")["entities"] == []  # started, and answered, meanwhile
        assert _pending_limits(empty_database) == {"kg_entities_by_term": None, "kg_entities_by_trigram": None}
    with PostgresStore(empty_database, memory_name()) as store:
        assert search_nodes(store, "jazz")["entities"] == []
    assert _pending_limits(empty_database) == {"kg_entities_by_term": bounded, "kg_entities_by_trigram": bounded}


def test_a_version_1_database_is_upgraded_in_place_keeping_every_row(empty_database: str, tmp_path: Path) -> None:
    graphs: dict[str, GraphStore] = {}
    with ExitStack() as stack:
        _upgrade_check(empty_database, graphs, stack, tmp_path)


def _upgrade_check(empty_database: str, graphs: dict[str, GraphStore], stack: ExitStack, tmp_path: Path) -> None:
    with psycopg.connect(empty_database, autocommit=True) as connection:
        for statement in VERSION_1:
            connection.execute(statement)
        for memory, size in (("team", 25), ("me", 3)):
            on_file = graphs[memory] = stack.enter_context(GraphStore(tmp_path / f"{memory}.jsonl"))
            on_file.create_entities(entity_items([entity(f"{memory} {index}", "person", [f"likes jazz {index}", "a\x00b"])
                                                  for index in range(size)]))
            on_file.create_relations(relation_items([relation(f"{memory} {index}", f"{memory} 0", "knows")
                                                     for index in range(size)]))
            on_file.delete_entities([f"{memory} 1"])
            graph = _graph(on_file)
            connection.execute("INSERT INTO kg_memories (name, revision, next_seq) VALUES (%s, 4, %s)",
                               (memory, graph.next_seq))
            for node in graph.entities.values():
                connection.execute("INSERT INTO kg_entities VALUES (%s, %s, %s, 1, %s)",
                                   (memory, node.record.name.encode(), node.seq, node.line))
            for (source, target, kind), edge in graph.relations.items():
                connection.execute("INSERT INTO kg_relations VALUES (%s, %s, %s, %s, %s, 2, %s)",
                                   (memory, source.encode(), target.encode(), kind.encode(), edge.seq, edge.line))
        before = connection.execute("SELECT memory, name, seq, line FROM kg_entities ORDER BY 1, 2").fetchall()
        relations_before = connection.execute("SELECT * FROM kg_relations ORDER BY 1, 2, 3, 4").fetchall()
    with PostgresStore(empty_database, "team") as store:
        assert store.read_graph() == graphs["team"].read_graph()
        assert search_nodes(store, "jazz 7") == search_nodes(graphs["team"], "jazz 7")
        assert search_nodes(store, "jazz") == search_nodes(graphs["team"], "jazz")
        _counts_are_exact(empty_database, "team", graphs["team"])
        _counts_are_exact(empty_database, "me", graphs["me"])
        for target in (store, graphs["team"]):
            target.create_entities(entity_items([entity("new one", "person", ["likes jazz too"])]))
        assert store.read_graph() == graphs["team"].read_graph()
    with PostgresStore(empty_database, "me") as mine:
        assert mine.read_graph() == graphs["me"].read_graph()
    with psycopg.connect(empty_database, autocommit=True) as connection:
        after = connection.execute("SELECT memory, name, seq, line FROM kg_entities WHERE name <> %s ORDER BY 1, 2",
                                   (b"new one",)).fetchall()
        assert after == before
        assert connection.execute("SELECT * FROM kg_relations ORDER BY 1, 2, 3, 4").fetchall() == relations_before
        assert connection.execute("SELECT version FROM kg_schema").fetchall() == [(SCHEMA_VERSION,)]


def test_a_version_3_database_has_its_terms_made_again(empty_database: str, tmp_path: Path) -> None:
    """P6: version 4's terms read irregular verbs' past forms as their base (ranking.TERMS 2); a
    database a version 3 server left holds "bought" where they hold "buy", and is upgraded in place."""
    people = [entity("Bob", "person", ["Sells kayaks"]), entity("Ann", "person", ["Bought a kayak last spring"])]
    asked = "Who did buy a kayak?"
    with GraphStore(tmp_path / "me.jsonl") as on_file:
        on_file.create_entities(entity_items(people))
        with PostgresStore(empty_database, "me") as store:
            store.create_entities(entity_items(people))
        with psycopg.connect(empty_database, autocommit=True) as connection:
            connection.execute("UPDATE kg_entities SET terms = array_replace(terms, 'buy', 'bought')")
            connection.execute("UPDATE kg_schema SET version = 3")
        with PostgresStore(empty_database, "me") as store:
            assert [entity["name"] for entity in search_nodes(store, asked)["entities"]] == ["Ann", "Bob"]
            assert search_nodes(store, asked) == search_nodes(on_file, asked)
            assert store.read_graph() == on_file.read_graph()
        _counts_are_exact(empty_database, "me", on_file)
    with psycopg.connect(empty_database, autocommit=True) as connection:
        terms = dict(connection.execute("SELECT convert_from(name, 'UTF8'), terms FROM kg_entities").fetchall())
        assert "buy" in terms["Ann"] and "bought" not in terms["Ann"]
        assert connection.execute("SELECT version FROM kg_schema").fetchall() == [(SCHEMA_VERSION,)]


def test_the_terms_the_database_holds_are_made_as_the_ranking_makes_them() -> None:
    """A new way of making terms (ranking.TERMS) is a new schema version, whose upgrade makes them again."""
    assert SCHEMA_TERMS == ranking.TERMS


def test_a_node_s_haystack_keeps_containment() -> None:
    record = EntityRecord("A\x00B", "t", ["x\x00y"])
    text = rules.make_node(record, 0).text
    assert "\x00" not in haystack_of(text)
    assert haystack_of("a\x00b") in haystack_of(text)
    assert like_pattern("50%_\\") == "%50\\%\\_\\\\%"


def test_a_search_within_a_window_answers_as_on_a_file(database_url: str, tmp_path: Path) -> None:
    from memory_server.model.dates import Span
    from memory_server.retrieval.when import parse_query, window_of

    stamps = [f"2026-0{month}-1{day}T10:00:00Z" for month in range(1, 7) for day in range(5)]
    people = [{**entity(f"P{index}", "person", [f"likes {WORDS[index % 8]}", f"note {index}"]),
               **({"happenedOn": f"2026-0{1 + index % 6}-0{1 + index % 9}"} if index % 3 else {})} for index in range(30)]
    memory = memory_name()
    with GraphStore(tmp_path / "dated.jsonl", clock=iter(stamps).__next__) as on_file, \
            PostgresStore(database_url, memory, clock=iter(stamps).__next__) as in_database:
        for store in (on_file, in_database):
            for start in range(0, 30, 6):
                store.create_entities(entity_items(people[start:start + 6]))
            store.add_observations([ObservationsToAdd("P4", ["went running"])])
        windows: list[tuple[str, str, Span | None, bool]] = []
        for since, until in (("2026-02-01", None), ("2026-01-01", "2026-03-31"), (None, "2026-04-30")):
            windows += [(query, query, window_of(since, until), True) for query in ("jazz", "chess tea", "P1", "note")]
        for question in ("what did I note last month", "jazz in March 2026", "what happened in February 2026"):
            words, window = parse_query(question, datetime.datetime(2026, 7, 1, tzinfo=datetime.UTC))
            windows.append((question, words, window, False))
        answered = 0
        for query, words, window, explicit in windows:
            assert window is not None, query
            for limit in (None, 2):
                expected = search_within(on_file, query, words, window, explicit=explicit, limit=limit)
                assert search_within(in_database, query, words, window, explicit=explicit, limit=limit) == expected, \
                    (query, limit)
                answered += bool(expected and expected["entities"])
        assert answered > len(windows)  # most windows hold answers: the comparison is not of empty answers


def test_a_server_starts_while_a_long_write_holds_the_tables(database_url: str) -> None:
    """Starting makes no table lock wait: an import of a million rows (a long write) does not stop
    another server from starting and answering."""
    other = memory_name()
    with PostgresStore(database_url, other) as store:
        store.create_entities(entity_items([entity("Ann", "person", [])]))  # the tables are made
    with psycopg.connect(database_url) as writer:  # a write left open, as an import's is for minutes
        writer.execute("UPDATE kg_entities SET revision = revision WHERE memory = %s", (other,))
        writer.execute("INSERT INTO kg_relations SELECT memory, name, name, 'x', 0, 0, 'x' FROM kg_entities "
                       "WHERE memory = %s", (other,))
        with PostgresStore(database_url, memory_name(), connect_seconds=2) as starting:
            starting.create_entities(entity_items([entity("Bo", "person", ["jazz"])]))
            assert search_nodes(starting, "jazz")["entities"] == [entity("Bo", "person", ["jazz"])]
        writer.rollback()


def test_read_graph_kept_whole_is_never_older_than_a_write_of_another_server(database_url: str) -> None:
    memory = memory_name()
    with PostgresStore(database_url, memory) as reader, PostgresStore(database_url, memory) as writer:
        writer.create_entities(entity_items([entity("Ann", "person", ["jazz"])]))
        first = reader.read_graph()
        assert reader.read_graph() == first == {"entities": [entity("Ann", "person", ["jazz"])], "relations": []}
        writer.add_observations([ObservationsToAdd("Ann", ["chess"])])
        assert reader.read_graph_for_pages()["entities"] == [entity("Ann", "person", ["jazz", "chess"])]
        writer.delete_entities(["Ann"])
        assert reader.read_graph() == {"entities": [], "relations": []}


def test_read_graph_again_after_writes_shares_what_they_did_not_change(database_url: str) -> None:
    """P12: the whole memory read again after writes is the graph a first read makes of it (each
    entity and relation in its place), and its unchanged entities and relations are the very
    objects of the read before: the answers a pager keeps of both share them."""
    memory = memory_name()
    with PostgresStore(database_url, memory) as store:
        store.create_entities(entity_items([entity(name, "person", [f"{name} plays jazz"])
                                            for name in ("Ann", "Bo", "Cy", "Di")]))
        store.create_relations(relation_items([relation("Ann", "Bo", "knows"), relation("Bo", "Cy", "knows"),
                                               relation("Cy", "Di", "knows")]))
        before = store.read_graph_for_pages()
        views = {view["name"]: view for view in before["entities"]}
        store.add_observations([ObservationsToAdd("Bo", ["Bo runs"])])
        store.delete_entities(["Ann"])  # every entity and relation after it moves up a place
        store.create_entities(entity_items([entity("Ed", "person", ["Ed plays chess"])]))
        after = store.read_graph_for_pages()
        again = store._whole()
        with PostgresStore(database_url, memory) as fresh:
            first = fresh.graph()
            assert fresh.read_graph_for_pages() == after
        assert after["entities"] == [entity("Bo", "person", ["Bo plays jazz", "Bo runs"]),
                                     entity("Cy", "person", ["Cy plays jazz"]), entity("Di", "person", ["Di plays jazz"]),
                                     entity("Ed", "person", ["Ed plays chess"])]
        assert after["relations"] == [relation("Bo", "Cy", "knows"), relation("Cy", "Di", "knows")]
        assert [(node.record, node.view, node.text, node.seq, node.extra) for node in again.entities.values()] == \
            [(node.record, node.view, node.text, node.seq, node.extra) for node in first.entities.values()]
        assert [(edge.record, edge.view, edge.seq) for edge in again.relations.values()] == \
            [(edge.record, edge.view, edge.seq) for edge in first.relations.values()]
        assert again.links == first.links and again.next_seq == first.next_seq
        shown = {view["name"]: view for view in after["entities"]}
        assert shown["Cy"] is views["Cy"] and shown["Di"] is views["Di"]  # unchanged: the same objects
        assert shown["Bo"] is not views["Bo"]  # written since: read afresh
        assert after["relations"][1] is before["relations"][2]


def test_a_connection_the_database_ended_is_not_lent_again(database_url: str) -> None:
    """P7: the pool's check of an idle connection makes no round trip for a sound one, and still
    never lends one whose session the database ended (a restart, a terminated backend)."""
    with PostgresStore(database_url, memory_name()) as store:
        store.create_entities(entity_items([entity("Ann", "person", ["jazz"])]))
        with store._pool.connection() as connection:  # the connections the pool holds, all idle after this
            pids = {connection.info.backend_pid}
        pids |= {connection.info.backend_pid for connection in list(store._pool._pool)}
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (list(pids),))
            deadline = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
            while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)).fetchone() != (0,):
                assert datetime.datetime.now(datetime.UTC) < deadline, "the backends did not end"
        # Every idle connection's session is gone: each call is answered on a new one, not refused.
        assert store.open_nodes(["Ann"])["entities"] == [entity("Ann", "person", ["jazz"])]
        assert search_nodes(store, "jazz")["entities"] == [entity("Ann", "person", ["jazz"])]


def test_a_search_leaves_the_garbage_collector_as_it_found_it(database_url: str) -> None:
    import gc

    with PostgresStore(database_url, memory_name()) as store:
        store.create_entities(entity_items([entity("Ann", "person", ["jazz"])]))
        assert gc.isenabled()
        search_nodes(store, "jazz", characters=1_500)
        search_nodes(store, "who plays jazz", characters=1_500)  # by words: a snapshot of several reads
        assert gc.isenabled()
        gc.disable()  # someone else's pause is theirs to end
        try:
            search_nodes(store, "jazz")
            assert not gc.isenabled()
        finally:
            gc.enable()
        with pytest.raises(rules.GraphError):
            with PostgresStore("postgresql://nobody@127.0.0.1:1/none", memory_name(), connect_seconds=1) as gone:
                search_nodes(gone, "jazz")
        assert gc.isenabled()


def test_after_a_search_what_was_young_is_in_the_oldest_generation(database_url: str) -> None:
    """The first young collection after a search walks nothing it left, nor anything made before
    it (a read_graph answer's lists): all of it went to the oldest generation when the collector
    resumed (a full collection still frees a cycle among them)."""
    import gc

    with PostgresStore(database_url, memory_name()) as store:
        store.create_entities(entity_items([entity("Ann", "person", ["jazz"])]))
        gc.collect()
        young = [[index] for index in range(50)]  # made since the last collection: in the youngest generation
        assert any(item is young[0] for item in gc.get_objects(generation=0))
        search_nodes(store, "jazz", characters=1_500)
        oldest = {id(item) for item in gc.get_objects(generation=2)}
        assert all(id(item) in oldest for item in young)
        assert gc.isenabled()
        cycle: list[Any] = []
        cycle.append(cycle)
        search_nodes(store, "jazz")
        del cycle
        assert gc.collect() >= 1  # still collected


def test_a_server_answering_only_searches_still_frees_cycles(database_url: str) -> None:
    """What a read leaves goes to the oldest generation, which only a full collection visits, and
    the collector's counts start again from nought: every PROMOTIONS_PER_COLLECTION-th read makes
    the full collection the young ones it stood in for would have led to, so that cycles made
    between searches (as an exception and its traceback make) are freed."""
    import gc
    import weakref

    from memory_server.storage import collector

    class Cycle:
        me: Any

    alive: weakref.WeakSet[Cycle] = weakref.WeakSet()
    with PostgresStore(database_url, memory_name()) as store:
        store.create_entities(entity_items([entity("Ann", "person", ["jazz"])]))
        for _ in range(2 * collector.PROMOTIONS_PER_COLLECTION + 1):
            search_nodes(store, "jazz", characters=1_500)
            cycle = Cycle()
            cycle.me = cycle
            alive.add(cycle)
            del cycle
        assert gc.isenabled()
        assert len(alive) <= collector.PROMOTIONS_PER_COLLECTION + 1


def test_an_import_leaves_no_row_waiting_in_the_search_indexes(private_database: str) -> None:
    """After an import (more than COPY_ROWS rows) the GIN indexes hold its rows themselves, not in
    their pending lists, which every search would read through (and plan around). (A database of
    its own: the pending lists are the whole table's, and other tests write theirs meanwhile.)"""
    rows = [(EntityRecord(f"imported {index}", "t", [f"zephyr {index}"]), None) for index in range(1_500)]
    with PostgresStore(private_database, memory_name()) as store:
        store.merge(rows, [])
        with psycopg.connect(private_database, autocommit=True) as connection:
            cleaned = connection.execute(
                "SELECT gin_clean_pending_list(oid) FROM pg_class WHERE relname IN "
                "('kg_entities_by_term', 'kg_entities_by_trigram') AND relkind = 'i'").fetchall()
        assert cleaned == [(0,), (0,)]
        assert len(search_nodes(store, "zephyr")["entities"]) == 1_500
