"""The protocol engine without I/O: framing, classification, era selection, stamping, pagination,
and a `Session` driven with bytes in-process."""

from __future__ import annotations

import base64
import json
import tracemalloc
from typing import Any

import anyio
import example_server
import pytest
from conftest import (
    CLIENT_CAPABILITIES,
    LEGACY_SPEC,
    MODERN_SPEC,
    PROTOCOL_VERSION,
    SERVER_INFO,
    SUBSCRIPTION_ID,
    WAIT_SECONDS,
    assert_legacy_result,
    assert_modern_result,
    assert_schema,
    cancel,
    error_code,
    initialize,
    modern_meta,
    modern_request,
    notification,
    open_session,
    request,
)

from protocol import LEGACY_VERSIONS, MODERN_VERSIONS, CacheHint, Era, ProtocolError, Server
from protocol.dispatch import PAGE_SIZE, paginate
from protocol.eras import EraSelector, stamp
from protocol.errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION
from protocol.framing import MAX_LINE_BYTES, Line, LineSplitter, OversizeLine
from protocol.messages import Blank, Invalid, Notification, Request, Response, classify

COUNTER = example_server.COUNTER_URI
WATCH_COUNTER = {"resourceSubscriptions": [COUNTER]}


# --- LineSplitter ---------------------------------------------------------------------------------------

def feed_all(splitter: LineSplitter, *chunks: bytes) -> list[Any]:
    return [frame for chunk in chunks for frame in splitter.feed(chunk)] + splitter.close()


def test_the_line_limit_is_16_mib() -> None:
    assert MAX_LINE_BYTES == 16 * 1024 * 1024


def test_each_newline_ends_one_line() -> None:
    assert feed_all(LineSplitter(), b'{"a":1}\n{"b":2}\n') == [Line(b'{"a":1}'), Line(b'{"b":2}')]


def test_lines_are_the_same_whatever_the_chunk_boundaries() -> None:
    stream = b'{"a":1}\r\n\n{"b":"x y"}\nlast'
    expected = [Line(b'{"a":1}'), Line(b""), Line(b'{"b":"x y"}'), Line(b"last")]
    for cut in range(len(stream) + 1):
        for second_cut in range(cut, len(stream) + 1):
            chunks = (stream[:cut], stream[cut:second_cut], stream[second_cut:])
            assert feed_all(LineSplitter(), *chunks) == expected, chunks


def test_a_partial_line_waits_for_its_newline() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a"') == []
    assert splitter.feed(b":1}") == []
    assert splitter.feed(b"\n") == [Line(b'{"a":1}')]


def test_a_carriage_return_before_the_newline_is_not_part_of_the_line() -> None:
    assert feed_all(LineSplitter(), b"abc\r\n") == [Line(b"abc")]


def test_a_final_line_without_newline_counts_at_end_of_input() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a":1}') == []
    assert splitter.close() == [Line(b'{"a":1}')]


@pytest.mark.parametrize("tail", [b"", b"   ", b" \t\r"])
def test_nothing_but_whitespace_at_end_of_input_is_no_line(tail: bytes) -> None:
    splitter = LineSplitter()
    splitter.feed(tail)
    assert splitter.close() == []


def test_a_line_of_exactly_the_limit_is_accepted_one_byte_more_is_not() -> None:
    assert feed_all(LineSplitter(8), b"12345678\n") == [Line(b"12345678")]
    assert feed_all(LineSplitter(8), b"123456789\n") == [OversizeLine(9, 8)]


def test_the_limit_holds_when_a_line_is_split_across_chunks() -> None:
    assert feed_all(LineSplitter(8), b"12345", b"678\n") == [Line(b"12345678")]
    assert feed_all(LineSplitter(8), b"12345", b"6789\n") == [OversizeLine(9, 8)]


def test_an_over_long_line_is_reported_with_its_size_and_the_next_line_is_intact() -> None:
    frames = feed_all(LineSplitter(8), b"0123456789\nok\n")
    assert frames == [OversizeLine(10, 8), Line(b"ok")]


def test_an_over_long_line_over_many_chunks_is_one_frame() -> None:
    chunks = [b"abcde"] * 10 + [b"\nnext\n"]
    assert feed_all(LineSplitter(8), *chunks) == [OversizeLine(50, 8), Line(b"next")]


def test_an_over_long_line_cut_by_end_of_input_is_still_reported() -> None:
    assert feed_all(LineSplitter(8), b"x" * 20) == [OversizeLine(20, 8)]


def test_an_over_long_line_is_dropped_not_buffered() -> None:
    # 32 MiB of one line through a 1 KiB limit: memory must stay near one chunk, not grow with the line.
    chunk = b"x" * 65536
    splitter = LineSplitter(1024)
    tracemalloc.start()
    try:
        for _ in range(512):
            assert splitter.feed(chunk) == []
        frames = splitter.feed(b"\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert frames == [OversizeLine(512 * 65536, 1024)]
    assert peak < 256 * 1024, f"peak {peak} bytes while dropping an over-long line"


# --- classify ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [b"", b"   ", b"\t \t"])
def test_an_empty_or_blank_line_is_no_message(raw: bytes) -> None:
    assert classify(Line(raw)) == Blank()


@pytest.mark.parametrize("raw", [
    b"{", b"{not json}", b'{"jsonrpc":"2.0","id":1,"method":"ping"', b"\xff\xfe", b"nul",
    b'{"jsonrpc":"2.0","id":1,"method":"p\xffng"}', b'{"jsonrpc":"2.0","id":1,"method":"ping"} trailing',
    b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
])
def test_invalid_json_is_a_parse_error_with_id_null(raw: bytes) -> None:
    incoming = classify(Line(raw))
    assert isinstance(incoming, Invalid) and incoming.id is None
    assert incoming.error.code == PARSE_ERROR


def test_json_nested_too_deep_to_decode_is_a_parse_error_not_a_crash() -> None:
    incoming = classify(Line(b"[" * 100_000 + b"]" * 100_000))
    assert isinstance(incoming, Invalid) and incoming.id is None
    assert incoming.error.code == PARSE_ERROR


def test_an_over_long_line_is_an_invalid_request_with_id_null() -> None:
    incoming = classify(OversizeLine(20, 8))
    assert isinstance(incoming, Invalid) and incoming.id is None
    assert incoming.error.code == INVALID_REQUEST
    assert "20" in incoming.error.message and "8" in incoming.error.message


BAD_OBJECTS = [
    # (message, id the error must carry)
    (42, None),
    ("ping", None),
    (None, None),
    (True, None),
    ([], None),
    ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], None),
    ({}, None),
    ({"id": 3, "method": "ping"}, 3),
    ({"jsonrpc": "1.0", "id": "a", "method": "ping"}, "a"),
    ({"jsonrpc": 2.0, "id": 4, "method": "ping"}, 4),
    ({"jsonrpc": "2.0", "id": 5, "method": 5}, 5),
    ({"jsonrpc": "2.0", "id": 5, "method": None}, 5),
    ({"jsonrpc": "2.0", "id": 6}, 6),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": [1]}, 8),
    ({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": "x"}, 8),
    ({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": None}, 8),
    ({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": 3}, 8),
    ({"jsonrpc": "2.0", "method": "notifications/initialized", "params": []}, None),
]


@pytest.mark.parametrize(("message", "echo"), BAD_OBJECTS)
def test_json_that_is_not_a_request_is_an_invalid_request(message: Any, echo: Any) -> None:
    incoming = classify(Line(json.dumps(message).encode()))
    assert isinstance(incoming, Invalid), incoming
    assert incoming.error.code == INVALID_REQUEST
    assert type(incoming.id) is type(echo) and incoming.id == echo


@pytest.mark.parametrize("request_id", [0, 7, -3, 2**40, "", "7", "a b"])
def test_a_request_keeps_its_id_exactly(request_id: Any) -> None:
    incoming = classify(Line(json.dumps(request(request_id, "tools/list", {"cursor": "c"})).encode()))
    assert incoming == Request(request_id, "tools/list", {"cursor": "c"})
    assert type(incoming.id) is type(request_id)


def test_absent_params_are_an_empty_object() -> None:
    assert classify(Line(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')) == Request(1, "ping", {})


def test_a_message_without_id_is_a_notification() -> None:
    raw = json.dumps(notification("notifications/cancelled", {"requestId": 1})).encode()
    assert classify(Line(raw)) == Notification("notifications/cancelled", {"requestId": 1})


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": 1, "result": {}},
    {"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "no"}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "no"}},
])
def test_a_response_from_the_peer_is_recognised_so_it_can_be_ignored(message: dict) -> None:
    assert classify(Line(json.dumps(message).encode())) == Response()


# --- EraSelector -----------------------------------------------------------------------------------------

def modern(method: str = "tools/list", **meta: Any) -> Request:
    return Request(1, method, {"_meta": {**modern_meta(), **meta}})


def test_initialize_picks_the_legacy_era_once_served() -> None:
    selector = EraSelector()
    era = selector.route(Request(1, "initialize", {"protocolVersion": "2025-06-18"}))
    assert era is Era.LEGACY and selector.era is None
    selector.served(era)
    assert selector.era is Era.LEGACY


def test_a_request_with_modern_meta_picks_the_modern_era_once_served() -> None:
    selector = EraSelector()
    era = selector.route(modern())
    assert era is Era.MODERN
    selector.served(era)
    assert selector.era is Era.MODERN


def test_ping_before_any_era_picks_nothing() -> None:
    selector = EraSelector()
    era = selector.route(Request(1, "ping", {}))
    assert era is None
    selector.served(era)
    assert selector.era is None


def test_the_first_era_served_stays() -> None:
    selector = EraSelector()
    selector.served(Era.MODERN)
    selector.served(Era.LEGACY)
    assert selector.era is Era.MODERN


def test_a_request_no_era_accepts_says_what_is_missing_and_how_to_fix_it() -> None:
    selector = EraSelector()
    with pytest.raises(ProtocolError) as raised:
        selector.route(Request(1, "tools/list", {}))
    error = raised.value
    assert error.code == INVALID_PARAMS
    assert PROTOCOL_VERSION in error.message and "_meta" in error.message
    for version in (*MODERN_VERSIONS, *LEGACY_VERSIONS):
        assert version in error.message
    assert "initialize" in error.message
    assert selector.era is None


def test_on_a_legacy_connection_modern_meta_is_just_legacy() -> None:
    selector = EraSelector()
    selector.served(Era.LEGACY)
    assert selector.route(modern()) is Era.LEGACY
    assert selector.route(Request(1, "tools/list", {})) is Era.LEGACY


def test_on_a_modern_connection_initialize_is_an_unsupported_version() -> None:
    selector = EraSelector()
    selector.served(Era.MODERN)
    with pytest.raises(ProtocolError) as raised:
        selector.route(Request(1, "initialize", {"protocolVersion": "2025-11-25"}))
    assert raised.value.code == UNSUPPORTED_PROTOCOL_VERSION
    assert raised.value.data == {"supported": list(MODERN_VERSIONS), "requested": "2025-11-25"}


@pytest.mark.parametrize(("params", "named"), [
    ({}, PROTOCOL_VERSION),
    ({"_meta": "x"}, PROTOCOL_VERSION),
    ({"_meta": {CLIENT_CAPABILITIES: {}}}, PROTOCOL_VERSION),
    ({"_meta": {PROTOCOL_VERSION: 20260728, CLIENT_CAPABILITIES: {}}}, PROTOCOL_VERSION),
    ({"_meta": {PROTOCOL_VERSION: "2026-07-28"}}, CLIENT_CAPABILITIES),
    ({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: []}}, CLIENT_CAPABILITIES),
    ({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: None}}, CLIENT_CAPABILITIES),
])
def test_on_a_modern_connection_missing_or_mistyped_meta_names_the_key(params: dict, named: str) -> None:
    selector = EraSelector()
    selector.served(Era.MODERN)
    with pytest.raises(ProtocolError) as raised:
        selector.route(Request(1, "tools/list", params))
    assert raised.value.code == INVALID_PARAMS
    assert named in raised.value.message


@pytest.mark.parametrize("version", ["2025-11-25", "2099-01-01", ""])
def test_an_unsupported_modern_version_lists_the_supported_ones(version: str) -> None:
    selector = EraSelector()
    with pytest.raises(ProtocolError) as raised:
        selector.route(modern(**{PROTOCOL_VERSION: version}))
    assert raised.value.code == UNSUPPORTED_PROTOCOL_VERSION
    assert raised.value.data == {"supported": list(MODERN_VERSIONS), "requested": version}
    assert selector.era is None


# --- stamp ------------------------------------------------------------------------------------------------

INFO = {"name": "s", "version": "1"}


@pytest.mark.parametrize("era", [Era.LEGACY, None])
def test_legacy_and_era_less_results_stay_bare(era: Era | None) -> None:
    result = {"tools": [], "_meta": {"k": 1}}
    assert stamp(era, result, CacheHint(5, "public"), INFO) == {"tools": [], "_meta": {"k": 1}}


def test_modern_results_are_complete_signed_and_cache_hinted() -> None:
    result = {"tools": [], "_meta": {"k": 1}}
    stamped = stamp(Era.MODERN, result, CacheHint(5, "public"), INFO)
    assert stamped == {"tools": [], "resultType": "complete", "_meta": {"k": 1, SERVER_INFO: INFO},
                       "ttlMs": 5, "cacheScope": "public"}
    assert result == {"tools": [], "_meta": {"k": 1}}, "the handler's result must not be changed in place"


def test_modern_results_without_a_cache_hint_have_no_ttl() -> None:
    stamped = stamp(Era.MODERN, {"content": []}, None, INFO)
    assert stamped == {"content": [], "resultType": "complete", "_meta": {SERVER_INFO: INFO}}


# --- paginate ---------------------------------------------------------------------------------------------

def items(count: int) -> list[dict[str, Any]]:
    return [{"name": f"item{n}"} for n in range(count)]


@pytest.mark.parametrize("count", [0, 1, PAGE_SIZE])
def test_a_list_that_fits_one_page_has_no_next_cursor(count: int) -> None:
    assert paginate("tools", items(count), {}) == {"tools": items(count)}


def test_a_long_list_is_walked_page_by_page_with_the_cursors_given() -> None:
    everything = items(2 * PAGE_SIZE + 50)
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    pages = 0
    while True:
        page = paginate("tools", everything, params)
        pages += 1
        seen += page["tools"]
        if "nextCursor" not in page:
            break
        assert isinstance(page["nextCursor"], str)
        params = {"cursor": page["nextCursor"]}
    assert pages == 3 and seen == everything


def encoded_cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize("cursor", [
    "bogus", "", 5, [], {}, True, encoded_cursor("offset:0"), encoded_cursor("offset:250"),
    encoded_cursor("offset:-1"), encoded_cursor("page:100"), encoded_cursor("offset:abc"), "\u00e9\u00e9\u00e9",
])
def test_an_unknown_cursor_is_invalid_params(cursor: Any) -> None:
    with pytest.raises(ProtocolError) as raised:
        paginate("tools", items(250), {"cursor": cursor})
    assert raised.value.code == INVALID_PARAMS
    assert raised.value.data == {"cursor": cursor}


# --- Session, driven with bytes ---------------------------------------------------------------------------

def sleep_call(request_id: Any, seconds: float) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": "sleep", "arguments": {"seconds": seconds}})


def add_call(request_id: Any, a: int = 2, b: int = 3) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": "add", "arguments": {"a": a, "b": b}})


@pytest.mark.anyio
async def test_a_slow_request_does_not_block_the_next_and_a_cancelled_one_is_never_answered() -> None:
    async with open_session(example_server.server) as peer:
        await peer.call(initialize())
        peer.send(sleep_call(1, 30))
        peer.send(add_call(2))
        added = await peer.recv()
        assert added["id"] == 2 and added["result"]["structuredContent"] == {"sum": 5}
        peer.send(cancel(1))
        await peer.call(request(3, "ping"))
        assert await peer.finish() == []
        assert not any(json.loads(line).get("id") == 1 for line in peer.lines)


@pytest.mark.anyio
async def test_cancelling_a_request_stops_its_work() -> None:
    server = Server("waiting", "0.1.0")
    started, stopped = anyio.Event(), anyio.Event()

    @server.tool("wait", description="Wait until cancelled.", input_schema={"type": "object"})
    async def wait(arguments: dict[str, Any]) -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    async with open_session(server) as peer:
        peer.send(modern_request("w", "tools/call", {"name": "wait", "arguments": {}}))
        with anyio.fail_after(WAIT_SECONDS):
            await started.wait()
        peer.send(cancel("w"))
        with anyio.fail_after(WAIT_SECONDS):
            await stopped.wait()
        await peer.call(modern_request("after", "tools/list"))
        assert await peer.finish() == []


@pytest.mark.anyio
async def test_ids_1_and_string_1_are_two_requests() -> None:
    async with open_session(example_server.server) as peer:
        await peer.call(initialize())
        peer.send(sleep_call(1, 30))
        answer = await peer.call(add_call("1"))
        assert answer["result"]["structuredContent"] == {"sum": 5}
        peer.send(cancel("1"))  # the string 1 is answered already: this names nothing in flight
        peer.send(cancel(1))
        await peer.call(request(4, "ping"))
        assert await peer.finish() == []


@pytest.mark.anyio
async def test_cancelling_string_1_leaves_integer_1_running() -> None:
    async with open_session(example_server.server) as peer:
        await peer.call(initialize())
        peer.send(sleep_call(1, 0.05))
        peer.send(cancel("1"))
        answer = await peer.recv()
        assert answer["id"] == 1 and answer["result"]["content"][0]["text"] == "slept 0.05"


@pytest.mark.anyio
async def test_an_id_already_in_flight_is_refused_and_the_first_request_lives_on() -> None:
    async with open_session(example_server.server) as peer:
        await peer.call(initialize())
        peer.send(sleep_call(5, 0.05))
        duplicate = await peer.call(add_call(5))
        assert error_code(duplicate) == INVALID_REQUEST
        first = await peer.recv()
        assert first["id"] == 5 and first["result"]["content"][0]["text"] == "slept 0.05"


@pytest.mark.anyio
async def test_notifications_and_peer_responses_are_never_answered() -> None:
    async with open_session(example_server.server) as peer:
        await peer.call(initialize())
        for message in (
            notification("notifications/initialized"),
            notification("notifications/cancelled", {"requestId": 404}),
            notification("notifications/cancelled", {"requestId": {"unhashable": []}}),
            notification("notifications/cancelled"),
            notification("tools/list"),
            notification("no/such/notification", {"x": 1}),
            {"jsonrpc": "2.0", "id": 9, "result": {}},
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "peer says no"}},
        ):
            peer.send(message)
        await peer.call(request(10, "ping"))
        assert await peer.finish() == []


@pytest.mark.anyio
async def test_an_unexpected_fault_is_an_internal_error_with_the_traceback_only_in_the_log(
        caplog: pytest.LogCaptureFixture) -> None:
    async with open_session(example_server.server) as peer:
        await peer.call(initialize())
        crashed = await peer.call(request(1, "tools/call", {"name": "crash", "arguments": {}}))
        assert error_code(crashed) == -32603
        assert "Traceback" not in b"".join(peer.lines).decode()
        assert "unexpected" not in crashed["error"]["message"]
        assert await peer.call(add_call(2))
    logged = [record for record in caplog.records if record.exc_info]
    assert logged and isinstance(logged[0].exc_info[1], RuntimeError)


@pytest.mark.anyio
async def test_closing_ends_each_open_listen_with_its_graceful_response() -> None:
    async with open_session(example_server.server) as peer:
        peer.send(modern_request("first", "subscriptions/listen", {"notifications": WATCH_COUNTER}))
        peer.send(modern_request(2, "subscriptions/listen", {"notifications": {}}))
        acks = [await peer.recv(), await peer.recv()]
        assert sorted(str(ack["params"]["_meta"][SUBSCRIPTION_ID]) for ack in acks) == ["2", "first"]
        closures = await peer.finish()
        assert sorted(str(closure["id"]) for closure in closures) == ["2", "first"]
        for closure in closures:
            assert_modern_result("SubscriptionsListenResult", closure["result"], cached=False)
            assert closure["result"]["_meta"][SUBSCRIPTION_ID] == closure["id"]


@pytest.mark.anyio
async def test_a_resource_update_reaches_each_subscriber_in_its_own_era() -> None:
    async with open_session(example_server.server) as legacy, open_session(example_server.server) as modern_peer:
        await legacy.call(initialize())
        await legacy.call(request(1, "resources/subscribe", {"uri": COUNTER}))
        modern_peer.send(modern_request(7, "subscriptions/listen", {"notifications": WATCH_COUNTER}))
        await modern_peer.recv()
        example_server.server.resource_updated(COUNTER)
        example_server.server.resource_updated("example://unwatched")
        legacy_update = await legacy.recv()
        modern_update = await modern_peer.recv()
        assert legacy_update == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                 "params": {"uri": COUNTER}}
        assert_schema(LEGACY_SPEC, "ResourceUpdatedNotification", legacy_update)
        assert modern_update["params"] == {"_meta": {SUBSCRIPTION_ID: 7}, "uri": COUNTER}
        assert_schema(MODERN_SPEC, "ResourceUpdatedNotification", modern_update)
        # Inner session first: closing a session cancels everything its host task does afterwards.
        assert [closure["id"] for closure in await modern_peer.finish()] == [7]
        assert await legacy.finish() == []


# --- dispatch, through an embedding server ----------------------------------------------------------------

def ordering_server(tool_count: int = 1) -> tuple[Server, list[dict[str, Any]]]:
    """A server with an `order` tool whose schema nests, recording every call its handler sees."""
    server = Server("ordering", "0.1.0")
    calls: list[dict[str, Any]] = []

    @server.tool("order", description="Order named items.", input_schema={
        "type": "object",
        "properties": {"items": {"type": "array", "items": {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}},
        "required": ["items"], "additionalProperties": False})
    async def order(arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(arguments)
        return {"ordered": len(arguments["items"])}

    for number in range(1, tool_count):
        server.tool(f"filler{number:03}", description="Pads the tool list.", input_schema={"type": "object"})(order)
    return server, calls


@pytest.mark.anyio
@pytest.mark.parametrize(("arguments", "path", "why"), [
    ({"items": [{"name": "a"}, {"name": 3}]}, "/items/1/name", "is not of type 'string'"),
    ({"items": [{}]}, "/items/0", "'name' is a required property"),
    ({}, "the top level", "'items' is a required property"),
    ({"items": [], "extra": 1}, "the top level", "Additional properties"),
    ({"items": "abc"}, "/items", "is not of type 'array'"),
])
async def test_arguments_breaking_the_schema_are_a_tool_error_naming_path_and_reason(
        arguments: dict, path: str, why: str) -> None:
    server, calls = ordering_server()
    async with open_session(server) as peer:
        await peer.call(initialize())
        answer = await peer.call(request(1, "tools/call", {"name": "order", "arguments": arguments}))
        result = answer["result"]
        assert_legacy_result("CallToolResult", result)
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert path in text and why in text, text
    assert calls == [], "the handler must not run on invalid arguments"


@pytest.mark.anyio
async def test_valid_arguments_reach_the_handler() -> None:
    server, calls = ordering_server()
    async with open_session(server) as peer:
        peer.send(modern_request(1, "tools/call", {"name": "order", "arguments": {"items": [{"name": "tea"}]}}))
        result = (await peer.recv())["result"]
        assert_modern_result("CallToolResult", result, cached=False)
        assert result["structuredContent"] == {"ordered": 1} and "isError" not in result
        assert json.loads(result["content"][0]["text"]) == {"ordered": 1}
    assert calls == [{"items": [{"name": "tea"}]}]


@pytest.mark.anyio
@pytest.mark.parametrize("params", [
    {"name": "nope", "arguments": {}}, {"arguments": {}}, {"name": 3}, {"name": "order", "arguments": [1]},
])
async def test_an_unknown_tool_or_malformed_call_is_invalid_params(params: dict) -> None:
    server, calls = ordering_server()
    async with open_session(server) as peer:
        await peer.call(initialize())
        assert error_code(await peer.call(request(1, "tools/call", params))) == INVALID_PARAMS
        assert (await peer.call(request(2, "tools/call", {"name": "order", "arguments": {"items": []}})))["result"]
    assert calls == [{"items": []}]


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_list_methods_follow_their_cursors_to_the_end(era: str) -> None:
    server, _ = ordering_server(tool_count=PAGE_SIZE + 30)
    async with open_session(server) as peer:
        make = request
        if era == "legacy":
            await peer.call(initialize())
        else:
            make = modern_request
        names: list[str] = []
        params: dict[str, Any] = {}
        for request_id in range(1, 4):
            result = (await peer.call(make(request_id, "tools/list", params)))["result"]
            if era == "legacy":
                assert_legacy_result("ListToolsResult", result)
            else:
                assert_modern_result("ListToolsResult", result, cached=True)
            names += [tool["name"] for tool in result["tools"]]
            if "nextCursor" not in result:
                break
            params = {"cursor": result["nextCursor"]}
        assert names == list(server.tools) and len(names) == PAGE_SIZE + 30
        stale = await peer.call(make(9, "tools/list", {"cursor": "not-a-cursor"}))
        assert error_code(stale) == INVALID_PARAMS
