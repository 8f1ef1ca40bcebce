"""`mcp-server-memory --http`: the official SDK's Streamable HTTP client in every mode against a real server
process on a loopback port, the raw HTTP rules with httpx, many clients at once, slow readers, and SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from conftest import (
    CLIENT_CAPABILITIES,
    PROTOCOL_VERSION,
    SUBSCRIPTION_ID,
    WAIT_SECONDS,
    Deadline,
    StdioProcess,
    assert_modern_result,
    initialize,
    modern_request,
    notification,
    request,
)
from http_helpers import (
    ACCEPT,
    LEGACY,
    MODERN,
    HttpServers,
    http_servers,  # noqa: F401
    modern_headers,
    modern_post,
    sse_messages,
)
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from memory_helpers import GRAPH_URI, TOOL_NAMES, server_environment, undated
from write_items import entity_items

from memory_server.storage.store import GraphStore

MODES = ["legacy", "auto", MODERN]


def entity(name: str) -> dict[str, Any]:
    return {"name": name, "entityType": "thing", "observations": [f"{name} exists"]}


# --- the SDK client in each mode --------------------------------------------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_uses_every_tool_and_the_resource_in_each_mode(
        http_servers: HttpServers, tmp_path: Path, mode: str) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    with anyio.fail_after(WAIT_SECONDS * 2):
        async with Client(server.url, mode=mode) as client:
            assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
            tools = await client.list_tools()
            assert sorted(tool.name for tool in tools.tools) == sorted(TOOL_NAMES)

            created = await client.call_tool("create_entities", {"entities": [entity("Ada"), entity("Bob")]})
            assert [e["name"] for e in created.structured_content["entities"]] == ["Ada", "Bob"]
            await client.call_tool("create_relations", {"relations": [{"from": "Ada", "to": "Bob",
                                                                       "relationType": "knows"}]})
            await client.call_tool("add_observations", {"observations": [{"entityName": "Ada", "contents": ["codes"]}]})
            found = await client.call_tool("search_nodes", {"query": "codes"})
            assert [e["name"] for e in found.structured_content["entities"]] == ["Ada"]
            opened = await client.call_tool("open_nodes", {"names": ["Bob"]})
            assert opened.structured_content["relations"] == [{"from": "Ada", "to": "Bob", "relationType": "knows"}]
            await client.call_tool("delete_observations", {"deletions": [{"entityName": "Ada", "observations": ["codes"]}]})
            await client.call_tool("delete_relations", {"relations": [{"from": "Ada", "to": "Bob", "relationType": "knows"}]})
            deleted = await client.call_tool("delete_entities", {"entityNames": ["Bob", "Nobody"]})
            assert deleted.structured_content["notFound"] == ["Nobody"]
            graph = await client.call_tool("read_graph", {})
            assert undated(graph.structured_content) == {"entities": [entity("Ada")], "relations": []}

            invalid = await client.call_tool("create_entities", {"entities": "not a list"})
            assert invalid.is_error and "/entities" in invalid.content[0].text
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("no_such_tool", {})
            assert unknown.value.code == -32602

            read = await client.read_resource(GRAPH_URI)
            assert json.loads(read.contents[0].text) == graph.structured_content, "the resource is read_graph's graph"
    assert undated(GraphStore(tmp_path / "memory.jsonl").read_graph())["entities"] == [entity("Ada")]


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
@pytest.mark.parametrize("mode", MODES)
async def test_a_subscriber_hears_of_writes_by_another_client_and_by_another_process(
        http_servers: HttpServers, tmp_path: Path, mode: str) -> None:
    memory_file = tmp_path / "memory.jsonl"
    server = http_servers.memory(memory_file)
    updates_in, updates = anyio.create_memory_object_stream[str](10)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates_in.send_nowait(message.params.uri)

    with anyio.fail_after(WAIT_SECONDS * 2):
        async with Client(server.url, mode=mode, message_handler=on_message) as listener, \
                Client(server.url, mode=MODERN if mode == "legacy" else "legacy") as writer:
            if mode == "legacy":
                await listener.subscribe_resource(GRAPH_URI)
                await writer.call_tool("create_entities", {"entities": [entity("FromAnotherClient")]})
                assert await updates.receive() == GRAPH_URI
                GraphStore(memory_file).create_entities(entity_items([entity("FromAnotherProcess")]))
                assert await updates.receive() == GRAPH_URI
            else:
                async with listener.listen(resource_subscriptions=[GRAPH_URI]) as subscription:
                    assert subscription.honored.resource_subscriptions == [GRAPH_URI]
                    await writer.call_tool("create_entities", {"entities": [entity("FromAnotherClient")]})
                    assert await anext(subscription) == ResourceUpdated(uri=GRAPH_URI)
                    GraphStore(memory_file).create_entities(entity_items([entity("FromAnotherProcess")]))
                    assert await anext(subscription) == ResourceUpdated(uri=GRAPH_URI)
            read = await listener.read_resource(GRAPH_URI)
            assert [e["name"] for e in json.loads(read.contents[0].text)["entities"]] == [
                "FromAnotherClient", "FromAnotherProcess"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_sends_the_bearer_token(http_servers: HttpServers, tmp_path: Path, mode: str) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl", token="s3cret-token")
    with anyio.fail_after(WAIT_SECONDS):
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"}) as http:
            async with Client(streamable_http_client(server.url, http_client=http), mode=mode) as client:
                graph = await client.call_tool("read_graph", {})
                assert graph.structured_content == {"entities": [], "relations": []}


# --- the raw HTTP rules ---------------------------------------------------------------------------------------

def legacy_session(client: httpx.Client, url: str, **headers: str) -> str:
    opened = client.post(url, json=initialize(0), headers={"accept": ACCEPT, **headers})
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    assert opened.json()["result"]["protocolVersion"] == LEGACY
    accepted = client.post(url, json=notification("notifications/initialized"),
                           headers={"accept": ACCEPT, "mcp-session-id": session, "mcp-protocol-version": LEGACY})
    assert accepted.status_code == 202 and accepted.content == b""
    return session


def test_origin_is_validated_and_a_foreign_origin_is_forbidden(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example:8000"):
            refused = modern_post(client, server.url, 1, "tools/list", origin=origin)
            assert refused.status_code == 403, origin
            assert refused.json()["error"]["code"] == -32600 and refused.json()["id"] is None
        for origin in ("http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080"):
            assert modern_post(client, server.url, 1, "tools/list", origin=origin).status_code == 200, origin


def test_an_allowed_origin_can_be_named(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl", args=("--allow-origin", "https://app.example"))
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        assert modern_post(client, server.url, 1, "tools/list", origin="https://app.example").status_code == 200
        assert modern_post(client, server.url, 1, "tools/list", origin="https://other.example").status_code == 403


def test_with_a_token_every_request_needs_it(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl", token="t0ken")
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        for authorization in (None, "Bearer wrong", "Basic dDB rZW4=", "Bearer", "t0ken", "Bearer t0ken2"):
            extra = {"authorization": authorization} if authorization else {}
            refused = modern_post(client, server.url, 1, "tools/list", **extra)
            assert refused.status_code == 401, authorization
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.json()["error"]["code"] == -32600
        refused_get = client.get(server.url, headers={"mcp-session-id": "x"})
        assert refused_get.status_code == 401
        assert modern_post(client, server.url, 1, "tools/list", authorization="Bearer t0ken").status_code == 200
        assert modern_post(client, server.url, 1, "tools/list", authorization="bearer t0ken").status_code == 200


def test_notifications_get_202_bad_json_400_and_other_paths_404(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        accepted = client.post(server.url, json=notification("notifications/initialized"), headers={"accept": ACCEPT})
        assert accepted.status_code == 202 and accepted.content == b""
        client_response = client.post(server.url, json={"jsonrpc": "2.0", "id": 1, "result": {}})
        assert client_response.status_code == 202

        for body, code in ((b"{not json", -32700), (b'{"jsonrpc":"2.0","id":1,"method":', -32700),
                           (b"\xff\xfe", -32700), (b"[1, 2]", -32600), (b'{"jsonrpc":"1.0","id":1,"method":"x"}', -32600),
                           (b"", -32600), (b"42", -32600)):
            bad = client.post(server.url, content=body, headers={"content-type": "application/json"})
            assert bad.status_code == 400, body
            assert bad.json()["error"]["code"] == code, body
        assert client.post(server.url, content=b"{}", headers={"content-type": "text/plain"}).status_code == 415

        for path in ("/", "/mcp/extra", "/other", "/mcpx"):
            assert client.post(server.url.replace("/mcp", path), json=initialize()).status_code == 404, path
        assert client.put(server.url, json={}).status_code == 405
        assert client.get(server.url).status_code == 405  # no session: the modern era has no GET stream
        assert client.delete(server.url).status_code == 405

        # Neither a session nor a modern request: told both ways in, as on stdio.
        lost = client.post(server.url, json=request(3, "tools/list"), headers={"accept": ACCEPT})
        assert lost.status_code == 400 and lost.json()["error"]["code"] == -32602
        assert "initialize" in lost.json()["error"]["message"]


def test_a_body_over_the_limit_is_refused_with_413(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    big = json.dumps(modern_request(1, "tools/call", {"name": "create_entities", "arguments": {
        "entities": [entity("x" * (17 * 1024 * 1024))]}})).encode()
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        refused = client.post(server.url, content=big, headers=modern_headers("tools/call", "create_entities"))
        assert refused.status_code == 413 and refused.json()["error"]["code"] == -32600

        def chunks() -> Any:  # no Content-Length: the limit still holds while the body streams in
            for start in range(0, len(big), 1 << 20):
                yield big[start:start + (1 << 20)]

        streamed = client.post(server.url, content=chunks(), headers=modern_headers("tools/call", "create_entities"))
        assert streamed.status_code == 413
        assert modern_post(client, server.url, 2, "tools/call", {"name": "read_graph", "arguments": {}}).json()[
            "result"]["structuredContent"] == {"entities": [], "relations": []}


def test_a_legacy_session_lives_until_delete_and_is_404_after(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        session = legacy_session(client, server.url)
        headers = {"accept": ACCEPT, "mcp-session-id": session, "mcp-protocol-version": LEGACY}
        listed = client.post(server.url, json=request(1, "tools/list"), headers=headers)
        assert listed.status_code == 200 and "ttlMs" not in listed.json()["result"]  # legacy shapes stay bare
        ping = client.post(server.url, json=request(2, "ping"), headers=headers)
        assert ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        wrong_version = client.post(server.url, json=request(3, "ping"),
                                    headers={**headers, "mcp-protocol-version": "1999-01-01"})
        assert wrong_version.status_code == 400

        assert client.delete(server.url, headers=headers).status_code == 204
        for attempt in (lambda: client.post(server.url, json=request(4, "ping"), headers=headers),
                        lambda: client.post(server.url, json=notification("notifications/initialized"), headers=headers),
                        lambda: client.get(server.url, headers=headers),
                        lambda: client.delete(server.url, headers=headers)):
            gone = attempt()
            assert gone.status_code == 404
            assert gone.json()["error"]["code"] == -32600
        unknown = client.post(server.url, json=request(5, "ping"), headers={**headers, "mcp-session-id": "no-such-session"})
        assert unknown.status_code == 404
        assert legacy_session(client, server.url) != session  # a new initialize starts afresh


IDLE = 3.0
"""MCP_MEMORY_HTTP_SESSION_IDLE of the session expiry tests, in seconds: what must happen within it
(a session's GET right after its initialize) has all of it, on a loaded machine too."""


def outlast_the_idle_time() -> None:
    """Idle expiry is about time itself: wait out twice the idle time, on the monotonic clock."""
    end = time.monotonic() + 2 * IDLE
    while (left := end - time.monotonic()) > 0:
        time.sleep(left)


@pytest.mark.anyio
async def test_the_sdk_clients_session_outlives_the_idle_time_while_its_get_stream_is_open(
        http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl", extra_env={"MCP_MEMORY_HTTP_SESSION_IDLE": str(IDLE)})
    with anyio.fail_after(WAIT_SECONDS * 2):
        async with Client(server.url, mode="legacy") as client:
            await client.call_tool("create_entities", {"entities": [entity("Ada")]})
            await anyio.to_thread.run_sync(outlast_the_idle_time)
            opened = await client.call_tool("open_nodes", {"names": ["Ada"]})
            assert undated(opened.structured_content)["entities"] == [entity("Ada")]
    assert "idle for" not in server.stderr


def test_an_idle_session_gets_404_and_one_with_its_stream_open_lives(http_servers: HttpServers, tmp_path: Path) -> None:
    # (A session kept by its requests, on a clock the test moves: test_http_asgi. Here real time:
    # the waits outlast the idle time, and the one step that must be prompt, the GET after its
    # session's initialize, has the whole idle time.)
    server = http_servers.memory(tmp_path / "memory.jsonl", extra_env={"MCP_MEMORY_HTTP_SESSION_IDLE": str(IDLE)})
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        streaming = legacy_session(client, server.url)

        def ping(session: str, request_id: int) -> httpx.Response:
            return client.post(server.url, json=request(request_id, "ping"), headers={
                "accept": ACCEPT, "mcp-session-id": session, "mcp-protocol-version": LEGACY})

        with httpx.Client(timeout=httpx.Timeout(WAIT_SECONDS, read=None)) as streamer, \
                streamer.stream("GET", server.url, headers={"accept": "text/event-stream",
                                                            "mcp-session-id": streaming}) as stream:
            assert stream.status_code == 200
            idle = legacy_session(client, server.url)
            outlast_the_idle_time()
            assert ping(streaming, 10).status_code == 200  # its GET stream kept it alive
        gone = ping(idle, 11)
        assert gone.status_code == 404 and gone.json()["error"]["code"] == -32600
        assert "initialize" in gone.json()["error"]["message"]
        deadline = Deadline(WAIT_SECONDS)
        while "idle for" not in server.stderr:  # the server's log says why
            threading.Event().wait(min(0.02, deadline.remaining()))
        # The streaming session is idle only from the end of its stream on.
        outlast_the_idle_time()
        assert ping(streaming, 12).status_code == 404
        assert legacy_session(client, server.url) not in (streaming, idle)


def test_a_bad_session_idle_time_stops_the_server_with_the_reason(tmp_path: Path) -> None:
    for bad in ("soon", "0", "-5", "nan", "inf"):
        env = {**server_environment(tmp_path / "memory.jsonl"), "MCP_MEMORY_HTTP_SESSION_IDLE": bad}
        refused = subprocess.run([sys.executable, "-m", "memory_server", "--http", "127.0.0.1:0"], env=env,
                                 cwd=tmp_path, capture_output=True, timeout=WAIT_SECONDS, stdin=subprocess.DEVNULL)
        assert refused.returncode != 0, bad
        assert "MCP_MEMORY_HTTP_SESSION_IDLE must be a number of seconds above 0" in refused.stderr.decode(), bad


def test_modern_headers_must_match_the_body(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    call = modern_request(1, "tools/call", {"name": "read_graph", "arguments": {}})
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        def post(headers: dict[str, str], body: dict[str, Any] = call) -> httpx.Response:
            return client.post(server.url, json=body, headers=headers)

        good = modern_headers("tools/call", "read_graph")
        assert post(good).status_code == 200
        encoded = {**good, "mcp-name": "=?base64?cmVhZF9ncmFwaA==?="}  # "read_graph", in the sentinel encoding
        assert post(encoded).status_code == 200
        for broken in ({**good, "mcp-name": "open_nodes"}, {k: v for k, v in good.items() if k != "mcp-name"},
                       {**good, "mcp-method": "tools/list"}, {k: v for k, v in good.items() if k != "mcp-method"},
                       {k: v for k, v in good.items() if k != "mcp-protocol-version"},
                       {**good, "mcp-protocol-version": "2025-11-25"}, {**good, "mcp-name": "=?base64?!!?="}):
            refused = post(broken)
            assert refused.status_code == 400, broken
            assert refused.json() == {"jsonrpc": "2.0", "id": 1, "error": refused.json()["error"]}
            assert refused.json()["error"]["code"] == -32020, broken

        future = modern_request(2, "tools/list")
        future["params"]["_meta"][PROTOCOL_VERSION] = "2099-01-01"
        unsupported = post(modern_headers("tools/list", version="2099-01-01"), future)
        assert unsupported.status_code == 400
        assert unsupported.json()["error"]["code"] == -32022
        assert unsupported.json()["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}

        for method in ("ping", "resources/subscribe", "no/such/method"):
            missing = post(modern_headers(method), modern_request(3, method, {"uri": GRAPH_URI}))
            assert missing.status_code == 404 and missing.json()["error"]["code"] == -32601, method

        listed = post(modern_headers("tools/list"), modern_request(4, "tools/list"))
        assert_modern_result("ListToolsResult", listed.json()["result"], cached=True)
        assert (listed.json()["result"]["cacheScope"], listed.json()["result"]["ttlMs"]) == ("public", 3_600_000)
        read = post(modern_headers("resources/read", GRAPH_URI), modern_request(5, "resources/read", {"uri": GRAPH_URI}))
        assert (read.json()["result"]["cacheScope"], read.json()["result"]["ttlMs"]) == ("private", 0)


REQUESTS_BOTH_WAYS: list[tuple[str, dict[str, Any] | None]] = [
    ("server/discover", None),
    ("tools/list", None),
    ("resources/list", None),
    ("resources/templates/list", None),
    ("tools/call", {"name": "create_entities", "arguments": {"entities": [entity("Same")]}}),
    ("tools/call", {"name": "create_entities", "arguments": {"entities": [entity("Same")]}}),
    ("tools/call", {"name": "create_relations", "arguments": {"relations": [{"from": "Same", "to": "Gone",
                                                                            "relationType": "r"}]}}),
    ("tools/call", {"name": "search_nodes", "arguments": {"query": "same"}}),
    ("tools/call", {"name": "open_nodes", "arguments": {"names": 7}}),
    ("tools/call", {"name": "nope", "arguments": {}}),
    ("tools/call", {"arguments": {}}),
    ("resources/read", {"uri": GRAPH_URI}),
    ("resources/read", {"uri": "memory://elsewhere"}),
    ("tools/list", {"cursor": "bogus"}),
    ("subscriptions/listen", {"notifications": "all"}),
]


def test_every_answer_and_error_is_the_one_stdio_gives(http_servers: HttpServers, tmp_path: Path) -> None:
    over_http = http_servers.memory(tmp_path / "http.jsonl")
    over_stdio = StdioProcess([sys.executable, "-m", "memory_server"], cwd=tmp_path,
                              env=server_environment(tmp_path / "stdio.jsonl"))
    try:
        with httpx.Client(timeout=WAIT_SECONDS) as client:
            for number, (method, params) in enumerate(REQUESTS_BOTH_WAYS):
                name = (params or {}).get("uri") or (params or {}).get("name")
                headers = modern_headers(method, name if method in ("tools/call", "resources/read") else None)
                body = modern_request(number, method, params)
                http_answer = client.post(server_url := over_http.url, json=body, headers=headers).json()
                stdio_answer = over_stdio.call(body)
                assert http_answer == stdio_answer, (method, params)
        assert server_url
    finally:
        over_stdio.kill()


def test_a_non_loopback_address_without_a_token_is_refused(http_servers: HttpServers, tmp_path: Path) -> None:
    env = server_environment(tmp_path / "memory.jsonl")
    env.pop("MCP_MEMORY_HTTP_TOKEN", None)
    for address in ("0.0.0.0:8000", "[::]:8000", "example.com:8000", "192.168.1.10:8000"):
        refused = subprocess.run([sys.executable, "-m", "memory_server", "--http", address], env=env, cwd=tmp_path,
                                 capture_output=True, timeout=WAIT_SECONDS, stdin=subprocess.DEVNULL)
        assert refused.returncode != 0, address
        assert "MCP_MEMORY_HTTP_TOKEN" in refused.stderr.decode() and "--allow-unauthenticated" in refused.stderr.decode()
    for bad in ("80800", "host:", "x:y"):
        refused = subprocess.run([sys.executable, "-m", "memory_server", "--http", bad], env=env, cwd=tmp_path,
                                 capture_output=True, timeout=WAIT_SECONDS, stdin=subprocess.DEVNULL)
        assert refused.returncode != 0 and "[HOST:]PORT" in refused.stderr.decode(), bad
    assert not (tmp_path / "memory.jsonl").exists()


# --- many clients, slow readers, disconnects ------------------------------------------------------------------

CLIENTS = 50
WRITES_EACH = 4


@pytest.mark.anyio
async def test_fifty_clients_writing_at_once_lose_nothing(http_servers: HttpServers, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    server = http_servers.memory(memory_file)
    # A stdio server shares the file and writes meanwhile: the lock file keeps the two processes in turns.
    beside = StdioProcess([sys.executable, "-m", "memory_server"], cwd=tmp_path, env=server_environment(memory_file))
    beside.call(initialize(0))

    def stdio_writes() -> None:
        for write in range(WRITES_EACH * 5):
            answer = beside.call(request(write + 1, "tools/call", {"name": "create_entities", "arguments": {
                "entities": [entity(f"stdio-write{write}")]}}))
            assert answer["result"]["structuredContent"] == {"entities": [entity(f"stdio-write{write}")]}

    stdio_writer = threading.Thread(target=stdio_writes, daemon=True)
    stdio_writer.start()

    async def one_client(number: int) -> None:
        mode = "legacy" if number % 2 else MODERN
        async with Client(server.url, mode=mode) as client:
            for write in range(WRITES_EACH):
                name = f"client{number}-write{write}"
                result = await client.call_tool("create_entities", {"entities": [entity(name)]})
                assert result.structured_content == {"entities": [entity(name)]}

    with anyio.fail_after(WAIT_SECONDS * 8):
        async with anyio.create_task_group() as tasks:
            for number in range(CLIENTS):
                tasks.start_soon(one_client, number)
    stdio_writer.join(WAIT_SECONDS * 4)
    beside.kill()
    assert not stdio_writer.is_alive()
    expected = {f"client{n}-write{w}" for n in range(CLIENTS) for w in range(WRITES_EACH)}
    expected |= {f"stdio-write{w}" for w in range(WRITES_EACH * 5)}
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        graph = modern_post(client, server.url, 1, "tools/call", {"name": "read_graph", "arguments": {}}).json()
    assert {e["name"] for e in graph["result"]["structuredContent"]["entities"]} == expected
    assert {json.loads(line)["name"] for line in memory_file.read_text().splitlines()} == expected


def test_a_reader_that_stops_slows_only_its_own_responses(http_servers: HttpServers, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    GraphStore(memory_file).create_entities(entity_items([entity(f"entity-{n:05d}" + "-padding" * 20) for n in range(5000)]))
    # Whole graphs, not pages: the answer budget would cut each to a few hundred KB.
    server = http_servers.memory(memory_file, extra_env={"MEMORY_ANSWER_BUDGET": str(1 << 40)})
    body = json.dumps(modern_request(1, "tools/call", {"name": "read_graph", "arguments": {}})).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in modern_headers("tools/call", "read_graph").items())
    raw = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n{head}content-length: {len(body)}\r\n\r\n").encode() + body
    stalled = []
    for _ in range(10):  # ten connections ask for the whole graph and read nothing
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_SECONDS)
        connection.sendall(raw)
        stalled.append(connection)
    with httpx.Client(timeout=WAIT_SECONDS) as client:  # meanwhile everyone else is served
        for number in range(5):
            written = modern_post(client, server.url, number, "tools/call", {
                "name": "create_entities", "arguments": {"entities": [entity(f"meanwhile-{number}")]}})
            assert written.status_code == 200 and not written.json()["result"].get("isError")
    for connection in stalled:  # and once they read, each gets its whole answer
        received = bytearray()
        while b"\r\n\r\n" not in received:
            received += connection.recv(65536)
        header, _, rest = bytes(received).partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in header.split(b"\r\n") if line.lower().startswith(b"content-length")))
        received = bytearray(rest)
        while len(received) < length:
            try:
                chunk = connection.recv(1 << 20)
            except TimeoutError:
                raise AssertionError((stalled.index(connection), len(received), length, server.stderr)) from None
            assert chunk, ("the connection closed before the whole answer arrived", len(received), length)
            received += chunk
        assert len(json.loads(received)["result"]["structuredContent"]["entities"]) >= 5000
        connection.close()


# --- shutdown -------------------------------------------------------------------------------------------------

def test_sigterm_closes_every_listen_gracefully_ends_get_streams_and_exits_0(
        http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    seen: dict[str, list[Any]] = {"listen": [], "get": []}
    opened = {name: threading.Event() for name in seen}
    ended = {name: threading.Event() for name in seen}
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        session = legacy_session(client, server.url)
        assert client.post(server.url, json=request(1, "resources/subscribe", {"uri": GRAPH_URI}), headers={
            "accept": ACCEPT, "mcp-session-id": session}).status_code == 200

    def follow(name: str, method: str, **kwargs: Any) -> None:
        with httpx.Client(timeout=httpx.Timeout(WAIT_SECONDS, read=None)) as client, \
                client.stream(method, server.url, **kwargs) as response:
            assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
            opened[name].set()
            for message in sse_messages(response.iter_lines()):
                seen[name].append(message)
        ended[name].set()

    listen = modern_request("L", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH_URI]}})
    threads = [threading.Thread(target=follow, args=("listen", "POST"), daemon=True, kwargs={
                   "json": listen, "headers": modern_headers("subscriptions/listen")}),
               threading.Thread(target=follow, args=("get", "GET"), daemon=True, kwargs={
                   "headers": {"accept": "text/event-stream", "mcp-session-id": session}})]
    for thread in threads:
        thread.start()
    deadline = Deadline(WAIT_SECONDS)
    for name in seen:
        assert opened[name].wait(deadline.remaining()), name
    while not seen["listen"]:
        deadline.remaining()
        threading.Event().wait(0.02)
    GraphStore(tmp_path / "memory.jsonl").create_entities(entity_items([entity("Before-shutdown")]))
    while not (any(isinstance(m, dict) and m.get("method") == "notifications/resources/updated" for m in seen["get"])
               and len([m for m in seen["listen"] if isinstance(m, dict)]) >= 2):
        deadline.remaining()
        threading.Event().wait(0.02)

    server.process.send_signal(signal.SIGTERM)
    assert server.wait(timeout=5) == 0, server.stderr  # the bound on exiting
    for name in seen:
        assert ended[name].wait(WAIT_SECONDS), name
    messages = [m for m in seen["listen"] if isinstance(m, dict)]
    assert messages[0]["method"] == "notifications/subscriptions/acknowledged"
    assert messages[1] == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                           "params": {"_meta": {SUBSCRIPTION_ID: "L"}, "uri": GRAPH_URI}}
    assert "id" in messages[-1], (seen, server.stderr)
    assert messages[-1]["id"] == "L" and messages[-1]["result"]["_meta"][SUBSCRIPTION_ID] == "L"
    assert_modern_result("SubscriptionsListenResult", messages[-1]["result"], cached=False)
    assert [m for m in seen["get"] if isinstance(m, dict)] == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": GRAPH_URI}}]


def test_a_listen_refused_before_its_acknowledgement_is_a_plain_json_error(http_servers: HttpServers,
                                                                          tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        refused = client.post(server.url, json=modern_request(1, "subscriptions/listen", {"notifications": []}),
                              headers=modern_headers("subscriptions/listen"))
        assert refused.headers["content-type"] == "application/json"
        assert refused.json()["error"]["code"] == -32602
        bare = modern_request(2, "subscriptions/listen", {"notifications": {}})
        del bare["params"]["_meta"][CLIENT_CAPABILITIES]
        assert client.post(server.url, json=bare, headers=modern_headers("subscriptions/listen")).json()[
            "error"]["code"] == -32602
        sessionless = client.post(server.url, json=request(3, "subscriptions/listen", {"notifications": {}}),
                                  headers={"accept": ACCEPT})
        assert sessionless.status_code == 400 and sessionless.json()["error"]["code"] == -32602


def test_without_the_http_extra_the_server_says_what_to_install(tmp_path: Path) -> None:
    # uvicorn made unimportable, as in an install without the extra; the stdio server never imports it.
    script = ("import sys; sys.modules['uvicorn'] = None\n"
              "from memory_server.__main__ import main\n"
              "main(['--http', '127.0.0.1:0'])\n")
    refused = subprocess.run([sys.executable, "-c", script], env=server_environment(tmp_path / "memory.jsonl"),
                             cwd=tmp_path, capture_output=True, timeout=WAIT_SECONDS, stdin=subprocess.DEVNULL)
    assert refused.returncode != 0
    assert "pip install 'kg-memory-mcp[http]'" in refused.stderr.decode()
    stdio = subprocess.run([sys.executable, "-c", "import sys; sys.modules['uvicorn'] = None\n"
                            "from memory_server.__main__ import main\nmain([])\n"],
                           env=server_environment(tmp_path / "memory.jsonl"), cwd=tmp_path, capture_output=True,
                           timeout=WAIT_SECONDS, input=json.dumps(initialize(0)).encode() + b"\n")
    assert stdio.returncode == 0 and json.loads(stdio.stdout)["result"]["protocolVersion"] == LEGACY


def test_a_client_that_accepts_only_sse_gets_its_answer_as_one_event(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        opened = client.post(server.url, json=initialize(0), headers={"accept": "text/event-stream"})
        assert opened.headers["content-type"] == "text/event-stream" and opened.headers["mcp-session-id"]
        (answer,) = [m for m in sse_messages(iter(opened.text.splitlines())) if isinstance(m, dict)]
        assert answer["id"] == 0 and answer["result"]["protocolVersion"] == LEGACY
        listed = modern_post(client, server.url, 1, "tools/list", accept="text/event-stream")
        (answer,) = [m for m in sse_messages(iter(listed.text.splitlines())) if isinstance(m, dict)]
        assert sorted(tool["name"] for tool in answer["result"]["tools"]) == sorted(TOOL_NAMES)
        assert modern_post(client, server.url, 2, "tools/list").headers["content-type"] == "application/json"
