"""The knowledge graph kept in one JSONL file that several processes may share: the read facade.

Reads use the graph held in memory and re-read the file only when its stat signature changed.
Writes hold ``<memory file>.lock`` (see lock.py) while they make sure they start from the file's
current bytes, change and save, so writes from different processes take turns. Saves replace the
file atomically (see files.py). The pieces, each with its own guarantees:

- commit.py: the write queue and group commit (W1-W5); saving.py: a batch applied and saved (G3, G4);
- candidates.py: a search's candidate sources (F1-F4), for retrieval/search.py;
- coldstart.py: a new process's first answers from the cache or the file's records, and the cache
  kept up (S1-S4, K1-K3);
- index_cache.py: the cache itself (C1-C7); indexing.py: the kinds of index, and a made one published;
- loading.py: bytes to graph (L1-L4); files.py, lock.py: the file and its lock;
- settling.py: the conditions of interface.py's wait_until, waited on as events (E1-E3).

Guarantees of the store (tests/test_store.py, tests/test_store_cache.py):

G1. A read answers from the graph of the file's bytes as they are now (one stat per read; a load
    when the file changed), or from the cache or the records under coldstart S1.
G2. A graph is published by swapping one reference (`_snapshot`): a read sees the graph before a
    write or after it, never part of one.
G3. A save never replaces bytes it has not compared: the file's bytes are compared with the ones
    the graph came from before anything on disk changes; when they differ, the batch is done
    again on the file's graph.
G4. Unreadable lines are appended to the side file before they leave the memory file: a crash in
    between duplicates, never loses.
G5. The store's own :class:`~memory_server.background.Background` runs every piece of its
    background work (the first look, the warm-up, the indexes, the cache, the comparison of G3,
    closing the version a save replaced), each with a Future (background B6), and one delayed
    call of the process's at a time waits for quiet (coldstart S3); ``close()`` (or leaving
    ``with GraphStore(...)``) ends them all, waiting for the work under way, and writes the cache
    when it is stale (coldstart K2). No thread of the store outlives it.
G6. A search's candidates come from :meth:`GraphStore.sources` (candidates.py): the graph, or
    while coldstart S1 lets them, the cache or the records first; retrieval/search.py's rules run on
    whichever answers.
G7. A store given `index_after` (the server gives retrieval/semantic's after_first_search) makes
    the word index of its first start's graph only once `index_after` calls back, within
    INDEX_AFTER seconds: the load of the graph and the first answer by meaning do not share the
    interpreter with it. Meanwhile the first-answer source answers (coldstart COLD), the graph
    gives the meaning (F4), a poll of the watcher reloads a changed file but leaves the index to
    the warm-up, and a search that needs the index makes it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from .. import background
from ..background import Background
from ..model import graph as rules
from ..model import indexes, writes
from ..model.graph import Graph, GraphError
from ..model.items import Entity, ObservationsToAdd, ObservationsToDelete, Relation
from ..model.records import Line
from . import index_cache, indexing
from .candidates import FirstAnswers, GraphCandidates, first_answer
from .coldstart import CLOSE_BUDGET, CacheKeeper, ColdStart, FileBytes, FirstSource, State
from .commit import MAX_BATCH, GroupCommit, Operation, WriteResult
from .files import (
    Signature,
    read_file,
    remove_empty_directories,
    remove_old_spare,
    stat_signature,
)
from .interface import Queued, Until
from .loading import decode, describe_load, graph_of, json_document
from .lock import (
    LOCK_REFRESH_EVERY,
    LOCK_STALE_AFTER,
    LOCK_TIMEOUT,
    LockTimeout,
    LockTimings,
    MemoryFileLock,
    WriteAbandoned,
)
from .saving import Saving, Snapshot
from .settling import Signal

__all__ = [
    "LOCK_REFRESH_EVERY",
    "LOCK_STALE_AFTER",
    "LOCK_TIMEOUT",
    "MAX_BATCH",
    "GraphError",
    "GraphStore",
    "LockTimeout",
    "LockTimings",
    "MemoryFileLock",
    "NotInMemory",
    "State",
    "WriteAbandoned",
    "WriteResult",
]

log = logging.getLogger(__name__)

INLINE_ITEMS: Final = 100_000
"""Entities plus relations above which a search or read_graph goes to a worker even when the graph
is in memory: at that size it takes tens of ms, which on the event loop would hold up every other
request (a worker gives them turns). open_nodes costs the same at any size."""
WORKERS: Final = 3
"""Workers of the store's Background: the first look or warm-up, an index or the cache's build, and
the comparison of a save (G3), so that none waits behind another."""
INDEX_AFTER: Final = 3.0
"""Seconds at most a first start's word index waits for `index_after` (G7): longer than a loaded
machine takes to load the model and answer by meaning, short enough that the cache is let go soon."""


class NotInMemory(Exception):
    """A read asked to use only the graph in memory needs more: the file (re)loaded, the cache
    opened, or an index made. Ask again without `in_memory`, on a thread that may wait for it."""


class GraphStore(Saving):
    """The graph of one memory file, safe to call from many threads and many processes.
    Close it (or use it as a context manager) to end its background work (G5)."""

    def __init__(self, path: Path, *, lock_timeout: float | None = None, stale_after: float | None = None,
                 refresh_every: float | None = None, cache: bool = True,
                 clock: Callable[[], str] | None = None,
                 index_after: Callable[[Callable[[], object], float], None] | None = None) -> None:
        """`cache`: False to answer every read from the graph (the cache is still kept up). `clock`:
        the UTC stamp of now (see model.dates) that writes record; None records no dates.
        `index_after`: what a first start's word index waits for (G7)."""
        self.path = Path(path)
        self._clock = clock
        # Through a symlink the real file is what gets replaced and locked, so a symlinked memory
        # file stays a symlink and every spelling of the path shares one lock.
        self._file = Path(os.path.realpath(self.path))
        # Timings not given come from MEMORY_LOCK_TIMINGS (tests), else the protocol's defaults.
        timings = LockTimings.from_environment(os.environ)
        self._lock_timeout = timings.timeout if lock_timeout is None else lock_timeout
        self._lock = MemoryFileLock(self._file, timeout=self._lock_timeout,
                                    stale_after=timings.stale_after if stale_after is None else stale_after,
                                    refresh_every=timings.refresh_every if refresh_every is None else refresh_every)
        self._snapshot: Snapshot | None = None
        self._loading = threading.Lock()
        self._indexing = threading.Lock()
        self._unindexable: dict[str, Graph] = {}
        """The graph whose index of a kind failed, not to be tried again."""
        self._index_pending: Graph | None = None
        self._index_after = index_after
        self._index_waits = False
        """The warm-up has loaded the graph and waits for `index_after` before its word index (G7)."""
        self._index_wanted = threading.Event()
        self._unreported_change = False
        self._saves = 0
        self._closing = threading.Event()
        self._settled = Signal()  # (for wait_until: every part below tells it of its changes)
        self._background = Background(f"memory-store[{self._file.name}]", workers=WORKERS)
        self._refused: tuple[Signature, str] | None = None
        """The signature of a file refused as one JSON document, and why (see _load_bytes)."""
        self._made_directories: list[Path] = []
        """The folders made for the memory file by the write under way (see write)."""
        self._commits = GroupCommit(self._lock, self._lock_timeout, self._run_batch, self._create_directory,
                                    self._settled.changed)
        self._coldstart = ColdStart(self._file, self._background, self._warm_up, self._settled.changed)
        if not cache:
            self._coldstart.ranked()
        self._keeper = CacheKeeper(self._file, self._background, self._closing, self._current,
                                   lambda: self._ensure_index("terms"), self._settled.changed)
        # A spare an earlier version kept beside the memory holds what later writes deleted.
        remove_old_spare(self._file, lambda: self._lock.held(deadline=time.monotonic()))

    # -- life ----------------------------------------------------------------------------------

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Ends the store's background work and writes the cache when it is stale (G5, coldstart
        K2). Reads and writes after it still work, in the calling thread only."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._coldstart.close()
        self._keeper.close()
        self._keeper.refresh(budget=CLOSE_BUDGET)
        # No limit: what runs there is bounded work of this store's (a load, an index, a build)
        # that its caller would otherwise find half done.
        self._background.close(timeout=None)

    def _submit(self, work: Any, *args: Any) -> Future[Any] | None:
        """None once closed: the work is done when (and if) a read needs it."""
        return self._background.run(work, *args)

    def _soon(self, work: Any, *args: Any) -> Future[Any]:
        """`work(*args)` in a worker; after close, done here and now."""
        if (future := self._submit(work, *args)) is not None:
            return future
        future = Future()
        try:
            future.set_result(work(*args))
        except Exception as error:
            future.set_exception(error)
        return future

    def wait_until(self, condition: Until | Queued, timeout: float) -> bool:
        """See interface.py: the conditions of a memory file's store."""
        return self._settled.wait_until(self._holds(condition), timeout)

    def _holds(self, condition: Until | Queued) -> Callable[[], bool]:
        if isinstance(condition, Queued):
            return lambda: self._commits.queued == condition.writes
        if condition is Until.WARM:
            return lambda: self._coldstart.state in (State.WARM, State.HOT)
        if condition is Until.HOT:
            return lambda: self._coldstart.state is State.HOT
        if condition in (Until.INDEXED, Until.RANKED):
            return lambda: self._indexed(ranked=condition is Until.RANKED)
        if condition is Until.CACHED:
            return self._keeper.matches
        raise ValueError(f"a memory file's store never waits for {condition}")

    def _indexed(self, *, ranked: bool) -> bool:
        graph = self._loaded_whole()
        return graph is not None and graph.words is not None and (not ranked or graph.terms is not None)

    @property
    def cold_state(self) -> State:
        """Where the first start is (see coldstart.py), for diagnostics."""
        return self._coldstart.state

    @property
    def cache_answers(self) -> int:
        """How many answers the cache gave, for diagnostics."""
        return self._coldstart.answered

    @property
    def record_answers(self) -> int:
        """How many answers the file's records gave before the graph was made (coldstart S4), for diagnostics."""
        return self._coldstart.answered_by_records

    @property
    def graph_in_memory(self) -> Graph | None:
        """The graph this store holds now (maybe behind the file), for diagnostics."""
        snapshot = self._snapshot
        return None if snapshot is None else snapshot.graph

    def look_ahead(self) -> Future[Any] | None:
        """Starts what the first read will need, in a worker (see ColdStart.look_ahead); its
        future, None when it was started before or the first read came first."""
        return self._coldstart.look_ahead()

    # -- reads ---------------------------------------------------------------------------------

    def read_graph(self) -> dict[str, Any]:
        self._keeper.touched()
        if (cold := self._coldstart.cache()) is not None \
                and (found := self._first(cold, lambda: cold.read_graph())) is not None:
            return found
        return rules.read_graph(self._graph())

    def read_graph_for_pages(self, *, in_memory: bool = False) -> dict[str, Any]:
        """read_graph as the pager takes it: from the cache, the objects as their JSON
        (msgspec.Raw), the entities a census.Listing that summarises the graph; else read_graph.
        `in_memory`: see :meth:`sources`."""
        self._keeper.touched()
        if in_memory:
            return rules.read_graph_for_pages(self._graph_in_memory())
        if (cold := self._coldstart.cache()) is not None \
                and (found := self._first(cold, lambda: cold.graph_units())) is not None:
            return found
        return rules.read_graph_for_pages(self._graph())

    def open_nodes(self, names: list[str], *, in_memory: bool = False) -> dict[str, Any]:
        """`in_memory`: see :meth:`sources`."""
        self._keeper.touched()
        if in_memory:
            return rules.open_nodes(self._graph_in_memory(whole=False), names)
        if (cold := self._coldstart.cache()) is not None \
                and (found := self._first(cold, lambda: cold.open_nodes(names))) is not None:
            return found
        return rules.open_nodes(self._graph(), names)

    @contextmanager
    def sources(self, *, in_memory: bool = False) -> Iterator[Sequence[GraphCandidates | FirstAnswers]]:
        """Where a search's candidates come from, in turn (retrieval/search.py's CandidateSource;
        G6): the last one answers every step.

        `in_memory`: only the graph in memory and the indexes it has, work bounded by its size (a
        caller may then answer on its event loop); no source when the read would need the file
        loaded, the cache, or an index made first."""
        self._keeper.touched()
        try:
            yield self._search_sources(in_memory)
        finally:
            # The word index a scan asked for: made by a worker, after this answer is worked out.
            if self._index_wanted.is_set():
                self._index_wanted.clear()
                self._submit(self._index_quietly, "words")

    def _search_sources(self, in_memory: bool) -> list[GraphCandidates | FirstAnswers]:
        if in_memory:
            try:
                graph = self._graph_in_memory()
            except NotInMemory:
                return []
            return [GraphCandidates(lambda: graph, None, windows=False)]
        last = GraphCandidates(self._searchable_graph, lambda: self._ensure_index("terms"), windows=True)
        if (cold := self._coldstart.cache()) is not None:  # COLD: the cache or the file's records answer
            return [self._first_answers(cold), last]
        if (cold := self._coldstart.cache(words=True)) is not None:
            # WARM: the graph and its word index answer a search by the whole query (far faster than
            # the cache at any size); the cache ranks a search by words while the graph has no
            # ranking index (the graph declines it). A warm-up that failed leaves no graph: the cache
            # answers, and the graph after it.
            loaded = self._loaded_graph()
            warm = [] if loaded is None else [GraphCandidates(lambda: loaded, None, windows=True)]
            return [*warm, self._first_answers(cold), last]
        return [last]

    def _first_answers(self, cold: FirstSource) -> FirstAnswers:
        return FirstAnswers(cold, self._coldstart, self._loaded_whole, self.open_nodes)

    def _first(self, cold: FirstSource, answer: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
        """`answer()` from a first-answer source (the cache, the records); None when it declines
        or fails a check: the graph then answers."""
        found = first_answer(self._coldstart, cold, answer)
        self._coldstart.start_warm_up()
        if found is not None:
            self._coldstart.count(cold)
        return found

    def _loaded_graph(self) -> Graph | None:
        """The graph of the file's current version when it is loaded, else None: while the cache
        answers by words (the graph has no ranking index yet), it still gives the semantic candidates."""
        try:
            return self._graph_in_memory(whole=False)
        except NotInMemory:
            return None

    def _loaded_whole(self) -> Graph | None:
        """The graph of the file's current version once it is loaded, its word index made or not
        (candidates F4): what the answers of a first-answer source take their meaning from."""
        snapshot = self._snapshot
        try:
            if snapshot is not None and stat_signature(self._file) == snapshot.signature:
                return snapshot.graph
        except OSError:
            pass
        return None

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
        by a worker (a poll of the watcher makes it too)."""
        graph = self._graph()
        if graph.words is None and graph is not self._unindexable.get("words"):
            with self._loading:
                if self._index_pending is not graph:
                    self._index_pending = graph
                    self._index_wanted.set()  # started once this search has its answer
        return graph

    def _index_quietly(self, kind: str) -> None:
        with suppress(GraphError):
            self._ensure_index(kind)
        background.give_back_memory()  # (B7, as the warm-up's)

    def _warm_up(self) -> None:
        """Makes the graph of the bytes (or records) a first-answer source answers from, and its
        word index (after `index_after`, G7), while that source answers (coldstart COLD -> WARM or HOT)."""
        try:
            with self._loading:
                read = self._coldstart.take_read()
                if self._snapshot is None and read is not None and stat_signature(self._file) == read.signature:
                    self._load_read(read, first=True, pieces=True)
        except (GraphError, OSError):
            self._coldstart.warmed()  # reported to whoever reads or writes next
            return
        if self._index_after is None:
            self._index_warm()
            return
        self._index_waits = True

        def go_on() -> Future[Any] | None:
            """Hands the index to a worker: its future (None: closed meanwhile)."""
            if (made := self._submit(self._index_warm)) is None:
                self._index_waits = False
                self._coldstart.warmed()
            return made
        self._index_after(go_on, INDEX_AFTER)

    def _index_warm(self) -> None:
        """The warm-up's word index, then coldstart COLD -> WARM (or HOT); then the ranking's
        index, when the cache holds it (WARM -> HOT)."""
        try:
            self._ensure_index("words")
        except (GraphError, OSError):
            pass
        finally:
            self._index_waits = False
            self._coldstart.warmed()
            # The load and the index's making leave much of the heap free (background B7); once the
            # graph answers, so that no read waits for it.
            background.give_back_memory()
        # While the cache is of the graph's bytes its postings make the ranking's index, a pass
        # over arrays (index_cache C7); once a write has removed the cache, only the graph's every
        # text would (seconds at 100,000 entities, and a heap left larger).
        with suppress(GraphError, OSError):
            self._ensure_index("terms", cached_only=True)

    def poll_external_change(self) -> bool:
        """True when another process changed the file since this store last reported (or saw) it.

        Never raises: an unreadable file is reported to whoever reads or writes next. The poller
        also makes the word index of what it loads, so searches do not wait for it (but not while
        a first start's index waits, G7)."""
        with suppress(GraphError):
            if self._index_waits:
                self._graph()
            else:
                self._ensure_index("words")
        with self._loading:
            changed, self._unreported_change = self._unreported_change, False
        return changed

    # -- writes --------------------------------------------------------------------------------

    def write(self, operation: Operation, *, abandon: threading.Event | None = None) -> WriteResult:
        """`operation` (a pure function of the graph, see model/writes.py) on the file's current
        graph, saved; `abandon` set while it still waits for its turn gives it up (commit W4).

        Where the memory file's folder is missing, nothing is created for a write that cannot
        succeed: such a folder holds no memory, so the write is first worked out on the empty
        graph, and one that fails, or changes nothing, is answered from that without a folder
        made. The folders made for a write that then fails are removed again, when still empty."""
        if self._file.parent.is_dir():
            return self._commits.write(operation, abandon)
        change = operation(rules.EMPTY)  # a broken rule raises here, as it would under the lock
        if not change.changed:
            return WriteResult(change.value, False, [])
        try:
            return self._commits.write(operation, abandon)
        except BaseException:
            if not self._commits.queued:  # a write still waiting may need the folders this one made
                remove_empty_directories(self._made_directories)
            raise
        finally:
            self._made_directories = []

    def create_entities(self, entities: Sequence[Entity], *, author: str | None = None,
                        abandon: threading.Event | None = None) -> WriteResult:
        return self.write(lambda graph: writes.create_entities(graph, entities, self._now(), author), abandon=abandon)

    def create_relations(self, relations: Sequence[Relation], *, abandon: threading.Event | None = None) -> WriteResult:
        return self.write(lambda graph: writes.create_relations(graph, relations), abandon=abandon)

    def add_observations(self, observations: Sequence[ObservationsToAdd], *, author: str | None = None,
                         abandon: threading.Event | None = None) -> WriteResult:
        return self.write(lambda graph: writes.add_observations(graph, observations, self._now(), author), abandon=abandon)

    def delete_entities(self, entity_names: Sequence[str], *, abandon: threading.Event | None = None) -> WriteResult:
        return self.write(lambda graph: writes.delete_entities(graph, entity_names), abandon=abandon)

    def delete_observations(self, deletions: Sequence[ObservationsToDelete], *,
                            abandon: threading.Event | None = None) -> WriteResult:
        return self.write(lambda graph: writes.delete_observations(graph, deletions, self._now()), abandon=abandon)

    def delete_relations(self, relations: Sequence[Relation], *, abandon: threading.Event | None = None) -> WriteResult:
        return self.write(lambda graph: writes.delete_relations(graph, relations), abandon=abandon)

    def merge(self, entities: list[writes.IncomingEntity], relations: list[writes.IncomingRelation]) -> WriteResult:
        """Another graph merged in (see writes.merge_graph) in one locked write, so that servers
        sharing the file see one change."""
        return self.write(lambda graph: writes.merge_graph(graph, entities, relations, self._now()))

    @property
    def saves(self) -> int:
        """How many times this store has saved the memory file; writes saved together count once."""
        return self._saves

    @property
    def queued_writes(self) -> int:
        """Writes of this store waiting for their turn or for the file lock (not yet in a batch)."""
        return self._commits.queued

    # -- the graph and its indexes -------------------------------------------------------------

    def _current(self) -> tuple[Graph, Signature] | None:
        snapshot = self._snapshot
        return None if snapshot is None else (snapshot.graph, snapshot.signature)

    def _now(self) -> str | None:
        return None if self._clock is None else self._clock()

    def _graph(self) -> Graph:
        """The graph as the file holds it now: one stat, and a load only when the file changed."""
        snapshot = self._snapshot
        if snapshot is not None and snapshot.signature == self._stat():
            return snapshot.graph
        with self._loading:
            snapshot = self._snapshot
            if snapshot is not None and snapshot.signature == self._stat():
                return snapshot.graph
            read = self._coldstart.take_read()
            if snapshot is None and read is not None and read.signature == self._stat():
                return self._load_read(read, first=True)
            return self._load(first=snapshot is None)

    def _ensure_index(self, kind: str, *, cached_only: bool = False) -> Graph:
        """The graph with its word index ("words") or also the ranking's ("terms"), made once per
        load; writes keep them up to date. One index at a time: a second search waits for this
        one rather than making another. The ranking's is taken from the first start's cache when
        that is of the graph's bytes (index_cache C7); `cached_only`: only then."""
        graph = self._graph() if kind == "words" else self._ensure_index("words")
        if getattr(graph, kind) is not None:
            return graph
        with self._indexing:
            graph = self._graph()
            if getattr(graph, kind) is not None or graph is self._unindexable.get(kind):
                return graph
            maker, loss = indexing.KINDS[kind]
            try:
                indexed = self._ranked_from_cache(graph) if kind == "terms" else None
                if indexed is None:
                    if cached_only:
                        return graph
                    indexed = getattr(indexes, maker)(graph)
            except Exception as error:  # MemoryError, or a fault of ours: searches scan (or rank slowly) instead
                log.warning("%s (%r).", loss, error)
                self._unindexable[kind] = graph
                return graph
            with self._loading:
                self._publish_index(graph, indexed)
        if kind == "terms":
            self._coldstart.ranked()
            # The index's making and the cache let go leave much of the heap free (background B7).
            background.give_back_memory()
        return indexed

    def _ranked_from_cache(self, graph: Graph) -> Graph | None:
        """`graph` with the ranking index of the first start's cache, when the cache was checked
        against the very bytes the graph was made of (index_cache C7): a pass over its postings
        rather than over every text. None otherwise, or when the cache fails a check (let go, S1)."""
        cold = self._coldstart.cache(words=True)
        snapshot = self._snapshot
        if not isinstance(cold, index_cache.ColdIndex) or snapshot is None or snapshot.graph is not graph \
                or snapshot.content is None or len(snapshot.content) != 1 or snapshot.content[0] is not cold.data:
            return None
        return first_answer(self._coldstart, cold, lambda: replace(graph, terms=cold.term_index(graph)))

    def _publish_index(self, graph: Graph, indexed: Graph) -> None:
        snapshot = self._snapshot
        if snapshot is None:
            return
        self._snapshot = indexing.published(snapshot, self._unindexable, graph, indexed)
        self._settled.changed()

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

    def _load_read(self, read: FileBytes, *, first: bool, pieces: bool = False) -> Graph:
        """_load_bytes of what the first start read, from its records when they were decoded (coldstart S2)."""
        return self._load_bytes(read.data, read.signature, first=first, pieces=pieces, lines=read.lines,
                                views=read.views)

    def _load_bytes(self, data: bytes, signature: Signature, *, first: bool, pieces: bool = False,
                    lines: list[Line] | None = None, views: rules.Views | None = None) -> Graph:
        """Publishes the graph of `data`, the file's bytes with that signature (under _loading).
        `pieces`: in the background, letting answers go first (loading.py L2). `lines`: the
        records already decoded from `data`, and `views` their answer objects (coldstart S2)."""
        refused = self._refused
        if refused is not None and refused[0] == signature:
            raise GraphError(refused[1])  # the same bytes: not decoded again at every poll
        if lines is None:
            lines = decode(data, pieces=pieces)
        if (document := json_document(self._file, data, lines)) is not None:
            # No graph of it, so no write over it (loading L5); said once on stderr, at every call to the client.
            self._refused = (signature, document)
            log.warning("%s", document)
            raise GraphError(document)
        graph = graph_of(lines, views)
        for message in describe_load(self._file, graph):
            log.warning("%s", message)
        self._snapshot = Snapshot(graph, signature, (data,))
        self._unreported_change = self._unreported_change or not first
        self._coldstart.graph_made()
        self._keeper.changed()
        self._settled.changed()
        return graph
