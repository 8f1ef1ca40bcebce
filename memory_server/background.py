"""The one owner of the threads the memory starts for work of its own, off the request path.

A thread nobody owns may still be inside native code (onnxruntime's, numpy's) when the interpreter
tears down, and the process then dies by ``terminate called without an active exception``
instead of exiting 0. Work handed to a :class:`Background` is run by its named workers, and its
``close(timeout)`` stops and joins them before the process exits. psycopg's pool is the model:
named workers, a scheduler for delayed work, and a close that says which thread did not stop.

Guarantees:

B1. One :class:`Background` per process (:func:`process`), made at its first use. Its threads are
    named ``memory-background-<n>`` and ``memory-background-later``; there are at most
    ``workers`` of the first kind, started only when work is waiting.
B2. :meth:`Background.submit` runs a function in a worker; :meth:`Background.later` runs it
    there after a delay, unless cancelled first. After :meth:`Background.close` both refuse
    (they return None) and nothing new starts.
B3. :meth:`Background.close` sets :attr:`Background.stopping` (long work checks it between its
    steps, and returns when it is set), drops work not yet started, and joins every thread within
    the timeout (``None``: however long they take). A thread still running then is named on
    stderr, one line each. Closing twice is closing once.
B4. Every Background still open at interpreter exit is closed then (atexit runs before the
    interpreter stops its threads): the process's, for a process that never calls
    :func:`close_process`, and one a store owns, for a store never closed.
B5. Quick work given to :meth:`Background.later` (``quick=True``: a few system calls that wait
    on nothing, such as the lock file's refresh in storage/lock.py) runs at its time in the
    ``-later`` thread itself, never behind long work that holds every worker; one quick function
    runs at a time, and close joins the thread running it like any other.
B6. :meth:`Background.run` is :meth:`~Background.submit` for work whose result someone waits
    for: its :class:`concurrent.futures.Future` holds the function's result or exception; one
    cancelled before a worker takes it never runs, and one that close drops is cancelled, so no
    waiter waits for work that will not run. None when closed.
B7. :func:`give_back_memory`, called when bulk work of the memory's own is done (the model's
    load, a batch of embeddings, an index of a graph), returns to the system the heap that the
    work freed: glibc keeps it resident otherwise (at 100,000 entities, 80 MB after a first start:
    docs/semantic.md). Elsewhere than on glibc it does nothing.
"""

from __future__ import annotations

import atexit
import heapq
import itertools
import logging
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Final

log = logging.getLogger(__name__)

WORKERS: Final = 2
"""Workers of the process's Background: embedding takes one core, the other serves requests."""
CLOSE_SECONDS: Final = 10.0
"""How long the process's close waits for its threads: longer than one step of any work it runs."""


class Later:
    """A function to run after a delay; :meth:`cancel` before it starts and it never does."""

    __slots__ = ("cancelled", "function", "quick")

    def __init__(self, function: Callable[[], object], quick: bool = False) -> None:
        self.function = function
        self.quick = quick
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Job:
    """Work whose result a Future holds (B6)."""

    __slots__ = ("args", "function", "future")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args
        self.future: Future[Any] = Future()

    def __call__(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            result = self.function(*self.args)
        except BaseException as error:
            self.future.set_exception(error)
        else:
            self.future.set_result(result)


_open: weakref.WeakSet[Background] = weakref.WeakSet()
"""Every Background not yet closed, for B4."""


class Background:
    """Named worker threads, delayed work, and a close that joins them (B1 to B3, B6)."""

    def __init__(self, name: str = "memory-background", workers: int = WORKERS) -> None:
        self.name = name
        self.workers = max(1, workers)
        self.stopping = threading.Event()
        """Set by close: long work returns at its next step."""
        self._lock = threading.Condition()
        self._queue: deque[Callable[[], object]] = deque()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._serial = itertools.count(1)
        self._timers: list[tuple[float, int, Later]] = []
        self._scheduler: threading.Thread | None = None
        _open.add(self)

    # -- work --------------------------------------------------------------------------------

    def submit(self, function: Callable[[], object]) -> bool:
        """Run `function` in a worker (B2); False when closed."""
        with self._lock:
            if self.stopping.is_set():
                return False
            self._queue.append(function)
            self._wake_a_worker()
            return True

    def run(self, function: Callable[..., Any], *args: Any) -> Future[Any] | None:
        """`function(*args)` in a worker, its outcome in the Future (B6); None when closed."""
        job = _Job(function, args)
        return job.future if self.submit(job) else None

    def later(self, delay: float, function: Callable[[], object], *, quick: bool = False) -> Later | None:
        """Run `function` in a worker after `delay` seconds, unless cancelled (B2), or, when it is
        `quick`, in the scheduler's thread (B5); None when closed."""
        with self._lock:
            if self.stopping.is_set():
                return None
            handle = Later(function, quick)
            heapq.heappush(self._timers, (time.monotonic() + max(delay, 0.0), next(self._serial), handle))
            if self._scheduler is None or not self._scheduler.is_alive():
                self._scheduler = self._start(self._schedule, f"{self.name}-later")
            self._lock.notify_all()
            return handle

    def _wake_a_worker(self) -> None:
        # Called holding the lock, with work just queued.
        if self._idle:
            self._lock.notify_all()
        elif sum(thread.is_alive() for thread in self._threads if thread is not self._scheduler) < self.workers:
            self._start(self._work, f"{self.name}-{next(self._serial)}")

    def _start(self, target: Callable[[], None], name: str) -> threading.Thread:
        # Daemon, so that a thread that did not stop within close's timeout (named on stderr)
        # cannot keep the process from exiting; close joins all of them before that.
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads = [known for known in self._threads if known.is_alive()]
        self._threads.append(thread)
        thread.start()
        return thread

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self.stopping.is_set():
                    self._idle += 1
                    self._lock.wait()
                    self._idle -= 1
                if self.stopping.is_set():
                    return
                function = self._queue.popleft()
            _run(function)

    def _schedule(self) -> None:
        while (handle := self._next_quick()) is not None:
            if not handle.cancelled and not self.stopping.is_set():
                _run(handle.function)

    def _next_quick(self) -> Later | None:
        """Wait for timers to come due: each one due goes to the workers, but a quick one, which
        is returned to run in this thread (B5); None once closing."""
        with self._lock:
            while not self.stopping.is_set():
                if not self._timers:
                    self._lock.wait()
                    continue
                when, _, handle = self._timers[0]
                wait = when - time.monotonic()
                if wait > 0:
                    self._lock.wait(wait)
                    continue
                heapq.heappop(self._timers)
                if handle.cancelled:
                    continue
                if handle.quick:
                    return handle
                self._queue.append(handle.function)
                self._wake_a_worker()
        return None

    # -- end ---------------------------------------------------------------------------------

    def close(self, timeout: float | None = CLOSE_SECONDS) -> list[str]:
        """Stop and join every thread within `timeout` seconds (B3); the names of those that did not stop."""
        with self._lock:
            self.stopping.set()
            _open.discard(self)
            dropped = list(self._queue)
            self._queue.clear()
            for _, _, handle in self._timers:
                handle.cancel()
            self._timers.clear()
            self._lock.notify_all()
            threads = list(self._threads)
        for job in dropped:
            if isinstance(job, _Job):
                job.future.cancel()
        deadline = None if timeout is None else time.monotonic() + timeout
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        stuck = [thread.name for thread in threads if thread.is_alive() and thread is not current]
        for name in stuck:
            print(f"mcp-server-memory: the background thread {name} did not stop within {timeout:g} s",
                  file=sys.stderr, flush=True)
        return stuck

    @property
    def running(self) -> list[str]:
        """The names of the threads alive now (for stats and tests)."""
        with self._lock:
            return [thread.name for thread in self._threads if thread.is_alive()]


def _run(function: Callable[[], object]) -> None:
    try:
        function()
    except Exception:
        log.exception("background work %r failed", getattr(function, "__qualname__", function))


_process: Background | None = None
_process_lock = threading.Lock()


def process() -> Background:
    """The process's one Background (B1), made at the first call."""
    global _process
    if (known := _process) is not None:
        return known
    with _process_lock:
        if _process is None:
            _process = Background()
        return _process


def close_process(timeout: float = CLOSE_SECONDS) -> list[str]:
    """Close the process's Background if it was made (B3, B4); the threads that did not stop."""
    with _process_lock:
        known = _process
    return [] if known is None else known.close(timeout)


def give_back_memory() -> None:
    """Return the heap freed so far to the system (B7): glibc's malloc_trim(0), which gives back
    every free page of every arena, not only the top of the heap. A few ms at 100,000 entities,
    with the interpreter let go meanwhile."""
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc: its allocator does what it does
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)


@atexit.register
def _close_every_open() -> None:
    """B4: registered when this module is imported, before any Background can exist."""
    close_process()
    for background in list(_open):
        background.close()

