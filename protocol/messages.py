"""JSON-RPC 2.0 messages: one framed line in, one classified message out; responses out as bytes.

Pure code. Classification never raises: anything that is not a usable request or
notification becomes an `Invalid` carrying the error response the peer is owed.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import msgspec

from .errors import INVALID_REQUEST, PARSE_ERROR, ProtocolError
from .framing import Frame, OversizeLine

RequestId = int | str

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


class Request(msgspec.Struct, frozen=True):
    id: RequestId
    method: str
    params: dict[str, Any]


class Notification(msgspec.Struct, frozen=True):
    method: str
    params: dict[str, Any]


class Response(msgspec.Struct, frozen=True):
    """A response the peer sent us: this server never sends requests, so it is dropped."""


class Blank(msgspec.Struct, frozen=True):
    """An empty line: no message at all, so no answer is owed."""


class Invalid(msgspec.Struct, frozen=True):
    id: RequestId | None
    error: ProtocolError


Incoming = Request | Notification | Response | Blank | Invalid


def usable_id(value: Any) -> TypeGuard[RequestId]:
    # bool is an int subclass in Python but never a JSON-RPC id
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def id_key(request_id: RequestId) -> tuple[type, RequestId]:
    """Dictionary key that keeps 1 and "1" apart."""
    return (type(request_id), request_id)


def classify(frame: Frame) -> Incoming:
    if isinstance(frame, OversizeLine):
        return Invalid(None, ProtocolError(
            INVALID_REQUEST, f"Invalid Request: message of {frame.size} bytes exceeds the limit of {frame.limit} bytes"))
    if not frame.data.strip():
        return Blank()
    try:
        message = _decoder.decode(frame.data)
    except msgspec.DecodeError as exc:
        return Invalid(None, ProtocolError(PARSE_ERROR, f"Parse error: {exc}"))
    except RecursionError:
        return Invalid(None, ProtocolError(PARSE_ERROR, "Parse error: JSON nested too deeply"))
    return classify_object(message)


def classify_object(message: Any) -> Incoming:
    if not isinstance(message, dict):
        kind = "a batch (array)" if isinstance(message, list) else f"a JSON {_json_type(message)}"
        return _invalid(None, f"expected a JSON-RPC object, got {kind}")
    raw_id = message.get("id")
    echo = raw_id if usable_id(raw_id) else None
    if message.get("jsonrpc") != "2.0":
        return _invalid(echo, 'missing or wrong "jsonrpc": must be "2.0"')
    if "method" not in message:
        if ("result" in message or "error" in message) and (raw_id is None or usable_id(raw_id)):
            return Response()
        return _invalid(echo, 'missing "method"')
    method = message["method"]
    if not isinstance(method, str):
        return _invalid(echo, '"method" must be a string')
    params = message.get("params", {})
    if not isinstance(params, dict):
        return _invalid(echo, '"params" must be an object when present')
    if "id" not in message:
        return Notification(method, params)
    if not usable_id(raw_id):
        return _invalid(None, '"id" must be a string or an integer')
    return Request(raw_id, method, params)


def encode_result(request_id: RequestId, result: dict[str, Any]) -> bytearray:
    return _line({"jsonrpc": "2.0", "id": request_id, "result": result})


def encode_error(request_id: RequestId | None, error: ProtocolError) -> bytearray:
    return _line({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()})


def encode_notification(method: str, params: dict[str, Any]) -> bytearray:
    return _line({"jsonrpc": "2.0", "method": method, "params": params})


def _line(message: dict[str, Any]) -> bytearray:
    # The newline goes on the end of the encoder's own buffer: adding it to finished bytes would
    # copy the whole message, which for a large graph is a hundred megabytes.
    line = bytearray()
    _encoder.encode_into(message, line)
    line += b"\n"
    return line


def _invalid(echo: RequestId | None, why: str) -> Invalid:
    return Invalid(echo, ProtocolError(INVALID_REQUEST, f"Invalid Request: {why}"))


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", type(None): "null"}.get(
        type(value), type(value).__name__)

