"""The meaning's tables on PostgreSQL and the rows each write changes in them (vectors.py M1,
M3, M6): the texts of a memory, keyed by their sha256, and which entities hold them. Nothing here
needs the model; the embedder and the searches (vectors.py) do.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

import psycopg

from ...model.graph import Graph, Node
from ...model.writes import RowChanges
from . import vectors_sql as sql

log = logging.getLogger(__name__)

CHUNK: Final = 10_000
"""Rows per statement when a write (an import) adds or removes many texts."""


def digest_of(text: str) -> bytes:
    """The key of a text (M1): the sha256 of its UTF-8 (a lone surrogate kept as written)."""
    return hashlib.sha256(utf8(text)).digest()


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def reason(error: BaseException) -> str:
    """The first line of an error's message (its class when it has none), for the log."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def make_schema(connection: psycopg.Connection[Any], where: str) -> None:
    """The meaning tables (M6), made where they are not: the vectors in pgvector's halfvec with an
    HNSW index where the extension is there or can be made, else in bytea."""
    for statement in sql.TABLES:
        connection.execute(statement)
    row = connection.execute(sql.HAS_VECTORS_TABLE).fetchone()
    if row is not None and row[0]:
        return
    try:
        with connection.transaction():  # a savepoint: without pgvector, the plain column
            if connection.execute(sql.HAS_PGVECTOR).fetchone() is None:
                connection.execute(sql.PGVECTOR)
            connection.execute(sql.VECTORS_PGVECTOR)
            connection.execute(sql.VECTORS_BY_MEANING)
    except psycopg.Error as error:
        log.info("%s: no pgvector (%s); each server searches the vectors itself. An operator can run "
                 "CREATE EXTENSION vector before the tables are made.", where, reason(error))
        connection.execute(sql.VECTORS_PLAIN)
    connection.execute(sql.VECTORS_BY_STAMP)


def upgrade(connection: psycopg.Connection[Any], node_from: Callable[[int, bytes], Node]) -> None:
    """A database of version 2 made version 3 (M6), in the caller's transaction: the texts and
    holders of every entity there, from its line (`node_from`: the store's reading of a row);
    their vectors are made in the background."""
    connection.execute("SET LOCAL statement_timeout = 0")
    with connection.cursor(name="kg_meaning_upgrade") as rows, connection.cursor() as writer:
        rows.execute(sql.UPGRADE_ENTITIES)
        while batch := rows.fetchmany(5_000):
            by_memory: dict[tuple[str, int], list[tuple[bytes, list[str]]]] = {}
            for memory, name, revision, line in batch:
                node = node_from(0, bytes(line))
                by_memory.setdefault((memory, int(revision)), []).append((bytes(name), list(node.record.observations)))
            for (memory, revision), entities in by_memory.items():
                add_texts(writer, memory, revision, [(name, text) for name, texts in entities for text in texts])
    connection.execute(sql.VERSION_3)


def add_texts(cursor: psycopg.Cursor[Any], memory: str, revision: int, held: Sequence[tuple[bytes, str]]) -> None:
    """Texts held by entities (name, text), written with their holders."""
    texts = {digest_of(text): text for _, text in held}
    digests = list(texts)
    for start in range(0, len(digests), CHUNK):
        part = digests[start:start + CHUNK]
        cursor.execute(sql.ADD_TEXTS, (memory, revision, part, [utf8(texts[digest]) for digest in part]))
    pairs = list(dict.fromkeys((name, digest_of(text)) for name, text in held))
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start:start + CHUNK]
        cursor.execute(sql.ADD_HOLDERS, (memory, [name for name, _ in chunk], [digest for _, digest in chunk]))


def written(connection: psycopg.Connection[Any], memory: str, before: Graph, rows: RowChanges, revision: int) -> None:
    """M1, M3: the texts and holders of what a write to `memory` changed (`before`: the graph it
    changed), in the write's transaction."""
    added: list[tuple[bytes, str]] = []
    removed: list[tuple[bytes, bytes]] = []
    for node in rows.entities:
        name = node.record.name
        old = before.entities.get(name)
        had = set(old.record.observations) if old is not None else set()
        has = set(node.record.observations)
        added += [(utf8(name), text) for text in node.record.observations if text not in had]
        removed += [(utf8(name), digest_of(text)) for text in had - has]
    with connection.cursor() as cursor:
        gone: list[bytes] = []
        if rows.gone_entities:
            names = [utf8(name) for name in rows.gone_entities]
            for start in range(0, len(names), CHUNK):
                cursor.execute(sql.DROP_HOLDERS_OF, (memory, names[start:start + CHUNK]))
                gone += [bytes(digest) for (digest,) in cursor.fetchall()]
        for start in range(0, len(removed), CHUNK):
            part = removed[start:start + CHUNK]
            cursor.execute(sql.DROP_HOLDERS, ([name for name, _ in part], [digest for _, digest in part], memory))
            gone += [digest for _, digest in part]
        if added:
            add_texts(cursor, memory, revision, added)
        dropped = 0
        unique = list(dict.fromkeys(gone))
        for start in range(0, len(unique), CHUNK):
            cursor.execute(sql.DROP_UNHELD, (memory, unique[start:start + CHUNK]))
            dropped += max(cursor.rowcount, 0)
        if dropped:
            cursor.execute(sql.COUNT_REMOVAL, (memory,))
