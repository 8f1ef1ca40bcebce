"""Facts a recording learns as messages pass: the era, and who the client and server are.

The era cannot be read off the first request alone: a dual-era client probes a legacy
server with a modern ``server/discover`` and falls back to ``initialize``. So the whole
session counts:

- ``legacy``: an ``initialize`` request, and no request after it carries a modern
  protocol version (a failed probe before it is part of the legacy fallback);
- ``modern``: no ``initialize``, and requests carry ``io.modelcontextprotocol/protocolVersion``;
- ``mixed``: modern requests after an ``initialize``;
- ``none``: neither (no request at all, or only unversioned ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from conformance.wire import JsonLine, WireLine

PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"


@dataclass(frozen=True)
class SessionFacts:
    initialized: bool = False
    modern_before_initialize: bool = False
    modern_after_initialize: bool = False
    client: Mapping[str, Any] | None = None
    server: Mapping[str, Any] | None = None


def observe_client(facts: SessionFacts, wire: WireLine) -> SessionFacts:
    message = _object(wire.value) if isinstance(wire, JsonLine) else {}
    if "method" not in message or "id" not in message:
        return facts
    params = _object(message.get("params"))
    meta = _object(params.get("_meta"))
    if message["method"] == "initialize":
        return replace(facts, initialized=True, client=facts.client or _identity(params.get("clientInfo")))
    if PROTOCOL_VERSION not in meta:
        return facts
    client = facts.client or _identity(meta.get(CLIENT_INFO))
    if facts.initialized:
        return replace(facts, modern_after_initialize=True, client=client)
    return replace(facts, modern_before_initialize=True, client=client)


def observe_server(facts: SessionFacts, wire: WireLine) -> SessionFacts:
    if facts.server is not None or not isinstance(wire, JsonLine):
        return facts
    result = _object(_object(wire.value).get("result"))
    server = _identity(result.get("serverInfo")) or _identity(_object(result.get("_meta")).get(SERVER_INFO))
    return replace(facts, server=server)


def era_of(facts: SessionFacts) -> str:
    if facts.initialized:
        return "mixed" if facts.modern_after_initialize else "legacy"
    return "modern" if facts.modern_before_initialize else "none"


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _identity(info: Any) -> dict[str, Any] | None:
    """Name and version only: the rest of an Implementation object is display material."""
    found = {key: value for key, value in _object(info).items() if key in ("name", "version")}
    return found or None
