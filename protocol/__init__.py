"""A dual-era MCP server engine on JSON-RPC: legacy (initialize) and modern (per-request _meta) eras.

Declare a `Server` (tools, resources, background tasks), then hand it to a transport:
`run_stdio(server)`, or serve `asgi_app(server)` over Streamable HTTP; or drive a `Session`
with bytes inside `running(server)`, for tests and other transports. See docs/engine.md.

The modules, each importing only from the rows below its own:
  transports   stdio (run_stdio), http (asgi_app, StreamableHTTP)
  connection   session (one framed connection)
  engine       engine (answer a request), dispatch (the method table)
  clients      peer (one client), server (the declaration: Server, Tool, Resource)
  serving      runtime (Runtime, running), subscriptions (who hears of a change), inflight (requests by id)
  parts        arguments (a tool's arguments), context (RequestContext)
  pure         eras (the era state machine), messages, framing, errors
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import RequestContext
    from .eras import LEGACY_VERSIONS, MODERN_VERSIONS, CacheHint, Era
    from .errors import ProtocolError
    from .http import StreamableHTTP, asgi_app
    from .runtime import Runtime, running
    from .server import Resource, Server, Tool, ToolError, ToolResult
    from .session import Session
    from .stdio import run_stdio

# Each name is imported from its module when first used: a program that needs one small part
# (the error codes, the eras) does not load the engine, nor a stdio server HTTP.
_HOMES = {
    "RequestContext": "context", "LEGACY_VERSIONS": "eras", "MODERN_VERSIONS": "eras", "CacheHint": "eras",
    "Era": "eras", "ProtocolError": "errors", "StreamableHTTP": "http", "asgi_app": "http", "Runtime": "runtime",
    "running": "runtime", "Resource": "server", "Server": "server", "Tool": "server", "ToolError": "server",
    "ToolResult": "server", "Session": "session", "run_stdio": "stdio",
}
__all__ = [
    "LEGACY_VERSIONS", "MODERN_VERSIONS", "CacheHint", "Era", "ProtocolError", "RequestContext", "Resource",
    "Runtime", "Server", "Session", "StreamableHTTP", "Tool", "ToolError", "ToolResult", "asgi_app",
    "run_stdio", "running",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'protocol' has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value  # asked once
    return value
