"""The store of one memory in PostgreSQL: its connections (a pool, and what a call is told when the
database is away, refuses or is busy: P7), its life, and the store's interface, each call made of
the package's reads, writes, schema and statistics. The guarantees are the package's (__init__.py)."""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Any, Final, cast

from ...index import ranking
from ...model import graph as rules
from ...model import writes
from ...model.graph import Change, Graph, GraphError, Triple
from ...model.items import Entity, ObservationsToAdd, ObservationsToDelete, Relation
from .. import collector
from ..interface import MeaningModel, Queued, StoreChoiceError, Until
from ..store import NotInMemory, WriteResult
from . import schema, vectors
from .faults import DatabaseBusy, DatabaseRefused, DatabaseUnreachable, NotAllowed, reason_of
from .names import DEFAULT_MEMORY, memory_name_from, without_fragments, without_password
from .reads import MemoryTerms, Snapshot, graph_again, graph_of, node_from, subgraph, union
from .statements import REVISION, STATEMENT_MILLISECONDS, Version, version_of
from .statistics import Statistics
from .writes import COPY_ROWS, RuleReads, write

try:
    import psycopg
    import psycopg_pool
except ImportError as error:  # pragma: no cover - exercised by a subprocess without the extra
    raise ImportError("MEMORY_DATABASE_URL needs the PostgreSQL driver: pip install 'kg-memory-mcp[postgres]'") from error

CONNECT_SECONDS: Final = 5.0
"""How long a call waits for a connection before it says the database is unreachable (P7)."""
POOL_SIZE: Final = 8
"""Connections a server keeps at most; calls beyond them wait their turn (P7)."""
BUSY_SECONDS: Final = STATEMENT_MILLISECONDS / 1000
"""How long a call waits for its turn while every connection is in use by others and the database
answers (as long as a statement may run), before it says the server is busy."""
KEEP_WHOLE_ENTITIES: Final = 20_000
"""A memory of at most this many entities is kept whole after a read_graph, for the next one
while no write comes (a read_graph of a larger one reads it again: a million entities are GBs)."""
_TABLES_SAID: Final = "kg_schema, kg_memories, kg_entities and kg_relations"


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


class _Masked(logging.Filter):
    """The pool's log lines (a failed connection's message) with any password in them masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = without_password(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


logging.getLogger("psycopg.pool").addFilter(_Masked())


class PostgresStore:
    """The graph of one memory in a PostgreSQL database, safe to call from many threads, processes
    and machines. The same interface as :class:`~memory_server.storage.store.GraphStore`."""

    def __init__(self, url: str, memory: str = DEFAULT_MEMORY, *, connect_seconds: float = CONNECT_SECONDS,
                 busy_seconds: float = BUSY_SECONDS, clock: Callable[[], str] | None = None,
                 meaning: MeaningModel | None = None) -> None:
        """`clock`: the UTC stamp of now (see model.dates) that writes record; None records no dates.
        `meaning`: the model of meaning its searches and embedder use (P11; the adapter gives
        retrieval's); None answers by words alone."""
        self._clock = clock
        self.memory = memory_name_from(memory)
        try:  # read here, so that a string libpq cannot read is said at start, and said once
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as error:
            raise StoreChoiceError("MEMORY_DATABASE_URL is not a connection string PostgreSQL reads "
                                   f"({without_fragments(reason_of(error))})") from None
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
        self._entities_written = 0  # the memory's entity count after this server's last write
        self._statistics = Statistics(self._connection, self.memory, self.where)  # P13
        self._meaning = vectors.Meaning(self, node_from, meaning)  # P11: the vectors' writes, embedder and searches

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
                    store._connect_fault = (_refusal(str(error)), reason_of(error))
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
        self._statistics.close()  # the pool closes after a look under way
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
            raise NotAllowed(f"The database refused this call ({self.where}): {reason_of(error)}. Reading a memory "
                             f"needs SELECT on {_TABLES_SAID}; writing it, INSERT, UPDATE and DELETE too; the first "
                             "start on a database, CREATE on its schema. Nothing was changed.") from None
        except psycopg.OperationalError as error:
            reason = reason_of(error)
            if error.sqlstate is not None and not error.sqlstate.startswith(_CONNECTION_LOST):
                # The database answered, and could not do it (a limit, a statement cancelled).
                raise GraphError(f"The database could not do this call ({self.where}): {reason}. "
                                 "Nothing was changed.") from None
            raise DatabaseUnreachable(f"The database is unreachable ({self.where}): {reason}. "
                                      "Nothing was changed by this call; try again.") from None

    @contextmanager
    def _snapshot(self) -> Iterator[Snapshot]:
        """Reads in one REPEATABLE READ READ ONLY transaction (P2), begun in one round trip."""
        with self._connection() as connection:
            connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield Snapshot(connection, self.memory, self._trigrams)
            except BaseException:
                if connection.info.transaction_status != psycopg.pq.TransactionStatus.UNKNOWN:
                    connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    @contextmanager
    def _statement(self) -> Iterator[Snapshot]:
        """A read of one statement, which is one snapshot by itself (P2): no transaction to begin."""
        with self._connection() as connection:
            yield Snapshot(connection, self.memory, self._trigrams)

    def _make_schema(self, connection: psycopg.Connection[Any]) -> None:
        with self._ready_lock:
            if self._ready:
                return
            self._trigrams = schema.make(connection, self.where)
            # The memory's row is made by its first write, not here: a role that may only read
            # reads (a memory without a row is empty).
            self._ready = True

    # -- reads ---------------------------------------------------------------------------------

    def graph(self) -> Graph:
        """The memory as it is now, whole (P2, P3): for the command line and read_graph."""
        with self._snapshot() as snapshot:
            next_seq = snapshot.counts()[0]
            entity_lines, relation_lines = snapshot.every_line()
        return graph_of([*entity_lines, *relation_lines], next_seq, self.where)

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
            graph = graph_of([*entity_lines, *relation_lines], next_seq, self.where)
        else:
            graph = graph_again(kept[1], entity_lines, relation_lines, next_seq)
        self._kept = (version, graph) if len(graph.entities) <= KEEP_WHOLE_ENTITIES else None
        return graph

    @contextmanager
    def sources(self, *, in_memory: bool = False) -> Iterator[Sequence[_DatabaseCandidates]]:
        """Where a search's candidates come from (retrieval/search.py's CandidateSource): the
        database, every read of one answer in one snapshot (P2, P9). `in_memory`: none, as every
        answer asks the database first (not on the event loop)."""
        if in_memory:
            yield ()
            return
        with collector.paused(), ExitStack() as reads:
            yield (_DatabaseCandidates(self, reads),)

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
                version = version_of(connection.execute(REVISION, (self.memory,)).fetchone())
                if not self._looked:
                    self._looked, self._reported = True, version
                    return False
                if version != self._reported:
                    self._reported = version
                    return True
                return False
        except GraphError:
            return False

    def wait_until(self, condition: Until | Queued, timeout: float) -> bool:
        """See interface.py: a database's store has the embedder's condition."""
        if condition is Until.EMBEDDED:
            return self._meaning.wait_embedded(timeout)
        raise ValueError(f"a database's store never waits for {condition}")

    def graph_revision(self) -> int:
        version = self._version()
        return 0 if version is None else version[0]

    def _version(self) -> Version:
        with self._connection() as connection:
            return version_of(connection.execute(REVISION, (self.memory,)).fetchone())

    # -- writes --------------------------------------------------------------------------------

    def _now(self) -> str | None:
        return None if self._clock is None else self._clock()

    def create_entities(self, entities: Sequence[Entity], *, author: str | None = None,
                        abandon: threading.Event | None = None) -> WriteResult:
        names = [item.name for item in entities]
        return self._write(lambda graph: writes.create_entities(graph, entities, self._now(), author),
                           names, [], RuleReads(names), abandon)

    def create_relations(self, relations: Sequence[Relation], *, abandon: threading.Event | None = None) -> WriteResult:
        triples = [writes.triple_of(item) for item in relations]
        return self._write(lambda graph: writes.create_relations(graph, relations), [], triples,
                           RuleReads([name for triple in triples for name in triple[:2]], triples), abandon)

    def add_observations(self, observations: Sequence[ObservationsToAdd], *, author: str | None = None,
                         abandon: threading.Event | None = None) -> WriteResult:
        names = [item.entity_name for item in observations]
        return self._write(lambda graph: writes.add_observations(graph, observations, self._now(), author),
                           names, [], RuleReads(names), abandon)

    def delete_entities(self, entity_names: Sequence[str], *, abandon: threading.Event | None = None) -> WriteResult:
        names = list(entity_names)
        return self._write(lambda graph: writes.delete_entities(graph, names), names, [],
                           RuleReads(names, touching=names), abandon)

    def delete_observations(self, deletions: Sequence[ObservationsToDelete], *,
                            abandon: threading.Event | None = None) -> WriteResult:
        names = [item.entity_name for item in deletions]
        return self._write(lambda graph: writes.delete_observations(graph, deletions, self._now()),
                           names, [], RuleReads(names), abandon)

    def delete_relations(self, relations: Sequence[Relation], *, abandon: threading.Event | None = None) -> WriteResult:
        triples = [writes.triple_of(item) for item in relations]
        return self._write(lambda graph: writes.delete_relations(graph, relations), [], triples,
                           RuleReads([], triples), abandon)

    def merge(self, entities: list[writes.IncomingEntity], relations: list[writes.IncomingRelation]) -> WriteResult:
        """Another graph merged in (mcp-server-memory import) as one transaction."""
        names = [record.name for record, _ in entities]
        triples = [(record.source, record.target, record.relationType) for record, _ in relations]
        reads = RuleReads([*names, *(name for triple in triples for name in triple[:2])], triples)
        result = self._write(lambda graph: writes.merge_graph(graph, entities, relations, self._now()),
                             None, None, reads, unbounded=True)
        if len(entities) + len(relations) > COPY_ROWS:
            self._statistics.after_import(self._entities_written + len(relations))
        else:
            self._statistics.after_write(len(entities) + len(relations), self._entities_written)
        return result

    def _write(self, operation: Callable[[Graph], Change], names: Sequence[str] | None,
               triples: Sequence[Triple] | None, reads: RuleReads, abandon: threading.Event | None = None, *,
               unbounded: bool = False) -> WriteResult:
        """One write (see writes.write), and what follows it: the embedder woken (P11) and the
        planner's statistics looked at (P13).
        `unbounded`: once the lock is held, no statement timeout (an import of a million rows)."""
        with self._connection() as connection:
            done = write(connection, self.memory, self.where, self._meaning, operation, names, triples, reads, abandon,
                         unbounded=unbounded, report_lock=self._report_lock, reported=self._own_write)
        if done.rows is None:
            return WriteResult(done.change.value, False, [])
        self._meaning.wake()
        self._entities_written = done.entities
        if not unbounded:  # (see merge)
            self._statistics.after_write(len(done.rows.entities) + len(done.rows.relations), done.entities)
        return WriteResult(done.change.value, True, [])

    def _own_write(self, was: Version, now: Version) -> None:
        """This server's write took the memory from `was` to `now` (under _report_lock, see
        poll_external_change): announced by the tool, not the poller."""
        if self._looked and self._reported == was:
            self._reported = now


class _DatabaseCandidates:
    """A search's candidates read from the database (P9): supersets of what matches, on which
    retrieval's rules run, read in one REPEATABLE READ snapshot begun by the first read (P2), and
    each whole-query read made once however many steps ask for it."""

    def __init__(self, store: PostgresStore, reads: ExitStack) -> None:
        self._store = store
        self._reads = reads
        self._snapshot: Snapshot | None = None
        self._containing: dict[str, Graph] = {}

    def _now(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = self._reads.enter_context(self._store._snapshot())
        return self._snapshot

    def containing(self, query: str) -> Graph:
        needle = query.lower()
        if (found := self._containing.get(needle)) is None:
            found = self._containing[needle] = self._now().containing(needle).graph()
        return found

    def holding(self, words: str) -> Graph:
        wanted = ranking.query_terms(words, question_words=ranking.DEFAULT.question_words)
        snapshot = self._now()
        return self._ranked([snapshot.holding(wanted).graph()] if wanted else [])

    def dated(self, query: str, words: str | None) -> Graph:
        snapshot = self._now()
        if words is None:  # no topic: every entity within the window answers, so the whole memory is read
            next_seq = snapshot.counts()[0]
            entity_lines, relation_lines = snapshot.every_line()
            return graph_of([*entity_lines, *relation_lines], next_seq, self._store.where)
        wanted = ranking.query_terms(words, question_words=ranking.DEFAULT.question_words)
        read = [self.containing(query), self.containing(words)]
        if wanted:
            read.append(snapshot.holding(wanted).graph())
        return self._ranked(read)

    def _ranked(self, read: list[Graph]) -> Graph:
        """The union of these reads, with the ranking's index of the memory's counts."""
        candidates = union(read) if read else subgraph(())
        _, entities, total = self._now().counts()
        return replace(candidates, terms=cast("ranking.TermIndex", MemoryTerms(candidates, entities, total)))

    def whole(self) -> None:
        return None

    def meaning(self) -> tuple[Callable[[str, int], list[tuple[str, int, float]]], Callable[[str], Any]] | None:
        """This memory's semantic candidates (P11), when a model can be used."""
        meaning = self._store._meaning
        if meaning.model() is None:
            return None
        meaning.start()
        views: dict[str, Any] = {}

        def nearest(query: str, k: int) -> list[tuple[str, int, float]]:
            found, seen = meaning.nearest(query, k)
            views.clear()
            views.update(seen)
            return found

        return nearest, views.get

    def open_nodes(self, names: Sequence[str]) -> dict[str, Any]:
        return rules.open_nodes(self._now().named(names), list(names))

    def answered(self) -> None:
        pass
