"""Re-record the corpus's edge cases: hand-written client lines, in both eras, through
`python -m conformance record` against `python -m memory_server`.

    .venv/bin/python conformance/corpus/record_edge_cases.py

Every answer is checked against the protocol's rules while recording (see scripted_client.py),
then each transcript in conformance/corpus/edge/ is replayed a few times against the server.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from corpus_tools import MEMORY_SERVER, relative
from scripted_client import (
    CLIENT_CAPABILITIES,
    GRAPH,
    LEGACY_VERSION,
    MODERN_VERSION,
    PROTOCOL_VERSION,
    Answer,
    CloseStdin,
    RepeatLine,
    Say,
    Script,
    Signal,
    acknowledged,
    cancel,
    closed,
    error,
    initialize,
    modern,
    notification,
    record,
    request,
    result,
    say,
    tool,
    tool_error,
    updated,
)

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
RESOURCE_NOT_FOUND, UNSUPPORTED_VERSION = -32002, -32022
OVERSIZE = 17 * 1024 * 1024
EMPTY_GRAPH = {"entities": [], "relations": []}
ADA = {"name": "Ada_Lovelace", "entityType": "person", "observations": ["Wrote the first published program"]}
BABBAGE = {"name": "Charles_Babbage", "entityType": "person", "observations": ["Designed the Difference Engine"]}
MISSING = "memory://no-such-resource"
KNOWN_VERSIONS = [MODERN_VERSION]
Make = Callable[..., dict[str, Any]]


def versioned(version: str) -> dict[str, Any]:
    """Params whose _meta is complete but names `version`."""
    return {"_meta": {PROTOCOL_VERSION: version, CLIENT_CAPABILITIES: {}}}


def compact(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode("utf-8")


# --- pieces both eras share ------------------------------------------------------------------------


def open_legacy() -> list[Say]:
    return [
        say(initialize("init"), result("init", protocolVersion=LEGACY_VERSION)),
        say(notification("notifications/initialized")),
    ]


def open_modern() -> list[Say]:
    return [say(modern("discover", "server/discover"), result("discover", supportedVersions=KNOWN_VERSIONS))]


def read_graph(make: Make, request_id: str) -> Say:
    """A valid request that shows the (still empty) memory is there and answering."""
    graph = result(request_id, structuredContent=EMPTY_GRAPH)
    return say(make(request_id, "tools/call", tool("read_graph", {})), graph)


def bad_lines() -> list[tuple[str, bytes | RepeatLine, Answer | None]]:
    """Every malformed line: what it is, its bytes, and the one answer it must draw (None: none)."""
    return [
        ("invalid JSON: -32700 with id null", b"{not json", error(None, PARSE_ERROR)),
        ("truncated JSON: -32700 with id null", b'{"jsonrpc":"2.0","id":"cut","method":"tools/list"',
         error(None, PARSE_ERROR)),
        ("bytes that are not UTF-8: -32700 with id null", b"\xff\xfe\xfd", error(None, PARSE_ERROR)),
        ("a method name holding a byte that is not UTF-8: -32700 with id null",
         b'{"jsonrpc":"2.0","id":"latin1","method":"tools/l\xefst"}', error(None, PARSE_ERROR)),
        ("100,000 opening brackets: nested too deeply, -32700 with id null", RepeatLine("[", 100_000),
         error(None, PARSE_ERROR)),
        ("a number: -32600 with id null", b"42", error(None, INVALID_REQUEST)),
        ("a string: -32600 with id null", b'"tools/list"', error(None, INVALID_REQUEST)),
        ("null: -32600 with id null", b"null", error(None, INVALID_REQUEST)),
        ("a batch (JSON-RPC batches are not MCP): -32600 with id null",
         b'[{"jsonrpc":"2.0","id":"in-batch","method":"tools/list"}]', error(None, INVALID_REQUEST)),
        ("an empty batch: -32600 with id null", b"[]", error(None, INVALID_REQUEST)),
        ("an empty object: -32600 with id null", b"{}", error(None, INVALID_REQUEST)),
        ("no jsonrpc member: -32600, the usable id echoed",
         b'{"id":"no-jsonrpc","method":"tools/list"}', error("no-jsonrpc", INVALID_REQUEST)),
        ('jsonrpc "1.0": -32600, the id echoed',
         b'{"jsonrpc":"1.0","id":"v1","method":"tools/list"}', error("v1", INVALID_REQUEST)),
        ("method is a number: -32600, the id echoed",
         b'{"jsonrpc":"2.0","id":"method-number","method":5}', error("method-number", INVALID_REQUEST)),
        ("neither method nor result: -32600, the id echoed",
         b'{"jsonrpc":"2.0","id":"no-method"}', error("no-method", INVALID_REQUEST)),
        ("id null: -32600 with id null", b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}',
         error(None, INVALID_REQUEST)),
        ("id true (not an id): -32600 with id null", b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}',
         error(None, INVALID_REQUEST)),
        ("id 1.5 (not an id): -32600 with id null", b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}',
         error(None, INVALID_REQUEST)),
        ("id an object: -32600 with id null", b'{"jsonrpc":"2.0","id":{"n":1},"method":"tools/list"}',
         error(None, INVALID_REQUEST)),
        ("params an array: -32600, the id echoed",
         b'{"jsonrpc":"2.0","id":"params-array","method":"tools/list","params":[1]}',
         error("params-array", INVALID_REQUEST)),
        ("params a string: -32600, the id echoed",
         b'{"jsonrpc":"2.0","id":"params-string","method":"tools/list","params":"all"}',
         error("params-string", INVALID_REQUEST)),
        ("params null: -32600, the id echoed",
         b'{"jsonrpc":"2.0","id":"params-null","method":"tools/list","params":null}',
         error("params-null", INVALID_REQUEST)),
        ("a notification whose params is a number: -32600 with id null",
         b'{"jsonrpc":"2.0","method":"notifications/initialized","params":7}', error(None, INVALID_REQUEST)),
        ("an unknown method: -32601, the id echoed",
         b'{"jsonrpc":"2.0","id":"unknown","method":"no/such/method"}', error("unknown", METHOD_NOT_FOUND)),
        ("an empty line: no message, no answer", b"", None),
        ("spaces and a tab: no message, no answer", b"  \t ", None),
        ("an unknown notification: never answered",
         b'{"jsonrpc":"2.0","method":"notifications/no-such-thing"}', None),
        ("a response from the client to nothing the server asked: ignored",
         b'{"jsonrpc":"2.0","id":"stray","result":{}}', None),
    ]


def bad_input_then_valid(make: Make) -> list[Say]:
    """Each bad line, then a valid request that must still be served."""
    steps = []
    for number, (what, line, answer) in enumerate(bad_lines(), start=1):
        steps.append(say(line, *([answer] if answer else []), note=what))
        steps.append(read_graph(make, f"after-{number}"))
    crlf = make("crlf", "tools/call", tool("read_graph", {}))
    steps.append(say(compact(crlf) + b"\r", result("crlf", structuredContent=EMPTY_GRAPH),
                     note="a request line ending in CR LF is served like any other"))
    return steps


def oversize(make: Make) -> list[Say]:
    """A well-formed request padded past the 16 MiB line limit is refused whole: its id is never read."""
    padded = make("too-big", "tools/call", tool("search_nodes", {"query": "PAD"}))
    prefix, suffix = compact(padded).decode().split("PAD")
    return [
        say(RepeatLine("x", OVERSIZE, prefix, suffix), error(None, INVALID_REQUEST, says=["exceeds the limit"]),
            note="a 17 MiB request, over the 16 MiB limit: -32600 with id null"),
        read_graph(make, "after-too-big"),
    ]


def argument_errors(make: Make) -> list[Say]:
    """Arguments that break a tool's input schema: a tool error (isError) naming the offending path."""
    def call(request_id: str, name: str, arguments: Any, *says: str, note: str) -> Say:
        return say(make(request_id, "tools/call", tool(name, arguments)), tool_error(request_id, *says), note=note)

    return [
        call("no-entities", "create_entities", {}, "'entities' is a required property",
             note="a required argument missing: a tool error saying which"),
        call("no-type", "create_entities", {"entities": [{"name": "Ada_Lovelace", "observations": []}]},
             "/entities/0", "'entityType' is a required property",
             note="an entity without entityType: a tool error naming /entities/0"),
        call("names-number", "open_nodes", {"names": 5}, "/names", "is not of type 'array'",
             note="names is a number: a tool error naming /names"),
        call("query-number", "search_nodes", {"query": 7}, "/query", "is not of type 'string'",
             note="query is a number: a tool error naming /query"),
        call("observation-number", "add_observations",
             {"observations": [{"entityName": "Ada_Lovelace", "contents": ["fine", 3]}]},
             "/observations/0/contents/1", note="one content is a number: a tool error naming its path"),
    ]


def unknown_tools(make: Make) -> list[Say]:
    return [
        say(make("unknown-tool", "tools/call", tool("no_such_tool", {})),
            error("unknown-tool", INVALID_PARAMS, data={"name": "no_such_tool"}, says=["Unknown tool: no_such_tool"]),
            note="an unknown tool is a protocol error, -32602, with the name in data"),
        say(make("no-name", "tools/call", {"arguments": {}}), error("no-name", INVALID_PARAMS),
            note="tools/call without a tool name: -32602"),
        say(make("arguments-array", "tools/call", tool("read_graph", [])), error("arguments-array", INVALID_PARAMS),
            note="arguments that are not an object: -32602"),
        say(make("bad-cursor", "tools/list", {"cursor": "no-such-cursor"}),
            error("bad-cursor", INVALID_PARAMS, data={"cursor": "no-such-cursor"}),
            note="a cursor this server never gave: -32602 with the cursor in data"),
    ]


def graph_rule_errors(make: Make) -> list[Say]:
    """The memory's own rules: writes naming missing entities fail whole, as tool errors."""
    return [
        say(make("relate-missing", "tools/call", tool("create_relations", {"relations": [
            {"from": "Ada_Lovelace", "to": "Nobody", "relationType": "knows"}]})),
            tool_error("relate-missing", "Entit", "not found"),
            note="create_relations between entities that do not exist: a tool error, nothing created"),
        say(make("observe-missing", "tools/call", tool("add_observations", {"observations": [
            {"entityName": "Nobody", "contents": ["Exists"]}]})),
            tool_error("observe-missing", "Nobody", "not found"),
            note="add_observations to an entity that does not exist: a tool error, nothing added"),
        read_graph(make, "still-empty"),
    ]


# --- the scripts --------------------------------------------------------------------------------------


def before_any_era() -> list[Script]:
    return [
        Script(
            "edge/before-era-ping-then-legacy.jsonl",
            "A ping before any era is answered with an empty result and picks no era; initialize then "
            "makes the connection legacy, where ping and tools/list without _meta are served.",
            (
                say(request("ping", "ping"), result("ping", exactly={}), note="ping before any era: {}"),
                *open_legacy(),
                say(request("legacy-ping", "ping"), result("legacy-ping", exactly={})),
                say(request("list", "tools/list"), result("list", lacks=("resultType", "_meta"))),
            ),
        ),
        Script(
            "edge/before-era-ping-then-modern.jsonl",
            "A ping before any era is answered and picks nothing; server/discover then makes the "
            "connection modern, and a later initialize is refused with -32022 (supported and requested "
            "in data) while modern requests go on being served.",
            (
                say(request("ping", "ping"), result("ping", exactly={}), note="ping before any era: {}"),
                *open_modern(),
                say(initialize("late-init"), error("late-init", UNSUPPORTED_VERSION,
                                                     data={"supported": KNOWN_VERSIONS, "requested": LEGACY_VERSION}),
                    note="initialize on a modern connection: -32022, not an unknown method"),
                say(modern("list", "tools/list"), result("list", resultType="complete")),
            ),
        ),
        Script(
            "edge/before-era-refusals-pick-no-era.jsonl",
            "Before any era: tools/list without _meta is refused with -32602 and a message explaining both "
            "ways in; unparsable lines, unknown methods, unsupported modern versions, missing _meta keys and "
            "failed modern calls are refused too, and none of them picks an era: initialize still works and "
            "makes the connection legacy, where even a request with modern _meta is served legacy.",
            (
                say(request("no-meta", "tools/list"),
                    error("no-meta", INVALID_PARAMS, says=[PROTOCOL_VERSION, "_meta", "initialize", MODERN_VERSION,
                                                           LEGACY_VERSION]),
                    note="tools/list with no _meta first: -32602 explaining the modern _meta and initialize"),
                say(b"{not json", error(None, PARSE_ERROR), note="invalid JSON before any era: -32700"),
                say(request("unknown", "no/such/method"), error("unknown", METHOD_NOT_FOUND)),
                say(request("future", "tools/list", versioned("2099-01-01")),
                    error("future", UNSUPPORTED_VERSION, data={"supported": KNOWN_VERSIONS, "requested": "2099-01-01"}),
                    note="an unknown modern version: -32022 listing the supported ones"),
                say(request("no-capabilities", "tools/list", {"_meta": {PROTOCOL_VERSION: MODERN_VERSION}}),
                    error("no-capabilities", INVALID_PARAMS, says=[CLIENT_CAPABILITIES])),
                say(modern("unknown-tool", "tools/call", tool("no_such_tool", {})),
                    error("unknown-tool", INVALID_PARAMS, data={"name": "no_such_tool"})),
                say(modern("missing-resource", "resources/read", {"uri": MISSING}),
                    error("missing-resource", INVALID_PARAMS, data={"uri": MISSING})),
                say(modern("bad-listen", "subscriptions/listen", {}), error("bad-listen", INVALID_PARAMS)),
                *open_legacy(),
                say(modern("modern-meta", "tools/list"), result("modern-meta", lacks=("resultType", "_meta")),
                    note="modern _meta on a legacy connection: served in the legacy shape"),
            ),
        ),
    ]


def legacy_scripts() -> list[Script]:
    return [
        Script(
            "edge/legacy-bad-input.jsonl",
            "Legacy era: every kind of malformed line (parse errors -32700 with id null, invalid requests "
            "-32600 echoing a usable id, an unknown method -32601; empty lines, notifications and client "
            "responses never answered), each followed by a valid read_graph that is still served.",
            (*open_legacy(), *bad_input_then_valid(request)),
        ),
        Script(
            "edge/legacy-oversize-line.jsonl",
            "Legacy era: a 17 MiB request line is refused with -32600 and id null (the 16 MiB limit), and "
            "the next request is served.",
            (*open_legacy(), *oversize(request)),
        ),
        Script(
            "edge/legacy-era-rules.jsonl",
            "Legacy era: initialize with an unknown version is answered with 2025-11-25; requests carrying "
            "modern _meta are served in the legacy shape; server/discover and subscriptions/listen exist "
            "only in the modern era (-32601); ping and the resource template list are served.",
            (
                say(initialize("init", "2099-01-01"), result("init", protocolVersion=LEGACY_VERSION),
                    note="an unknown version: the server answers with the version it speaks"),
                say(notification("notifications/initialized")),
                say(modern("modern-meta", "tools/list"), result("modern-meta", lacks=("resultType", "_meta", "ttlMs"))),
                say(modern("modern-read", "resources/read", {"uri": GRAPH}),
                    result("modern-read", lacks=("resultType", "_meta", "ttlMs"))),
                say(modern("discover", "server/discover"), error("discover", METHOD_NOT_FOUND),
                    note="server/discover on a legacy connection: -32601"),
                say(modern("listen", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH]}}),
                    error("listen", METHOD_NOT_FOUND), note="subscriptions/listen on a legacy connection: -32601"),
                say(request("log-level", "logging/setLevel", {"level": "debug"}), error("log-level", METHOD_NOT_FOUND),
                    note="logging is not offered: -32601"),
                say(request("ping", "ping"), result("ping", exactly={})),
                say(request("templates", "resources/templates/list"),
                    result("templates", exactly={"resourceTemplates": []})),
            ),
        ),
        Script(
            "edge/legacy-errors.jsonl",
            "Legacy era: unknown tools and bad tools/call params are -32602; unknown resources are -32002 "
            "with data.uri (read and subscribe); invalid tool arguments are tool errors naming the path; "
            "writes that break the graph's rules are tool errors that change nothing.",
            (
                *open_legacy(),
                *unknown_tools(request),
                say(request("missing-read", "resources/read", {"uri": MISSING}),
                    error("missing-read", RESOURCE_NOT_FOUND, data={"uri": MISSING}),
                    note="an unknown resource in the legacy era: -32002 with the uri in data"),
                say(request("missing-subscribe", "resources/subscribe", {"uri": MISSING}),
                    error("missing-subscribe", RESOURCE_NOT_FOUND, data={"uri": MISSING})),
                say(request("no-uri", "resources/read", {}), error("no-uri", INVALID_PARAMS)),
                *argument_errors(request),
                *graph_rule_errors(request),
            ),
        ),
        Script(
            "edge/legacy-subscription-cancel-and-end-of-input.jsonl",
            "Legacy era: a subscription to the graph announces writes that change it, not writes that "
            "change nothing; cancelling requests that are already answered, unknown or unnamed draws "
            "nothing; after unsubscribing writes are silent; a last line without a newline is still "
            "served when stdin closes, and the server exits 0.",
            (
                *open_legacy(),
                say(request("subscribe", "resources/subscribe", {"uri": GRAPH}), result("subscribe", exactly={})),
                say(request("create", "tools/call", tool("create_entities", {"entities": [ADA]})),
                    result("create", structuredContent={"entities": [ADA]}), updated()),
                say(request("create-again", "tools/call", tool("create_entities", {"entities": [ADA]})),
                    result("create-again", structuredContent={"entities": [], "skipped": ["Ada_Lovelace"]}),
                    note="a write that changes nothing: answered, and no update"),
                say(cancel("create"), note="cancelling a request already answered: nothing happens"),
                say(cancel("never-sent"), note="cancelling an id never sent: nothing happens"),
                say(notification("notifications/cancelled"), note="a cancellation naming nothing: ignored"),
                say(request("unsubscribe", "resources/unsubscribe", {"uri": GRAPH}), result("unsubscribe", exactly={})),
                say(request("quiet-write", "tools/call", tool("create_entities", {"entities": [BABBAGE]})),
                    result("quiet-write", structuredContent={"entities": [BABBAGE]}),
                    note="unsubscribed: the write is answered without an update"),
                say(request("unsubscribe-again", "resources/unsubscribe", {"uri": GRAPH}),
                    result("unsubscribe-again", exactly={})),
                say(request("last", "tools/call", tool("open_nodes", {"names": ["Ada_Lovelace"]})), newline=False,
                    note="the last line has no newline; closing stdin ends it"),
            ),
            CloseStdin((result("last", structuredContent={"entities": [ADA], "relations": []}),)),
        ),
        Script(
            "edge/legacy-sigterm.jsonl",
            "Legacy era: SIGTERM with a subscription open closes the server gracefully: nothing more is "
            "written, exit status 0.",
            (
                *open_legacy(),
                say(request("subscribe", "resources/subscribe", {"uri": GRAPH}), result("subscribe", exactly={})),
                read_graph(request, "read"),
            ),
            Signal("SIGTERM"),
        ),
    ]


def modern_scripts() -> list[Script]:
    meta_problems: list[tuple[str, Any, str]] = [
        ("no _meta at all", None, "_meta"),
        ("_meta a string", MODERN_VERSION, "_meta"),
        ("_meta without the protocol version", {CLIENT_CAPABILITIES: {}}, PROTOCOL_VERSION),
        ("the protocol version a number", {PROTOCOL_VERSION: 20260728, CLIENT_CAPABILITIES: {}}, PROTOCOL_VERSION),
        ("_meta without client capabilities", {PROTOCOL_VERSION: MODERN_VERSION}, CLIENT_CAPABILITIES),
        ("client capabilities an array", {PROTOCOL_VERSION: MODERN_VERSION, CLIENT_CAPABILITIES: []},
         CLIENT_CAPABILITIES),
    ]
    missing_meta = [
        say(request(f"meta-{number}", "tools/list", {} if meta is None else {"_meta": meta}),
            error(f"meta-{number}", INVALID_PARAMS, says=[named]), note=f"{what}: -32602 naming {named}")
        for number, (what, meta, named) in enumerate(meta_problems, start=1)
    ]
    unsupported = [
        say(request(f"version-{version}", "tools/list", versioned(version)),
            error(f"version-{version}", UNSUPPORTED_VERSION, data={"supported": KNOWN_VERSIONS, "requested": version}),
            note=f"protocol version {version!r}: -32022 with supported and requested in data")
        for version in ("2099-01-01", LEGACY_VERSION, "")
    ]
    removed = [
        say(modern(method, method, params), error(method, METHOD_NOT_FOUND), note=f"{method} is not in the modern era")
        for method, params in (("ping", None), ("resources/subscribe", {"uri": GRAPH}),
                               ("resources/unsubscribe", {"uri": GRAPH}), ("logging/setLevel", {"level": "debug"}))
    ]
    return [
        Script(
            "edge/modern-bad-input.jsonl",
            "Modern era: every kind of malformed line (parse errors -32700 with id null, invalid requests "
            "-32600 echoing a usable id, an unknown method -32601; empty lines, notifications and client "
            "responses never answered), each followed by a valid read_graph that is still served.",
            (*open_modern(), *bad_input_then_valid(modern)),
        ),
        Script(
            "edge/modern-oversize-line.jsonl",
            "Modern era: a 17 MiB request line is refused with -32600 and id null (the 16 MiB limit), and "
            "the next request is served.",
            (*open_modern(), *oversize(modern)),
        ),
        Script(
            "edge/modern-era-rules.jsonl",
            "Modern era: methods the 2026-07-28 revision removed are -32601; initialize is -32022; "
            "unsupported versions are -32022 with supported and requested in data; a request missing "
            "either required _meta key, or carrying it with the wrong type, is -32602 naming the key; a "
            "proper request is then still served.",
            (
                *open_modern(),
                *removed,
                say(initialize("init"), error("init", UNSUPPORTED_VERSION,
                                               data={"supported": KNOWN_VERSIONS, "requested": LEGACY_VERSION})),
                *unsupported,
                *missing_meta,
                say(modern("list", "tools/list"), result("list", resultType="complete", ttlMs=3_600_000)),
            ),
        ),
        Script(
            "edge/modern-errors.jsonl",
            "Modern era: unknown tools and bad tools/call params are -32602; an unknown resource is -32602 "
            "with data.uri; invalid tool arguments are tool errors naming the path; writes that break the "
            "graph's rules are tool errors that change nothing.",
            (
                *open_modern(),
                *unknown_tools(modern),
                say(modern("missing-read", "resources/read", {"uri": MISSING}),
                    error("missing-read", INVALID_PARAMS, data={"uri": MISSING}),
                    note="an unknown resource in the modern era: -32602 with the uri in data"),
                say(modern("no-uri", "resources/read", {}), error("no-uri", INVALID_PARAMS)),
                *argument_errors(modern),
                *graph_rule_errors(modern),
            ),
        ),
        modern_listen(),
        Script(
            "edge/modern-sigterm.jsonl",
            "Modern era: two listens on the graph each get the update of a write, tagged with their own id; "
            "on SIGTERM the server ends both with their graceful-closure responses and exits 0.",
            (
                *open_modern(),
                say(modern("updates", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH]}}),
                    acknowledged("updates", {"resourceSubscriptions": [GRAPH]})),
                say(modern(7, "subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH]}}),
                    acknowledged(7, {"resourceSubscriptions": [GRAPH]})),
                say(modern("create", "tools/call", tool("create_entities", {"entities": [ADA]})),
                    result("create", structuredContent={"entities": [ADA]}), updated("updates"), updated(7)),
            ),
            Signal("SIGTERM", (closed("updates"), closed(7))),
        ),
    ]


def modern_listen() -> Script:
    listen_everything = {"resourceSubscriptions": [GRAPH, MISSING, GRAPH], "toolsListChanged": True,
                         "resourcesListChanged": True, "promptsListChanged": True}
    return Script(
        "edge/modern-listen.jsonl",
        "Modern era subscriptions/listen: the acknowledgement honours only the subset the server supports "
        "(the graph, once; no list-changed types, as its lists never change), or nothing; malformed "
        "listens are -32602; a request reusing the id of an open listen is -32600; writes that change the "
        "graph are announced on the listen, writes that change nothing are not; a cancelled listen gets no "
        "response, ever, and no more updates; at end of input every open listen gets its graceful closure.",
        (
            *open_modern(),
            say(modern("L1", "subscriptions/listen", {"notifications": listen_everything}),
                acknowledged("L1", {"resourceSubscriptions": [GRAPH]}),
                note="the ack names what is honoured: the graph once; unknown URIs and list-changed types dropped"),
            say(modern(2, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}),
                acknowledged(2, {}), note="nothing asked for is offered: acknowledged with an empty filter"),
            say(modern("no-filter", "subscriptions/listen", {}), error("no-filter", INVALID_PARAMS)),
            say(modern("uri-not-list", "subscriptions/listen", {"notifications": {"resourceSubscriptions": GRAPH}}),
                error("uri-not-list", INVALID_PARAMS)),
            say(modern("L1", "tools/list"), error("L1", INVALID_REQUEST, says=["already in use"]),
                note="an id still in flight (the open listen's): -32600"),
            say(modern("create", "tools/call", tool("create_entities", {"entities": [ADA]})),
                result("create", structuredContent={"entities": [ADA]}), updated("L1")),
            say(modern("create-again", "tools/call", tool("create_entities", {"entities": [ADA]})),
                result("create-again", structuredContent={"entities": [], "skipped": ["Ada_Lovelace"]}),
                note="a write that changes nothing: answered, and no update"),
            say(cancel("L1"), note="cancelling the listen: it is never answered and hears nothing more"),
            say(modern("quiet-write", "tools/call", tool("create_entities", {"entities": [BABBAGE]})),
                result("quiet-write", structuredContent={"entities": [BABBAGE]})),
            say(modern("L3", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH]}}),
                acknowledged("L3", {"resourceSubscriptions": [GRAPH]})),
            say(modern("observe", "tools/call", tool("add_observations", {"observations": [
                {"entityName": "Ada_Lovelace", "contents": ["Born in 1815"]}]})),
                result("observe", structuredContent={"results": [
                    {"entityName": "Ada_Lovelace", "addedObservations": ["Born in 1815"]}]}),
                updated("L3")),
        ),
        CloseStdin((closed(2), closed("L3"))),
    )


SCRIPTS = (*before_any_era(), *legacy_scripts(), *modern_scripts())


def main() -> int:
    for script in SCRIPTS:
        out, transcript = record(script, MEMORY_SERVER)
        print(f"recorded {relative(out)}: {len(transcript.steps)} lines, replays against {' '.join(MEMORY_SERVER)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
