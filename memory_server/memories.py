"""Many memories in one HTTP server, on PostgreSQL: `/memories/{name}/mcp` serves memory `{name}`.

1. `/mcp` is the server's own memory (MEMORY_NAME) as before; `/memories/{name}/mcp` is memory
   `{name}` of the same database, a name of 1 to 64 letters, digits, `-` and `_` (anything else
   is 404).
2. Each memory is its own endpoint: its own server (tools, pages of cut answers, live updates),
   its own sessions and listens; nothing of one reaches another.
3. Under OAuth each memory is its own resource, `<PUBLIC_URL>/memories/{name}/mcp`, with its
   metadata at `/.well-known/oauth-protected-resource/memories/{name}/mcp`. A token must name it
   as audience (a token for memory A is refused at B: 401); `memory:read:{name}` and
   `memory:write:{name}` grant that memory only, the unqualified scopes every memory (a token
   whose scopes name only A gets 403 at B).
4. A memory that does not exist is 404, with nothing made, unless the token may write it by name
   (`memory:write:{name}`), which creates it. Without OAuth no request creates a memory.
5. A request is authenticated before anything is opened for its memory: unauthenticated
   requests open nothing. At most `MAX_OPEN_MEMORIES` memories are open at once (503 beyond).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from protocol import Server
from protocol.http import StreamableHTTP
from protocol.http.oauth import (
    AUTHORIZATION,
    METADATA_PREFIX,
    Grant,
    KeySet,
    Needed,
    OAuthGuard,
    ProtectedResource,
    Refusal,
    ScopeRule,
)
from protocol.http.security import token_matches

from .oauth_settings import READ_SCOPE, WRITE_SCOPE, required_scope

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]

MAX_OPEN_MEMORIES = 64
_MEMORY_PATH = re.compile(r"/memories/([^/]*)/mcp")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def memory_scopes(name: str) -> tuple[str, str]:
    return f"{READ_SCOPE}:{name}", f"{WRITE_SCOPE}:{name}"


def scope_rule(name: str) -> ScopeRule:
    """Statement 3: the memory's own scope, or the unqualified one, for each request."""
    read, write = memory_scopes(name)

    def needed(method: str, params: dict[str, Any]) -> Needed:
        wanted = required_scope(method, params)
        if wanted is None:
            return None
        return (read, READ_SCOPE) if wanted == READ_SCOPE else (write, WRITE_SCOPE)
    return needed


def memory_exists(url: str, name: str) -> bool:
    """Whether the database holds memory `name` (blocking)."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as connection:
            return connection.execute("SELECT 1 FROM kg_memories WHERE name = %s", (name,)).fetchone() is not None
    except psycopg.errors.UndefinedTable:
        return False  # a database no server has used yet


class Memories:
    """The ASGI app of statement 1: the default endpoint, and the memories opened as they are asked for."""

    def __init__(self, default: StreamableHTTP, *, database_url: str, open_server: Callable[[str], Server],
                 app_options: dict[str, Any], public_url: str | None = None, keys: KeySet | None = None,
                 issuer: str | None = None, scopes: tuple[str, ...] = ()) -> None:
        self.default = default
        self.database_url = database_url
        self.open_server = open_server  # name -> its server, whose lifespan closes its store (app.py 1)
        self.app_options = app_options
        self.public_url = public_url
        self.keys = keys
        self.issuer = issuer
        self.scopes = scopes
        self.open: dict[str, StreamableHTTP] = {}
        self._resources: dict[str, ProtectedResource] = {}
        self._opening = anyio.Lock()
        self._tasks: anyio.abc.TaskGroup | None = None

    # what `protocol.http.run` uses of the app it serves
    @property
    def allowed_hosts(self) -> frozenset[str] | None:
        return self.default.allowed_hosts

    @allowed_hosts.setter
    def allowed_hosts(self, hosts: frozenset[str] | None) -> None:
        self.default.allowed_hosts = hosts
        for app in self.open.values():
            app.allowed_hosts = hosts

    @property
    def closing(self) -> bool:
        return self.default.closing

    def close_streams(self) -> None:
        self.default.close_streams()
        for app in self.open.values():
            app.close_streams()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.default.lifespan(), anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self.close_streams()
                tasks.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            if message["type"] != "lifespan.startup":
                return
            async with self.lifespan():
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "").rstrip("/")
        if path.startswith(METADATA_PREFIX + "/memories/"):
            found = _MEMORY_PATH.fullmatch(path[len(METADATA_PREFIX):])
            if found is None or not _NAME.fullmatch(found.group(1)) or self.keys is None:
                await _answer(send, 404, {"error": "not found"})
                return
            guard = OAuthGuard(self.default, self._resource(found.group(1)), path=path[len(METADATA_PREFIX):])
            await guard(scope, receive, send)  # answers the metadata itself
            return
        found = _MEMORY_PATH.fullmatch(path)
        if found is None:
            await self.default(scope, receive, send)
            return
        name = found.group(1)
        if not _NAME.fullmatch(name):
            await _json_rpc(send, 404, f"Not Found: {name!r} is not a memory name (1 to 64 letters, digits, - and _)")
            return
        app = self.open.get(name)
        if app is None:
            app = await self._open(name, scope, send)
            if app is None:
                return
        await app(scope, receive, send)

    def _resource(self, name: str) -> ProtectedResource:
        resource = self._resources.get(name)
        if resource is None:
            assert self.issuer is not None and self.public_url is not None and self.keys is not None
            resource = ProtectedResource(issuer=self.issuer, resource=f"{self.public_url}/memories/{name}/mcp",
                                         scopes_supported=[*self.scopes, *memory_scopes(name)], keys=self.keys)
            if len(self._resources) >= 4 * MAX_OPEN_MEMORIES:
                del self._resources[next(iter(self._resources))]
            self._resources[name] = resource
        return resource

    async def _open(self, name: str, scope: Scope, send: Send) -> StreamableHTTP | None:
        """Statements 4 and 5: the memory's endpoint, opened now, or None once the refusal is sent."""
        grant: Grant | None = None
        if scope["method"] == "OPTIONS":  # a preflight opens nothing; the memory's own answers it once open
            await send({"type": "http.response.start", "status": 204,
                        "headers": [(b"allow", b"GET, POST, DELETE, OPTIONS")]})
            await send({"type": "http.response.body", "body": b""})
            return None
        token = self.app_options.get("token")
        if self.keys is None and token and not token_matches(_authorization(scope), token.encode()):
            await _json_rpc(send, 401, "Unauthorized: a valid bearer token is required",
                            [(b"www-authenticate", b'Bearer realm="mcp"')])
            return None
        if self.keys is not None:
            outcome = await self._resource(name).authenticate(_authorization(scope))
            if isinstance(outcome, Refusal):
                await _json_rpc(send, outcome.status, outcome.message, outcome.headers)
                return None
            grant = outcome
        async with self._opening:
            if name in self.open:
                return self.open[name]
            creates = grant is not None and memory_scopes(name)[1] in grant.scopes
            if not creates and not await anyio.to_thread.run_sync(memory_exists, self.database_url, name):
                await _json_rpc(send, 404, f"Not Found: there is no memory named {name!r}"
                                + ("; a token with the scope memory:write:" + name + " creates it"
                                   if grant is not None else ""))
                return None
            if len(self.open) >= MAX_OPEN_MEMORIES or self._tasks is None:
                await _json_rpc(send, 503, f"Service Unavailable: {MAX_OPEN_MEMORIES} memories are open, the most "
                                "this server keeps", [(b"retry-after", b"60")])
                return None
            server = await anyio.to_thread.run_sync(self.open_server, name)
            options = dict(self.app_options)
            if self.keys is not None:
                options.update(oauth=self._resource(name), required_scope=scope_rule(name))
            app = StreamableHTTP(server, path=f"/memories/{name}/mcp", allowed_hosts=self.default.allowed_hosts,
                                 **options)
            await self._tasks.start(_run, app)
            self.open[name] = app
            log.info("opened memory %r", name)
            return app


async def _run(app: StreamableHTTP, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    async with app.lifespan():
        task_status.started()
        await anyio.sleep_forever()


def _authorization(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            return str(value.decode("latin-1"))
    return None


async def _answer(send: Send, status: int, document: dict[str, Any],
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(document).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


async def _json_rpc(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await _answer(send, status, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}, headers)


__all__ = ["AUTHORIZATION", "MAX_OPEN_MEMORIES", "Memories", "memory_exists", "memory_scopes", "scope_rule"]
