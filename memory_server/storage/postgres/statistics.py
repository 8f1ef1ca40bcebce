"""What the planner knows of a memory (P13) and what a search reads through in the GIN indexes (P14):
a store looks at the planner's statistics after enough writes and analyses the memory's columns when
they fall short, analyses the tables after an import, and bounds the indexes' pending lists."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Final

import psycopg

from ... import background
from ...model.graph import GraphError
from .faults import reason_of
from .statements import STATEMENT_MILLISECONDS

log = logging.getLogger(__name__)

STATISTICS_ROWS: Final = 1_000
"""Rows a server writes to a memory before it checks the planner's idea of the memory's size (P13);
a memory smaller than this is read as fast through any index."""
GIN_PENDING_KB: Final = 256
"""The most rows a GIN index of the server keeps waiting in its pending list, in kB (P14)."""
PENDING_LOCK_MILLISECONDS: Final = 200
"""How long a start waits to bound the pending lists (P14) before it leaves that to a later start."""
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


class Statistics:
    """One store's look at the planner's statistics of its memory (P13): the rows it wrote since it
    last looked, and the memory's rows then (as far as it counted them). A look is work of the
    process's Background; :meth:`close` waits for one under way."""

    def __init__(self, connection: Callable[[], AbstractContextManager[psycopg.Connection[Any]]], memory: str,
                 where: str) -> None:
        """`connection`: the store's, lent from its pool for a look."""
        self._connection = connection
        self.memory = memory
        self.where = where
        self._written_since_look = 0
        self._rows_at_look = 0
        self._lock = threading.Lock()
        # Set while no look is running: a look is work of the process's Background, and close waits for it.
        self._idle = threading.Event()
        self._idle.set()

    def close(self) -> None:
        """Waits for a look under way: it ends within STATEMENT_MILLISECONDS at worst."""
        self._idle.wait(STATEMENT_MILLISECONDS / 1000 + 1)

    def after_write(self, written: int, entities: int) -> None:
        """After a write of `written` rows that left `entities` in the memory: the planner's
        statistics looked at in the background when enough was written since the last look (P13)."""
        with self._lock:
            self._written_since_look += written
            if self._written_since_look < max(STATISTICS_ROWS, self._rows_at_look):
                return
            if not self._idle.is_set():
                return  # looking already: the next write that finds it done looks again
            self._written_since_look = 0
            self._idle.clear()
        if not background.process().submit(partial(self._refresh, entities)):
            self._idle.set()  # the process is ending: nothing to look for

    def _refresh(self, entities: int) -> None:
        try:
            self._look_at_plans(entities)
        finally:
            self._idle.set()

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
                with self._lock:
                    self._rows_at_look = entities + relations
                if 2 * expected_entities >= entities and relations <= 2 * expected_relations:
                    return
                log.info("%s: the planner expects %d entities and %d relations of %d and %s: analysing the memory's "
                         "columns", self.where, expected_entities, expected_relations, entities,
                         relations if relations <= 2 * expected_relations else f"more than {relations - 1}")
                connection.execute(_ANALYSE_MEMORY_COLUMNS)
        except (GraphError, psycopg.Error) as error:
            log.warning("%s: could not look at the tables' statistics (%s); autovacuum will analyse them in time",
                        self.where, reason_of(error))

    def analyse(self) -> None:
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
                        reason_of(error))

    def after_import(self, rows: int) -> None:
        """After an import (more rows than writes.COPY_ROWS) that left `rows` rows in the memory: the
        tables analysed at once, and the count of rows written since counted from there."""
        self.analyse()
        with self._lock:
            self._written_since_look = 0
            self._rows_at_look = rows


def limit_pending(connection: psycopg.Connection[Any], where: str) -> None:
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
            log.info("%s: %s is busy; its pending list is bounded at a later start", where, name)
        except psycopg.Error as error:
            log.warning("%s: could not bound the pending list of %s (%s); each search reads through up to "
                        "4 MB of rows waiting there", where, name,
                        reason_of(error))
    connection.execute("SET LOCAL lock_timeout = DEFAULT")


def _plan_rows(row: tuple[Any, ...] | None) -> int:
    """The rows the planner expects, from the answer of an EXPLAIN (FORMAT JSON)."""
    return 0 if row is None else int(row[0][0]["Plan"]["Plan Rows"])
