"""The memory in PostgreSQL: one memory for many servers, many memories in one database.

The database is the truth, and the database answers: a server keeps no copy of its memory. A read
fetches the rows it needs (the entities named, the candidates of a search, the relations touching
them) in one snapshot, makes a small :class:`~memory_server.model.graph.Graph` of them, and runs
the very code the file store runs on its whole graph (the same rules, the same ranking, the same
pages); a write does the same with the rows its rule reads. So a server needs memory for what it
answers, not for the memory: a million entities cost what ten thousand do.

Guarantees (each has a test in tests/test_postgres.py or tests/test_postgres_scale.py):

P1. Every write is one transaction. It first locks its memory's row in ``kg_memories``
    (``SELECT ... FOR UPDATE``), so writes to one memory are serialised across all servers, then
    reads the rows its rule reads (see :func:`_rows_for`), applies the tool's rule to them and
    writes only the rows that changed, with their search columns and the memory's counts.
    Servers never lose each other's writes; a write that fails (the database went away, a rule
    was broken) changes nothing.
P2. Nobody sees half a write: every answer is read in one snapshot of the rows (one statement, or
    one REPEATABLE READ READ ONLY transaction), and every write commits whole.
P3. Every answer reflects every write acknowledged before it was asked, by any server: it is read
    from the database when it is asked.
P4. Memories are apart: every statement names its memory by a parameter; rows of one memory
    are never read or written by a server of another.
P5. SQL is parameterised, always: no name, observation or memory name is ever formatted into a
    statement (the statements below are constants).
P6. The schema is made on first use and its version recorded; a database of a previous version
    (1 or 2) is upgraded in place, in one transaction, keeping every row; a database whose schema
    is newer than this server understands is refused before anything is written.
P7. The database going away is a fault, not a crash: a call that cannot reach it within
    CONNECT_SECONDS ends with a GraphError that says so; the pool reconnects by itself when the
    database is back, and never lends a connection whose session the database ended (it looks at
    the connection's socket, which costs no round trip, and asks the database only when the socket
    has something to say). A write whose commit was sent when the connection broke may or may not
    have landed (the database alone knows): it is reported as failed, and never half-made.
    "Unreachable" is said only when the database did not answer the pool's last attempt to
    connect: one that answered and refused (a wrong password) is told with what it said; while it
    accepts, a call finding all POOL_SIZE connections in use waits its turn, up to BUSY_SECONDS,
    and is then told the server is busy.
P8. Deleted rows are deleted (``DELETE``), not marked: what remains of them until VACUUM is
    PostgreSQL's own dead tuples (see docs/postgres.md for what an operator runs to purge them).
P9. The same query over the same graph answers the same on both stores (by words; by meaning: P11).
    A search reads a superset of its matches from the database: for the whole query, the rows
    whose ``haystack`` (the entity's lower-cased search text, NUL mapped to U+0001, a mapping
    character by character, which keeps containment) contains the mapped query; for words, the
    rows whose ``terms`` hold one of the query's terms, with the memory's entity count and total
    length from ``kg_memories``, which every write keeps exact. The exact rule then runs on them.
P10. A write's rule sees every row it reads: the entities it names (an entity's existence is all
    create_entities, create_relations and the merge read of others), the relations it names, and
    for delete_entities every relation touching a deleted name; ``next_seq`` comes from the
    memory's row. So a write on those rows changes exactly what it changes on the whole graph.
P11. Meaning, as on a file: the observations' vectors are kept in the database, one per distinct
    text and model, made once by one server in the background, and searched by pgvector's HNSW
    index where the extension is there, else by each server over the memory's vectors; the
    candidates are fused with the words by the file store's code (storage/postgres_vectors.py,
    M1-M6).
P12. A whole read of a memory (read_graph) made again after writes decodes only the rows written
    since the one before and shares every other entity and relation with it (see
    :func:`graph_again`): the cut answers a pager keeps of one memory hold its objects once, and
    forgetting one frees only what changed.
P13. The planner knows a memory's size, however it grew: once this server has written
    STATISTICS_ROWS rows to a memory, and again each time it has written as many rows as the
    memory held at its last look, it looks (in a thread of its own, after the write): when the
    planner expects fewer than half the memory's entities, or fewer than half its relations, it
    analyses the columns its plans rest on (``ANALYZE kg_entities (memory), kg_relations (memory,
    target)``). An import analyses the whole tables at its end. Else a memory grown by the tools
    in a table holding others looks like a row or two to the planner, which then reads every
    relation of the memory for each entity a search found, until autovacuum, which waits for a
    tenth of the whole table to change, analyses it (figures: docs/benchmarks.md, "Figures behind
    the code").
P14. Every search reads through the rows waiting in the GIN indexes' pending lists (a write adds
    its entity there, to be merged later, whichever memory it is in): the server bounds those lists
    to GIN_PENDING_KB on both indexes (their ``gin_pending_list_limit``) where it owns them, so that
    a search reads at most that much of them rather than PostgreSQL's default of 4 MB; a write that
    fills the list merges it, as before, a smaller piece each time.
P15. What a server keeps of a memory (its last whole read_graph, the last change its subscribers
    were told of) is keyed by the memory's :data:`Version`, which never repeats: a memory removed
    by hand and made again by as many writes is never taken for the one before.
P16. Every entity the tools accept is stored, whatever the length of its words: a term longer than
    INDEXED_TERM_BYTES is held in ``terms`` as a digest, which a search for it looks up (so a
    search still finds its holders, P9). Names and relation types are the tables' keys, and a
    btree entry holds at most about 2.7 kB: a write whose key does not fit is refused whole with
    a tool error naming it, and changes nothing (see :func:`_too_long`).

Names, types and lines are stored as UTF-8 ``bytea``: a name may hold any character the tools
accept (NUL included, which PostgreSQL's ``text`` cannot hold).
"""

from __future__ import annotations

import hashlib
import logging
import select
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec

from ... import background
from ...index import ranking
from ...index.search import FIELD_SEPARATOR
from ...model import graph as rules
from ...model import writes
from ...model.graph import Change, Edge, Graph, GraphError, Node, Triple
from ...model.records import EntityRecord, Extended, RelationRecord, decode_file, decode_line
from ...model.writes import RowChanges, unique
from ...retrieval import query as retrieval
from ...retrieval.paging import Facts
from .. import collector
from ..interface import StoreChoiceError
from ..store import NotInMemory, WriteResult
from . import vectors
from .names import DEFAULT_MEMORY, memory_name_from, without_fragments, without_password

if TYPE_CHECKING:
    from ...model.dates import Span

try:
    import psycopg
    import psycopg_pool
except ImportError as error:  # pragma: no cover - exercised by a subprocess without the extra
    raise ImportError("MEMORY_DATABASE_URL needs the PostgreSQL driver: pip install 'kg-memory-mcp[postgres]'") from error

log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 3
"""The version of the tables below (3: the meaning tables of postgres_vectors.py); versions 1 and 2
are upgraded, a newer one is refused (P6)."""
CONNECT_SECONDS: Final = 5.0
"""How long a call waits for a connection before it says the database is unreachable (P7)."""
STATEMENT_MILLISECONDS: Final = 30_000
"""A statement (a write waiting for another server's lock included) that runs longer is cancelled."""
POOL_SIZE: Final = 8
"""Connections a server keeps at most; calls beyond them wait their turn (P7)."""
BUSY_SECONDS: Final = STATEMENT_MILLISECONDS / 1000
"""How long a call waits for its turn while every connection is in use by others and the database
answers (as long as a statement may run), before it says the server is busy."""
KEEP_WHOLE_ENTITIES: Final = 20_000
"""A memory of at most this many entities is kept whole after a read_graph, for the next one
while no write comes (a read_graph of a larger one reads it again: a million entities are GBs)."""
COPY_ROWS: Final = 1_000
"""Rows beyond which a write sends its new rows with COPY rather than one INSERT each (an import)."""
STATISTICS_ROWS: Final = 1_000
"""Rows a server writes to a memory before it checks the planner's idea of the memory's size (P13);
a memory smaller than this is read as fast through any index."""
GIN_PENDING_KB: Final = 256
"""The most rows a GIN index of the server keeps waiting in its pending list, in kB (P14)."""
PENDING_LOCK_MILLISECONDS: Final = 200
"""How long a start waits to bound the pending lists (P14) before it leaves that to a later start."""
INDEXED_TERM_BYTES: Final = 1_000
"""A term longer than this (in UTF-8) is held in ``terms`` as a digest (P16): a GIN entry holds at
most about 2.7 kB, and a base64 blob in an observation is one word."""
TRIGRAM_CHARACTERS: Final = 3
"""A whole query shorter than this has no trigram to look up: its candidates are found by a scan."""
_SCHEMA_LOCK: Final = 0x6B675F6D656D  # pg_advisory_xact_lock key: one server makes the tables at a time
_NUL_STAND_IN: Final = "\x01"
"""What NUL (the field separator, and a character a name may hold) is in ``haystack``: text cannot hold NUL."""

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
_CLEAN_PENDING: Final = """SELECT gin_clean_pending_list(index.oid) FROM pg_class AS index
    WHERE index.relname IN ('kg_entities_by_term', 'kg_entities_by_trigram') AND index.relkind = 'i'
    AND pg_table_is_visible(index.oid)"""
_EXPECTED_ENTITIES: Final = "EXPLAIN (FORMAT JSON) SELECT 1 FROM kg_entities WHERE memory = %s"
_EXPECTED_RELATIONS: Final = "EXPLAIN (FORMAT JSON) SELECT 1 FROM kg_relations WHERE memory = %s"
_RELATIONS_UP_TO: Final = "SELECT count(*) FROM (SELECT 1 FROM kg_relations WHERE memory = %s LIMIT %s) AS counted"
_ANALYSE_MEMORY_COLUMNS: Final = "ANALYZE kg_entities (memory), kg_relations (memory, target)"
# P14, P5: the indexes' names are the schema's own, and each statement a constant.
_UNLIMITED_PENDING: Final = f"""SELECT index.relname FROM pg_class AS index
    WHERE index.relname IN ('kg_entities_by_term', 'kg_entities_by_trigram') AND index.relkind = 'i'
    AND pg_table_is_visible(index.oid)
    AND NOT coalesce(index.reloptions @> ARRAY['gin_pending_list_limit={GIN_PENDING_KB}'], false)"""
_LIMIT_PENDING: Final = {name: f"ALTER INDEX {name} SET (gin_pending_list_limit = {GIN_PENDING_KB})"
                         for name in ("kg_entities_by_term", "kg_entities_by_trigram")}
_SCHEMA_EXISTS: Final = "SELECT to_regclass('kg_schema') IS NOT NULL"
_SCHEMA_VERSION: Final = "SELECT max(version) FROM kg_schema"
_RECORD_VERSION: Final = "INSERT INTO kg_schema (version) VALUES (%s)"
_ADD_MEMORY: Final = "INSERT INTO kg_memories (name) VALUES (%s) ON CONFLICT (name) DO NOTHING"
# A memory's version (see Version): its revision, and the transaction that wrote its row (xmin).
_REVISION: Final = "SELECT revision, xmin::text FROM kg_memories WHERE name = %s"
_LOCK_STATE: Final = ("SELECT revision, removals, next_seq, entities, total_length, xmin::text FROM kg_memories "
                      "WHERE name = %s FOR UPDATE")
_COUNTS: Final = "SELECT next_seq, entities, total_length FROM kg_memories WHERE name = %s"
_ALL_ENTITIES: Final = "SELECT line FROM kg_entities WHERE memory = %s ORDER BY seq"
_ALL_RELATIONS: Final = "SELECT line FROM kg_relations WHERE memory = %s ORDER BY seq"
_ENTITIES_NAMED: Final = "SELECT seq, line FROM kg_entities WHERE memory = %s AND name = ANY(%s)"


def _with_touching(condition: str) -> str:
    """The entities of a memory meeting `condition` (a constant; its one parameter is %(value)s),
    and every relation touching one of them, in one statement: (seq, line, None, None, None) for an
    entity, (seq, None, source, target, type) for a relation (one between two of them comes twice;
    its line is not sent: a read shows a relation's key, and never writes it back).

    The relations are looked up entity by entity in their indexes (OFFSET 0 keeps the planner from
    joining them whole instead, which reads every relation of the memory when it misjudges how
    many entities match). The planner's choices rest on the tables' statistics: an import, which
    makes a large memory at once, analyses the tables when it is done (see :meth:`PostgresStore.merge`)."""
    return f"""WITH found AS MATERIALIZED (
            SELECT name, seq, line FROM kg_entities WHERE memory = %(memory)s AND {condition})
        SELECT seq, line, NULL::bytea, NULL::bytea, NULL::bytea FROM found
        UNION ALL SELECT r.* FROM found, LATERAL (SELECT seq, NULL::bytea, source, target, relation_type
            FROM kg_relations WHERE memory = %(memory)s AND source = found.name OFFSET 0) AS r
        UNION ALL SELECT r.* FROM found, LATERAL (SELECT seq, NULL::bytea, source, target, relation_type
            FROM kg_relations WHERE memory = %(memory)s AND target = found.name OFFSET 0) AS r"""


_NAMED_TOUCHING: Final = _with_touching("name = ANY(%(value)s)")
_CONTAINING: Final = _with_touching("haystack LIKE %(value)s")
_CONTAINING_SCAN: Final = _with_touching("strpos(haystack, %(value)s) > 0")
_HOLDING: Final = _with_touching("terms && %(value)s::text[]")
_RELATIONS_TOUCHING: Final = """SELECT seq, line FROM kg_relations WHERE memory = %s AND source = ANY(%s)
    UNION SELECT seq, line FROM kg_relations WHERE memory = %s AND target = ANY(%s)"""
_RELATIONS_NAMED: Final = """SELECT r.seq, r.line FROM kg_relations AS r
    JOIN unnest(%s::bytea[], %s::bytea[], %s::bytea[]) AS wanted (source, target, relation_type)
    ON r.source = wanted.source AND r.target = wanted.target AND r.relation_type = wanted.relation_type
    WHERE r.memory = %s"""
_PUT_ENTITY: Final = """INSERT INTO kg_entities (memory, name, seq, revision, line, haystack, terms, length)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (memory, name) DO UPDATE SET revision = excluded.revision, line = excluded.line,
    haystack = excluded.haystack, terms = excluded.terms, length = excluded.length"""
_COPY_ENTITIES: Final = "COPY kg_entities (memory, name, seq, revision, line, haystack, terms, length) FROM STDIN"
_DROP_ENTITY: Final = "DELETE FROM kg_entities WHERE memory = %s AND name = %s"
_PUT_RELATION: Final = """INSERT INTO kg_relations (memory, source, target, relation_type, seq, revision, line)
    VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"""
_COPY_RELATIONS: Final = "COPY kg_relations (memory, source, target, relation_type, seq, revision, line) FROM STDIN"
_DROP_RELATION: Final = "DELETE FROM kg_relations WHERE memory = %s AND source = %s AND target = %s AND relation_type = %s"
_NEW_STATE: Final = """UPDATE kg_memories SET revision = %s, removals = %s, next_seq = %s, entities = %s,
    total_length = %s WHERE name = %s RETURNING xmin::text"""


def _still_there(connection: psycopg.Connection[Any]) -> None:
    """The pool's check of an idle connection before it lends it (P7), without a round trip for a
    sound one: a server that ended the session (a restart, a terminated backend) has said so on the
    socket and closed it, so the socket reads; only then is the connection asked (psycopg's own
    check), which raises when it is gone. A round trip per call cost as much as a search's statement."""
    if connection.closed or connection.broken or connection.pgconn.status != psycopg.pq.ConnStatus.OK:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    if readable:
        psycopg_pool.ConnectionPool.check_connection(connection)


class DatabaseUnreachable(GraphError):
    """The database could not be reached (or went away during the call); nothing was changed."""


class KeyTooLong(GraphError):
    """A name or relation type too long for the tables' keys (P16); nothing was changed."""


KEY_BYTES: Final = 2_600
"""About what a key of the tables may hold (PostgreSQL's btree entries hold 2,704 bytes, with the
memory's name and the entry's own header): said in the error, not checked (a compressible key
holds more, and PostgreSQL is the judge)."""


def _too_long(rows: RowChanges | None) -> str:
    """The key among a write's new rows most likely to be the one the index refused: the longest."""
    if rows is None:
        return "A name"
    named = [(len(_utf8(node.record.name)), f"The entity name {_shown(node.record.name)}") for node in rows.entities]
    named += [(sum(len(_utf8(part)) for part in (r.source, r.target, r.relationType)),
               f"The relation {_shown(r.source)} {_shown(r.relationType)} {_shown(r.target)}")
              for r in (edge.record for edge in rows.relations)]
    if not named:
        return "A name"
    size, said = max(named)
    return f"{said} ({size:,} bytes)"


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else f"{text[:40]}…")


class DatabaseBusy(GraphError):
    """Every connection of the server was in use by other calls for longer than a call waits; the
    database answers. Nothing was changed."""


class NotAllowed(GraphError):
    """The role of MEMORY_DATABASE_URL lacks a privilege the call needs; nothing was changed."""


_TABLES: Final = ("kg_memories", "kg_entities", "kg_relations")
_TABLES_SAID: Final = "kg_schema, kg_memories, kg_entities and kg_relations"
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


class DatabaseRefused(GraphError):
    """The database answered, and refused this server's connection (a wrong password, a role or a
    database that does not exist); nothing was changed."""


_CONNECTION_LOST: Final = ("08", "57P")
"""SQLSTATE classes of a session that ended (a connection exception, an operator or a crash): the
database is then unreachable, for this call. An OperationalError of another class was answered."""
_AUTHENTICATION: Final = ("authentication failed", "no pg_hba.conf entry", "no password supplied",
                          "password is required", "does not exist")
"""What libpq's message says when the fault is in MEMORY_DATABASE_URL's user, password or database."""


def _refusal(message: str) -> str | None:
    """What the database said when it refused a connection (its FATAL line, which names the user,
    never the password), or None when it did not answer (libpq's message for a connection it
    could not make holds the server's own line only when the server answered)."""
    for line in message.splitlines():
        if "FATAL:" in line:
            return without_password(line.split("FATAL:", 1)[1].strip())
        if "fe_sendauth: no password supplied" in line:
            return "the database asks for a password, and MEMORY_DATABASE_URL gives none"
    return None


class SchemaTooNew(GraphError):
    """The database's tables are of a newer version than this server understands (P6)."""


def _reason(error: BaseException) -> str:
    """The first line of an error's message, for a person, with any password in it masked."""
    text = str(error).strip()
    return without_password(text.splitlines()[0]) if text else type(error).__name__


class _Masked(logging.Filter):
    """The pool's log lines (a failed connection's message) with any password in them masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = without_password(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


logging.getLogger("psycopg.pool").addFilter(_Masked())


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def indexed_term(term: str) -> str:
    """A term as ``terms`` holds it (P16): itself, or, longer than INDEXED_TERM_BYTES, a digest of
    it that no term can be (a term is letters and digits; a digest begins with "#")."""
    if len(term) * 4 <= INDEXED_TERM_BYTES or len(_utf8(term)) <= INDEXED_TERM_BYTES:
        return term
    return "#" + hashlib.blake2b(_utf8(term), digest_size=16).hexdigest()


def indexed_terms(terms: Iterable[str]) -> list[str]:
    return [indexed_term(term) for term in terms]


def haystack_of(text: str) -> str:
    """An entity's search text as ``haystack`` holds it (P9): NUL, which text cannot hold, mapped."""
    return text.replace(FIELD_SEPARATOR, _NUL_STAND_IN)


def like_pattern(needle: str) -> str:
    """The LIKE pattern of rows whose haystack contains the (lower-cased) needle: its wildcards escaped."""
    escaped = haystack_of(needle).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _record_from(line: bytes) -> tuple[Any, dict[str, msgspec.Raw] | None]:
    """A row's record and the extra fields its line carries (a line this server wrote)."""
    item = decode_line(line, 0)
    if isinstance(item, Extended):
        return item.record, item.extra
    return item, None


def _node_from(seq: int, line: bytes) -> Node:
    record, extra = _record_from(line)
    if not isinstance(record, EntityRecord):
        raise GraphError(f"The database holds an entity row that is not an entity: {line[:200]!r}")
    return rules.make_node(record, seq, extra, line=line)


def _edge_from(seq: int, line: bytes) -> Edge:
    record, extra = _record_from(line)
    if not isinstance(record, RelationRecord):
        raise GraphError(f"The database holds a relation row that is not a relation: {line[:200]!r}")
    return rules.make_edge(record, seq, extra, line=line)


def _key(edge: Edge) -> Triple:
    record = edge.record
    return record.source, record.target, record.relationType


def subgraph(entity_rows: Iterable[tuple[int, bytes]], relation_rows: Iterable[tuple[int, bytes]] = (),
             next_seq: int = 0) -> Graph:
    """The graph of some rows of a memory, each in its place (seq), as the rules read a whole one."""
    # (psycopg gives bytea as bytes.)
    nodes = sorted((_node_from(seq, line) for seq, line in entity_rows), key=_seq)
    edges = sorted((_edge_from(seq, line) for seq, line in relation_rows), key=_seq)
    relations = {_key(edge): edge for edge in edges}
    links: defaultdict[str, set[Triple]] = defaultdict(set)
    for triple in relations:
        links[triple[0]].add(triple)
        links[triple[1]].add(triple)
    return Graph({node.record.name: node for node in nodes}, relations, dict(links), next_seq=next_seq)


def graph_again(before: Graph, entity_lines: Sequence[bytes], relation_lines: Sequence[bytes],
                next_seq: int) -> Graph:
    """The graph of a memory's lines (what PostgresStore._graph_of makes of them) made from an
    earlier read of it, `before` (P12): an entity or relation whose line is the same is the same
    node or edge (its place updated), so only the rows written since are decoded, and the answers
    of the earlier reads share their objects with this one's. A pager keeping a few cut read_graph
    answers (paging.KEPT_ANSWERS) then holds one memory's objects, not one copy of them per read,
    and forgetting the oldest frees a few objects, not a whole memory's, whose cost would fall on
    whichever answer made the pager forget it, as often as not a search."""
    nodes = {node.line: node for node in before.entities.values()}
    edges = {edge.line: edge for edge in before.relations.values()}
    entities: dict[str, Node] = {}
    for seq, line in enumerate(entity_lines):
        node = nodes.get(line)
        if node is None:
            node = _node_from(seq, line)
        elif node.seq != seq:  # (an entity before it was deleted)
            node = node._replace(seq=seq)
        entities[node.record.name] = node
    relations: dict[Triple, Edge] = {}
    links: defaultdict[str, set[Triple]] = defaultdict(set)
    for seq, line in enumerate(relation_lines):
        edge = edges.get(line)
        if edge is None:
            edge = _edge_from(seq, line)
        elif edge.seq != seq:
            edge = edge._replace(seq=seq)
        triple = _key(edge)
        relations[triple] = edge
        links[triple[0]].add(triple)
        links[triple[1]].add(triple)
    return Graph(entities, relations, dict(links), next_seq=max(next_seq, len(entities), len(relations)))


def _union(graphs: Sequence[Graph]) -> Graph:
    """The rows of several reads of one snapshot as one graph, each in its place."""
    entities = {name: node for graph in graphs for name, node in graph.entities.items()}
    relations = {triple: edge for graph in graphs for triple, edge in graph.relations.items()}
    links: defaultdict[str, set[Triple]] = defaultdict(set)
    ordered = dict(sorted(relations.items(), key=lambda item: item[1].seq))
    for triple in ordered:
        links[triple[0]].add(triple)
        links[triple[1]].add(triple)
    return Graph(dict(sorted(entities.items(), key=lambda item: item[1].seq)), ordered, dict(links))


def _seq(item: Node | Edge) -> int:
    return item.seq


class _Lengths(Mapping[str, int]):
    """The lengths of the entities a search read, counting as many entities as the memory holds:
    all that ranking.rank reads of the lengths (the count, and the length of each holder)."""

    def __init__(self, known: Mapping[str, int], count: int) -> None:
        self._known = known
        self._count = count

    def __getitem__(self, name: str) -> int:
        return self._known[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return self._count


class _MemoryTerms:
    """ranking.Terms of a memory from the holders of a query's terms and the memory's counts: the
    postings of those terms are all there (every holder was read), the statistics are the memory's."""

    def __init__(self, holders: Graph, entities: int, total: int) -> None:
        built = ranking.TermIndex.build((name, node.text) for name, node in holders.entities.items())
        self.postings = built.postings
        self.lengths = _Lengths(built.lengths, entities)
        self.total = total


class _Read:
    """The rows one statement of :func:`_with_touching` read: the graph of its entities, and the
    keys of the relations touching them, each once, in graph order. Made into Edges (a whole
    :class:`Graph`) only when a rule needs them; a search's answer only needs the views of those
    touching its matches (:meth:`touching`): a search of a million entities reads 40,000."""

    __slots__ = ("entities", "relations")

    def __init__(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self.entities = subgraph([(seq, line) for seq, line, source, _, _ in rows if source is None])
        places: dict[tuple[bytes, bytes, bytes], int] = {}  # (one between two entities read comes twice)
        for seq, _, source, target, kind in rows:
            if source is not None:
                places[source, target, kind] = seq
        self.relations = [(seq, _text(source), _text(target), _text(kind))
                          for (source, target, kind), seq in sorted(places.items(), key=_second)]

    def touching(self, names: AbstractSet[str]) -> list[dict[str, Any]]:
        """The views of the relations read with an end in `names`, in graph order (as
        rules.relations_touching gives them on the whole graph)."""
        return [{"from": source, "to": target, "relationType": kind} for _, source, target, kind in self.relations
                if source in names or target in names]

    def graph(self) -> Graph:
        relations: dict[Triple, Edge] = {}
        links: defaultdict[str, set[Triple]] = defaultdict(set)
        for seq, name, other, label in self.relations:
            triple = (name, other, label)
            # (A read's relations keep no line: it is never written back from a read.)
            relations[triple] = Edge(RelationRecord(name, other, label),
                                     {"from": name, "to": other, "relationType": label}, seq, b"")
            links[name].add(triple)
            links[other].add(triple)
        return replace(self.entities, relations=relations, links=dict(links))


def _second(item: tuple[Any, int]) -> int:
    return item[1]


def _text(column: bytes) -> str:
    return column.decode("utf-8", "surrogatepass")


class _Snapshot:
    """The reads of one answer: one statement, or several in one REPEATABLE READ READ ONLY transaction (P2)."""

    def __init__(self, connection: psycopg.Connection[Any], memory: str, trigrams: bool) -> None:
        self._connection = connection
        self._memory = memory
        self._trigrams = trigrams
        self._counts: tuple[int, int, int] | None = None

    def _read(self, statement: str, value: Any) -> _Read:
        """The rows a statement of :func:`_with_touching` finds: the entities, and the relations touching them."""
        # Not prepared: a search's plan depends on its pattern (an index for a rare one, a scan else).
        # In binary: the lines (bytea) come as they are, not in hex, which doubles what is sent and
        # which both ends would encode and decode (a tenth of a search's statement at 10,000 entities).
        rows = self._connection.execute(statement, {"memory": self._memory, "value": value}, prepare=False,
                                        binary=True).fetchall()
        with collector.paused():
            return _Read(rows)

    def _graph(self, statement: str, value: Any) -> Graph:
        """The graph of the entities a statement of :func:`_with_touching` finds, with the relations touching them."""
        return self._read(statement, value).graph()

    def named(self, names: Iterable[str]) -> Graph:
        return self._graph(_NAMED_TOUCHING, [_utf8(name) for name in unique(names)])

    def containing(self, needle: str) -> _Read:
        """A superset of the entities whose search text contains the lower-cased needle (P9)."""
        if self._trigrams and len(needle) >= TRIGRAM_CHARACTERS:
            return self._read(_CONTAINING, like_pattern(needle))
        return self._read(_CONTAINING_SCAN, haystack_of(needle))

    def holding(self, terms: Sequence[str]) -> _Read:
        # A long term is looked up as the index holds it, and as it is (a row written before
        # INDEXED_TERM_BYTES held it whole, when it fitted).
        looked_up = [*(indexed_term(term) for term in terms), *(term for term in terms if indexed_term(term) != term)]
        return self._read(_HOLDING, looked_up)

    def every_line(self) -> tuple[list[bytes], list[bytes]]:
        """Every row's line: the entities', and the relations', each in graph order."""
        return ([bytes(line) for (line,) in self._connection.execute(_ALL_ENTITIES, (self._memory,))],
                [bytes(line) for (line,) in self._connection.execute(_ALL_RELATIONS, (self._memory,))])

    def version(self) -> Version:
        return _version_of(self._connection.execute(_REVISION, (self._memory,)).fetchone())

    def counts(self) -> tuple[int, int, int]:
        """The memory's next position, entity count and total length (as of the snapshot)."""
        if self._counts is None:
            row = self._connection.execute(_COUNTS, (self._memory,)).fetchone()
            self._counts = (0, 0, 0) if row is None else (row[0], row[1], row[2])
        return self._counts


Version = tuple[int, str] | None
"""What a memory is at: its revision and the transaction that last wrote its row (None: it has no
row). A revision alone repeats: a memory removed by hand (``DELETE FROM kg_memories``) and made
again counts from 0, and after as many writes as it had, its revision is the old one's. The
transaction does not: every write makes a new version of the row, in a transaction of its own."""


def _version_of(row: tuple[Any, ...] | None) -> Version:
    return None if row is None else (int(row[0]), str(row[1]))


class PostgresStore:
    """The graph of one memory in a PostgreSQL database, safe to call from many threads, processes
    and machines. The same interface as :class:`~memory_server.storage.store.GraphStore`."""

    def __init__(self, url: str, memory: str = DEFAULT_MEMORY, *, connect_seconds: float = CONNECT_SECONDS,
                 busy_seconds: float = BUSY_SECONDS, clock: Callable[[], str] | None = None) -> None:
        """`clock`: the UTC stamp of now (see model.dates) that writes record; None records no dates."""
        self._clock = clock
        self.memory = memory_name_from(memory)
        try:  # read here, so that a string libpq cannot read is said at start, and said once
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as error:
            raise StoreChoiceError("MEMORY_DATABASE_URL is not a connection string PostgreSQL reads "
                                   f"({without_fragments(_reason(error))})") from None
        self.where = f"memory {self.memory!r} in {without_password(url)}"
        # What the database said to this server's last attempt to connect: None once it accepted
        # one, else (what it said when it refused, or None when it did not answer; the reason) (P7).
        self._connect_fault: tuple[str | None, str] | None = (None, f"no connection within {connect_seconds:g} s")
        self._busy_seconds = busy_seconds
        self._pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=POOL_SIZE, open=False, timeout=connect_seconds,
            connection_class=self._connection_class(),
            kwargs={"autocommit": True, "connect_timeout": max(1, round(connect_seconds)),
                    # No JIT: a search over many rows is costed high enough to be compiled first,
                    # which takes longer than the statement itself.
                    "options": f"-c statement_timeout={STATEMENT_MILLISECONDS} -c jit=off"},
            check=_still_there, reconnect_timeout=0,
            name="kg-memory")
        self._ready = False
        self._ready_lock = threading.Lock()
        self._trigrams = False
        # The version poll_external_change last reported (or this server wrote), once it has looked;
        # under _report_lock, which a write holds from just before its commit until it has set it.
        self._reported: Version = None
        self._looked = False
        self._report_lock = threading.Lock()
        self._kept: tuple[Version, Graph] | None = None  # read_graph's last whole memory, at its version
        self._opened = False
        # P13: rows written since this server last looked at the planner's statistics, and the
        # memory's rows then (as far as it counted them).
        self._written_since_look = 0
        self._rows_at_look = 0
        self._entities_written = 0  # the memory's entity count after this server's last write
        self._statistics_lock = threading.Lock()
        # Set while no look is running: a look is work of the process's Background, and close waits for it.
        self._statistics_idle = threading.Event()
        self._statistics_idle.set()
        self._meaning = vectors.Meaning(self, _node_from)  # P11: the vectors' writes, embedder and searches

    def _connection_class(self) -> type[psycopg.Connection[Any]]:
        """psycopg's connection, which records in this store how each attempt to connect ended (the
        pool logs it, and tells a call waiting for a connection only that none came)."""
        store = self

        class Connection(psycopg.Connection[Any]):
            @classmethod
            def connect(cls, *args: Any, **kwargs: Any) -> Any:
                try:
                    connection = super().connect(*args, **kwargs)
                except psycopg.OperationalError as error:
                    store._connect_fault = (_refusal(str(error)), _reason(error))
                    raise
                store._connect_fault = None
                return connection

        return Connection

    # -- life ----------------------------------------------------------------------------------

    def look_ahead(self) -> None:
        """Starts connecting in the background; the first call waits for it (or says why not)."""
        if not self._opened:
            self._opened = True
            self._pool.open(wait=False)

    def close(self) -> None:
        # A look ends within STATEMENT_MILLISECONDS at worst; the pool closes after it.
        self._statistics_idle.wait(STATEMENT_MILLISECONDS / 1000 + 1)
        self._meaning.close()  # after the batch it is embedding (P11)
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        self.look_ahead()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _lend(self) -> psycopg.Connection[Any]:
        """A connection of the pool (P7). While the database accepted the pool's last attempt to
        connect, a call finding every connection in use waits its turn (the calls a transport admits
        at once outnumber the connections), up to `busy_seconds`; then it is told the server is busy.
        PoolTimeout when no connection came and the database did not accept the last attempt."""
        waited = 0.0
        while True:
            try:
                return self._pool.getconn()
            except psycopg_pool.PoolTimeout:
                waited += self._pool.timeout
                if self._connect_fault is not None:
                    raise
                if waited >= self._busy_seconds:
                    raise DatabaseBusy(f"This server's {POOL_SIZE} connections to the database ({self.where}) were all "
                                       f"in use by other calls for {waited:g} s. Nothing was changed; try again.") from None

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        self.look_ahead()
        try:
            connection = self._lend()
            try:
                with connection:  # (as the pool's own context: a transaction left open is rolled back)
                    if not self._ready:
                        self._make_schema(connection)
                    yield connection
            finally:
                self._pool.putconn(connection)
        except psycopg_pool.PoolTimeout:
            fault = self._connect_fault
            if fault is not None and fault[0] is not None:
                refusal = fault[0]
                hint = (": check the user, password and database of MEMORY_DATABASE_URL"
                        if any(phrase in refusal for phrase in _AUTHENTICATION) else "")
                raise DatabaseRefused(f"The database refused the connection ({self.where}): {refusal}{hint}. "
                                      "Nothing was changed.") from None
            why = "no connection" if fault is None else fault[1]
            raise DatabaseUnreachable(f"The database is unreachable ({self.where}): {why}. "
                                      "Nothing was changed; try again when it is back.") from None
        except psycopg.errors.InsufficientPrivilege as error:
            raise NotAllowed(f"The database refused this call ({self.where}): {_reason(error)}. Reading a memory "
                             f"needs SELECT on {_TABLES_SAID}; writing it, INSERT, UPDATE and DELETE too; the first "
                             "start on a database, CREATE on its schema. Nothing was changed.") from None
        except psycopg.OperationalError as error:
            reason = _reason(error)
            if error.sqlstate is not None and not error.sqlstate.startswith(_CONNECTION_LOST):
                # The database answered, and could not do it (a limit, a statement cancelled).
                raise GraphError(f"The database could not do this call ({self.where}): {reason}. "
                                 "Nothing was changed.") from None
            raise DatabaseUnreachable(f"The database is unreachable ({self.where}): {reason}. "
                                      "Nothing was changed by this call; try again.") from None

    @contextmanager
    def _snapshot(self) -> Iterator[_Snapshot]:
        """Reads in one REPEATABLE READ READ ONLY transaction (P2), begun in one round trip."""
        with self._connection() as connection:
            connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield _Snapshot(connection, self.memory, self._trigrams)
            except BaseException:
                if connection.info.transaction_status != psycopg.pq.TransactionStatus.UNKNOWN:
                    connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    @contextmanager
    def _statement(self) -> Iterator[_Snapshot]:
        """A read of one statement, which is one snapshot by itself (P2): no transaction to begin."""
        with self._connection() as connection:
            yield _Snapshot(connection, self.memory, self._trigrams)

    def _make_schema(self, connection: psycopg.Connection[Any]) -> None:
        with self._ready_lock:
            if self._ready:
                return
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                exists = connection.execute(_SCHEMA_EXISTS).fetchone()
                row = connection.execute(_SCHEMA_VERSION).fetchone() if exists and exists[0] else None
                version = None if row is None else row[0]
                if version is not None and version > SCHEMA_VERSION:
                    raise SchemaTooNew(f"The database ({self.where}) holds memory tables of version {version}, "
                                       f"newer than this server's {SCHEMA_VERSION}: upgrade mcp-server-memory. "
                                       "Nothing was written.")
                if version == 1:
                    # An upgrade (or an index made on the rows there) runs as long as the rows ask.
                    connection.execute("SET LOCAL statement_timeout = 0")
                    self._upgrade_from_1(connection)
                if version != SCHEMA_VERSION:
                    # Only when they are not all there: CREATE INDEX, even IF NOT EXISTS, waits for every
                    # open write (an import of a million rows) before it looks.
                    for statement in _SCHEMA:
                        connection.execute(statement)
                    vectors.make_schema(connection, self.where)
                if version in (1, 2):
                    vectors.upgrade(connection, _node_from)
                if version is None:
                    connection.execute(_RECORD_VERSION, (SCHEMA_VERSION,))
                self._trigrams = self._make_trigram_index(connection)
                self._limit_pending(connection)
            # The memory's row is made by its first write, not here: a role that may only read
            # reads (a memory without a row is empty).
            self._ready = True

    def _make_trigram_index(self, connection: psycopg.Connection[Any]) -> bool:
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
            reason = _reason(error)
        except psycopg.Error as error:  # not installed on the server, or in a schema not on the path
            reason = _reason(error)
        row = connection.execute(_HAS_TRIGRAM_INDEX).fetchone()
        if row is not None and row[0]:
            return True  # made by someone who could
        log.warning("%s: no trigram index (pg_trgm: %s); a search for a whole query reads every row of the "
                    "memory. An operator can run CREATE EXTENSION pg_trgm in the database.", self.where, reason)
        return False

    def _limit_pending(self, connection: psycopg.Connection[Any]) -> None:
        """P14: the GIN indexes' pending lists bounded to GIN_PENDING_KB, where it is not yet (one
        catalog read at start). ALTER INDEX locks the index against every reader while it waits for
        the writes under way (an import of a million rows): it waits PENDING_LOCK_MILLISECONDS at
        most, and the next start tries again. A role that does not own the indexes is only logged:
        their lists are then PostgreSQL's default, 4 MB."""
        unbounded = connection.execute(_UNLIMITED_PENDING).fetchall()
        if not unbounded:
            return
        connection.execute(f"SET LOCAL lock_timeout = {PENDING_LOCK_MILLISECONDS}")
        for (name,) in unbounded:
            try:
                with connection.transaction():  # a savepoint: a refusal leaves the rest standing
                    connection.execute(_LIMIT_PENDING[name])
            except psycopg.errors.LockNotAvailable:
                log.info("%s: %s is busy; its pending list is bounded at a later start", self.where, name)
            except psycopg.Error as error:
                log.warning("%s: could not bound the pending list of %s (%s); each search reads through up to "
                            "4 MB of rows waiting there", self.where, name,
                            _reason(error))
        connection.execute("SET LOCAL lock_timeout = DEFAULT")

    def _upgrade_from_1(self, connection: psycopg.Connection[Any]) -> None:
        """Version 1's tables made version 2's (P6), in the caller's transaction: the search columns
        of every entity are worked out from its line, here, as a write would have made them."""
        log.warning("%s: upgrading the memory tables from version 1 to %d", self.where, SCHEMA_VERSION)
        for statement in _UPGRADE:
            connection.execute(statement)
        connection.execute(_UPGRADE_TEMPORARY)
        # A batch at a time (a COPY cannot run while the rows are fetched on the same connection).
        with connection.cursor(name="kg_upgrade_rows") as rows, connection.cursor() as writer:
            rows.execute(_UPGRADE_ROWS)
            while batch := rows.fetchmany(5_000):
                with writer.copy(_UPGRADE_FILL) as copy:
                    for memory, name, line in batch:
                        node = _node_from(0, bytes(line))
                        terms, length = ranking.entity_terms(node.text)
                        copy.write_row((memory, bytes(name), haystack_of(node.text), indexed_terms(terms), length))
        connection.execute(_UPGRADE_APPLY)
        for statement in _UPGRADE_DONE:
            connection.execute(statement)

    # -- reads ---------------------------------------------------------------------------------

    def graph(self) -> Graph:
        """The memory as it is now, whole (P2, P3): for the command line and read_graph."""
        with self._snapshot() as snapshot:
            next_seq = snapshot.counts()[0]
            entity_lines, relation_lines = snapshot.every_line()
        return self._graph_of([*entity_lines, *relation_lines], next_seq)

    def _graph_of(self, lines: list[bytes], next_seq: int) -> Graph:
        graph = rules.graph_from_lines(decode_file(b"\n".join(lines)))
        if graph.kept or graph.rejected:
            raise GraphError(f"The {self.where} holds rows this server cannot read; nothing was changed.")
        return replace(graph, next_seq=max(next_seq, graph.next_seq))

    def read_graph(self) -> dict[str, Any]:
        return rules.read_graph(self._whole())

    def read_graph_for_pages(self, *, in_memory: bool = False) -> dict[str, Any]:
        if in_memory:
            raise NotInMemory  # every answer asks the database first: not on the event loop
        return rules.read_graph_for_pages(self._whole())

    def _whole(self) -> Graph:
        """The whole memory for read_graph: the one read last while no write came since (its
        version is the memory's: P3), kept for a memory of at most KEEP_WHOLE_ENTITIES."""
        kept = self._kept
        if kept is not None and kept[0] == self._version():
            return kept[1]
        with self._snapshot() as snapshot:
            version = snapshot.version()
            next_seq = snapshot.counts()[0]
            entity_lines, relation_lines = snapshot.every_line()
        if kept is None:
            graph = self._graph_of([*entity_lines, *relation_lines], next_seq)
        else:
            graph = graph_again(kept[1], entity_lines, relation_lines, next_seq)
        self._kept = (version, graph) if len(graph.entities) <= KEEP_WHOLE_ENTITIES else None
        return graph

    def search_nodes(self, query: str, limit: int | None = None, *, characters: int | None = None,
                     in_memory: bool = False) -> dict[str, Any] | Facts:
        """The matches (see retrieval.query.matches); with `characters`, the answer made of their
        facts (retrieval.query.search), with the candidates by meaning (P11)."""
        if in_memory:
            raise NotInMemory
        # Most queries are answered by the whole query, from one statement; the others are read
        # again in one snapshot with the entities holding their words.
        with collector.paused():
            with self._statement() as single:
                found = single.containing(query.lower())
            matched: Sequence[Node] | None = retrieval.contains_query(found.entities, query)
            if matched is None:
                with self._snapshot() as snapshot:
                    found, matched = self._matched(snapshot, query)
            if limit is not None and characters is None:
                matched = matched[:limit]
            # (retrieval.found on the whole graph: the matches, and the relations touching them)
            value = {"entities": [node.view for node in matched],
                     "relations": found.touching({node.record.name for node in matched})}
            if characters is None:
                return value
            return self._meaning.answer(query, value, characters=characters, limit=limit)

    def _matched(self, snapshot: _Snapshot, query: str) -> tuple[_Read, Sequence[Node]]:
        """Rules 1 and 2 (retrieval.query.rule) on the candidates the database gives (P9): the rows
        of the candidates read (with every relation touching them), and the matches, best first."""
        read: list[_Read] = []

        def containing(whole: str) -> list[Node] | None:
            candidates = snapshot.containing(whole.lower())
            read.append(candidates)
            return retrieval.contains_query(candidates.entities, whole)

        def by_words(words: str) -> list[Node]:
            wanted = ranking.query_terms(words, question_words=ranking.DEFAULT.question_words)
            holders = snapshot.holding(wanted) if wanted else _Read(())
            _, entities, total = snapshot.counts()
            holders.entities = replace(holders.entities, terms=cast(
                "ranking.TermIndex", _MemoryTerms(holders.entities, entities, total)))
            read.append(holders)
            return retrieval.ranked_by_words(holders.entities, words)

        matched = retrieval.rule(containing, by_words, query)
        return read[-1], matched

    def search_within(self, query: str, words: str, window: Span, *, explicit: bool,
                      limit: int | None = None) -> dict[str, Any] | None:
        """search_nodes within a time window (see retrieval.when.search), on every entity it may
        answer with (P9): those containing the query or its words whole, and those holding a term of
        its words, with the memory's statistics. Words without a topic ("what happened last week")
        may be answered by any entity of the window: the whole memory is read for them."""
        from ...retrieval import when

        if not when._content_terms(words):  # every entity within the window answers
            return when.search(self.graph(), query, words, window, explicit=explicit, limit=limit)
        wanted = ranking.query_terms(words, question_words=ranking.DEFAULT.question_words)
        with self._snapshot() as snapshot:
            read = [snapshot.containing(query.lower()).graph(), snapshot.containing(words.lower()).graph()]
            if wanted:
                read.append(snapshot.holding(wanted).graph())
            _, entities, total = snapshot.counts()
        candidates = _union(read)
        candidates = replace(candidates, terms=cast("ranking.TermIndex", _MemoryTerms(candidates, entities, total)))
        return when.search(candidates, query, words, window, explicit=explicit, limit=limit)

    def open_nodes(self, names: list[str], *, in_memory: bool = False) -> dict[str, Any]:
        if in_memory:
            raise NotInMemory
        with self._statement() as single:
            found = single.named(names)
        return rules.open_nodes(found, names)

    def poll_external_change(self) -> bool:
        """True when another server changed the memory since this one last reported (or wrote);
        never raises (an unreachable database is reported to whoever reads or writes next)."""
        try:
            # The version is read and compared under the lock a write holds across its commit: a
            # version read before this server's own write committed is never taken for a change.
            with self._connection() as connection, self._report_lock:
                version = _version_of(connection.execute(_REVISION, (self.memory,)).fetchone())
                if not self._looked:
                    self._looked, self._reported = True, version
                    return False
                if version != self._reported:
                    self._reported = version
                    return True
                return False
        except GraphError:
            return False

    def graph_revision(self) -> int:
        version = self._version()
        return 0 if version is None else version[0]

    def _version(self) -> Version:
        with self._connection() as connection:
            return _version_of(connection.execute(_REVISION, (self.memory,)).fetchone())

    # -- writes --------------------------------------------------------------------------------

    def _now(self) -> str | None:
        return None if self._clock is None else self._clock()

    def create_entities(self, entities: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        names = [item["name"] for item in entities]
        return self._write(lambda graph: writes.create_entities(graph, entities, self._now()),
                           names, [], _Reads(names), abandon)

    def create_relations(self, relations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        triples = _triples(relations)
        return self._write(lambda graph: writes.create_relations(graph, relations), [], triples,
                           _Reads([name for triple in triples for name in triple[:2]], triples), abandon)

    def add_observations(self, observations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        names = [item["entityName"] for item in observations]
        return self._write(lambda graph: writes.add_observations(graph, observations, self._now()),
                           names, [], _Reads(names), abandon)

    def delete_entities(self, entity_names: list[str], *, abandon: threading.Event | None = None) -> WriteResult:
        names = list(entity_names)
        return self._write(lambda graph: writes.delete_entities(graph, names), names, [],
                           _Reads(names, touching=names), abandon)

    def delete_observations(self, deletions: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        names = [item["entityName"] for item in deletions]
        return self._write(lambda graph: writes.delete_observations(graph, deletions, self._now()),
                           names, [], _Reads(names), abandon)

    def delete_relations(self, relations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        triples = _triples(relations)
        return self._write(lambda graph: writes.delete_relations(graph, relations), [], triples,
                           _Reads([], triples), abandon)

    def merge(self, entities: list[writes.IncomingEntity], relations: list[writes.IncomingRelation]) -> WriteResult:
        """Another graph merged in (mcp-server-memory import) as one transaction."""
        names = [record.name for record, _ in entities]
        triples = [(record.source, record.target, record.relationType) for record, _ in relations]
        reads = _Reads([*names, *(name for triple in triples for name in triple[:2])], triples)
        result = self._write(lambda graph: writes.merge_graph(graph, entities, relations, self._now()),
                             None, None, reads, unbounded=True)
        if len(entities) + len(relations) > COPY_ROWS:
            self._analyse()
            with self._statistics_lock:
                self._written_since_look = 0
                self._rows_at_look = self._entities_written + len(relations)
        else:
            self._look_at_statistics(len(entities) + len(relations), self._entities_written)
        return result

    def _look_at_statistics(self, written: int, entities: int) -> None:
        """After a write of `written` rows that left `entities` in the memory: the planner's
        statistics looked at in the background when enough was written since the last look (P13)."""
        with self._statistics_lock:
            self._written_since_look += written
            if self._written_since_look < max(STATISTICS_ROWS, self._rows_at_look):
                return
            if not self._statistics_idle.is_set():
                return  # looking already: the next write that finds it done looks again
            self._written_since_look = 0
            self._statistics_idle.clear()
        if not background.process().submit(partial(self._refresh_statistics, entities)):
            self._statistics_idle.set()  # the process is ending: nothing to look for

    def _refresh_statistics(self, entities: int) -> None:
        try:
            self._look_at_plans(entities)
        finally:
            self._statistics_idle.set()

    def _look_at_plans(self, entities: int) -> None:
        """P13: the memory's columns analysed when the planner expects fewer than half its entities
        or relations (these counted up to twice what it expects, at most). A fault (the database
        gone, a role that may not analyse) is logged; the next look tries again."""
        try:
            with self._connection() as connection:
                expected_entities = _plan_rows(connection.execute(_EXPECTED_ENTITIES, (self.memory,)).fetchone())
                expected_relations = _plan_rows(connection.execute(_EXPECTED_RELATIONS, (self.memory,)).fetchone())
                row = connection.execute(_RELATIONS_UP_TO, (self.memory, 2 * expected_relations + 1)).fetchone()
                relations = 0 if row is None else int(row[0])
                with self._statistics_lock:
                    self._rows_at_look = entities + relations
                if 2 * expected_entities >= entities and relations <= 2 * expected_relations:
                    return
                log.info("%s: the planner expects %d entities and %d relations of %d and %s: analysing the memory's "
                         "columns", self.where, expected_entities, expected_relations, entities,
                         relations if relations <= 2 * expected_relations else f"more than {relations - 1}")
                connection.execute(_ANALYSE_MEMORY_COLUMNS)
        except (GraphError, psycopg.Error) as error:
            log.warning("%s: could not look at the tables' statistics (%s); autovacuum will analyse them in time",
                        self.where, _reason(error))

    def _analyse(self) -> None:
        """The tables' statistics made afresh after a large import, so that the planner knows the
        new memory's size at once (autovacuum would, later), and the GIN indexes' pending lists
        merged into them: an import's rows wait there (up to gin_pending_list_limit, 4 MB), which
        every search then reads through, and which the planner costs so high that it scans the
        memory's rows instead of the trigram index. A role that may not is only logged."""
        try:
            with self._connection() as connection:
                connection.execute("SET statement_timeout = 0")
                try:
                    connection.execute(_CLEAN_PENDING)
                    connection.execute("ANALYZE kg_entities, kg_relations")
                finally:
                    connection.execute(f"SET statement_timeout = {STATEMENT_MILLISECONDS}")
        except (GraphError, psycopg.Error) as error:  # (the import is committed: this is no fault of it)
            log.warning("%s: could not analyse the tables after an import (%s); autovacuum will", self.where,
                        _reason(error))

    def _write(self, operation: Callable[[Graph], Change], names: Sequence[str] | None,
               triples: Sequence[Triple] | None, reads: _Reads, abandon: threading.Event | None = None, *,
               unbounded: bool = False) -> WriteResult:
        """P1, P10: lock the memory's row, read the rows the rule reads, apply it, write what changed.
        `names`, `triples`: where the rule may change something (None: anywhere it read).
        `unbounded`: once the lock is held, no statement timeout (an import of a million rows)."""
        with self._connection() as connection:
            if abandon is not None and abandon.is_set():
                raise GraphError("The call was cancelled before it was written; nothing was changed.")
            reporting = False  # holding _report_lock (see poll_external_change)
            rows: RowChanges | None = None
            try:
                with connection.transaction():
                    row = connection.execute(_LOCK_STATE, (self.memory,)).fetchone()
                    was: Version = None if row is None else (int(row[0]), str(row[5]))
                    if row is None:  # its row was deleted by hand while this server ran: made again
                        connection.execute(_ADD_MEMORY, (self.memory,))
                        row = connection.execute(_LOCK_STATE, (self.memory,)).fetchone()
                    assert row is not None  # made just above, in this transaction
                    if unbounded:
                        connection.execute("SET LOCAL statement_timeout = 0")
                    revision, removals, next_seq, entities, total_length, _ = row
                    # An empty memory has no row to read (an import into a new memory reads none).
                    before = _rows_for(connection, self.memory, reads if entities else _Reads(()), next_seq)
                    change = operation(before)
                    if not change.changed:
                        return WriteResult(change.value, False, [])
                    rows = writes.row_changes(before, change.graph, names, triples)
                    revision += 1
                    if rows.gone_entities or rows.gone_relations:
                        removals += 1
                    entities, total_length = self._write_rows(connection, before, rows, revision,
                                                              entities, total_length)
                    self._meaning.written(connection, before, rows, revision)
                    written = connection.execute(_NEW_STATE, (revision, removals, change.graph.next_seq, entities,
                                                              total_length, self.memory)).fetchone()
                    assert written is not None  # the row locked above
                    self._report_lock.acquire()
                    reporting = True
                if self._looked and self._reported == was:
                    self._reported = (revision, str(written[0]))  # our own write: announced by the tool, not the poller
            except psycopg.errors.QueryCanceled:
                raise GraphError(f"The write waited more than {STATEMENT_MILLISECONDS // 1000} s for the {self.where} "
                                 "(another server holds it); nothing was changed. Try again.") from None
            except psycopg.errors.ProgramLimitExceeded as error:
                raise KeyTooLong(f"{_too_long(rows)} is too long to be stored in the database ({_reason(error)}): "
                                 f"an entity's name, and a relation's from, to and type together, fit in about "
                                 f"{KEY_BYTES:,} bytes of UTF-8. Shorten it. Nothing was changed.") from None
            except psycopg.errors.InsufficientPrivilege as error:
                missing = _missing_privileges(connection)
                raise NotAllowed(f"The role {connection.info.user!r} may not write the {self.where}: "
                                 + (f"it lacks {missing}" if missing else _reason(error))
                                 + " (an operator can GRANT them). Nothing was changed.") from None
            finally:
                if reporting:
                    self._report_lock.release()
        self._meaning.wake()
        self._entities_written = entities
        if not unbounded:  # (see merge)
            self._look_at_statistics(len(rows.entities) + len(rows.relations), entities)
        return WriteResult(change.value, True, [])

    def _write_rows(self, connection: psycopg.Connection[Any], before: Graph, rows: RowChanges, revision: int,
                    entities: int, total_length: int) -> tuple[int, int]:
        """The changed rows written, with their search columns; the memory's counts after them (P9)."""
        memory = self.memory
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
                (memory, _utf8(node.record.name), node.seq, revision, node.line, haystack_of(node.text), indexed_terms(terms),
                 length))
        with connection.cursor() as cursor:
            if rows.gone_relations:
                cursor.executemany(_DROP_RELATION, [(memory, *map(_utf8, triple)) for triple in rows.gone_relations])
            if rows.gone_entities:
                cursor.executemany(_DROP_ENTITY, [(memory, _utf8(name)) for name in rows.gone_entities])
            if replaced:
                cursor.executemany(_PUT_ENTITY, replaced)
            _put(cursor, _PUT_ENTITY, _COPY_ENTITIES, fresh)
            _put(cursor, _PUT_RELATION, _COPY_RELATIONS, [
                (memory, _utf8(edge.record.source), _utf8(edge.record.target), _utf8(edge.record.relationType),
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


class _Reads:
    """The rows a write's rule reads (P10): entities by name, relations by key, and the relations
    touching some names."""

    __slots__ = ("names", "triples", "touching")

    def __init__(self, names: Iterable[str], triples: Iterable[Triple] = (), touching: Iterable[str] = ()) -> None:
        self.names = unique(names)
        self.triples = list(dict.fromkeys(triples))
        self.touching = unique(touching)


def _rows_for(connection: psycopg.Connection[Any], memory: str, reads: _Reads, next_seq: int) -> Graph:
    """The subgraph a write's rule runs on (P10), read under the memory's lock."""
    entity_rows: list[tuple[int, bytes]] = []
    relation_rows: dict[bytes, tuple[int, bytes]] = {}
    if reads.names:
        entity_rows = connection.execute(_ENTITIES_NAMED, (memory, [_utf8(name) for name in reads.names])).fetchall()
    if reads.triples:
        columns = [list(column) for column in zip(*((_utf8(a), _utf8(b), _utf8(c)) for a, b, c in reads.triples), strict=True)]
        for seq, line in connection.execute(_RELATIONS_NAMED, (*columns, memory)):
            relation_rows[bytes(line)] = (seq, line)
    if reads.touching:
        encoded = [_utf8(name) for name in reads.touching]
        for seq, line in connection.execute(_RELATIONS_TOUCHING, (memory, encoded, memory, encoded)):
            relation_rows[bytes(line)] = (seq, line)
    return subgraph(entity_rows, relation_rows.values(), next_seq)


def _plan_rows(row: tuple[Any, ...] | None) -> int:
    """The rows the planner expects, from the answer of an EXPLAIN (FORMAT JSON)."""
    return 0 if row is None else int(row[0][0]["Plan"]["Plan Rows"])


def _triples(relations: Sequence[dict[str, Any]]) -> list[Triple]:
    return [(item["from"], item["to"], item["relationType"]) for item in relations]
