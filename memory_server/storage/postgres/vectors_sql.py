"""What the meaning of a memory on PostgreSQL (vectors.py, M1 to M6) sends the database: its
tables, and every statement a constant with its values as parameters."""

from __future__ import annotations

from typing import Final

DIMENSIONS: Final = 384
"""all-MiniLM-L6-v2's (retrieval/semantic): the column's type is made with it."""

TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS kg_meaning_texts (
        memory text NOT NULL REFERENCES kg_memories (name) ON DELETE CASCADE,
        digest bytea NOT NULL,
        revision bigint NOT NULL,
        text bytea NOT NULL,
        PRIMARY KEY (memory, digest))""",
    "CREATE INDEX IF NOT EXISTS kg_meaning_texts_by_revision ON kg_meaning_texts (memory, revision, digest)",
    """CREATE TABLE IF NOT EXISTS kg_meaning_holders (
        memory text NOT NULL,
        entity bytea NOT NULL,
        digest bytea NOT NULL,
        PRIMARY KEY (memory, entity, digest),
        FOREIGN KEY (memory, digest) REFERENCES kg_meaning_texts (memory, digest) ON DELETE CASCADE)""",
    "CREATE INDEX IF NOT EXISTS kg_meaning_holders_by_digest ON kg_meaning_holders (memory, digest)",
    # No foreign key: its check would lock the memory's row, which a write holds while it waits
    # for an embedder's texts (a deadlock); the row of a memory deleted by hand is two numbers.
    """CREATE TABLE IF NOT EXISTS kg_meaning_state (
        memory text PRIMARY KEY,
        revision bigint NOT NULL DEFAULT 0,
        removals bigint NOT NULL DEFAULT 0)""",
)
VECTORS: Final = """CREATE TABLE IF NOT EXISTS kg_meaning_vectors (
        memory text NOT NULL,
        digest bytea NOT NULL,
        model text NOT NULL,
        stamp bigint NOT NULL,
        embedding {column} NOT NULL,
        PRIMARY KEY (memory, digest, model),
        FOREIGN KEY (memory, digest) REFERENCES kg_meaning_texts (memory, digest) ON DELETE CASCADE)"""
VECTORS_PGVECTOR: Final = VECTORS.format(column=f"halfvec({DIMENSIONS})")
VECTORS_PLAIN: Final = VECTORS.format(column="bytea")
VECTORS_BY_STAMP: Final = "CREATE INDEX IF NOT EXISTS kg_meaning_vectors_by_stamp ON kg_meaning_vectors (memory, model, stamp)"
VECTORS_BY_MEANING: Final = ("CREATE INDEX IF NOT EXISTS kg_meaning_vectors_by_meaning ON kg_meaning_vectors "
                              "USING hnsw (embedding halfvec_ip_ops)")
HAS_VECTORS_TABLE: Final = "SELECT to_regclass('kg_meaning_vectors') IS NOT NULL"
HAS_PGVECTOR: Final = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
PGVECTOR: Final = "CREATE EXTENSION IF NOT EXISTS vector"
COLUMN_TYPE: Final = """SELECT format_type(attribute.atttypid, attribute.atttypmod) FROM pg_attribute AS attribute
    WHERE attribute.attrelid = to_regclass('kg_meaning_vectors') AND attribute.attname = 'embedding'"""
VERSION_3: Final = "UPDATE kg_schema SET version = 3"

ADD_TEXTS: Final = """INSERT INTO kg_meaning_texts (memory, digest, revision, text)
    SELECT %s, fresh.digest, %s, fresh.text FROM unnest(%s::bytea[], %s::bytea[]) AS fresh (digest, text)
    ON CONFLICT DO NOTHING"""
ADD_HOLDERS: Final = """INSERT INTO kg_meaning_holders (memory, entity, digest)
    SELECT %s, fresh.entity, fresh.digest FROM unnest(%s::bytea[], %s::bytea[]) AS fresh (entity, digest)
    ON CONFLICT DO NOTHING"""
DROP_HOLDERS_OF: Final = "DELETE FROM kg_meaning_holders WHERE memory = %s AND entity = ANY(%s) RETURNING digest"
DROP_HOLDERS: Final = """DELETE FROM kg_meaning_holders AS holder
    USING unnest(%s::bytea[], %s::bytea[]) AS gone (entity, digest)
    WHERE holder.memory = %s AND holder.entity = gone.entity AND holder.digest = gone.digest"""
DROP_UNHELD: Final = """DELETE FROM kg_meaning_texts AS t WHERE t.memory = %s AND t.digest = ANY(%s)
    AND NOT EXISTS (SELECT 1 FROM kg_meaning_holders AS holder WHERE holder.memory = t.memory AND holder.digest = t.digest)"""
COUNT_REMOVAL: Final = """INSERT INTO kg_meaning_state (memory, removals) VALUES (%s, 1)
    ON CONFLICT (memory) DO UPDATE SET removals = kg_meaning_state.removals + 1"""
NEW_STAMP: Final = """INSERT INTO kg_meaning_state (memory, revision) VALUES (%s, 1)
    ON CONFLICT (memory) DO UPDATE SET revision = kg_meaning_state.revision + 1 RETURNING revision"""
STATE: Final = "SELECT revision, removals FROM kg_meaning_state WHERE memory = %s"
MEMORY_REVISION: Final = "SELECT revision FROM kg_memories WHERE name = %s"
# The texts to embed after a place (revision, digest), in that order: a backlog is walked once.
CLAIM: Final = """SELECT t.revision, t.digest, t.text FROM kg_meaning_texts AS t
    WHERE t.memory = %(memory)s AND (t.revision, t.digest) > (%(revision)s, %(digest)s)
    AND NOT EXISTS (SELECT 1 FROM kg_meaning_vectors AS v
                    WHERE v.memory = t.memory AND v.digest = t.digest AND v.model = %(model)s)
    ORDER BY t.revision, t.digest LIMIT %(limit)s FOR NO KEY UPDATE OF t SKIP LOCKED"""
# The texts written after a revision (as many as a search may embed, and one more), each with
# whether it has no vector yet: a search's look costs that many index entries at most.
RECENT: Final = """SELECT t.digest, NOT EXISTS (SELECT 1 FROM kg_meaning_vectors AS v
                    WHERE v.memory = t.memory AND v.digest = t.digest AND v.model = %(model)s)
    FROM (SELECT memory, digest FROM kg_meaning_texts WHERE memory = %(memory)s AND revision > %(revision)s
          LIMIT %(limit)s) AS t"""
# Whether a text written between two revisions still has no vector (held by another embedder
# while this one walked): the walk is then not done, and a search still embeds or waits for it.
LEFT: Final = """SELECT 1 FROM kg_meaning_texts AS t
    WHERE t.memory = %(memory)s AND t.revision > %(after)s AND t.revision <= %(upto)s
    AND NOT EXISTS (SELECT 1 FROM kg_meaning_vectors AS v
                    WHERE v.memory = t.memory AND v.digest = t.digest AND v.model = %(model)s)
    LIMIT 1"""
HOLD: Final = """SELECT t.revision, t.digest, t.text FROM kg_meaning_texts AS t
    WHERE t.memory = %s AND t.digest = ANY(%s) ORDER BY t.digest FOR NO KEY UPDATE"""
EMBEDDED: Final = "SELECT digest FROM kg_meaning_vectors WHERE memory = %s AND model = %s AND digest = ANY(%s)"
PUT_PGVECTOR: Final = """INSERT INTO kg_meaning_vectors (memory, digest, model, stamp, embedding)
    SELECT %s, fresh.digest, %s, %s, fresh.embedding::halfvec FROM unnest(%s::bytea[], %s::text[]) AS fresh (digest, embedding)
    ON CONFLICT DO NOTHING"""
PUT_PLAIN: Final = """INSERT INTO kg_meaning_vectors (memory, digest, model, stamp, embedding)
    SELECT %s, fresh.digest, %s, %s, fresh.embedding FROM unnest(%s::bytea[], %s::bytea[]) AS fresh (digest, embedding)
    ON CONFLICT DO NOTHING"""
NEAREST_PGVECTOR: Final = """SELECT digest, embedding FROM kg_meaning_vectors
    WHERE memory = %s AND model = %s ORDER BY embedding <#> %s::halfvec LIMIT %s"""
ALL_VECTORS: Final = "SELECT digest, embedding, stamp FROM kg_meaning_vectors WHERE memory = %s AND model = %s"
VECTORS_SINCE: Final = ("SELECT digest, embedding, stamp FROM kg_meaning_vectors "
                         "WHERE memory = %s AND model = %s AND stamp > %s")
VECTORS_OF: Final = "SELECT digest, embedding FROM kg_meaning_vectors WHERE memory = %s AND model = %s AND digest = ANY(%s)"
HOLDERS: Final = """SELECT holder.digest, t.text, e.seq, e.line FROM kg_meaning_holders AS holder
    JOIN kg_meaning_texts AS t ON t.memory = holder.memory AND t.digest = holder.digest
    JOIN kg_entities AS e ON e.memory = holder.memory AND e.name = holder.entity
    WHERE holder.memory = %s AND holder.digest = ANY(%s)"""
UPGRADE_ENTITIES: Final = "SELECT memory, name, revision, line FROM kg_entities"
