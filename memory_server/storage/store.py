"""The knowledge graph kept in one JSONL file that several processes may share.

Reads use the graph held in memory and re-read the file only when its stat signature changed.
Writes hold ``<memory file>.lock`` (see lock.py) while they make sure they start from the file's
current bytes, change and save, so writes from different processes take turns. Saves replace the
file atomically (see files.py).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Final, NamedTuple

from ..model import graph as rules
from ..model.graph import Change, Graph, GraphError
from ..model.records import Layout, decode_file, file_layout, layout_pieces
from . import index_cache
from .files import (
    Signature,
    append_rejected,
    create_private_directories,
    fsync_directory,
    holds,
    read_file,
    rejected_path_for,
    remove_debris,
    staged,
    stat_signature,
)
from .lock import (
    LOCK_REFRESH_EVERY,
    LOCK_STALE_AFTER,
    LOCK_TIMEOUT,
    POLL_INTERVAL,
    LockTimeout,
    LockTimings,
    MemoryFileLock,
    WriteAbandoned,
)

__all__ = [
    "LOCK_REFRESH_EVERY",
    "LOCK_STALE_AFTER",
    "LOCK_TIMEOUT",
    "GraphError",
    "GraphStore",
    "LockTimeout",
    "LockTimings",
    "MemoryFileLock",
    "NotInMemory",
    "WriteAbandoned",
    "WriteResult",
]

@dataclass(frozen=True)
class WriteResult:
    value: dict[str, Any]
    """The tool's structuredContent; shares objects with the graph, so read-only."""
    changed: bool
    """False when the call changed nothing."""
    notes: list[str]
    """Extra remarks for the model, e.g. about lines moved out of the memory file."""


class _CollectorPause:
    """Loading a large file creates millions of containers; the cyclic collector would scan the
    growing heap again and again (it doubles the load time) while none of them can form a cycle.
    Counted, so that overlapping loads in several threads resume collection only at the end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pausers = 0
        self._resume = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._pausers == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._pausers += 1
        try:
            yield
        finally:
            with self._lock:
                self._pausers -= 1
                if self._pausers == 0 and self._resume:
                    gc.enable()


_collector_paused: Final = _CollectorPause()


def _log(message: str) -> None:
    print(f"memory_server: {message}", file=sys.stderr, flush=True)


def describe_load(file: Path, graph: Graph) -> list[str]:
    """What a person editing the file by hand should know about what was just loaded."""
    messages = []
    if graph.rejected:
        numbers = ", ".join(str(line.number) for line in graph.rejected[:10])
        more = ", ..." if len(graph.rejected) > 10 else ""
        messages.append(
            f"{file}: {rules.plural(len(graph.rejected), 'line is', 'lines are')} not valid JSON "
            f"(line {numbers}{more}), so not part of the graph; the next write moves "
            f"{'it' if len(graph.rejected) == 1 else 'them'} to {rejected_path_for(file)}")
    repeats = sum(1 for kept in graph.kept if kept.entity is not None or kept.relation is not None)
    if repeats:
        messages.append(
            f"{file}: {rules.plural(repeats, 'line repeats', 'lines repeat')} an entity name or relation "
            "defined earlier; the first one is used, the repeats stay in the file")
    if unknown := len(graph.kept) - repeats:
        messages.append(
            f"{file}: {rules.plural(unknown, 'line is', 'lines are')} JSON but not an entity or relation "
            f"this server can use; kept in the file as {'it is' if unknown == 1 else 'they are'}")
    return messages


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class _Snapshot(NamedTuple):
    graph: Graph
    signature: Signature
    content: Sequence[bytes] | None = None
    """The bytes the graph was read from or saved as, so that a writer can tell for certain that
    the file still holds them (a stat signature can repeat); None when unknown."""
    layout: Layout = ()
    """How this process last saved the file, for the next save to reuse the pieces that stay the same."""


INLINE_ITEMS: Final = 100_000
"""Entities plus relations above which a search or read_graph goes to a worker even when the graph
is in memory: at that size it takes tens of ms, which on the event loop would hold up every other
request (a worker gives them turns). open_nodes costs the same at any size."""
FIRST_LOOK_WAIT: Final = 30.0
"""Seconds the first read waits for the look ahead (a slow disk) before doing the work itself."""


REFRESH_DELAY: Final = 2.0
"""Seconds without a call before the cache is rebuilt (and the ranking's index made), so that
the work never competes with answers."""
WARM_UP_DELAY: Final = 0.2
"""Seconds between the first answer from the cache and the start of loading the file: parsing
holds the interpreter for long stretches, and the answer has yet to be encoded and sent."""


class _CacheState:
    """What a store knows of its cache: the cold index used before its first load, and refreshes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tried = False
        self.done = False
        """True once the graph answers (or the cache could not)."""
        self.cold: index_cache.ColdIndex | None = None
        self.signature: tuple[int, int, int, int] | None = None
        """The memory file's stat signature when the cold index was checked against its bytes."""
        self.refresh_pending = False
        self.last_activity = 0.0
        """When the store last answered a call (time.monotonic)."""
        self.answered = 0
        """How many answers the cache gave."""
        self.ahead: _LookAhead | None = None
        """The store's look ahead at the cache and the file, until the first read takes it."""


class _LookAhead:
    """What the look ahead found: the cache (None: no usable one) and the file's bytes, their
    stat signature and digest (empty: not read)."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.cold: index_cache.ColdIndex | None = None
        self.checked: list[tuple[bytes, Signature, str]] = []


class NotInMemory(Exception):
    """A read asked to use only the graph in memory needs more: the file (re)loaded, the cache
    opened, or an index made. Ask again without `in_memory`, on a thread that may wait for it."""


class _StaleStart(Exception):
    """The file no longer holds the bytes a write started from: it starts again from the file."""


class GraphStore:
    """The graph of one memory file, safe to call from many threads and many processes."""

    def __init__(self, path: Path, *, lock_timeout: float | None = None, stale_after: float | None = None,
                 refresh_every: float | None = None) -> None:
        self.path = Path(path)
        # Through a symlink the real file is what gets replaced and locked, so a symlinked memory
        # file stays a symlink and every spelling of the path shares one lock.
        self._file = Path(os.path.realpath(self.path))
        # Timings not given come from MEMORY_LOCK_TIMINGS (tests), else the protocol's defaults.
        timings = LockTimings.from_environment(os.environ)
        self._lock_timeout = timings.timeout if lock_timeout is None else lock_timeout
        self._lock = MemoryFileLock(self._file, timeout=self._lock_timeout,
                                    stale_after=timings.stale_after if stale_after is None else stale_after,
                                    refresh_every=timings.refresh_every if refresh_every is None else refresh_every)
        self._snapshot: _Snapshot | None = None
        self._loading = threading.Lock()
        self._writes = _WriteQueue()
        self._indexing = threading.Lock()
        self._unindexable: Graph | None = None  # the graph whose index failed, not to be tried again
        self._unrankable: Graph | None = None  # the same for the ranking's index
        self._index_pending: Graph | None = None  # the graph whose word index a thread is about to make
        self._read_ahead: tuple[bytes, Signature] | None = None  # the file's bytes read by look_ahead
        # Frees the spare a save replaced while the answer goes out (see Staged.put_in_place).
        self._releaser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-file-release")
        # Compares the file with the bytes last read or written while a write works out its change.
        self._checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-file-check")
        self._unreported_change = False
        self._cache = _CacheState()
        # Held to remove the cache (every save) and by a build to make and publish its file: a
        # build of a graph from before a save never lands after it (see index_cache.build).
        self._cache_guard = threading.Lock()
        self._cache_generation = 0

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._releaser.shutdown()
        self._checker.shutdown()

    # -- reads ---------------------------------------------------------------------------------

    def read_graph(self) -> dict[str, Any]:
        self._cache.last_activity = time.monotonic()
        if (answer := self._cold_answer(lambda cold: cold.read_graph())) is not None:
            return answer
        return rules.read_graph(self._graph())

    def read_graph_for_pages(self, *, in_memory: bool = False) -> dict[str, Any]:
        """read_graph as the pager takes it: from the cache, the objects as their unparsed JSON
        (msgspec.Raw), the entities a paging.Listing that summarises the graph; else read_graph.
        `in_memory`: see :meth:`search_nodes`."""
        self._cache.last_activity = time.monotonic()
        if in_memory:
            return rules.read_graph_for_pages(self._graph_in_memory())
        if (answer := self._cold_answer(lambda cold: cold.graph_units())) is not None:
            return answer
        return rules.read_graph_for_pages(self._graph())

    def search_nodes(self, query: str, limit: int | None = None, *, in_memory: bool = False) -> dict[str, Any]:
        """The best `limit` (default: all) entities for the query, best first; see :func:`rules.search_nodes`.

        `in_memory`: only from the graph in memory and the indexes it has, work bounded by its size
        (a caller may then answer on its event loop); NotInMemory when the read would need the
        file loaded, the cache, or an index made first."""
        self._cache.last_activity = time.monotonic()
        if in_memory:
            graph = self._graph_in_memory()
            matched = rules.contains_query(graph, query)
            if matched is None:
                if graph.terms is None:
                    raise NotInMemory
                matched = rules.ranked_by_words(graph, query)
            return rules.found(graph, matched, limit)
        if (answer := self._cold_answer(lambda cold: self._cold_search(cold, query, limit))) is not None:
            return answer
        graph = self._searchable_graph()
        matched = rules.contains_query(graph, query)
        if matched is None:
            # Only a search by words needs the ranking's index, made on its first use (or when
            # the memory is quiet); until then the cache, if it matches the file, ranks.
            if graph.terms is None and (answer := self._cold_words(query, limit)) is not None:
                return answer
            graph = self._term_indexed_graph()
            matched = rules.ranked_by_words(graph, query)
        return rules.found(graph, matched, limit)

    def open_nodes(self, names: list[str], *, in_memory: bool = False) -> dict[str, Any]:
        """`in_memory`: see :meth:`search_nodes`."""
        self._cache.last_activity = time.monotonic()
        if in_memory:
            return rules.open_nodes(self._graph_in_memory(whole=False), names)
        if (answer := self._cold_answer(lambda cold: cold.open_nodes(names))) is not None:
            return answer
        return rules.open_nodes(self._graph(), names)

    def _graph_in_memory(self, *, whole: bool = True) -> Graph:
        """The graph, when it is loaded, its word index made, and the file unchanged since (one
        stat); else NotInMemory. `whole`: for a read whose work grows with the graph (search,
        read_graph), which a graph above INLINE_ITEMS sends to a worker all the same."""
        snapshot = self._snapshot
        if snapshot is None or snapshot.graph.words is None:
            raise NotInMemory
        if whole and len(snapshot.graph.entities) + len(snapshot.graph.relations) > INLINE_ITEMS:
            raise NotInMemory
        try:
            if stat_signature(self._file) == snapshot.signature:
                return snapshot.graph
        except OSError:
            pass
        raise NotInMemory

    def _searchable_graph(self) -> Graph:
        """The graph for a search by the whole query: with its word index when it has one. Just
        after a load it has none yet, and one scan of every entity costs far less than making the
        index (a new process's first answer waits for it): the search scans, and the index is made
        off the request path (a poll of the watcher makes it too)."""
        graph = self._graph()
        if graph.words is None and graph is not self._unindexable:
            self._index_soon(graph)
        return graph

    def _index_soon(self, graph: Graph) -> None:
        with self._loading:
            if self._index_pending is graph:
                return
            self._index_pending = graph
        threading.Thread(target=self._index_later, name="memory-word-index", daemon=True).start()

    def _index_later(self) -> None:
        time.sleep(WARM_UP_DELAY)  # until the answer that asked for it is out
        with suppress(GraphError):
            self._indexed_graph()

    def _cold_answer(self, ask: Callable[[index_cache.ColdIndex], dict[str, Any] | None]) -> dict[str, Any] | None:
        """The answer from the on-disk cache until the graph and its indexes are ready, or None:
        then the graph answers. The first call checks the cache against the file's bytes and,
        whatever the outcome, has the graph loaded off the request path."""
        cache = self._cache
        if cache.done:
            return None
        with cache.lock:
            if cache.done:
                return None
            try:
                if not cache.tried:
                    cache.tried = True
                    return self._first_cold_answer(ask)
                if cache.cold is not None and stat_signature(self._file) == cache.signature:
                    answer = ask(cache.cold)
                    cache.answered += answer is not None
                    return answer
            except (OSError, index_cache.Unanswerable):
                pass
            except Exception as error:  # a cache that fails to answer (or its check) is not used again
                _log(f"The index cache {index_cache.cache_path(self._file)} could not answer ({error!r}); "
                     "answering from the memory file.")
            cache.done = True  # the file changed since, or the cache failed: the graph answers
            return None

    def look_ahead(self) -> None:
        """Starts, in another thread, what the first read will need: the cache opened, the file
        read and hashed. Called while the server is still starting (a client waits for its first
        answer): the reading and hashing let go of the interpreter, so they overlap the imports."""
        cache = self._cache
        with cache.lock:
            if cache.tried or cache.ahead is not None:
                return
            ahead = cache.ahead = _LookAhead()
        threading.Thread(target=self._look, args=(ahead,), name="memory-first-look", daemon=True).start()

    def _look(self, ahead: _LookAhead) -> None:
        try:
            self._read_and_digest(ahead.checked)
            if ahead.checked:
                data, _, digest = ahead.checked[0]
                ahead.cold = index_cache.ColdIndex.open(self._file, data, digest)
        except Exception as error:  # only time is lost: the first read does it all again
            _log(f"Could not look at the memory file ahead of the first call ({error!r}).")
            ahead.checked.clear()
        finally:
            ahead.finished.set()

    def _looked_ahead(self) -> tuple[index_cache.ColdIndex | None, list[tuple[bytes, Signature, str]]] | None:
        """What look_ahead found, or None when it was not asked for or found nothing usable. Bytes
        the file no longer has (its stat signature changed since they were read) are let go."""
        ahead, self._cache.ahead = self._cache.ahead, None
        if ahead is None or not ahead.finished.wait(FIRST_LOOK_WAIT):
            return None
        checked = ahead.checked
        with suppress(OSError):
            if checked and stat_signature(self._file) == checked[0][1]:
                return ahead.cold, checked
        return None

    def _first_cold_answer(self, ask: Callable[[index_cache.ColdIndex], dict[str, Any] | None]) -> dict[str, Any] | None:
        cache = self._cache
        looked = self._looked_ahead()
        cold, checked = looked if looked is not None else (None, [])
        if not checked:
            self._read_and_digest(checked)
            if checked:
                cold = index_cache.ColdIndex.open(self._file, checked[0][0], checked[0][2])
        if not checked:
            return None  # unreadable: the graph answers, and its load reports why
        data, signature, _ = checked[0]
        if cold is None or not index_cache.worth_caching(signature):
            # The graph answers: this call loads it, from these bytes (see _graph). The warm-up
            # (the word index, then the end of the cold path) waits until the answer is out.
            self._read_ahead = (data, signature)
            if index_cache.worth_caching(signature):
                self._start_warm_up(None, None, delay=WARM_UP_DELAY)
            return None
        answer = ask(cold)
        cache.cold, cache.signature = cold, signature
        cache.answered += answer is not None
        self._start_warm_up(data, signature, delay=WARM_UP_DELAY)
        return answer

    def _read_and_digest(self, into: list[tuple[bytes, Signature, str]]) -> None:
        with suppress(OSError):  # unreadable: the graph answers, and its load reports why
            data, signature = read_file(self._file)
            into.append((data, signature, index_cache.digest_of(data)))

    def _start_warm_up(self, data: bytes | None, signature: Signature, *, delay: float) -> None:
        threading.Thread(target=self._warm_up, args=(data, signature, delay),
                         name="memory-warm-up", daemon=True).start()

    def _warm_up(self, data: bytes | None, signature: Signature, delay: float) -> None:
        """Loads the graph (from `data` when given, the file's bytes with `signature`) and its word
        index; the ranking's index and the cache's refresh wait until the memory is quiet."""
        try:
            time.sleep(delay)
            with self._loading:
                if self._snapshot is None:
                    if data is None:
                        self._load(first=True)
                    else:
                        self._load_bytes(data, signature, first=True)
            self._indexed_graph()
        except GraphError:
            pass  # reported to whoever reads or writes next
        finally:
            self._cache.done = True
        self._schedule_cache_refresh()

    @staticmethod
    def _cold_search(cold: index_cache.ColdIndex, query: str, limit: int | None) -> dict[str, Any]:
        return cold.found(rules.search(cold.containing, cold.by_words, query), limit)

    def _cold_words(self, query: str, limit: int | None) -> dict[str, Any] | None:
        """A search by words answered by the cache while the graph has no ranking index yet, or None."""
        cache = self._cache
        with cache.lock:
            if cache.cold is None:
                return None
            try:
                if stat_signature(self._file) == cache.signature:
                    answer = self._cold_search(cache.cold, query, limit)
                    cache.answered += answer is not None
                    return answer
            except index_cache.Unanswerable:
                pass
            except Exception as error:  # the graph answers instead
                _log(f"The index cache {index_cache.cache_path(self._file)} could not answer ({error!r}).")
        self._retire_cold()
        return None

    def _retire_cold(self) -> None:
        """The graph answers from now on; the cache's copy of the texts is let go."""
        cache = self._cache
        with cache.lock:  # after any answer the cache is giving
            cache.done = True
            cold, cache.cold = cache.cold, None
        if cold is not None:
            cold.close()

    def _schedule_cache_refresh(self) -> None:
        """Once the memory has had no call for a while: the ranking's index, and the cache
        rebuilt if it does not match the file. Off the request path, and a busy stretch of calls
        costs one rebuild, after it."""
        cache = self._cache
        with cache.lock:
            cache.last_activity = time.monotonic()
            if cache.refresh_pending:
                return
            cache.refresh_pending = True
        threading.Thread(target=self._refresh_cache, args=(REFRESH_DELAY,),
                         name="memory-index-cache", daemon=True).start()

    def _refresh_cache(self, quiet: float = 0.0) -> None:
        cache = self._cache
        while quiet:
            with cache.lock:
                left = cache.last_activity + quiet - time.monotonic()
                if left <= 0:
                    cache.refresh_pending = False
                    break
            time.sleep(left)
        with suppress(GraphError):
            self._term_indexed_graph()
        self._retire_cold()
        snapshot = self._snapshot
        if snapshot is None or not index_cache.worth_caching(snapshot.signature):
            return
        try:
            generation = self._cache_generation
            data, signature = read_file(self._file)
            if signature != snapshot.signature:
                return  # changed meanwhile: the next load refreshes the cache
            digest = index_cache.digest_of(data)
            if index_cache.is_current(self._file, data, digest):
                return  # another process made it already
            graph = snapshot.graph if snapshot.graph.terms is not None else self._term_indexed_graph()
            if (index_cache.build(self._file, graph, data, digest, partial(self._cache_wanted, generation, signature))
                    and stat_signature(self._file) != signature):
                # Another process saved meanwhile (and removed the cache): this one goes too.
                index_cache.remove(self._file)
        except Exception as error:  # the cache only saves time; the file is what counts
            _log(f"The index cache {index_cache.cache_path(self._file)} could not be made ({error!r}).")

    @contextmanager
    def _cache_wanted(self, generation: int, signature: Signature) -> Iterator[bool]:
        with self._cache_guard:
            try:
                current = stat_signature(self._file) == signature
            except OSError:
                current = False
            yield current and generation == self._cache_generation

    def _remove_cache(self) -> None:
        """The cache and any build of it in progress gone, before a save is acknowledged: what the
        save removed is then in no file of ours."""
        with self._cache_guard:
            self._cache_generation += 1
            index_cache.remove(self._file)

    def poll_external_change(self) -> bool:
        """True when another process changed the file since this store last reported (or saw) it.

        Never raises: an unreadable file is reported to whoever reads or writes next. The poller
        also makes the word index of what it loads, so searches do not wait for it."""
        with suppress(GraphError):
            self._indexed_graph()
        with self._loading:
            changed, self._unreported_change = self._unreported_change, False
        return changed

    # -- writes --------------------------------------------------------------------------------

    def create_entities(self, entities: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.create_entities(graph, entities), abandon)

    def create_relations(self, relations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.create_relations(graph, relations), abandon)

    def add_observations(self, observations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.add_observations(graph, observations), abandon)

    def delete_entities(self, entity_names: list[str], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.delete_entities(graph, entity_names), abandon)

    def delete_observations(self, deletions: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.delete_observations(graph, deletions), abandon)

    def delete_relations(self, relations: list[dict[str, Any]], *, abandon: threading.Event | None = None) -> WriteResult:
        return self._write(lambda graph: rules.delete_relations(graph, relations), abandon)

    # -- machinery -----------------------------------------------------------------------------

    def _graph(self) -> Graph:
        """The graph as the file holds it now: one stat, and a load only when the file changed."""
        snapshot = self._snapshot
        if snapshot is not None and snapshot.signature == self._stat():
            return snapshot.graph
        with self._loading:
            snapshot = self._snapshot
            if snapshot is not None and snapshot.signature == self._stat():
                return snapshot.graph
            ahead, self._read_ahead = self._read_ahead, None
            if snapshot is None and ahead is not None and ahead[1] == self._stat():
                return self._load_bytes(*ahead, first=True)
            return self._load(first=snapshot is None)

    def _indexed_graph(self) -> Graph:
        """The graph with its word index, made once per load; writes keep it up to date."""
        graph = self._graph()
        if graph.words is not None:
            return graph
        # One index at a time: a second search waits for this one rather than making another.
        with self._indexing:
            graph = self._graph()
            if graph.words is not None or graph is self._unindexable:
                return graph
            try:
                indexed = rules.with_word_index(graph)
            except Exception as error:  # MemoryError, or a fault of ours: searches scan instead
                _log(f"Searches will scan every entity: the word index could not be made ({error!r}).")
                self._unindexable = graph
                return graph
            with self._loading:
                self._publish_index(graph, indexed)
            return indexed

    def _publish_index(self, graph: Graph, indexed: Graph) -> None:
        snapshot = self._snapshot
        if snapshot is None:
            return
        if snapshot.graph is graph:
            self._snapshot = snapshot._replace(graph=indexed)
            # A graph one index could not be made for keeps that mark with the other index.
            if self._unindexable is graph:
                self._unindexable = indexed
            if self._unrankable is graph:
                self._unrankable = indexed
        elif (snapshot.graph.words is None and indexed.words is not None) or (
                snapshot.graph.terms is None and indexed.terms is not None):
            # A write of this process landed meanwhile: the indexes are brought up to its graph.
            # (After a reload the graph is all new, and the next search or poll indexes it.)
            if (carried := rules.carry_word_index(indexed, snapshot.graph)) is not None:
                self._snapshot = snapshot._replace(graph=carried)

    def _term_indexed_graph(self) -> Graph:
        """The graph with its word index and the ranking's index, made once per load."""
        graph = self._indexed_graph()
        if graph.terms is not None:
            return graph
        with self._indexing:
            graph = self._graph()
            if graph.terms is not None or graph is self._unrankable:
                return graph
            try:
                indexed = rules.with_term_index(graph)
            except Exception as error:  # MemoryError, or a fault of ours: each search by words makes its own
                _log(f"Searches by words will be slow: their index could not be made ({error!r}).")
                self._unrankable = graph
                return graph
            with self._loading:
                self._publish_index(graph, indexed)
            return indexed

    def _stat(self) -> Signature:
        try:
            return stat_signature(self._file)
        except OSError as error:
            raise GraphError(f"Cannot read the memory file {self._file}: {error.strerror}") from error

    def _load(self, *, first: bool) -> Graph:
        try:
            data, signature = read_file(self._file)
        except OSError as error:
            raise GraphError(f"Cannot read the memory file {self._file}: {error.strerror}") from error
        return self._load_bytes(data, signature, first=first)

    def _load_bytes(self, data: bytes, signature: Signature, *, first: bool) -> Graph:
        """Publishes the graph of `data`, the file's bytes with that signature (under _loading)."""
        with _collector_paused():
            graph = rules.graph_from_lines(decode_file(data))
        for message in describe_load(self._file, graph):
            _log(message)
        self._snapshot = _Snapshot(graph, signature, (data,))
        self._unreported_change = self._unreported_change or not first
        if index_cache.worth_caching(signature):
            self._schedule_cache_refresh()
        return graph

    @property
    def saves(self) -> int:
        """How many times this store has saved the memory file; writes saved together count once."""
        return self._writes.saves

    @property
    def queued_writes(self) -> int:
        """Writes of this store waiting for their turn or for the file lock (not yet in a batch)."""
        return len(self._writes.queue)

    def _write(self, operation: Callable[[Graph], Change], abandon: threading.Event | None = None) -> WriteResult:
        """``operation`` on the file's current graph, saved; ``abandon`` set while the write still
        waits for its turn gives it up (WriteAbandoned), later it completes either way.

        Writes of this process that wait at the same time are saved together (see _WriteQueue):
        whichever thread gets the turn does the writes queued by the time it holds the file lock,
        its own among them, and each thread gets its own result or error."""
        queued = _Queued(operation, abandon, time.monotonic() + self._lock_timeout)
        self._writes.join(queued)
        # A leader behind more than MAX_BATCH earlier writes did theirs, not its own: it goes on.
        while self._take_turn(queued):
            try:
                self._lead(queued)
            finally:
                self._writes.end_turn()
        if queued.error is not None:
            raise queued.error
        assert queued.result is not None
        return queued.result

    def _take_turn(self, queued: _Queued) -> bool:
        """True when this thread gets the turn to lead a batch, False once the queued write is
        done. WriteAbandoned or LockTimeout while it waits untaken."""
        writes = self._writes
        with writes.changed:
            while not queued.done:
                if queued.taken:
                    writes.changed.wait()  # a leader does it, and wakes every waiter when done
                    continue
                if queued.abandon is not None and queued.abandon.is_set():
                    writes.queue.remove(queued)
                    raise self._lock.abandoned_error()
                if not writes.leading:
                    writes.leading = True
                    return True
                remaining = queued.deadline - time.monotonic()
                if remaining <= 0:
                    writes.queue.remove(queued)
                    break
                # Woken when the turn is free or this write is done; the poll looks at abandon and deadline.
                writes.changed.wait(min(POLL_INTERVAL, remaining))
            else:
                return False
        raise self._lock.timeout_error()  # reads the holder's record: outside the condition

    def _lead(self, own: _Queued) -> None:
        """Holding the turn: the file lock, then the writes queued by then, done and saved together.

        Until the batch is taken, a failure (the lock not had in time, the write abandoned, the
        directory not creatable) is the leading write's own: the others wait for the next turn.
        After it, every write of the batch has its outcome from _run_batch, or shares its error."""
        batch: list[_Queued] = []
        try:
            self._create_directory()
            with self._lock.held(own.deadline, own.abandon):
                batch = self._writes.take_batch(self._lock.abandoned_error)
                if batch:
                    outcomes = self._run_batch([queued.operation for queued in batch])
                    for queued, outcome in zip(batch, outcomes, strict=True):
                        if isinstance(outcome, WriteResult):
                            queued.result = outcome
                        else:
                            queued.error = outcome
        except BaseException as error:
            for queued in batch or [own]:
                if not queued.done:
                    queued.error = error
            if not batch:
                self._writes.forget(own)
            if not isinstance(error, Exception):
                raise  # KeyboardInterrupt and the like stop this thread too

    def _run_batch(self, operations: Sequence[Callable[[Graph], Change]]) -> list[WriteResult | Exception]:
        snapshot = self._snapshot
        if snapshot is None or snapshot.content is None:
            return self._apply(operations, self._reload(), None)
        # The stat signature is not enough here: a rewrite of the same size can keep it
        # (coarse timestamps and a reused inode, a tool that restores the modification
        # time), and saving over it would undo that rewrite. So the file's bytes are
        # compared with the ones the graph came from, alongside the work on the change;
        # nothing on disk changes before the comparison has said they are the same.
        check = self._checker.submit(holds, self._file, snapshot.content)
        try:
            return self._apply(operations, snapshot.graph, check)
        except _StaleStart:
            return self._apply(operations, self._reload(), None)  # the whole batch, on the file's graph

    def _apply(self, operations: Sequence[Callable[[Graph], Change]], before: Graph,
               check: Future[bool] | None) -> list[WriteResult | Exception]:
        """Each operation on the graph the ones before it made, as if they had taken turns, then
        one save of the last graph. An operation that fails (a rule broken) fails alone and
        changes nothing. A failing save raises, so every write of the batch gets its error: the
        answers of the writes after the first change were worked out on graphs that never reached
        the disk, and even the ones before it are simply tried again, so the rule is the same for all."""
        start = before
        if len(operations) >= INDEX_ONCE_FROM and (before.words is not None or before.terms is not None):
            # Each write would bring the search indexes up to date (copying them); a batch does it once.
            start = replace(before, words=None, terms=None)
        graph = start
        changes: list[Change | Exception] = []
        for operation in operations:
            try:
                change = operation(graph)
            except Exception as error:  # operations are pure: the graph so far stands
                changes.append(error)
                continue
            changes.append(change)
            if change.changed:
                graph = change.graph
        if graph is start:
            # Nothing to save; but answers (and broken rules) worked out on an outdated graph are no answers.
            self._confirm(check)
            notes: list[str] = []
        else:
            if start is not before:
                # None when so much changed that new indexes cost less: the read side makes them when needed.
                graph = rules.carry_word_index(before, graph) or graph
            notes = self._commit(graph, check)
        results: list[WriteResult | Exception] = []
        for outcome in changes:
            if isinstance(outcome, Exception):
                results.append(outcome)
            elif outcome.changed:
                results.append(WriteResult(outcome.value, True, notes))
                notes = []  # what the save did is told once, to the first write that changed the graph
            else:
                results.append(WriteResult(outcome.value, False, []))
        return results

    def _confirm(self, check: Future[bool] | None) -> None:
        """_StaleStart unless the file still holds the bytes the write started from."""
        if check is None:
            return
        try:
            current = check.result()
        except OSError as error:
            raise GraphError(f"Cannot read the memory file {self._file}: {error.strerror}") from error
        if not current:
            raise _StaleStart

    def _reload(self) -> Graph:
        with self._loading:
            return self._load(first=self._snapshot is None)

    def _create_directory(self) -> None:
        try:
            create_private_directories(self._file.parent)
        except OSError as error:
            raise GraphError(f"Cannot create the directory {self._file.parent} for the memory file: "
                             f"{error.strerror}. Nothing was changed.") from error

    def _commit(self, graph: Graph, check: Future[bool] | None = None) -> list[str]:
        """Saves `graph`; the notes say what else the save did (unreadable lines moved)."""
        notes: list[str] = []
        # The bytes kept for the comparison under the lock have served. Read from the file (no save
        # of this process since the load), they are freed now and their memory is reused for the new
        # file's pieces (fresh memory costs a page fault per 4 KiB); saved by this process, they
        # are the last layout's pieces, which the new layout reuses where lines did not change. A
        # save that fails leaves them unknown, so the next write reads the file again.
        with self._loading:
            if (before := self._snapshot) is not None:
                self._snapshot = before._replace(content=None)
        layout = file_layout(rules.file_parts(graph), before.layout if before is not None else ())
        self._save(graph, layout, notes, check)
        if (snapshot := self._snapshot) is not None and index_cache.worth_caching(snapshot.signature):
            self._schedule_cache_refresh()
        return notes

    def _save(self, graph: Graph, layout: Layout, notes: list[str], check: Future[bool] | None) -> None:
        # A holder that was paused past the stale time stops here, before it touches anything.
        self._lock.raise_if_lost()
        try:
            remove_debris(self._file)
            if graph.rejected:
                self._confirm(check)
                side_file = rejected_path_for(self._file)
                # Appended before the memory file loses them: a crash in between duplicates, never loses.
                append_rejected(side_file, graph.rejected)
                notes.append(f"{rules.plural(len(graph.rejected), 'unreadable line was', 'unreadable lines were')} "
                             f"moved from the memory file to {side_file}.")
                graph = replace(graph, rejected=())
            with staged(self._file, layout_pieces(layout)) as temporary:
                self._confirm(check)
                self._lock.raise_if_lost()
                # Readers noticing the new file wait for the new snapshot instead of loading it again.
                with self._loading:
                    replaced = temporary.put_in_place(self._file)
                    self._snapshot = _Snapshot(self._with_indexes_published_meanwhile(graph), temporary.signature,
                                               temporary.content, layout)
                    self._writes.saves += 1
                self._remove_cache()
        except OSError as error:
            raise GraphError(f"Could not save the memory file {self._file}: {error.strerror}. "
                             "Nothing was changed.") from error
        if replaced is not None:
            self._release(replaced)
        fsync_directory(self._file.parent)

    def _with_indexes_published_meanwhile(self, graph: Graph) -> Graph:
        """`graph` with the search indexes the read side published while the batch was worked out
        from the graph before them (under _loading). Dropped, they would be made again from scratch
        at the next search or poll; with writes landing back to back that could repeat forever."""
        current = self._snapshot
        if current is None or ((graph.words is not None or current.graph.words is None)
                               and (graph.terms is not None or current.graph.terms is None)):
            return graph
        return rules.carry_word_index(current.graph, graph) or graph

    def _release(self, fd: int) -> None:
        try:
            self._releaser.submit(os.close, fd)
        except RuntimeError:  # the interpreter is shutting down
            os.close(fd)

    def merge(self, entities: list[rules.IncomingEntity], relations: list[rules.IncomingRelation]) -> WriteResult:
        """Another graph merged in (see graph.merge_graph) in one locked write, so that servers
        sharing the file see one change."""
        return self._write(lambda graph: rules.merge_graph(graph, entities, relations))


# --------------------------------------------------------------------------------------------
# Group commit
# --------------------------------------------------------------------------------------------

MAX_BATCH: Final = 256
"""Writes saved together at most; later ones wait for the next turn."""
INDEX_ONCE_FROM: Final = 3
"""Batches of this many writes bring the search indexes up to date once, after the last write,
rather than after each (measured at 10,000 entities: 1 write 0.97 ms each way round would cost
1.7 ms, 4 writes 4.4 ms against 2.4 ms, 15 writes 17.5 ms against 4.9 ms)."""


class _Queued:
    """One write waiting in this process: for its turn, then (taken into a batch) for its outcome."""

    __slots__ = ("abandon", "deadline", "error", "operation", "result", "taken")

    def __init__(self, operation: Callable[[Graph], Change], abandon: threading.Event | None, deadline: float) -> None:
        self.operation = operation
        self.abandon = abandon
        self.deadline = deadline
        """time.monotonic() after which a write still waiting for its turn or the lock gives up."""
        self.taken = False
        """In a batch: it completes either way."""
        self.result: WriteResult | None = None
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None


class _WriteQueue:
    """Group commit: the writes of one store waiting for their turn.

    Each save writes the whole file and waits for the disk twice (the file, then its directory),
    so writes that take turns one by one spend their time in that queue. Instead the thread whose
    turn it is takes, once it holds the file lock, every write queued by then (at most MAX_BATCH),
    in the order they came; it applies each to the graph the ones before it made and saves once.
    The others wait on `changed`, which is notified when a turn ends (their writes are done or the
    turn is free), and poll at POLL_INTERVAL for their abandon event and deadline while not taken."""

    def __init__(self) -> None:
        self.changed = threading.Condition(threading.Lock())
        self.queue: deque[_Queued] = deque()
        self.leading = False
        """A thread holds the turn (it waits for the file lock, or does a batch)."""
        self.saves = 0
        """Saves made, for diagnostics (GraphStore.saves); written under the store's _loading lock."""

    def take_batch(self, abandoned: Callable[[], BaseException]) -> list[_Queued]:
        """The queued writes still wanted, oldest first; an abandoned one gets `abandoned()` instead."""
        batch: list[_Queued] = []
        with self.changed:
            while self.queue and len(batch) < MAX_BATCH:
                queued = self.queue.popleft()
                if queued.abandon is not None and queued.abandon.is_set():
                    queued.error = abandoned()
                    continue
                queued.taken = True
                batch.append(queued)
        return batch

    def join(self, queued: _Queued) -> None:
        with self.changed:
            self.queue.append(queued)

    def forget(self, queued: _Queued) -> None:
        with self.changed, suppress(ValueError):
            self.queue.remove(queued)

    def end_turn(self) -> None:
        with self.changed:
            self.leading = False
            self.changed.notify_all()
