"""The nearest neighbours of a query among kept vectors: int8 vectors with a scale each, their
sign bits, an exact scan up to :data:`EXACT_UP_TO` rows and above that a shortlist by sign bits
scored exactly (the package's guarantee 6). Pure functions of numpy arrays (`np` is the numpy
module, passed in so that importing this loads nothing): a file's engine (:mod:`.engine`) and a
store that keeps its own vectors (storage/postgres/vectors.py) search alike.
"""

from __future__ import annotations

from typing import Any, Final

from .model import DIMENSIONS

CHUNK: Final = 65_536
"""Rows of the table scored at a time (bounds the temporaries of a search)."""
EXACT_UP_TO: Final = 16_384
"""Vectors up to which a search scores every row exactly; above, sign bits shortlist
(docs/semantic.md: the cost of each)."""
SHORTLIST_MIN: Final = 4096
"""Rows a shortlist holds at least (re-scoring them in int8 costs little next to the scan of sign bits)."""
SHORTLIST_SHARE: Final = 32
"""A shortlist holds at least one row in this many of the table (3 %: recall@10 0.985 on 50,000 real
MiniLM vectors of bench_semantic.py --recall, where 1.6 % gave 0.963 and 0.8 % 0.938)."""
WORDS: Final = DIMENSIONS // 64
"""64-bit words of a vector's sign bits."""


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
