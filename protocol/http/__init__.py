"""Streamable HTTP for both eras on one endpoint: an ASGI app made from the engine, and uvicorn to run it.

- `app`: the ASGI application (`StreamableHTTP`, `asgi_app`): the endpoint, its listens and answers.
- `guards`: the ASGI wrappers in front of it (Host, Origin, CORS, the token), by the rules of `security`.
- `oauth`: the endpoint as an OAuth resource server (metadata, JWT access tokens, scopes).
- `sessions`: the 2025-era sessions, their idle time and their cap.
- `sse`: the event streams (listens and GET streams).
- `responses`: the ASGI names and the shapes of answers, JSON-RPC errors among them.
- `limits`: the bounds (`HttpLimits`) on connections, header time, bodies in flight, requests and streams.
- `serve`: `run(app, host, port)` with uvicorn (imported only then).

See docs/http.md for the limits, CORS, and what belongs in a reverse proxy.
"""

from .app import DEFAULT_PATH, StreamableHTTP, asgi_app, decode_header_value
from .limits import (
    BODY_IDLE_SECONDS,
    HEADER_SECONDS,
    KEEPALIVE_SECONDS,
    MAX_BODY_BYTES_IN_FLIGHT,
    MAX_CONCURRENT_REQUESTS,
    MAX_CONCURRENT_WRITES,
    MAX_CONNECTIONS,
    MAX_SESSIONS,
    MAX_STREAMS,
    SESSION_IDLE_SECONDS,
    HttpLimits,
)
from .serve import SHUTDOWN_GRACE_SECONDS, is_loopback, run

__all__ = [
    "BODY_IDLE_SECONDS", "DEFAULT_PATH", "HEADER_SECONDS", "HttpLimits", "KEEPALIVE_SECONDS", "MAX_BODY_BYTES_IN_FLIGHT",
    "MAX_CONCURRENT_REQUESTS", "MAX_CONCURRENT_WRITES", "MAX_CONNECTIONS", "MAX_SESSIONS", "MAX_STREAMS",
    "SESSION_IDLE_SECONDS", "SHUTDOWN_GRACE_SECONDS", "StreamableHTTP", "asgi_app", "decode_header_value",
    "is_loopback", "run",
]
