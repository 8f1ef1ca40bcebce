"""Many memories in one HTTP server on PostgreSQL (issue 32): /memories/{name}/mcp serves memory {name}, each its
own OAuth resource with its own scopes, its own sessions; a memory that does not exist is 404 unless the token may
create it. Against a real PostgreSQL and the test IdP (tests/oauth_helpers.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
import httpx
import pytest
from conftest import WAIT_SECONDS, initialize, modern_request, request
from http_helpers import ACCEPT, HttpServers, free_port, http_servers, modern_headers  # noqa: F401
from oauth_helpers import TestIdP, idp  # noqa: F401
from postgres_helpers import database_url, memory_name  # noqa: F401

from memory_server.app import build_server
from memory_server.memories import Memories, memory_exists
from memory_server.model.items import Entity
from memory_server.oauth_settings import SCOPES, oauth_from, required_scope
from memory_server.storage.postgres.store import PostgresStore
from protocol import asgi_app

PUBLIC_URL = "http://127.0.0.1:8000"


def resource_of(name: str | None) -> str:
    return f"{PUBLIC_URL}/mcp" if name is None else f"{PUBLIC_URL}/memories/{name}/mcp"


def path_of(name: str | None) -> str:
    return "/mcp" if name is None else f"/memories/{name}/mcp"


@asynccontextmanager
async def memories(database_url: str, idp: TestIdP | None, **options: Any) -> AsyncIterator[
        tuple[httpx.AsyncClient, Memories, list[PostgresStore]]]:
    stores = [PostgresStore(database_url, memory_name("default"))]
    oauth = None
    if idp is not None:
        oauth = oauth_from({"MCP_MEMORY_OAUTH_ISSUER": idp.issuer, "MCP_MEMORY_OAUTH_JWKS_URL": idp.jwks_url,
                            "MCP_MEMORY_PUBLIC_URL": PUBLIC_URL}, "/mcp")
    default = asgi_app(build_server(stores[0]), oauth=oauth, required_scope=required_scope, **options)

    def open_server(name: str) -> Any:
        return build_server(PostgresStore(database_url, name))
    app = Memories(default, database_url=database_url, open_server=open_server, app_options=options,
                   public_url=PUBLIC_URL if oauth else None, keys=oauth.keys if oauth else None,
                   issuer=oauth.issuer if oauth else None, scopes=SCOPES)
    try:
        async with app.lifespan():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PUBLIC_URL,
                                         timeout=WAIT_SECONDS) as client:
                yield client, app, stores
    finally:
        for store in stores:
            store.close()


async def call(client: httpx.AsyncClient, memory: str | None, token: str | None, tool: str,
               arguments: dict[str, Any]) -> httpx.Response:
    headers = modern_headers("tools/call", tool)
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return await client.post(path_of(memory), json=modern_request(1, "tools/call", {"name": tool, "arguments": arguments}),
                             headers=headers)


def names_in(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [entity["name"] for entity in answer.json()["result"]["structuredContent"]["entities"]]


def made(database_url: str, name: str, entity: str) -> None:
    """A memory of the database holding one entity, written as another server would."""
    with PostgresStore(database_url, name) as store:
        store.create_entities([Entity(entity, "thing", [])])


def create(entity: str) -> dict[str, Any]:
    return {"entities": [{"name": entity, "entityType": "thing", "observations": []}]}


@pytest.mark.anyio
async def test_each_memory_is_its_own_resource_with_its_own_scopes(database_url: str, idp: TestIdP) -> None:
    alpha, beta = memory_name("alpha"), memory_name("beta")
    made(database_url, alpha, "in alpha")
    made(database_url, beta, "in beta")
    async with memories(database_url, idp) as (client, app, _):
        metadata = (await client.get(f"/.well-known/oauth-protected-resource/memories/{alpha}/mcp")).json()
        assert metadata["resource"] == resource_of(alpha)
        assert {f"memory:read:{alpha}", f"memory:write:{alpha}", "memory:read"} <= set(metadata["scopes_supported"])
        missing = await call(client, alpha, None, "read_graph", {})
        assert missing.status_code == 401
        assert f'/.well-known/oauth-protected-resource/memories/{alpha}/mcp"' in missing.headers["www-authenticate"]
        assert alpha not in app.open  # nothing was opened for a request without a token

        reader = idp.mint(resource_of(alpha), scope=f"memory:read:{alpha}")
        assert names_in(await call(client, alpha, reader, "read_graph", {})) == ["in alpha"]
        refused = await call(client, alpha, reader, "create_entities", create("x"))
        assert refused.status_code == 403
        assert f'scope="memory:write:{alpha}"' in refused.headers["www-authenticate"]
        # A token for alpha is not one for beta (audience), nor one whose scopes name only alpha (scope).
        wrong_audience = await call(client, beta, reader, "read_graph", {})
        assert wrong_audience.status_code == 401 and 'error="invalid_token"' in wrong_audience.headers["www-authenticate"]
        wrong_scope = await call(client, beta, idp.mint(resource_of(beta), scope=f"memory:read:{alpha}"), "read_graph", {})
        assert wrong_scope.status_code == 403 and f'scope="memory:read:{beta}"' in wrong_scope.headers["www-authenticate"]
        # The unqualified scopes grant every memory; what one memory holds stays in it.
        everyone = idp.mint(resource_of(beta))
        assert (await call(client, beta, everyone, "create_entities", create("new in beta"))).status_code == 200
        assert names_in(await call(client, beta, everyone, "read_graph", {})) == ["in beta", "new in beta"]
        assert names_in(await call(client, alpha, reader, "read_graph", {})) == ["in alpha"]
        assert names_in(await call(client, None, idp.mint(resource_of(None)), "read_graph", {})) == []
        assert (await call(client, None, reader, "read_graph", {})).status_code == 401  # /mcp is its own resource too


@pytest.mark.anyio
async def test_sessions_never_cross_memories(database_url: str, idp: TestIdP) -> None:
    alpha, beta = memory_name("alpha"), memory_name("beta")
    made(database_url, alpha, "a")
    made(database_url, beta, "b")
    async with memories(database_url, idp) as (client, _, _):
        opened = await client.post(path_of(alpha), json=initialize(), headers={
            "accept": ACCEPT, "authorization": f"Bearer {idp.mint(resource_of(alpha))}"})
        session = opened.headers["mcp-session-id"]
        listed = request(2, "tools/list")
        here = await client.post(path_of(alpha), json=listed, headers={
            "accept": ACCEPT, "mcp-session-id": session, "authorization": f"Bearer {idp.mint(resource_of(alpha))}"})
        assert here.status_code == 200
        there = await client.post(path_of(beta), json=listed, headers={
            "accept": ACCEPT, "mcp-session-id": session, "authorization": f"Bearer {idp.mint(resource_of(beta))}"})
        assert there.status_code == 404


@pytest.mark.anyio
async def test_a_memory_that_does_not_exist_is_404_unless_the_token_may_create_it(database_url: str,
                                                                                 idp: TestIdP) -> None:
    gamma = memory_name("gamma")
    async with memories(database_url, idp) as (client, app, _):
        everyone = idp.mint(resource_of(gamma))  # memory:read memory:write: every memory, but none made
        absent = await call(client, gamma, everyone, "read_graph", {})
        assert absent.status_code == 404
        assert f"no memory named {gamma!r}" in absent.json()["error"]["message"]
        assert not await anyio.to_thread.run_sync(memory_exists, database_url, gamma)
        assert gamma not in app.open
        creator = idp.mint(resource_of(gamma), scope=f"memory:read:{gamma} memory:write:{gamma}")
        assert (await call(client, gamma, creator, "create_entities", create("first"))).status_code == 200
        assert await anyio.to_thread.run_sync(memory_exists, database_url, gamma)
        assert names_in(await call(client, gamma, everyone, "read_graph", {})) == ["first"]
        for bad in ("bad.name", "a" * 65, "%20"):
            answer = await call(client, bad, everyone, "read_graph", {})
            assert answer.status_code == 404, bad
        nested = await client.post("/memories/x/y/mcp", json=modern_request(1, "tools/list"),
                                   headers=modern_headers("tools/list"))
        assert nested.status_code in (401, 404)


@pytest.mark.anyio
async def test_with_the_shared_token_every_memory_that_exists_is_served_and_none_is_made(database_url: str) -> None:
    alpha, absent = memory_name("alpha"), memory_name("absent")
    made(database_url, alpha, "a")
    async with memories(database_url, None, token="team-token") as (client, app, _):
        assert (await call(client, alpha, "wrong", "read_graph", {})).status_code == 401
        assert alpha not in app.open
        assert names_in(await call(client, alpha, "team-token", "read_graph", {})) == ["a"]
        assert (await call(client, alpha, "wrong", "read_graph", {})).status_code == 401  # once open, too
        assert (await call(client, absent, "team-token", "create_entities", create("x"))).status_code == 404
        assert not await anyio.to_thread.run_sync(memory_exists, database_url, absent)


def test_a_real_server_serves_each_memory_of_its_database_to_the_tokens_for_it(
        http_servers: HttpServers, database_url: str, idp: TestIdP) -> None:
    alpha, beta, default = memory_name("alpha"), memory_name("beta"), memory_name("default")
    made(database_url, alpha, "in alpha")
    made(database_url, beta, "in beta")
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    server = http_servers.command([sys.executable, "-m", "memory_server", "--http", f"127.0.0.1:{port}"], port=port,
                                  env={"MEMORY_DATABASE_URL": database_url, "MEMORY_NAME": default,
                                       "MCP_MEMORY_OAUTH_ISSUER": idp.issuer, "MCP_MEMORY_PUBLIC_URL": public})
    server.wait_ready()

    def read(memory: str | None, token: str) -> httpx.Response:
        return httpx.post(f"{public}{path_of(memory)}", timeout=WAIT_SECONDS,
                          json=modern_request(1, "tools/call", {"name": "read_graph", "arguments": {}}),
                          headers={**modern_headers("tools/call", "read_graph"), "authorization": f"Bearer {token}"})
    for_alpha = idp.mint(f"{public}/memories/{alpha}/mcp", scope=f"memory:read:{alpha}")
    assert names_in(read(alpha, for_alpha)) == ["in alpha"]
    assert read(beta, for_alpha).status_code == 401
    assert names_in(read(beta, idp.mint(f"{public}/memories/{beta}/mcp"))) == ["in beta"]
    assert names_in(read(None, idp.mint(f"{public}/mcp"))) == []
    metadata = httpx.get(f"{public}/.well-known/oauth-protected-resource/memories/{alpha}/mcp", timeout=WAIT_SECONDS)
    assert metadata.json()["resource"] == f"{public}/memories/{alpha}/mcp"
    server.kill()
