"""A small server built on the official MCP Python SDK (test environment only): one tool, one resource.

`mcp-conformance check` runs against it to show how an SDK server fares; see tests/test_conformance_check.py.
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-fixture")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.resource("fixture://greeting")
def greeting() -> str:
    """A fixed greeting."""
    return "hello"


if __name__ == "__main__":
    server.run("stdio")
