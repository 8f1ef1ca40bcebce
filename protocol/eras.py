"""Era selection: which protocol era serves a request, decided from the request and the connection.

Pure code, and the only code that sets a connection's era (as h11 keeps its state machine in one file):

1. A connection starts undecided, or in the era its transport knows already (an HTTP request that
   stands alone and carries the modern `_meta` is modern from the start).
2. The first request that is served successfully picks the era of the connection
   (`EraSelector.served`); errors pick nothing, and neither does a `ping` sent before any era was
   picked. Once picked, the era never changes.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from .errors import UNSUPPORTED_PROTOCOL_VERSION, ProtocolError, invalid_params
from .messages import Request

LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN_VERSIONS = ("2026-07-28",)

PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class Era(enum.Enum):
    LEGACY = "legacy"
    MODERN = "modern"


class CacheHint(msgspec.Struct, frozen=True):
    ttl_ms: int
    scope: str  # "public" | "private"


class EraSelector:
    def __init__(self, era: Era | None = None) -> None:
        self._era = era

    @property
    def era(self) -> Era | None:
        return self._era

    def route(self, request: Request) -> Era | None:
        """The era that serves `request`, or None for a ping before any era was picked."""
        if self.era is Era.LEGACY:
            return Era.LEGACY
        if self.era is Era.MODERN:
            if request.method == "initialize":
                raise unsupported_version(request.params.get("protocolVersion"))
            check_modern_meta(request.params)
            return Era.MODERN
        if request.method == "ping":
            return None
        if request.method == "initialize":
            return Era.LEGACY
        meta = request.params.get("_meta")
        if isinstance(meta, dict) and PROTOCOL_VERSION in meta:
            check_modern_meta(request.params)
            return Era.MODERN
        raise invalid_params(
            f"Missing {PROTOCOL_VERSION} in _meta. This server speaks the modern protocol "
            f"({', '.join(MODERN_VERSIONS)}), with the protocol version and "
            f"{CLIENT_CAPABILITIES} in every request's _meta, and the legacy protocol "
            f"({', '.join(LEGACY_VERSIONS)}): a legacy client must send initialize first.",
            {"supported": [*MODERN_VERSIONS, *LEGACY_VERSIONS]},
        )

    def served(self, era: Era | None) -> None:
        if self._era is None and era is not None:
            self._era = era


def check_modern_meta(params: dict[str, Any]) -> None:
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise invalid_params(f"params._meta must be an object carrying {PROTOCOL_VERSION} and {CLIENT_CAPABILITIES}")
    version = meta.get(PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise invalid_params(f"{PROTOCOL_VERSION} in _meta must be a string naming the protocol version")
    if not isinstance(meta.get(CLIENT_CAPABILITIES), dict):
        raise invalid_params(f"{CLIENT_CAPABILITIES} in _meta must be an object (use {{}} for none)")
    if version not in MODERN_VERSIONS:
        raise unsupported_version(version)


def unsupported_version(requested: Any) -> ProtocolError:
    return ProtocolError(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        {"supported": list(MODERN_VERSIONS), "requested": requested},
    )


def negotiate_legacy(requested: Any) -> str:
    return requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]


def stamp(era: Era | None, result: dict[str, Any], cache: CacheHint | None,
          server_info: dict[str, Any]) -> dict[str, Any]:
    """Dress a handler's result for the era that asked: the legacy shapes stay bare."""
    if era is not Era.MODERN:
        return result
    stamped = {**result, "resultType": "complete"}
    stamped["_meta"] = {**result.get("_meta", {}), SERVER_INFO: server_info}
    if cache is not None:
        stamped["ttlMs"] = cache.ttl_ms
        stamped["cacheScope"] = cache.scope
    return stamped
