"""Server-sent event streams: the 2026-07-28 listens and the 2025-era GET streams.

1. Each stream holds at most one pending copy of each line: updates of one resource coalesce
   while a reader is slow, so a slow reader costs at most one copy of each line.
2. A stream with nothing to say for `keepalive` seconds (`limits.KEEPALIVE_SECONDS`) sends a
   comment, so that proxies and clients see it alive.
3. A stream ends with an empty final body, even when the connection is already gone.
"""

from __future__ import annotations

from collections import deque

import anyio

from .responses import Send

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
               (b"x-accel-buffering", b"no")]


class Outbox:
    """Lines waiting for one SSE stream (statement 1)."""

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


async def event(send: Send, line: bytes) -> None:
    await send({"type": "http.response.body", "body": b"event: message\ndata: " + line.rstrip(b"\n") + b"\n\n",
                "more_body": True})


async def stream(outbox: Outbox, send: Send, keepalive: float) -> None:
    """Every line of `outbox` as an event until it is closed, with keep-alive comments between (statement 2)."""
    while True:
        line = await outbox.next(keepalive)
        if line is None:
            return
        if line:
            await event(send, line)
        else:
            await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})


async def end(send: Send) -> None:
    """Statement 3."""
    try:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except Exception:  # the connection is already gone
        pass
