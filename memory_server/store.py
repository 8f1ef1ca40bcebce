"""The knowledge graph kept in one JSONL file that several processes may share.

Reads use the graph held in memory and re-read the file only when its stat signature changed.
Writes hold ``<memory file>.lock`` while they re-read (if needed), change and save, so writes
from different processes take turns. Saves replace the file atomically.
"""

from __future__ import annotations

import gc
import os
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeAlias

from filelock import LeaseSettingsMismatch, SoftFileLease, Timeout

# filelock 4.x internals the lease subclasses below build on (pin the major version).
from filelock._filesystem import pin_inode
from filelock._soft import read_lock_file

from . import graph as rules
from . import index_cache
from .graph import Change, Graph, GraphError
from .records import Rejected, decode_file, file_pieces

__all__ = [
    "LOCK_REFRESH_EVERY",
    "LOCK_STALE_AFTER",
    "LOCK_TIMEOUT",
    "GraphError",
    "GraphStore",
    "LockTimeout",
    "MemoryFileLock",
    "WriteResult",
]

LOCK_TIMEOUT: Final = 60.0
"""Seconds a write waits for the lock before giving up."""
LOCK_STALE_AFTER: Final = 30.0
"""Seconds without a refresh after which a lock counts as abandoned. Every sharer must agree."""
LOCK_REFRESH_EVERY: Final = 15.0
"""Seconds between refreshes of a held lock."""

_POLL_INTERVAL: Final = 0.05
_PRIVATE: Final = 0o600
_PRIVATE_DIRECTORY: Final = 0o700

Signature: TypeAlias = tuple[int, int, int, int] | None
"""(st_mtime_ns, st_size, st_ino, st_dev) of the memory file; None while it does not exist."""


class LockTimeout(GraphError):
    """The memory file stayed locked by another process for the whole wait; nothing was changed."""


@dataclass(frozen=True)
class WriteResult:
    value: dict[str, Any]
    """The tool's structuredContent; shares objects with the graph, so read-only."""
    changed: bool
    """False when the call changed nothing."""
    notes: list[str]
    """Extra remarks for the model, e.g. about lines moved out of the memory file."""


# --------------------------------------------------------------------------------------------
# The cross-process lock
# --------------------------------------------------------------------------------------------


def lock_path_for(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.name + ".lock")


class _Lease(SoftFileLease):
    """filelock's lease, where an empty marker also expires.

    filelock never breaks an empty marker: releases before 3.22 kept theirs empty while
    holding. Every process sharing a memory file writes its record right after creating the
    marker, so an empty one was left by a process killed in between; its process being unknown,
    it expires like an unrefreshed lease. A holder configured with another stale time cannot be
    expired by age (the two would disagree on when it is stale), but one whose process is gone
    is still removed: filelock checks that first.
    """

    def _try_break_stale_lock(self) -> None:
        with suppress(LeaseSettingsMismatch):
            super()._try_break_stale_lock()
        if not self.is_locked:
            self._expire_empty_marker()

    def _expire_empty_marker(self) -> None:
        with suppress(OSError, ValueError), pin_inode(self._lock_path) as pinned:
            content, marker = read_lock_file(self._lock_path)
            # The pin keeps the inode from being reused by a new marker while we decide.
            if pinned in (None, marker.st_ino) and content == "" and (
                    self._marker_unchanged_for(marker) >= self.lease_duration):
                self._take_over(marker, None)


class _GuardedLease(_Lease):
    """The lease on the memory file, whose stale-lock takeovers happen one at a time under ``guard``.

    filelock already makes concurrent takeovers safe (it swaps names atomically and checks
    what it displaced), so the guard only keeps waiters from all breaking at once. A waiter
    that finds the guard taken skips this round and looks again at its next poll. The guard is
    itself a lease, so a breaker that dies or freezes mid-break cannot block breaking for good.
    """

    def __init__(self, lock_file: str, *, guard: str, **options: Any) -> None:
        super().__init__(lock_file, **options)
        # One instance for all attempts: expiring an abandoned guard takes watching it over time.
        self._guard = _Lease(guard, lease_duration=self.lease_duration,
                             heartbeat_interval=self._heartbeat_interval, mode=_PRIVATE)

    def _take_over(self, marker: os.stat_result, breaker_pid: int | None) -> None:
        try:
            self._guard.acquire(blocking=False)
        except Timeout:
            return
        try:
            super()._take_over(marker, breaker_pid)
        finally:
            self._guard.release()


class MemoryFileLock:
    """``<memory file>.lock``: held by one writer at a time, across processes."""

    def __init__(self, memory_file: Path, *, timeout: float = LOCK_TIMEOUT, stale_after: float = LOCK_STALE_AFTER,
                 refresh_every: float = LOCK_REFRESH_EVERY) -> None:
        self.memory_file = memory_file
        self.timeout = timeout
        self.path = lock_path_for(memory_file)
        self.break_path = self.path.with_name(self.path.name + ".break")
        self.stale_after = stale_after
        self._lease = _GuardedLease(str(self.path), guard=str(self.break_path), lease_duration=stale_after,
                                    heartbeat_interval=refresh_every, mode=_PRIVATE, poll_interval=_POLL_INTERVAL)
        self._marker: tuple[int, int] | None = None

    @contextmanager
    def held(self, deadline: float | None = None) -> Iterator[None]:
        """Holds the lock for the body. LockTimeout when it cannot be had by ``deadline``
        (time.monotonic), by default ``timeout`` seconds from now."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        try:
            self._lease.acquire(timeout=max(0.0, deadline - time.monotonic()))
        except Timeout:
            raise self.timeout_error() from None
        except OSError as error:
            raise GraphError(f"Cannot create the lock file {self.path} ({error.strerror}); the directory "
                             "holding the memory file must be writable. Nothing was changed.") from error
        try:
            self._marker = _identity(os.lstat(self.path))
            yield
        finally:
            self._marker = None
            # The write is done (or failed cleanly); a failing unlink of the marker must not hide that.
            with suppress(OSError):
                self._lease.release()

    def raise_if_lost(self) -> None:
        """GraphError when another process broke this lock (this one stalled past the stale time)."""
        try:
            current = _identity(os.lstat(self.path))
        except FileNotFoundError:
            current = None
        if self._lease.compromise is not None or current != self._marker:
            raise GraphError(
                f"Another process took over the lock on {self.memory_file} while this write was stalled "
                f"for more than {self.stale_after:g} seconds. Nothing was changed; try again.")

    def timeout_error(self) -> LockTimeout:
        holder = ""
        with suppress(OSError, ValueError):
            if (owner := self._lease.owner) is not None:
                holder = f", held by process {owner.pid} on {owner.hostname}"
        return LockTimeout(f"The memory file {self.memory_file} is locked by another process (lock file "
                           f"{self.path}{holder}); gave up after {self.timeout:g} seconds. Nothing was changed; "
                           "try again later.")


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


# --------------------------------------------------------------------------------------------
# File I/O
# --------------------------------------------------------------------------------------------


def signature_of(st: os.stat_result) -> Signature:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)


def stat_signature(file: Path) -> Signature:
    try:
        return signature_of(os.stat(file))
    except FileNotFoundError:
        return None


def read_file(file: Path) -> tuple[bytes, Signature]:
    """The file's bytes and the signature of exactly what was read; (b"", None) when missing."""
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return b"", None
    try:
        signature = signature_of(os.fstat(fd))
        chunks = []
        while chunk := os.read(fd, 1 << 24):
            chunks.append(chunk)
        return b"".join(chunks), signature
    finally:
        os.close(fd)


def _open_private(path: Path, flags: int) -> int:
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0), _PRIVATE)
    try:
        # The umask cannot widen a mode, but an existing file may have been widened by hand.
        # (Windows before Python 3.13 has no fchmod, and no POSIX modes to narrow.)
        if hasattr(os, "fchmod"):
            os.fchmod(fd, _PRIVATE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def temporary_name(file: Path) -> Path:
    return file.with_name(f"{file.name}.{secrets.token_hex(16)}.tmp")


def stray_temporaries(file: Path) -> list[Path]:
    """Temporary files a killed writer left next to the memory file."""
    pattern = re.compile(re.escape(file.name) + r"\.[0-9a-f]{32}\.tmp")
    with os.scandir(file.parent) as entries:
        return [file.parent / entry.name for entry in entries if pattern.fullmatch(entry.name)]


class Staged(NamedTuple):
    path: Path
    signature: Signature


@contextmanager
def staged(file: Path, pieces: Iterable[bytes]) -> Iterator[Staged]:
    """The ``pieces`` durably in a temporary file next to ``file``, ready to be renamed over it.
    The temporary file is gone afterwards whatever happens (renamed, or removed)."""
    path = temporary_name(file)
    fd = _open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            for piece in pieces:
                _write_all(fd, piece)
            os.fsync(fd)
            signature = signature_of(os.fstat(fd))
        finally:
            os.close(fd)
        yield Staged(path, signature)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(path)


def _hold_open(file: Path) -> int | None:
    """A descriptor of the file about to be replaced, or None.

    The rename that replaces a file also frees its blocks, about 1 ms per 6 MB, unless the old
    file is still open: then closing the descriptor frees them, and that can wait until the
    answer has gone. (Windows cannot rename over an open file.)
    """
    if os.name != "posix":
        return None
    try:
        return os.open(file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


def fsync_directory(directory: Path) -> None:
    """Makes a rename in ``directory`` durable; best effort where a filesystem cannot."""
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def rejected_path_for(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.name + ".rejected")


def append_rejected(side_file: Path, lines: Sequence[Rejected]) -> None:
    fd = _open_private(side_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        _write_all(fd, b"".join(line.line + b"\n" for line in lines))
        os.fsync(fd)
    finally:
        os.close(fd)


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


class GraphStore:
    """The graph of one memory file, safe to call from many threads and many processes."""

    def __init__(self, path: Path, *, lock_timeout: float = LOCK_TIMEOUT,
                 stale_after: float = LOCK_STALE_AFTER, refresh_every: float = LOCK_REFRESH_EVERY) -> None:
        self.path = Path(path)
        # Through a symlink the real file is what gets replaced and locked, so a symlinked memory
        # file stays a symlink and every spelling of the path shares one lock.
        self._file = Path(os.path.realpath(self.path))
        self._lock_timeout = lock_timeout
        self._lock = MemoryFileLock(self._file, timeout=lock_timeout, stale_after=stale_after,
                                    refresh_every=refresh_every)
        self._snapshot: _Snapshot | None = None
        self._loading = threading.Lock()
        self._writing = threading.Lock()
        self._indexing = threading.Lock()
        self._unindexable: Graph | None = None  # the graph whose index failed, not to be tried again
        self._unrankable: Graph | None = None  # the same for the ranking's index
        # Frees the replaced memory file while the answer goes out (see _hold_open).
        self._releaser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-file-release")
        self._unreported_change = False
        self._cache = index_cache.CacheState()

    # -- reads ---------------------------------------------------------------------------------

    def read_graph(self) -> dict[str, Any]:
        self._cache.last_activity = time.monotonic()
        if (answer := self._cold_answer(lambda cold: cold.read_graph())) is not None:
            return answer
        return rules.read_graph(self._graph())

    def search_nodes(self, query: str, limit: int | None = None) -> dict[str, Any]:
        """The best `limit` (default: all) entities for the query, best first; see :func:`rules.search_nodes`."""
        self._cache.last_activity = time.monotonic()
        if (answer := self._cold_answer(lambda cold: cold.search_nodes(query, limit))) is not None:
            return answer
        graph = self._indexed_graph()
        matched = rules.contains_query(graph, query)
        if matched is None:
            # Only a search by words needs the ranking's index, made on its first use (or when
            # the memory is quiet); until then the cache, if it matches the file, ranks.
            if graph.terms is None and (answer := self._cold_words(query, limit)) is not None:
                return answer
            graph = self._term_indexed_graph()
            matched = rules.ranked_by_words(graph, query)
        return rules.found(graph, matched, limit)

    def open_nodes(self, names: list[str]) -> dict[str, Any]:
        self._cache.last_activity = time.monotonic()
        if (answer := self._cold_answer(lambda cold: cold.open_nodes(names))) is not None:
            return answer
        return rules.open_nodes(self._graph(), names)

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
            except OSError:
                pass
            except Exception as error:  # a cache that fails to answer is not used again
                _log(f"The index cache {index_cache.cache_path(self._file)} could not answer ({error!r}); "
                     "answering from the memory file.")
            cache.done = True  # the file changed since, or the cache failed: the graph answers
            return None

    def _first_cold_answer(self, ask: Callable[[index_cache.ColdIndex], dict[str, Any] | None]) -> dict[str, Any] | None:
        cache = self._cache
        cold = index_cache.ColdIndex.open(self._file, None)
        if cold is None:
            if index_cache.worth_caching(stat_signature(self._file)):
                self._start_warm_up(None, None, delay=0.0)
            return None
        # The file is read and hashed in another thread (both let go of the interpreter) while
        # the cache answers; the answer is given only if the cache was made of these bytes.
        checked: list[tuple[bytes, Signature, str]] = []
        checker = threading.Thread(target=self._read_and_digest, args=(checked,), daemon=True,
                                   name="memory-file-check")
        checker.start()
        try:
            answer = ask(cold)
        finally:
            checker.join()
        if not checked:
            return None
        data, signature, digest = checked[0]
        if digest != cold.digest or not index_cache.worth_caching(signature):
            self._start_warm_up(data, signature, delay=0.0)
            return None
        cache.cold, cache.signature = cold, signature
        cache.answered += answer is not None
        self._start_warm_up(data, signature, delay=index_cache.WARM_UP_DELAY)
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

    def _cold_words(self, query: str, limit: int | None) -> dict[str, Any] | None:
        """A search by words answered by the cache while the graph has no ranking index yet, or None."""
        cache = self._cache
        with cache.lock:
            if cache.cold is None:
                return None
            try:
                if stat_signature(self._file) == cache.signature:
                    answer = cache.cold.search_nodes(query, limit)
                    cache.answered += answer is not None
                    return answer
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
        threading.Thread(target=self._refresh_cache, args=(index_cache.REFRESH_DELAY,),
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
            data, signature = read_file(self._file)
            if signature != snapshot.signature:
                return  # changed meanwhile: the next load refreshes the cache
            digest = index_cache.digest_of(data)
            if (current := index_cache.ColdIndex.open(self._file, digest)) is not None:
                current.close()
                return  # another process made it already
            graph = snapshot.graph if snapshot.graph.terms is not None else self._term_indexed_graph()
            index_cache.build(self._file, graph, digest)
        except Exception as error:  # the cache only saves time; the file is what counts
            _log(f"The index cache {index_cache.cache_path(self._file)} could not be made ({error!r}).")

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

    def create_entities(self, entities: list[dict[str, Any]]) -> WriteResult:
        return self._write(lambda graph: rules.create_entities(graph, entities))

    def create_relations(self, relations: list[dict[str, Any]]) -> WriteResult:
        return self._write(lambda graph: rules.create_relations(graph, relations))

    def add_observations(self, observations: list[dict[str, Any]]) -> WriteResult:
        return self._write(lambda graph: rules.add_observations(graph, observations))

    def delete_entities(self, entity_names: list[str]) -> WriteResult:
        return self._write(lambda graph: rules.delete_entities(graph, entity_names))

    def delete_observations(self, deletions: list[dict[str, Any]]) -> WriteResult:
        return self._write(lambda graph: rules.delete_observations(graph, deletions))

    def delete_relations(self, relations: list[dict[str, Any]]) -> WriteResult:
        return self._write(lambda graph: rules.delete_relations(graph, relations))

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
        self._snapshot = _Snapshot(graph, signature)
        self._unreported_change = self._unreported_change or not first
        if index_cache.worth_caching(signature):
            self._schedule_cache_refresh()
        return graph

    def _write(self, operation: Callable[[Graph], Change]) -> WriteResult:
        deadline = time.monotonic() + self._lock_timeout
        # Threads of this process take turns here, so only one of them waits on the file lock.
        if not self._writing.acquire(timeout=self._lock_timeout):
            raise self._lock.timeout_error()
        try:
            self._create_directory()
            with self._lock.held(deadline):
                before = self._graph()
                change = operation(before)
                if not change.changed:
                    return WriteResult(change.value, False, [])
                return self._commit(change.graph, change.value)
        finally:
            self._writing.release()

    def _create_directory(self) -> None:
        try:
            self._file.parent.mkdir(mode=_PRIVATE_DIRECTORY, parents=True, exist_ok=True)
        except OSError as error:
            raise GraphError(f"Cannot create the directory {self._file.parent} for the memory file: "
                             f"{error.strerror}. Nothing was changed.") from error

    def _commit(self, graph: Graph, value: dict[str, Any]) -> WriteResult:
        notes: list[str] = []
        pieces = file_pieces(rules.file_lines(graph))
        replaced = _hold_open(self._file)
        try:
            self._save(graph, pieces, notes)
        finally:
            if replaced is not None:
                self._release(replaced)
        if (snapshot := self._snapshot) is not None and index_cache.worth_caching(snapshot.signature):
            self._schedule_cache_refresh()
        return WriteResult(value, True, notes)

    def _save(self, graph: Graph, pieces: Iterable[bytes], notes: list[str]) -> None:
        try:
            for stray in stray_temporaries(self._file):
                with suppress(FileNotFoundError):
                    stray.unlink()
            if graph.rejected:
                side_file = rejected_path_for(self._file)
                # Appended before the memory file loses them: a crash in between duplicates, never loses.
                append_rejected(side_file, graph.rejected)
                notes.append(f"{rules.plural(len(graph.rejected), 'unreadable line was', 'unreadable lines were')} "
                             f"moved from the memory file to {side_file}.")
                graph = replace(graph, rejected=())
            with staged(self._file, pieces) as temporary:
                self._lock.raise_if_lost()
                # Readers noticing the new file wait for the new snapshot instead of loading it again.
                with self._loading:
                    os.replace(temporary.path, self._file)
                    self._snapshot = _Snapshot(graph, temporary.signature)
        except OSError as error:
            raise GraphError(f"Could not save the memory file {self._file}: {error.strerror}. "
                             "Nothing was changed.") from error
        fsync_directory(self._file.parent)

    def _release(self, fd: int) -> None:
        try:
            self._releaser.submit(os.close, fd)
        except RuntimeError:  # the interpreter is shutting down
            os.close(fd)
