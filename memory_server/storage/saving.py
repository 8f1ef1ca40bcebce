"""The memory file's save path, for store.GraphStore (whose guarantees G3 and G4 it keeps): a
batch of writes applied to the graph, compared with the file's bytes, and saved in place of the
file with its indexes carried over."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, Final, NamedTuple

from ..model import graph as rules
from ..model import indexes
from ..model.graph import Change, Graph, GraphError
from ..model.records import Layout, layout_pieces
from .coldstart import CacheKeeper
from .commit import Operation, WriteResult
from .files import (
    Signature,
    append_rejected,
    create_private_directories,
    fsync_directory,
    holds,
    let_go_of_cached,
    rejected_path_for,
    remove_debris,
    staged,
)
from .lock import MemoryFileLock
from .settling import Signal

INDEX_ONCE_FROM: Final = 3
"""Batches of this many writes bring the search indexes up to date once, after the last write,
rather than after each: from three writes on, one update is cheaper than one per write (figures:
docs/benchmarks.md, "Figures behind the code")."""


class Snapshot(NamedTuple):
    graph: Graph
    signature: Signature
    content: Sequence[bytes] | None = None
    """The bytes the graph was read from or saved as, so that a writer can tell for certain that
    the file still holds them (a stat signature can repeat); None when unknown."""
    layout: Layout = ()
    """How this process last saved the file, for the next save to reuse the pieces that stay the same."""


class _StaleStart(Exception):
    """The file no longer holds the bytes a write started from: it starts again from the file."""


class Saving:
    """The save path of a GraphStore: the store's state it reads and sets is declared here."""

    _file: Path
    _lock: MemoryFileLock
    _loading: threading.Lock
    _snapshot: Snapshot | None
    _keeper: CacheKeeper
    _saves: int
    _made_directories: list[Path]
    _soon: Callable[..., Future[Any]]
    _settled: Signal
    _load: Callable[..., Graph]

    def _run_batch(self, operations: Sequence[Operation]) -> list[WriteResult | Exception]:
        snapshot = self._snapshot
        if snapshot is None or snapshot.content is None:
            return self._apply(operations, self._reload(), None)
        # The stat signature is not enough here: a rewrite of the same size can keep it
        # (coarse timestamps and a reused inode, a tool that restores the modification
        # time), and saving over it would undo that rewrite. So the file's bytes are
        # compared with the ones the graph came from, alongside the work on the change;
        # nothing on disk changes before the comparison has said they are the same.
        check = self._soon(holds, self._file, snapshot.content)
        try:
            return self._apply(operations, snapshot.graph, check)
        except _StaleStart:
            return self._apply(operations, self._reload(), None)  # the whole batch, on the file's graph

    def _apply(self, operations: Sequence[Operation], before: Graph,
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
                graph = indexes.carry_word_index(before, graph) or graph
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
            self._made_directories += create_private_directories(self._file.parent)
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
        layout = rules.file_layout_of(graph, *((before.graph, before.layout) if before is not None else ()))
        self._save(graph, layout, notes, check)
        self._keeper.changed()
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
            # The comparison has read the file (G3), so its cached pages can go now: they are the
            # ones this thread's write then gets back (files.let_go_of_cached).
            self._confirm(check)
            let_go_of_cached(self._file)
            with staged(self._file, layout_pieces(layout)) as temporary:
                self._lock.raise_if_lost()
                # Readers noticing the new file wait for the new snapshot instead of loading it again.
                with self._loading:
                    replaced = temporary.put_in_place(self._file)
                    self._snapshot = Snapshot(self._with_indexes_published_meanwhile(graph), temporary.signature,
                                               temporary.content, layout)
                    self._saves += 1
                self._settled.changed()
                self._keeper.removed()  # before the save is acknowledged (coldstart K3)
        except OSError as error:
            raise GraphError(f"Could not save the memory file {self._file}: {error.strerror}. "
                             "Nothing was changed.") from error
        fsync_directory(self._file.parent)
        if replaced is not None:
            # The last descriptor of the version replaced: closing it frees its blocks, which a
            # worker does while the answer goes out (files.Staged.put_in_place). After the fsync of
            # the directory, which would otherwise wait for those blocks' records too.
            self._soon(os.close, replaced)

    def _with_indexes_published_meanwhile(self, graph: Graph) -> Graph:
        """`graph` with the search indexes the read side published while the batch was worked out
        from the graph before them (under _loading). Dropped, they would be made again from scratch
        at the next search or poll; with writes landing back to back that could repeat forever."""
        current = self._snapshot
        if current is None or ((graph.words is not None or current.graph.words is None)
                               and (graph.terms is not None or current.graph.terms is None)):
            return graph
        return indexes.carry_word_index(current.graph, graph) or graph

