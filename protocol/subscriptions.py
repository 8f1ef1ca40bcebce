"""Who hears about a changed resource: legacy `resources/subscribe` sets and modern listens, in one place.

Every transport registers its subscribers with the runtime's `Subscriptions` (runtime.py); `publish` fans one
change out to each of them in the era's own shape. A subscriber is a channel with a `send`
callable that takes one encoded notification line; the transport decides where it goes (a stdio
writer, an HTTP GET stream, a listen's SSE stream).

`publish` may be called from any thread: off the event loop it is handed to the loop, in order.
An unbound `Subscriptions` (an idle runtime's, for sessions driven bare) tells subscribers on the
caller's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import anyio

from .eras import SUBSCRIPTION_ID
from .messages import RequestId, encode_notification

Send = Callable[[bytearray], None]

UPDATED = "notifications/resources/updated"


class LegacySubscriptions:
    """The URIs one legacy connection subscribed to with `resources/subscribe`."""

    def __init__(self, send: Send) -> None:
        self.uris: set[str] = set()
        self._send = send

    def wants(self, uri: str) -> bool:
        return uri in self.uris

    def deliver(self, uri: str) -> None:
        self._send(encode_notification(UPDATED, {"uri": uri}))


class Listen:
    """One modern `subscriptions/listen`: its id, the honoured filter, and the event that ends it."""

    def __init__(self, request_id: RequestId, filters: dict[str, Any], send: Send) -> None:
        self.id = request_id
        self.filters = filters
        self.closing = anyio.Event()
        self._send = send

    def wants(self, uri: str) -> bool:
        return uri in self.filters.get("resourceSubscriptions", ())

    def acknowledge(self) -> None:
        self._send(encode_notification(
            "notifications/subscriptions/acknowledged",
            {"_meta": {SUBSCRIPTION_ID: self.id}, "notifications": self.filters}))

    def deliver(self, uri: str) -> None:
        self._send(encode_notification(UPDATED, {"_meta": {SUBSCRIPTION_ID: self.id}, "uri": uri}))


Channel = LegacySubscriptions | Listen


class Subscriptions:
    """Every live subscriber of a running server, whatever its transport or era."""

    def __init__(self) -> None:
        # Insertion-ordered, so subscribers hear of a change in the order they subscribed.
        self._channels: dict[Channel, None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def add(self, channel: Channel) -> None:
        self._channels[channel] = None

    def discard(self, channel: Channel) -> None:
        self._channels.pop(channel, None)

    def bind(self) -> None:
        """Called on the event loop by `running()`: from now on other threads hand their publishes to it.

        The engine runs on asyncio (anyio's default backend, which every transport here starts):
        its loop takes a call from any thread without making that thread wait."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def unbind(self) -> None:
        self._loop = None
        self._loop_thread = None

    def publish(self, uri: str) -> None:
        """Tell every subscriber of `uri`. Safe from any thread of a bound runtime; never blocks."""
        loop = self._loop  # read once: the runtime may unbind meanwhile
        if loop is None or threading.get_ident() == self._loop_thread:
            self._fan_out(uri)  # on the loop, or unbound (an idle runtime): here and now
            return
        try:
            loop.call_soon_threadsafe(self._fan_out, uri)
        except RuntimeError:
            pass  # the loop is closed: shutdown, nobody left to tell

    def _fan_out(self, uri: str) -> None:
        for channel in list(self._channels):
            if channel.wants(uri):
                channel.deliver(uri)

