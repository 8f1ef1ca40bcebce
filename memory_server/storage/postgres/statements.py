"""What a store sends the database to read and write a memory (P5): every statement a constant,
every name, line and memory name a parameter; and the forms of the values the columns hold (names
in UTF-8, ``haystack``, ``terms``: P9, P16). The tables' own statements are schema.py's, and the
planner's statistics' are statistics.py's."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, Final

from ...index.search import FIELD_SEPARATOR

STATEMENT_MILLISECONDS: Final = 30_000
"""A statement (a write waiting for another server's lock included) that runs longer is cancelled."""
INDEXED_TERM_BYTES: Final = 1_000
"""A term longer than this (in UTF-8) is held in ``terms`` as a digest (P16): a GIN entry holds at
most about 2.7 kB, and a base64 blob in an observation is one word."""
_NUL_STAND_IN: Final = "\x01"
"""What NUL (the field separator, and a character a name may hold) is in ``haystack``: text cannot hold NUL."""

ADD_MEMORY: Final = "INSERT INTO kg_memories (name) VALUES (%s) ON CONFLICT (name) DO NOTHING"
# A memory's version (see Version): its revision, and the transaction that wrote its row (xmin).
REVISION: Final = "SELECT revision, xmin::text FROM kg_memories WHERE name = %s"
LOCK_STATE: Final = ("SELECT revision, removals, next_seq, entities, total_length, xmin::text FROM kg_memories "
                     "WHERE name = %s FOR UPDATE")
COUNTS: Final = "SELECT next_seq, entities, total_length FROM kg_memories WHERE name = %s"
ALL_ENTITIES: Final = "SELECT line FROM kg_entities WHERE memory = %s ORDER BY seq"
ALL_RELATIONS: Final = "SELECT line FROM kg_relations WHERE memory = %s ORDER BY seq"
ENTITIES_NAMED: Final = "SELECT seq, line FROM kg_entities WHERE memory = %s AND name = ANY(%s)"


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


NAMED_TOUCHING: Final = _with_touching("name = ANY(%(value)s)")
CONTAINING: Final = _with_touching("haystack LIKE %(value)s")
CONTAINING_SCAN: Final = _with_touching("strpos(haystack, %(value)s) > 0")
HOLDING: Final = _with_touching("terms && %(value)s::text[]")
RELATIONS_TOUCHING: Final = """SELECT seq, line FROM kg_relations WHERE memory = %s AND source = ANY(%s)
    UNION SELECT seq, line FROM kg_relations WHERE memory = %s AND target = ANY(%s)"""
RELATIONS_NAMED: Final = """SELECT r.seq, r.line FROM kg_relations AS r
    JOIN unnest(%s::bytea[], %s::bytea[], %s::bytea[]) AS wanted (source, target, relation_type)
    ON r.source = wanted.source AND r.target = wanted.target AND r.relation_type = wanted.relation_type
    WHERE r.memory = %s"""
PUT_ENTITY: Final = """INSERT INTO kg_entities (memory, name, seq, revision, line, haystack, terms, length)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (memory, name) DO UPDATE SET revision = excluded.revision, line = excluded.line,
    haystack = excluded.haystack, terms = excluded.terms, length = excluded.length"""
COPY_ENTITIES: Final = "COPY kg_entities (memory, name, seq, revision, line, haystack, terms, length) FROM STDIN"
DROP_ENTITY: Final = "DELETE FROM kg_entities WHERE memory = %s AND name = %s"
PUT_RELATION: Final = """INSERT INTO kg_relations (memory, source, target, relation_type, seq, revision, line)
    VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"""
COPY_RELATIONS: Final = "COPY kg_relations (memory, source, target, relation_type, seq, revision, line) FROM STDIN"
DROP_RELATION: Final = "DELETE FROM kg_relations WHERE memory = %s AND source = %s AND target = %s AND relation_type = %s"
NEW_STATE: Final = """UPDATE kg_memories SET revision = %s, removals = %s, next_seq = %s, entities = %s,
    total_length = %s WHERE name = %s RETURNING xmin::text"""


Version = tuple[int, str] | None
"""What a memory is at: its revision and the transaction that last wrote its row (None: it has no
row). A revision alone repeats: a memory removed by hand (``DELETE FROM kg_memories``) and made
again counts from 0, and after as many writes as it had, its revision is the old one's. The
transaction does not: every write makes a new version of the row, in a transaction of its own."""


def version_of(row: tuple[Any, ...] | None) -> Version:
    return None if row is None else (int(row[0]), str(row[1]))


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def indexed_term(term: str) -> str:
    """A term as ``terms`` holds it (P16): itself, or, longer than INDEXED_TERM_BYTES, a digest of
    it that no term can be (a term is letters and digits; a digest begins with "#")."""
    if len(term) * 4 <= INDEXED_TERM_BYTES or len(utf8(term)) <= INDEXED_TERM_BYTES:
        return term
    return "#" + hashlib.blake2b(utf8(term), digest_size=16).hexdigest()


def indexed_terms(terms: Iterable[str]) -> list[str]:
    return [indexed_term(term) for term in terms]


def haystack_of(text: str) -> str:
    """An entity's search text as ``haystack`` holds it (P9): NUL, which text cannot hold, mapped."""
    return text.replace(FIELD_SEPARATOR, _NUL_STAND_IN)


def like_pattern(needle: str) -> str:
    """The LIKE pattern of rows whose haystack contains the (lower-cased) needle: its wildcards escaped."""
    escaped = haystack_of(needle).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
