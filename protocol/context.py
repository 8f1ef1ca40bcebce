"""What a handler may learn about the request it serves, on any transport and in either era.

A tool handler or resource reader that declares a second parameter receives a `RequestContext`;
one-parameter handlers are called as before (the engine looks at the signature once, when the
handler is registered).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from .eras import Era
from .messages import RequestId


@dataclass(eq=False)
class RequestContext:
    request_id: RequestId
    method: str
    era: Era | None
    protocol_version: str | None
    client_info: dict[str, Any] | None
    client_capabilities: dict[str, Any] | None
    transport: str  # "stdio", "http", or whatever a custom transport calls itself
    session_id: str | None = None  # the HTTP Mcp-Session-Id of a legacy session
    client: str | None = None  # who asked, as the transport tells clients apart (HTTP: session, or address and credentials)
    user: str | None = None  # who signed in, as the transport authenticated them (HTTP under OAuth: the token's sub)
    gone: bool = False  # the client itself went away (an HTTP disconnect), so nothing can reach it
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    _cancelled_async: anyio.Event = field(default_factory=anyio.Event, repr=False)

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request (or went away); readable from worker threads."""
        return self._cancelled.is_set()

    async def wait_cancelled(self) -> None:
        await self._cancelled_async.wait()

    def cancel(self) -> None:
        """Called by the engine on the event loop, before the handler's cancel scope is cancelled."""
        self._cancelled.set()
        self._cancelled_async.set()


def wants_context(handler: Callable[..., Any]) -> bool:
    """Whether `handler` takes a second positional parameter (the request context)."""
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)
