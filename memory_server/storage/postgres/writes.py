"""What a store writes: each write one transaction under its memory's lock, on the rows its rule
reads (P1, P8, P10), the changed rows sent with their search columns (COPY for an import's many),
and a write the tables refuse told as such (P16, a role's missing privileges)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import psycopg

from ...index import ranking
from ...model.graph import Change, Graph, GraphError, Triple
from ...model.writes import RowChanges, row_changes, unique
from .faults import KeyTooLong, NotAllowed, reason_of
from .reads import subgraph
from .statements import (
    ADD_MEMORY,
    COPY_ENTITIES,
    COPY_RELATIONS,
    DROP_ENTITY,
    DROP_RELATION,
    ENTITIES_NAMED,
    LOCK_STATE,
    NEW_STATE,
    PUT_ENTITY,
    PUT_RELATION,
    RELATIONS_NAMED,
    RELATIONS_TOUCHING,
    STATEMENT_MILLISECONDS,
    Version,
    haystack_of,
    indexed_terms,
    utf8,
)

if TYPE_CHECKING:
    from .vectors import Meaning

COPY_ROWS: Final = 1_000
"""Rows beyond which a write sends its new rows with COPY rather than one INSERT each (an import)."""
KEY_BYTES: Final = 2_600
"""About what a key of the tables may hold (PostgreSQL's btree entries hold 2,704 bytes, with the
memory's name and the entry's own header): said in the error, not checked (a compressible key
holds more, and PostgreSQL is the judge)."""


def _too_long(rows: RowChanges | None) -> str:
    """The key among a write's new rows most likely to be the one the index refused: the longest."""
    if rows is None:
        return "A name"
    named = [(len(utf8(node.record.name)), f"The entity name {_shown(node.record.name)}") for node in rows.entities]
    named += [(sum(len(utf8(part)) for part in (r.source, r.target, r.relationType)),
               f"The relation {_shown(r.source)} {_shown(r.relationType)} {_shown(r.target)}")
              for r in (edge.record for edge in rows.relations)]
    if not named:
        return "A name"
    size, said = max(named)
    return f"{said} ({size:,} bytes)"


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else f"{text[:40]}…")


_TABLES: Final = ("kg_memories", "kg_entities", "kg_relations")
_WRITE_PRIVILEGES: Final = ("SELECT", "INSERT", "UPDATE", "DELETE")
# P5: the tables and privileges are parameters; has_table_privilege reads the session's role.
_MISSING_PRIVILEGES: Final = """SELECT t.name, p.privilege FROM unnest(%s::text[]) WITH ORDINALITY AS t (name, n),
    unnest(%s::text[]) WITH ORDINALITY AS p (privilege, m)
    WHERE NOT has_table_privilege(t.name, p.privilege) ORDER BY t.n, p.m"""


def _missing_privileges(connection: psycopg.Connection[Any]) -> str:
    """The privileges a write needs that the session's role lacks, said per table ("UPDATE, INSERT
    on kg_memories; ..."), or "" when it has them all (then something else refused it)."""
    missing: dict[str, list[str]] = {}
    for table, privilege in connection.execute(_MISSING_PRIVILEGES, (list(_TABLES), list(_WRITE_PRIVILEGES))):
        missing.setdefault(table, []).append(privilege)
    return "; ".join(f"{', '.join(privileges)} on {table}" for table, privileges in missing.items())


class Written(NamedTuple):
    """What a write did: the rule's change, and the rows it wrote (None: it changed nothing) and the
    memory's entity count after them."""

    change: Change
    rows: RowChanges | None
    entities: int


def write(connection: psycopg.Connection[Any], memory: str, where: str, meaning: Meaning,
          operation: Callable[[Graph], Change], names: Sequence[str] | None, triples: Sequence[Triple] | None,
          reads: RuleReads, abandon: threading.Event | None, *, unbounded: bool, report_lock: threading.Lock,
          reported: Callable[[Version, Version], None]) -> Written:
    """P1, P10: lock the memory's row, read the rows the rule reads, apply it, write what changed.
    `names`, `triples`: where the rule may change something (None: anywhere it read).
    `unbounded`: once the lock is held, no statement timeout (an import of a million rows).
    `report_lock` is held from just before the commit until `reported` (the memory's version before
    the write, and after it) has been called, which is then called under it."""
    if abandon is not None and abandon.is_set():
        raise GraphError("The call was cancelled before it was written; nothing was changed.")
    reporting = False  # holding report_lock (see PostgresStore.poll_external_change)
    rows: RowChanges | None = None
    try:
        with connection.transaction():
            row = connection.execute(LOCK_STATE, (memory,)).fetchone()
            was: Version = None if row is None else (int(row[0]), str(row[5]))
            if row is None:  # its row was deleted by hand while this server ran: made again
                connection.execute(ADD_MEMORY, (memory,))
                row = connection.execute(LOCK_STATE, (memory,)).fetchone()
            assert row is not None  # made just above, in this transaction
            if unbounded:
                connection.execute("SET LOCAL statement_timeout = 0")
            revision, removals, next_seq, entities, total_length, _ = row
            # An empty memory has no row to read (an import into a new memory reads none).
            before = _rows_for(connection, memory, reads if entities else RuleReads(()), next_seq)
            change = operation(before)
            if not change.changed:
                return Written(change, None, entities)
            rows = row_changes(before, change.graph, names, triples)
            revision += 1
            if rows.gone_entities or rows.gone_relations:
                removals += 1
            entities, total_length = _write_rows(connection, memory, before, rows, revision,
                                                 entities, total_length)
            meaning.written(connection, before, rows, revision)
            written = connection.execute(NEW_STATE, (revision, removals, change.graph.next_seq, entities,
                                                     total_length, memory)).fetchone()
            assert written is not None  # the row locked above
            report_lock.acquire()
            reporting = True
        reported(was, (revision, str(written[0])))
    except psycopg.errors.QueryCanceled:
        raise GraphError(f"The write waited more than {STATEMENT_MILLISECONDS // 1000} s for the {where} "
                         "(another server holds it); nothing was changed. Try again.") from None
    except psycopg.errors.ProgramLimitExceeded as error:
        raise KeyTooLong(f"{_too_long(rows)} is too long to be stored in the database ({reason_of(error)}): "
                         f"an entity's name, and a relation's from, to and type together, fit in about "
                         f"{KEY_BYTES:,} bytes of UTF-8. Shorten it. Nothing was changed.") from None
    except psycopg.errors.InsufficientPrivilege as error:
        missing = _missing_privileges(connection)
        raise NotAllowed(f"The role {connection.info.user!r} may not write the {where}: "
                         + (f"it lacks {missing}" if missing else reason_of(error))
                         + " (an operator can GRANT them). Nothing was changed.") from None
    finally:
        if reporting:
            report_lock.release()
    return Written(change, rows, entities)

def _write_rows(connection: psycopg.Connection[Any], memory: str, before: Graph, rows: RowChanges, revision: int,
                entities: int, total_length: int) -> tuple[int, int]:
    """The changed rows written, with their search columns; the memory's counts after them (P9)."""
    for name in rows.gone_entities:
        entities -= 1
        total_length -= ranking.entity_terms(before.entities[name].text)[1]
    fresh: list[tuple[Any, ...]] = []
    replaced: list[tuple[Any, ...]] = []
    for node in rows.entities:
        terms, length = ranking.entity_terms(node.text)
        old = before.entities.get(node.record.name)
        if old is None:
            entities += 1
        else:
            total_length -= ranking.entity_terms(old.text)[1]
        total_length += length
        (fresh if old is None else replaced).append(
            (memory, utf8(node.record.name), node.seq, revision, node.line, haystack_of(node.text), indexed_terms(terms),
             length))
    with connection.cursor() as cursor:
        if rows.gone_relations:
            cursor.executemany(DROP_RELATION, [(memory, *map(utf8, triple)) for triple in rows.gone_relations])
        if rows.gone_entities:
            cursor.executemany(DROP_ENTITY, [(memory, utf8(name)) for name in rows.gone_entities])
        if replaced:
            cursor.executemany(PUT_ENTITY, replaced)
        _put(cursor, PUT_ENTITY, COPY_ENTITIES, fresh)
        _put(cursor, PUT_RELATION, COPY_RELATIONS, [
            (memory, utf8(edge.record.source), utf8(edge.record.target), utf8(edge.record.relationType),
             edge.seq, revision, edge.line) for edge in rows.relations])
    return entities, total_length


def _put(cursor: psycopg.Cursor[Any], insert: str, copy_statement: str, rows: list[tuple[Any, ...]]) -> None:
    """New rows: an INSERT each, or COPY for many (an import)."""
    if len(rows) <= COPY_ROWS:
        if rows:
            cursor.executemany(insert, rows)
        return
    with cursor.copy(copy_statement) as copy:
        for row in rows:
            copy.write_row(row)


class RuleReads:
    """The rows a write's rule reads (P10): entities by name, relations by key, and the relations
    touching some names."""

    __slots__ = ("names", "triples", "touching")

    def __init__(self, names: Iterable[str], triples: Iterable[Triple] = (), touching: Iterable[str] = ()) -> None:
        self.names = unique(names)
        self.triples = list(dict.fromkeys(triples))
        self.touching = unique(touching)


def _rows_for(connection: psycopg.Connection[Any], memory: str, reads: RuleReads, next_seq: int) -> Graph:
    """The subgraph a write's rule runs on (P10), read under the memory's lock."""
    entity_rows: list[tuple[int, bytes]] = []
    relation_rows: dict[bytes, tuple[int, bytes]] = {}
    if reads.names:
        entity_rows = connection.execute(ENTITIES_NAMED, (memory, [utf8(name) for name in reads.names])).fetchall()
    if reads.triples:
        columns = [list(column) for column in zip(*((utf8(a), utf8(b), utf8(c)) for a, b, c in reads.triples), strict=True)]
        for seq, line in connection.execute(RELATIONS_NAMED, (*columns, memory)):
            relation_rows[bytes(line)] = (seq, line)
    if reads.touching:
        encoded = [utf8(name) for name in reads.touching]
        for seq, line in connection.execute(RELATIONS_TOUCHING, (memory, encoded, memory, encoded)):
            relation_rows[bytes(line)] = (seq, line)
    return subgraph(entity_rows, relation_rows.values(), next_seq)
