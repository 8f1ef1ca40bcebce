"""Newline-delimited framing: bytes in, complete lines out, with a hard cap on line size.

Pure code: no I/O. The cap bounds memory no matter what a peer sends: bytes of an
over-long line are counted and dropped, never buffered.
"""

from __future__ import annotations

import msgspec

MAX_LINE_BYTES = 16 * 1024 * 1024
"""The largest message accepted, newline excluded. A memory of 100,000 entities fits in one."""


class Line(msgspec.Struct, frozen=True):
    data: bytes


class OversizeLine(msgspec.Struct, frozen=True):
    size: int
    limit: int


Frame = Line | OversizeLine


class LineSplitter:
    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._buffer = bytearray()
        self._dropping = 0  # bytes dropped of the current over-long line, 0 when not dropping

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                self._keep(data[start:])
                return frames
            frames.append(self._finish(data[start:end]))
            start = end + 1

    def close(self) -> list[Frame]:
        """End of stream: a final line without a newline still counts as a message."""
        if self._dropping:
            return [self._finish(b"")]
        if self._buffer.strip():
            return [self._finish(b"")]
        self._buffer.clear()
        return []

    def _keep(self, piece: bytes) -> None:
        if self._dropping:
            self._dropping += len(piece)
        elif len(self._buffer) + len(piece) > self._max:
            self._dropping = len(self._buffer) + len(piece)
            self._buffer.clear()
        else:
            self._buffer += piece

    def _finish(self, tail: bytes) -> Frame:
        if self._dropping or len(self._buffer) + len(tail) > self._max:
            size = (self._dropping or len(self._buffer)) + len(tail)
            self._dropping = 0
            self._buffer.clear()
            return OversizeLine(size, self._max)
        if self._buffer:
            line = bytes(self._buffer) + tail
            self._buffer.clear()
        else:
            line = tail
        if line.endswith(b"\r"):
            line = line[:-1]
        return Line(line)
