"""The only code that touches streams: stdin and stdout as daemon threads, signals, shutdown.

Blocking reads and writes live in daemon threads so that a peer that stops reading,
or never closes its end, can never keep the process alive past shutdown.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
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

from .server import Server
from .session import Session

log = logging.getLogger("protocol")

READ_CHUNK = 1 << 16
PIPE_BYTES = 1 << 20  # Linux's default ceiling for an unprivileged process (/proc/sys/fs/pipe-max-size)
WRITE_DRAIN_SECONDS = 5.0


def run(server: Server, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Serve `server` on stdin/stdout until end of input or SIGTERM/SIGINT; then return (exit 0)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    try:
        anyio.run(serve, server, stdin_fd, stdout_fd)
    except KeyboardInterrupt:
        pass  # Ctrl-C before the signal receiver was listening: still a clean stop


async def serve(server: Server, stdin_fd: int, stdout_fd: int) -> None:
    for fd in (stdin_fd, stdout_fd):
        _widen_pipe(fd)
    writer = _Writer(stdout_fd)
    chunks_in, chunks_out = anyio.create_memory_object_stream[bytes](8)

    async def drained(limit: int) -> None:
        # Short waits, so that a thread abandoned at shutdown ends soon and never holds up the exit.
        while writer.pending() > limit:
            await anyio.to_thread.run_sync(writer.wait_below, limit, 0.25, abandon_on_cancel=True)

    async with anyio.create_task_group() as tasks:
        stop = anyio.Event()
        tasks.start_soon(_watch_signals, stop)
        # The engine first: background tasks run, and subscriptions wait for those that look first.
        async with server.running(), Session(server, writer.send, pending_bytes=writer.pending,
                                             drained=drained) as session:
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
    """Writes whole lines to stdout in order from a daemon thread, counting what is still queued."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lines: queue.SimpleQueue[bytes | bytearray | Callable[[], None]] = queue.SimpleQueue()
        self._broken = False
        self._queued = 0
        self._written = threading.Condition()
        threading.Thread(target=self._write_forever, name="stdout", daemon=True).start()

    def send(self, line: bytes | bytearray) -> None:
        with self._written:
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
                    view = memoryview(item)
                    while view:
                        view = view[os.write(self._fd, view):]
            except OSError:
                self._broken = True  # the reader went away; keep draining so nobody blocks
            finally:
                with self._written:
                    self._queued -= len(item)
                    self._written.notify_all()
