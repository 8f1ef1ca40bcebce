"""The Streamable HTTP app is a value: mounted under a path in a Starlette app, served in-process by uvicorn
or driven through httpx's ASGI transport; a client that goes away cancels its request; the example server
runs on both transports from one declaration."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import example_server
import httpx
import pytest
from conftest import EXAMPLE_SERVER, REPO, WAIT_SECONDS, add_waiting_tool, initialize, modern_request, request
from http_helpers import ACCEPT, MODERN, HttpServers, free_port, http_servers, modern_headers, serving  # noqa: F401
from mcp.client.client import Client
from mcp.shared.subscriptions import ResourceUpdated
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from protocol import Server, asgi_app
from protocol.context import RequestContext
from protocol.http import HttpLimits

COUNTER = "example://counter"


def host_app(mounted: Any) -> Starlette:
    """Someone else's application, with the MCP endpoint mounted under /tools/example."""
    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mounted.lifespan():
            yield

    async def health(_: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/health", health), Mount("/tools/example", app=mounted)], lifespan=lifespan)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto", MODERN])
async def test_mounted_under_a_path_in_starlette_the_sdk_client_works_in_each_mode(mode: str) -> None:
    app = host_app(asgi_app(example_server.server))
    async with serving(app) as base:
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            assert (await http.get(f"{base}/health")).text == "ok"
            assert (await http.post(f"{base}/mcp", json=initialize())).status_code == 404
            assert (await http.post(f"{base}/tools/example/other", json=initialize())).status_code == 404
        with anyio.fail_after(WAIT_SECONDS):
            async with Client(f"{base}/tools/example/mcp", mode=mode) as client:
                added = await client.call_tool("add", {"a": 2, "b": 40})
                assert added.structured_content == {"sum": 42}
                if mode != "legacy":
                    async with client.listen(resource_subscriptions=[COUNTER]) as subscription:
                        await client.call_tool("bump", {})
                        assert await anext(subscription) == ResourceUpdated(uri=COUNTER)
                read = await client.read_resource(COUNTER)
                assert int(read.contents[0].text) >= (0 if mode == "legacy" else 1)


@pytest.mark.anyio
async def test_the_mounted_app_answers_through_an_asgi_transport_without_any_server() -> None:
    mounted = asgi_app(example_server.server)
    async with mounted.lifespan():
        transport = httpx.ASGITransport(app=host_app(mounted))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            listed = await http.post("/tools/example/mcp", json=modern_request(1, "tools/list"),
                                     headers=modern_headers("tools/list"))
            assert listed.status_code == 200
            assert [tool["name"] for tool in listed.json()["result"]["tools"]] == ["add", "sleep", "fail", "crash", "bump"]
            foreign = await http.post("/tools/example/mcp", json=modern_request(1, "tools/list"),
                                      headers={**modern_headers("tools/list"), "origin": "https://evil.example"})
            assert foreign.status_code == 403


# --- a client that goes away cancels its request ---------------------------------------------------------------

def waiting_server() -> tuple[Server, list[RequestContext]]:
    server = Server("waiting", "1.0.0")
    seen: list[RequestContext] = []

    add_waiting_tool(server, seen)

    return server, seen


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_client_that_disconnects_mid_answer_cancels_its_request(era: str) -> None:
    server, seen = waiting_server()
    async with serving(asgi_app(server)) as base:
        url = f"{base}/mcp"
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            if era == "legacy":
                opened = await http.post(url, json=initialize(), headers={"accept": ACCEPT})
                headers = {"accept": ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
                call = request(1, "tools/call", {"name": "wait", "arguments": {}})
            else:
                headers = modern_headers("tools/call", "wait")
                call = modern_request(1, "tools/call", {"name": "wait", "arguments": {}})
        with anyio.fail_after(WAIT_SECONDS):
            async with anyio.create_task_group() as tasks:
                async def ask() -> None:
                    async with httpx.AsyncClient(timeout=WAIT_SECONDS) as caller:
                        await caller.post(url, json=call, headers=headers)

                tasks.start_soon(ask)
                while not seen:
                    await anyio.sleep(0.01)
                assert not seen[0].cancelled
                tasks.cancel_scope.cancel()  # the caller closes its connection
            await seen[0].wait_cancelled()
        context = seen[0]
        assert context.transport == "http" and context.request_id == 1
        assert context.era is not None and context.era.value == era
        assert (context.session_id is not None) == (era == "legacy")


# --- one declaration, both transports -------------------------------------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_example_server_runs_over_http_from_the_same_declaration(http_servers: HttpServers, mode: str) -> None:
    port = free_port()
    process = http_servers.command([sys.executable, str(EXAMPLE_SERVER), "--http", f"127.0.0.1:{port}"], port=port,
                                   env={"PYTHONPATH": str(REPO)}).wait_ready()
    with anyio.fail_after(WAIT_SECONDS):
        async with Client(process.url, mode=mode) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["add", "sleep", "fail", "crash", "bump"]
            assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"sum": 3}
            failed = await client.call_tool("fail", {})
            assert failed.is_error and failed.content[0].text == "this tool always fails"
            read = await client.read_resource(COUNTER)
            assert read.contents[0].text == "0"


@pytest.mark.anyio
async def test_a_legacy_cancel_notification_stops_the_named_request_and_its_post_ends_empty() -> None:
    server, seen = waiting_server()
    async with serving(asgi_app(server)) as base:
        url = f"{base}/mcp"
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            opened = await http.post(url, json=initialize(), headers={"accept": ACCEPT})
            headers = {"accept": ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
            answers: list[httpx.Response] = []
            with anyio.fail_after(WAIT_SECONDS):
                async with anyio.create_task_group() as tasks:
                    async def ask() -> None:
                        answers.append(await http.post(url, json=request("w", "tools/call", {
                            "name": "wait", "arguments": {}}), headers=headers))

                    tasks.start_soon(ask)
                    while not seen:
                        await anyio.sleep(0.01)
                    cancelled = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                           "params": {"requestId": "w"}}, headers=headers)
                    assert cancelled.status_code == 202
                await seen[0].wait_cancelled()
            assert answers[0].status_code == 202 and answers[0].content == b""


@pytest.mark.anyio
async def test_in_a_legacy_session_an_id_already_in_flight_is_refused_and_the_first_request_lives_on() -> None:
    server, seen = waiting_server()
    async with serving(asgi_app(server)) as base:
        url = f"{base}/mcp"
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            opened = await http.post(url, json=initialize(), headers={"accept": ACCEPT})
            headers = {"accept": ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
            call = request(1, "tools/call", {"name": "wait", "arguments": {}})
            answers: list[httpx.Response] = []
            with anyio.fail_after(WAIT_SECONDS):
                async with anyio.create_task_group() as tasks:
                    async def ask() -> None:
                        answers.append(await http.post(url, json=call, headers=headers))

                    tasks.start_soon(ask)
                    while not seen:
                        await anyio.sleep(0.01)
                    again = await http.post(url, json=call, headers=headers)
                    other = await http.post(url, json=request("1", "ping"), headers=headers)  # "1" is another id
                    assert not seen[0].cancelled
                    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                               "params": {"requestId": 1}}, headers=headers)
            assert again.status_code == 400
            assert again.json() == {"jsonrpc": "2.0", "id": 1, "error": {
                "code": -32600, "message": "Invalid Request: id 1 is already in use by a request in flight"}}
            assert other.status_code == 200 and other.json()["result"] == {}
            assert answers[0].status_code == 202  # the first ran until its own cancel
            free = await http.post(url, json=request(1, "ping"), headers=headers)
            assert free.status_code == 200 and free.json()["id"] == 1  # its id is free once it finished


@pytest.mark.anyio
async def test_a_quiet_listen_stream_carries_keep_alive_comments() -> None:
    async with serving(asgi_app(example_server.server, limits=HttpLimits(keepalive_seconds=0.05))) as base:
        listen = modern_request("k", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [COUNTER]}})
        with anyio.fail_after(WAIT_SECONDS):
            async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http, \
                    http.stream("POST", f"{base}/mcp", json=listen, headers=modern_headers("subscriptions/listen")) as stream:
                assert stream.headers["x-accel-buffering"] == "no"
                lines: list[str] = []
                async for line in stream.aiter_lines():
                    lines.append(line)
                    if lines.count(": keep-alive") >= 2:
                        break
        assert lines[0] == "event: message" and '"notifications/subscriptions/acknowledged"' in lines[1]


@pytest.mark.anyio
async def test_beyond_its_session_cap_the_server_ends_the_session_unused_for_longest() -> None:
    async with serving(asgi_app(example_server.server, limits=HttpLimits(max_sessions=2))) as base:
        url = f"{base}/mcp"
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            async def session() -> str:
                opened = await http.post(url, json=initialize(), headers={"accept": ACCEPT})
                return opened.headers["mcp-session-id"]

            async def ping(session_id: str) -> int:
                answer = await http.post(url, json=request(1, "ping"), headers={"mcp-session-id": session_id})
                return answer.status_code

            first, second = await session(), await session()
            assert await ping(first) == 200  # the second is now the one unused for longest
            third = await session()
            assert [await ping(first), await ping(second), await ping(third)] == [200, 404, 200]


@pytest.mark.anyio
async def test_requests_beyond_the_concurrency_cap_wait_their_turn_and_one_that_leaves_gives_up_its_place() -> None:
    server = Server("gated", "1.0.0")
    inside: list[int] = []
    entered: list[int] = []
    peak = [0]
    release = {number: anyio.Event() for number in range(1, 5)}

    @server.tool("hold", description="Holds its slot until the test lets it go.",
                 input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                 annotations={"readOnlyHint": True})  # a read: it waits among the reads
    async def hold(arguments: dict[str, Any]) -> str:
        number = arguments["n"]
        inside.append(number)
        entered.append(number)
        peak[0] = max(peak[0], len(inside))
        try:
            await release[number].wait()
        finally:
            inside.remove(number)
        return f"done {number}"

    app = asgi_app(server, limits=HttpLimits(max_concurrent_requests=2))
    async with serving(app) as base:
        url = f"{base}/mcp"
        answers: dict[int, str] = {}

        async def call(number: int) -> None:
            async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
                answer = await http.post(url, json=modern_request(number, "tools/call", {
                    "name": "hold", "arguments": {"n": number}}), headers=modern_headers("tools/call", "hold"))
                answers[number] = answer.json()["result"]["content"][0]["text"]

        async def until(condition: Any) -> None:
            while not condition():
                await anyio.sleep(0.005)

        with anyio.fail_after(WAIT_SECONDS):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, 1)
                await until(lambda: entered == [1])
                tasks.start_soon(call, 2)
                await until(lambda: entered == [1, 2])
                async with anyio.create_task_group() as leaving:
                    leaving.start_soon(call, 3)
                    await until(lambda: len(app._slots._waiting) == 1)
                    leaving.cancel_scope.cancel()  # its client closes the connection while it waits
                await until(lambda: not app._slots._waiting)  # it gave up its place
                tasks.start_soon(call, 4)
                await until(lambda: len(app._slots._waiting) == 1)
                release[1].set()  # its slot goes straight to the one waiting
                await until(lambda: entered == [1, 2, 4])
                release[2].set()
                release[4].set()
    assert answers == {1: "done 1", 2: "done 2", 4: "done 4"}
    assert peak[0] == 2 and 3 not in entered


IDLE = 60.0
"""The session idle time of the tests that move the sessions' clock."""


def clocked(server: Server) -> tuple[Any, list[float]]:
    """An app whose sessions read the clock `now[0]`, which the test moves."""
    now = [1000.0]
    return asgi_app(server, limits=HttpLimits(session_idle_seconds=IDLE), clock=lambda: now[0]), now


async def new_session(http: httpx.AsyncClient, url: str) -> str:
    opened = await http.post(url, json=initialize(), headers={"accept": ACCEPT})
    return str(opened.headers["mcp-session-id"])


@pytest.mark.anyio
async def test_a_session_asked_something_within_each_idle_time_never_expires() -> None:
    idle = IDLE
    app, now = clocked(waiting_server()[0])
    async with serving(app) as base:
        url = f"{base}/mcp"
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            active, idle_one = await new_session(http, url), await new_session(http, url)
            for step in range(4):  # two idle times in all, a request every half of one
                now[0] += idle / 2
                answered = await http.post(url, json=request(step, "ping"), headers={"mcp-session-id": active})
                assert answered.status_code == 200
            gone = await http.post(url, json=request(9, "ping"), headers={"mcp-session-id": idle_one})
            assert gone.status_code == 404


@pytest.mark.anyio
async def test_a_request_longer_than_the_idle_time_keeps_its_session_and_idle_ones_go_at_the_next_initialize() -> None:
    idle = IDLE
    server, seen = waiting_server()
    app, now = clocked(server)
    async with serving(app) as base:
        url = f"{base}/mcp"
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            async def session() -> str:
                return await new_session(http, url)

            busy, forgotten = await session(), await session()
            answers: list[httpx.Response] = []
            with anyio.fail_after(WAIT_SECONDS):
                async with anyio.create_task_group() as tasks:
                    async def ask() -> None:
                        answers.append(await http.post(url, json=request(1, "tools/call", {
                            "name": "wait", "arguments": {}}), headers={"accept": ACCEPT, "mcp-session-id": busy}))

                    tasks.start_soon(ask)
                    while not seen:
                        await anyio.sleep(0.01)
                    now[0] += idle * 1.5  # the request outlasts the idle time
                    assert set(app.sessions) == {busy, forgotten}  # nothing expires by itself
                    fresh = await session()  # a new session sweeps out the expired ones: not one under way
                    assert set(app.sessions) == {busy, fresh}
                    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                               "params": {"requestId": 1}}, headers={"mcp-session-id": busy})
            assert answers[0].status_code == 202
            now[0] += idle * 0.9  # idle from the end of its request on: still there
            assert (await http.post(url, json=request(2, "ping"), headers={"mcp-session-id": busy})).status_code == 200
            gone = await http.post(url, json=request(3, "ping"), headers={"mcp-session-id": forgotten})
            assert gone.status_code == 404
            now[0] += idle  # fresh was never used after its initialize
            assert (await http.post(url, json=request(4, "ping"), headers={"mcp-session-id": fresh})).status_code == 404
