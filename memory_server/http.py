"""`mcp-server-memory --http [HOST:]PORT`: one memory served to many clients over Streamable HTTP."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

from protocol import Server
from protocol.http import DEFAULT_PATH, HttpLimits, asgi_app, is_loopback, run
from protocol.http.limits import LISTEN_BACKLOG

from .settings import HTTP_TOKEN_VARIABLE, http_limits_from, session_idle_from

DEFAULT_HOST = "127.0.0.1"
LIMIT_FIELDS: dict[str, str] = {
    # each name of MCP_MEMORY_HTTP_LIMITS (settings.HTTP_LIMIT_KINDS), and the field of HttpLimits it sets;
    # see docs/http.md and protocol/http/limits.py
    "connections": "max_connections",
    "header_seconds": "header_seconds",
    "body_idle_seconds": "body_idle_seconds",
    "bodies_bytes": "max_body_bytes_in_flight",
    "requests": "max_concurrent_requests",
    "writes": "max_concurrent_writes",
    "streams": "max_streams",
}


def parse_address(address: str) -> tuple[str, int]:
    """`PORT`, `HOST:PORT` or `[IPv6]:PORT`; HOST defaults to the loopback address."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--http wants [HOST:]PORT with a port from 0 to 65535, got {address!r}")
    return host, int(port)


def limits_from(environment: Mapping[str, str]) -> HttpLimits:
    """The HTTP limits: the defaults, with those MCP_MEMORY_HTTP_LIMITS and MCP_MEMORY_HTTP_SESSION_IDLE
    change (settings.http_limits_from, settings.session_idle_from)."""
    changed: dict[str, Any] = {LIMIT_FIELDS[name]: value for name, value in http_limits_from(environment).items()}
    idle = session_idle_from(environment)
    if idle is not None:
        changed["session_idle_seconds"] = idle
    return HttpLimits(**changed)


def serve_http(server: Server, address: str, *, allow_unauthenticated: bool = False,
               allowed_origins: list[str] | None = None, database_url: str | None = None) -> None:
    """Serve `server` at /mcp; on a database (`database_url`), every other memory of it at
    /memories/{name}/mcp too (see memories.py)."""
    from .oauth_settings import check_oauth_installed, oauth_from, required_scope

    try:
        host, port = parse_address(address)
        limits = limits_from(os.environ)
        oauth = oauth_from(os.environ, DEFAULT_PATH)
    except ValueError as error:
        raise SystemExit(f"mcp-server-memory: {error}") from None
    if oauth is not None:
        check_oauth_installed()
    token = os.environ.get(HTTP_TOKEN_VARIABLE) or None
    if token is None and oauth is None and not is_loopback(host) and not allow_unauthenticated:
        raise SystemExit(
            f"mcp-server-memory: refusing to serve the memory on {host}, which other machines can reach, "
            f"without a token. Set {HTTP_TOKEN_VARIABLE} (clients then send 'Authorization: Bearer <token>'), "
            "or pass --allow-unauthenticated if something else guards the network.")
    options: dict[str, Any] = dict(token=token, allowed_origins=allowed_origins or (), limits=limits)
    app: Any = asgi_app(server, path=DEFAULT_PATH, oauth=oauth, required_scope=required_scope, **options)
    if database_url is not None:
        app = memories_app(app, database_url, options, oauth)
    shown = f"[{host}]" if ":" in host else host
    # What is said comes true first: the extra is there and the address is ours, or one line says why not.
    try:
        import uvicorn  # noqa: F401  (run imports it again)
    except ImportError:
        raise SystemExit("mcp-server-memory: Streamable HTTP needs the http extra (uvicorn): "
                         "pip install 'kg-memory-mcp[http]'") from None
    try:
        listening = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                         backlog=LISTEN_BACKLOG)
    except OSError as error:
        raise SystemExit(f"mcp-server-memory: cannot serve on http://{shown}:{port}{DEFAULT_PATH}: "
                         f"{os.strerror(error.errno) if error.errno else error}") from None
    port = listening.getsockname()[1]
    guard = f"OAuth, tokens of {oauth.issuer} for {oauth.resource}" if oauth else \
        "bearer token required" if token else "no token"
    print(f"Knowledge Graph MCP Server: Streamable HTTP on http://{shown}:{port}{DEFAULT_PATH} ({guard})",
          file=sys.stderr, flush=True)
    with listening:
        run(app, host, port, limits=limits, sock=listening)


def memories_app(default: Any, database_url: str, options: dict[str, Any], oauth: Any) -> Any:
    """The default endpoint and every other memory of the database (see memories.py)."""
    from .app import build_server
    from .memories import Memories
    from .model.dates import clock_from
    from .oauth_settings import PUBLIC_URL_VARIABLE, SCOPES
    from .retrieval.meaning import MEANING
    from .storage.postgres.store import PostgresStore

    clock = clock_from(os.environ)

    def open_server(name: str) -> Server:
        store = PostgresStore(database_url, name, clock=clock, meaning=MEANING)
        store.look_ahead()
        return build_server(store)  # its lifespan closes the store (app.py 1)

    public_url = os.environ.get(PUBLIC_URL_VARIABLE, "").strip().rstrip("/") or None
    return Memories(default, database_url=database_url, open_server=open_server, app_options=options,
                    public_url=public_url if oauth is not None else None, keys=oauth.keys if oauth else None,
                    issuer=oauth.issuer if oauth else None, scopes=SCOPES)
