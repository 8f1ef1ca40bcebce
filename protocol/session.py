"""One framed connection (stdio, or a test): framed bytes in, response and notification lines out.

The session owns a task group in which each request runs in its own cancel scope,
so a slow call never blocks another and `notifications/cancelled` stops exactly the
request it names. It never touches a stream: the stdio runner, or a test, feeds it
bytes and gives it a `send` callable; the engine (`peer.Peer`, `engine.answer`)
does the rest.

What runs at once is bounded: `receive` (the runner's way in) waits before starting a
request while `max_requests` are in flight or the output holds more than
`max_pending_bytes` that the peer has not read, so a client that stops reading stops
being read, and memory stays bounded. `feed` (for tests) starts requests at once.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .context import RequestContext
from .engine import answer
from .eras import Era
from .framing import MAX_LINE_BYTES, LineSplitter
from .inflight import InflightRequests
from .messages import Invalid, Notification, Request, classify, encode_error
from .peer import Peer
from .server import Server
from .subscriptions import Channel

log = logging.getLogger("protocol")

SHUTDOWN_GRACE_SECONDS = 0.8
"""How long in-flight requests may finish after end of input before they are cancelled."""

MAX_REQUESTS = 8
"""Requests of one connection that run at once (open listens are not counted: they only wait)."""

MAX_PENDING_BYTES = 8 * 1024 * 1024
"""Output the peer has not read yet beyond which no further request is started."""


class Session:
    def __init__(self, server: Server, send: Callable[[bytes | bytearray], None], *,
                 max_line_bytes: int = MAX_LINE_BYTES, max_requests: int = MAX_REQUESTS,
                 max_pending_bytes: int = MAX_PENDING_BYTES,
                 pending_bytes: Callable[[], int] = lambda: 0,
                 drained: Callable[[int], Awaitable[None]] | None = None,
                 transport: str = "stdio") -> None:
        self.server = server
        self._send = send
        self._splitter = LineSplitter(max_line_bytes)
        self.peer = Peer(server, send, transport=transport)
        self._inflight = InflightRequests()
        self._working = 0  # in flight and not a listen
        self._max_requests = max_requests
        self._max_pending = max_pending_bytes
        self._pending_bytes = pending_bytes
        self._drained = drained
        self._capacity = anyio.Event()
        self._tasks: TaskGroup | None = None
        self._idle = anyio.Event()
        # Requests wait here for a worker: a task that serves one request after another, since
        # waking a task costs less than starting one (docs/benchmarks.md#the-engines-own-costs).
        self._queued: deque[tuple[Request, anyio.CancelScope, RequestContext]] = deque()
        self._idle_workers: list[anyio.Event] = []

    async def __aenter__(self) -> Session:
        self._tasks = await anyio.create_task_group().__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self.peer.close()
        assert self._tasks is not None
        return await self._tasks.__aexit__(*exc_info)

    @property
    def era(self) -> Era | None:
        return self.peer.eras.era

    def feed(self, data: bytes) -> None:
        """Bytes from the peer; complete lines are served at once (requests in their own tasks)."""
        for frame in self._splitter.feed(data):
            self._receive(classify(frame))

    async def receive(self, data: bytes) -> None:
        """Like `feed`, but each request waits for room first (see the module's note on bounds)."""
        for frame in self._splitter.feed(data):
            message = classify(frame)
            if isinstance(message, Request) and message.method != "subscriptions/listen":
                await self._room()
            self._receive(message)

    def feed_eof(self) -> None:
        for frame in self._splitter.close():
            self._receive(classify(frame))

    async def close(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """End every listen with its graceful-closure response, let requests finish, then cancel the rest."""
        for listen in list(self.peer.listens.values()):
            listen.closing.set()
        with anyio.move_on_after(grace):
            while self._inflight:
                self._idle = anyio.Event()
                await self._idle.wait()
        for context in self._inflight.contexts():
            context.cancel()
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()

    def resource_updated(self, uri: str) -> None:
        """This connection's subscribers only (the server's `resource_updated` reaches every connection)."""
        channels: list[Channel] = [self.peer.legacy, *self.peer.listens.values()]
        for channel in channels:
            if channel.wants(uri):
                channel.deliver(uri)

    async def _room(self) -> None:
        while True:
            if self._working >= self._max_requests:
                self._capacity = anyio.Event()
                await self._capacity.wait()
            elif self._pending_bytes() > self._max_pending and self._drained is not None:
                await self._drained(self._max_pending)
            else:
                return

    def _receive(self, message: Any) -> None:
        if isinstance(message, Request):
            self._start(message)
        elif isinstance(message, Notification):
            self._inflight.notice(message)
        elif isinstance(message, Invalid):
            log.warning("answered an invalid message: %s", message.error.message)
            self._send(encode_error(message.id, message.error))

    def _start(self, request: Request) -> None:
        in_use = self._inflight.in_use(request.id)
        if in_use is not None:
            self._send(encode_error(request.id, in_use))
            return
        scope = anyio.CancelScope()
        context = self.peer.context(request, None)
        self._inflight.start(request.id, scope, context)
        assert self._tasks is not None
        if request.method == "subscriptions/listen":  # open until the client ends it: a task of its own
            self._tasks.start_soon(self._serve, request, scope, context, False)
            return
        self._working += 1
        self._queued.append((request, scope, context))
        if self._idle_workers:
            self._idle_workers.pop().set()
        else:
            self._tasks.start_soon(self._work, name="request worker")

    async def _work(self) -> None:
        """Serves queued requests, each in its own cancel scope; idles while there are none, unless
        enough workers idle already (`max_requests`: what can run at once when bounded)."""
        while True:
            while not self._queued:
                if len(self._idle_workers) >= self._max_requests:
                    return
                woken = anyio.Event()
                self._idle_workers.append(woken)
                await woken.wait()
            await self._serve(*self._queued.popleft(), True)

    async def _serve(self, request: Request, scope: anyio.CancelScope, context: RequestContext, counted: bool) -> None:
        try:
            with scope:
                line = await answer(self.peer, request, context)
            if not scope.cancelled_caught:
                self._send(line)
        finally:
            self._inflight.finish(request.id)
            self._working -= counted
            self._capacity.set()
            if not self._inflight:
                self._idle.set()
