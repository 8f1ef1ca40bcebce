"""`mcp-server-memory --http [HOST:]PORT`: one memory served to many clients over Streamable HTTP."""

from __future__ import annotations

import ipaddress
import math
import os
import sys
from collections.abc import Mapping

from protocol import Server
from protocol.http import DEFAULT_PATH, SESSION_IDLE_SECONDS, asgi_app, run

TOKEN_VARIABLE = "MCP_MEMORY_HTTP_TOKEN"
SESSION_IDLE_VARIABLE = "MCP_MEMORY_HTTP_SESSION_IDLE"
DEFAULT_HOST = "127.0.0.1"


def parse_address(address: str) -> tuple[str, int]:
    """`PORT`, `HOST:PORT` or `[IPv6]:PORT`; HOST defaults to the loopback address."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--http wants [HOST:]PORT with a port from 0 to 65535, got {address!r}")
    return host, int(port)


def session_idle_from(environment: Mapping[str, str]) -> float:
    """Seconds a legacy session may stay idle (MCP_MEMORY_HTTP_SESSION_IDLE, default an hour)."""
    text = environment.get(SESSION_IDLE_VARIABLE, "").strip()
    if not text:
        return SESSION_IDLE_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{SESSION_IDLE_VARIABLE} must be a number of seconds above 0, got {text!r}")
    return seconds


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name may resolve to anything


def serve_http(server: Server, address: str, *, allow_unauthenticated: bool = False,
               allowed_origins: list[str] | None = None) -> None:
    try:
        host, port = parse_address(address)
        session_idle = session_idle_from(os.environ)
    except ValueError as error:
        raise SystemExit(f"mcp-server-memory: {error}") from None
    token = os.environ.get(TOKEN_VARIABLE) or None
    if token is None and not is_loopback(host) and not allow_unauthenticated:
        raise SystemExit(
            f"mcp-server-memory: refusing to serve the memory on {host}, which other machines can reach, "
            f"without a token. Set {TOKEN_VARIABLE} (clients then send 'Authorization: Bearer <token>'), "
            "or pass --allow-unauthenticated if something else guards the network.")
    app = asgi_app(server, path=DEFAULT_PATH, token=token, allowed_origins=allowed_origins or (),
                   session_idle_seconds=session_idle)
    shown = f"[{host}]" if ":" in host else host
    print(f"Knowledge Graph MCP Server: Streamable HTTP on http://{shown}:{port}{DEFAULT_PATH} "
          f"({'bearer token required' if token else 'no token'})", file=sys.stderr, flush=True)
    run(app, host, port)
