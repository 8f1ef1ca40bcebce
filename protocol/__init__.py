"""A dual-era MCP server engine on JSON-RPC: legacy (initialize) and modern (per-request _meta) eras.

Declare a `Server`, register tools and resources, then `server.run_stdio()`; or drive a
`Session` directly with bytes for tests and other transports.
"""

from .eras import LEGACY_VERSIONS, MODERN_VERSIONS, CacheHint, Era
from .errors import ProtocolError
from .server import Resource, Server, Tool, ToolError, ToolResult
from .session import Session

__all__ = [
    "LEGACY_VERSIONS", "MODERN_VERSIONS", "CacheHint", "Era", "ProtocolError",
    "Resource", "Server", "Tool", "ToolError", "ToolResult", "Session",
]
