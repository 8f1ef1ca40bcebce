"""What one stdio line carries: a JSON value, or bytes kept verbatim.

A line is held as a JSON value only when a peer could not tell the re-serialised form
from the original: strict UTF-8, strict JSON (no NaN or Infinity, no number overflowing a
double, no repeated key, no lone surrogate) and no whitespace around it (so a trailing
carriage return stays visible). Anything else is kept as raw bytes, so a transcript can
reproduce and demand it exactly. Whitespace between tokens, string escapes and the
spelling of a number (``1e2`` against ``100.0``) are not significant and not preserved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeAlias


@dataclass(frozen=True)
class JsonLine:
    value: Any


@dataclass(frozen=True)
class RawLine:
    data: bytes


WireLine: TypeAlias = JsonLine | RawLine


class LossyJson(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise LossyJson("an object repeats a key")
    return value


def _no_constants(text: str) -> Any:
    raise LossyJson(f"{text} is not JSON")


def loads_strict(text: str) -> Any:
    """Parse JSON, refusing anything a re-serialisation would change."""
    value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    # Writing it back refuses a number that overflowed to infinity, and a lone surrogate
    # escape, which parses but has no UTF-8 form.
    dumps(value).encode("utf-8")
    return value


def dumps(value: Any) -> str:
    """The compact, key-order-preserving form sent on the wire."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def parse_wire_line(data: bytes) -> WireLine:
    try:
        text = data.decode("utf-8")
        if not text or text != text.strip(" \t\r\n"):
            return RawLine(data)
        return JsonLine(loads_strict(text))
    except (ValueError, RecursionError):
        return RawLine(data)


def wire_text(line: WireLine) -> str:
    """A one-line human rendering for reports."""
    match line:
        case JsonLine(value):
            return dumps(value)
        case RawLine(data):
            return f"raw line {data.decode('utf-8', errors='backslashreplace')!r}"
    raise TypeError(line)


class LineSplitter:
    """Cuts a byte stream into lines as chunks arrive, without rescanning old bytes."""

    def __init__(self) -> None:
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            self._partial += chunk[start:end]
            lines.append(bytes(self._partial))
            self._partial.clear()
            start = end + 1
        self._partial += chunk[start:]
        return lines

    def take_tail(self) -> bytes | None:
        """The bytes after the last newline, once the stream has ended; None if there are none."""
        if not self._partial:
            return None
        tail = bytes(self._partial)
        self._partial.clear()
        return tail
