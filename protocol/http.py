"""Streamable HTTP for both eras on one endpoint, as a plain ASGI application made from the engine.

- 2025-11-25 and older: `initialize` (without a session) creates a session named by the
  `Mcp-Session-Id` response header; later POSTs carry it and are answered as JSON; the session's
  GET stream carries its `resources/subscribe` updates; DELETE ends it; an unknown or ended
  session is 404.
- 2026-07-28: every POST stands alone (no session, no GET stream). The request metadata headers
  (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) must agree with the body (400, -32020
  otherwise); `subscriptions/listen` is answered with a long-lived SSE stream that carries the
  acknowledgement, the updates and keep-alive comments, and ends with the graceful closure.

Requests go through the engine (`engine.respond`) exactly as on stdio. A client that closes its
connection cancels its request. Each SSE stream holds at most one pending copy of each line
(updates of one resource coalesce while a reader is slow), and the ASGI server's flow control
holds back a slow reader's own response only.

The app is a value: mount it in Starlette or FastAPI under any path (it honours `root_path`),
or run it with `run()` (uvicorn, imported only then). Its background tasks run while it gets
ASGI lifespan events, or while a host enters `app.lifespan()`.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
import msgspec

from .context import RequestContext
from .engine import respond
from .eras import LEGACY_VERSIONS, MODERN_VERSIONS, PROTOCOL_VERSION, Era
from .errors import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    ProtocolError,
)
from .framing import MAX_LINE_BYTES, Line
from .messages import Blank, Invalid, Notification, Request, RequestId, Response, classify, encode_error, id_key
from .peer import Peer
from .runtime import running
from .server import Server

log = logging.getLogger("protocol.http")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEFAULT_PATH = "/mcp"
KEEPALIVE_SECONDS = 15.0
MAX_SESSIONS = 1000
"""Legacy sessions kept at once; beyond it, the one unused for longest is ended (its client re-initializes)."""
SESSION_IDLE_SECONDS = 3600.0
"""A legacy session with no request in flight and no GET stream open for this long is ended: its
next request gets 404, and its client initializes a new one."""
MAX_CONCURRENT_REQUESTS = 64
"""Requests answered at once across all clients (listens and GET streams not counted); the rest wait their turn."""
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
NAME_PARAMS = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
STATUS_OF_ERROR = {PARSE_ERROR: 400, INVALID_REQUEST: 400, HEADER_MISMATCH: 400,
                   UNSUPPORTED_PROTOCOL_VERSION: 400, METHOD_NOT_FOUND: 404}
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
               (b"x-accel-buffering", b"no")]
JSON_HEADERS = [(b"content-type", b"application/json")]
_decoder = msgspec.json.Decoder()


class _Outbox:
    """Lines waiting for one SSE stream. A line already waiting is not queued twice: repeated
    updates of one resource coalesce, so a slow reader costs at most one copy of each line."""

    def __init__(self) -> None:
        self._lines: deque[bytes] = deque()
        self._waiting: set[bytes] = set()
        self._ready = anyio.Event()
        self.closed = False

    def put(self, line: bytes | bytearray) -> None:
        data = bytes(line)
        if self.closed or data in self._waiting:
            return
        self._lines.append(data)
        self._waiting.add(data)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def next(self, keepalive: float) -> bytes | None:
        """The next line; b"" when `keepalive` passed without one; None once closed and empty."""
        if not self._lines and not self.closed:
            self._ready = anyio.Event()
            with anyio.move_on_after(keepalive):
                await self._ready.wait()
        if self._lines:
            line = self._lines.popleft()
            self._waiting.discard(line)
            return line
        return None if self.closed else b""


class _Slots:
    """At most `limit` requests answered at once; the others wait in the order they came.

    anyio's CapacityLimiter passes through the event loop even when a slot is free (a checkpoint;
    a tenth of the event loop's time at 32 clients in a profile); a free slot here is a counter.
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


class _LegacySession:
    def __init__(self, server: Server, session_id: str) -> None:
        self.id = session_id
        self.outbox = _Outbox()  # what the GET stream will carry; kept while no GET is open
        self.peer = Peer(server, self.outbox.put, transport="http", session_id=session_id)
        self.inflight: dict[tuple[type, RequestId], tuple[anyio.CancelScope, RequestContext]] = {}
        self.streaming = False
        self.last_used = time.monotonic()

    def idle_for(self, now: float) -> float:
        """Seconds since its last request or GET stream ended; 0 while one is under way."""
        return 0.0 if self.streaming or self.inflight else now - self.last_used

    def end(self) -> None:
        self.peer.close()
        self.outbox.close()
        for scope, context in list(self.inflight.values()):
            context.cancel()
            scope.cancel()


class _Reject(Exception):
    """Answer the HTTP request with this status and JSON-RPC error instead of serving it."""

    def __init__(self, status: int, error: ProtocolError, request_id: RequestId | None = None,
                 headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(error.message)
        self.status, self.error, self.request_id, self.headers = status, error, request_id, list(headers)


class _Gone(Exception):
    """The client disconnected before its request was read."""


class StreamableHTTP:
    """The ASGI application. Build it with `asgi_app(server, ...)`."""

    def __init__(self, server: Server, *, path: str = DEFAULT_PATH, token: str | None = None,
                 allowed_origins: Iterable[str] = (), max_body_bytes: int = MAX_LINE_BYTES,
                 keepalive_seconds: float = KEEPALIVE_SECONDS, max_sessions: int = MAX_SESSIONS,
                 max_concurrent_requests: int = MAX_CONCURRENT_REQUESTS,
                 session_idle_seconds: float = SESSION_IDLE_SECONDS) -> None:
        self.server = server
        self.path = "/" + path.strip("/") if path.strip("/") else ""
        self._token = token.encode() if token else None
        self._origins = {origin.rstrip("/").lower() for origin in allowed_origins}
        self.max_body_bytes = max_body_bytes
        self.keepalive_seconds = keepalive_seconds
        self.max_sessions = max_sessions
        self.session_idle_seconds = session_idle_seconds
        self._sessions: dict[str, _LegacySession] = {}
        self._listening: set[Peer] = set()  # modern peers with an open listen stream
        self._slots = _Slots(max_concurrent_requests)
        self.closing = False

    # -- lifetime -------------------------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the server's background tasks; at the end, close every stream gracefully.

        A host application that mounts this app enters it from its own lifespan."""
        self.closing = False
        async with running(self.server):
            try:
                yield
            finally:
                self.close_streams()

    def close_streams(self) -> None:
        """Shutdown: every open listen gets its graceful closure, every GET stream ends, sessions end."""
        self.closing = True
        for peer in list(self._listening):
            peer.close()
        for session in list(self._sessions.values()):
            session.end()
        self._sessions.clear()

    async def _lifespan_events(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        try:
            async with self.lifespan():
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as error:
            log.exception("the MCP app failed")
            await send({"type": "lifespan.startup.failed", "message": str(error)})
            return
        await send({"type": "lifespan.shutdown.complete"})

    # -- ASGI -----------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan_events(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets: not ours; the ASGI server closes the connection
        try:
            await self._http(scope, receive, send)
        except _Reject as reject:
            await _json(send, reject.status, encode_error(reject.request_id, reject.error), reject.headers)
        except _Gone:
            pass

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _relative_path(scope) != (self.path or "/"):
            await _plain(send, 404, b"Not Found")
            return
        headers = _headers(scope)
        self._check_origin(headers)
        self._check_token(headers)
        method = scope["method"]
        if method == "POST":
            await self._post(scope, headers, receive, send)
        elif method == "GET":
            await self._get(headers, receive, send)
        elif method == "DELETE":
            self._session(headers, required=True)
            session = self._sessions.pop(headers["mcp-session-id"])
            session.end()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
        else:
            await _plain(send, 405, b"Method Not Allowed", [(b"allow", b"GET, POST, DELETE")])

    # -- security -------------------------------------------------------------------------------------

    def _check_origin(self, headers: dict[str, str]) -> None:
        origin = headers.get("origin")
        if origin is None or origin.rstrip("/").lower() in self._origins:
            return
        try:
            host = urlsplit(origin).hostname
        except ValueError:
            host = None
        if host not in LOOPBACK_HOSTS:
            raise _Reject(403, ProtocolError(INVALID_REQUEST, f"Forbidden: origin {origin!r} is not allowed"))

    def _check_token(self, headers: dict[str, str]) -> None:
        if self._token is None:
            return
        scheme, _, given = headers.get("authorization", "").partition(" ")
        # compare_digest on equal-typed bytes: the time taken says nothing about the token
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self._token):
            raise _Reject(401, ProtocolError(INVALID_REQUEST, "Unauthorized: a valid bearer token is required"),
                          headers=[(b"www-authenticate", b'Bearer realm="mcp"')])

    # -- sessions -------------------------------------------------------------------------------------

    def _session(self, headers: dict[str, str], *, required: bool) -> _LegacySession | None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            if required:
                raise _Reject(405, ProtocolError(
                    INVALID_REQUEST, "Method Not Allowed without an Mcp-Session-Id: this endpoint's GET stream "
                    "and DELETE belong to 2025-era sessions"))
            return None
        session = self._sessions.get(session_id)
        now = time.monotonic()
        if session is not None and session.idle_for(now) >= self.session_idle_seconds:
            self._end_idle(session, now)
            session = None
        if session is None:
            raise _Reject(404, ProtocolError(INVALID_REQUEST, "Session not found: it ended or never existed; "
                                             "send initialize to start a new one"))
        session.last_used = now
        return session

    def _end_idle(self, session: _LegacySession, now: float) -> None:
        log.info("ending session %s, idle for %.0f s", session.id, session.idle_for(now))
        self._sessions.pop(session.id).end()

    def _new_session(self) -> _LegacySession:
        # Sessions expire when next named, and here: so a server whose clients come and go keeps
        # no more of them than were used within the idle time, with no task watching the clock.
        now = time.monotonic()
        for expired in [s for s in self._sessions.values() if s.idle_for(now) >= self.session_idle_seconds]:
            self._end_idle(expired, now)
        if len(self._sessions) >= self.max_sessions:
            idle = [s for s in self._sessions.values() if not s.streaming and not s.inflight] or list(self._sessions.values())
            oldest = min(idle, key=lambda s: s.last_used)
            log.info("ending session %s, unused for the longest, to make room", oldest.id)
            self._sessions.pop(oldest.id).end()
        session = _LegacySession(self.server, secrets.token_urlsafe(24))
        self._sessions[session.id] = session
        return session

    # -- POST -----------------------------------------------------------------------------------------

    async def _post(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> None:
        if self.closing:
            await _plain(send, 503, b"Shutting down")
            return
        content_type = headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise _Reject(415, ProtocolError(INVALID_REQUEST, "Unsupported Media Type: send application/json"))
        body = await self._body(headers, receive)
        message = classify(Line(body))
        if isinstance(message, Blank):
            raise _Reject(400, ProtocolError(INVALID_REQUEST, "Invalid Request: the body is empty"))
        if isinstance(message, Invalid):
            raise _Reject(400, message.error, message.id)
        session = self._session(headers, required=False) if not _modern_headers(headers) else \
            self._sessions.get(headers.get("mcp-session-id", ""))
        if isinstance(message, Notification | Response):
            if session is not None and isinstance(message, Notification):
                _notice(session, message)
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        assert isinstance(message, Request)
        if session is not None:
            self._check_legacy_version(headers, message)
            await self._answer(session.peer, message, receive, send, session=session, sse=_wants_sse(headers))
        elif message.method == "initialize":
            session = self._new_session()
            await self._answer(session.peer, message, receive, send, session=session, created=True,
                               sse=_wants_sse(headers))
        else:
            modern = _carries_modern_meta(message)
            if modern:
                _check_request_headers(headers, message)
            if message.method == "subscriptions/listen":
                await self._listen(message, receive, send)
            else:
                # A modern request is served as on a stdio connection already in the modern era.
                peer = Peer(self.server, _nowhere, transport="http", era=Era.MODERN if modern else None)
                try:
                    await self._answer(peer, message, receive, send, strict=not modern, sse=_wants_sse(headers))
                finally:
                    peer.close()

    async def _body(self, headers: dict[str, str], receive: Receive) -> bytes:
        too_big = _Reject(413, ProtocolError(
            INVALID_REQUEST, f"Invalid Request: the body exceeds the limit of {self.max_body_bytes} bytes"))
        try:
            declared = int(headers.get("content-length", "0"))
        except ValueError:
            raise _Reject(400, ProtocolError(INVALID_REQUEST, "Invalid Request: bad Content-Length")) from None
        if declared > self.max_body_bytes:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise too_big
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _check_legacy_version(self, headers: dict[str, str], request: Request) -> None:
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in LEGACY_VERSIONS:
            raise _Reject(400, ProtocolError(
                INVALID_REQUEST, f"Bad Request: MCP-Protocol-Version {version!r} is not a version of this session "
                f"(supported: {', '.join(LEGACY_VERSIONS)})"), request.id)

    async def _answer(self, peer: Peer, request: Request, receive: Receive, send: Send, *,
                      session: _LegacySession | None = None, created: bool = False, strict: bool = False,
                      sse: bool = False) -> None:
        """Serve one request while watching for the client going away; answer it as JSON, or as a
        one-event SSE stream to a client that accepts only that."""
        context = peer.context(request, None)
        key = id_key(request.id)
        if session is not None and key in session.inflight:
            raise _Reject(400, ProtocolError(
                INVALID_REQUEST, f"Invalid Request: id {request.id!r} is already in use by a request in flight"),
                request.id)
        outcome: tuple[bytearray, int | None] | None = None
        async with anyio.create_task_group() as tasks:
            if session is not None:
                session.inflight[key] = (tasks.cancel_scope, context)
            try:
                tasks.start_soon(_watch_disconnect, receive, tasks.cancel_scope, context)
                async with self._slots:
                    outcome = await respond(peer, request, context)
                tasks.cancel_scope.cancel()
            finally:
                if session is not None:
                    session.inflight.pop(key, None)
                    session.last_used = time.monotonic()  # idle from the end of its last request
        if outcome is None:
            if created and session is not None:
                self._sessions.pop(session.id, None)
            if not context.gone:
                # Cancelled by notifications/cancelled or shutdown while the client still waits:
                # it is owed no JSON-RPC response, so the exchange ends with an empty 202.
                await send({"type": "http.response.start", "status": 202, "headers": []})
                await send({"type": "http.response.body", "body": b""})
            return
        line, code = outcome
        extra: list[tuple[bytes, bytes]] = []
        if created and session is not None:
            if code is None:
                extra.append((b"mcp-session-id", session.id.encode()))
            else:
                self._sessions.pop(session.id, None)
        if code is None:
            status = 200
        elif strict:
            status = 400  # neither a session nor a modern request: the client must initialize first
        elif session is not None:
            status = 400 if code in (PARSE_ERROR, INVALID_REQUEST) else 200
        else:
            status = STATUS_OF_ERROR.get(code, 200)
        if sse and status == 200:
            await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *extra]})
            await _event(send, bytes(line))
            await _end(send)
        else:
            await _json(send, status, line, extra)

    async def _listen(self, request: Request, receive: Receive, send: Send) -> None:
        """A modern listen: an SSE stream from the acknowledgement to the graceful closure."""
        outbox = _Outbox()
        peer = Peer(self.server, outbox.put, transport="http", era=Era.MODERN if _carries_modern_meta(request) else None)
        context = peer.context(request, None)
        finished: list[tuple[bytearray, int | None]] = []
        streaming = False
        self._listening.add(peer)
        try:
            async with anyio.create_task_group() as tasks:
                async def serve() -> None:
                    finished.append(await respond(peer, request, context))
                    if finished[0][1] is None:
                        outbox.put(finished[0][0])  # the graceful closure ends the stream
                    outbox.close()

                tasks.start_soon(serve)
                tasks.start_soon(_watch_disconnect, receive, tasks.cancel_scope, context)
                first = await outbox.next(self.keepalive_seconds * 4)
                if first is None and finished:  # refused before any acknowledgement: a plain JSON error
                    line, code = finished[0]
                    strict = peer.eras.era is None  # neither modern nor in a session: initialize first
                    await _json(send, 400 if strict else STATUS_OF_ERROR.get(code or 0, 200), line)
                    tasks.cancel_scope.cancel()
                    return
                streaming = True
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                if first:
                    await _event(send, first)
                await self._stream(outbox, send)
                tasks.cancel_scope.cancel()
        finally:
            self._listening.discard(peer)
            peer.close()
            if streaming:
                with anyio.CancelScope(shield=True):
                    await _end(send)

    async def _stream(self, outbox: _Outbox, send: Send) -> None:
        while True:
            line = await outbox.next(self.keepalive_seconds)
            if line is None:
                return
            if line:
                await _event(send, line)
            else:
                await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})

    # -- GET ------------------------------------------------------------------------------------------

    async def _get(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        session = self._session(headers, required=True)
        assert session is not None
        if self.closing:
            await _plain(send, 503, b"Shutting down")
            return
        if session.streaming:
            raise _Reject(409, ProtocolError(INVALID_REQUEST, "Conflict: this session's GET stream is already open"))
        session.streaming = True
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_watch_disconnect, receive, tasks.cancel_scope, None)
                await self._stream(session.outbox, send)
                tasks.cancel_scope.cancel()
        finally:
            session.streaming = False
            session.last_used = time.monotonic()
            with anyio.CancelScope(shield=True):
                await _end(send)


def asgi_app(server: Server, **options: Any) -> StreamableHTTP:
    """`server` over Streamable HTTP, as an ASGI app (options: see `StreamableHTTP`)."""
    return StreamableHTTP(server, **options)


# -- pure helpers -------------------------------------------------------------------------------------

def _relative_path(scope: Scope) -> str:
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):]
    return path.rstrip("/") or "/"


def _headers(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        headers[name.decode("latin-1").lower()] = value.decode("latin-1")
    return headers


def _wants_sse(headers: dict[str, str]) -> bool:
    """Whether the client's Accept names text/event-stream but not JSON (nor any type)."""
    accept = {part.split(";")[0].strip().lower() for part in headers.get("accept", "").split(",")}
    return "text/event-stream" in accept and not accept & {"application/json", "application/*", "*/*"}


def _modern_headers(headers: dict[str, str]) -> bool:
    return headers.get("mcp-protocol-version") in MODERN_VERSIONS


def _carries_modern_meta(request: Request) -> bool:
    meta = request.params.get("_meta")
    return isinstance(meta, dict) and PROTOCOL_VERSION in meta


def _check_request_headers(headers: dict[str, str], request: Request) -> None:
    """The 2026-07-28 request metadata headers must say what the body says."""
    def mismatch(why: str) -> _Reject:
        return _Reject(400, ProtocolError(HEADER_MISMATCH, f"Header mismatch: {why}"), request.id)

    version = request.params["_meta"][PROTOCOL_VERSION]
    sent = headers.get("mcp-protocol-version")
    if sent is None:
        raise mismatch("the MCP-Protocol-Version header is missing")
    if sent != version:
        raise mismatch(f"MCP-Protocol-Version header value {sent!r} does not match body value {version!r}")
    method = headers.get("mcp-method")
    if method is None:
        raise mismatch("the Mcp-Method header is missing")
    if method != request.method:
        raise mismatch(f"Mcp-Method header value {method!r} does not match body value {request.method!r}")
    key = NAME_PARAMS.get(request.method)
    if key is not None and isinstance(request.params.get(key), str):
        name = headers.get("mcp-name")
        if name is None:
            raise mismatch("the Mcp-Name header is missing")
        decoded = decode_header_value(name)
        if decoded != request.params[key]:
            raise mismatch(f"Mcp-Name header value {name!r} does not match body value {request.params[key]!r}")


def decode_header_value(value: str) -> str | None:
    """A header value, with the `=?base64?...?=` sentinel decoded (None when it is malformed)."""
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


def _notice(session: _LegacySession, notification: Notification) -> None:
    if notification.method != "notifications/cancelled":
        return
    request_id: Any = notification.params.get("requestId")
    try:
        entry = session.inflight.get(id_key(request_id))
    except TypeError:
        entry = None
    if entry is not None:
        scope, context = entry
        context.cancel()
        scope.cancel()


def _nowhere(line: bytes | bytearray) -> None:
    """A modern request outside a listen has no stream for notifications."""


async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope, context: RequestContext | None) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            if context is not None:
                context.gone = True
                context.cancel()
            scope.cancel()
            return


async def _json(send: Send, status: int, line: bytes | bytearray,
                headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    length = [(b"content-length", str(len(line)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*JSON_HEADERS, *length, *headers]})
    await send({"type": "http.response.body", "body": bytes(line)})


async def _plain(send: Send, status: int, text: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), *headers]})
    await send({"type": "http.response.body", "body": text})


async def _event(send: Send, line: bytes) -> None:
    await send({"type": "http.response.body", "body": b"event: message\ndata: " + line.rstrip(b"\n") + b"\n\n",
                "more_body": True})


async def _end(send: Send) -> None:
    try:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except Exception:  # the connection is already gone
        pass



# -- running it -----------------------------------------------------------------------------------------

SHUTDOWN_GRACE_SECONDS = 2
"""After SIGTERM or SIGINT: how long requests in flight may finish before they are cancelled."""


def run(app: StreamableHTTP, host: str, port: int) -> None:
    """Serve `app` with uvicorn until SIGTERM or SIGINT; every listen then gets its graceful closure.

    uvicorn is the `http` extra: it is imported here, so the stdio server never needs it. Logging
    is the caller's to configure (the command line does it; a library never should)."""
    try:
        import uvicorn
    except ImportError:
        raise SystemExit("Streamable HTTP needs the http extra (uvicorn): pip install 'kg-memory-mcp[http]'") from None
    import asyncio
    import signal

    loop: list[asyncio.AbstractEventLoop] = []

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # uvicorn waits for open connections before its lifespan ends, so the streams are
            # told first: each listen answers its closure and each GET stream ends.
            if loop and not app.closing:
                loop[0].call_soon_threadsafe(app.close_streams)
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=host, port=port, lifespan="on", ws="none", access_log=False,
                            server_header=False, timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
                            log_config=None)
    server = Server(config)

    async def serve() -> None:
        loop.append(asyncio.get_running_loop())
        await server.serve()

    # uvicorn re-raises the signal it caught once it has stopped, to the handler found before it
    # started: a handler that does nothing makes that a clean exit 0, as on stdio.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    asyncio.run(serve())
