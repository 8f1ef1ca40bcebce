"""Serving the app with uvicorn: the connection bounds of `limits`, quiet accept errors, and a
shutdown that gives every stream its graceful end.

uvicorn is the `http` extra: it is imported here, inside `run`, so the stdio server never needs it.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import Any

from .app import StreamableHTTP
from .limits import (
    LISTEN_BACKLOG,
    MAX_HEADER_BYTES,
    ConnectionGuard,
    HttpLimits,
    QuietAcceptErrors,
    QuietPeerWarnings,
    connection_limit,
    guarded,
)
from .security import LOOPBACK_HOSTS

SHUTDOWN_GRACE_SECONDS = 2
"""After SIGTERM or SIGINT: how long requests in flight may finish before they are cancelled."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name may resolve to anything


def run(app: StreamableHTTP, host: str, port: int, *, limits: HttpLimits | None = None,
        sock: socket.socket | None = None) -> None:
    """Serve `app` with uvicorn until SIGTERM or SIGINT; every listen then gets its graceful closure.

    At most `limits.max_connections` connections are open at once (lowered to fit the open-file
    limit), each given `limits.header_seconds` for its request's headers (see `limits`); `limits`
    defaults to the app's own. Bound to a loopback address, an app that names no allowed hosts
    answers only for the loopback names. `sock`: a socket already listening on that address (its
    caller could say it serves only once bound)."""
    limits = app.limits if limits is None else limits
    try:
        import uvicorn
        from uvicorn.protocols.http.auto import AutoHTTPProtocol
    except ImportError:
        raise SystemExit("Streamable HTTP needs the http extra (uvicorn): pip install 'kg-memory-mcp[http]'") from None
    import asyncio
    import signal

    # Logging is the caller's to configure (the command line does it; a library never should);
    # these filters only keep what a flood of bad peers would make of it to one line a minute.
    logging.getLogger("asyncio").addFilter(QuietAcceptErrors())
    logging.getLogger("uvicorn.error").addFilter(QuietPeerWarnings())
    if app.allowed_hosts is None and is_loopback(host):
        app.allowed_hosts = LOOPBACK_HOSTS | {host.strip("[]").lower()}
    guard = ConnectionGuard(connection_limit(limits.max_connections), limits.header_seconds, MAX_HEADER_BYTES)

    loop: list[asyncio.AbstractEventLoop] = []

    class UvicornServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # uvicorn waits for open connections before its lifespan ends, so the streams are
            # told first: each listen answers its closure and each GET stream ends.
            if loop and not app.closing:
                loop[0].call_soon_threadsafe(app.close_streams)
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=host, port=port, lifespan="on", ws="none", access_log=False,
                            server_header=False, timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
                            log_config=None, http=guarded(AutoHTTPProtocol, guard), backlog=LISTEN_BACKLOG,
                            h11_max_incomplete_event_size=MAX_HEADER_BYTES)
    server = UvicornServer(config)

    async def serve() -> None:
        loop.append(asyncio.get_running_loop())
        await server.serve(sockets=None if sock is None else [sock])

    # uvicorn re-raises the signal it caught once it has stopped, to the handler found before it
    # started: a handler that does nothing makes that a clean exit 0, as on stdio.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    asyncio.run(serve())
