"""Group commit: the writes of one store take turns, and the writes waiting together are saved together.

Each save writes the whole file and waits for the disk twice (the file, then its directory), so
writes that take turns one by one spend their time in that queue. Instead the thread whose turn
it is takes, once it holds the file lock, every write queued by then (at most MAX_BATCH), in the
order they came; the store applies each to the graph the ones before it made and saves once.

Guarantees (tests/test_group_commit.py):

W1. One turn at a time in a process, and one writer at a time across processes: a turn holds the
    memory file's lock (lock.py) while its batch is applied and saved.
W2. The writes of a batch are applied in the order they joined the queue, each to the graph the
    ones before it made, as if they had taken turns.
W3. Every write gets its own outcome: its result, its own error (a rule it broke, which changes
    nothing), or the batch's error (a failed save: none of the batch is saved).
W4. A write still waiting for its turn gives up when its `abandon` event is set (WriteAbandoned)
    or its deadline passes (LockTimeout), and changes nothing; once taken into a batch, it
    completes either way.
W5. No thread waits on a timer for another: waiters sleep on one condition, notified when a turn
    ends; a waiter not yet taken wakes at POLL_INTERVAL only to look at its abandon event and
    deadline.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, Final

import msgspec

from ..model.graph import Change, Graph
from .lock import POLL_INTERVAL, MemoryFileLock

MAX_BATCH: Final = 256
"""Writes saved together at most; later ones wait for the next turn."""

Operation = Callable[[Graph], Change]


class WriteResult(msgspec.Struct, frozen=True):
    value: dict[str, Any]
    """The tool's structuredContent; shares objects with the graph, so read-only."""
    changed: bool
    """False when the call changed nothing."""
    notes: list[str]
    """Extra remarks for the model, e.g. about lines moved out of the memory file."""


class _Queued:
    """One write waiting in this process: for its turn, then (taken into a batch) for its outcome."""

    __slots__ = ("abandon", "deadline", "error", "operation", "result", "taken")

    def __init__(self, operation: Operation, abandon: threading.Event | None, deadline: float) -> None:
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


class GroupCommit:
    """The write queue of one store. `run_batch` applies and saves a batch (the store's), holding
    the file lock; `prepare` runs before the lock is taken (the directory made)."""

    def __init__(self, lock: MemoryFileLock, timeout: float,
                 run_batch: Callable[[Sequence[Operation]], list[WriteResult | Exception]],
                 prepare: Callable[[], None], changed: Callable[[], None]) -> None:
        """`changed`: called after each change of the queue (settling.py E1)."""
        self._lock = lock
        self._timeout = timeout
        self._run_batch = run_batch
        self._prepare = prepare
        self._queue_changed = changed
        self._changed = threading.Condition(threading.Lock())
        self._queue: deque[_Queued] = deque()
        self._leading = False
        """A thread holds the turn (it waits for the file lock, or does a batch)."""

    @property
    def queued(self) -> int:
        """Writes waiting for their turn or for the file lock (not yet in a batch)."""
        return len(self._queue)

    def write(self, operation: Operation, abandon: threading.Event | None = None) -> WriteResult:
        """`operation` on the file's current graph, saved (W1-W4)."""
        queued = _Queued(operation, abandon, time.monotonic() + self._timeout)
        with self._changed:
            self._queue.append(queued)
            self._queue_changed()
        # A leader behind more than MAX_BATCH earlier writes did theirs, not its own: it goes on.
        while self._take_turn(queued):
            try:
                self._lead(queued)
            finally:
                with self._changed:
                    self._leading = False
                    self._changed.notify_all()
        if queued.error is not None:
            raise queued.error
        assert queued.result is not None
        return queued.result

    def _take_turn(self, queued: _Queued) -> bool:
        """True when this thread gets the turn to lead a batch, False once the queued write is
        done. WriteAbandoned or LockTimeout while it waits untaken."""
        with self._changed:
            while not queued.done:
                if queued.taken:
                    self._changed.wait()  # a leader does it, and wakes every waiter when done
                    continue
                if queued.abandon is not None and queued.abandon.is_set():
                    self._queue.remove(queued)
                    self._queue_changed()
                    raise self._lock.abandoned_error()
                if not self._leading:
                    self._leading = True
                    return True
                remaining = queued.deadline - time.monotonic()
                if remaining <= 0:
                    self._queue.remove(queued)
                    self._queue_changed()
                    break
                # Woken when the turn is free or this write is done; the poll looks at abandon and deadline.
                self._changed.wait(min(POLL_INTERVAL, remaining))
            else:
                return False
        raise self._lock.timeout_error()  # reads the holder's record: outside the condition

    def _lead(self, own: _Queued) -> None:
        """Holding the turn: the file lock, then the writes queued by then, done and saved together.

        Until the batch is taken, a failure (the lock not had in time, the write abandoned, the
        directory not creatable) is the leading write's own: the others wait for the next turn.
        After it, every write of the batch has its outcome from run_batch, or shares its error."""
        batch: list[_Queued] = []
        try:
            self._prepare()
            with self._lock.held(own.deadline, own.abandon):
                batch = self._take_batch()
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
                with self._changed, suppress(ValueError):
                    self._queue.remove(own)
                    self._queue_changed()
            if not isinstance(error, Exception):
                raise  # KeyboardInterrupt and the like stop this thread too

    def _take_batch(self) -> list[_Queued]:
        """The queued writes still wanted, oldest first; an abandoned one gets its error instead."""
        batch: list[_Queued] = []
        with self._changed:
            while self._queue and len(batch) < MAX_BATCH:
                queued = self._queue.popleft()
                if queued.abandon is not None and queued.abandon.is_set():
                    queued.error = self._lock.abandoned_error()
                    continue
                queued.taken = True
                batch.append(queued)
            self._queue_changed()
        return batch
