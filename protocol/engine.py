"""The engine every transport stands on: a server running, its peers, and one request answered.

- `running(server)`: the server's background tasks run (each may finish a first step before
  anything is served) and `resource_updated` works from any thread, until the block ends.
- `Peer`: what the engine remembers of one client: its era, its legacy subscriptions and open
  listens, who it said it was. On stdio a peer is the process's one connection; on HTTP it is a
  legacy session, or a single modern request (that era keeps no state between requests).
- `answer(peer, request, context)`: the response line a request is owed, from the one dispatch table.

A transport is a thin adapter: it turns its bytes into requests, owns the tasks and cancel
scopes they run in, and writes the lines it is handed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from .context import RequestContext
from .dispatch import METHODS, Call
from .eras import CLIENT_CAPABILITIES, PROTOCOL_VERSION, Era, EraSelector, stamp
from .errors import INTERNAL_ERROR, ProtocolError, method_not_found
from .messages import Request, RequestId, encode_error, encode_result, id_key
from .server import BackgroundTask, Server
from .subscriptions import LegacySubscriptions, Listen, Send

log = logging.getLogger("protocol")

CLIENT_INFO = "io.modelcontextprotocol/clientInfo"


@asynccontextmanager
async def running(server: Server) -> AsyncIterator[None]:
    """Run `server`'s background tasks for the duration of the block; cancel them at its end.

    A background task that accepts `task_status` is ready once it reports `started()`; until every
    such task is, subscriptions wait to be acknowledged (other requests are served meanwhile), so
    whatever a task does first (the memory server's first look at its file) comes before any
    subscriber exists, and a subscriber hears of every change made after it subscribed.
    """
    server.subscriptions.bind()
    ready = server.ready = anyio.Event()
    server.wanted = anyio.Event()
    try:
        async with anyio.create_task_group() as tasks:
            async def start_in_turn(waited: list[BackgroundTask]) -> None:
                for task in waited:
                    await tasks.start(task)
                ready.set()

            waited = [task for task in server.background_tasks if server.background_ready.get(task)]
            for task in server.background_tasks:
                if task not in waited:
                    tasks.start_soon(task)
            tasks.start_soon(start_in_turn, waited)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
    finally:
        server.subscriptions.unbind()


class Peer:
    """One client as the engine knows it: era, subscriptions, listens, identity."""

    def __init__(self, server: Server, send: Send, *, transport: str, era: Era | None = None,
                 session_id: str | None = None) -> None:
        self.server = server
        self.transport = transport
        self.session_id = session_id
        self.eras = EraSelector()
        self.eras.era = era
        self.legacy = LegacySubscriptions(send)
        self.listens: dict[tuple[type, RequestId], Listen] = {}
        self.protocol_version: str | None = None  # legacy: as negotiated by initialize
        self.client_info: dict[str, Any] | None = None
        self.client_capabilities: dict[str, Any] | None = None
        self._send = send

    @property
    def legacy_subscriptions(self) -> set[str]:
        return self.legacy.uris

    def subscribe(self, uri: str) -> None:
        # Registered on the first subscription only: a peer that never subscribes (a stateless
        # HTTP request) costs the server's subscriber list nothing.
        self.legacy.uris.add(uri)
        self.server.subscriptions.add(self.legacy)

    def unsubscribe(self, uri: str) -> None:
        self.legacy.uris.discard(uri)

    def close(self) -> None:
        """Stop hearing about changes; every open listen ends with its graceful closure."""
        self.server.subscriptions.discard(self.legacy)
        for listen in list(self.listens.values()):
            listen.closing.set()

    def context(self, request: Request, era: Era | None) -> RequestContext:
        return RequestContext(request.id, request.method, era, *self.identity(request, era),
                              self.transport, self.session_id)

    def identity(self, request: Request, era: Era | None) -> tuple[str | None, dict[str, Any] | None, Any]:
        """The protocol version, client info and client capabilities that `request` is served under."""
        if era is not Era.MODERN:
            return self.protocol_version, self.client_info, self.client_capabilities
        meta = request.params.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        info = meta.get(CLIENT_INFO)
        return meta.get(PROTOCOL_VERSION), info if isinstance(info, dict) else None, meta.get(CLIENT_CAPABILITIES)

    async def listen(self, request_id: RequestId, filters: dict[str, Any]) -> None:
        """Acknowledge a subscription, deliver to it until it is closed, then return."""
        listen = Listen(request_id, filters, self._send)
        key = id_key(request_id)
        # Registered and acknowledged in one step, so no notification can precede the ack.
        # The ack is the listen's success: it picks the era now, not when the stream ends.
        self.eras.served(Era.MODERN)
        self.listens[key] = listen
        self.server.subscriptions.add(listen)
        listen.acknowledge()
        try:
            await listen.closing.wait()
        finally:
            self.server.subscriptions.discard(listen)
            del self.listens[key]


async def answer(peer: Peer, request: Request, context: RequestContext | None = None) -> bytearray:
    """The response line `request` is owed: a result stamped for its era, or its error."""
    return (await respond(peer, request, context))[0]


async def respond(peer: Peer, request: Request,
                  context: RequestContext | None = None) -> tuple[bytearray, int | None]:
    """The response line and, when it is an error, its code (HTTP picks a status from it)."""
    try:
        method = METHODS.get(request.method)
        if method is None:
            raise method_not_found(request.method)
        era = peer.eras.route(request)
        if era is not None and era not in method.eras:
            raise method_not_found(request.method)
        if context is None:
            context = peer.context(request, era)
        else:
            # A context made before the era was known (to be cancellable early) learns what the peer knows.
            context.era = era
            context.protocol_version, context.client_info, context.client_capabilities = peer.identity(request, era)
        reply = await method.handler(peer, Call(request.id, request.method, request.params, era, context))
        peer.eras.served(era)
        return encode_result(request.id, stamp(era, reply.result, reply.cache, peer.server.info)), None
    except ProtocolError as error:
        return encode_error(request.id, error), error.code
    except Exception:
        log.exception("internal error while serving %s", request.method)
        return encode_error(request.id, ProtocolError(INTERNAL_ERROR, "Internal error")), INTERNAL_ERROR
