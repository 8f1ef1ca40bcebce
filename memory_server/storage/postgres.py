"""The memory in PostgreSQL: one memory for many servers, many memories in one database.

The database is the truth; each server keeps a replica of its memory as the same immutable
:class:`~memory_server.model.graph.Graph` the file store keeps, so that every tool answers
exactly as it does on a file (the same rules, the same ranking, the same pages), and brings
that replica up to date from the rows that changed before each answer.

Guarantees (each has a test in tests/test_postgres.py):

P1. Every write is one transaction. It first locks its memory's row in ``kg_memories``
    (``SELECT ... FOR UPDATE``), so writes to one memory are serialised across all servers,
    brings the replica up to date under that lock, applies the tool's rule to it, and writes
    only the rows that changed. Servers never lose each other's writes; a write that fails
    (the database went away, a rule was broken) changes nothing.
P2. Nobody sees half a write: the replica is brought up to date in one REPEATABLE READ
    transaction (one snapshot of the rows), and a server publishes a new replica by swapping
    one reference, as the file store does.
P3. Every answer reflects every write acknowledged before it was asked, by any server: a read
    first compares the memory's revision with the replica's (one round trip) and catches up.
P4. Memories are apart: every statement names its memory by a parameter; rows of one memory
    are never read or written by a server of another.
P5. SQL is parameterised, always: no name, observation or memory name is ever formatted into a
    statement (the statements below are constants).
P6. The schema is made on first use and its version recorded; a database whose schema is newer
    than this server understands is refused before anything is written.
P7. The database going away is a fault, not a crash: a call that cannot reach it within
    CONNECT_SECONDS ends with a GraphError that says so; the pool reconnects by itself when the
    database is back. A write whose commit was sent when the connection broke may or may not
    have landed (the database alone knows): it is reported as failed, and never half-made.
P8. Deleted rows are deleted (``DELETE``), not marked: what remains of them until VACUUM is
    PostgreSQL's own dead tuples (see docs/postgres.md for what an operator runs to purge them).

Names, types and lines are stored as UTF-8 ``bytea``: a name may hold any character the tools
accept (NUL included, which PostgreSQL's ``text`` cannot hold).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..model import graph as rules
from ..model.graph import EMPTY, Change, Graph, GraphError, RowChanges, Triple
from ..model.records import EntityRecord, Extended, RelationRecord, decode_file, decode_line
from ..retrieval import query as retrieval
from ..retrieval.paging import Facts
from .postgres_names import DEFAULT_MEMORY, memory_name_from, without_password
from .store import NotInMemory, WriteResult

if TYPE_CHECKING:
    from ..model.dates import Span

try:
    import psycopg
    import psycopg_pool
except ImportError as error:  # pragma: no cover - exercised by a subprocess without the extra
    raise ImportError("MEMORY_DATABASE_URL needs the PostgreSQL driver: pip install 'kg-memory-mcp[postgres]'") from error

log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 1
"""The version of the tables below; a database holding a newer one is refused (P6)."""
CONNECT_SECONDS: Final = 5.0
"""How long a call waits for a connection before it says the database is unreachable (P7)."""
STATEMENT_MILLISECONDS: Final = 30_000
"""A statement (a write waiting for another server's lock included) that runs longer is cancelled."""
POOL_SIZE: Final = 8
_SCHEMA_LOCK: Final = 0x6B675F6D656D  # pg_advisory_xact_lock key: one server creates the tables at a time

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS kg_schema (version integer NOT NULL)",
    """CREATE TABLE IF NOT EXISTS kg_memories (
        name text PRIMARY KEY,
        revision bigint NOT NULL DEFAULT 0,
        removals bigint NOT NULL DEFAULT 0,
        next_seq bigint NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS kg_entities (
        memory text NOT NULL REFERENCES kg_memories (name) ON DELETE CASCADE,
        name bytea NOT NULL,
        seq bigint NOT NULL,
        revision bigint NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (memory, name))""",
    "CREATE INDEX IF NOT EXISTS kg_entities_by_revision ON kg_entities (memory, revision)",
    """CREATE TABLE IF NOT EXISTS kg_relations (
        memory text NOT NULL REFERENCES kg_memories (name) ON DELETE CASCADE,
        source bytea NOT NULL,
        target bytea NOT NULL,
        relation_type bytea NOT NULL,
        seq bigint NOT NULL,
        revision bigint NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (memory, source, target, relation_type))""",
    "CREATE INDEX IF NOT EXISTS kg_relations_by_revision ON kg_relations (memory, revision)",
)
_SCHEMA_EXISTS: Final = "SELECT to_regclass('kg_schema') IS NOT NULL"
_SCHEMA_VERSION: Final = "SELECT max(version) FROM kg_schema"
_RECORD_VERSION: Final = "INSERT INTO kg_schema (version) VALUES (%s)"
_ADD_MEMORY: Final = "INSERT INTO kg_memories (name) VALUES (%s) ON CONFLICT (name) DO NOTHING"
_STATE: Final = "SELECT revision, removals, next_seq FROM kg_memories WHERE name = %s"
_LOCK_STATE: Final = _STATE + " FOR UPDATE"
_ENTITIES_SINCE: Final = "SELECT seq, line FROM kg_entities WHERE memory = %s AND revision > %s ORDER BY seq"
_RELATIONS_SINCE: Final = "SELECT seq, line FROM kg_relations WHERE memory = %s AND revision > %s ORDER BY seq"
_ENTITY_NAMES: Final = "SELECT name FROM kg_entities WHERE memory = %s"
_RELATION_KEYS: Final = "SELECT source, target, relation_type FROM kg_relations WHERE memory = %s"
_PUT_ENTITY: Final = """INSERT INTO kg_entities (memory, name, seq, revision, line) VALUES (%s, %s, %s, %s, %s)
    ON CONFLICT (memory, name) DO UPDATE SET revision = excluded.revision, line = excluded.line"""
_DROP_ENTITY: Final = "DELETE FROM kg_entities WHERE memory = %s AND name = %s"
_PUT_RELATION: Final = """INSERT INTO kg_relations (memory, source, target, relation_type, seq, revision, line)
    VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"""
_DROP_RELATION: Final = "DELETE FROM kg_relations WHERE memory = %s AND source = %s AND target = %s AND relation_type = %s"
_NEW_STATE: Final = "UPDATE kg_memories SET revision = %s, removals = %s, next_seq = %s WHERE name = %s"


class DatabaseUnreachable(GraphError):
    """The database could not be reached (or went away during the call); nothing was changed."""


@dataclass(frozen=True, slots=True)
class _Replica:
    graph: Graph
    revision: int
    removals: int


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _record_from(line: bytes) -> tuple[Any, dict[str, msgspec.Raw] | None]:
    """A row's record and the extra fields its line carries (a line this server wrote)."""
    item = decode_line(line, 0)
    if isinstance(item, Extended):
        return item.record, item.extra
    return item, None


def _node_from(seq: int, line: bytes) -> rules.Node:
    record, extra = _record_from(line)
    if not isinstance(record, EntityRecord):
        raise GraphError(f"The database holds an entity row that is not an entity: {line[:200]!r}")
    return rules.make_node(record, seq, extra)


def _edge_from(seq: int, line: bytes) -> rules.Edge:
    record, extra = _record_from(line)
    if not isinstance(record, RelationRecord):
        raise GraphError(f"The database holds a relation row that is not a relation: {line[:200]!r}")
    return rules.make_edge(record, seq, extra)


class PostgresStore:
    """The graph of one memory in a PostgreSQL database, safe to call from many threads, processes
    and machines. The same interface as :class:`~memory_server.storage.store.GraphStore`."""

    def __init__(self, url: str, memory: str = DEFAULT_MEMORY, *, connect_seconds: float = CONNECT_SECONDS,
                 clock: Callable[[], str] | None = None) -> None:
        """`clock`: the UTC stamp of now (see model.dates) that writes record; None records no dates."""
        self._clock = clock
        self.memory = memory_name_from(memory)
        self.where = f"memory {self.memory!r} in {without_password(url)}"
        self._pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=POOL_SIZE, open=False, timeout=connect_seconds,
            kwargs={"autocommit": True, "connect_timeout": max(1, round(connect_seconds)),
                    "options": f"-c statement_timeout={STATEMENT_MILLISECONDS}"},
            check=psycopg_pool.ConnectionPool.check_connection, reconnect_timeout=0,
            name="kg-memory")
        self._replica = _Replica(EMPTY, -1, 0)  # revision -1: nothing loaded yet
        self._catching_up = threading.Lock()
        self._ready = False
        self._ready_lock = threading.Lock()
        self._reported = -1  # the revision poll_external_change last reported (or this server wrote)
        self._opened = False

    # -- life ----------------------------------------------------------------------------------

    def look_ahead(self) -> None:
        """Starts connecting in the background; the first call waits for it (or says why not)."""
        if not self._opened:
            self._opened = True
            self._pool.open(wait=False)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        self.look_ahead()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        self.look_ahead()
        try:
            with self._pool.connection() as connection:
                if not self._ready:
                    self._make_schema(connection)
                yield connection
        except psycopg_pool.PoolTimeout:
            raise DatabaseUnreachable(f"The database is unreachable ({self.where}): no connection within "
                                      f"{self._pool.timeout:g} s. Nothing was changed; try again when it is back.") from None
        except psycopg.OperationalError as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise DatabaseUnreachable(f"The database is unreachable ({self.where}): {reason}. "
                                      "Nothing was changed by this call; try again.") from None

    def _make_schema(self, connection: psycopg.Connection[Any]) -> None:
        with self._ready_lock:
            if self._ready:
                return
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                exists = connection.execute(_SCHEMA_EXISTS).fetchone()
                version = connection.execute(_SCHEMA_VERSION).fetchone() if exists and exists[0] else None
                if version is not None and version[0] is not None and version[0] > SCHEMA_VERSION:
                    raise SchemaTooNew(f"The database ({self.where}) holds memory tables of version {version[0]}, "
                                       f"newer than this server's {SCHEMA_VERSION}: upgrade mcp-server-memory. "
                                       "Nothing was written.")
                for statement in _SCHEMA:
                    connection.execute(statement)
                if version is None or version[0] is None:
                    connection.execute(_RECORD_VERSION, (SCHEMA_VERSION,))
                connection.execute(_ADD_MEMORY, (self.memory,))
            self._ready = True

    # -- reads ---------------------------------------------------------------------------------

    def graph(self) -> Graph:
        """The memory as it is now (P3)."""
        with self._connection() as connection:
            return self._caught_up(connection)

    def read_graph(self) -> dict[str, Any]:
        return rules.read_graph(self.graph())

    def read_graph_for_pages(self, *, in_memory: bool = False) -> dict[str, Any]:
        if in_memory:
            raise NotInMemory  # every answer asks the database first: not on the event loop
        return rules.read_graph_for_pages(self.graph())

    def search_nodes(self, query: str, limit: int | None = None, *, characters: int | None = None,
                     in_memory: bool = False) -> dict[str, Any] | Facts:
        """The matches (see retrieval.query.matches); with `characters`, the answer made of their
        facts (retrieval.query.search), semantic candidates included."""
        if in_memory:
            raise NotInMemory
        if characters is None:
            return retrieval.matches(self.graph(), query, limit, ranked=self._with_terms)
        return retrieval.search(self.graph(), query, characters=characters, limit=limit, ranked=self._with_terms)

    def search_within(self, query: str, words: str, window: Span, *, explicit: bool,
                      limit: int | None = None) -> dict[str, Any] | None:
        """search_nodes within a time window (see retrieval.when.search)."""
        from ..retrieval import when

        return when.search(self._with_terms(self.graph()), query, words, window, explicit=explicit, limit=limit)

    def open_nodes(self, names: list[str], *, in_memory: bool = False) -> dict[str, Any]:
        if in_memory:
            raise NotInMemory
        return rules.open_nodes(self.graph(), names)

    def poll_external_change(self) -> bool:
        """True when another server changed the memory since this one last reported (or wrote);
        never raises (an unreachable database is reported to whoever reads or writes next)."""
        try:
            revision = self.graph_revision()
        except GraphError:
            return False
        if revision > self._reported:
            first, self._reported = self._reported < 0, revision
            return not first
        return False

    def graph_revision(self) -> int:
        with self._connection() as connection:
            self._caught_up(connection)
        return self._replica.revision

    def _with_terms(self, graph: Graph) -> Graph:
        """The graph with the ranking's index, kept on the replica for the next search."""
        if graph.terms is not None:
            return graph
        indexed = rules.with_term_index(graph)
        with self._catching_up:
            if self._replica.graph is graph:
                self._replica = _Replica(indexed, self._replica.revision, self._replica.removals)
        return indexed

    def _caught_up(self, connection: psycopg.Connection[Any], locked: tuple[int, int, int] | None = None) -> Graph:
        """The replica, brought up to the memory's revision (P2, P3). `locked`: the memory's row
        as a write read it with its lock held (no other write can commit meanwhile); else a read,
        which looks at the revision first and catches up in one snapshot when it moved."""
        if locked is not None:
            with self._catching_up:
                replica = self._replica
                if replica.revision == locked[0]:
                    return replica.graph
                graph = self._read_changes(connection, replica, *locked)
                self._replica = _Replica(graph, locked[0], locked[1])
                return graph
        row = connection.execute(_STATE, (self.memory,)).fetchone()
        revision = -1 if row is None else row[0]
        if self._replica.revision >= revision >= 0:
            return self._replica.graph
        with self._catching_up:
            replica = self._replica
            if replica.revision >= revision >= 0:
                return replica.graph
            with connection.transaction():
                connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                row = connection.execute(_STATE, (self.memory,)).fetchone()
                state = (0, 0, 0) if row is None else (row[0], row[1], row[2])
                graph = self._read_changes(connection, replica, *state)
            self._replica = _Replica(graph, state[0], state[1])
            return graph

    def _read_changes(self, connection: psycopg.Connection[Any], replica: _Replica, revision: int,
                      removals: int, next_seq: int) -> Graph:
        since = replica.revision  # -1 before the first load: every row
        if since < 0:
            # The first load reads the rows as the file store reads a file: all lines in one
            # decode (positions are then counted afresh; their order, all that answers use, is the
            # database's), then the word index, before the first answer.
            lines = [bytes(line) for (_, line) in connection.execute(_ENTITIES_SINCE, (self.memory, since))]
            lines += [bytes(line) for (_, line) in connection.execute(_RELATIONS_SINCE, (self.memory, since))]
            graph = rules.graph_from_lines(decode_file(b"\n".join(lines)))
            if graph.kept or graph.rejected:
                raise GraphError(f"The {self.where} holds rows this server cannot read; nothing was changed.")
            return rules.with_word_index(replace(graph, next_seq=max(next_seq, graph.next_seq)))
        entities = [_node_from(seq, bytes(line)) for seq, line in
                    connection.execute(_ENTITIES_SINCE, (self.memory, since))]
        relations = [_edge_from(seq, bytes(line)) for seq, line in
                     connection.execute(_RELATIONS_SINCE, (self.memory, since))]
        gone_entities: list[str] = []
        gone_relations: list[Triple] = []
        if removals != replica.removals:
            # Something was deleted by another server: which rows are still there, by key only.
            present = {bytes(name).decode("utf-8", "surrogatepass")
                       for (name,) in connection.execute(_ENTITY_NAMES, (self.memory,))}
            gone_entities = [name for name in replica.graph.entities if name not in present]
            keys = {tuple(bytes(part).decode("utf-8", "surrogatepass") for part in row)
                    for row in connection.execute(_RELATION_KEYS, (self.memory,))}
            gone_relations = [triple for triple in replica.graph.relations if triple not in keys]
        return rules.with_rows(replica.graph, RowChanges(entities, gone_entities, relations, gone_relations), next_seq)

    # -- writes --------------------------------------------------------------------------------

    def _now(self) -> str | None:
        return None if self._clock is None else self._clock()

    def create_entities(self, entities: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.create_entities(graph, entities, self._now()),
                           lambda _: ([item["name"] for item in entities], []), abandon)

    def create_relations(self, relations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.create_relations(graph, relations),
                           lambda _: ([], _triples(relations)), abandon)

    def add_observations(self, observations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.add_observations(graph, observations, self._now()),
                           lambda _: ([item["entityName"] for item in observations], []), abandon)

    def delete_entities(self, entity_names: list[str], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.delete_entities(graph, entity_names),
                           lambda _: (list(entity_names), []), abandon)

    def delete_observations(self, deletions: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.delete_observations(graph, deletions, self._now()),
                           lambda _: ([item["entityName"] for item in deletions], []), abandon)

    def delete_relations(self, relations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.delete_relations(graph, relations),
                           lambda _: ([], _triples(relations)), abandon)

    def merge(self, entities: list[rules.IncomingEntity], relations: list[rules.IncomingRelation]) -> WriteResult:
        """Another graph merged in (mcp-server-memory import) as one transaction."""
        return self._write(lambda graph: rules.merge_graph(graph, entities, relations, self._now()),
                           lambda _: (None, None))

    def _write(self, operation: Callable[[Graph], Change],
               where: Callable[[Graph], tuple[Iterable[str] | None, Iterable[Triple] | None]],
               abandon: threading.Event | None = None) -> WriteResult:
        """P1: lock the memory's row, catch up, apply the rule, write the rows that changed."""
        with self._connection() as connection:
            if abandon is not None and abandon.is_set():
                raise GraphError("The call was cancelled before it was written; nothing was changed.")
            try:
                with connection.transaction():
                    row = connection.execute(_LOCK_STATE, (self.memory,)).fetchone()
                    if row is None:  # its row was deleted by hand while this server ran: made again
                        connection.execute(_ADD_MEMORY, (self.memory,))
                        row = connection.execute(_LOCK_STATE, (self.memory,)).fetchone()
                    assert row is not None  # made just above, in this transaction
                    revision, removals, next_seq = row
                    before = self._caught_up(connection, (revision, removals, next_seq))
                    change = operation(before)
                    if not change.changed:
                        return WriteResult(change.value, False, [])
                    names, triples = where(before)
                    rows = rules.row_changes(before, change.graph, names, triples)
                    revision += 1
                    if rows.gone_entities or rows.gone_relations:
                        removals += 1
                    self._write_rows(connection, rows, revision)
                    connection.execute(_NEW_STATE, (revision, removals, change.graph.next_seq, self.memory))
            except psycopg.errors.QueryCanceled:
                raise GraphError(f"The write waited more than {STATEMENT_MILLISECONDS // 1000} s for the {self.where} "
                                 "(another server holds it); nothing was changed. Try again.") from None
            with self._catching_up:
                if self._replica.revision < revision:
                    self._replica = _Replica(change.graph, revision, removals)
                if self._reported == revision - 1:
                    self._reported = revision  # our own write: announced by the tool, not the poller
        return WriteResult(change.value, True, [])

    def _write_rows(self, connection: psycopg.Connection[Any], rows: RowChanges, revision: int) -> None:
        memory = self.memory
        with connection.cursor() as cursor:
            if rows.gone_relations:
                cursor.executemany(_DROP_RELATION, [(memory, *map(_utf8, triple)) for triple in rows.gone_relations])
            if rows.gone_entities:
                cursor.executemany(_DROP_ENTITY, [(memory, _utf8(name)) for name in rows.gone_entities])
            if rows.entities:
                cursor.executemany(_PUT_ENTITY, [(memory, _utf8(node.record.name), node.seq, revision, node.line)
                                                 for node in rows.entities])
            if rows.relations:
                cursor.executemany(_PUT_RELATION, [
                    (memory, _utf8(edge.record.source), _utf8(edge.record.target), _utf8(edge.record.relationType),
                     edge.seq, revision, edge.line) for edge in rows.relations])


class SchemaTooNew(GraphError):
    """The database's tables are of a newer version than this server understands (P6)."""


def _triples(relations: Sequence[dict[str, Any]]) -> list[Triple]:
    return [(item["from"], item["to"], item["relationType"]) for item in relations]
