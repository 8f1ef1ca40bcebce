"""The first answers of a new process, and the cache kept for the next one.

A new process (clients start one per chat) has no graph yet. :class:`ColdStart` decides, at the
first read, what answers while the graph is loaded in the background: the cache beside the file
(index_cache.py) when it matches the file's bytes, else, for a file large enough to be worth a
cache, the file's records as decoded (:class:`FirstRecords`); :class:`CacheKeeper` makes the cache
again once the memory is quiet, and when the store closes.

States of a ColdStart, each changed only by the method named::

    NEW --look_ahead()--> LOOKING --first read (decide)--> COLD --warmed()--> WARM --ranked()--> HOT
      \\______________________ first read, small file ________________________________/^
    COLD, WARM --failed() (a check failed, the file changed)--------------------------------/
    NEW, LOOKING --graph_made() (a write or a poll made the graph before any read)-----------/

    NEW      nothing read yet.
    LOOKING  a worker reads the file (and hashes it and opens the cache, when there is one)
             while the server imports.
    COLD     a first-answer source answers every read it can: the cache, when it matched the
             file's bytes; else the file's records, decoded once. Once the first answer is
             worked out, a worker makes the graph (from the same bytes or records).
    WARM     the graph and its word index answer; the cache still ranks searches by words until
             the graph's ranking index is made. (Records rank nothing: they go from COLD to HOT.)
             The warm-up takes that index from the cache's postings right after the word index
             when it can (index_cache C7): WARM lasts that long (under a second at 100,000 entities).
    HOT      the graph answers everything; the first-answer source is let go.

Guarantees (tests/test_index_cache.py, tests/test_store_cache.py, tests/test_coldstart.py):

S1. A first-answer source answers only in COLD and WARM, and only while the file's stat signature
    is the one of the bytes it was made from (for the cache: index_cache C1, C2); a source that
    fails a check while answering (C3) is let go at once (HOT), and the graph answers that read.
S2. The file is read once for a first start, and decoded once: the bytes read (and hashed for the
    cache) are the bytes the graph is loaded from, and records decoded for first answers are the
    records it is made of (when the file still has that signature), sharing the answer objects
    a read_graph made of them.
S3. The work of a first start runs on the store's own Background, and ends when the store closes.
    The keeper's quiet wait is one delayed call at a time, of the process's Background
    (memory_server/background.py B2: a process ending without close() is not held up by it),
    cancelled by close(); the refresh it hands to the store's Background is handed over before
    close() can return.
S4. Records answer as the graph would: open_nodes and a search by the whole query (rule 1) by
    the graph's own functions on the part of the graph the answer depends on
    (model/graph.part_of_lines: the named entities, or those whose text holds the query, and
    every relation touching one); read_graph from the same answer objects and counts
    (model/graph.read_graph_of_lines). A search by words (rule 2), or within a time, waits for
    the graph.
K1. The cache is made again, off the request path, once the memory has had no call for
    QUIET seconds after its file changed; a busy stretch costs one build, after it.
K2. When the store closes and the cache does not match the file (a write came since, or the file
    was never cached), it is made then, within CLOSE_BUDGET seconds of work: a chat closed just
    after a write leaves the next process its cache.
K3. A save removes the cache before it is acknowledged, and no build begun before the save lands
    after it (index_cache C5): the keeper's guard and generation.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Final, TypeAlias

from .. import background
from ..background import Background
from ..index.search import search_text
from ..model import graph as rules
from ..model.graph import Graph
from ..model.records import EntityRecord, Extended, Line
from . import cache_build, index_cache
from .files import Signature, read_file, stat_signature
from .loading import decode, json_document

log = logging.getLogger(__name__)

QUIET: Final = 2.0
"""Seconds without a call before the cache is made again, so that the work never competes with answers."""
FIRST_LOOK_WAIT: Final = 30.0
"""Seconds the first read waits for the look ahead (a slow disk) before doing the work itself."""
CLOSE_BUDGET: Final = 4.0
"""Seconds of work the cache may take when the store closes (K2): a larger memory's build is
skipped then (the next process builds it once its memory is quiet)."""
BUILD_RATE: Final = 40e6
"""Bytes of memory file a cache build handles per second, at least (measured: 57 MB in 0.9 s with
the ranking's index made, 2.2 s without), for K2's estimate."""


class State(enum.Enum):
    NEW = "new"
    LOOKING = "looking ahead"
    COLD = "cold"
    WARM = "warm"
    HOT = "hot"


class FileBytes:
    """The memory file's bytes as read once, their stat signature, their records once decoded, and
    the answer objects of those once a read_graph made them (S2)."""

    __slots__ = ("data", "lines", "signature", "views")

    def __init__(self, data: bytes, signature: Signature) -> None:
        self.data = data
        self.signature = signature
        self.lines: list[Line] | None = None
        self.views: rules.Views | None = None

    @classmethod
    def read(cls, file: Path) -> FileBytes | None:
        """None when unreadable: the graph answers, and its load reports why."""
        try:
            data, signature = read_file(file)
        except OSError:
            return None
        return cls(data, signature)


class FirstRecords:
    """A large file's first answers from its records, before its graph is made (S4)."""

    def __init__(self, read: FileBytes, lines: list[Line]) -> None:
        self._read = read
        self._lines = lines
        self._whole: dict[str, Any] | None = None

    def open_nodes(self, names: list[str]) -> dict[str, Any]:
        return rules.open_nodes(rules.part_of_lines(self._lines, set(names)), names)

    def containing(self, query: str, loaded: Graph | None = None) -> Graph:
        """The part of the graph holding the whole query, and every relation touching it (S4);
        of the nodes and edges of `loaded`, the graph made of these records, once it is made
        (candidates F5)."""
        needle = query.lower()
        holders = set()
        item: Any
        for item in self._lines:
            record = item.record if type(item) is Extended else item
            # Every record of a name is looked at: the part keeps the first, as the graph does.
            if type(record) is EntityRecord and needle in search_text(record.name, record.entityType,
                                                                      record.observations):
                holders.add(record.name)
        if loaded is not None:
            return rules.part_of_graph(loaded, holders)
        return rules.part_of_lines(self._lines, holders)

    def holding(self, words: str, loaded: Graph | None = None) -> None:
        return None  # the ranking counts over every entity: the graph's (S4)

    def read_graph(self) -> dict[str, Any]:
        if (whole := self._whole) is None:
            whole = self._whole = rules.read_graph_of_lines(self._lines)
            # The graph made of these records shares the objects (S2): a read_graph costs no second copy.
            self._read.views = (whole["entities"], whole["relations"])
        return whole

    def graph_units(self) -> dict[str, Any]:
        return self.read_graph()

    def close(self) -> None:
        """Nothing to close: an answer under way when the records are let go still reads them all,
        and they are freed with the last one."""


FirstSource: TypeAlias = "index_cache.ColdIndex | FirstRecords"
"""What answers in COLD (and, for the cache, WARM)."""


class ColdStart:
    """The first start of one store: see the module docstring for the states."""

    def __init__(self, file: Path, workers: Background, warm_up: Callable[[], None],
                 changed: Callable[[], None]) -> None:
        """`changed`: called after each change of state (settling.py E1)."""
        self._file = file
        self._workers = workers
        self._changed = changed
        self._warm_up = warm_up
        """Makes the graph from take_read() and its word index (the store's); then warmed()."""
        self._lock = threading.Lock()
        self.state = State.NEW
        self._looking: Future[tuple[FileBytes | None, index_cache.ColdIndex | None]] | None = None
        self._cold: FirstSource | None = None
        self._checked: Signature = None
        self._read: FileBytes | None = None
        """The bytes (and records) of the first start, until the graph is made of them (S2)."""
        self._warming = False
        self.answered = 0
        """How many answers the cache gave."""
        self.answered_by_records = 0
        """How many answers records gave (S4)."""

    def look_ahead(self) -> Future[tuple[FileBytes | None, index_cache.ColdIndex | None]] | None:
        """NEW -> LOOKING: what the first read will need, read in a worker. Called while the
        server is still starting (a client waits for its first answer): the reading and hashing
        let go of the interpreter, so they overlap the imports."""
        with self._lock:
            if self.state is not State.NEW:
                return None
            self.state = State.LOOKING
            self._changed()
            self._looking = self._workers.run(self._look)  # (None once closed: the read does it)
            return self._looking

    def _look(self) -> tuple[FileBytes | None, index_cache.ColdIndex | None]:
        read = FileBytes.read(self._file)
        # No cache, no hash to check it with (tens of ms for a large file).
        if read is None or not index_cache.worth_caching(read.signature) \
                or not index_cache.cache_path(self._file).exists():
            return read, None
        return read, index_cache.ColdIndex.open(self._file, read.data, index_cache.digest_of(read.data))

    def cache(self, *, words: bool = False) -> FirstSource | None:
        """The first-answer source to answer from (S1), or None: the graph answers. `words`: for a
        search by words, which the cache also answers in WARM. The first call decides (COLD or HOT)."""
        if self.state is State.HOT:
            return None
        with self._lock:
            if self.state in (State.NEW, State.LOOKING):
                self._decide()
            if self.state is State.COLD or (words and self.state is State.WARM):
                try:
                    if stat_signature(self._file) == self._checked:
                        return self._cold
                except OSError:
                    pass
                self._let_go()
        return None

    def _decide(self) -> None:
        looked = None
        if self._looking is not None:
            with suppress(Exception):  # only time is lost: this read does it all again
                looked = self._looking.result(FIRST_LOOK_WAIT)
            self._looking = None
        read, cached = looked if looked is not None else (None, None)
        try:
            if read is None or stat_signature(self._file) != read.signature:
                read, cached = self._look()
        except OSError:
            read, cached = None, None
        self._read = read  # the graph is made of these bytes (S2)
        cold: FirstSource | None = cached
        if read is not None and cold is None and index_cache.worth_caching(read.signature):
            read.lines = decode(read.data)  # and of these records (S2, S4)
            if json_document(self._file, read.data, read.lines) is None:  # else the graph refuses it (loading L5)
                cold = FirstRecords(read, read.lines)
        if read is not None and cold is not None:
            self.state, self._cold, self._checked = State.COLD, cold, read.signature
        else:
            self.state = State.HOT
        self._changed()

    def count(self, source: FirstSource) -> None:
        """`source` gave an answer."""
        if isinstance(source, FirstRecords):
            self.answered_by_records += 1
        else:
            self.answered += 1

    def graph_made(self) -> None:
        """The store made its graph (a load, a save). Before any first read (a write came first, or
        the watcher's poll): the graph answers from now on (-> HOT), nothing else is read."""
        with self._lock:
            if self.state not in (State.NEW, State.LOOKING):
                return
            self._let_go()
            looking, self._looking = self._looking, None
        _drop(looking)

    def start_warm_up(self) -> None:
        """After the first read in COLD has its answer: the graph made by a worker of the bytes the
        cache was checked against, or of the records (the answer did not share the interpreter with it)."""
        with self._lock:
            if self._warming or self.state is not State.COLD:
                return
            self._warming = True
        # A Future nobody reads, as the store's other work: closed, the graph is loaded when a read needs it.
        self._workers.run(self._warm_up)

    def take_read(self) -> FileBytes | None:
        """The bytes (and records) the first read took (S2), once; None when there are none."""
        with self._lock:
            read, self._read = self._read, None
        return read

    def warmed(self) -> None:
        """COLD -> WARM (the cache answered) or HOT (records did): the graph and its word index
        answer from now on."""
        with self._lock:
            if isinstance(self._cold, FirstRecords):
                self._let_go()
            elif self.state is State.COLD:
                self.state = State.WARM
                self._changed()

    def ranked(self) -> None:
        """-> HOT: the graph's ranking index is made."""
        with self._lock:
            self._let_go()

    def failed(self, error: Exception) -> None:
        """-> HOT: the first-answer source failed a check (S1)."""
        if isinstance(self._cold, FirstRecords):
            log.warning("The first answer from the records of %s failed (%r); answering from the graph.",
                        self._file, error)
        else:
            log.warning("The index cache %s could not answer (%r); answering from the memory file.",
                        index_cache.cache_path(self._file), error)
        with self._lock:
            self._let_go()

    def _let_go(self) -> None:
        self.state = State.HOT
        self._changed()
        cold, self._cold = self._cold, None
        if cold is not None:
            cold.close()

    def close(self) -> None:
        with self._lock:
            self._let_go()
            looking, self._looking = self._looking, None
        _drop(looking)


def _drop(looking: Future[tuple[FileBytes | None, index_cache.ColdIndex | None]] | None) -> None:
    """A look ahead no read will use: cancelled, or its cache closed once it is done."""
    if looking is not None and not looking.cancel():
        looking.add_done_callback(_close_looked)


def _close_looked(looking: Future[tuple[FileBytes | None, index_cache.ColdIndex | None]]) -> None:
    with suppress(Exception):
        if (cold := looking.result()[1]) is not None:
            cold.close()


class CacheKeeper:
    """Makes the cache of the graph the store holds, when the memory is quiet and at close (K1-K3).

    `current` gives the store's graph and the stat signature of the file it was read from or
    saved as (None: no graph yet); `ranked` gives that graph with its ranking index made."""

    def __init__(self, file: Path, workers: Background, closing: threading.Event,
                 current: Callable[[], tuple[Graph, Signature] | None], ranked: Callable[[], Graph],
                 changed: Callable[[], None]) -> None:
        """`changed`: called once the cache is known to match a version of the file (settling.py E1)."""
        self._file = file
        self._changed = changed
        self._workers = workers
        self._closing = closing
        self._current = current
        self._ranked = ranked
        self._lock = threading.Lock()
        self._guard = threading.Lock()
        self._generation = 0
        self._last_call = 0.0
        self._timer: background.Later | None = None
        self._matched: Signature = None
        """The file's signature when the cache was last seen to match it (no build needed)."""

    def touched(self) -> None:
        """A call: the memory is not quiet."""
        self._last_call = time.monotonic()

    def changed(self) -> None:
        """The graph was loaded or saved: the cache is made again once the memory is quiet (K1)."""
        with self._lock:
            self._last_call = time.monotonic()
            if self._timer is None and not self._closing.is_set():
                self._start_timer(QUIET)

    def _start_timer(self, delay: float) -> None:
        # Delayed work of the process's Background, not a waiting worker: a process that ends
        # without close() (a command) is not held up by it, and the store's workers stay free
        # for answers.
        self._timer = background.process().later(delay, self._when_quiet)

    def _when_quiet(self) -> None:
        with self._lock:
            left = self._last_call + QUIET - time.monotonic()
            if self._closing.is_set():
                self._timer = None
                return  # close() makes it (K2)
            if left > 0:
                self._start_timer(left)
                return
            self._timer = None
            # Under the lock, so that a close() that follows finds the refresh in the store's
            # workers, whose close waits for it, rather than submitted after it returned (refused
            # once closed: close() made it).
            self._workers.run(self.refresh)

    def close(self) -> None:
        """Stops waiting for quiet; the caller then makes the cache itself (K2)."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def matches(self) -> bool:
        """The cache is known to match the file as it is now (a build, or one found current)."""
        matched = self._matched
        try:
            return matched is not None and stat_signature(self._file) == matched
        except OSError:
            return False

    def removed(self) -> None:
        """A save is about to be acknowledged: the cache and any build in progress go (K3)."""
        with self._guard:
            self._generation += 1
            self._matched = None
            cache_build.remove(self._file)

    def refresh(self, budget: float | None = None) -> bool:
        """Makes the cache unless it matches the file already; True when one was made. `budget`:
        seconds of work allowed, skipped when the file is too large for them (K2)."""
        current = self._current()
        if current is None or not index_cache.worth_caching(current[1]):
            return False
        graph, signature = current
        if signature == self._matched:
            return False
        if budget is not None and signature is not None and signature[1] / BUILD_RATE > budget:
            return False
        generation = self._generation
        try:
            data, read_signature = read_file(self._file)
            if read_signature != signature:
                return False  # changed meanwhile: its load schedules the next build
            digest = index_cache.digest_of(data)
            if index_cache.is_current(self._file, data, digest):
                self._matched = signature
                self._changed()
                return False  # another process made it already
            if graph.terms is None:
                graph = self._ranked()
            made = cache_build.build(self._file, graph, data, digest, lambda: self._wanted(generation, signature))
            if made and stat_signature(self._file) != signature:
                # Another process saved meanwhile (and removed the cache): this one goes too.
                cache_build.remove(self._file)
                return False
            if made:
                self._matched = signature
                self._changed()
            return made
        except Exception as error:  # the cache only saves time; the file is what counts
            log.warning("The index cache %s could not be made (%r).", index_cache.cache_path(self._file), error)
            return False

    @contextmanager
    def _wanted(self, generation: int, signature: Signature) -> Iterator[bool]:
        with self._guard:
            try:
                current = stat_signature(self._file) == signature
            except OSError:
                current = False
            yield current and generation == self._generation
