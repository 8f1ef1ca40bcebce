"""Re-record the corpus's SDK sessions: the official `mcp` Python SDK client, in each of its
connect modes, uses the memory server through `python -m conformance record`.

    .venv/bin/python conformance/corpus/record_sdk_sessions.py

Needs the test extra (`pip install -e '.[test]'`) and Linux (the SIGTERM session finds the
recording proxy through /proc). Each transcript in conformance/corpus/sdk/ is replaced, then
replayed a few times against `python -m memory_server` before the script reports success.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from corpus_tools import (
    ADA,
    BABBAGE,
    CORPUS,
    CORRESPONDED,
    DESIGNED,
    ENGINE,
    MEMORY_SERVER,
    REPO,
    WROTE,
    check_replays,
    interpreter_env,
    record_command,
    relative,
)
from mcp import types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.subscriptions import ResourceUpdated

GRAPH = "memory://knowledge-graph"
WAIT_SECONDS = 30.0

# The SDK marks the legacy subscription calls deprecated; using them is the point of the legacy session.
warnings.filterwarnings("ignore", message="resources/(un)?subscribe is removed")



class Recording:
    """One session being recorded: the transcript file the proxy writes, and what the client hears."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._updates_in, self._updates = anyio.create_memory_object_stream[str](100)

    async def handle_message(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            await self._updates_in.send(str(message.params.uri))

    async def legacy_update(self) -> str:
        return await self._updates.receive()

    async def recorded(self, wanted: Callable[[dict[str, Any]], bool]) -> None:
        """Waits until the proxy has written a transcript line that `wanted` accepts."""
        while not any(wanted(json.loads(line)) for line in self.out.read_text(encoding="utf-8").splitlines()[1:]):
            await anyio.sleep(0.01)

    def proxy_pid(self) -> int:
        """The recording proxy: this process's child that writes `out` (found through /proc)."""
        wanted = str(self.out).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                arguments = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and wanted in arguments:
                return int(entry.name)
        raise SystemExit(f"no recording proxy writing {self.out} among this process's children")


def succeeded(result: types.CallToolResult) -> None:
    if result.is_error:
        raise SystemExit(f"a tool call the session expects to succeed failed: {result.content}")


def expect(holds: bool, what: str) -> None:
    if not holds:
        raise SystemExit(f"the session went differently than scripted: {what}")


async def fill_the_graph(client: Client) -> None:
    """Every write tool once, each changing the graph, so each one announces an update."""
    succeeded(await client.call_tool("create_entities", {"entities": [ADA, BABBAGE, ENGINE]}))
    succeeded(await client.call_tool("create_relations", {"relations": [WROTE, DESIGNED, CORRESPONDED]}))
    succeeded(await client.call_tool("add_observations", {"observations": [
        {"entityName": "Ada_Lovelace", "contents": ["Born in 1815", "Daughter of Lord Byron"]},
    ]}))


async def look_around(client: Client) -> None:
    """Every read tool and the resource, as a model would before answering."""
    succeeded(await client.call_tool("search_nodes", {"query": "engine"}))
    succeeded(await client.call_tool("open_nodes", {"names": ["Ada_Lovelace", "Nobody"]}))
    succeeded(await client.call_tool("read_graph", {}))
    await client.read_resource(GRAPH)


async def prune_the_graph(client: Client) -> None:
    succeeded(await client.call_tool("delete_observations", {"deletions": [
        {"entityName": "Ada_Lovelace", "observations": ["Daughter of Lord Byron"]},
    ]}))
    succeeded(await client.call_tool("delete_relations", {"relations": [CORRESPONDED]}))
    succeeded(await client.call_tool("delete_entities", {"entityNames": ["Charles_Babbage"]}))


async def legacy_session(client: Client, recording: Recording) -> None:
    await client.list_tools()
    await client.list_resources()
    await client.read_resource(GRAPH)
    await client.subscribe_resource(GRAPH)
    await fill_the_graph(client)
    for _ in range(3):
        expect(await recording.legacy_update() == GRAPH, "an update for the graph")
    await look_around(client)
    await prune_the_graph(client)
    for _ in range(3):
        expect(await recording.legacy_update() == GRAPH, "an update for the graph")
    await client.unsubscribe_resource(GRAPH)
    # Unsubscribed: this write is answered, and no update follows it.
    succeeded(await client.call_tool("create_entities", {"entities": [BABBAGE]}))
    await client.read_resource(GRAPH)


async def modern_session(client: Client, recording: Recording) -> None:
    await client.list_tools()
    await client.list_resources()
    await client.read_resource(GRAPH)
    async with client.listen(resource_subscriptions=[GRAPH]) as subscription:
        expect(subscription.honored.resource_subscriptions == [GRAPH], "the listen honours the graph")
        await fill_the_graph(client)
        expect(await anext(subscription) == ResourceUpdated(uri=GRAPH), "an update on the listen")
        await look_around(client)
        await prune_the_graph(client)
        expect(await anext(subscription) == ResourceUpdated(uri=GRAPH), "an update on the listen")
    # Leaving the listen cancels it, but the SDK sends notifications/cancelled from a task of its own.
    # Once the proxy has recorded it, it has also passed it on, so the server reads it before the
    # write below: the write is answered, and no update follows it.
    await recording.recorded(lambda step: step.get("c2s", {}).get("method") == "notifications/cancelled")
    succeeded(await client.call_tool("create_entities", {"entities": [BABBAGE]}))
    await client.read_resource(GRAPH)


async def modern_session_ended_by_sigterm(client: Client, recording: Recording) -> None:
    await client.list_tools()
    async with client.listen(resource_subscriptions=[GRAPH]) as subscription:
        succeeded(await client.call_tool("create_entities", {"entities": [ADA]}))
        expect(await anext(subscription) == ResourceUpdated(uri=GRAPH), "an update on the listen")
        succeeded(await client.call_tool("read_graph", {}))
        # What a host does when it shuts the server down: SIGTERM. The proxy records it and passes
        # it on; the server ends the listen with its graceful-closure response, which ends the loop.
        os.kill(recording.proxy_pid(), signal.SIGTERM)
        async for event in subscription:
            raise SystemExit(f"an event arrived after SIGTERM: {event}")
    # Leaving the client closes stdin; waiting for the server's exit first keeps that race out of the transcript.
    await recording.recorded(lambda step: "exit" in step)


@dataclass(frozen=True)
class Session:
    file: str
    mode: str
    era: str
    description: str
    play: Callable[[Client, Recording], Awaitable[None]]


SESSIONS = (
    Session(
        "sdk/legacy.jsonl", "legacy", "legacy",
        "The mcp Python SDK v2 client in mode='legacy' (initialize handshake, 2025-11-25): lists tools "
        "and resources, reads the knowledge-graph resource, subscribes to it, uses all nine tools "
        "(every write announced by notifications/resources/updated), unsubscribes, writes once more "
        "without an update, and closes stdin.",
        legacy_session,
    ),
    Session(
        "sdk/auto.jsonl", "auto", "modern",
        "The mcp Python SDK v2 client in mode='auto': probes server/discover and so stays modern "
        "(2026-07-28, _meta on every request); lists tools and resources, reads the resource, opens a "
        "subscriptions/listen on it, uses all nine tools (updates tagged with the listen's id), cancels "
        "the listen by leaving it (no response ever comes for it), writes once more without an update, "
        "and closes stdin.",
        modern_session,
    ),
    Session(
        "sdk/modern-2026-07-28.jsonl", "2026-07-28", "modern",
        "The mcp Python SDK v2 client pinned to mode='2026-07-28' (no discovery): the same session as "
        "auto.jsonl without the server/discover probe.",
        modern_session,
    ),
    Session(
        "sdk/modern-listen-sigterm.jsonl", "2026-07-28", "modern",
        "The mcp Python SDK v2 client pinned to 2026-07-28 opens a subscriptions/listen on the "
        "knowledge graph, writes and gets the tagged update, then the server gets SIGTERM: it ends the "
        "listen with its graceful-closure response (a result carrying the subscription id) and exits 0.",
        modern_session_ended_by_sigterm,
    ),
)


async def record_session(session: Session) -> Path:
    out = CORPUS / session.file
    out.parent.mkdir(parents=True, exist_ok=True)
    command = record_command(out, session.description, MEMORY_SERVER)
    parameters = StdioServerParameters(command=command[0], args=command[1:], env=interpreter_env(), cwd=REPO)
    recording = Recording(out)
    with anyio.fail_after(WAIT_SECONDS):
        # No response cache: every call the session makes goes on the wire and into the transcript.
        async with Client(
            parameters, mode=session.mode, cache=None, message_handler=recording.handle_message
        ) as client:
            await session.play(client, recording)
    return out


def main() -> int:
    for session in SESSIONS:
        out = anyio.run(record_session, session)
        transcript = check_replays(out, MEMORY_SERVER)
        if transcript.header.era != session.era:
            raise SystemExit(f"{out}: recorded as a {transcript.header.era} session, expected {session.era}")
        print(f"recorded {relative(out)}: {len(transcript.steps)} lines, replays against {' '.join(MEMORY_SERVER)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
