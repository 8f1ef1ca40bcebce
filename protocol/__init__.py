"""A dual-era MCP server engine on JSON-RPC: legacy (initialize) and modern (per-request _meta) eras.

Declare a `Server`, register tools and resources, then `server.run_stdio()`, or serve
`server.asgi_app()` over Streamable HTTP; or drive a `Session` directly with bytes for tests
and other transports.
"""

from .context import RequestContext
from .eras import LEGACY_VERSIONS, MODERN_VERSIONS, CacheHint, Era
from .errors import ProtocolError
from .server import Resource, Server, Tool, ToolError, ToolResult
from .session import Session

__all__ = [
    "LEGACY_VERSIONS", "MODERN_VERSIONS", "CacheHint", "Era", "ProtocolError", "RequestContext",
    "Resource", "Server", "Tool", "ToolError", "ToolResult", "Session",
]
