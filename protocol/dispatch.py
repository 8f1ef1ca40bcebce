"""The dispatch table: every method, the one handler that serves it, and the eras it exists in.

Handlers return bare results; `eras.stamp` dresses them for the era that asked, so
no handler is written twice.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .eras import MODERN_VERSIONS, SUBSCRIPTION_ID, CacheHint, Era, negotiate_legacy
from .errors import INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY, ProtocolError, invalid_params
from .messages import RequestId
from .peer import Peer
from .server import Resource, ToolError, ToolResult

if TYPE_CHECKING:
    from .context import RequestContext

PAGE_SIZE = 100


class Call(msgspec.Struct, frozen=True):
    id: RequestId
    method: str
    params: dict[str, Any]
    era: Era | None
    context: RequestContext


class Reply(msgspec.Struct, frozen=True):
    result: dict[str, Any]
    cache: CacheHint | None = None


Handler = Callable[[Peer, Call], Awaitable[Reply]]


class Method(msgspec.Struct, frozen=True):
    handler: Handler
    eras: frozenset[Era]


async def initialize(peer: Peer, call: Call) -> Reply:
    server = peer.server
    version = negotiate_legacy(call.params.get("protocolVersion"))
    info, capabilities = call.params.get("clientInfo"), call.params.get("capabilities")
    peer.protocol_version = call.context.protocol_version = version
    peer.client_info = call.context.client_info = info if isinstance(info, dict) else None
    peer.client_capabilities = call.context.client_capabilities = capabilities if isinstance(capabilities, dict) else None
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": server.capabilities(),
        "serverInfo": server.info,
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return Reply(result)


async def ping(peer: Peer, call: Call) -> Reply:
    return Reply({})


async def discover(peer: Peer, call: Call) -> Reply:
    server = peer.server
    result: dict[str, Any] = {"supportedVersions": list(MODERN_VERSIONS), "capabilities": server.capabilities()}
    if server.instructions:
        result["instructions"] = server.instructions
    return Reply(result, server.list_cache)


async def list_tools(peer: Peer, call: Call) -> Reply:
    tools = [tool.describe() for tool in peer.server.tools.values()]
    return Reply(paginate("tools", tools, call.params), peer.server.list_cache)


async def call_tool(peer: Peer, call: Call) -> Reply:
    name = call.params.get("name")
    if not isinstance(name, str):
        raise invalid_params("tools/call needs params.name, the tool's name as a string")
    tool = peer.server.tools.get(name)
    if tool is None:
        known = ", ".join(peer.server.tools) or "none"
        raise invalid_params(f"Unknown tool: {name}. Known tools: {known}", {"name": name})
    arguments = call.params.get("arguments", {})
    if not isinstance(arguments, dict):
        raise invalid_params("tools/call params.arguments must be an object when present")
    value, problems = tool.parse_arguments(arguments)
    if problems:
        return Reply(ToolResult.error(f"Invalid arguments for tool {name}: " + "; ".join(problems)).to_json())
    try:
        outcome = await (tool.handler(value, call.context) if tool.takes_context else tool.handler(value))
    except ToolError as error:
        return Reply(ToolResult.error(str(error)).to_json())
    if isinstance(outcome, str):
        outcome = ToolResult([{"type": "text", "text": outcome}])
    elif not isinstance(outcome, ToolResult):
        outcome = ToolResult.of(outcome)
    return Reply(outcome.to_json())


async def list_resources(peer: Peer, call: Call) -> Reply:
    resources = [resource.describe() for resource in peer.server.resources.values()]
    return Reply(paginate("resources", resources, call.params), peer.server.list_cache)


async def list_resource_templates(peer: Peer, call: Call) -> Reply:
    return Reply(paginate("resourceTemplates", [], call.params), peer.server.list_cache)


async def read_resource(peer: Peer, call: Call) -> Reply:
    resource = _resource(peer, call)
    if resource.takes_context:
        content = await resource.reader(resource.uri, call.context)
    else:
        content = await resource.reader(resource.uri)
    item: dict[str, Any] = {"uri": resource.uri}
    if resource.mime_type is not None:
        item["mimeType"] = resource.mime_type
    if isinstance(content, bytes):
        item["blob"] = base64.b64encode(content).decode()
    else:
        item["text"] = content
    return Reply({"contents": [item]}, resource.cache)


async def subscribe(peer: Peer, call: Call) -> Reply:
    uri = _resource(peer, call).uri
    await peer.runtime.wait_ready()
    peer.subscribe(uri)
    return Reply({})


async def unsubscribe(peer: Peer, call: Call) -> Reply:
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise invalid_params("resources/unsubscribe needs params.uri as a string")
    peer.unsubscribe(uri)
    return Reply({})


async def listen(peer: Peer, call: Call) -> Reply:
    wanted = call.params.get("notifications")
    if not isinstance(wanted, dict):
        raise invalid_params("subscriptions/listen needs params.notifications, an object naming what to receive")
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
        raise invalid_params("notifications.resourceSubscriptions must be an array of resource URIs")
    # Lists never change here, so the *ListChanged types are dropped: the ack says what is honoured.
    honoured = [uri for uri in dict.fromkeys(uris) if uri in peer.server.resources]
    await peer.runtime.wait_ready()
    await peer.listen(call.id, {"resourceSubscriptions": honoured} if honoured else {})
    return Reply({"_meta": {SUBSCRIPTION_ID: call.id}})


BOTH = frozenset({Era.LEGACY, Era.MODERN})
LEGACY = frozenset({Era.LEGACY})
MODERN = frozenset({Era.MODERN})

METHODS: dict[str, Method] = {
    "initialize": Method(initialize, LEGACY),
    "ping": Method(ping, LEGACY),
    "server/discover": Method(discover, MODERN),
    "tools/list": Method(list_tools, BOTH),
    "tools/call": Method(call_tool, BOTH),
    "resources/list": Method(list_resources, BOTH),
    "resources/templates/list": Method(list_resource_templates, BOTH),
    "resources/read": Method(read_resource, BOTH),
    "resources/subscribe": Method(subscribe, LEGACY),
    "resources/unsubscribe": Method(unsubscribe, LEGACY),
    "subscriptions/listen": Method(listen, MODERN),
}


def paginate(key: str, items: Sequence[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    start = _cursor_offset(params.get("cursor"), len(items))
    result: dict[str, Any] = {key: list(items[start:start + PAGE_SIZE])}
    if start + PAGE_SIZE < len(items):
        result["nextCursor"] = base64.urlsafe_b64encode(f"offset:{start + PAGE_SIZE}".encode()).decode()
    return result


def _cursor_offset(cursor: Any, total: int) -> int:
    if cursor is None:
        return 0
    try:
        label, _, number = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        offset = int(number)
    except (AttributeError, binascii.Error, UnicodeDecodeError, ValueError):
        offset = -1
        label = ""
    if label != "offset" or not 0 < offset < total:
        raise invalid_params(f"Unknown cursor: {cursor!r}; start again without a cursor", {"cursor": cursor})
    return offset


def _resource(peer: Peer, call: Call) -> Resource:
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise invalid_params(f"{call.method} needs params.uri as a string")
    resource = peer.server.resources.get(uri)
    if resource is None:
        code = RESOURCE_NOT_FOUND_LEGACY if call.era is Era.LEGACY else INVALID_PARAMS
        raise ProtocolError(code, f"Resource not found: {uri}", {"uri": uri})
    return resource
