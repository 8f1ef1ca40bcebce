"""The process's engines: one per model file, loaded once by a worker of the process's
:mod:`...background`, and the calls the rest of the memory makes (the package's guarantees 1
and 2; every call here returns None or False, never raises, when no model can be used).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ... import background
from .engine import Engine, SideVectors, read_vectors
from .model import PACKAGE_MISSING, load, model_file, unusable

if TYPE_CHECKING:
    import numpy as np

    from ...model.graph import Graph

ENABLE_VARIABLE: Final = "MEMORY_SEMANTIC"
MAX_VARIABLE: Final = "MEMORY_SEMANTIC_MAX"
DEFAULT_MAX: Final = 1_000_000
"""Vectors kept, at most: 436 MB of int8 vectors with their scales and sign bits (docs/semantic.md: the whole cost)."""
LOAD_WAIT: Final = 30.0
"""Seconds the first call waits for the model (and the side file) to load before it answers by
words: once per process, work of a fixed size, bounded so that a starved machine still answers."""
_OFF: Final = frozenset({"off", "0", "false", "no"})


def nearest(graph: Graph, query: str, k: int) -> list[tuple[str, int, float]] | None:
    """The `k` observations of `graph` nearest `query` in meaning (guarantee 6), or None when no
    model can be used (guarantee 2)."""
    found = engine(os.environ)
    try:
        return None if found is None else found.nearest(graph, query, k)
    finally:
        _first_search.done()


def after_first_search(then: Callable[[], object], timeout: float) -> None:
    """Call `then` once this process's first search by meaning has its answer, or at once when
    there will be none (off, not installed, a model that did not load), or after `timeout`
    seconds (guarantee 9): work that would share the interpreter with that answer (the graph's
    word index, at a first start) waits for it. `then` runs in the thread that answered, or in a
    worker of the Background; it should only hand work over."""
    _first_search.then(then, timeout)


class _FirstSearch:
    """Whether the first search by meaning has answered, and who waits for it (guarantee 9)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._waiting: list[Callable[[], object]] = []

    def then(self, function: Callable[[], object], timeout: float) -> None:
        if not self._answered_anyway():
            with self._lock:
                if not self._done:
                    self._waiting.append(function)
                    if background.process().later(timeout, lambda: self._run(function)) is not None:
                        return
                    self._waiting.remove(function)  # closing: at once
        function()

    def _answered_anyway(self) -> bool:
        """No search will answer by meaning: off, not installed, or a load that failed."""
        if _disabled(os.environ):
            return True
        path, _ = model_file(os.environ)
        slot = _slots.get(str(path))
        return slot is None and unusable(path) is not None or slot is not None and slot.reason is not None

    def _run(self, function: Callable[[], object]) -> None:
        with self._lock:
            if function not in self._waiting:
                return  # (run when the search answered)
            self._waiting.remove(function)
        function()

    def done(self) -> None:
        if self._done:
            return
        with self._lock:
            self._done, waiting, self._waiting = True, self._waiting, []
        for function in waiting:
            function()


_first_search = _FirstSearch()


def embed(texts: Sequence[str]) -> np.ndarray | None:
    """The vectors of `texts`, in order: a float32 array of shape (len(texts), DIMENSIONS),
    each row of unit length (so a dot product is the cosine similarity); None when no model can be
    used (guarantee 2). Each text is cut to MAX_CHARACTERS characters, then to MAX_TOKENS tokens,
    as the model was trained. Runs in the calling thread, on the model's one thread: call it off
    the request path. Equal texts give equal vectors, in every process of the same model file."""
    found = engine(os.environ)
    if found is None:
        return None
    return found.encode(texts)


def model_digest() -> str | None:
    """The sha256 of the model file in use (vectors of another model are not comparable), or None
    when no model can be used."""
    found = engine(os.environ)
    return None if found is None else found.digest


def model_identity() -> str | None:
    """Which model this process embeds with (:func:`model_digest`): vectors kept elsewhere are
    compared only with those of the same model."""
    return model_digest()


def query_vector(query: str) -> np.ndarray | None:
    """The unit vector of a query (kept for the next search of it); None when no model can be used."""
    found = engine(os.environ)
    return None if found is None else found.query_vector(query)


def prepare() -> None:
    """Start loading the model, and the side file's vectors, in the background; return at once
    (guarantee 1). Nothing when the model is off, not installed, or already loading or loaded."""
    engine(os.environ, wait=0.0)


def keep_vectors_at(side_file: Path, memory_name: str) -> None:
    """Keep the vectors in `side_file`, beside the memory file named `memory_name` (guarantee 3);
    the server calls it once, before the first search. Loads nothing by itself."""
    global _side_file
    _side_file = (side_file, memory_name)


def ready(graph: Graph, timeout: float) -> bool:
    """Wait until every observation of `graph` has its vector (or `timeout` seconds); whether it has.
    False at once when no model can be used."""
    found = engine(os.environ, wait=timeout)
    return found is not None and found.ready(graph, timeout)


def close(graph: Graph | None) -> None:
    """At the end of the process, after the Background's close: the side file is written from
    `graph` (the memory as it is now; None: the graph last searched), so that it holds the vector
    of no text deleted meanwhile (retrieval/vectors.py V4)."""
    for slot in list(_slots.values()):
        if slot.engine is not None:
            slot.engine.save(graph)


def status() -> str:
    """What semantic search does in this process, in one line (for stats and for the curious)."""
    if _disabled(os.environ):
        return f"off ({ENABLE_VARIABLE}={os.environ[ENABLE_VARIABLE]})"
    path, _ = model_file(os.environ)
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
        if reason != PACKAGE_MISSING:
            print(f"mcp-server-memory: semantic search is off, words only: {reason}", file=sys.stderr, flush=True)
        self.done.set()
        _first_search.done()  # no search will answer by meaning: what waits for one goes on


_slots: dict[str, _Slot] = {}
"""Model file -> its load (so that a failed load is tried only once)."""
_slots_lock = threading.Lock()
_side_file: tuple[Path, str] | None = None


def _disabled(environ: Any) -> bool:
    return environ.get(ENABLE_VARIABLE, "").strip().lower() in _OFF


def _limit(environ: Any) -> int:
    raw = environ.get(MAX_VARIABLE, "").strip()
    try:
        value = int(raw) if raw else DEFAULT_MAX
    except ValueError:
        value = DEFAULT_MAX
    return max(value, 1)


def engine(environ: Any, wait: float = LOAD_WAIT) -> Engine | None:
    """The engine of the model `environ` names, its load started by the first call and waited
    for at most `wait` seconds (guarantee 1); None when no model can be used (guarantee 2)."""
    if _disabled(environ):
        return None
    path, digest = model_file(environ)
    key = str(path)
    slot = _slots.get(key)
    if slot is None:
        with _slots_lock:
            if (slot := _slots.get(key)) is None:
                slot = _slots[key] = _Slot()
                if (reason := unusable(path)) is not None or isinstance(path, str):
                    slot.fail(reason or PACKAGE_MISSING)
                elif not background.process().submit(lambda: _load(slot, Path(path), digest, _limit(environ))):
                    slot.fail("the server is closing")
    if not slot.done.wait(wait) or slot.engine is None:
        return None
    slot.engine.limit = _limit(environ)
    return slot.engine


def session(path: Path, digest: str | None, limit: int) -> Engine | str:
    """A new engine of the model at `path` (sha256 `digest` when not None), with an empty table of
    at most `limit` vectors; or why the model cannot be used."""
    model = load(path, digest)
    return model if isinstance(model, str) else Engine(model, limit)


def _load(slot: _Slot, path: Path, digest: str | None, limit: int) -> None:
    """In a worker of the Background: the model, then the side file's vectors (guarantee 1). When
    the model's sha256 is known before it is read (the packaged model's), the side file is read
    by another worker meanwhile: its reading, digest and sign bits need no model."""
    side = _side_file
    early = None if side is None or digest is None else _Early(side, digest)
    if early is not None and not background.process().submit(early.run):
        early = None
    try:
        outcome = session(path, digest, limit)
    except BaseException:
        slot.fail("the model's load stopped")
        raise
    if isinstance(outcome, str):
        slot.fail(outcome)
        return
    if side is not None:
        outcome.open_vectors(*side, read=None if early is None else early.result())
    background.give_back_memory()
    slot.engine = outcome
    slot.done.set()


class _Early:
    """The side file read by another worker while the model loads. Not started by the time the
    model is loaded (every worker busy), it is not waited for: the load reads the file itself."""

    def __init__(self, side: tuple[Path, str], digest: str) -> None:
        self._side = side
        self._digest = digest
        self._lock = threading.Lock()
        self._state = "queued"
        self._done = threading.Event()
        self._read: SideVectors | None = None

    def run(self) -> None:
        with self._lock:
            if self._state != "queued":
                return
            self._state = "running"
        try:
            self._read = read_vectors(*self._side, self._digest)
        finally:
            with self._lock:
                self._state = "read"
            self._done.set()

    def result(self) -> SideVectors | None:
        """What it read; None when it had not started, or failed (the load reads the file)."""
        with self._lock:
            if self._state in ("queued", "dropped"):
                self._state = "dropped"  # (its run, if it comes, reads nothing)
                return None
        self._done.wait()  # running, or read: a read of one file, which waits on nothing else
        return self._read
