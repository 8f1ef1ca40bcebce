"""The protocol engine over real pipes: the example server as a subprocess, spoken to in both eras.

Every stdout line of every test is checked to be one JSON-RPC message (the `stdio_process`
fixture does it as lines are read and again at teardown).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest
from conftest import (
    CLIENT_CAPABILITIES,
    EXAMPLE_SERVER,
    LEGACY_SPEC,
    MODERN_SPEC,
    MODERN_VERSION,
    PROTOCOL_VERSION,
    SERVER_INFO,
    SUBSCRIPTION_ID,
    StdioProcess,
    assert_legacy_result,
    assert_modern_result,
    assert_schema,
    cancel,
    error_code,
    initialize,
    is_response_to,
    modern_meta,
    modern_request,
    notification,
    request,
)

from protocol import LEGACY_VERSIONS, MODERN_VERSIONS

COUNTER = "example://counter"
Start = Callable[..., StdioProcess]


@dataclass
class Connection:
    """One server process whose era is already picked, speaking that era's requests."""

    process: StdioProcess
    era: str

    def request(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return (modern_request if self.era == "modern" else request)(request_id, method, params)

    def call(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.process.call(self.request(request_id, method, params))

    def result(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.call(request_id, method, params)
        assert "result" in response, f"{method} failed: {response}"
        return response["result"]

    def probe(self, request_id: Any = "probe") -> None:
        """A request every era serves; its answer must be the very next message."""
        assert "tools" in self.result(request_id, "tools/list")

    def assert_result(self, definition: str, result: dict[str, Any], *, cached: bool) -> None:
        if self.era == "modern":
            assert_modern_result(definition, result, cached=cached)
        else:
            assert_legacy_result(definition, result)

    def assert_nothing_more(self) -> None:
        """Nothing unasked-for is pending: a probe is answered next, and end of input brings nothing else."""
        self.probe("last-probe")
        assert self.process.finish() == []


def open_legacy(process: StdioProcess) -> Connection:
    initialized = process.call(initialize())
    assert initialized["result"]["protocolVersion"] == LEGACY_SPEC
    process.send(notification("notifications/initialized"))
    return Connection(process, "legacy")


def open_modern(process: StdioProcess) -> Connection:
    discovered = process.call(modern_request(0, "server/discover"))
    assert "result" in discovered, discovered
    return Connection(process, "modern")


@pytest.fixture
def legacy(example_server: StdioProcess) -> Connection:
    return open_legacy(example_server)


@pytest.fixture
def modern(example_server: StdioProcess) -> Connection:
    return open_modern(example_server)


@pytest.fixture(params=["legacy", "modern"])
def connection(request: pytest.FixtureRequest, example_server: StdioProcess) -> Connection:
    return open_legacy(example_server) if request.param == "legacy" else open_modern(example_server)


def tool_call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": arguments or {}}


def split(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(responses, notifications), each in arrival order."""
    return [m for m in messages if "method" not in m], [m for m in messages if "method" in m]


# --- framing and JSON-RPC -----------------------------------------------------------------------------

class BadLine(NamedTuple):
    name: str
    raw: bytes
    code: int
    echo: Any  # the id the error must carry


BAD_LINES = [
    BadLine("not-json", b"{not json\n", -32700, None),
    BadLine("truncated", b'{"jsonrpc":"2.0","id":1,"method":"ping"\n', -32700, None),
    BadLine("invalid-utf8", b"\xff\xfe\xfd\n", -32700, None),
    BadLine("invalid-utf8-in-string", b'{"jsonrpc":"2.0","id":1,"method":"p\xe9ng"}\n', -32700, None),
    BadLine("number", b"42\n", -32600, None),
    BadLine("string", b'"ping"\n', -32600, None),
    BadLine("null", b"null\n", -32600, None),
    BadLine("empty-batch", b"[]\n", -32600, None),
    BadLine("batch", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n', -32600, None),
    BadLine("empty-object", b"{}\n", -32600, None),
    BadLine("no-jsonrpc", b'{"id":3,"method":"ping"}\n', -32600, 3),
    BadLine("jsonrpc-1.0", b'{"jsonrpc":"1.0","id":"a","method":"ping"}\n', -32600, "a"),
    BadLine("jsonrpc-number", b'{"jsonrpc":2.0,"id":4,"method":"ping"}\n', -32600, 4),
    BadLine("method-number", b'{"jsonrpc":"2.0","id":5,"method":5}\n', -32600, 5),
    BadLine("no-method", b'{"jsonrpc":"2.0","id":6}\n', -32600, 6),
    BadLine("id-null", b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n', -32600, None),
    BadLine("id-bool", b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', -32600, None),
    BadLine("id-float", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}\n', -32600, None),
    BadLine("id-object", b'{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}\n', -32600, None),
    BadLine("params-array", b'{"jsonrpc":"2.0","id":8,"method":"ping","params":[1]}\n', -32600, 8),
    BadLine("params-string", b'{"jsonrpc":"2.0","id":8,"method":"ping","params":"x"}\n', -32600, 8),
    BadLine("params-null", b'{"jsonrpc":"2.0","id":8,"method":"ping","params":null}\n', -32600, 8),
    BadLine("notification-params-number",
            b'{"jsonrpc":"2.0","method":"notifications/initialized","params":7}\n', -32600, None),
    BadLine("unknown-method", b'{"jsonrpc":"2.0","id":9,"method":"no/such/method"}\n', -32601, 9),
    BadLine("logging-not-offered",
            b'{"jsonrpc":"2.0","id":"u","method":"logging/setLevel","params":{"level":"debug"}}\n', -32601, "u"),
]


def assert_error(response: dict[str, Any], code: int, echo: Any) -> None:
    assert error_code(response) == code, response
    assert type(response["id"]) is type(echo) and response["id"] == echo, response
    assert isinstance(response["error"]["message"], str) and response["error"]["message"]


def test_bad_input_before_any_era_is_answered_and_the_next_request_served(example_server: StdioProcess) -> None:
    for bad in BAD_LINES:
        example_server.send(bad.raw)
        assert_error(example_server.recv(), bad.code, bad.echo)
        assert example_server.call(request(f"after {bad.name}", "ping"))["result"] == {}


def era_specific_bad_requests(era: str) -> list[tuple[dict[str, Any], int]]:
    make = modern_request if era == "modern" else request
    bad = [
        (make(20, "tools/call", {}), -32602),
        (make(21, "tools/call", {"name": "add", "arguments": [1, 2]}), -32602),
        (make(22, "tools/call", tool_call("no-such-tool")), -32602),
        (make(23, "resources/read", {}), -32602),
        (make(24, "tools/list", {"cursor": "no-such-cursor"}), -32602),
        (make(25, "tools/call", tool_call("crash")), -32603),
    ]
    if era == "modern":
        bad += [(request(26, "tools/list"), -32602), (make(27, "ping"), -32601)]
    else:
        bad += [(make(26, "server/discover"), -32601),
                (make(27, "subscriptions/listen", {"notifications": {}}), -32601)]
    return bad


def test_bad_input_on_a_connection_of_either_era_is_answered_and_the_next_request_served(
        connection: Connection) -> None:
    for bad in BAD_LINES:
        connection.process.send(bad.raw)
        assert_error(connection.process.recv(), bad.code, bad.echo)
        connection.probe(f"after {bad.name}")
    for message, code in era_specific_bad_requests(connection.era):
        assert_error(connection.process.call(message), code, message["id"])
        connection.probe()
    connection.assert_nothing_more()


def test_a_line_over_16_mib_is_refused_with_id_null_and_the_next_request_served(connection: Connection) -> None:
    padding = b"x" * (17 * 1024 * 1024)
    connection.process.send(b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"' + padding + b'"}}\n')
    assert_error(connection.process.recv(), -32600, None)
    connection.assert_nothing_more()


def test_json_nested_too_deep_is_refused_and_the_server_lives_on(example_server: StdioProcess) -> None:
    example_server.send(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert_error(example_server.recv(), -32700, None)
    assert example_server.call(request(1, "ping"))["result"] == {}


def test_a_crashing_tool_is_an_internal_error_with_its_traceback_on_stderr_only(connection: Connection) -> None:
    crashed = connection.call(1, "tools/call", tool_call("crash"))
    assert_error(crashed, -32603, 1)
    connection.assert_nothing_more()
    stdout = b"".join(connection.process.lines)
    assert b"Traceback" not in stdout and b"RuntimeError" not in stdout
    assert "Traceback" in connection.process.stderr and "RuntimeError: unexpected" in connection.process.stderr


def test_text_with_line_breaks_stays_on_one_stdout_line(connection: Connection) -> None:
    tricky = "two\nlines\r\nand \u2028 separators \u2029 \u00e9 \U0001f600"
    refused = connection.call(1, "tools/call", tool_call(tricky))
    assert tricky in refused["error"]["message"]
    assert connection.process.lines[-1].count(b"\n") == 1


# --- concurrency, ids, cancellation -----------------------------------------------------------------------

def test_a_slow_call_never_blocks_another_and_a_cancelled_call_is_never_answered(connection: Connection) -> None:
    connection.process.send(connection.request(1, "tools/call", tool_call("sleep", {"seconds": 30})))
    added = connection.call(2, "tools/call", tool_call("add", {"a": 20, "b": 22}))
    assert added["result"]["structuredContent"] == {"sum": 42}
    connection.process.send(cancel(1))  # a notification: no _meta needed in either era
    connection.assert_nothing_more()


def test_ids_1_and_string_1_in_flight_together_are_two_requests(connection: Connection) -> None:
    connection.process.send(connection.request(1, "tools/call", tool_call("sleep", {"seconds": 30})))
    answer = connection.call("1", "tools/call", tool_call("add", {"a": 1, "b": 1}))
    assert answer["id"] == "1" and answer["result"]["structuredContent"] == {"sum": 2}
    connection.process.send(cancel(1))

    connection.process.send(connection.request(2, "tools/call", tool_call("sleep", {"seconds": 0.05})))
    connection.process.send(cancel("2"))  # names no request: the integer 2 must still be answered
    answer = connection.process.recv()
    assert is_response_to(answer, 2) and answer["result"]["content"][0]["text"] == "slept 0.05"
    connection.assert_nothing_more()


def test_every_request_gets_exactly_one_response_with_its_id_echoed(connection: Connection) -> None:
    ids: list[Any] = [n for n in range(20)] + [str(n) for n in range(20)] + ["", "\u00e9", -1, 2**53]
    batch = b"".join(json.dumps(connection.request(i, "tools/call", tool_call("add", {"a": 1, "b": 2}))).encode()
                     + b"\n" for i in ids)
    connection.process.send(batch)  # one write: the server sees many requests in one read
    answers = [connection.process.recv() for _ in ids]
    assert sorted(map(repr, (a["id"] for a in answers))) == sorted(map(repr, ids))
    assert all(a["result"]["structuredContent"] == {"sum": 3} for a in answers)
    connection.assert_nothing_more()


NEVER_ANSWERED: list[dict[str, Any] | bytes] = [
    b"\n", b"   \t \n", b"\r\n", b"\n\n\n",  # empty and blank lines are no message at all
    notification("notifications/initialized"),
    notification("notifications/cancelled", {"requestId": 12345}),
    notification("notifications/cancelled", {"requestId": ["unhashable"]}),
    notification("notifications/cancelled"),
    notification("notifications/progress", {"progressToken": 1, "progress": 1}),
    notification("tools/list"),
    notification("no/such/notification"),
    {"jsonrpc": "2.0", "id": 1, "result": {}},  # responses from the client answer nothing the server asked
    {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "no"}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "no"}},
]


def test_blank_lines_notifications_and_client_responses_are_never_answered(connection: Connection) -> None:
    for number, message in enumerate(NEVER_ANSWERED):
        connection.process.send(message)
        connection.probe(f"after {number}")
    connection.assert_nothing_more()


# --- end of input and signals -----------------------------------------------------------------------------

def test_end_of_input_writes_every_owed_answer_then_exits_0(connection: Connection) -> None:
    # One call first: the server loads its argument validator on the first call, and that load must not
    # count against the short grace that in-flight calls get at end of input.
    assert connection.result(0, "tools/call", tool_call("add", {"a": 0, "b": 0}))["structuredContent"] == {"sum": 0}
    ids = list(range(1, 31))
    for request_id in ids:
        connection.process.send(
            connection.request(request_id, "tools/call", tool_call("add", {"a": request_id, "b": 0})))
    answers = connection.process.finish()
    assert sorted(answer["id"] for answer in answers) == ids
    assert all(answer["result"]["structuredContent"] == {"sum": answer["id"]} for answer in answers)


def test_a_last_line_without_newline_is_served_at_end_of_input(example_server: StdioProcess) -> None:
    example_server.send(b'{"jsonrpc":"2.0","id":"last","method":"ping"}')
    assert example_server.finish() == [{"jsonrpc": "2.0", "id": "last", "result": {}}]


def test_end_of_input_with_a_long_call_in_flight_still_exits_0(modern: Connection) -> None:
    modern.process.send(modern.request(1, "tools/call", tool_call("sleep", {"seconds": 60})))
    modern.probe()
    leftovers = modern.process.finish()
    assert all(is_response_to(message, 1) for message in leftovers), leftovers


@pytest.mark.parametrize(("signum", "busy"), [(signal.SIGTERM, True), (signal.SIGINT, False)],
                         ids=["SIGTERM-with-a-call-in-flight", "SIGINT-idle"])
def test_a_signal_closes_gracefully_with_exit_0(legacy: Connection, signum: int, busy: bool) -> None:
    if busy:
        legacy.process.send(legacy.request(1, "tools/call", tool_call("sleep", {"seconds": 60})))
    legacy.probe()
    legacy.process.signal(signum)
    assert legacy.process.wait() == 0
    leftovers = legacy.process.rest()
    assert all(is_response_to(message, 1) for message in leftovers), leftovers


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_every_open_listen_with_its_graceful_response(modern: Connection, signum: int) -> None:
    listen_ids: list[Any] = ["updates", 7]
    for listen_id in listen_ids:
        open_listen(modern, listen_id, {"resourceSubscriptions": [COUNTER]})
    modern.process.signal(signum)
    assert modern.process.wait() == 0
    closures = modern.process.rest()
    assert sorted(map(repr, (closure["id"] for closure in closures))) == sorted(map(repr, listen_ids))
    for closure in closures:
        assert_modern_result("SubscriptionsListenResult", closure["result"], cached=False)
        assert closure["result"]["_meta"][SUBSCRIPTION_ID] == closure["id"]


# --- era selection ----------------------------------------------------------------------------------------

def test_initialize_makes_the_connection_legacy_for_good(legacy: Connection) -> None:
    served = legacy.process.call(modern_request(1, "tools/list"))
    assert_legacy_result("ListToolsResult", served["result"])
    assert_error(legacy.process.call(modern_request(2, "server/discover")), -32601, 2)
    listen = modern_request(3, "subscriptions/listen", {"notifications": {"resourceSubscriptions": [COUNTER]}})
    assert_error(legacy.process.call(listen), -32601, 3)
    legacy.assert_nothing_more()


def test_a_modern_request_makes_the_connection_modern_and_initialize_is_then_refused(
        example_server: StdioProcess) -> None:
    discovered = example_server.call(modern_request(1, "server/discover"))["result"]
    refused = example_server.call(initialize(2, "2025-06-18"))
    assert_error(refused, -32022, 2)
    assert refused["error"]["data"] == {"supported": discovered["supportedVersions"], "requested": "2025-06-18"}
    assert_schema(MODERN_SPEC, "UnsupportedProtocolVersionError", refused)
    assert "result" in example_server.call(modern_request(3, "tools/list"))


def test_errors_pick_no_era(example_server: StdioProcess) -> None:
    failures = [
        (request(1, "no/such/method"), -32601),
        (request(2, "tools/list"), -32602),
        (request(3, "tools/list", {"_meta": modern_meta(version="2099-01-01")}), -32022),
        (modern_request(4, "tools/call", tool_call("no-such-tool")), -32602),
        (modern_request(5, "resources/read", {"uri": "example://missing"}), -32602),
        (modern_request(6, "subscriptions/listen", {}), -32602),
    ]
    for message, code in failures:
        assert_error(example_server.call(message), code, message["id"])
    assert example_server.call(initialize(7))["result"]["protocolVersion"] == LEGACY_SPEC
    assert_legacy_result("ListToolsResult", example_server.call(modern_request(8, "tools/list"))["result"])


def test_a_failed_initialize_picks_no_era(example_server: StdioProcess) -> None:
    assert_error(example_server.call(request(1, "initialize", [LEGACY_SPEC])), -32600, 1)
    example_server.send(initialize(2) | {"jsonrpc": "1.0"})
    assert_error(example_server.recv(), -32600, 2)
    assert "result" in example_server.call(modern_request(3, "server/discover"))
    assert_error(example_server.call(initialize(4)), -32022, 4)


@pytest.mark.parametrize("then", ["legacy", "modern"])
def test_ping_before_any_era_is_answered_empty_and_picks_nothing(example_server: StdioProcess, then: str) -> None:
    pinged = example_server.call(request(1, "ping"))
    assert pinged["result"] == {}
    assert_schema(LEGACY_SPEC, "EmptyResult", pinged["result"])
    if then == "modern":
        assert_modern_result("DiscoverResult", example_server.call(modern_request(2, "server/discover"))["result"],
                             cached=True)
        assert_error(example_server.call(initialize(3)), -32022, 3)
    else:
        assert_legacy_result("InitializeResult", example_server.call(initialize(2))["result"])


def test_a_first_request_no_era_accepts_explains_both_ways_in(example_server: StdioProcess) -> None:
    refused = example_server.call(request(1, "tools/list"))
    assert_error(refused, -32602, 1)
    message = refused["error"]["message"]
    assert PROTOCOL_VERSION in message and "_meta" in message and "initialize" in message
    for version in (*MODERN_VERSIONS, *LEGACY_VERSIONS):
        assert version in message
    assert "result" in example_server.call(initialize(2))


def test_a_listen_opened_first_makes_the_connection_modern(example_server: StdioProcess) -> None:
    # A listen's final response only comes when it ends; its acknowledgement is what says it was served.
    example_server.send(modern_request("L", "subscriptions/listen", {"notifications": {}}))
    ack = example_server.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    refused = example_server.call(initialize(1))
    assert_error(refused, -32022, 1)


# --- legacy era -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_initialize_echoes_a_supported_version(example_server: StdioProcess, version: str) -> None:
    assert example_server.call(initialize(1, version))["result"]["protocolVersion"] == version


@pytest.mark.parametrize("version", ["2099-01-01", MODERN_VERSION, "", None])
def test_initialize_answers_2025_11_25_to_any_other_version(example_server: StdioProcess, version: Any) -> None:
    answer = example_server.call(request(1, "initialize", {"protocolVersion": version, "capabilities": {}}))
    assert answer["result"]["protocolVersion"] == "2025-11-25"


def test_initialize_declares_capabilities_identity_and_instructions(example_server: StdioProcess) -> None:
    result = example_server.call(initialize(1))["result"]
    assert_legacy_result("InitializeResult", result)
    assert result["capabilities"] == {"tools": {}, "resources": {"subscribe": True}}
    assert result["serverInfo"] == {"name": "example-server", "version": "1.0.0"}
    assert isinstance(result["instructions"], str) and result["instructions"]
    assert set(result) == {"protocolVersion", "capabilities", "serverInfo", "instructions"}


def test_legacy_methods_answer_in_exactly_the_legacy_shapes(legacy: Connection) -> None:
    pinged = legacy.result(1, "ping")
    assert_legacy_result("EmptyResult", pinged)
    assert pinged == {}

    tools = legacy.result(2, "tools/list")
    assert_legacy_result("ListToolsResult", tools)
    assert [tool["name"] for tool in tools["tools"]] == ["add", "sleep", "fail", "crash", "bump"]
    add = tools["tools"][0]
    assert add["title"] == "Add" and add["annotations"] == {"readOnlyHint": True}
    assert add["inputSchema"]["required"] == ["a", "b"] and add["outputSchema"]["required"] == ["sum"]

    added = legacy.result(3, "tools/call", tool_call("add", {"a": 2, "b": 3}))
    assert_legacy_result("CallToolResult", added)
    assert added["structuredContent"] == {"sum": 5} and "isError" not in added
    assert json.loads(added["content"][0]["text"]) == {"sum": 5}

    failed = legacy.result(4, "tools/call", tool_call("fail"))
    assert_legacy_result("CallToolResult", failed)
    assert failed["isError"] is True and failed["content"][0]["text"] == "this tool always fails"

    resources = legacy.result(5, "resources/list")
    assert_legacy_result("ListResourcesResult", resources)
    assert resources["resources"] == [{"uri": COUNTER, "name": "counter", "title": "Counter",
                                       "description": "How often bump was called.", "mimeType": "text/plain"}]

    templates = legacy.result(6, "resources/templates/list")
    assert_legacy_result("ListResourceTemplatesResult", templates)
    assert templates == {"resourceTemplates": []}

    read = legacy.result(7, "resources/read", {"uri": COUNTER})
    assert_legacy_result("ReadResourceResult", read)
    assert read == {"contents": [{"uri": COUNTER, "mimeType": "text/plain", "text": "0"}]}
    legacy.assert_nothing_more()


def test_a_tool_argument_violation_is_a_tool_error_naming_the_path(connection: Connection) -> None:
    refused = connection.result(1, "tools/call", tool_call("add", {"a": "two", "b": 3}))
    connection.assert_result("CallToolResult", refused, cached=False)
    assert refused["isError"] is True
    text = refused["content"][0]["text"]
    assert "/a" in text and "is not of type 'integer'" in text, text
    missing = connection.result(2, "tools/call", tool_call("add", {"a": 1}))
    assert missing["isError"] is True and "'b' is a required property" in missing["content"][0]["text"]
    negative = connection.result(3, "tools/call", tool_call("sleep", {"seconds": -1}))
    assert negative["isError"] is True and "/seconds" in negative["content"][0]["text"]


def test_list_methods_refuse_an_unknown_cursor(connection: Connection) -> None:
    for method in ("tools/list", "resources/list", "resources/templates/list"):
        for cursor in ("no-such-cursor", "", 17, ["x"]):
            refused = connection.call(1, method, {"cursor": cursor})
            assert_error(refused, -32602, 1)
            assert refused["error"]["data"] == {"cursor": cursor}
        assert "result" in connection.call(2, method, {"cursor": None}), "a null cursor is no cursor: the first page"


def test_legacy_unknown_resource_is_32002_with_its_uri(legacy: Connection) -> None:
    for method in ("resources/read", "resources/subscribe"):
        refused = legacy.call(1, method, {"uri": "example://missing"})
        assert_error(refused, -32002, 1)
        assert refused["error"]["data"] == {"uri": "example://missing"}


def test_legacy_subscription_delivers_updates_until_unsubscribed(legacy: Connection) -> None:
    assert_legacy_result("EmptyResult", legacy.result(1, "resources/subscribe", {"uri": COUNTER}))
    legacy.process.send(legacy.request(2, "tools/call", tool_call("bump")))
    responses, notifications = split([legacy.process.recv(), legacy.process.recv()])
    assert responses[0]["id"] == 2 and responses[0]["result"]["structuredContent"] == {"value": 1}
    assert notifications == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": COUNTER}}]
    assert_schema(LEGACY_SPEC, "ResourceUpdatedNotification", notifications[0])
    assert legacy.result(3, "resources/read", {"uri": COUNTER})["contents"][0]["text"] == "1"

    assert_legacy_result("EmptyResult", legacy.result(4, "resources/unsubscribe", {"uri": COUNTER}))
    assert legacy.result(5, "tools/call", tool_call("bump"))["structuredContent"] == {"value": 2}
    legacy.assert_nothing_more()


# --- modern era -------------------------------------------------------------------------------------------

META_PROBLEMS = [
    # (what the request carries as _meta, None for nothing; the key the refusal must name)
    (None, PROTOCOL_VERSION),
    ("2026-07-28", PROTOCOL_VERSION),
    ({CLIENT_CAPABILITIES: {}}, PROTOCOL_VERSION),
    ({PROTOCOL_VERSION: 20260728, CLIENT_CAPABILITIES: {}}, PROTOCOL_VERSION),
    ({PROTOCOL_VERSION: MODERN_VERSION}, CLIENT_CAPABILITIES),
    ({PROTOCOL_VERSION: MODERN_VERSION, CLIENT_CAPABILITIES: []}, CLIENT_CAPABILITIES),
    ({PROTOCOL_VERSION: MODERN_VERSION, CLIENT_CAPABILITIES: "all"}, CLIENT_CAPABILITIES),
]


def test_modern_requests_without_proper_meta_are_refused_naming_the_key(modern: Connection) -> None:
    for number, (meta, named) in enumerate(META_PROBLEMS):
        params: dict[str, Any] = {} if meta is None else {"_meta": meta}
        refused = modern.process.call(request(number, "tools/list", params))
        assert_error(refused, -32602, number)
        assert named in refused["error"]["message"], meta
    modern.assert_nothing_more()


@pytest.mark.parametrize("when", ["first", "later"])
def test_an_unsupported_modern_version_lists_the_supported_ones(example_server: StdioProcess, when: str) -> None:
    if when == "later":
        open_modern(example_server)
    refusals = {}
    for version in ("2025-11-25", "2099-01-01", "latest"):  # refusals pick no era, so all come first
        refused = example_server.call(request(version, "tools/list", {"_meta": modern_meta(version=version)}))
        assert_error(refused, -32022, version)
        assert_schema(MODERN_SPEC, "UnsupportedProtocolVersionError", refused)
        refusals[version] = refused["error"]["data"]
    supported = example_server.call(modern_request(2, "server/discover"))["result"]["supportedVersions"]
    assert refusals == {version: {"supported": supported, "requested": version} for version in refusals}


def test_discover_offers_the_modern_version_and_the_legacy_capabilities(
        example_server: StdioProcess, stdio_process: Start) -> None:
    discovered = example_server.call(modern_request(1, "server/discover"))["result"]
    assert_modern_result("DiscoverResult", discovered, cached=True)
    assert discovered["supportedVersions"] == ["2026-07-28"]
    assert discovered["_meta"][SERVER_INFO] == {"name": "example-server", "version": "1.0.0"}
    initialized = stdio_process(EXAMPLE_SERVER).call(initialize())["result"]
    assert discovered["capabilities"] == initialized["capabilities"]
    assert discovered["instructions"] == initialized["instructions"]


def test_modern_methods_answer_complete_signed_and_cache_hinted(modern: Connection) -> None:
    tools = modern.result(1, "tools/list")
    assert_modern_result("ListToolsResult", tools, cached=True)
    assert [tool["name"] for tool in tools["tools"]] == ["add", "sleep", "fail", "crash", "bump"]

    added = modern.result(2, "tools/call", tool_call("add", {"a": 2, "b": 3}))
    assert_modern_result("CallToolResult", added, cached=False)
    assert added["structuredContent"] == {"sum": 5}

    failed = modern.result(3, "tools/call", tool_call("fail"))
    assert_modern_result("CallToolResult", failed, cached=False)
    assert failed["isError"] is True

    resources = modern.result(4, "resources/list")
    assert_modern_result("ListResourcesResult", resources, cached=True)
    assert [resource["uri"] for resource in resources["resources"]] == [COUNTER]

    templates = modern.result(5, "resources/templates/list")
    assert_modern_result("ListResourceTemplatesResult", templates, cached=True)
    assert templates["resourceTemplates"] == []

    read = modern.result(6, "resources/read", {"uri": COUNTER})
    assert_modern_result("ReadResourceResult", read, cached=True)
    assert read["contents"] == [{"uri": COUNTER, "mimeType": "text/plain", "text": "0"}]
    modern.assert_nothing_more()


def test_modern_unknown_resource_is_invalid_params_with_its_uri(modern: Connection) -> None:
    refused = modern.call(1, "resources/read", {"uri": "example://missing"})
    assert_error(refused, -32602, 1)
    assert refused["error"]["data"] == {"uri": "example://missing"}


def test_methods_removed_in_the_modern_era_are_unknown(modern: Connection) -> None:
    for method, params in (("ping", {}), ("logging/setLevel", {"level": "debug"}),
                           ("resources/subscribe", {"uri": COUNTER}), ("resources/unsubscribe", {"uri": COUNTER})):
        assert_error(modern.call(method, method, params), -32601, method)
    assert_error(modern.process.call(initialize(1)), -32022, 1)  # a version mismatch, not an unknown method
    modern.assert_nothing_more()


def test_listen_without_a_usable_notifications_object_is_invalid_params(modern: Connection) -> None:
    for number, params in enumerate([
        {}, {"notifications": None}, {"notifications": ["resourceSubscriptions"]},
        {"notifications": {"resourceSubscriptions": COUNTER}}, {"notifications": {"resourceSubscriptions": [1]}},
    ]):
        assert_error(modern.call(number, "subscriptions/listen", params), -32602, number)
    modern.assert_nothing_more()


def open_listen(connection: Connection, listen_id: Any, wanted: dict[str, Any]) -> dict[str, Any]:
    """Open a listen; its first message must be the acknowledgement, which is returned."""
    connection.process.send(connection.request(listen_id, "subscriptions/listen", {"notifications": wanted}))
    ack = connection.process.recv()
    assert_schema(MODERN_SPEC, "SubscriptionsAcknowledgedNotification", ack)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"][SUBSCRIPTION_ID] == listen_id
    return ack


def bump_and_collect(connection: Connection, request_id: Any, updates: int) -> list[dict[str, Any]]:
    """Bump the counter; return the update notifications that come with the response, in order."""
    connection.process.send(connection.request(request_id, "tools/call", tool_call("bump")))
    responses, notifications = split([connection.process.recv() for _ in range(updates + 1)])
    assert [response["id"] for response in responses] == [request_id]
    return notifications


def test_listen_acknowledges_the_honoured_subset_then_tags_every_update(modern: Connection) -> None:
    ack = open_listen(modern, "L1", {
        "resourceSubscriptions": [COUNTER, "example://missing", COUNTER],
        "toolsListChanged": True, "resourcesListChanged": True, "promptsListChanged": True})
    assert ack["params"]["notifications"] == {"resourceSubscriptions": [COUNTER]}
    for request_id in (1, 2):
        [update] = bump_and_collect(modern, request_id, updates=1)
        assert_schema(MODERN_SPEC, "ResourceUpdatedNotification", update)
        assert update["params"] == {"_meta": {SUBSCRIPTION_ID: "L1"}, "uri": COUNTER}
    modern.probe()
    closures = modern.process.finish()  # end of input closes the listen gracefully too
    assert [closure["id"] for closure in closures] == ["L1"]


def test_a_listen_for_nothing_supported_is_acknowledged_empty_and_receives_nothing(modern: Connection) -> None:
    ack = open_listen(modern, 5, {"resourceSubscriptions": ["example://missing"], "toolsListChanged": True})
    assert ack["params"]["notifications"] == {}
    assert bump_and_collect(modern, 1, updates=0) == []


def test_several_listens_each_get_their_own_and_a_cancelled_one_goes_quiet(modern: Connection) -> None:
    open_listen(modern, "a", {"resourceSubscriptions": [COUNTER]})
    open_listen(modern, 2, {"resourceSubscriptions": [COUNTER]})
    updates = bump_and_collect(modern, 10, updates=2)
    assert sorted(repr(update["params"]["_meta"][SUBSCRIPTION_ID]) for update in updates) == ["'a'", "2"]

    modern.process.send(cancel("a"))
    [update] = bump_and_collect(modern, 11, updates=1)
    assert update["params"]["_meta"][SUBSCRIPTION_ID] == 2
    modern.probe()
    closures = modern.process.finish()
    assert [closure["id"] for closure in closures] == [2], "a cancelled listen gets no response, ever"


def test_the_server_never_sends_log_notifications_or_requests(connection: Connection) -> None:
    for request_id, name in enumerate(["crash", "fail", "add", "bump", "no-such-tool"]):
        connection.call(request_id, "tools/call", tool_call(name, {"a": "x"}))
    connection.assert_nothing_more()
    for line in connection.process.lines:
        message = json.loads(line)
        assert message.get("method") != "notifications/message" and not ("method" in message and "id" in message)
