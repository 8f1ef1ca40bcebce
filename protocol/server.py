"""What an embedding server declares: identity, instructions, tools, resources, background tasks,
and its lifespan.

A `Server` holds declarations only. The engine owns the protocol, and a transport serves the
declaration (`run_stdio(server)`, `asgi_app(server)`) inside `running(server)`, whose `Runtime`
holds what lives only while serving; a server built on it only declares these and calls
`resource_updated` when a resource changes. What the server needs opened while it serves (a
database, a file) is its `lifespan`, entered and closed by `running` (runtime.py 5).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .arguments import ArgumentCheck
from .arguments import input_schema as tool_input_schema
from .arguments import output_schema as tool_output_schema
from .context import wants_context
from .eras import CacheHint
from .runtime import current_runtime

_encoder = msgspec.json.Encoder()


class ToolError(Exception):
    """Raised by a tool handler: the call fails with `isError: true` and this text for the model."""


class ToolResult(msgspec.Struct):
    content: list[dict[str, Any]]
    structured: Any = None
    is_error: bool = False

    @classmethod
    def of(cls, value: Any, *notes: str) -> ToolResult:
        """A structured result whose first text item is the same data as compact JSON."""
        encoded = _encoder.encode(value)
        texts = [encoded.decode(), *notes]
        # Raw: the response splices these bytes in rather than encoding the value a second time.
        return cls([{"type": "text", "text": text} for text in texts], msgspec.Raw(encoded))

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls([{"type": "text", "text": message}], is_error=True)

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": self.content}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        if self.is_error:
            result["isError"] = True
        return result


# A handler takes its arguments (a reader its URI), and optionally the RequestContext second; a
# background task takes the Runtime that serves the server.
ToolHandler = Callable[..., Awaitable["ToolResult | dict[str, Any] | str"]]
ResourceReader = Callable[..., Awaitable["str | bytes"]]
BackgroundTask = Callable[..., Coroutine[Any, Any, None]]
Lifespan = Callable[["Server"], AbstractAsyncContextManager[None]]
"""A factory given the server: the context it makes is entered before the first request is served
and closed after the last (runtime.py 5), as Starlette's `lifespan`."""


@dataclass
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    arguments: Any = None  # the msgspec type `input_schema` was made from, if it was
    result: Any = None  # the msgspec type `output_schema` was made from, if it was
    takes_context: bool = field(default=False, init=False)
    _check: ArgumentCheck = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.takes_context = wants_context(self.handler)
        self._check = ArgumentCheck(self.input_schema, self.arguments)

    def describe(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            entry["title"] = self.title
        entry["description"] = self.description
        entry["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            entry["outputSchema"] = self.output_schema
        if self.annotations is not None:
            entry["annotations"] = self.annotations
        return entry

    def parse_arguments(self, arguments: dict[str, Any]) -> tuple[Any, list[str]]:
        """What the handler receives (an instance of `arguments`, or the dict itself), or the
        violations of the input schema, one line each, offending path first."""
        return self._check.parse(arguments)


@dataclass
class Resource:
    uri: str
    name: str
    reader: ResourceReader
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    cache: CacheHint = field(default_factory=lambda: CacheHint(0, "private"))
    takes_context: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.takes_context = wants_context(self.reader)

    def describe(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"uri": self.uri, "name": self.name}
        for key, value in (("title", self.title), ("description", self.description), ("mimeType", self.mime_type)):
            if value is not None:
                entry[key] = value
        return entry


class Server:
    """Identity, instructions, tools, resources, background tasks and a lifespan: a declaration,
    served by a transport."""

    def __init__(self, name: str, version: str, *, title: str | None = None,
                 instructions: str | None = None, list_cache: CacheHint = CacheHint(3_600_000, "public"),
                 lifespan: Lifespan | None = None) -> None:
        self.info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            self.info["title"] = title
        self.instructions = instructions
        self.list_cache = list_cache  # tools and resources are declared once, so their lists are static
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.background_tasks: list[BackgroundTask] = []
        self.background_ready: dict[BackgroundTask, bool] = {}
        self.lifespan = lifespan

    def tool(self, name: str, *, description: str, input_schema: dict[str, Any] | None = None,
             arguments: Any = None, title: str | None = None, output_schema: dict[str, Any] | None = None,
             result: Any = None, annotations: dict[str, Any] | None = None) -> Callable[[ToolHandler], ToolHandler]:
        """Declare a tool by its arguments' msgspec type (its handler then receives an instance), or
        by a hand-written `input_schema` (its handler receives the arguments as a dict); and, if it
        gives structured results, their msgspec type `result` or a hand-written `output_schema`."""
        if (input_schema is None) == (arguments is None):
            raise TypeError(f"tool {name!r}: declare either arguments (a msgspec type) or input_schema")
        if output_schema is not None and result is not None:
            raise TypeError(f"tool {name!r}: declare either result (a msgspec type) or output_schema, not both")
        schema = input_schema if input_schema is not None else tool_input_schema(arguments)
        advertised = output_schema if result is None else tool_output_schema(result)

        def register(handler: ToolHandler) -> ToolHandler:
            self.tools[name] = Tool(name, description, schema, handler, title, advertised, annotations, arguments,
                                    result)
            return handler
        return register

    def resource(self, uri: str, *, name: str, title: str | None = None, description: str | None = None,
                 mime_type: str | None = None,
                 cache: CacheHint = CacheHint(0, "private")) -> Callable[[ResourceReader], ResourceReader]:
        def register(reader: ResourceReader) -> ResourceReader:
            self.resources[uri] = Resource(uri, name, reader, title, description, mime_type, cache)
            return reader
        return register

    def background(self, task: BackgroundTask) -> BackgroundTask:
        """Run `task(runtime)` for as long as the server serves; it is cancelled at shutdown.

        A task with a `task_status` parameter is waited for until it calls `task_status.started()`:
        no subscription is acknowledged before that (other requests are served meanwhile); see
        runtime.py, whose `Runtime` the task receives."""
        self.background_tasks.append(task)
        self.background_ready[task] = "task_status" in inspect.signature(task).parameters
        return task

    def capabilities(self) -> dict[str, Any]:
        capabilities: dict[str, Any] = {}
        if self.tools:
            capabilities["tools"] = {}
        if self.resources:
            capabilities["resources"] = {"subscribe": True}
        return capabilities

    def resource_updated(self, uri: str) -> None:
        """Tell every subscriber of `uri`, legacy and modern alike, on every transport.

        Safe to call from any thread (the event loop's, or a worker's); it never blocks. Forwarded
        to the runtime serving this server now (runtime.py)."""
        current_runtime(self).publish(uri)
