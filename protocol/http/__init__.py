"""Streamable HTTP for both eras on one endpoint: an ASGI app made from the engine, and uvicorn to run it.

- `app`: the ASGI application (`StreamableHTTP`, `asgi_app`): routing, sessions, listens, answers.
- `security`: Host, Origin, CORS and the bearer token.
- `oauth`: the endpoint as an OAuth resource server (metadata, JWT access tokens, scopes).
- `limits`: the bounds on connections, header time, bodies in flight, requests and streams.
- `serve`: `run(app, host, port)` with uvicorn (imported only then).

See docs/http.md for the limits, CORS, and what belongs in a reverse proxy.
"""

from .app import (
    DEFAULT_PATH,
    KEEPALIVE_SECONDS,
    MAX_SESSIONS,
    SESSION_IDLE_SECONDS,
    StreamableHTTP,
    asgi_app,
    decode_header_value,
)
from .limits import (
    BODY_IDLE_SECONDS,
    HEADER_SECONDS,
    MAX_BODY_BYTES_IN_FLIGHT,
    MAX_CONCURRENT_REQUESTS,
    MAX_CONCURRENT_WRITES,
    MAX_CONNECTIONS,
    MAX_STREAMS,
)
from .serve import SHUTDOWN_GRACE_SECONDS, is_loopback, run

__all__ = [
    "BODY_IDLE_SECONDS", "DEFAULT_PATH", "HEADER_SECONDS", "KEEPALIVE_SECONDS", "MAX_BODY_BYTES_IN_FLIGHT",
    "MAX_CONCURRENT_REQUESTS", "MAX_CONCURRENT_WRITES", "MAX_CONNECTIONS", "MAX_SESSIONS", "MAX_STREAMS",
    "SESSION_IDLE_SECONDS", "SHUTDOWN_GRACE_SECONDS", "StreamableHTTP", "asgi_app", "decode_header_value",
    "is_loopback", "run",
]
