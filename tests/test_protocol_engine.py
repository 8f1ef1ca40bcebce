"""The engine transports share: request contexts, resource_updated from any thread, background tasks that
look before serving, and bounds on what one stdio connection may make the server hold (issue 11, items 9, 10).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import pytest
from conftest import (
    SUBSCRIPTION_ID,
    WAIT_SECONDS,
    Deadline,
    add_waiting_tool,
    cancel,
    initialize,
    modern_request,
    request,
)
from conftest import open_session as open_engine_session
from memory_helpers import GRAPH_URI, UPDATED, MemoryServers, memory_servers, server_environment  # noqa: F401

from memory_server.model.items import Entity
from memory_server.storage.store import GraphStore
from protocol import Runtime, Server, running
from protocol.context import RequestContext
from protocol.eras import Era
from protocol.runtime import current_runtime

MODERN = "2026-07-28"


# --- handlers that take a request context --------------------------------------------------------------------

def context_server() -> tuple[Server, list[RequestContext]]:
    server = Server("context", "1.0.0")
    seen: list[RequestContext] = []

    @server.tool("who", description="Tells who asked.", input_schema={"type": "object"})
    async def who(arguments: dict[str, Any], context: RequestContext) -> dict[str, Any]:
        seen.append(context)
        return {"id": context.request_id, "era": context.era.value if context.era else None,
                "version": context.protocol_version, "client": context.client_info,
                "capabilities": context.client_capabilities, "transport": context.transport}

    @server.tool("plain", description="A one-argument handler, as before.", input_schema={"type": "object"})
    async def plain(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"arguments": arguments}

    add_waiting_tool(server, seen)

    @server.resource("context://uri", name="uri")
    async def read(uri: str, context: RequestContext) -> str:
        return f"{uri} for {context.method}"

    return server, seen


@pytest.mark.anyio
async def test_a_legacy_handler_learns_the_request_the_version_and_the_client_from_initialize() -> None:
    server, _ = context_server()
    async with open_engine_session(server) as peer:
        hello = initialize()
        hello["params"]["capabilities"] = {"roots": {}}
        await peer.call(hello)
        answer = await peer.call(request("q", "tools/call", {"name": "who", "arguments": {}}))
        assert answer["result"]["structuredContent"] == {
            "id": "q", "era": "legacy", "version": "2025-11-25", "client": {"name": "tests", "version": "0"},
            "capabilities": {"roots": {}}, "transport": "stdio"}
        plain = await peer.call(request(2, "tools/call", {"name": "plain", "arguments": {"x": 1}}))
        assert plain["result"]["structuredContent"] == {"arguments": {"x": 1}}
        read = await peer.call(request(3, "resources/read", {"uri": "context://uri"}))
        assert read["result"]["contents"][0]["text"] == "context://uri for resources/read"


@pytest.mark.anyio
async def test_a_modern_handler_learns_what_each_request_carries_in_its_meta() -> None:
    server, _ = context_server()
    async with open_engine_session(server) as peer:
        call = modern_request(5, "tools/call", {"name": "who", "arguments": {}})
        call["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = {"name": "modern", "version": "2"}
        answer = await peer.call(call)
        assert answer["result"]["structuredContent"] == {
            "id": 5, "era": "modern", "version": MODERN, "client": {"name": "modern", "version": "2"},
            "capabilities": {}, "transport": "stdio"}


@pytest.mark.anyio
async def test_a_handler_working_in_a_thread_learns_that_its_request_was_cancelled() -> None:
    server, seen = context_server()
    async with open_engine_session(server) as peer:
        await peer.call(initialize())
        peer.send(request(9, "tools/call", {"name": "wait", "arguments": {}}))
        with anyio.fail_after(WAIT_SECONDS):
            while not seen:
                await anyio.sleep(0.01)
        assert not seen[0].cancelled
        peer.send(cancel(9))
        with anyio.fail_after(WAIT_SECONDS):
            await seen[0].wait_cancelled()
        assert seen[0].cancelled and seen[0].era is Era.LEGACY
        assert await peer.finish() == []  # a cancelled request is never answered


@pytest.mark.anyio
async def test_requests_fed_beyond_the_bound_all_run_at_once_and_each_can_still_be_cancelled() -> None:
    # `feed` starts every request at once, however many: requests are served by reused worker
    # tasks, and their number grows past max_requests when that many are waiting.
    server, seen = context_server()
    async with open_engine_session(server, max_requests=2) as peer:
        await peer.call(initialize())
        for number in range(10):
            peer.send(request(number, "tools/call", {"name": "wait", "arguments": {}}))
        with anyio.fail_after(WAIT_SECONDS):
            while len(seen) < 10:
                await anyio.sleep(0.01)
        for number in range(10):
            peer.send(cancel(number))
        with anyio.fail_after(WAIT_SECONDS):
            for context in seen:
                await context.wait_cancelled()
        # The workers serve on after the cancellations: a later request is answered.
        answer = await peer.call(request("after", "tools/call", {"name": "plain", "arguments": {"n": 1}}))
        assert answer["result"]["structuredContent"] == {"arguments": {"n": 1}}


# --- resource_updated from any thread --------------------------------------------------------------------------

def updating_server() -> Server:
    server = Server("updates", "1.0.0")

    @server.tool("from_worker", description="Announces from a worker thread.", input_schema={"type": "object"})
    async def from_worker(arguments: dict[str, Any]) -> str:
        await anyio.to_thread.run_sync(server.resource_updated, "u://worker")
        return "done"

    @server.tool("from_thread", description="Announces from a thread of its own.", input_schema={"type": "object"})
    async def from_thread(arguments: dict[str, Any]) -> str:
        thread = threading.Thread(target=server.resource_updated, args=("u://thread",))
        thread.start()
        await anyio.to_thread.run_sync(thread.join)
        return "done"

    @server.tool("from_loop", description="Announces from the event loop.", input_schema={"type": "object"})
    async def from_loop(arguments: dict[str, Any]) -> str:
        server.resource_updated("u://loop")
        return "done"

    for uri in ("u://worker", "u://thread", "u://loop"):
        server.resource(uri, name=uri)(_static)
    return server


async def _static(uri: str) -> str:
    return uri


@pytest.mark.anyio
async def test_resource_updated_is_a_plain_call_from_the_loop_a_worker_or_any_thread() -> None:
    server = updating_server()
    async with running(server), open_engine_session(server) as peer:
        await peer.call(initialize())
        for index, uri in enumerate(("u://worker", "u://thread", "u://loop")):
            await peer.call(request(f"s{index}", "resources/subscribe", {"uri": uri}))
        for index, tool in enumerate(("from_worker", "from_thread", "from_loop")):
            peer.send(request(index, "tools/call", {"name": tool, "arguments": {}}))
        messages = [await peer.recv() for _ in range(6)]
        updates = sorted(m["params"]["uri"] for m in messages if m.get("method") == UPDATED)
        assert updates == ["u://loop", "u://thread", "u://worker"]
        assert sorted(m["id"] for m in messages if "id" in m) == [0, 1, 2]


# --- the runtime: what lives while a server serves -----------------------------------------------------------

@pytest.mark.anyio
async def test_a_runtime_runs_the_background_tasks_gives_each_the_runtime_and_cancels_them_at_the_end() -> None:
    server = Server("background", "1.0.0")
    seen: list[Runtime] = []
    stopped = anyio.Event()

    @server.background
    async def looks_first(runtime: Runtime, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        seen.append(runtime)
        task_status.started()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()

    idle = current_runtime(server)
    async with running(server) as runtime:
        assert current_runtime(server) is runtime is not idle
        with anyio.fail_after(WAIT_SECONDS):
            await runtime.wait_ready()  # returns once looks_first has started
        assert seen == [runtime]
        assert not stopped.is_set()
    assert stopped.is_set(), "the block ends after its background tasks have stopped"
    assert current_runtime(server) is idle


@pytest.mark.anyio
async def test_resource_updated_reaches_the_subscribers_of_the_runtime_serving_now() -> None:
    server = updating_server()
    async with running(server) as outer, open_engine_session(server) as before:
        await before.call(initialize())
        for uri in ("u://loop", "u://worker"):
            await before.call(request(uri, "resources/subscribe", {"uri": uri}))
        async with running(server) as inner:
            assert current_runtime(server) is inner
            async with open_engine_session(server) as during:
                await during.call(initialize())
                await during.call(request("s", "resources/subscribe", {"uri": "u://loop"}))
                server.resource_updated("u://loop")
                assert (await during.recv())["params"]["uri"] == "u://loop"
        assert current_runtime(server) is outer
        server.resource_updated("u://worker")
        # Delivered in order: had u://loop reached the outer runtime's subscriber, it would come first.
        assert (await before.recv()) == {"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": "u://worker"}}


# --- issue 11, item 10: a subscriber hears of a write made before the watcher's first interval ----------------

@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_client_that_subscribes_at_once_is_told_of_a_write_made_right_after(
        memory_servers: MemoryServers, tmp_path: Path, era: str) -> None:
    memory_file = tmp_path / "memory.jsonl"
    GraphStore(memory_file).create_entities([Entity("Before", "thing", [])])
    server = memory_servers.process(memory_file)
    if era == "legacy":
        server.call(initialize(0))
        server.call(request(1, "resources/subscribe", {"uri": GRAPH_URI}))
    else:
        server.send(modern_request("listen", "subscriptions/listen",
                                   {"notifications": {"resourceSubscriptions": [GRAPH_URI]}}))
        assert server.recv()["method"] == "notifications/subscriptions/acknowledged"
    # Another process writes at once, well inside the watcher's first half second.
    GraphStore(memory_file).create_entities([Entity("After", "thing", [])])
    update = server.recv()
    assert update["method"] == UPDATED and update["params"]["uri"] == GRAPH_URI
    if era == "modern":
        assert update["params"]["_meta"] == {SUBSCRIPTION_ID: "listen"}


# --- issue 11, item 9: a client that does not read makes the server hold a bounded amount ----------------------

ENTITIES = 20_000
REQUESTS = 100
RSS_BOUND_MB = 400
"""Each read_graph answer here is about 13 MB: unbounded, 100 of them held at once come to 1.4 GB."""


def _status_mb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"{key} not in /proc/{pid}/status")


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _big_memory(tmp_path: Path) -> Path:
    memory_file = tmp_path / "memory.jsonl"
    with memory_file.open("w") as out:
        for number in range(ENTITIES):
            out.write(json.dumps({"type": "entity", "name": f"entity-{number:06d}", "entityType": "person",
                                  "observations": [f"observation {k} of entity {number} with some words in it"
                                                   for k in range(5)]}) + "\n")
    return memory_file


def _send_without_reading(tmp_path: Path, memory_file: Path, requests: int) -> tuple[subprocess.Popen[bytes], list]:
    """A server asked for `requests` whole graphs by a client that reads nothing, once it has done all it will."""
    # Whole graphs, not pages: the answer budget would cut each to a few hundred KB.
    # Without the model: what is measured is what the transport holds for a client that does not
    # read; the model's own memory (and its embedding of this large memory) is bench_semantic's.
    env = {**server_environment(memory_file), "MEMORY_ANSWER_BUDGET": str(1 << 40), "MEMORY_SEMANTIC": "off"}
    process = subprocess.Popen([sys.executable, "-m", "memory_server"], cwd=tmp_path, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None
    lines = [initialize(0)] + [request(n, "tools/call", {"name": "read_graph", "arguments": {}})
                               for n in range(1, requests + 1)]
    payload = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    threading.Thread(target=lambda: (process.stdin.write(payload), process.stdin.flush()),  # type: ignore[union-attr]
                     daemon=True).start()
    # Nobody reads. Wait until the server has done all it will: its CPU time stops moving, but for
    # the few milliseconds a second that its pollers (the file watcher, the wait for the pipe) take.
    deadline = Deadline(120)
    before = -100
    while (now := _cpu_ticks(process.pid)) - before > 3:
        before = now
        time.sleep(min(1.0, deadline.remaining()))
    return process, lines


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads memory use from /proc (Linux)")
def test_a_client_that_stops_reading_keeps_the_server_memory_bounded_and_then_gets_every_answer(
        tmp_path: Path) -> None:
    process, lines = _send_without_reading(tmp_path, _big_memory(tmp_path), REQUESTS)
    try:
        assert process.stdout is not None
        held = _status_mb(process.pid, "VmRSS")
        assert held < RSS_BOUND_MB, f"the server holds {held} MB for a client that does not read"

        answered: set[int] = set()
        for line in process.stdout:
            head = json.loads(line[:line.index(b',"result"')] + b"}") if b',"result"' in line[:80] else json.loads(line)
            answered.add(head["id"])
            if len(answered) == len(lines):
                break
        assert answered == set(range(REQUESTS + 1))
        assert json.loads(line)["result"]["structuredContent"]["entities"][-1]["name"] == f"entity-{ENTITIES - 1:06d}"
        peak = _status_mb(process.pid, "VmHWM")
        assert peak < RSS_BOUND_MB, f"the server's memory peaked at {peak} MB"
    finally:
        process.kill()
        process.wait(WAIT_SECONDS)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads process state from /proc (Linux)")
def test_sigterm_ends_a_server_held_back_by_a_client_that_does_not_read(tmp_path: Path) -> None:
    process, _ = _send_without_reading(tmp_path, _big_memory(tmp_path), 20)
    try:
        process.send_signal(signal.SIGTERM)
        assert process.wait(WAIT_SECONDS) == 0
    finally:
        process.kill()
        process.wait(WAIT_SECONDS)


# --- the package's names ------------------------------------------------------------------------------------

def test_the_package_names_each_part_and_loads_it_only_when_named() -> None:
    # A process of its own: what is loaded is a property of the whole process.
    script = (
        "import sys, protocol, protocol.errors\n"
        "assert sorted(protocol.__all__) == sorted(protocol._HOMES)\n"
        "print(sorted(m for m in sys.modules if m.startswith('protocol.')))\n"
        "from protocol import Server, run_stdio, running\n"
        "print('protocol.http' in sys.modules)\n"
        "from protocol import asgi_app\n"
        "import protocol.http\n"
        "print(asgi_app is protocol.http.asgi_app, run_stdio.__module__, running.__module__, Server.__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True,
                          env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert done.stdout.splitlines() == [
        "['protocol.errors']",  # one small part needs nothing of the engine
        "False",  # a stdio server never loads the HTTP transport
        "True protocol.stdio protocol.runtime protocol.server",
    ], done.stderr
