"""The memory server as a declaration on the protocol engine: tools, one resource, a file watcher,
and the store's lifespan.

1. The store is the server's while it serves: the server's lifespan (protocol/runtime.py 5) closes
   it after the last request and the watcher have stopped, on stdio and HTTP alike: its
   background work stops, and a cache made stale by this run's writes is written for the next
   process (storage/coldstart.py K2). The store is opened by whoever makes it, before the
   server is built: `look_ahead` then reads the file (or connects) while the engine is imported.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import msgspec
from anyio.abc import TaskStatus

from protocol import CacheHint, ProtocolError, Runtime, Server
from protocol.errors import INTERNAL_ERROR
from protocol.server import Lifespan

from . import __version__
from .storage.interface import MemoryStore
from .storage.store import GraphError
from .tools import GRAPH_URI, register_tools

WATCH_INTERVAL_SECONDS = 0.5
"""How often the memory file's stat signature is checked for writes by other processes."""

FIRST_LOOK_SECONDS = 10.0
"""How long subscriptions wait for the watcher's first look at the file (a slow disk must not stop them)."""

INSTRUCTIONS = (
    "This server is a persistent memory: a knowledge graph of entities (people, organizations, "
    "projects, events...), directed relations between them in active voice, and observations, "
    "one atomic fact each, attached to entities. Before answering, look up what you may already "
    "know with search_nodes (a few words; limit caps the matches) or open_nodes (names you know). "
    "read_graph returns everything, so only a small memory fits in one answer: a large answer comes "
    "in pages, the first page of read_graph starts with a summary (entity types, most connected "
    "entities) to pick what to open or search next, and nextCursor, passed back as cursor, gives "
    "the next page; prefer narrowing the question to reading every page. "
    "Record new facts as you learn them: create_entities for new things (names are unique; an "
    "existing name is skipped), add_observations to extend an entity you already have, "
    "create_relations to connect entities that exist. Keep observations short and specific, and "
    "remove outdated ones with delete_observations instead of piling up contradictions."
)


def store_lifespan(store: MemoryStore) -> Lifespan:
    """Statement 1 for `store`."""
    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[None]:
        try:
            yield
        finally:
            # Shielded: serving ends by cancellation too (SIGTERM, the end of input), and the close
            # must still run to its end, in a worker since it may write the cache.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(store.close)
    return lifespan


def build_server(store: MemoryStore, *, watch_interval: float = WATCH_INTERVAL_SECONDS) -> Server:
    server = Server("memory-server", __version__, title="Knowledge Graph Memory", instructions=INSTRUCTIONS,
                    lifespan=store_lifespan(store))
    register_tools(server, store)
    encoder = msgspec.json.Encoder()

    # The graph can change at any moment (other processes share the file), so clients must not
    # keep a read: fresh for 0 ms, and private because it is one user's memory.
    @server.resource(GRAPH_URI, name="knowledge-graph", title="Knowledge Graph",
                     description="The full knowledge graph with all entities and relations",
                     mime_type="application/json", cache=CacheHint(0, "private"))
    async def read_knowledge_graph(uri: str) -> str:
        try:
            return await anyio.to_thread.run_sync(lambda: encoder.encode(store.read_graph()).decode())
        except GraphError as error:
            raise ProtocolError(INTERNAL_ERROR, str(error), {"uri": uri}) from error

    @server.background
    async def watch_memory_file(runtime: Runtime, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        # The first look comes before any subscription is acknowledged (the runtime waits for
        # started()): what the file holds then is the state every later poll compares with, so a
        # subscriber is told of every write made after it subscribed, even one made before the
        # first interval has passed. It is taken after the first interval as before (start-up
        # stays quick), or at once when a subscription is waiting for it.
        await runtime.until_wanted(watch_interval)
        with anyio.move_on_after(FIRST_LOOK_SECONDS):
            if await anyio.to_thread.run_sync(store.poll_external_change, abandon_on_cancel=True):
                server.resource_updated(GRAPH_URI)  # a tool call loaded the file first, then it changed
        task_status.started()
        while True:
            await anyio.sleep(watch_interval)
            if await anyio.to_thread.run_sync(store.poll_external_change):
                server.resource_updated(GRAPH_URI)

    return server
