"""A server's `lifespan` (protocol/runtime.py 5): entered before the first request is served,
closed after the last and after the background tasks have stopped, on stdio (a real subprocess)
and on Streamable HTTP (in-process, through httpx's ASGI transport and the ASGI lifespan events);
and the memory server's store closed through it."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import REPO, WAIT_SECONDS, StdioProcess, initialize, modern_request, request
from http_helpers import modern_headers

from protocol import Runtime, Server, asgi_app, running

SCRIPT = '''
import sys
from contextlib import asynccontextmanager

import anyio

from protocol import Server, run_stdio

log = open(sys.argv[1], "a", buffering=1)
state = {"open": False}


@asynccontextmanager
async def lifespan(server):
    await anyio.sleep(0.05)  # an opening that takes its time: no request may overtake it
    state["open"] = True
    log.write("entered\\n")
    try:
        yield
    finally:
        state["open"] = False
        log.write("closed\\n")


server = Server("lifespan", "1", lifespan=lifespan)


@server.tool("state", description="Whether the lifespan is open.", input_schema={"type": "object"})
async def report(arguments):
    return {"open": state["open"]}


@server.background
async def watch(runtime):
    try:
        await anyio.sleep_forever()
    finally:
        log.write("background stopped\\n")


run_stdio(server)
'''


def state_of(response: dict[str, Any]) -> Any:
    return response["result"]["structuredContent"]


@pytest.mark.parametrize("ending", ["end of input", "SIGTERM"])
def test_stdio_serves_inside_the_lifespan_and_closes_it_after_the_background_tasks(tmp_path: Path,
                                                                                    ending: str) -> None:
    script = tmp_path / "lifespan_server.py"
    script.write_text(textwrap.dedent(SCRIPT))
    log = tmp_path / "lifespan.log"
    process = StdioProcess([sys.executable, str(script), str(log)], env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        # Sent at once, while the lifespan is still opening: answered only once it is open.
        process.send(initialize(0))
        process.send(request(1, "tools/call", {"name": "state", "arguments": {}}))
        assert "result" in process.recv()
        assert state_of(process.recv()) == {"open": True}
        if ending == "SIGTERM":
            process.signal(signal.SIGTERM)
        else:
            process.close_stdin()
        assert process.wait() == 0, process.stderr()
    finally:
        process.kill()
    assert log.read_text().splitlines() == ["entered", "background stopped", "closed"]


# --- in-process -------------------------------------------------------------------------------------------

def recording_server(events: list[str], *, fail_on_entry: bool = False) -> Server:
    """A server whose lifespan, background task and tool note in `events` what they see."""
    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[None]:
        assert server is served
        await anyio.sleep(0)
        if fail_on_entry:
            raise RuntimeError("the database is not there")
        events.append("entered")
        try:
            yield
        finally:
            events.append("closed")

    served = Server("lifespan", "1", lifespan=lifespan)

    @served.tool("state", description="Notes a call.", input_schema={"type": "object"})
    async def state(arguments: dict[str, Any]) -> dict[str, Any]:
        events.append("called")
        return {"open": events.count("entered") > events.count("closed")}

    @served.background
    async def watch(runtime: Runtime) -> None:
        events.append("background started")
        try:
            await anyio.sleep_forever()
        finally:
            events.append("background stopped")
    return served


@pytest.mark.anyio
async def test_running_enters_the_lifespan_first_and_closes_it_last() -> None:
    events: list[str] = []
    server = recording_server(events)
    async with running(server):
        assert events == ["entered"]
        await anyio.wait_all_tasks_blocked()
        assert events == ["entered", "background started"]
    assert events == ["entered", "background started", "background stopped", "closed"]


@pytest.mark.anyio
async def test_a_lifespan_that_fails_to_open_is_raised_by_running_and_nothing_runs() -> None:
    events: list[str] = []
    with pytest.raises(RuntimeError, match="database"):
        async with running(recording_server(events, fail_on_entry=True)):
            pytest.fail("served without its lifespan")
    assert events == []


@pytest.mark.anyio
async def test_a_lifespan_is_closed_when_serving_is_cancelled() -> None:
    events: list[str] = []
    with anyio.move_on_after(0.01):
        async with running(recording_server(events)):
            await anyio.sleep_forever()
    assert events == ["entered", "background started", "background stopped", "closed"]


@pytest.mark.anyio
async def test_streamable_http_serves_inside_the_lifespan_its_host_enters() -> None:
    events: list[str] = []
    app = asgi_app(recording_server(events))
    async with app.lifespan():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            answer = await http.post("/mcp", json=modern_request(1, "tools/call", {"name": "state", "arguments": {}}),
                                     headers=modern_headers("tools/call", "state"))
            assert answer.status_code == 200, answer.text
            assert state_of(answer.json()) == {"open": True}
    assert events[0] == "entered" and events[-2:] == ["background stopped", "closed"]


async def lifespan_events(app: Any, *, shut_down: bool = True) -> list[dict[str, Any]]:
    """Drive `app` through the ASGI lifespan protocol as an ASGI server does; what it sent back."""
    to_app, from_test = anyio.create_memory_object_stream[dict[str, Any]](4)
    sent: list[dict[str, Any]] = []
    answered = anyio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        answered.set()

    async with anyio.create_task_group() as tasks, to_app, from_test:
        tasks.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}}, from_test.receive, send)
        await to_app.send({"type": "lifespan.startup"})
        with anyio.fail_after(WAIT_SECONDS):
            await answered.wait()
        if shut_down and sent[0]["type"] == "lifespan.startup.complete":
            await to_app.send({"type": "lifespan.shutdown"})
    return sent


@pytest.mark.anyio
async def test_the_asgi_lifespan_events_open_and_close_the_servers_lifespan() -> None:
    events: list[str] = []
    sent = await lifespan_events(asgi_app(recording_server(events)))
    assert [message["type"] for message in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert events[0] == "entered" and events[-2:] == ["background stopped", "closed"]


@pytest.mark.anyio
async def test_a_lifespan_that_fails_to_open_fails_the_asgi_startup() -> None:
    events: list[str] = []
    sent = await lifespan_events(asgi_app(recording_server(events, fail_on_entry=True)))
    assert [message["type"] for message in sent] == ["lifespan.startup.failed"]
    assert "database" in sent[0]["message"] and events == []


# --- the memory server ----------------------------------------------------------------------------------------

def store_threads(memory: Path) -> list[threading.Thread]:
    """The threads of the stores of `memory` (named after its file, storage/store.py G5)."""
    return [thread for thread in threading.enumerate() if thread.name.startswith(f"memory-store[{memory.name}]")]


@pytest.mark.anyio
async def test_the_memory_servers_lifespan_closes_its_store(tmp_path: Path) -> None:
    from memory_server.app import build_server
    from memory_server.storage.store import GraphStore

    memory = tmp_path / "lifespan-memory.jsonl"
    store = GraphStore(memory)
    store.look_ahead()
    app = asgi_app(build_server(store))
    async with app.lifespan():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            created = await http.post("/mcp", json=modern_request(1, "tools/call", {
                "name": "create_entities", "arguments": {"entities": [
                    {"name": "Quinn", "entityType": "person", "observations": ["Plays the cello"]}]}}),
                headers=modern_headers("tools/call", "create_entities"))
            assert created.status_code == 200 and "error" not in created.json(), created.text
        assert store_threads(memory)
    assert store_threads(memory) == []
