"""What the engine remembers of one client: its era, its subscriptions and open listens, who it said it was.

On stdio a peer is the process's one connection; on HTTP it is a legacy session, or a single
modern request (that era keeps no state between requests). A peer belongs to the runtime that
serves its server when it is made, and registers its subscribers there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .context import RequestContext
from .eras import CLIENT_CAPABILITIES, PROTOCOL_VERSION, Era, EraSelector
from .messages import Request, RequestId, id_key
from .runtime import current_runtime
from .subscriptions import LegacySubscriptions, Listen, Send

if TYPE_CHECKING:
    from .server import Server

CLIENT_INFO = "io.modelcontextprotocol/clientInfo"


class Peer:
    """One client as the engine knows it: era, subscriptions, listens, identity."""

    def __init__(self, server: Server, send: Send, *, transport: str, era: Era | None = None,
                 session_id: str | None = None) -> None:
        self.server = server
        self.runtime = current_runtime(server)
        self.transport = transport
        self.session_id = session_id
        self.eras = EraSelector(era)
        self.legacy = LegacySubscriptions(send)
        self.listens: dict[tuple[type, RequestId], Listen] = {}
        self.protocol_version: str | None = None  # legacy: as negotiated by initialize
        self.client_info: dict[str, Any] | None = None
        self.client_capabilities: dict[str, Any] | None = None
        self._send = send

    def subscribe(self, uri: str) -> None:
        # Registered on the first subscription only: a peer that never subscribes (a stateless
        # HTTP request) costs the runtime's subscriber list nothing.
        self.legacy.uris.add(uri)
        self.runtime.subscriptions.add(self.legacy)

    def unsubscribe(self, uri: str) -> None:
        self.legacy.uris.discard(uri)

    def close(self) -> None:
        """Stop hearing about changes; every open listen ends with its graceful closure."""
        self.runtime.subscriptions.discard(self.legacy)
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
        self.runtime.subscriptions.add(listen)
        listen.acknowledge()
        try:
            await listen.closing.wait()
        finally:
            self.runtime.subscriptions.discard(listen)
            del self.listens[key]
