"""Meaning on PostgreSQL (the package's P11): the observations' vectors kept in the database.

A search by meaning on the team store finds what it finds on a file (retrieval/semantic, the
same model, the same fusion with the words in retrieval/answer.py's ``shape``): only where the
vectors live differs. They live in the database, so that no server embeds what another has.

Guarantees (each has a test in tests/test_postgres_meaning.py):

M1. One vector per distinct observation text of a memory and model. ``kg_meaning_texts`` holds
    each distinct text of a memory once, keyed by its sha256; ``kg_meaning_holders`` which
    entities hold it; ``kg_meaning_vectors`` its vector for each model (the sha256 of the model
    file), as float16: 768 bytes a vector.
M2. A text is embedded once, by one server: a server embeds only texts it has claimed (``FOR NO
    KEY UPDATE`` of their rows, ``SKIP LOCKED`` in the background) and found without a vector once
    it held them, and inserts their vectors in the transaction that holds the claim. A claim
    waits for nothing a write holds (a write adding holders of a claimed text does not wait for
    it; one deleting it waits for the claim's batch), so the two never deadlock.
M3. What is deleted is gone: the write that removes the last holder of a text in a memory deletes
    the text and its vectors in the same transaction (P1); no vector outlives its observation.
M4. Off the request path: texts are embedded by the store's embedder, a Background of its own
    (memory_server/background.py) whose one worker walks the memory in steps, each arranging the
    next with ``later`` (started by the store's first write or search by meaning; ``close`` stops
    it after the batch it is embedding and joins it), a batch at a time, written by this server
    or by any other (it looks again when the memory's revision moves). A search embeds the texts written
    since the embedder last walked the memory (the whole memory before its first walk) that have
    no vector yet, only when those texts are at most SYNC_TEXTS (so that a fact just written is
    found by meaning at once, as on a file); else it answers from the vectors there are.
M5. The same answers with pgvector or without. Where the ``vector`` extension is there (or can be
    made), the vectors are a ``halfvec(384)`` column with an HNSW index (inner product: the
    vectors are of unit length), which gives the candidates; without it they are a ``bytea``
    column, which each server reads into its own memory (kept across searches, brought up to
    date by the memory's meaning revision: only vectors added since are read) and searches as a
    file's table is searched (retrieval/semantic 6): every vector up to EXACT_UP_TO of them,
    above that a shortlist by sign bits. Either way the candidates are scored again in the same way (the stored float16
    vector against the float32 query, in float64), the best ``k`` observations kept (at least
    MIN_SIMILARITY), and the answer is ``retrieval.answer.shape``'s on them, as a file's.
M6. The tables are made by the store's schema (schema.py, P6): a database of version 1 or 2
    gets them in its upgrade, filled with the texts of every entity there, whose vectors the
    embedders then make in the background. Which column the vectors have is chosen when the
    table is made; the memories of a database share it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import psycopg

from ...background import Background, Later
from ...model.graph import Graph, GraphError, Node
from ...model.writes import RowChanges
from ..settling import Signal
from . import vectors_sql as sql
from . import vectors_tables as tables
from .vectors_tables import reason

if TYPE_CHECKING:
    import numpy as np

    from ..interface import MeaningModel
    from .store import PostgresStore

log = logging.getLogger(__name__)

BATCH: Final = 32
"""Texts claimed and embedded in one transaction: the claim is held while they are embedded."""
POLL_SECONDS: Final = 5.0
"""How often an idle embedder looks whether another server wrote texts to embed."""
RETRY_SECONDS: Final = 0.5
"""How soon an embedder walks again texts it found held by another (which may have stopped)."""
CANDIDATES: Final = 2
"""Candidates read per observation wanted, before they are scored again (M5)."""
EF_SEARCH: Final = 100
"""pgvector's hnsw.ef_search, at least (its default, 40, is the number of candidates a search asks)."""
SYNC_LOCK_MILLISECONDS: Final = 2_000
"""How long a search waits for texts another embedder holds (M4) before it answers without them."""
KEPT_PART: Final = 20_000
"""Vectors read at a time into a server's own copy (M5, without pgvector)."""


SYNC_TEXTS: Final = 512
"""Texts written since the embedder's last walk that a search embeds itself (M4): more are the
embedders' work, and the search answers without them."""


_AFTER_ALL: Final = b"\xff" * 33


# --------------------------------------------------------------------------------------------
# The store's meaning: its writes' texts (vectors_tables.py), its embedder, its searches
# --------------------------------------------------------------------------------------------


class Meaning:
    """The meaning of one PostgresStore's memory: what its writes add and remove (M1, M3), its
    embedder (M2, M4), and the semantic candidates of its searches (M5)."""

    def __init__(self, store: PostgresStore, node_from: Callable[[int, bytes], Node],
                 semantic: MeaningModel | None) -> None:
        """`node_from`: how the store reads an entity's row (reads.node_from); `semantic`: the model
        of meaning (None: words only, and the texts written are left to servers with a model)."""
        self._store = store
        self._node_from = node_from
        self._semantic = semantic
        self._lock = threading.Lock()
        self._embedder: Background | None = None
        self._closed = False
        self._next: Later | None = None  # the embedder's next walk, while it waits for it
        self._turn = 0  # the walk arranged last: one that was replaced does not run
        self._walking = False
        self._woken = False  # a write committed since the walk under way began
        self._failing = False
        self._model: str | None = None
        self._model_known = threading.Event()
        self._walked = Signal()  # (told at the end of every walk: wait_embedded() waits on it)
        self._scanned = -1  # every text of a revision up to it was claimed or embedded
        self._pgvector: bool | None = None
        self._iterative = False
        self._kept: _Kept | None = None  # the memory's vectors, without pgvector (M5)
        self._kept_lock = threading.Lock()
        self.embedded = 0
        """Texts this store embedded (M2 counts them across servers)."""

    # ----- life

    def start(self) -> None:
        """The embedder started (once); its first walk loads the model, off the request path."""
        with self._lock:
            if self._embedder is None and not self._closed:
                self._embedder = Background("kg-memory-meaning", workers=1)
                self._arrange(0.0)

    def close(self) -> None:
        """The embedder stopped after the batch it is embedding, and joined."""
        with self._lock:
            self._closed = True
            embedder = self._embedder
        if embedder is not None:
            # No limit, as the thread it replaces was joined: a batch ends with its transaction.
            embedder.close(timeout=None)

    def wake(self) -> None:
        """After a write's commit: the embedder (started by the first write or search, not by a
        command that only reads rows) looks at once."""
        self.start()
        with self._lock:
            self._woken = True
            if not self._walking and self._next is not None:
                self._next.cancel()
                self._arrange(0.0)

    def _arrange(self, delay: float) -> None:
        """The embedder's next walk in `delay` seconds (under _lock). A walk already due may be in
        the worker's queue, past cancelling: the turn tells it that it was replaced."""
        assert self._embedder is not None
        self._turn += 1
        turn = self._turn
        self._next = self._embedder.later(delay, lambda: self._step(turn))

    def model(self) -> str | None:
        """The model this server embeds with, loading it when not yet loaded; None: words only."""
        if not self._model_known.is_set():
            try:
                self._model = None if self._semantic is None else self._semantic.identity()
            except Exception as error:  # a model that fails to load is words only, as on a file
                log.warning("%s: no semantic search (%s)", self._store.where, reason(error))
                self._model = None
            self._model_known.set()
        return self._model

    # ----- writes (in the write's transaction, under the memory's lock: P1)

    def written(self, connection: psycopg.Connection[Any], before: Graph, rows: RowChanges, revision: int) -> None:
        """M1, M3: the texts and holders of what a write changed."""
        tables.written(connection, self._store.memory, before, rows, revision)

    # ----- the embedder (M2, M4)

    def _step(self, turn: int) -> None:
        """One walk of the embedder, then the next arranged: at once when a write woke it
        meanwhile, else after the walk's wait. A server without the model walks never."""
        with self._lock:
            if turn != self._turn or self._walking or self._closed:
                return
            self._walking, self._woken, self._next = True, False, None
        wait: float | None = None
        try:
            wait = self._walk() if self.model() is not None else None
        finally:
            with self._lock:
                self._walking = False
                if wait is not None and not self._closed:
                    self._arrange(0.0 if self._woken else wait)
            self._walked.changed()

    def wait_embedded(self, timeout: float) -> bool:
        """Until.EMBEDDED: True once the embedder has walked the memory as it is now, every text
        found with its vector (whoever embedded it); False when `timeout` seconds pass first."""
        with self._store._connection() as connection:
            revision = _revision(connection, self._store.memory)
        return self._walked.wait_until(lambda: self._scanned >= revision, timeout)

    def _walk(self) -> float:
        """The texts written since the last walk claimed and embedded (M2, M4); the seconds until
        the next walk. Stops between batches when the embedder closes."""
        assert self._embedder is not None
        stopping = self._embedder.stopping
        wait = POLL_SECONDS
        try:
            with self._store._connection() as connection:
                revision = _revision(connection, self._store.memory)
                if revision != self._scanned:
                    # From the texts written after the last walk (a digest sorts below AFTER_ALL).
                    place: tuple[int, bytes] = (self._scanned, _AFTER_ALL)
                    while not stopping.is_set():
                        found = self._claim_and_embed(connection, place)
                        if found is None:
                            break
                        place = found
                    left = connection.execute(sql.LEFT, {"memory": self._store.memory, "after": self._scanned,
                                                      "upto": revision, "model": self._model}).fetchone()
                    if left is None and not stopping.is_set():
                        self._scanned = revision
                    elif left is not None:  # held by another embedder now: walked again soon
                        wait = RETRY_SECONDS
            self._failing = False
        except (GraphError, psycopg.Error) as error:
            if not self._failing:
                log.warning("%s: cannot embed the memory's texts now (%s); trying again", self._store.where,
                            reason(error))
            self._failing = True
            wait = POLL_SECONDS
        return wait

    def _claim_and_embed(self, connection: psycopg.Connection[Any], place: tuple[int, bytes]) -> tuple[int, bytes] | None:
        """One batch of the texts after `place` that have no vector, claimed, embedded and written
        (M2); the place of its last text, or None when there was none."""
        with connection.transaction():
            claimed = connection.execute(sql.CLAIM, {"memory": self._store.memory, "revision": place[0],
                                                  "digest": place[1], "model": self._model,
                                                  "limit": BATCH}).fetchall()
            if not claimed:
                return None
            self._embed_held(connection, [(bytes(digest), bytes(text)) for _, digest, text in claimed])
        return int(claimed[-1][0]), bytes(claimed[-1][1])

    def _embed_held(self, connection: psycopg.Connection[Any], held: list[tuple[bytes, bytes]]) -> None:
        """Texts whose rows this transaction holds, embedded and written, but those that got a
        vector before they were held (a statement begun after the claim sees it: M2)."""
        memory, model = self._store.memory, self._model
        assert self._semantic is not None  # (a server without a model has no model identity to embed for)
        done = {bytes(digest) for (digest,) in connection.execute(sql.EMBEDDED, (memory, model, [d for d, _ in held]))}
        wanted = [(digest, text) for digest, text in held if digest not in done]
        if not wanted:
            return
        vectors = self._semantic.embed([text.decode("utf-8", "surrogatepass") for _, text in wanted])
        if vectors is None:
            return
        stored = vectors.astype("<f2")
        row = connection.execute(sql.NEW_STAMP, (memory,)).fetchone()
        assert row is not None  # (an upsert returns its row)
        digests = [digest for digest, _ in wanted]
        if self._uses_pgvector(connection):
            connection.execute(sql.PUT_PGVECTOR, (memory, model, row[0], digests,
                                               ["[" + ",".join(map(repr, vector.tolist())) + "]" for vector in stored]))
        else:
            connection.execute(sql.PUT_PLAIN, (memory, model, row[0], digests, [vector.tobytes() for vector in stored]))
        self.embedded += len(wanted)

    def settle(self) -> None:
        """M4: the texts written since this server's embedder last walked the memory (all of them
        before its first walk) that have no vector yet, embedded within the search when those
        texts are at most SYNC_TEXTS (waiting for those another embedder holds,
        SYNC_LOCK_MILLISECONDS at most); more are left to the embedders."""
        limit = SYNC_TEXTS
        floor = self._scanned  # (-1 until the embedder has walked the memory once: every text)
        if limit <= 0 or self._model is None:
            return
        with self._store._connection() as connection:
            written = connection.execute(sql.RECENT, {"memory": self._store.memory, "revision": floor,
                                                   "model": self._model, "limit": limit + 1}).fetchall()
            recent = [bytes(digest) for digest, missing in written if missing]
            if not recent or len(written) > limit:
                return  # (more written since: the embedders' work, in the background)
            try:
                with connection.transaction():
                    connection.execute(f"SET LOCAL lock_timeout = {SYNC_LOCK_MILLISECONDS}")
                    held = connection.execute(sql.HOLD, (self._store.memory, recent)).fetchall()
                    self._embed_held(connection, [(bytes(digest), bytes(text)) for _, digest, text in held])
            except psycopg.errors.LockNotAvailable:
                pass  # another server is embedding them: this answer goes without them
            except psycopg.errors.DeadlockDetected:
                pass

    # ----- searches (M5)

    def _uses_pgvector(self, connection: psycopg.Connection[Any]) -> bool:
        if self._pgvector is None:
            row = connection.execute(sql.COLUMN_TYPE).fetchone()
            self._pgvector = row is not None and str(row[0]).startswith("halfvec")
            if self._pgvector:
                version = connection.execute(sql.HAS_PGVECTOR).fetchone()
                parts = tuple(int(part) for part in str(version[0]).split(".")[:2]) if version else (0, 0)
                self._iterative = parts >= (0, 8)  # iterative scans: a memory's own among many
        return self._pgvector

    def uses_pgvector(self) -> bool:
        """Whether this memory's vectors are searched by pgvector's index (else by this server)."""
        with self._store._connection() as connection:
            return self._uses_pgvector(connection)

    def nearest(self, query: str, k: int) -> tuple[list[tuple[str, int, float]], dict[str, Any]]:
        """The `k` observations nearest `query` (entity name, index, similarity), best first, and
        the views of the entities holding them."""
        import numpy as np

        semantic = self._semantic
        if k <= 0 or not query.strip() or semantic is None:
            return [], {}
        vector = semantic.query_vector(query)
        if vector is None:
            return [], {}
        self.settle()
        memory, model = self._store.memory, self._model
        wanted = CANDIDATES * k
        with self._store._connection() as connection, connection.transaction():
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            if self._uses_pgvector(connection):
                connection.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(max(EF_SEARCH, wanted)),))
                if self._iterative:
                    connection.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
                text = "[" + ",".join(map(repr, vector.astype(np.float32).tolist())) + "]"
                rows = connection.execute(sql.NEAREST_PGVECTOR, (memory, model, text, wanted), binary=True).fetchall()
                digests = [bytes(digest) for digest, _ in rows]
                matrix = np.array([_halfvec(bytes(embedding)) for _, embedding in rows], dtype=np.float16)
            else:
                digests, matrix = self._brute_force(connection, vector, wanted)
            scored = _scores(digests, matrix.reshape(-1, sql.DIMENSIONS), vector)[:k]
            scored = [(digest, similarity) for digest, similarity in scored if similarity >= semantic.min_similarity]
            if not scored:
                return [], {}
            holders = connection.execute(sql.HOLDERS, (memory, [digest for digest, _ in scored]), binary=True).fetchall()
        nodes: dict[bytes, list[tuple[int, str, Any]]] = {}
        for digest, text, seq, line in holders:
            nodes.setdefault(bytes(digest), []).append((int(seq), bytes(text).decode("utf-8", "surrogatepass"),
                                                         self._node_from(int(seq), bytes(line))))
        found: list[tuple[float, int, int, str]] = []
        views: dict[str, Any] = {}
        for digest, similarity in scored:
            for seq, text, node in nodes.get(digest, []):
                views[node.record.name] = node.view
                found += [(-similarity, seq, index, node.record.name)
                          for index, observation in enumerate(node.record.observations) if observation == text]
        found.sort()
        return [(name, index, -negated) for negated, _, index, name in found[:k]], views

    def _brute_force(self, connection: psycopg.Connection[Any], vector: np.ndarray, wanted: int) -> tuple[list[bytes], Any]:
        """The `wanted` best candidates among the memory's vectors kept in this server (M5)."""
        import numpy as np

        semantic = self._semantic
        assert semantic is not None  # (nearest asks only with a model)
        with self._kept_lock:
            kept = self._kept = _Kept.brought_up_to_date(self._kept, connection, self._store.memory, self._model,
                                                         semantic)
            count = kept.count
            if count == 0:
                return [], np.zeros((0, sql.DIMENSIONS), dtype=np.float16)
            scores = semantic.table_scores(kept.matrix, kept.scales, kept.codes, count, vector.astype(np.float32),
                                           wanted, exact_up_to=kept.exact_up_to, least=kept.shortlist_least)
            best = min(wanted, count)
            top = np.argpartition(-scores, best - 1)[:best]
            digests = [kept.digests[i] for i in top.tolist() if scores[i] > -1.0]
        # The candidates' own float16 vectors, scored again as pgvector's are (M5).
        stored = {bytes(digest): bytes(embedding) for digest, embedding in
                  connection.execute(sql.VECTORS_OF, (self._store.memory, self._model, digests), binary=True)}
        digests = [digest for digest in digests if digest in stored]
        matrix = np.frombuffer(b"".join(stored[digest] for digest in digests), dtype="<f2").reshape(-1, sql.DIMENSIONS)
        return digests, matrix


class _Kept:
    """A memory's vectors of one model in this server (M5, without pgvector), as of a meaning
    revision and a count of removals: as int8 with a scale and sign bits, as a file's table is
    (float16 costs twice the memory and, in numpy, a slow conversion at each search)."""

    def __init__(self, revision: int, removals: int, semantic: MeaningModel) -> None:
        import numpy as np

        self._semantic = semantic
        self.exact_up_to = semantic.exact_up_to
        """Vectors up to which a search scores every one (above: a shortlist by sign bits, M5)."""
        self.shortlist_least = semantic.shortlist_least
        """Rows a shortlist holds at least."""
        self.codes = np.zeros((semantic.sign_words, 0), dtype=np.uint64)
        self.revision = revision
        self.removals = removals
        self.digests: list[bytes] = []
        self.rows: dict[bytes, int] = {}
        self.matrix = np.zeros((0, sql.DIMENSIONS), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        self.count = 0

    @classmethod
    def brought_up_to_date(cls, kept: _Kept | None, connection: psycopg.Connection[Any], memory: str,
                           model: str | None, semantic: MeaningModel) -> _Kept:
        row = connection.execute(sql.STATE, (memory,)).fetchone()
        revision, removals = (0, 0) if row is None else (int(row[0]), int(row[1]))
        if kept is None or kept.removals != removals:  # texts were deleted: read again, whole
            kept = cls(-1, removals, semantic)
            kept.read(connection, sql.ALL_VECTORS, (memory, model))
        elif revision > kept.revision:
            kept.read(connection, sql.VECTORS_SINCE, (memory, model, kept.revision))
        kept.revision = max(kept.revision, revision)
        return kept

    def read(self, connection: psycopg.Connection[Any], statement: str, arguments: tuple[Any, ...]) -> None:
        """The rows of `statement` added a part at a time, through a cursor of the server's (in
        the search's transaction): a million float16 rows would be 1 GB of Python objects at once."""
        with connection.cursor(name="kg_meaning_kept", binary=True) as cursor:
            cursor.execute(statement, arguments)
            while part := cursor.fetchmany(KEPT_PART):
                self.add(part)

    def add(self, rows: Iterable[tuple[bytes, bytes, int]]) -> None:
        import numpy as np

        fresh = [(bytes(digest), bytes(embedding)) for digest, embedding, _ in rows if bytes(digest) not in self.rows]
        if not fresh:
            return
        semantic = self._semantic
        if self.count + len(fresh) > len(self.matrix):
            size = max(2 * len(self.matrix), self.count + len(fresh), 1024)
            grown = np.zeros((size, sql.DIMENSIONS), dtype=np.int8)
            grown[:self.count] = self.matrix[:self.count]
            scales = np.zeros(size, dtype=np.float32)
            scales[:self.count] = self.scales[:self.count]
            codes = np.zeros((semantic.sign_words, size), dtype=np.uint64)
            codes[:, :self.count] = self.codes[:, :self.count]
            self.matrix, self.scales, self.codes = grown, scales, codes
        block = np.frombuffer(b"".join(embedding for _, embedding in fresh), dtype="<f2").reshape(-1, sql.DIMENSIONS)
        for start in range(0, len(block), semantic.chunk):
            part = block[start:start + semantic.chunk].astype(np.float32)
            at = self.count + start
            self.matrix[at:at + len(part)], self.scales[at:at + len(part)] = semantic.quantize(part)
            self.codes[:, at:at + len(part)] = semantic.sign_codes(self.matrix[at:at + len(part)])
        for offset, (digest, _) in enumerate(fresh):
            self.rows[digest] = self.count + offset
            self.digests.append(digest)
        self.count += len(fresh)


def _halfvec(value: bytes) -> Any:
    """A halfvec in pgvector's binary form (dimensions, a reserved word, big-endian float16s)."""
    import numpy as np

    return np.frombuffer(value, dtype=">f2", offset=4).astype(np.float16)


def _scores(digests: Sequence[bytes], matrix: Any, query: Any) -> list[tuple[bytes, float]]:
    """Candidates scored again, the same whichever search found them (M5): the float16 vector
    against the float32 query in float64, rounded to float32; best first, ties by digest."""
    import numpy as np

    if not digests:
        return []
    similarities = (matrix.astype(np.float64) @ query.astype(np.float64)).astype(np.float32)
    scored = [(digest, float(similarity)) for digest, similarity in zip(digests, similarities.tolist(), strict=True)]
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored


def _revision(connection: psycopg.Connection[Any], memory: str) -> int:
    row = connection.execute(sql.MEMORY_REVISION, (memory,)).fetchone()
    return 0 if row is None else int(row[0])
