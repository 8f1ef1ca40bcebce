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
connection cancels its request. SSE streams are `sse`'s, sessions `sessions`', the guards in front
of this endpoint (and of a POST's body) `guards`' and `oauth`'s, its bounds `limits`' (`HttpLimits`);
the ASGI server's flow control holds back a slow reader's own response only.

The app is a value: mount it in Starlette or FastAPI under any path (it honours `root_path`),
or run it with `run()` (uvicorn, imported only then). Its background tasks run while it gets
ASGI lifespan events, or while a host enters `app.lifespan()`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ..engine import respond
from ..eras import LEGACY_VERSIONS, MODERN_VERSIONS, PROTOCOL_VERSION, Era
from ..errors import HEADER_MISMATCH, INVALID_REQUEST, PARSE_ERROR, ProtocolError
from ..framing import Line
from ..messages import Blank, Invalid, Notification, Request, RequestId, Response, classify
from ..peer import Peer
from ..runtime import running
from ..server import Server
from .guards import ALLOW, BODY, Body, BodyGuard, OriginGuard, TokenGuard
from .limits import HttpLimits, Slots
from .oauth import AUTHORIZATION, Grant, OAuthGuard, ProtectedResource, ScopeRule
from .responses import (
    STATUS_OF_ERROR,
    Receive,
    Reject,
    Scope,
    Send,
    answer_empty,
    answer_json,
    answer_plain,
    request_headers,
    watch_disconnect,
)
from .sessions import LegacySession, Sessions
from .sse import SSE_HEADERS, Outbox, end, event, stream

log = logging.getLogger("protocol.http")

DEFAULT_PATH = "/mcp"
NAME_PARAMS = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}


class StreamableHTTP:
    """The ASGI application (`asgi_app(server, ...)` builds one). `limits`: its bounds (see `limits`).

    `allowed_hosts`: the Host names answered (None: any; `run` sets the loopback names for a
    server bound to a loopback address). `allowed_origins`: the browser origins given CORS.

    `oauth`: the endpoint as an OAuth resource server instead of the shared `token` (see `oauth`);
    `required_scope` then says which scope each JSON-RPC request needs (None: any valid token).
    `clock`: the monotonic seconds the sessions' idle times are read from."""

    def __init__(self, server: Server, *, path: str = DEFAULT_PATH, token: str | None = None,
                 allowed_origins: Iterable[str] = (), allowed_hosts: Iterable[str] | None = None,
                 limits: HttpLimits = HttpLimits(), oauth: ProtectedResource | None = None,
                 required_scope: ScopeRule | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.path = "/" + path.strip("/") if path.strip("/") else ""
        self.limits = limits
        self.sessions = Sessions(server, max_sessions=limits.max_sessions, idle_seconds=limits.session_idle_seconds,
                                 clock=clock)
        self._listening: set[Peer] = set()  # modern peers with an open listen stream
        self._streams = 0  # SSE streams open: listens and GET streams
        self._slots = Slots(limits.max_concurrent_requests)
        self._write_slots = Slots(limits.max_concurrent_writes)
        self._bodies = BodyGuard(self._serve_post, limits)
        self.closing = False
        self.oauth = oauth
        self.required_scope = required_scope
        self._origins = OriginGuard(TokenGuard(self._endpoint, token=token, oauth=oauth), path=self.path or "/",
                                    allowed_origins=allowed_origins, allowed_hosts=allowed_hosts)
        self._entry = OAuthGuard(self._origins, oauth, path=self.path or "/") if oauth is not None else self._origins

    @property
    def allowed_hosts(self) -> frozenset[str] | None:
        """The Host names answered (None: any); `serve.run` sets the loopback names for a loopback address."""
        return self._origins.allowed_hosts

    @allowed_hosts.setter
    def allowed_hosts(self, hosts: frozenset[str] | None) -> None:
        self._origins.allowed_hosts = hosts

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
        self.sessions.end_all()

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

    async def _endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Past the guards: the request is for this endpoint, from an allowed origin, authenticated."""
        found = request_headers(scope)
        method = scope["method"]
        if method == "POST":
            await self._post(scope, receive, send)
        elif method == "GET":
            await self._get(scope, found, receive, send)
        elif method == "DELETE":
            session = self._session(scope, found, required=True)
            assert session is not None
            self.sessions.end(session)
            await answer_empty(send, 204)
        else:
            await answer_plain(send, 405, b"Method Not Allowed", [ALLOW])

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
            raise Reject(refusal.status, ProtocolError(INVALID_REQUEST, refusal.message), request.id, refusal.headers)

    def _session(self, scope: Scope, found: dict[str, str], *, required: bool) -> LegacySession | None:
        session_id = found.get("mcp-session-id")
        if session_id is None:
            if required:
                raise Reject(405, ProtocolError(
                    INVALID_REQUEST, "Method Not Allowed without an Mcp-Session-Id: this endpoint's GET stream "
                    "and DELETE belong to 2025-era sessions"))
            return None
        session = self.sessions.find(session_id, _subject(scope))
        if session is None:
            # Someone else's session is not found either: its id alone must not hand it over.
            raise Reject(404, ProtocolError(INVALID_REQUEST, "Session not found: it ended or never existed; "
                                            "send initialize to start a new one"))
        return session

    # -- POST -----------------------------------------------------------------------------------------

    async def _post(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.closing:
            await answer_plain(send, 503, b"Shutting down")
            return
        await self._bodies(scope, receive, send)  # the body read within the limits, then _serve_post

    async def _serve_post(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(scope)
        body: Body = scope[BODY]
        message = classify(Line(body.take()))
        if isinstance(message, Blank):
            raise Reject(400, ProtocolError(INVALID_REQUEST, "Invalid Request: the body is empty"))
        if isinstance(message, Invalid):
            raise Reject(400, message.error, message.id)
        session = self._session(scope, headers, required=False) if not _modern_headers(headers) else \
            self.sessions.get(headers.get("mcp-session-id", ""))
        if session is not None and session.subject != _subject(scope):
            session = None
        if isinstance(message, Notification | Response):
            if session is not None and isinstance(message, Notification):
                session.inflight.notice(message)
            await answer_empty(send, 202)
            return
        assert isinstance(message, Request)
        self._check_scope(scope, message)
        user = _subject(scope)
        if session is not None:
            self._check_legacy_version(headers, message)
            await self._answer(session.peer, message, receive, send, session=session, sse=_wants_sse(headers),
                               client=f"session {session.id}", user=user)
        elif message.method == "initialize":
            session = self.sessions.new(_subject(scope))
            await self._answer(session.peer, message, receive, send, session=session, created=True,
                               sse=_wants_sse(headers), client=f"session {session.id}", user=user)
        else:
            modern = _carries_modern_meta(message)
            if modern:
                _check_request_headers(headers, message)
            if message.method == "subscriptions/listen":
                body.release()  # a listen lasts: its body is not held meanwhile
                await self._listen(message, receive, send)
            else:
                # A modern request is served as on a stdio connection already in the modern era.
                peer = Peer(self.server, _nowhere, transport="http", era=Era.MODERN if modern else None)
                try:
                    await self._answer(peer, message, receive, send, strict=not modern, sse=_wants_sse(headers),
                                       client=_stateless_client(scope, headers), user=user)
                finally:
                    peer.close()

    def _check_legacy_version(self, headers: dict[str, str], request: Request) -> None:
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in LEGACY_VERSIONS:
            raise Reject(400, ProtocolError(
                INVALID_REQUEST, f"Bad Request: MCP-Protocol-Version {version!r} is not a version of this session "
                f"(supported: {', '.join(LEGACY_VERSIONS)})"), request.id)

    async def _answer(self, peer: Peer, request: Request, receive: Receive, send: Send, *,
                      session: LegacySession | None = None, created: bool = False, strict: bool = False,
                      sse: bool = False, client: str | None = None, user: str | None = None) -> None:
        """Serve one request while watching for the client going away; answer it as JSON, or as a
        one-event SSE stream to a client that accepts only that."""
        context = peer.context(request, None)
        context.client = client
        context.user = user
        in_use = session.inflight.in_use(request.id) if session is not None else None
        if in_use is not None:
            raise Reject(400, in_use, request.id)
        outcome: tuple[bytearray, int | None] | None = None
        async with anyio.create_task_group() as tasks:
            if session is not None:
                session.inflight.start(request.id, tasks.cancel_scope, context)
            try:
                tasks.start_soon(watch_disconnect, receive, tasks.cancel_scope, context)
                async with self._slots_for(request):
                    outcome = await respond(peer, request, context)
                tasks.cancel_scope.cancel()
            finally:
                if session is not None:
                    session.inflight.finish(request.id)
                    self.sessions.used(session)  # idle from the end of its last request
        if outcome is None:
            if created and session is not None:
                self.sessions.forget(session)
            if not context.gone:
                # Cancelled by notifications/cancelled or shutdown while the client still waits:
                # it is owed no JSON-RPC response, so the exchange ends with an empty 202.
                await answer_empty(send, 202)
            return
        line, code = outcome
        extra: list[tuple[bytes, bytes]] = []
        if created and session is not None:
            if code is None:
                extra.append((b"mcp-session-id", session.id.encode()))
            else:
                self.sessions.forget(session)
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
            await event(send, bytes(line))
            await end(send)
        else:
            await answer_json(send, status, line, extra)

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
        if self._streams >= self.limits.max_streams:
            raise Reject(503, ProtocolError(
                INVALID_REQUEST, f"Service Unavailable: {self.limits.max_streams} streams (listens and GET streams) are "
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
        outbox = Outbox()
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
                tasks.start_soon(watch_disconnect, receive, tasks.cancel_scope, context)
                first = await outbox.next(self.limits.keepalive_seconds * 4)
                if first is None and finished:  # refused before any acknowledgement: a plain JSON error
                    line, code = finished[0]
                    strict = peer.eras.era is None  # neither modern nor in a session: initialize first
                    await answer_json(send, 400 if strict else STATUS_OF_ERROR.get(code or 0, 200), line)
                    tasks.cancel_scope.cancel()
                    return
                streaming = True
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                if first:
                    await event(send, first)
                await stream(outbox, send, self.limits.keepalive_seconds)
                tasks.cancel_scope.cancel()
        finally:
            self._listening.discard(peer)
            peer.close()
            if streaming:
                with anyio.CancelScope(shield=True):
                    await end(send)

    # -- GET ------------------------------------------------------------------------------------------

    async def _get(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> None:
        session = self._session(scope, headers, required=True)
        assert session is not None
        if self.closing:
            await answer_plain(send, 503, b"Shutting down")
            return
        if session.streaming:
            raise Reject(409, ProtocolError(INVALID_REQUEST, "Conflict: this session's GET stream is already open"))
        self._open_stream()
        session.streaming = True
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(watch_disconnect, receive, tasks.cancel_scope, None)
                await stream(session.outbox, send, self.limits.keepalive_seconds)
                tasks.cancel_scope.cancel()
        finally:
            self._streams -= 1
            session.streaming = False
            self.sessions.used(session)
            with anyio.CancelScope(shield=True):
                await end(send)


def asgi_app(server: Server, **options: Any) -> StreamableHTTP:
    """`server` over Streamable HTTP, as an ASGI app (options: see `StreamableHTTP`; its bounds are
    one `limits=HttpLimits(...)`)."""
    return StreamableHTTP(server, **options)


# -- pure helpers -------------------------------------------------------------------------------------

def _subject(scope: Scope) -> str | None:
    """Who signed in (the token's subject under OAuth), else None."""
    grant = scope.get(AUTHORIZATION)
    return grant.subject if isinstance(grant, Grant) else None


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
    def mismatch(why: str) -> Reject:
        return Reject(400, ProtocolError(HEADER_MISMATCH, f"Header mismatch: {why}"), request.id)

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
