"""The tables of the memories in a database (P6): made on first use, by one server at a time, with
the extensions and indexes a search reads (pg_trgm, btree_gin); a database of an earlier version
upgraded in place, keeping every row; one of a newer version refused before anything is written."""

from __future__ import annotations

import logging
from typing import Any, Final

import psycopg

from ...index import ranking
from . import vectors_tables
from .faults import SchemaTooNew, reason_of
from .reads import node_from
from .statements import haystack_of, indexed_terms
from .statistics import limit_pending

log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 4
"""The version of the tables below (3: the meaning tables of vectors.py; 4: the terms of
:data:`SCHEMA_TERMS`); versions 1 to 3 are upgraded, a newer one is refused (P6)."""
SCHEMA_TERMS: Final = "2"
"""The way of making terms (ranking.TERMS) that the terms column holds at SCHEMA_VERSION: a new
one is a new version, whose upgrade makes every entity's terms again (tests hold the two equal)."""
_SCHEMA_LOCK: Final = 0x6B675F6D656D  # pg_advisory_xact_lock key: one server makes the tables at a time

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS kg_schema (version integer NOT NULL)",
    """CREATE TABLE IF NOT EXISTS kg_memories (
        name text PRIMARY KEY,
        revision bigint NOT NULL DEFAULT 0,
        removals bigint NOT NULL DEFAULT 0,
        next_seq bigint NOT NULL DEFAULT 0,
        entities bigint NOT NULL DEFAULT 0,
        total_length bigint NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS kg_entities (
        memory text NOT NULL REFERENCES kg_memories (name) ON DELETE CASCADE,
        name bytea NOT NULL,
        seq bigint NOT NULL,
        revision bigint NOT NULL,
        line bytea NOT NULL,
        haystack text NOT NULL,
        terms text[] NOT NULL,
        length integer NOT NULL,
        PRIMARY KEY (memory, name))""",
    "CREATE INDEX IF NOT EXISTS kg_entities_by_term ON kg_entities USING gin (terms)",
    """CREATE TABLE IF NOT EXISTS kg_relations (
        memory text NOT NULL REFERENCES kg_memories (name) ON DELETE CASCADE,
        source bytea NOT NULL,
        target bytea NOT NULL,
        relation_type bytea NOT NULL,
        seq bigint NOT NULL,
        revision bigint NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (memory, source, target, relation_type))""",
    # The name first: a lookup by target can only use this index as a lookup (see _with_touching).
    "CREATE INDEX IF NOT EXISTS kg_relations_by_target ON kg_relations (target, memory)",
)
_TRIGRAMS: Final = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
_HAS_TRIGRAMS: Final = "SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'"
_TRIGRAM_INDEX: Final = "CREATE INDEX IF NOT EXISTS kg_entities_by_trigram ON kg_entities USING gin (haystack gin_trgm_ops)"
# With btree_gin, the memory's name is in the same index: a search reads only its own memory's
# matches (one bitmap), not every memory's that share its trigrams, and the planner no longer has
# to guess which index of two narrows a memory just filled.
_BTREE_GIN: Final = "CREATE EXTENSION IF NOT EXISTS btree_gin"
_HAS_BTREE_GIN: Final = "SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'"
_MEMORY_TRIGRAM_INDEX: Final = ("CREATE INDEX IF NOT EXISTS kg_entities_by_trigram ON kg_entities "
                                "USING gin (memory, haystack gin_trgm_ops)")
_HAS_TRIGRAM_INDEX: Final = "SELECT to_regclass('kg_entities_by_trigram') IS NOT NULL"
# Version 1 -> 2 (P6): the search columns, filled from each row's line by the server, and the counts.
_UPGRADE: Final = (
    "ALTER TABLE kg_memories ADD COLUMN entities bigint NOT NULL DEFAULT 0, "
    "ADD COLUMN total_length bigint NOT NULL DEFAULT 0",
    "ALTER TABLE kg_entities ADD COLUMN haystack text, ADD COLUMN terms text[], ADD COLUMN length integer",
    "DROP INDEX IF EXISTS kg_entities_by_revision",
    "DROP INDEX IF EXISTS kg_relations_by_revision",
)
_UPGRADE_DONE: Final = (
    "ALTER TABLE kg_entities ALTER COLUMN haystack SET NOT NULL, ALTER COLUMN terms SET NOT NULL, "
    "ALTER COLUMN length SET NOT NULL",
    """UPDATE kg_memories SET entities = counted.entities, total_length = counted.total_length
        FROM (SELECT memory, count(*) AS entities, sum(length) AS total_length FROM kg_entities GROUP BY memory) AS counted
        WHERE kg_memories.name = counted.memory""",
    "UPDATE kg_schema SET version = 2",
)
_UPGRADE_ROWS: Final = "SELECT memory, name, line FROM kg_entities"
_UPGRADE_TEMPORARY: Final = ("CREATE TEMPORARY TABLE kg_upgrade (memory text, name bytea, haystack text, terms text[], "
                             "length integer) ON COMMIT DROP")
_UPGRADE_FILL: Final = "COPY kg_upgrade (memory, name, haystack, terms, length) FROM STDIN"
_UPGRADE_APPLY: Final = """UPDATE kg_entities SET haystack = up.haystack, terms = up.terms, length = up.length
    FROM kg_upgrade AS up WHERE kg_entities.memory = up.memory AND kg_entities.name = up.name"""
_SCHEMA_EXISTS: Final = "SELECT to_regclass('kg_schema') IS NOT NULL"
_SCHEMA_VERSION: Final = "SELECT max(version) FROM kg_schema"
_RECORD_VERSION: Final = "INSERT INTO kg_schema (version) VALUES (%s)"
_RECORD_UPGRADE: Final = "UPDATE kg_schema SET version = %s"
_TOTAL_LENGTHS: Final = _UPGRADE_DONE[1]


def make(connection: psycopg.Connection[Any], where: str) -> bool:
    """The tables made, or upgraded, where they are not of SCHEMA_VERSION (P6), in one transaction
    that one server at a time runs; True when the trigram index of ``haystack`` is there."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        exists = connection.execute(_SCHEMA_EXISTS).fetchone()
        row = connection.execute(_SCHEMA_VERSION).fetchone() if exists and exists[0] else None
        version = None if row is None else row[0]
        if version is not None and version > SCHEMA_VERSION:
            raise SchemaTooNew(f"The database ({where}) holds memory tables of version {version}, "
                               f"newer than this server's {SCHEMA_VERSION}: upgrade mcp-server-memory. "
                               "Nothing was written.")
        if version == 1:
            # An upgrade (or an index made on the rows there) runs as long as the rows ask.
            connection.execute("SET LOCAL statement_timeout = 0")
            _upgrade_from_1(connection, where)
        if version != SCHEMA_VERSION:
            # Only when they are not all there: CREATE INDEX, even IF NOT EXISTS, waits for every
            # open write (an import of a million rows) before it looks.
            for statement in _SCHEMA:
                connection.execute(statement)
            vectors_tables.make_schema(connection, where)
        if version in (1, 2):
            vectors_tables.upgrade(connection, node_from)
        if version in (2, 3):
            connection.execute("SET LOCAL statement_timeout = 0")
            _terms_again(connection, where)
        if version in (1, 2, 3):
            connection.execute(_RECORD_UPGRADE, (SCHEMA_VERSION,))
        if version is None:
            connection.execute(_RECORD_VERSION, (SCHEMA_VERSION,))
        trigrams = _make_trigram_index(connection, where)
        limit_pending(connection, where)
    return trigrams


def _make_trigram_index(connection: psycopg.Connection[Any], where: str) -> bool:
    """The trigram index of ``haystack`` (pg_trgm), made when it can be; without it a whole-query
    search reads every row of its memory, which is said once in the log."""
    row = connection.execute(_HAS_TRIGRAM_INDEX).fetchone()
    if row is not None and row[0]:
        return True
    try:
        with connection.transaction():  # a savepoint: a refusal here leaves the rest standing
            if connection.execute(_HAS_TRIGRAMS).fetchone() is None:
                connection.execute(_TRIGRAMS)
            try:
                with connection.transaction():
                    if connection.execute(_HAS_BTREE_GIN).fetchone() is None:
                        connection.execute(_BTREE_GIN)
                    connection.execute(_MEMORY_TRIGRAM_INDEX)
            except psycopg.Error:  # without btree_gin: the trigrams alone, the memory checked row by row
                connection.execute(_TRIGRAM_INDEX)
        return True
    except psycopg.errors.InsufficientPrivilege as error:
        reason = reason_of(error)
    except psycopg.Error as error:  # not installed on the server, or in a schema not on the path
        reason = reason_of(error)
    row = connection.execute(_HAS_TRIGRAM_INDEX).fetchone()
    if row is not None and row[0]:
        return True  # made by someone who could
    log.warning("%s: no trigram index (pg_trgm: %s); a search for a whole query reads every row of the "
                "memory. An operator can run CREATE EXTENSION pg_trgm in the database.", where, reason)
    return False


def _upgrade_from_1(connection: psycopg.Connection[Any], where: str) -> None:
    """Version 1's tables made version 2's (P6), in the caller's transaction: the search columns
    of every entity are worked out from its line, here, as a write would have made them."""
    log.warning("%s: upgrading the memory tables from version 1 to %d", where, SCHEMA_VERSION)
    for statement in _UPGRADE:
        connection.execute(statement)
    _fill_search_columns(connection)
    for statement in _UPGRADE_DONE:
        connection.execute(statement)


def _terms_again(connection: psycopg.Connection[Any], where: str) -> None:
    """The terms and lengths of every entity made again from its line (version 4's terms,
    :data:`SCHEMA_TERMS`), and each memory's total length, in the caller's transaction (P6)."""
    log.warning("%s: making the search terms of every entity again (memory tables of version %d)", where,
                SCHEMA_VERSION)
    _fill_search_columns(connection)
    connection.execute(_TOTAL_LENGTHS)


def _fill_search_columns(connection: psycopg.Connection[Any]) -> None:
    """The search columns (haystack, terms, length) of every entity, worked out from its line."""
    connection.execute(_UPGRADE_TEMPORARY)
    # A batch at a time (a COPY cannot run while the rows are fetched on the same connection).
    with connection.cursor(name="kg_upgrade_rows") as rows, connection.cursor() as writer:
        rows.execute(_UPGRADE_ROWS)
        while batch := rows.fetchmany(5_000):
            with writer.copy(_UPGRADE_FILL) as copy:
                for memory, name, line in batch:
                    node = node_from(0, bytes(line))
                    terms, length = ranking.entity_terms(node.text)
                    copy.write_row((memory, bytes(name), haystack_of(node.text), indexed_terms(terms), length))
    connection.execute(_UPGRADE_APPLY)
