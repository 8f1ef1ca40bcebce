"""JSON-RPC and MCP error codes, and the one exception every layer raises to answer with an error."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND_LEGACY = -32002  # 2025-11-25 and earlier; the modern era uses INVALID_PARAMS
UNSUPPORTED_PROTOCOL_VERSION = -32022
HEADER_MISMATCH = -32020  # Streamable HTTP (2026-07-28): request metadata headers disagree with the body


class ProtocolError(Exception):
    """Answer the current request with a JSON-RPC error instead of a result."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def invalid_params(message: str, data: Any = None) -> ProtocolError:
    return ProtocolError(INVALID_PARAMS, message, data)


def method_not_found(method: str) -> ProtocolError:
    return ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
