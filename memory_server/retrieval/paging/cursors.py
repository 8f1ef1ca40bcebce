"""Cursors into a cut answer, and the key of the call a cursor belongs to.

A cursor carries the answer's id and where its next page starts, signed with a key of the process
that made it: a cursor cannot be forged, and it does not outlive its process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from collections.abc import Mapping
from typing import Any, Final

import msgspec

_encoder: Final = msgspec.json.Encoder()
_PAYLOAD: Final = struct.Struct(">QQI")  # answer id; the page's first unit and, in a split entity, part
_TAG_BYTES: Final = 16
CURSOR_LENGTH: Final = len(base64.urlsafe_b64encode(bytes(_PAYLOAD.size + _TAG_BYTES)).rstrip(b"="))


class CursorError(ValueError):
    """A cursor that cannot be followed; the message tells the model what to do instead."""


def request_key(tool: str, arguments: Mapping[str, Any]) -> bytes:
    """What a cursor must be used with again: the tool and its arguments but the cursor, as the
    sha256 of their JSON (a kept answer holds 32 bytes of its call, not a query of megabytes)."""
    encoded = _encoder.encode([tool, {key: arguments[key] for key in sorted(arguments) if key != "cursor"}])
    return hashlib.sha256(encoded).digest()


def _signature(key: bytes, payload: bytes) -> bytes:
    """A cursor's tag: keyed BLAKE2b, a MAC in one call of the standard library (HMAC through
    OpenSSL looks its digest up again on every call, which a page paid for twice)."""
    return hashlib.blake2b(payload, key=key[:64], digest_size=_TAG_BYTES).digest()


def make_cursor(key: bytes, answer_id: int, unit: int, part: int) -> str:
    """The cursor to the page of answer `answer_id` starting at `unit` (and `part`), signed with `key`."""
    payload = _PAYLOAD.pack(answer_id, unit, part)
    tag = _signature(key, payload)
    return base64.urlsafe_b64encode(payload + tag).rstrip(b"=").decode("ascii")


def open_cursor(key: bytes, cursor: str, start_again: str) -> tuple[int, int, int]:
    """(answer id, unit, part) of a cursor this process made with `key`; CursorError for any other
    string, its message ending with `start_again`."""
    invalid = CursorError("This cursor is not valid: pass nextCursor back exactly as the last page gave it, to "
                          f"the same server process (cursors do not survive a restart). {start_again}")
    if len(cursor) != CURSOR_LENGTH or not cursor.isascii():
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except ValueError:
        raise invalid from None
    payload, tag = raw[:_PAYLOAD.size], raw[_PAYLOAD.size:]
    expected = _signature(key, payload)
    if len(raw) != _PAYLOAD.size + _TAG_BYTES or not hmac.compare_digest(tag, expected):
        raise invalid
    answer_id, unit, part = _PAYLOAD.unpack(payload)
    return answer_id, unit, part
