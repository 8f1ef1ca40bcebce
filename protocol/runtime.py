"""A server while it serves: its background tasks, its readiness, and who hears of a change.

A `Server` is a declaration; a transport serves it inside `running(server)`, which creates the
`Runtime` that holds everything that lives only while serving:

1. The background tasks run in a task group the runtime owns; each receives the runtime. When the
   block ends they are cancelled, and the block does not end before they have stopped.
2. A task that takes `task_status` looks first: until every such task has called `started()`,
   `wait_ready` holds subscriptions back (other requests are served meanwhile), so whatever the task
   does first comes before any subscriber exists. `until_wanted` lets it look early when one waits.
3. `running(server)` makes its runtime the server's current one, and the one current before is
   current again when it ends. `Server.resource_updated` forwards to the current runtime, whose
   `Subscriptions` may be told from any thread.
4. A server that is not running has an idle runtime, made when first asked for: no background
   tasks, ready at once, subscribers told on the caller's thread (sessions driven bare, as tests do).
5. The server's `lifespan` (if it declares one) is entered when `running(server)` starts, before
   any background task starts and before the block (where the transport serves requests) begins;
   it is closed after the background tasks have stopped, whether the block ended normally, by
   an error or by cancellation. An error while it is entered is raised by `running`, and nothing
   is served. So whatever a request or a background task uses of what it opens is open.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from .subscriptions import Subscriptions

if TYPE_CHECKING:
    from .server import BackgroundTask, Server

_current: weakref.WeakKeyDictionary[Server, Runtime] = weakref.WeakKeyDictionary()


class Runtime:
    """The state of one server while it serves (see the module's numbered points)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.subscriptions = Subscriptions()
        self._ready: anyio.Event | None = None  # None: idle, nothing to wait for
        self._wanted: anyio.Event | None = None

    def publish(self, uri: str) -> None:
        """Tell every subscriber of `uri`; safe from any thread, never blocks."""
        self.subscriptions.publish(uri)

    async def wait_ready(self) -> None:
        """Until the background tasks that look first have looked (at once when idle)."""
        if self._ready is not None and not self._ready.is_set():
            assert self._wanted is not None
            self._wanted.set()
            await self._ready.wait()

    async def until_wanted(self, seconds: float) -> None:
        """For a background task: wait `seconds`, or less if a subscription is waiting for it."""
        with anyio.move_on_after(seconds):
            if self._wanted is not None:
                await self._wanted.wait()
            else:
                await anyio.sleep(seconds)


def current_runtime(server: Server) -> Runtime:
    """The runtime serving `server` now: the innermost `running(server)`, else its idle runtime."""
    runtime = _current.get(server)
    if runtime is None:
        runtime = _current.setdefault(server, Runtime(server))
    return runtime


@asynccontextmanager
async def running(server: Server) -> AsyncIterator[Runtime]:
    """`server` served for the duration of the block, by the runtime this yields (see 1-3)."""
    runtime = Runtime(server)
    ready = runtime._ready = anyio.Event()
    runtime._wanted = anyio.Event()
    previous = _current.get(server)
    _current[server] = runtime
    runtime.subscriptions.bind()
    try:
        async with _lifespan_of(server), anyio.create_task_group() as tasks:
            async def start_in_turn(first: list[BackgroundTask]) -> None:
                for task in first:
                    await tasks.start(task, runtime)
                ready.set()

            first = [task for task in server.background_tasks if server.background_ready.get(task)]
            for task in server.background_tasks:
                if task not in first:
                    tasks.start_soon(task, runtime)
            tasks.start_soon(start_in_turn, first)
            try:
                yield runtime
            finally:
                tasks.cancel_scope.cancel()
    finally:
        runtime.subscriptions.unbind()
        if previous is None:
            _current.pop(server, None)
        else:
            _current[server] = previous


@asynccontextmanager
async def _lifespan_of(server: Server) -> AsyncIterator[None]:
    """Statement 5: the server's lifespan, or nothing to open."""
    async with AsyncExitStack() as stack:
        if server.lifespan is not None:
            await stack.enter_async_context(server.lifespan(server))
        yield
