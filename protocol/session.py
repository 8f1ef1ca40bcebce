"""One connection: framed bytes in, response and notification lines out through `send`.

The session owns a task group in which each request runs in its own cancel scope,
so a slow call never blocks another and `notifications/cancelled` stops exactly the
request it names. It never touches a stream: the stdio runner, or a test, feeds it
bytes and gives it a `send` callable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .dispatch import METHODS, Call
from .eras import SUBSCRIPTION_ID, Era, EraSelector, stamp
from .errors import INTERNAL_ERROR, INVALID_REQUEST, ProtocolError, method_not_found
from .framing import MAX_LINE_BYTES, LineSplitter
from .messages import (
    Invalid,
    Notification,
    Request,
    RequestId,
    classify,
    encode_error,
    encode_notification,
    encode_result,
    id_key,
)
from .server import Server

log = logging.getLogger("protocol")

SHUTDOWN_GRACE_SECONDS = 0.8
"""How long in-flight requests may finish after end of input before they are cancelled."""


class _Listen:
    def __init__(self, request_id: RequestId, filters: dict[str, Any]) -> None:
        self.id = request_id
        self.filters = filters
        self.closing = anyio.Event()


class Session:
    def __init__(self, server: Server, send: Callable[[bytes | bytearray], None], *,
                 max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.server = server
        self.legacy_subscriptions: set[str] = set()
        self._send = send
        self._splitter = LineSplitter(max_line_bytes)
        self._eras = EraSelector()
        self._inflight: dict[tuple[type, RequestId], anyio.CancelScope] = {}
        self._listens: dict[tuple[type, RequestId], _Listen] = {}
        self._tasks: TaskGroup | None = None
        self._idle = anyio.Event()

    async def __aenter__(self) -> Session:
        self._tasks = await anyio.create_task_group().__aenter__()
        self.server.sessions.add(self)
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self.server.sessions.discard(self)
        assert self._tasks is not None
        return await self._tasks.__aexit__(*exc_info)

    @property
    def era(self) -> Era | None:
        return self._eras.era

    def feed(self, data: bytes) -> None:
        """Bytes from the peer; complete lines are served at once (requests in their own tasks)."""
        for frame in self._splitter.feed(data):
            self._receive(classify(frame))

    def feed_eof(self) -> None:
        for frame in self._splitter.close():
            self._receive(classify(frame))

    async def close(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """End every listen with its graceful-closure response, let requests finish, then cancel the rest."""
        for listen in list(self._listens.values()):
            listen.closing.set()
        with anyio.move_on_after(grace):
            while self._inflight:
                self._idle = anyio.Event()
                await self._idle.wait()
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()

    def resource_updated(self, uri: str) -> None:
        if uri in self.legacy_subscriptions:
            self._send(encode_notification("notifications/resources/updated", {"uri": uri}))
        for listen in self._listens.values():
            if uri in listen.filters.get("resourceSubscriptions", ()):
                self._send(encode_notification(
                    "notifications/resources/updated", {"_meta": {SUBSCRIPTION_ID: listen.id}, "uri": uri}))

    async def listen(self, request_id: RequestId, filters: dict[str, Any]) -> None:
        """Acknowledge a subscription, deliver to it until the session closes, then return."""
        listen = _Listen(request_id, filters)
        key = id_key(request_id)
        # Registered and acknowledged in one step, so no notification can precede the ack.
        # The ack is the listen's success: it picks the era now, not when the stream ends.
        self._eras.served(Era.MODERN)
        self._listens[key] = listen
        self._send(encode_notification(
            "notifications/subscriptions/acknowledged",
            {"_meta": {SUBSCRIPTION_ID: request_id}, "notifications": filters}))
        try:
            await listen.closing.wait()
        finally:
            del self._listens[key]

    def _receive(self, message: Any) -> None:
        if isinstance(message, Request):
            self._start(message)
        elif isinstance(message, Notification):
            self._notice(message)
        elif isinstance(message, Invalid):
            log.warning("answered an invalid message: %s", message.error.message)
            self._send(encode_error(message.id, message.error))

    def _start(self, request: Request) -> None:
        key = id_key(request.id)
        if key in self._inflight:
            self._send(encode_error(request.id, ProtocolError(
                INVALID_REQUEST, f"Invalid Request: id {request.id!r} is already in use by a request in flight")))
            return
        scope = anyio.CancelScope()
        self._inflight[key] = scope
        assert self._tasks is not None
        self._tasks.start_soon(self._serve, request, scope)

    async def _serve(self, request: Request, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                line = await self._answer(request)
            if not scope.cancelled_caught:
                self._send(line)
        finally:
            del self._inflight[id_key(request.id)]
            if not self._inflight:
                self._idle.set()

    async def _answer(self, request: Request) -> bytearray:
        try:
            method = METHODS.get(request.method)
            if method is None:
                raise method_not_found(request.method)
            era = self._eras.route(request)
            if era is not None and era not in method.eras:
                raise method_not_found(request.method)
            reply = await method.handler(self, Call(request.id, request.method, request.params, era))
            self._eras.served(era)
            return encode_result(request.id, stamp(era, reply.result, reply.cache, self.server.info))
        except ProtocolError as error:
            return encode_error(request.id, error)
        except Exception:
            log.exception("internal error while serving %s", request.method)
            return encode_error(request.id, ProtocolError(INTERNAL_ERROR, "Internal error"))

    def _notice(self, notification: Notification) -> None:
        if notification.method == "notifications/cancelled":
            request_id: Any = notification.params.get("requestId")
            try:
                scope = self._inflight.get(id_key(request_id))
            except TypeError:  # an unhashable requestId names nothing in flight
                scope = None
            if scope is not None:
                scope.cancel()
