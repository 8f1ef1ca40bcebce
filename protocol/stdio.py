"""The only code that touches streams: stdin, stdout, signals, shutdown.

Nothing that can block runs on the event loop: a pipe (or socket) on stdin is read by the loop
only once it has data, anything else by a daemon thread; an answer is written by the loop only
when it surely fits the empty stdout pipe, otherwise by a daemon thread. So a peer that stops
reading, or never closes its end, can never keep the process alive past shutdown.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import stat
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .runtime import running
from .server import Server
from .session import Session

log = logging.getLogger("protocol")

READ_CHUNK = 1 << 16
PIPE_BYTES = 1 << 20  # Linux's default ceiling for an unprivileged process (/proc/sys/fs/pipe-max-size)
WRITE_DRAIN_SECONDS = 5.0


def run_stdio(server: Server, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Serve `server` on stdin/stdout until end of input or SIGTERM/SIGINT; then return (exit 0).

    Logging is the caller's to configure (the command line does it; a library never should)."""
    try:
        anyio.run(serve, server, stdin_fd, stdout_fd)
    except KeyboardInterrupt:
        pass  # Ctrl-C before the signal receiver was listening: still a clean stop


async def serve(server: Server, stdin_fd: int, stdout_fd: int) -> None:
    for fd in (stdin_fd, stdout_fd):
        _widen_pipe(fd)
    writer = _Writer(stdout_fd)

    async def drained(limit: int) -> None:
        # Short waits, so that a thread abandoned at shutdown ends soon and never holds up the exit.
        while writer.pending() > limit:
            await anyio.to_thread.run_sync(writer.wait_below, limit, 0.25, abandon_on_cancel=True)

    async with anyio.create_task_group() as tasks:
        stop = anyio.Event()
        tasks.start_soon(_watch_signals, stop)
        # The engine first: background tasks run, and subscriptions wait for those that look first.
        async with running(server), Session(server, writer.send, pending_bytes=writer.pending,
                                             drained=drained) as session:
            if _pollable(stdin_fd):
                tasks.start_soon(_read_on_loop, stdin_fd, session, stop)
            else:
                chunks_in, chunks_out = anyio.create_memory_object_stream[bytes](8)
                threading.Thread(target=_read_forever, args=(stdin_fd, chunks_in, anyio.lowlevel.current_token()),
                                 name="stdin", daemon=True).start()
                tasks.start_soon(_pump, chunks_out, session, stop)
            await stop.wait()
            await session.close()
            tasks.cancel_scope.cancel()
    await anyio.to_thread.run_sync(writer.drain, WRITE_DRAIN_SECONDS, abandon_on_cancel=True)


async def _pump(chunks: MemoryObjectReceiveStream[bytes], session: Session, stop: anyio.Event) -> None:
    async with chunks:
        async for chunk in chunks:
            # Waits while the session is full: the stdin thread then stops reading, and a client
            # that sends without reading our answers is held back by its own pipe.
            await session.receive(chunk)
    session.feed_eof()
    stop.set()


async def _read_on_loop(fd: int, session: Session, stop: anyio.Event) -> None:
    """A pipe or socket is read by the event loop itself when it has data: a request then reaches
    its handler without waking another thread first (the reader thread is for what the loop
    cannot wait on: files, terminals). Waiting to read while the session is full holds back a
    client that sends without reading, as the thread does."""
    while True:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            continue  # taken by someone else sharing our stdin: wait again
        except OSError:
            chunk = b""
        if not chunk:
            break
        await session.receive(chunk)
    session.feed_eof()
    stop.set()


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait for `fd` to be readable: a pipe or a socket, off Windows."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def _watch_signals(stop: anyio.Event) -> None:
    if sys.platform == "win32":  # no signal receiver there; end of input is the way to stop
        return
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("received %s, closing", signal.Signals(signum).name)
            stop.set()
            return


def _read_forever(fd: int, chunks: MemoryObjectSendStream[bytes], token: Any) -> None:
    try:
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                anyio.from_thread.run_sync(chunks.close, token=token)
                return
            # Most chunks find room at once: handed over without a task on the loop; the blocking
            # send (which waits for room) only when the stream is full.
            try:
                anyio.from_thread.run_sync(chunks.send_nowait, chunk, token=token)
            except anyio.WouldBlock:
                anyio.from_thread.run(chunks.send, chunk, token=token)
    except (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return  # the event loop is gone or stopped listening: shutdown is under way


def _widen_pipe(fd: int) -> None:
    """A large answer then crosses the pipe in one write instead of 64 KiB turns with the reader."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl else None  # Linux only
    if set_size is not None:
        with suppress(OSError):
            fcntl.fcntl(fd, set_size, PIPE_BYTES)


class _Writer:
    """Writes whole lines to stdout in order from a daemon thread, counting what is still queued.

    A line that surely fits an empty pipe is written at once by the caller instead: the write
    cannot block then, and the answer skips a hand-over to the thread, which a client reading
    many pages would pay on every one (docs/benchmarks.md#the-engines-own-costs)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lines: queue.SimpleQueue[bytes | bytearray | Callable[[], None]] = queue.SimpleQueue()
        self._broken = False
        self._queued = 0
        self._written = threading.Condition()
        self._pipe_room, self._fionread = _pipe_capacity(fd)
        threading.Thread(target=self._write_forever, name="stdout", daemon=True).start()

    def send(self, line: bytes | bytearray) -> None:
        with self._written:
            if not self._queued and not self._broken and len(line) <= self._pipe_room and _pipe_empty(self._fd, self._fionread):
                try:
                    _write_all(self._fd, line)
                except OSError:
                    self._broken = True
                return
            self._queued += len(line)
        self._lines.put(line)

    def pending(self) -> int:
        """Bytes handed over but not yet accepted by the pipe (none once the reader is gone)."""
        return 0 if self._broken else self._queued

    def wait_below(self, limit: int, timeout: float) -> None:
        with self._written:
            self._written.wait_for(lambda: self._queued <= limit or self._broken, timeout)

    def drain(self, timeout: float) -> None:
        done = threading.Event()
        self._lines.put(done.set)
        done.wait(timeout)

    def _write_forever(self) -> None:
        while True:
            item = self._lines.get()
            if callable(item):
                item()
                continue
            try:
                if not self._broken:
                    _write_all(self._fd, item)
            except OSError:
                self._broken = True  # the reader went away; keep draining so nobody blocks
            finally:
                with self._written:
                    self._queued -= len(item)
                    self._written.notify_all()


def _write_all(fd: int, data: bytes | bytearray) -> None:
    """All of `data`, however few bytes each write takes (a pipe may take part of a long line)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _pipe_capacity(fd: int) -> tuple[int, int]:
    """How large a line a write into the empty pipe `fd` takes without blocking (0 when `fd` is no
    pipe, a terminal or a file: the thread writes everything then, or when the platform cannot
    say), and the request that asks a pipe how much it holds."""
    get_size = getattr(fcntl, "F_GETPIPE_SZ", None) if fcntl else None  # Linux only
    if get_size is None:
        return 0, 0
    import termios  # Linux, like F_GETPIPE_SZ

    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return 0, 0
        size = fcntl.fcntl(fd, get_size)
        fcntl.ioctl(fd, termios.FIONREAD, bytes(4))  # the question must be answerable
    except OSError:
        return 0, 0
    # A page of slack: a pipe counts its room in pages, and a page may be partly used.
    return max(0, size - 4096), termios.FIONREAD


def _pipe_empty(fd: int, fionread: int) -> bool:
    """Whether the reader has taken everything written so far (only this process writes here)."""
    try:
        waiting = fcntl.ioctl(fd, fionread, bytes(4))
    except OSError:
        return False
    return int.from_bytes(waiting, sys.byteorder) == 0
