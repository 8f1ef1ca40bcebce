"""What every part of the HTTP transport answers with: the ASGI names, JSON-RPC errors as HTTP
answers (`Reject`), and the few response shapes (JSON, plain text, empty, headers added)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio

from ..context import RequestContext
from ..errors import HEADER_MISMATCH, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION, ProtocolError
from ..messages import RequestId, encode_error

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

STATUS_OF_ERROR = {PARSE_ERROR: 400, INVALID_REQUEST: 400, HEADER_MISMATCH: 400,
                   UNSUPPORTED_PROTOCOL_VERSION: 400, METHOD_NOT_FOUND: 404}
"""The HTTP status of a JSON-RPC error answered outside a session (anything else: 200)."""
JSON_HEADERS = [(b"content-type", b"application/json")]
HEADERS = "mcp.headers"
"""The key of the ASGI scope where `headers` keeps a request's headers once read."""


class Reject(Exception):
    """Answer the HTTP request with this status and JSON-RPC error instead of serving it."""

    def __init__(self, status: int, error: ProtocolError, request_id: RequestId | None = None,
                 headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(error.message)
        self.status, self.error, self.request_id, self.headers = status, error, request_id, list(headers)

    async def answer(self, send: Send) -> None:
        await answer_json(send, self.status, encode_error(self.request_id, self.error), self.headers)


class Gone(Exception):
    """The client disconnected before its request was read."""


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name, read from the scope once and kept there."""
    found: dict[str, str] | None = scope.get(HEADERS)
    if found is None:
        found = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", ())}
        scope[HEADERS] = found
    return found


def relative_path(scope: Scope) -> str:
    """The request's path below the app's `root_path`, without a trailing slash."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):]
    return path.rstrip("/") or "/"


async def answer_json(send: Send, status: int, line: bytes | bytearray, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    length = [(b"content-length", str(len(line)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*JSON_HEADERS, *length, *headers]})
    await send({"type": "http.response.body", "body": bytes(line)})


async def answer_plain(send: Send, status: int, text: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), *headers]})
    await send({"type": "http.response.body", "body": text})


async def answer_empty(send: Send, status: int, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": b""})


def adding(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """`send`, with `extra` headers added to the response's start."""
    async def send_with(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)
    return send_with


async def watch_disconnect(receive: Receive, scope: anyio.CancelScope, context: RequestContext | None) -> None:
    """Until the client goes away: then its request is cancelled (and marked gone) and `scope` ends."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            if context is not None:
                context.gone = True
                context.cancel()
            scope.cancel()
            return
