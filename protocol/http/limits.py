"""The bounds that keep one Streamable HTTP server up under load from clients that misbehave.

1. Open connections are bounded (`MAX_CONNECTIONS`, and always below the open-file limit, whose
   soft value is raised to the hard one at start): a connection beyond the bound closes the
   connection that has waited longest for its request's headers, or is itself answered 503 and
   closed when every open connection is busy with a request. So connections that never finish
   their headers cannot take the server's file descriptors.
2. A request's headers must arrive within `HEADER_SECONDS` of its connection opening (or of the
   previous response on a kept-alive connection), in at most `MAX_HEADER_BYTES`; else the
   connection is closed.
3. Request bodies are counted while they are read: beyond the first `FREE_BODY_BYTES` of each
   one, at most `MAX_BODY_BYTES_IN_FLIGHT` bytes of bodies are held at once across all clients;
   a body that would pass it is answered 503 at once. A body that sends nothing for
   `BODY_IDLE_SECONDS` is answered 408. Memory the bodies took is given back to the system
   once none is held.
4. Requests answered at once: `MAX_CONCURRENT_REQUESTS` for reads and everything else, and
   separately `MAX_CONCURRENT_WRITES` for tool calls that may write (a tool not annotated
   `readOnlyHint: true`), so writes waiting for the memory file's lock never take a read's turn.
5. SSE streams open at once (2026-07-28 listens and 2025-era GET streams together) are bounded by
   `MAX_STREAMS`; one more is refused with 503 and a JSON-RPC error saying why.
6. asyncio's report of a failed accept (EMFILE, ENFILE, ENOBUFS) reaches the log once a minute
   at most, as one line without a traceback; so do uvicorn's warnings about malformed requests,
   and this module's own lines about connections closed. A peer cannot flood the log.

Everything here is sans-policy bookkeeping; the app and `serve.run` apply it.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import time
from collections import OrderedDict, deque
from typing import Any

import anyio
import msgspec

from ..framing import MAX_LINE_BYTES

MAX_CONNECTIONS = 1024
"""Connections open at once (also kept below the open-file limit: see `connection_limit`)."""
HEADER_SECONDS = 10.0
"""Time allowed for a request's headers, from its connection opening or the previous response."""
MAX_HEADER_BYTES = 64 * 1024
"""Bytes allowed for a request line and headers."""
MAX_CONCURRENT_REQUESTS = 64
"""Reads (and every request that is not a write) answered at once; the rest wait their turn."""
MAX_CONCURRENT_WRITES = 16
"""Tool calls that may write answered at once, apart from the reads; the rest wait their turn.
Below anyio's 40 worker threads, so that a read that needs a thread always finds one."""
MAX_STREAMS = 512
"""SSE streams open at once: 2026-07-28 listens and 2025-era GET streams together."""
MAX_BODY_BYTES_IN_FLIGHT = 128 * 1024 * 1024
"""Bytes of request bodies held at once across all clients, beyond each body's first FREE_BODY_BYTES."""
FREE_BODY_BYTES = 64 * 1024
"""The first bytes of every body, never refused: small requests go through whatever large ones do."""
BODY_IDLE_SECONDS = 30.0
"""A body that sends nothing for this long is answered 408."""
LISTEN_BACKLOG = 100
"""Connections the kernel queues for accept, and so at most accepted by asyncio in one go."""
SPARE_FILES = 64
"""Open files kept for the memory file, its lock, cache and side files, logs and threads."""
LOG_EVERY_SECONDS = 60.0
MAX_SESSIONS = 1000
"""Legacy sessions kept at once; beyond it, the one unused for longest is ended (its client re-initializes)."""
SESSION_IDLE_SECONDS = 3600.0
"""A legacy session with no request in flight and no GET stream open for this long is ended: its
next request gets 404, and its client initializes a new one."""
KEEPALIVE_SECONDS = 15.0
"""A quiet SSE stream sends a comment this often, so that proxies and clients see it alive."""


class HttpLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Every bound of one Streamable HTTP endpoint and of the server that runs it (statements 1 to 5)."""

    max_connections: int = MAX_CONNECTIONS
    header_seconds: float = HEADER_SECONDS
    max_body_bytes: int = MAX_LINE_BYTES
    max_body_bytes_in_flight: int = MAX_BODY_BYTES_IN_FLIGHT
    body_idle_seconds: float = BODY_IDLE_SECONDS
    max_concurrent_requests: int = MAX_CONCURRENT_REQUESTS
    max_concurrent_writes: int = MAX_CONCURRENT_WRITES
    max_streams: int = MAX_STREAMS
    max_sessions: int = MAX_SESSIONS
    session_idle_seconds: float = SESSION_IDLE_SECONDS
    keepalive_seconds: float = KEEPALIVE_SECONDS

log = logging.getLogger("protocol.http")


# -- requests and streams ---------------------------------------------------------------------------

class Slots:
    """At most `limit` requests answered at once; the others wait in the order they came.

    anyio's CapacityLimiter passes through the event loop even when a slot is free (a checkpoint,
    see docs/benchmarks.md#the-engines-own-costs); a free slot here is a counter.
    A slot freed while others wait is handed straight to the first of them."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiting: deque[anyio.Event] = deque()

    async def __aenter__(self) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        turn = anyio.Event()
        self._waiting.append(turn)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():
                self._release()  # handed a slot as it was cancelled: the next one gets it
            else:
                self._waiting.remove(turn)
            raise

    async def __aexit__(self, *_: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._waiting:
            self._waiting.popleft().set()
        else:
            self._free += 1


class BodyBudget:
    """Bytes of request bodies held at once, counted as they arrive (statement 3)."""

    def __init__(self, limit: int, free: int = FREE_BODY_BYTES) -> None:
        self.limit = limit
        self.free = free
        self.held = 0
        self._released = 0  # bytes given up since memory was last handed back

    def take(self, before: int, chunk: int) -> bool:
        """Account `chunk` more bytes of a body that already holds `before`; False when over the limit."""
        counted = max(0, before + chunk - max(before, self.free))
        if counted and self.held + counted > self.limit:
            return False
        self.held += counted
        return True

    def give(self, size: int) -> None:
        """A body of `size` bytes is no longer held (read, refused or abandoned)."""
        counted = max(0, size - self.free)
        self.held -= counted
        self._released += counted
        if self.held == 0 and self._released >= 8 * 1024 * 1024:
            self._released = 0
            give_back_memory()


_trim: Any = None


def give_back_memory() -> None:
    """Hand freed heap memory back to the system (glibc's malloc_trim; elsewhere nothing).

    Bodies arrive as many 64 KiB pieces, which glibc serves from its heap and keeps after they
    are freed: without this a burst of large bodies leaves the process that much larger."""
    global _trim
    if _trim is None:
        name = ctypes.util.find_library("c")
        library = ctypes.CDLL(name) if name else None
        _trim = getattr(library, "malloc_trim", False) if library is not None else False
    if _trim:
        _trim(0)


# -- connections ------------------------------------------------------------------------------------

def connection_limit(wanted: int = MAX_CONNECTIONS) -> int:
    """`wanted`, lowered to fit the open-file limit (whose soft value this raises to the hard one
    first): a full accept queue and SPARE_FILES must still find descriptors."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to raise nor read
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(8, min(wanted, soft - LISTEN_BACKLOG - SPARE_FILES))


class ConnectionGuard:
    """Statements 1 and 2 for the connections of one uvicorn server (see `guarded`)."""

    def __init__(self, limit: int, header_seconds: float = HEADER_SECONDS,
                 max_header_bytes: int = MAX_HEADER_BYTES) -> None:
        self.limit = limit
        self.header_seconds = header_seconds
        self.max_header_bytes = max_header_bytes
        self.open: set[Any] = set()
        # Connections waiting for a request's headers, longest first: what the cycle was when the
        # wait began (a new one means the headers came), the bytes so far, and the timer.
        self.waiting: OrderedDict[Any, list[Any]] = OrderedDict()
        self._said = RateLimited(log)

    def opened(self, connection: Any) -> None:
        self.open.add(connection)
        self.wait_for_headers(connection)
        if len(self.open) <= self.limit:
            return
        oldest = next(iter(self.waiting))
        if oldest is not connection:
            self._said.warning("connection limit", "%d connections are open, the most allowed: closing the one "
                               "that has waited longest for its headers", self.limit)
            self.close(oldest)
        else:
            self._said.warning("connection limit busy", "%d connections are open and busy, the most allowed: "
                               "refusing another with 503", self.limit)
            connection.transport.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n"
                                       b"content-length: 31\r\nconnection: close\r\nretry-after: 1\r\n\r\n"
                                       b"Too many connections; retry.\r\n\r\n")
            self.close(connection)

    def wait_for_headers(self, connection: Any) -> None:
        entry = self.waiting.pop(connection, None)
        if entry is not None:
            entry[2].cancel()
        timer = asyncio.get_running_loop().call_later(self.header_seconds, self._expire, connection)
        self.waiting[connection] = [connection.cycle, 0, timer]

    def received(self, connection: Any, size: int) -> None:
        entry = self.waiting.get(connection)
        if entry is None:
            return
        if connection.cycle is not entry[0]:  # the parser started a request: its headers came
            self._done(connection)
            return
        entry[1] += size
        if entry[1] > self.max_header_bytes:
            connection.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n"
                                       b"connection: close\r\n\r\n")
            self.close(connection)

    def answered(self, connection: Any) -> None:
        cycle = connection.cycle
        if connection in self.open and not connection.transport.is_closing() and (
                cycle is None or cycle.response_complete):
            self.wait_for_headers(connection)

    def closed(self, connection: Any) -> None:
        self.open.discard(connection)
        self._done(connection)

    def close(self, connection: Any) -> None:
        self._done(connection)
        connection.transport.close()

    def _done(self, connection: Any) -> None:
        entry = self.waiting.pop(connection, None)
        if entry is not None:
            entry[2].cancel()

    def _expire(self, connection: Any) -> None:
        if connection in self.waiting:
            self._said.info("header timeout", "closing a connection that sent no complete request headers "
                            "within %.0f s", self.header_seconds)
            self.close(connection)


def guarded(base: type[asyncio.Protocol], guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class `base` (httptools' or h11's), with `guard` watching each
    connection: it relies only on `transport` and `cycle` (set when a request's headers are
    parsed; its `response_complete` once answered), which both of uvicorn's protocols keep."""
    protocol: Any = base

    class Guarded(protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            guard.opened(self)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            guard.received(self, len(data))

        def on_response_complete(self) -> None:
            super().on_response_complete()
            guard.answered(self)

        def connection_lost(self, exc: Exception | None) -> None:
            guard.closed(self)
            super().connection_lost(exc)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


# -- logs -------------------------------------------------------------------------------------------

class RateLimited:
    """Log lines of one kind at most once per `every` seconds, saying how many were held back."""

    def __init__(self, logger: logging.Logger, every: float = LOG_EVERY_SECONDS) -> None:
        self.logger = logger
        self.every = every
        self._last: dict[str, tuple[float, int]] = {}

    def allow(self, kind: str) -> int | None:
        """None to hold this one back; else how many of the kind were held back before it."""
        now = time.monotonic()
        last, held = self._last.get(kind, (-self.every, 0))
        if now - last < self.every:
            self._last[kind] = (last, held + 1)
            return None
        self._last[kind] = (now, 0)
        return held

    def warning(self, kind: str, message: str, *args: Any) -> None:
        self._log(logging.WARNING, kind, message, args)

    def info(self, kind: str, message: str, *args: Any) -> None:
        self._log(logging.INFO, kind, message, args)

    def _log(self, level: int, kind: str, message: str, args: tuple[Any, ...]) -> None:
        held = self.allow(kind)
        if held is not None:
            suffix = f" ({held} more like it in the last {self.every:.0f} s)" if held else ""
            self.logger.log(level, message + suffix, *args)


class QuietAcceptErrors(logging.Filter):
    """For asyncio's logger: its report of a failed accept, at most once a minute and without the
    traceback (statement 6). Out of descriptors, asyncio retries every second and would log each
    failure of each retry with a traceback: tens of megabytes a minute under a connection flood."""

    PREFIX = "socket.accept() out of system resource"

    def __init__(self, every: float = LOG_EVERY_SECONDS) -> None:
        super().__init__()
        self._limit = RateLimited(log, every)

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.PREFIX):
            return True
        held = self._limit.allow("accept")
        if held is None:
            return False
        error = record.exc_info[1] if record.exc_info else None
        record.msg = f"{self.PREFIX}: {error or 'error'}; accepting again in a second" + (
            f" ({held} more like it in the last {self._limit.every:.0f} s)" if held else "")
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        return True


class QuietPeerWarnings(logging.Filter):
    """For uvicorn's logger: its one-line warnings about what a peer sent (a malformed request, an
    unsupported upgrade), each at most once a minute, saying how many were held back."""

    MESSAGES = ("Invalid HTTP request received.", "Unsupported upgrade request.",
                "No supported WebSocket library detected")

    def __init__(self, every: float = LOG_EVERY_SECONDS) -> None:
        super().__init__()
        self._limit = RateLimited(log, every)

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        kind = next((message for message in self.MESSAGES if text.startswith(message)), None)
        if kind is None:
            return True
        held = self._limit.allow(kind)
        if held is None:
            return False
        if held:
            record.msg = f"{text} ({held} more like it in the last {self._limit.every:.0f} s)"
        return True
