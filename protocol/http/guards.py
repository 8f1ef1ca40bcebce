"""Who may reach the endpoint, and what a request may bring, as ASGI wrappers: each is an app
around the app it guards.

`OriginGuard(TokenGuard(endpoint))`, itself inside `oauth.OAuthGuard` when the endpoint is an
OAuth resource server; the endpoint hands a POST it serves to `BodyGuard`, which reads its body
within the bounds of `limits` (statement 3 there) before the POST is served. The statements are
those of `security` (Host, Origin, CORS, token) and of `oauth` (4: refusals); the order is:

1. CORS headers for an allowed origin are added to every answer below the origin guard, errors too,
   so that the page can read why it was refused.
2. A path that is not the endpoint's is 404, before anything is looked at.
3. Host (421), then Origin (403), then a preflight `OPTIONS` is answered (204) without the token.
4. The shared token (401), or under OAuth the outcome `OAuthGuard` left in the scope (401 or 403).
5. A `Reject` raised by anything below the origin guard is answered there as a JSON-RPC error.
6. A POST's body: a content type other than JSON is 415; a body over `max_body_bytes` is 413 (at
   once when its Content-Length says so), one passing the bodies' budget 503, one that sends
   nothing for `body_idle_seconds` 408; a bad Content-Length is 400. A body is counted in the
   budget from its first byte until the POST is answered, or until it is released sooner.
"""

from __future__ import annotations

from collections.abc import Iterable

import anyio

from ..errors import INVALID_REQUEST, ProtocolError
from .limits import BodyBudget, HttpLimits
from .oauth import AUTHORIZATION, Grant, ProtectedResource, Refusal
from .responses import (
    ASGIApp,
    Gone,
    Receive,
    Reject,
    Scope,
    Send,
    adding,
    answer_empty,
    answer_plain,
    relative_path,
    request_headers,
)
from .security import cors_headers, host_allowed, normal_origin, origin_allowed, origin_set, preflight_headers, token_matches

ALLOW = (b"allow", b"GET, POST, DELETE, OPTIONS")


class OriginGuard:
    """Statements 1, 2, 3 and 5. `allowed_hosts` may be set later (`serve.run` does, for a loopback address)."""

    def __init__(self, app: ASGIApp, *, path: str, allowed_origins: Iterable[str] = (),
                 allowed_hosts: Iterable[str] | None = None) -> None:
        self.app = app
        self.path = path
        self.origins = origin_set(allowed_origins)
        self.allowed_hosts = None if allowed_hosts is None else frozenset(h.lower().strip("[]") for h in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = request_headers(scope)
        origin = found.get("origin")
        if origin is not None and normal_origin(origin) in self.origins:
            send = adding(send, cors_headers(origin))
        try:
            if relative_path(scope) != self.path:
                await answer_plain(send, 404, b"Not Found")
                return
            self._check(found)
            if scope["method"] == "OPTIONS":
                await self._options(found, send)
                return
            await self.app(scope, receive, send)
        except Reject as reject:
            await reject.answer(send)
        except Gone:
            pass

    def _check(self, found: dict[str, str]) -> None:
        host = found.get("host")
        if not host_allowed(host, self.allowed_hosts):
            raise Reject(421, ProtocolError(
                INVALID_REQUEST, f"Misdirected Request: this server does not answer for the host {host!r}"))
        origin = found.get("origin")
        if origin is not None and not origin_allowed(origin, self.origins):
            raise Reject(403, ProtocolError(INVALID_REQUEST, f"Forbidden: origin {origin!r} is not allowed"))

    async def _options(self, found: dict[str, str], send: Send) -> None:
        """A CORS preflight (answered without the token, which a preflight never carries), or a
        plain OPTIONS: the methods this endpoint serves."""
        origin = found.get("origin")
        extra = [ALLOW]
        if origin is not None and normal_origin(origin) in self.origins:
            extra += preflight_headers(found.get("access-control-request-headers"))
        await answer_empty(send, 204, extra)


class TokenGuard:
    """Statement 4: the shared `token`, or the grant of `oauth` (the two exclude each other)."""

    def __init__(self, app: ASGIApp, *, token: str | None = None, oauth: ProtectedResource | None = None) -> None:
        if oauth is not None and token:
            raise ValueError("a shared token and OAuth exclude each other: choose one")
        self.app = app
        self.token = token.encode() if token else None
        self.oauth = oauth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.oauth is not None:
            outcome = scope.get(AUTHORIZATION)
            if not isinstance(outcome, Grant):
                refusal = outcome if isinstance(outcome, Refusal) else self.oauth.unauthorized(None)
                raise Reject(refusal.status, ProtocolError(INVALID_REQUEST, refusal.message), headers=refusal.headers)
        elif self.token is not None and not token_matches(request_headers(scope).get("authorization"), self.token):
            raise Reject(401, ProtocolError(INVALID_REQUEST, "Unauthorized: a valid bearer token is required"),
                         headers=[(b"www-authenticate", b'Bearer realm="mcp"')])
        await self.app(scope, receive, send)


BODY = "mcp.body"
"""The key of the ASGI scope where `BodyGuard` leaves the POST's `Body` for the app it guards."""


class Body:
    """A request's body, counted in the body budget until it is released (statement 6)."""

    def __init__(self, data: bytes, budget: BodyBudget) -> None:
        self._data: bytes | None = data
        self._size = len(data)
        self._budget = budget

    def take(self) -> bytes:
        """The bytes, handed over once: the caller then holds the only reference to them."""
        data, self._data = self._data, None
        assert data is not None, "a body is taken once"
        return data

    def release(self) -> None:
        """No longer counted (a listen gives its body up at once; otherwise when answered)."""
        self._budget.give(self._size)
        self._size = 0


class BodyGuard:
    """Statement 6, by the bounds of `limits`: the app it guards finds the body in `scope[BODY]`."""

    def __init__(self, app: ASGIApp, limits: HttpLimits) -> None:
        self.app = app
        self.limit = limits.max_body_bytes
        self.idle_seconds = limits.body_idle_seconds
        self.budget = BodyBudget(limits.max_body_bytes_in_flight)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(scope)
        content_type = headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise Reject(415, ProtocolError(INVALID_REQUEST, "Unsupported Media Type: send application/json"))
        body = Body(await self._read(headers, receive), self.budget)
        scope[BODY] = body
        try:
            await self.app(scope, receive, send)
        finally:
            body.release()

    async def _read(self, headers: dict[str, str], receive: Receive) -> bytes:
        """The request's body, counted in the budget as it arrives (then held by a `Body`)."""
        limit = self.limit
        too_big = Reject(413, ProtocolError(INVALID_REQUEST, f"Invalid Request: the body exceeds the limit of {limit} bytes"))
        try:
            declared = int(headers.get("content-length", "0"))
        except ValueError:
            raise Reject(400, ProtocolError(INVALID_REQUEST, "Invalid Request: bad Content-Length")) from None
        if declared > limit:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                with anyio.move_on_after(self.idle_seconds):
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise Gone
                    chunk = message.get("body", b"")
                    if size + len(chunk) > limit:
                        raise too_big
                    if not self.budget.take(size, len(chunk)):
                        raise Reject(503, ProtocolError(
                            INVALID_REQUEST, "Service Unavailable: the server is receiving as many bytes of "
                            f"request bodies as it holds at once ({self.budget.limit}); retry in a moment"),
                            headers=[(b"retry-after", b"1"), (b"connection", b"close")])
                    size += len(chunk)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        body = b"".join(chunks)
                        size = 0  # the Body holds it now
                        return body
                    continue
                raise Reject(408, ProtocolError(
                    INVALID_REQUEST, f"Request Timeout: no byte of the body came for {self.idle_seconds:g} s"),
                    headers=[(b"connection", b"close")])
        finally:
            if size:
                self.budget.give(size)
