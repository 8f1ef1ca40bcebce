"""What an embedding server declares: identity, instructions, tools, resources, background tasks.

The engine owns the protocol; a server built on it only registers these and calls
`resource_updated` when a resource changes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

from .context import wants_context
from .eras import CacheHint
from .subscriptions import Subscriptions

_encoder = msgspec.json.Encoder()


class ToolError(Exception):
    """Raised by a tool handler: the call fails with `isError: true` and this text for the model."""


@dataclass(slots=True)
class ToolResult:
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


# A handler takes its arguments (a reader its URI), and optionally the RequestContext second.
ToolHandler = Callable[..., Awaitable["ToolResult | dict[str, Any] | str"]]
ResourceReader = Callable[..., Awaitable["str | bytes"]]
BackgroundTask = Callable[..., Coroutine[Any, Any, None]]


@dataclass
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    _validator: Any = field(default=None, repr=False)
    takes_context: bool = field(default=False, init=False)
    _accepts: Callable[[Any], bool] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.takes_context = wants_context(self.handler)
        self._accepts = _quick_check(self.input_schema)

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

    def argument_errors(self, arguments: dict[str, Any]) -> list[str]:
        """Why `arguments` break the input schema, one line per violation, offending path first."""
        # Arguments that plainly fit a plain schema need no validator; anything else gets jsonschema's word.
        if self._accepts is not None and self._accepts(arguments):
            return []
        if self._validator is None:
            # jsonschema is slow to import: paid for by the first call it has to judge, never at
            # start-up nor by a first call whose arguments are plainly valid (see _quick_check)
            from jsonschema import Draft202012Validator, validators

            # A schema without $schema is 2020-12 (MCP's default dialect); a declared one is honoured.
            self._validator = validators.validator_for(self.input_schema, Draft202012Validator)(self.input_schema)
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path)))
        return [f"at {_json_path(error.absolute_path)}: {error.message}" for error in errors[:20]]


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
    """Declarations plus the live subscribers that `resource_updated` fans out to."""

    def __init__(self, name: str, version: str, *, title: str | None = None,
                 instructions: str | None = None, list_cache: CacheHint = CacheHint(3_600_000, "public")) -> None:
        self.info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            self.info["title"] = title
        self.instructions = instructions
        self.list_cache = list_cache  # tools and resources are declared once, so their lists are static
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.background_tasks: list[BackgroundTask] = []
        self.background_ready: dict[BackgroundTask, bool] = {}
        self.subscriptions = Subscriptions()
        self.ready: anyio.Event | None = None  # set by the engine once background tasks have started
        self.wanted: anyio.Event | None = None  # set when a subscription waits for `ready`

    def tool(self, name: str, *, description: str, input_schema: dict[str, Any], title: str | None = None,
             output_schema: dict[str, Any] | None = None,
             annotations: dict[str, Any] | None = None) -> Callable[[ToolHandler], ToolHandler]:
        def register(handler: ToolHandler) -> ToolHandler:
            self.tools[name] = Tool(name, description, input_schema, handler, title, output_schema, annotations)
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
        """Run `task` for as long as the server serves; it is cancelled at shutdown.

        A task with a `task_status` parameter is waited for until it calls `task_status.started()`:
        no subscription is acknowledged before that (other requests are served meanwhile)."""
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

    async def wait_ready(self) -> None:
        """Until the background tasks that look first have looked (at once when nothing runs them)."""
        if self.ready is not None and not self.ready.is_set():
            if self.wanted is not None:
                self.wanted.set()
            await self.ready.wait()

    async def until_wanted(self, seconds: float) -> None:
        """For a background task: wait `seconds`, or less if a subscription is waiting for it."""
        with anyio.move_on_after(seconds):
            if self.wanted is not None:
                await self.wanted.wait()
            else:
                await anyio.sleep(seconds)

    def resource_updated(self, uri: str) -> None:
        """Tell every subscriber of `uri`, legacy and modern alike, on every transport.

        Safe to call from any thread (the event loop's, or a worker's); it never blocks."""
        self.subscriptions.publish(uri)

    def running(self) -> AbstractAsyncContextManager[None]:
        """Background tasks run and `resource_updated` is thread-safe while this is entered."""
        from .engine import running

        return running(self)

    def run_stdio(self) -> None:
        from .stdio import run

        run(self)

    def asgi_app(self, **options: Any) -> Any:
        """This server as an ASGI application (Streamable HTTP); see `protocol.http.asgi_app`."""
        from .http import asgi_app

        return asgi_app(self, **options)


def _json_path(path: Any) -> str:
    parts = list(path)
    return "/" + "/".join(str(part) for part in parts) if parts else "the top level"


# -- a quick yes for plain schemas --------------------------------------------------------------------

_PLAIN_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    # An integral float (2.0) is an integer to JSON Schema: that rarer case is left to jsonschema.
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
}
_ANNOTATIONS = frozenset({"description", "title", "examples", "default", "deprecated", "readOnly", "writeOnly"})
_PLAIN_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "minimum"}) | _ANNOTATIONS


def _quick_check(schema: Any) -> Callable[[Any], bool] | None:
    """A predicate that is True only for values the schema surely accepts, or None when the schema
    uses more than this knows (then jsonschema always decides). Tool calls are mostly valid, and a
    validator walk costs more than the call itself for a page of a read; a False sends the value to
    jsonschema, so every error is reported exactly as before."""
    if not isinstance(schema, dict) or not schema.keys() <= _PLAIN_KEYWORDS:
        return None
    checks: list[Callable[[Any], bool]] = []
    kind = schema.get("type")
    if kind is not None:
        if not isinstance(kind, str) or kind not in _PLAIN_TYPES:
            return None
        checks.append(_PLAIN_TYPES[kind])
    if "minimum" in schema:
        minimum = schema["minimum"]
        if kind not in ("integer", "number") or isinstance(minimum, bool) or not isinstance(minimum, (int, float)):
            return None
        checks.append(lambda value: value >= minimum)
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        if kind != "object":
            return None
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        closed = schema.get("additionalProperties", True)
        if (not isinstance(properties, dict) or not isinstance(required, list)
                or not all(isinstance(name, str) for name in required) or not isinstance(closed, bool)):
            return None
        inner: dict[str, Callable[[Any], bool]] = {}
        for name, sub in properties.items():
            if (check := _quick_check(sub)) is None:
                return None
            inner[name] = check
        known = properties.keys()

        def fits_object(value: dict[str, Any]) -> bool:
            if any(name not in value for name in required):
                return False
            if not closed and not value.keys() <= known:
                return False
            return all(check(value[name]) for name, check in inner.items() if name in value)
        checks.append(fits_object)
    if "items" in schema:
        if kind != "array":
            return None
        item = _quick_check(schema["items"])
        if item is None:
            return None
        checks.append(lambda value: all(map(item, value)))
    # Each check after the first may assume the type holds, as they come in that order.
    return lambda value: all(check(value) for check in checks)
