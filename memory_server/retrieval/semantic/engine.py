"""One model's engine: its table of vectors (one int8 row per distinct observation text, with a
scale and sign bits), each graph's layout over it, the background embedding of the memory, the
side file that keeps the table across processes, and the search of a graph's nearest
observations (the package's guarantees 3 to 7).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ... import background
from .model import BATCH, DIMENSIONS, MAX_CHARACTERS, Model
from .neighbours import EXACT_UP_TO, SHORTLIST_MIN, WORDS, quantize, scores, scores_of, sign_codes, table_scores

if TYPE_CHECKING:
    import numpy as np

    from ...model.graph import Graph
    from ..vectors import VectorFile

SYNC_CHARACTERS: Final = 1024
"""Characters of not yet embedded observations a search embeds itself (a few facts just written);
more go to the background."""
MIN_SIMILARITY: Final = 0.2
"""Cosine similarity below which an observation is not an answer. Unrelated short texts score
about 0 to 0.15 with this model; a fact that answers a keyword query about 0.25 to 0.6."""
STEP_CHARACTERS: Final = 2 * MAX_CHARACTERS
"""Characters the background embeds between two checks of `stopping` (two long texts, or up to
BATCH short ones): one step is a small fraction of the process's close timeout even on a loaded machine."""
QUERIES_KEPT: Final = 256
"""Query vectors kept (paging a search asks for the same query again)."""
CHECKPOINT: Final = 4096
"""Vectors embedded in the background between two saves of the side file (so that a process
killed while it embeds a large memory leaves most of the work on disk)."""
SAVE_DELAY: Final = 1.0
"""Seconds after a search that finds texts gone before the side file is written without them
(writes come in bursts: one save for the burst)."""


@dataclass(slots=True)
class SideVectors:
    """A side file as read for one model: its keys, vectors and scales (None: none usable), and
    the vectors' sign bits."""

    file: VectorFile
    digest: str
    held: tuple[Any, Any, Any] | None
    codes: Any


def read_vectors(side_file: Path, memory_name: str, digest: str) -> SideVectors:
    """The side file's vectors for the model of sha256 `digest`, with their sign bits: work that
    needs no model, so it can run beside the model's load (lifecycle)."""
    import numpy as np

    from ..vectors import VectorFile

    file = VectorFile(side_file, memory_name)
    held = file.read(digest)
    return SideVectors(file, digest, held, None if held is None else sign_codes(np, held[1]))


def _steps(texts: Sequence[str]) -> Sequence[list[str]]:
    """`texts` in steps of at most BATCH texts and about STEP_CHARACTERS characters (each at least one text)."""
    steps: list[list[str]] = []
    step: list[str] = []
    size = 0
    for text in texts:
        cost = min(len(text), MAX_CHARACTERS)
        if step and (len(step) >= BATCH or size + cost > STEP_CHARACTERS):
            steps.append(step)
            step, size = [], 0
        step.append(text)
        size += cost
    if step:
        steps.append(step)
    return steps


def text_key(text: str) -> bytes:
    """The key of a text's vector in the side file: the first 16 bytes of its UTF-8 sha256."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def _keys_digest(np: Any, keys: Any) -> bytes:
    """Which set of text keys (numpy "S16") a side file holds, whatever their order, in 32 bytes."""
    return hashlib.blake2b(np.sort(keys).tobytes(), digest_size=32).digest()


def _query_key(query: str) -> bytes:
    return hashlib.blake2b(query[:MAX_CHARACTERS].encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(slots=True)
class _Layout:
    """A graph's observations in order, and their rows in the table as of `version` (-1: not yet)."""

    names: list[str]
    indexes: list[int]
    texts: list[str]
    distinct: int
    rows: Any  # numpy array of int64
    version: int


class Engine:
    """A loaded model with its table of vectors (text -> row of `matrix`, int8 with a scale per row)."""

    def __init__(self, model: Model, limit: int) -> None:
        import numpy as np

        self._np = np
        self.model = model
        self.limit = limit
        self.digest = model.digest
        self.lock = threading.Lock()
        """Guards the table (rows, matrix, scales, count, version, stored) and the worker's state."""
        self.changed = threading.Condition(self.lock)
        """Notified when vectors are added and when the worker stops."""
        self.rows: dict[str, int] = {}
        self.matrix = np.zeros((0, DIMENSIONS), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        self.codes = np.zeros((WORDS, 0), dtype=np.uint64)
        """Each row's sign bits (:func:`sign_codes`)."""
        self.exact_up_to = EXACT_UP_TO
        """Rows up to which a search scans exactly (guarantee 6)."""
        self.shortlist_least = SHORTLIST_MIN
        self.count = 0
        self.version = 0
        self.stored: Any = None
        """The side file's text keys (numpy "S16", by row), until the first graph takes those it holds."""
        self.queries: OrderedDict[bytes, Any] = OrderedDict()
        self.pending: Graph | None = None
        self.working = False
        self.live: _Layout | None = None
        """The layout of the graph last asked about: what a save keeps."""
        self.embedded = 0
        """Texts this engine ran the model on (not counting queries): what a side file spared."""
        self.file: VectorFile | None = None
        self.saved: bytes | None = None
        """The digest of the keys the side file holds (:func:`_keys_digest`), as this engine last read or wrote it."""
        self.saving = threading.Lock()
        self.save_due = False

    def describe(self) -> str:
        with self.lock:
            return (f"all-MiniLM-L6-v2 (int8 ONNX): {self.count} observation vectors kept (at most {self.limit}), "
                    f"{self.embedded} embedded by this process"
                    + (", embedding in the background" if self.working else ""))

    # ----- vectors

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of `texts`, in order (:meth:`.model.Model.encode`)."""
        return self.model.encode(texts)

    def quantize(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return quantize(self._np, vectors)

    def scores(self, matrix: Any, scales: Any, count: int, vector: np.ndarray) -> np.ndarray:
        return scores(self._np, matrix, scales, count, vector)

    def scores_of(self, matrix: Any, scales: Any, rows: Any, vector: np.ndarray) -> np.ndarray:
        return scores_of(self._np, matrix, scales, rows, vector)

    def table_scores(self, matrix: Any, scales: Any, codes: Any, count: int, vector: np.ndarray, k: int) -> np.ndarray:
        return table_scores(self._np, matrix, scales, codes, count, vector, k,
                            exact_up_to=self.exact_up_to, least=self.shortlist_least)

    def query_vector(self, query: str) -> np.ndarray:
        key = _query_key(query)
        with self.lock:
            if (known := self.queries.get(key)) is not None:
                self.queries.move_to_end(key)
                return known
        vector = self.encode([query])[0]
        with self.lock:
            self.queries[key] = vector
            while len(self.queries) > QUERIES_KEPT:
                self.queries.popitem(last=False)
        return vector

    def _add(self, texts: Sequence[str], keep: Sequence[str]) -> None:
        """Embed `texts` and add those not in the table meanwhile; if full, keep only `keep`."""
        if not texts:
            return
        quantized, scales = self.quantize(self.encode(texts))
        with self.lock:
            self.embedded += len(texts)
            fresh = [i for i, text in enumerate(texts) if text not in self.rows]
            self._put([texts[i] for i in fresh], quantized[fresh], scales[fresh], keep)
            self.changed.notify_all()

    def _put(self, texts: Sequence[str], quantized: Any, scales: Any, keep: Sequence[str]) -> None:
        # Holding the lock. Rows below `count` never change in place: a search's snapshot of the
        # arrays stays true while rows are added (a new array when the table grows or shrinks).
        np = self._np
        if self.count + len(texts) > self.limit:
            self._rebuild([t for t in dict.fromkeys(keep) if t in self.rows], extra=len(texts))
        elif self.count + len(texts) > len(self.matrix):
            size = min(max(2 * len(self.matrix), self.count + len(texts), 1024), self.limit)
            matrix = np.empty((size, DIMENSIONS), dtype=np.int8)
            matrix[:self.count] = self.matrix[:self.count]
            scale = np.empty(size, dtype=np.float32)
            scale[:self.count] = self.scales[:self.count]
            codes = np.empty((WORDS, size), dtype=np.uint64)
            codes[:, :self.count] = self.codes[:, :self.count]
            self.matrix, self.scales, self.codes = matrix, scale, codes
        self.matrix[self.count:self.count + len(texts)] = quantized
        self.scales[self.count:self.count + len(texts)] = scales
        self.codes[:, self.count:self.count + len(texts)] = sign_codes(np, quantized)
        for offset, text in enumerate(texts):
            self.rows[text] = self.count + offset
        self.count += len(texts)
        self.version += 1

    def _rebuild(self, kept: Sequence[str], extra: int = 0) -> None:
        """The table of `kept` alone (holding the lock), with room for `extra` more."""
        np = self._np
        old = np.fromiter((self.rows[t] for t in kept), dtype=np.int64, count=len(kept))
        matrix = np.empty((max(len(kept) + extra, 1), DIMENSIONS), dtype=np.int8)
        matrix[:len(kept)] = self.matrix[old]
        scales = np.empty(len(matrix), dtype=np.float32)
        scales[:len(kept)] = self.scales[old]
        codes = np.empty((WORDS, len(matrix)), dtype=np.uint64)
        codes[:, :len(kept)] = self.codes[:, old]
        self.rows = {t: i for i, t in enumerate(kept)}
        self.matrix, self.scales, self.codes, self.count = matrix, scales, codes, len(kept)
        self.stored = None
        self.version += 1

    # ----- the side file

    def open_vectors(self, side_file: Path, memory_name: str, read: SideVectors | None = None) -> None:
        """Read the side file's vectors into the table (they answer once a graph holds their texts);
        `read`: the file as :func:`read_vectors` read it already for this model, beside the load."""
        if read is None or read.digest != self.digest:
            read = read_vectors(side_file, memory_name, self.digest)
        self.file = read.file
        if read.held is None:
            return
        keys, quantized, scales = read.held
        codes = read.codes
        with self.lock:
            self.matrix, self.scales, self.codes, self.count = quantized, scales, codes, len(keys)
            self.stored = keys
            self.saved = _keys_digest(self._np, keys)
            self.version += 1

    def save(self, graph: Graph | None = None) -> None:
        """Write the side file from the live graph's texts (`graph`, else the one last asked about):
        the vectors of texts no longer in it leave the table and the file (V4). Nothing is written
        when the file holds those keys already."""
        if self.file is None:
            return
        with self.saving:
            with self.lock:
                if graph is not None:
                    self.live = self._layout(graph)
                if self.live is None:
                    return
                self._take_stored(self.live)
                live = [t for t in dict.fromkeys(self.live.texts) if t in self.rows]
                if self.count > len(live):
                    self._rebuild(live)
                matrix, scales, count = self.matrix, self.scales, self.count
                texts = list(self.rows)
            keys = [text_key(text) for text in texts]
            digest = _keys_digest(self._np, self._np.frombuffer(b"".join(keys), dtype="S16"))
            if digest == self.saved:
                return
            if self.file.write(self.digest, keys, matrix[:count], scales[:count]):
                self.saved = digest

    def _save_later(self) -> None:
        """A save after SAVE_DELAY seconds, once for a burst of writes and searches."""
        with self.lock:
            if self.file is None or self.save_due:
                return
            self.save_due = True

        def run() -> None:
            with self.lock:
                self.save_due = False
            self.save()
        if background.process().later(SAVE_DELAY, run) is None:
            with self.lock:
                self.save_due = False

    def _save_soon(self) -> None:
        stopping = background.process().stopping
        if not stopping.is_set():
            background.process().submit(self.save)

    # ----- graphs

    def _layout(self, graph: Graph) -> _Layout:
        np = self._np
        layout: _Layout | None = graph.memo.get("semantic")
        if layout is None:
            names: list[str] = []
            indexes: list[int] = []
            texts: list[str] = []
            for name, node in graph.entities.items():
                observations = node.record.observations
                names.extend([name] * len(observations))
                indexes.extend(range(len(observations)))
                texts.extend(observations)
            layout = _Layout(names, indexes, texts, len(set(texts)), np.zeros(0, dtype=np.int64), -1)
            graph.memo["semantic"] = layout
        return layout

    def _snapshot(self, layout: _Layout) -> tuple[Any, Any, Any, Any, int]:
        """The layout's rows, the matrix, its scales, codes and count, as of one version of the table."""
        np = self._np
        with self.lock:
            if layout.version != self.version:
                rows = self.rows
                layout.rows = np.fromiter((rows.get(t, -1) for t in layout.texts), dtype=np.int64, count=len(layout.texts))
                layout.version = self.version
            return layout.rows, self.matrix, self.scales, self.codes, self.count

    def _take_stored(self, layout: _Layout) -> None:
        """Holding the lock: the side file's vectors of the layout's texts join the table; the
        others are dropped (their texts are gone from the memory), once, at the first graph."""
        if self.stored is None:
            return
        np, stored, rows = self._np, self.stored, self.rows
        wanted = [text for text in dict.fromkeys(layout.texts) if text not in rows]
        if wanted and len(stored):
            # One sort and one search of the keys' first 8 bytes, rather than a dict of half a million
            # (two keys alike in those are told apart below: the later one is embedded again).
            keys = np.frombuffer(b"".join(text_key(text) for text in wanted), dtype="S16")
            firsts = np.ascontiguousarray(stored).view(">u8")[0::2]
            order = np.argsort(firsts)
            at = np.minimum(np.searchsorted(firsts[order], np.ascontiguousarray(keys).view(">u8")[0::2]), len(order) - 1)
            found = order[at]
            for text, row, hit in zip(wanted, found.tolist(), (stored[found] == keys).tolist(), strict=True):
                if hit:
                    rows[text] = row
        self.stored = None
        self.version += 1
        kept = sorted(rows, key=rows.__getitem__)
        if len(kept) < self.count:
            self._rebuild(kept)
            self._save_soon()

    def _missing(self, layout: _Layout) -> list[str]:
        with self.lock:
            self._take_stored(layout)
            return [t for t in dict.fromkeys(layout.texts) if t not in self.rows]

    def ready(self, graph: Graph, timeout: float) -> bool:
        """Wait until every text of `graph` has its vector (embedded by the worker), at most `timeout` s."""
        layout = self._layout(graph)
        if self._missing(layout):
            self.embed_in_background(graph)
        with self.changed:
            return self.changed.wait_for(lambda: all(t in self.rows for t in layout.texts)
                                         or (not self.working and self.pending is None), timeout) \
                and all(t in self.rows for t in layout.texts)

    def embed_in_background(self, graph: Graph) -> None:
        """Have a worker embed `graph` (the newest graph asked about replaces an older one)."""
        with self.lock:
            self.pending = graph
            if self.working:
                return
            self.working = True
        if not background.process().submit(self._work):
            with self.lock:
                self.working = False
                self.changed.notify_all()

    def _work(self) -> None:
        stopping = background.process().stopping
        added = 0
        try:
            while not stopping.is_set():
                with self.lock:
                    graph = self.pending
                if graph is None:
                    break
                layout = self._layout(graph)
                missing = self._missing(layout) if layout.distinct <= self.limit else []
                for batch in _steps(missing):
                    if stopping.is_set():
                        return
                    with self.lock:
                        batch = [t for t in batch if t not in self.rows]
                    self._add(batch, layout.texts)
                    added += len(batch)
                    if added >= CHECKPOINT:
                        self.save()
                        added = 0
                    with self.lock:
                        if self.pending is not graph:
                            break
                else:
                    with self.lock:
                        if self.pending is graph:
                            self.pending = None
        finally:
            with self.lock:
                again = self.pending is not None and not stopping.is_set()
                self.working = again
                self.changed.notify_all()
            if again and not background.process().submit(self._work):
                with self.lock:
                    self.working = False
                    self.changed.notify_all()
        if not stopping.is_set():
            self.save()
            background.give_back_memory()  # (the batches' temporaries)

    def nearest(self, graph: Graph, query: str, k: int) -> list[tuple[str, int, float]] | None:
        np = self._np
        layout = self._layout(graph)
        if layout.distinct > self.limit:
            return None
        if k <= 0 or not layout.texts or not query.strip():
            return []
        if layout is not self.live:
            self.live = layout
            if self.count > layout.distinct:  # some texts are gone: their vectors leave the side file (V4)
                self._save_later()
        rows, matrix, scales, codes, count = self._snapshot(layout)
        if (rows < 0).any():
            missing = self._missing(layout)
            now: list[str] = []
            budget = SYNC_CHARACTERS
            for text in missing:
                if (cost := min(len(text), MAX_CHARACTERS)) <= budget:
                    now.append(text)
                    budget -= cost
                elif budget < 16:
                    break
            self._add(now, layout.texts)
            if len(now) < len(missing):
                self.embed_in_background(graph)
            rows, matrix, scales, codes, count = self._snapshot(layout)
        vector = self.query_vector(query)
        scores = self.table_scores(matrix, scales, codes, count, vector, k)
        if (known := rows >= 0).all():
            similarity = scores[rows]
        else:
            similarity = np.full(len(rows), -1.0, dtype=np.float32)
            similarity[known] = scores[rows[known]]
        best = int(min(k, len(similarity)))
        top = np.argpartition(-similarity, best - 1)[:best]
        top = top[np.argsort(-similarity[top], kind="stable")]
        return [(layout.names[i], layout.indexes[i], float(similarity[i]))
                for i in top.tolist() if similarity[i] >= MIN_SIMILARITY]
