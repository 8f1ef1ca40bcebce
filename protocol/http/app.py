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
import hashlib
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ..context import RequestContext
from ..engine import respond
from ..eras import LEGACY_VERSIONS, MODERN_VERSIONS, PROTOCOL_VERSION, Era
from ..errors import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    ProtocolError,
)
from ..framing import MAX_LINE_BYTES, Line
from ..inflight import InflightRequests
from ..messages import Blank, Invalid, Notification, Request, RequestId, Response, classify, encode_error
from ..peer import Peer
from ..runtime import running
from ..server import Server
from .limits import (
    BODY_IDLE_SECONDS,
    MAX_BODY_BYTES_IN_FLIGHT,
    MAX_CONCURRENT_REQUESTS,
    MAX_CONCURRENT_WRITES,
    MAX_STREAMS,
    BodyBudget,
    Slots,
)
from .oauth import AUTHORIZATION, Grant, OAuthGuard, ProtectedResource, Refusal, ScopeRule
from .security import (
    cors_headers,
    host_allowed,
    normal_origin,
    origin_allowed,
    origin_set,
    preflight_headers,
    token_matches,
)

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
NAME_PARAMS = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
STATUS_OF_ERROR = {PARSE_ERROR: 400, INVALID_REQUEST: 400, HEADER_MISMATCH: 400,
                   UNSUPPORTED_PROTOCOL_VERSION: 400, METHOD_NOT_FOUND: 404}
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
               (b"x-accel-buffering", b"no")]
JSON_HEADERS = [(b"content-type", b"application/json")]


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


class _LegacySession:
    def __init__(self, server: Server, session_id: str) -> None:
        self.id = session_id
        self.outbox = _Outbox()  # what the GET stream will carry; kept while no GET is open
        self.peer = Peer(server, self.outbox.put, transport="http", session_id=session_id)
        self.inflight = InflightRequests()
        self.streaming = False
        self.last_used = time.monotonic()
        self.subject: str | None = None  # under OAuth, who opened it: no other token may use it

    def idle_for(self, now: float) -> float:
        """Seconds since its last request or GET stream ended; 0 while one is under way."""
        return 0.0 if self.streaming or self.inflight else now - self.last_used

    def end(self) -> None:
        self.peer.close()
        self.outbox.close()
        self.inflight.cancel_all()


class _Reject(Exception):
    """Answer the HTTP request with this status and JSON-RPC error instead of serving it."""

    def __init__(self, status: int, error: ProtocolError, request_id: RequestId | None = None,
                 headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(error.message)
        self.status, self.error, self.request_id, self.headers = status, error, request_id, list(headers)


class _Gone(Exception):
    """The client disconnected before its request was read."""


class StreamableHTTP:
    """The ASGI application. Build it with `asgi_app(server, ...)`; the limits are those of `limits`.

    `allowed_hosts`: the Host names answered (None: any; `run` sets the loopback names for a
    server bound to a loopback address). `allowed_origins`: the browser origins given CORS.

    `oauth`: the endpoint as an OAuth resource server instead of the shared `token` (see `oauth`);
    `required_scope` then says which scope each JSON-RPC request needs (None: any valid token)."""

    def __init__(self, server: Server, *, path: str = DEFAULT_PATH, token: str | None = None,
                 allowed_origins: Iterable[str] = (), allowed_hosts: Iterable[str] | None = None,
                 max_body_bytes: int = MAX_LINE_BYTES,
                 keepalive_seconds: float = KEEPALIVE_SECONDS, max_sessions: int = MAX_SESSIONS,
                 max_concurrent_requests: int = MAX_CONCURRENT_REQUESTS,
                 max_concurrent_writes: int = MAX_CONCURRENT_WRITES, max_streams: int = MAX_STREAMS,
                 max_body_bytes_in_flight: int = MAX_BODY_BYTES_IN_FLIGHT,
                 body_idle_seconds: float = BODY_IDLE_SECONDS,
                 session_idle_seconds: float = SESSION_IDLE_SECONDS,
                 oauth: ProtectedResource | None = None, required_scope: ScopeRule | None = None) -> None:
        if oauth is not None and token:
            raise ValueError("a shared token and OAuth exclude each other: choose one")
        self.server = server
        self.path = "/" + path.strip("/") if path.strip("/") else ""
        self._token = token.encode() if token else None
        self._origins = origin_set(allowed_origins)
        self.allowed_hosts = None if allowed_hosts is None else frozenset(h.lower().strip("[]") for h in allowed_hosts)
        self.max_body_bytes = max_body_bytes
        self.keepalive_seconds = keepalive_seconds
        self.max_sessions = max_sessions
        self.max_streams = max_streams
        self.body_idle_seconds = body_idle_seconds
        self.session_idle_seconds = session_idle_seconds
        self._sessions: dict[str, _LegacySession] = {}
        self._listening: set[Peer] = set()  # modern peers with an open listen stream
        self._streams = 0  # SSE streams open: listens and GET streams
        self._slots = Slots(max_concurrent_requests)
        self._write_slots = Slots(max_concurrent_writes)
        self._bodies = BodyBudget(max_body_bytes_in_flight)
        self.closing = False
        self.oauth = oauth
        self.required_scope = required_scope
        self._entry = OAuthGuard(self._guarded, oauth, path=self.path or "/") if oauth is not None else self._guarded

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
        await self._entry(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        origin = headers.get("origin")
        if origin is not None and normal_origin(origin) in self._origins:
            send = _adding(send, cors_headers(origin))  # errors too: the page can read why
        try:
            await self._http(scope, headers, receive, send)
        except _Reject as reject:
            await _json(send, reject.status, encode_error(reject.request_id, reject.error), reject.headers)
        except _Gone:
            pass

    async def _http(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> None:
        if _relative_path(scope) != (self.path or "/"):
            await _plain(send, 404, b"Not Found")
            return
        self._check_host(headers)
        self._check_origin(headers)
        method = scope["method"]
        if method == "OPTIONS":
            await self._options(headers, send)
            return
        self._check_token(scope, headers)
        if method == "POST":
            await self._post(scope, headers, receive, send)
        elif method == "GET":
            await self._get(scope, headers, receive, send)
        elif method == "DELETE":
            self._session(scope, headers, required=True)
            session = self._sessions.pop(headers["mcp-session-id"])
            session.end()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
        else:
            await _plain(send, 405, b"Method Not Allowed", [(b"allow", b"GET, POST, DELETE, OPTIONS")])

    # -- security (see `security`) --------------------------------------------------------------------

    def _check_host(self, headers: dict[str, str]) -> None:
        host = headers.get("host")
        if not host_allowed(host, self.allowed_hosts):
            raise _Reject(421, ProtocolError(
                INVALID_REQUEST, f"Misdirected Request: this server does not answer for the host {host!r}"))

    def _check_origin(self, headers: dict[str, str]) -> None:
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(origin, self._origins):
            raise _Reject(403, ProtocolError(INVALID_REQUEST, f"Forbidden: origin {origin!r} is not allowed"))

    def _check_token(self, scope: Scope, headers: dict[str, str]) -> None:
        if self.oauth is not None:
            outcome = scope.get(AUTHORIZATION)
            if not isinstance(outcome, Grant):
                refusal = outcome if isinstance(outcome, Refusal) else self.oauth.unauthorized(None)
                raise _Reject(refusal.status, ProtocolError(INVALID_REQUEST, refusal.message), headers=refusal.headers)
            return
        if self._token is not None and not token_matches(headers.get("authorization"), self._token):
            raise _Reject(401, ProtocolError(INVALID_REQUEST, "Unauthorized: a valid bearer token is required"),
                          headers=[(b"www-authenticate", b'Bearer realm="mcp"')])

    async def _options(self, headers: dict[str, str], send: Send) -> None:
        """A CORS preflight (answered without the token, which a preflight never carries), or a
        plain OPTIONS: the methods this endpoint serves."""
        origin = headers.get("origin")
        extra = [(b"allow", b"GET, POST, DELETE, OPTIONS")]
        if origin is not None and normal_origin(origin) in self._origins:
            extra += preflight_headers(headers.get("access-control-request-headers"))
        await send({"type": "http.response.start", "status": 204, "headers": extra})
        await send({"type": "http.response.body", "body": b""})

    # -- sessions -------------------------------------------------------------------------------------

    def _check_scope(self, scope: Scope, request: Request) -> None:
        """Under OAuth, a request the token's scopes do not cover is refused (403) before anything is done."""
        grant = scope.get(AUTHORIZATION)
        if self.oauth is None or self.required_scope is None or not isinstance(grant, Grant):
            return
        needed = self.required_scope(request.method, request.params)
        if not grant.covers(needed):
            assert needed is not None
            refusal = self.oauth.insufficient(needed)
            raise _Reject(refusal.status, ProtocolError(INVALID_REQUEST, refusal.message), request.id, refusal.headers)

    def _session(self, scope: Scope, headers: dict[str, str], *, required: bool) -> _LegacySession | None:
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
        if session is None or session.subject != _subject(scope):
            # Someone else's session is not found either: its id alone must not hand it over.
            raise _Reject(404, ProtocolError(INVALID_REQUEST, "Session not found: it ended or never existed; "
                                             "send initialize to start a new one"))
        session.last_used = now
        return session

    def _end_idle(self, session: _LegacySession, now: float) -> None:
        log.info("ending session %s, idle for %.0f s", session.id, session.idle_for(now))
        self._sessions.pop(session.id).end()

    def _new_session(self, scope: Scope) -> _LegacySession:
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
        session.subject = _subject(scope)
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
        held = [len(body)]  # counted in the body budget until answered (a listen gives it up at once)
        try:
            await self._serve_post(scope, headers, body, held, receive, send)
        finally:
            self._bodies.give(held[0])

    async def _serve_post(self, scope: Scope, headers: dict[str, str], body: bytes, held: list[int],
                          receive: Receive, send: Send) -> None:
        message = classify(Line(body))
        del body
        if isinstance(message, Blank):
            raise _Reject(400, ProtocolError(INVALID_REQUEST, "Invalid Request: the body is empty"))
        if isinstance(message, Invalid):
            raise _Reject(400, message.error, message.id)
        session = self._session(scope, headers, required=False) if not _modern_headers(headers) else \
            self._sessions.get(headers.get("mcp-session-id", ""))
        if session is not None and session.subject != _subject(scope):
            session = None
        if isinstance(message, Notification | Response):
            if session is not None and isinstance(message, Notification):
                session.inflight.notice(message)
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        assert isinstance(message, Request)
        self._check_scope(scope, message)
        user = _subject(scope)
        if session is not None:
            self._check_legacy_version(headers, message)
            await self._answer(session.peer, message, receive, send, session=session, sse=_wants_sse(headers),
                               client=f"session {session.id}", user=user)
        elif message.method == "initialize":
            session = self._new_session(scope)
            await self._answer(session.peer, message, receive, send, session=session, created=True,
                               sse=_wants_sse(headers), client=f"session {session.id}", user=user)
        else:
            modern = _carries_modern_meta(message)
            if modern:
                _check_request_headers(headers, message)
            if message.method == "subscriptions/listen":
                self._bodies.give(held[0])
                held[0] = 0
                await self._listen(message, receive, send)
            else:
                # A modern request is served as on a stdio connection already in the modern era.
                peer = Peer(self.server, _nowhere, transport="http", era=Era.MODERN if modern else None)
                try:
                    await self._answer(peer, message, receive, send, strict=not modern, sse=_wants_sse(headers),
                                       client=_stateless_client(scope, headers), user=user)
                finally:
                    peer.close()

    async def _body(self, headers: dict[str, str], receive: Receive) -> bytes:
        """The request's body, counted in the body budget as it arrives (given back by the caller)."""
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
        try:
            while True:
                with anyio.move_on_after(self.body_idle_seconds):
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Gone
                    chunk = message.get("body", b"")
                    if size + len(chunk) > self.max_body_bytes:
                        raise too_big
                    if not self._bodies.take(size, len(chunk)):
                        raise _Reject(503, ProtocolError(
                            INVALID_REQUEST, "Service Unavailable: the server is receiving as many bytes of "
                            f"request bodies as it holds at once ({self._bodies.limit}); retry in a moment"),
                            headers=[(b"retry-after", b"1"), (b"connection", b"close")])
                    size += len(chunk)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        body = b"".join(chunks)
                        size = 0  # the caller holds it now
                        return body
                    continue
                raise _Reject(408, ProtocolError(
                    INVALID_REQUEST, f"Request Timeout: no byte of the body came for {self.body_idle_seconds:g} s"),
                    headers=[(b"connection", b"close")])
        finally:
            if size:
                self._bodies.give(size)

    def _check_legacy_version(self, headers: dict[str, str], request: Request) -> None:
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in LEGACY_VERSIONS:
            raise _Reject(400, ProtocolError(
                INVALID_REQUEST, f"Bad Request: MCP-Protocol-Version {version!r} is not a version of this session "
                f"(supported: {', '.join(LEGACY_VERSIONS)})"), request.id)

    async def _answer(self, peer: Peer, request: Request, receive: Receive, send: Send, *,
                      session: _LegacySession | None = None, created: bool = False, strict: bool = False,
                      sse: bool = False, client: str | None = None, user: str | None = None) -> None:
        """Serve one request while watching for the client going away; answer it as JSON, or as a
        one-event SSE stream to a client that accepts only that."""
        context = peer.context(request, None)
        context.client = client
        context.user = user
        in_use = session.inflight.in_use(request.id) if session is not None else None
        if in_use is not None:
            raise _Reject(400, in_use, request.id)
        outcome: tuple[bytearray, int | None] | None = None
        async with anyio.create_task_group() as tasks:
            if session is not None:
                session.inflight.start(request.id, tasks.cancel_scope, context)
            try:
                tasks.start_soon(_watch_disconnect, receive, tasks.cancel_scope, context)
                async with self._slots_for(request):
                    outcome = await respond(peer, request, context)
                tasks.cancel_scope.cancel()
            finally:
                if session is not None:
                    session.inflight.finish(request.id)
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

    def _slots_for(self, request: Request) -> Slots:
        """A tool call that may write (not annotated readOnlyHint) waits among the writes; the rest
        among the reads, so that writes waiting for the lock never hold every turn."""
        if request.method == "tools/call":
            name = request.params.get("name")
            tool = self.server.tools.get(name) if isinstance(name, str) else None
            if tool is not None and not (tool.annotations or {}).get("readOnlyHint", False):
                return self._write_slots
        return self._slots

    def _open_stream(self, request_id: RequestId | None = None) -> None:
        """Count one more SSE stream, or refuse it when MAX_STREAMS are open (statement 5 of `limits`)."""
        if self._streams >= self.max_streams:
            raise _Reject(503, ProtocolError(
                INVALID_REQUEST, f"Service Unavailable: {self.max_streams} streams (listens and GET streams) are "
                "open, the most this server keeps; retry later"), request_id, headers=[(b"retry-after", b"5")])
        self._streams += 1

    async def _listen(self, request: Request, receive: Receive, send: Send) -> None:
        """A modern listen: an SSE stream from the acknowledgement to the graceful closure."""
        self._open_stream(request.id)
        try:
            await self._listen_stream(request, receive, send)
        finally:
            self._streams -= 1

    async def _listen_stream(self, request: Request, receive: Receive, send: Send) -> None:
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

    async def _get(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> None:
        session = self._session(scope, headers, required=True)
        assert session is not None
        if self.closing:
            await _plain(send, 503, b"Shutting down")
            return
        if session.streaming:
            raise _Reject(409, ProtocolError(INVALID_REQUEST, "Conflict: this session's GET stream is already open"))
        self._open_stream()
        session.streaming = True
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_watch_disconnect, receive, tasks.cancel_scope, None)
                await self._stream(session.outbox, send)
                tasks.cancel_scope.cancel()
        finally:
            self._streams -= 1
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


def _subject(scope: Scope) -> str | None:
    """Who signed in (the token's subject under OAuth), else None."""
    grant = scope.get(AUTHORIZATION)
    return grant.subject if isinstance(grant, Grant) else None


def _headers(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        headers[name.decode("latin-1").lower()] = value.decode("latin-1")
    return headers


def _stateless_client(scope: Scope, headers: dict[str, str]) -> str:
    """Who a request outside a session comes from, as far as HTTP tells: its address, and the
    credentials it carried (hashed). Keys what is kept for it, such as its cut answers' pages."""
    address = (scope.get("client") or ("?",))[0]
    authorization = headers.get("authorization")
    if authorization is None:
        return f"address {address}"
    return f"address {address} credentials {hashlib.sha256(authorization.encode('latin-1')).hexdigest()[:16]}"


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


def _adding(send: Send, headers: list[tuple[bytes, bytes]]) -> Send:
    """`send`, with `headers` added to the response's start."""
    async def send_with(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *headers]}
        await send(message)
    return send_with


async def _end(send: Send) -> None:
    try:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except Exception:  # the connection is already gone
        pass
