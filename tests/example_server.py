"""A second, tiny server built on `protocol/` alone: proof that the engine embeds without memory_server.

One declaration, both transports:
    python tests/example_server.py                          # stdio
    python tests/example_server.py --http 127.0.0.1:8000    # Streamable HTTP at /mcp
"""

from __future__ import annotations

import anyio

from protocol import CacheHint, Server, ToolError, ToolResult, asgi_app, run_stdio

COUNTER_URI = "example://counter"

server = Server("example-server", "1.0.0", instructions="Add numbers; bump the counter to see resource updates.")
counter = {"value": 0}


@server.tool("add", title="Add", description="Add two integers.",
             input_schema={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                           "required": ["a", "b"], "additionalProperties": False},
             output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
             annotations={"readOnlyHint": True})
async def add(arguments: dict) -> dict:
    return {"sum": arguments["a"] + arguments["b"]}


@server.tool("sleep", description="Sleep for a number of seconds, then answer (concurrency and cancellation).",
             input_schema={"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}},
                           "required": ["seconds"]})
async def sleep(arguments: dict) -> str:
    await anyio.sleep(arguments["seconds"])
    return f"slept {arguments['seconds']}"


@server.tool("fail", description="Always fails with a tool error.", input_schema={"type": "object"})
async def fail(arguments: dict) -> dict:
    raise ToolError("this tool always fails")


@server.tool("crash", description="Always crashes with an unexpected exception.", input_schema={"type": "object"})
async def crash(arguments: dict) -> dict:
    raise RuntimeError("unexpected")


@server.tool("bump", description="Increment the counter resource.", input_schema={"type": "object"})
async def bump(arguments: dict) -> ToolResult:
    counter["value"] += 1
    server.resource_updated(COUNTER_URI)
    return ToolResult.of({"value": counter["value"]})


@server.resource(COUNTER_URI, name="counter", title="Counter", description="How often bump was called.",
                 mime_type="text/plain", cache=CacheHint(0, "private"))
async def read_counter(uri: str) -> str:
    return str(counter["value"])


def main(argv: list[str]) -> None:
    if argv[:1] == ["--http"] and len(argv) == 2:
        from protocol.http import run

        host, _, port = argv[1].rpartition(":")
        run(asgi_app(server), host or "127.0.0.1", int(port))
    else:
        run_stdio(server)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
