"""The memory in PostgreSQL: one memory for many servers, many memories in one database.

The database is the truth, and the database answers: a server keeps no copy of its memory. A read
fetches the rows it needs (the entities named, the candidates of a search, the relations touching
them) in one snapshot, makes a small :class:`~memory_server.model.graph.Graph` of them, and runs
the very code the file store runs on its whole graph (the same rules, the same ranking, the same
pages); a write does the same with the rows its rule reads. So a server needs memory for what it
answers, not for the memory: a million entities cost what ten thousand do.

Guarantees (each has a test in tests/test_postgres.py or tests/test_postgres_scale.py, and names the
module of this package that keeps it):

P1. Every write is one transaction. It first locks its memory's row in ``kg_memories``
    (``SELECT ... FOR UPDATE``), so writes to one memory are serialised across all servers, then
    reads the rows its rule reads, applies the tool's rule to them and writes only the rows that
    changed, with their search columns and the memory's counts.
    Servers never lose each other's writes; a write that fails (the database went away, a rule
    was broken) changes nothing (writes.py).
P2. Nobody sees half a write: every answer is read in one snapshot of the rows (one statement, or
    one REPEATABLE READ READ ONLY transaction: store.py's _statement and _snapshot, on reads.py's
    Snapshot), and every write commits whole (writes.py).
P3. Every answer reflects every write acknowledged before it was asked, by any server: it is read
    from the database when it is asked (store.py).
P4. Memories are apart: every statement names its memory by a parameter; rows of one memory
    are never read or written by a server of another (statements.py).
P5. SQL is parameterised, always: no name, observation or memory name is ever formatted into a
    statement (statements.py; the statements of schema.py and statistics.py are constants too).
P6. The schema is made on first use and its version recorded; a database of a previous version
    (1 or 2) is upgraded in place, in one transaction, keeping every row; a database whose schema
    is newer than this server understands is refused before anything is written (schema.py).
P7. The database going away is a fault, not a crash: a call that cannot reach it within
    CONNECT_SECONDS ends with a GraphError that says so; the pool reconnects by itself when the
    database is back, and never lends a connection whose session the database ended (it looks at
    the connection's socket, which costs no round trip, and asks the database only when the socket
    has something to say). A write whose commit was sent when the connection broke may or may not
    have landed (the database alone knows): it is reported as failed, and never half-made.
    "Unreachable" is said only when the database did not answer the pool's last attempt to
    connect: one that answered and refused (a wrong password) is told with what it said; while it
    accepts, a call finding all POOL_SIZE connections in use waits its turn, up to BUSY_SECONDS,
    and is then told the server is busy (store.py's pool; the errors: faults.py).
P8. Deleted rows are deleted (``DELETE``), not marked: what remains of them until VACUUM is
    PostgreSQL's own dead tuples (see docs/postgres.md for what an operator runs to purge them;
    writes.py).
P9. The same query over the same graph answers the same on both stores (by words; by meaning: P11).
    A search reads a superset of its matches from the database: for the whole query, the rows
    whose ``haystack`` (the entity's lower-cased search text, NUL mapped to U+0001, a mapping
    character by character, which keeps containment) contains the mapped query; for words, the
    rows whose ``terms`` hold one of the query's terms, with the memory's entity count and total
    length from ``kg_memories``, which every write keeps exact. The exact rule then runs on them
    (the columns: statements.py; the candidates: reads.py; the rule: store.py's searches).
P10. A write's rule sees every row it reads: the entities it names (an entity's existence is all
    create_entities, create_relations and the merge read of others), the relations it names, and
    for delete_entities every relation touching a deleted name; ``next_seq`` comes from the
    memory's row. So a write on those rows changes exactly what it changes on the whole graph
    (writes.py).
P11. Meaning, as on a file: the observations' vectors are kept in the database, one per distinct
    text and model, made once by one server in the background, and searched by pgvector's HNSW
    index where the extension is there, else by each server over the memory's vectors; the
    candidates are fused with the words by the file store's code (vectors.py, M1-M6).
P12. A whole read of a memory (read_graph) made again after writes decodes only the rows written
    since the one before and shares every other entity and relation with it (reads.py's
    graph_again, kept by store.py): the cut answers a pager keeps of one memory hold its objects
    once, and forgetting one frees only what changed.
P13. The planner knows a memory's size, however it grew: once this server has written
    STATISTICS_ROWS rows to a memory, and again each time it has written as many rows as the
    memory held at its last look, it looks (in a thread of its own, after the write): when the
    planner expects fewer than half the memory's entities, or fewer than half its relations, it
    analyses the columns its plans rest on (``ANALYZE kg_entities (memory), kg_relations (memory,
    target)``). An import analyses the whole tables at its end. Else a memory grown by the tools
    in a table holding others looks like a row or two to the planner, which then reads every
    relation of the memory for each entity a search found, until autovacuum, which waits for a
    tenth of the whole table to change, analyses it (statistics.py; figures: docs/benchmarks.md,
    "Figures behind the code").
P14. Every search reads through the rows waiting in the GIN indexes' pending lists (a write adds
    its entity there, to be merged later, whichever memory it is in): the server bounds those lists
    to GIN_PENDING_KB on both indexes (their ``gin_pending_list_limit``) where it owns them, so that
    a search reads at most that much of them rather than PostgreSQL's default of 4 MB; a write that
    fills the list merges it, as before, a smaller piece each time (statistics.py).
P15. What a server keeps of a memory (its last whole read_graph, the last change its subscribers
    were told of) is keyed by the memory's Version (statements.py), which never repeats: a memory
    removed by hand and made again by as many writes is never taken for the one before (store.py).
P16. Every entity the tools accept is stored, whatever the length of its words: a term longer than
    INDEXED_TERM_BYTES is held in ``terms`` as a digest, which a search for it looks up (so a
    search still finds its holders, P9). Names and relation types are the tables' keys, and a
    btree entry holds at most about 2.7 kB: a write whose key does not fit is refused whole with
    a tool error naming it, and changes nothing (the digest: statements.py; the error: writes.py).

Names, types and lines are stored as UTF-8 ``bytea``: a name may hold any character the tools
accept (NUL included, which PostgreSQL's ``text`` cannot hold).

The modules, each with one job: store.py (PostgresStore: the connections, the store's life and
interface), statements.py (what reads and writes send, and the forms of the values), reads.py (the
rows read and the graphs made of them), writes.py (the write transactions, imports by COPY),
schema.py (the tables, their upgrades and extensions), statistics.py (the planner's statistics and
the GIN pending lists), vectors.py (meaning: the embedder and the searches by it),
vectors_tables.py (the meaning's tables and the rows a write changes there), vectors_sql.py (their
statements), faults.py (the errors), names.py (memory names and connection strings, read without
the driver: this package's __init__ imports nothing, so that names.py is).
"""
