"""A tiny dual-era stdio server that meets every requirement of `mcp-conformance check`, unless told
to break one: ``check_server.py --break REQUIREMENT`` (ids as in the check's report).
``--legacy-only`` makes it a 2025-11-25 server that knows nothing of the modern era;
``--no-resources`` leaves out the resources capability.

The era is the connection's: ``initialize`` makes it legacy, a request carrying the modern
protocol version in ``_meta`` makes it modern. One tool (echo) and one resource. Standard
library only, so it starts fast.
"""

import json
import sys

BROKEN = sys.argv[sys.argv.index("--break") + 1] if "--break" in sys.argv else ""
LEGACY_ONLY_SERVER = "--legacy-only" in sys.argv
CAPABILITIES = {"tools": {}} if "--no-resources" in sys.argv else {"tools": {}, "resources": {}}
MODERN_VERSION = "2026-07-28"
PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
TOOL = {"name": "echo", "description": "Echo a text.", "inputSchema": {"type": "object"}}
RESOURCE = {"uri": "fixture://greeting", "name": "greeting", "mimeType": "text/plain"}
era = None
listens: set = set()


def broken(requirement: str) -> bool:
    """The requirement is broken, in the era it names (an era-less id is broken in every era)."""
    if BROKEN == requirement:
        return True
    prefix = f"{era}."
    return BROKEN.startswith(prefix) and BROKEN[len(prefix):] == requirement


def send(message) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id, value: dict) -> None:
    if era == "modern":
        value = {"resultType": "complete", **value}
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id, code: int, message: str, data=None) -> None:
    body = {"code": code, "message": message, **({"data": data} if data is not None else {})}
    send({"jsonrpc": "2.0", "id": request_id, "error": body})


def cached(value: dict) -> dict:
    return {**value, "ttlMs": 0, "cacheScope": "private"}


def initialize(request_id, params: dict) -> None:
    global era
    era = "legacy"
    asked = params.get("protocolVersion")
    version = asked if asked == "2025-11-25" or broken("legacy.version-negotiation") else "2025-11-25"
    answer = {"protocolVersion": version, "capabilities": dict(CAPABILITIES),
              "serverInfo": {"name": "check-fixture", "version": "1.0.0"}}
    if broken("legacy.initialize"):
        del answer["serverInfo"]
    if broken("legacy.initialize.schema"):
        answer["capabilities"]["tools"] = []
    result(request_id, answer)


def modern_meta_problem(request_id, params: dict) -> bool:
    """Answers a modern request whose _meta is unusable; True when it did."""
    meta = params.get("_meta") or {}
    if meta.get(PROTOCOL_VERSION) != MODERN_VERSION:
        if broken("modern.unsupported-version"):
            error(request_id, -32602, "unsupported version")
        else:
            error(request_id, -32022, "Unsupported protocol version",
                  {"supported": [MODERN_VERSION], "requested": meta.get(PROTOCOL_VERSION)})
        return True
    if not isinstance(meta.get(CLIENT_CAPABILITIES), dict) and not broken("modern.missing-meta"):
        error(request_id, -32602, f"{CLIENT_CAPABILITIES} is required in _meta")
        return True
    return False


LEGACY_ONLY = ("ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe")
MODERN_ONLY = ("server/discover", "subscriptions/listen")


def handle_request(request_id, method: str, params: dict) -> None:
    global era
    if method == "initialize" and era != "modern":
        return initialize(request_id, params)
    if era is None and isinstance(params.get("_meta"), dict) and PROTOCOL_VERSION in params["_meta"]:
        if LEGACY_ONLY_SERVER:
            return error(request_id, -32601, f"Method not found: {method}; send initialize first")
        era = "modern"
    if era == "modern" and modern_meta_problem(request_id, params):
        return None
    if era is None:
        return error(request_id, -32602, "send initialize, or the protocol version in _meta")
    served_here = MODERN_ONLY if era == "modern" else LEGACY_ONLY
    other_era = LEGACY_ONLY if era == "modern" else MODERN_ONLY
    if method in other_era and not broken("era-rules"):
        return error(request_id, -32601, f"Method not found: {method} (not in this era)")
    if method == "ping" and (method in served_here or broken("era-rules")):
        return result(request_id, {"pong": True} if broken("legacy.ping") else {})
    if method == "server/discover" and (method in served_here or broken("era-rules")):
        answer = {"supportedVersions": [MODERN_VERSION], "capabilities": dict(CAPABILITIES),
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "check-fixture", "version": "1.0.0"}}}
        if broken("modern.discover.schema"):
            return result(request_id, answer)
        answer = cached(answer)
        if broken("modern.discover"):
            answer["resultType"] = "partial"
        return send({"jsonrpc": "2.0", "id": request_id, "result": {"resultType": "complete", **answer}})
    if method == "subscriptions/listen" and (method in served_here or broken("era-rules")):
        listens.add(json.dumps(request_id))
        if broken("modern.listen-acknowledged"):
            return result(request_id, {"_meta": {SUBSCRIPTION_ID: request_id}})
        return send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                     "params": {"_meta": {SUBSCRIPTION_ID: request_id}, "notifications": {}}})
    if method in ("logging/setLevel", "resources/subscribe", "resources/unsubscribe"):
        return result(request_id, {})
    if method == "tools/list":
        tool = {key: value for key, value in TOOL.items() if key != "inputSchema" or not broken("tools-list.schema")}
        return result(request_id, cached({"tools": [tool]}))
    if method == "resources/list":
        resource = {key: value for key, value in RESOURCE.items() if key != "uri" or not broken("resources-list.schema")}
        return result(request_id, cached({"resources": [resource]}))
    if method == "tools/call":
        if not isinstance(params.get("name"), str):
            if broken("invalid-params"):
                return error(request_id, -32603, "Internal error")
            return error(request_id, -32602, "tools/call needs a tool name")
        return result(request_id, {"content": [{"type": "text", "text": str(params.get("arguments"))}]})
    if broken("unknown-method"):
        return result(request_id, {})
    return error(request_id, -32601, f"Method not found: {method}")


def handle_notification(method: str, params: dict) -> None:
    if method == "notifications/cancelled":
        cancelled = json.dumps(params.get("requestId"))
        if cancelled in listens:
            listens.discard(cancelled)
            if broken("modern.listen-cancelled"):
                result(params["requestId"], {"_meta": {SUBSCRIPTION_ID: params["requestId"]}})
        elif broken("cancel-unknown"):
            error(None, -32602, "no such request")
    elif method != "notifications/initialized" and broken("notification-unanswered"):
        error(None, -32601, f"Method not found: {method}")


def valid_id(value) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def handle_line(raw: bytes) -> None:
    if not raw.strip():
        if broken("malformed.empty-line"):
            sys.exit(1)
        return
    try:
        text = raw.decode("utf-8", errors="replace" if broken("malformed.invalid-utf8") else "strict")
        message = json.loads(text)
    except ValueError:
        return error(None, -32600 if broken("malformed.parse-error") else -32700, "Parse error")
    if isinstance(message, list) and broken("malformed.batch"):
        return send([{"jsonrpc": "2.0", "id": item.get("id"), "result": {}} for item in message])
    if not isinstance(message, dict):
        return error(None, -32700 if broken("malformed.not-an-object") else -32600, "Invalid Request")
    request_id = message.get("id")
    readable_id = request_id if valid_id(request_id) else None
    if "id" in message and not valid_id(request_id) and not broken("malformed.bad-ids"):
        return error(None, -32600, "Invalid Request: id must be a string or an integer")
    if message.get("jsonrpc") != "2.0":
        if "jsonrpc" not in message and broken("malformed.missing-jsonrpc"):
            pass
        elif message.get("jsonrpc") == "1.0" and broken("malformed.wrong-jsonrpc"):
            pass
        else:
            return error(readable_id, -32600, 'Invalid Request: "jsonrpc" must be "2.0"')
    method = message.get("method")
    if not isinstance(method, str):
        return error(readable_id, -32601 if broken("malformed.method-not-string") else -32600, "Invalid Request")
    params = message.get("params", {})
    if not isinstance(params, dict):
        if not broken("malformed.params-not-object"):
            return error(readable_id, -32600, "Invalid Request: params must be an object")
        params = {}
    if "id" in message:
        return handle_request(request_id, method, params)
    return handle_notification(method, params)


def main() -> None:
    if broken("stdio.stdout-messages-only"):
        print("check-fixture ready")
    if broken("handshake"):
        for raw in sys.stdin.buffer:
            message = json.loads(raw)
            if "id" in message:
                error(message["id"], -32601, "this server speaks no MCP")
        return
    for raw in sys.stdin.buffer:
        handle_line(raw.rstrip(b"\n"))
    if broken("stdio.exit-on-eof"):
        import threading

        threading.Event().wait()


main()
