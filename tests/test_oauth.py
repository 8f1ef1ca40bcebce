"""The HTTP endpoint as an OAuth resource server, against a test IdP made here (tests/oauth_helpers.py): the
protected resource metadata, the challenges, every refusal of a token, the scopes, the key cache, discovery, the
settings, and a real `mcp-server-memory --http` process."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
import pytest
from conftest import WAIT_SECONDS, initialize, modern_request, request
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from http_helpers import ACCEPT, HttpServers, free_port, http_servers, modern_headers  # noqa: F401
from oauth_helpers import SigningKey, TestIdP, idp  # noqa: F401
from postgres_helpers import database_url, memory_name  # noqa: F401

from memory_server.app import build_server
from memory_server.oauth_settings import oauth_from, required_scope
from memory_server.storage.store import GraphStore
from protocol import asgi_app
from protocol.http.oauth import KeySet

PUBLIC_URL = "http://127.0.0.1:8000"
RESOURCE = f"{PUBLIC_URL}/mcp"
METADATA_URL = f"{PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"


class Clock:
    """The key cache's clock, moved on by the test instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def environment(idp: TestIdP, **extra: str) -> dict[str, str]:
    return {"MCP_MEMORY_OAUTH_ISSUER": idp.issuer, "MCP_MEMORY_PUBLIC_URL": PUBLIC_URL, **extra}


@asynccontextmanager
async def memory_client(tmp_path: Path, idp: TestIdP, *, clock: Clock | None = None, jwks_url: bool = True,
                        database_url: str | None = None,
                        **app_options: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """The memory server's HTTP app under OAuth, on a memory file, or on a memory of `database_url`."""
    env = environment(idp, **({"MCP_MEMORY_OAUTH_JWKS_URL": idp.jwks_url} if jwks_url else {}))
    resource = oauth_from(env, "/mcp")
    assert resource is not None
    if clock is not None:
        resource.keys = KeySet(idp.issuer, resource.keys.jwks_url, clock=clock)
    if database_url is None:
        store: Any = GraphStore(tmp_path / "memory.jsonl")
    else:
        from memory_server.storage.postgres.store import PostgresStore
        store = PostgresStore(database_url, memory_name("oauth"))
    app = asgi_app(build_server(store), oauth=resource, required_scope=required_scope, **app_options)
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000",
                                     timeout=WAIT_SECONDS) as client:
            yield client, resource
    store.close()


def on(store: str, request: pytest.FixtureRequest) -> str | None:
    """The database URL for a test parametrized over the stores, None on the file store."""
    return str(request.getfixturevalue("database_url")) if store == "postgres" else None


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def call(client: httpx.AsyncClient, token: str | None, method: str, params: dict[str, Any] | None = None,
               **headers: str) -> httpx.Response:
    name = (params or {}).get("name") if method == "tools/call" else (params or {}).get("uri")
    sent = {**modern_headers(method, name if isinstance(name, str) else None), **headers}
    if token is not None:
        sent.update(bearer(token))
    return await client.post("/mcp", json=modern_request(1, method, params), headers=sent)


def challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of a Bearer WWW-Authenticate header."""
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    found: dict[str, str] = {}
    for part in value[len("Bearer "):].split('", '):
        name, _, quoted = part.partition("=")
        found[name.strip()] = quoted.strip().strip('"')
    return found


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(payload: dict[str, Any], header: dict[str, Any]) -> str:
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"


def claims(idp: TestIdP, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    body = {"iss": idp.issuer, "aud": RESOURCE, "sub": "mallory", "scope": "memory:read memory:write",
            "iat": now, "exp": now + 300}
    body.update(changes)
    return body


CREATE = {"name": "create_entities", "arguments": {"entities": [{"name": "Ada", "entityType": "person",
                                                               "observations": ["writes programs"]}]}}
READ = {"name": "read_graph", "arguments": {}}


# --- 2. protected resource metadata -------------------------------------------------------------------------

@pytest.mark.anyio
async def test_metadata_answers_at_both_well_known_paths_without_a_token(tmp_path: Path, idp: TestIdP) -> None:
    async with memory_client(tmp_path, idp) as (client, _):
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            answer = await client.get(path)
            assert answer.status_code == 200, path
            assert answer.headers["content-type"] == "application/json"
            document = answer.json()
            assert document["resource"] == RESOURCE
            assert document["authorization_servers"] == [idp.issuer]
            assert {"memory:read", "memory:write"} <= set(document["scopes_supported"])
            assert document["bearer_methods_supported"] == ["header"]
        assert (await client.post("/.well-known/oauth-protected-resource/mcp")).status_code == 405


@pytest.mark.anyio
async def test_a_request_without_a_token_gets_401_naming_the_metadata_and_the_scopes(tmp_path: Path,
                                                                                     idp: TestIdP) -> None:
    async with memory_client(tmp_path, idp) as (client, _):
        for answer in (await call(client, None, "tools/list"),
                       await client.post("/mcp", json=initialize(), headers={"accept": ACCEPT}),
                       await client.get("/mcp", headers={"accept": "text/event-stream"})):
            assert answer.status_code == 401
            found = challenge(answer)
            assert found["resource_metadata"] == METADATA_URL
            assert set(found["scope"].split()) == {"memory:read", "memory:write"}
            assert "error" not in found  # no token was sent: nothing to call invalid (RFC 6750 3.1)
            assert "bearer token" in answer.json()["error"]["message"]


@pytest.mark.anyio
async def test_a_preflight_needs_no_token_and_a_refusal_to_an_allowed_origin_carries_cors(tmp_path: Path,
                                                                                        idp: TestIdP) -> None:
    page = "https://app.example"
    async with memory_client(tmp_path, idp, allowed_origins=[page]) as (client, _):
        preflight = await client.options("/mcp", headers={"origin": page, "access-control-request-method": "POST"})
        assert preflight.status_code == 204
        refused = await call(client, None, "tools/list", origin=page)
        assert refused.status_code == 401
        assert refused.headers["access-control-allow-origin"] == page
        assert "WWW-Authenticate" in refused.headers["access-control-expose-headers"]


# --- 3. tokens that are served -----------------------------------------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["RS256", "ES256", "typ JWT", "no typ", "aud list", "exp within leeway",
                                  "nbf within leeway"])
async def test_valid_tokens_are_served(tmp_path: Path, idp: TestIdP, kind: str) -> None:
    now = int(time.time())
    token = {
        "RS256": lambda: idp.mint(RESOURCE),
        "ES256": lambda: idp.mint(RESOURCE, key=idp.ec),
        "typ JWT": lambda: idp.mint(RESOURCE, headers={"typ": "JWT"}),
        "no typ": lambda: idp.mint(RESOURCE, headers={"typ": None}),
        "aud list": lambda: idp.mint(RESOURCE, aud=["https://other.example/api", RESOURCE]),
        "exp within leeway": lambda: idp.mint(RESOURCE, exp=now - 30),
        "nbf within leeway": lambda: idp.mint(RESOURCE, nbf=now + 30),
    }[kind]()
    async with memory_client(tmp_path, idp) as (client, _):
        created = await call(client, token, "tools/call", CREATE)
        assert created.status_code == 200, created.text
        assert "isError" not in created.json()["result"] or not created.json()["result"]["isError"]
        graph = await call(client, token, "tools/call", READ)
        assert [e["name"] for e in graph.json()["result"]["structuredContent"]["entities"]] == ["Ada"]


# --- 3. every refusal of a token -----------------------------------------------------------------------------

def refused_tokens(idp: TestIdP) -> dict[str, str]:
    now = int(time.time())
    good = idp.mint(RESOURCE)
    head, payload, signature = good.split(".")
    changed = json.loads(base64.urlsafe_b64decode(payload + "=="))
    changed["scope"] = "memory:read memory:write admin"
    public_pem = idp.rsa.private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)

    def hs256(secret: bytes, kid: str | None = "rsa-1") -> str:
        signing_input = unsigned(claims(idp), {"alg": "HS256", "typ": "JWT", **({"kid": kid} if kid else {})})
        return f"{signing_input}.{b64(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"

    stranger = SigningKey("RS256", "rsa-1")  # claims a published kid, signs with another key
    unknown = SigningKey("RS256", "rotated-away")
    return {
        "alg none": unsigned(claims(idp), {"alg": "none", "typ": "JWT"}) + ".",
        "alg none with kid": unsigned(claims(idp), {"alg": "none", "kid": "rsa-1"}) + ".",
        "HS256 keyed with the public key (algorithm confusion)": hs256(public_pem),
        "HS256 with a secret": hs256(b"a shared secret"),
        "RS384": _resigned(idp, "RS384"),
        "PS256": _resigned(idp, "PS256"),
        "key not in the JWKS": idp.mint(RESOURCE, key=unknown),
        "signed by another key under a published kid": idp.mint(RESOURCE, key=stranger),
        "payload changed": f"{head}.{b64(json.dumps(changed).encode())}.{signature}",
        "signature cut off": f"{head}.{payload}.",
        "iss different": idp.mint(RESOURCE, iss="https://evil.example/realms/test"),
        "no iss": idp.mint(RESOURCE, iss=None),
        "aud another resource": idp.mint("https://other.example/mcp"),
        "aud another memory of this server": idp.mint(f"{PUBLIC_URL}/memories/other/mcp"),
        "aud the server without the path": idp.mint(PUBLIC_URL),
        "no aud": idp.mint(RESOURCE, aud=None),
        "exp passed beyond the leeway": idp.mint(RESOURCE, exp=now - 120),
        "no exp": idp.mint(RESOURCE, exp=None),
        "no sub": idp.mint(RESOURCE, sub=None),
        "sub not a string": idp.mint(RESOURCE, sub=42),
        "nbf ahead beyond the leeway": idp.mint(RESOURCE, nbf=now + 120),
        "typ of an id token": idp.mint(RESOURCE, headers={"typ": "id_token+jwt"}),
        "malformed: one word": "not-a-jwt",
        "malformed: three words of junk": "a.b.c",
        "malformed: header not JSON": f"{b64(b'{oops')}.{payload}.{signature}",
        "malformed: header a JSON list": f"{b64(b'[1, 2]')}.{payload}.{signature}",
        "malformed: header not UTF-8": f"{b64(bytes([0xff, 0xfe, 0x7b]))}.{payload}.{signature}",
        "malformed: four segments": f"{head}.{payload}.{signature}.{signature}",
        "malformed: base64 with padding": f"{head}==.{payload}.{signature}",
        "malformed: spaces inside": f"{head}. {payload}.{signature}",
    }


def _resigned(idp: TestIdP, algorithm: str) -> str:
    return jwt.encode(claims(idp), idp.rsa.private, algorithm=algorithm, headers={"kid": "rsa-1"})


REFUSALS = [
    "alg none", "alg none with kid", "HS256 keyed with the public key (algorithm confusion)", "HS256 with a secret",
    "RS384", "PS256", "key not in the JWKS", "signed by another key under a published kid", "payload changed",
    "signature cut off", "iss different", "no iss", "aud another resource", "aud another memory of this server",
    "aud the server without the path", "no aud", "exp passed beyond the leeway", "no exp", "no sub",
    "sub not a string", "nbf ahead beyond the leeway", "typ of an id token", "malformed: one word",
    "malformed: three words of junk", "malformed: header not JSON", "malformed: header a JSON list",
    "malformed: header not UTF-8", "malformed: four segments", "malformed: base64 with padding",
    "malformed: spaces inside"]


@pytest.mark.anyio
@pytest.mark.parametrize("case", REFUSALS)
async def test_a_bad_token_is_refused_401_invalid_token_and_nothing_is_done(
        tmp_path: Path, idp: TestIdP, case: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = refused_tokens(idp)[case]
    async with memory_client(tmp_path, idp) as (client, _):
        answer = await call(client, token, "tools/call", CREATE)
        assert answer.status_code == 401, answer.text
        found = challenge(answer)
        assert found["error"] == "invalid_token"
        assert found["resource_metadata"] == METADATA_URL
        assert found["error_description"]
        assert answer.json()["error"]["message"].startswith("Unauthorized: ")
        # The token is in no answer nor log line, not even a piece of it.
        for piece in {token, *[part for part in token.split(".") if len(part) > 8]}:
            assert piece not in answer.text and piece not in answer.headers["www-authenticate"]
            assert piece not in caplog.text
        served = await call(client, idp.mint(RESOURCE), "tools/call", READ)
        assert served.json()["result"]["structuredContent"]["entities"] == []  # nothing was created


@pytest.mark.anyio
@pytest.mark.parametrize("authorization", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer    ", "token abc"])
async def test_an_authorization_that_is_not_a_bearer_token_is_refused(tmp_path: Path, idp: TestIdP,
                                                                      authorization: str) -> None:
    async with memory_client(tmp_path, idp) as (client, _):
        answer = await client.post("/mcp", json=modern_request(1, "tools/list"),
                                   headers={**modern_headers("tools/list"), "authorization": authorization})
        assert answer.status_code == 401
        assert challenge(answer)["error"] == "invalid_token"


# --- 4. scopes ------------------------------------------------------------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("store", ["file", "postgres"])
async def test_a_read_token_reads_and_a_write_gets_403_insufficient_scope_with_nothing_done(
        tmp_path: Path, idp: TestIdP, store: str, request: pytest.FixtureRequest) -> None:
    reader = idp.mint(RESOURCE, scope="memory:read")
    async with memory_client(tmp_path, idp, database_url=on(store, request)) as (client, _):
        for tool in ("create_entities", "create_relations", "add_observations", "delete_entities",
                     "delete_observations", "delete_relations"):
            refused = await call(client, reader, "tools/call", {"name": tool, "arguments": CREATE["arguments"]})
            assert refused.status_code == 403, tool
            found = challenge(refused)
            assert found == {"error": "insufficient_scope", "error_description": found["error_description"],
                             "scope": "memory:write", "resource_metadata": METADATA_URL}
            assert "memory:write" in refused.json()["error"]["message"]
        for tool, arguments in (("read_graph", {}), ("search_nodes", {"query": "Ada"}),
                                ("open_nodes", {"names": ["Ada"]})):
            read = await call(client, reader, "tools/call", {"name": tool, "arguments": arguments})
            assert read.status_code == 200, tool
            assert read.json()["result"]["structuredContent"]["entities"] == []
        resource = await call(client, reader, "resources/read", {"uri": "memory://knowledge-graph"})
        assert resource.status_code == 200
        assert json.loads(resource.json()["result"]["contents"][0]["text"])["entities"] == []


@pytest.mark.anyio
@pytest.mark.parametrize("store", ["file", "postgres"])
async def test_a_write_only_token_cannot_read_and_a_token_without_scopes_only_lists(
        tmp_path: Path, idp: TestIdP, store: str, request: pytest.FixtureRequest) -> None:
    writer = idp.mint(RESOURCE, scope="memory:write")
    nothing = idp.mint(RESOURCE, scope=None)
    async with memory_client(tmp_path, idp, database_url=on(store, request)) as (client, _):
        assert (await call(client, writer, "tools/call", CREATE)).status_code == 200
        for token in (writer, nothing):
            for method, params in (("tools/call", READ), ("resources/read", {"uri": "memory://knowledge-graph"}),
                                   ("subscriptions/listen", {"filters": {"resourceSubscriptions": ["x"]}})):
                refused = await call(client, token, method, params)
                assert refused.status_code == 403, (method, refused.text)
                assert challenge(refused)["scope"] == "memory:read"
            assert (await call(client, token, "tools/list")).status_code == 200
        assert (await call(client, nothing, "tools/call", CREATE)).status_code == 403
        # An unknown tool is refused by default: it needs at least memory:read.
        assert (await call(client, nothing, "tools/call", {"name": "drop_everything", "arguments": {}})).status_code == 403


@pytest.mark.anyio
async def test_scopes_as_an_scp_list_or_string_count_too(tmp_path: Path, idp: TestIdP) -> None:
    async with memory_client(tmp_path, idp) as (client, _):
        okta = idp.mint(RESOURCE, scope=None, scp=["memory:read", "memory:write"])
        entra = idp.mint(RESOURCE, scope=None, scp="memory:read")
        assert (await call(client, okta, "tools/call", CREATE)).status_code == 200
        assert (await call(client, entra, "tools/call", READ)).status_code == 200
        assert (await call(client, entra, "tools/call", CREATE)).status_code == 403


@pytest.mark.anyio
async def test_a_legacy_session_answers_only_to_the_subject_that_opened_it(tmp_path: Path, idp: TestIdP) -> None:
    alice, bob = idp.mint(RESOURCE, sub="alice"), idp.mint(RESOURCE, sub="bob")
    async with memory_client(tmp_path, idp) as (client, _):
        opened = await client.post("/mcp", json=initialize(), headers={"accept": ACCEPT, **bearer(alice)})
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        listed = request(2, "tools/list")
        mine = await client.post("/mcp", json=listed, headers={"accept": ACCEPT, "mcp-session-id": session,
                                                               **bearer(idp.mint(RESOURCE, sub="alice"))})
        assert mine.status_code == 200
        theirs = await client.post("/mcp", json=listed, headers={"accept": ACCEPT, "mcp-session-id": session,
                                                                 **bearer(bob)})
        assert theirs.status_code == 404
        assert (await client.delete("/mcp", headers={"mcp-session-id": session, **bearer(bob)})).status_code == 404
        assert (await client.delete("/mcp", headers={"mcp-session-id": session, **bearer(alice)})).status_code == 204


# --- 3. the key cache ------------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_an_unknown_kid_refetches_the_keys_at_most_once_per_interval(tmp_path: Path, idp: TestIdP) -> None:
    clock = Clock()
    async with memory_client(tmp_path, idp, clock=clock) as (client, resource):
        assert (await call(client, idp.mint(RESOURCE), "tools/list")).status_code == 200
        assert idp.jwks_fetches == 1
        for _ in range(3):
            assert (await call(client, idp.mint(RESOURCE), "tools/list")).status_code == 200
        assert idp.jwks_fetches == 1  # known keys are kept
        # The IdP rotates: a new key, announced in the JWKS, signs the next tokens.
        clock.now += resource.keys.refetch_seconds
        rotated = SigningKey("ES256", "ec-2")
        idp.publish(idp.rsa, idp.ec, rotated)
        results: list[int] = []

        async def one() -> None:
            results.append((await call(client, idp.mint(RESOURCE, key=rotated), "tools/list")).status_code)
        async with anyio.create_task_group() as tasks:
            for _ in range(8):
                tasks.start_soon(one)
        assert results == [200] * 8
        assert idp.jwks_fetches == 2  # eight requests with the new kid, one fetch
        # A flood of made-up kids within the interval fetches nothing more.
        for number in range(10):
            made_up = SigningKey("ES256", f"made-up-{number}")
            assert (await call(client, idp.mint(RESOURCE, key=made_up), "tools/list")).status_code == 401
        assert idp.jwks_fetches == 2
        clock.now += resource.keys.refetch_seconds
        assert (await call(client, idp.mint(RESOURCE, key=SigningKey("ES256", "made-up")), "tools/list")).status_code \
            == 401
        assert idp.jwks_fetches == 3


@pytest.mark.anyio
async def test_while_the_idp_is_down_known_keys_keep_working(tmp_path: Path, idp: TestIdP) -> None:
    clock = Clock()
    async with memory_client(tmp_path, idp, clock=clock) as (client, resource):
        assert (await call(client, idp.mint(RESOURCE), "tools/call", CREATE)).status_code == 200
        token = idp.mint(RESOURCE)
        idp.stop()
        clock.now += resource.keys.max_age_seconds + 1  # the keys are due for a refetch, which fails
        assert (await call(client, token, "tools/call", READ)).status_code == 200
        assert (await call(client, idp.mint(RESOURCE, key=idp.ec), "tools/call", READ)).status_code == 200
        clock.now += resource.keys.refetch_seconds
        unknown = await call(client, idp.mint(RESOURCE, key=SigningKey("RS256", "new")), "tools/list")
        assert unknown.status_code == 401
        assert challenge(unknown)["error"] == "invalid_token"


@pytest.mark.anyio
async def test_no_key_ever_fetched_is_503_not_a_token_refusal(tmp_path: Path, idp: TestIdP) -> None:
    idp.stop()
    async with memory_client(tmp_path, idp) as (client, _):
        answer = await call(client, idp.mint(RESOURCE), "tools/list")
        assert answer.status_code == 503
        assert answer.headers["retry-after"]
        assert "keys" in answer.json()["error"]["message"]


# --- 1. discovery ----------------------------------------------------------------------------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("oauth_metadata", [True, False])
async def test_without_a_jwks_url_the_keys_are_found_through_the_issuer_metadata(tmp_path: Path,
                                                                                 oauth_metadata: bool) -> None:
    provider = TestIdP(oauth_metadata=oauth_metadata)
    try:
        async with memory_client(tmp_path, provider, jwks_url=False) as (client, _):
            assert (await call(client, provider.mint(RESOURCE), "tools/list")).status_code == 200
        wanted = ["/realms/test/.well-known/oauth-authorization-server"]
        if not oauth_metadata:
            wanted.append("/realms/test/.well-known/openid-configuration")
        assert provider.requests == [*wanted, "/realms/test/protocol/keys"]
    finally:
        provider.stop()


@pytest.mark.anyio
async def test_metadata_that_names_another_issuer_is_not_trusted(tmp_path: Path, idp: TestIdP) -> None:
    document = idp.document

    def impostor(path: str) -> dict[str, Any] | None:
        found = document(path)
        if found is not None and "issuer" in found:
            found["issuer"] = "https://evil.example"
        return found
    idp.document = impostor  # type: ignore[method-assign]
    async with memory_client(tmp_path, idp, jwks_url=False) as (client, _):
        assert (await call(client, idp.mint(RESOURCE), "tools/list")).status_code == 503
    assert idp.jwks_fetches == 0


# --- 1. settings -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("env", "words"), [
    ({"MCP_MEMORY_OAUTH_ISSUER": "https://id.example", "MCP_MEMORY_PUBLIC_URL": "https://m.example",
      "MCP_MEMORY_HTTP_TOKEN": "s3cret"}, ["MCP_MEMORY_OAUTH_ISSUER", "MCP_MEMORY_HTTP_TOKEN"]),
    ({"MCP_MEMORY_OAUTH_ISSUER": "http://id.example", "MCP_MEMORY_PUBLIC_URL": "https://m.example"},
     ["MCP_MEMORY_OAUTH_ISSUER", "https"]),
    ({"MCP_MEMORY_OAUTH_ISSUER": "https://id.example"}, ["MCP_MEMORY_PUBLIC_URL"]),
    ({"MCP_MEMORY_OAUTH_ISSUER": "https://id.example", "MCP_MEMORY_PUBLIC_URL": "http://m.example"},
     ["MCP_MEMORY_PUBLIC_URL", "https"]),
    ({"MCP_MEMORY_OAUTH_ISSUER": "https://id.example", "MCP_MEMORY_PUBLIC_URL": "https://m.example",
      "MCP_MEMORY_OAUTH_JWKS_URL": "http://keys.example/jwks"}, ["MCP_MEMORY_OAUTH_JWKS_URL", "https"]),
    ({"MCP_MEMORY_OAUTH_ISSUER": "id.example", "MCP_MEMORY_PUBLIC_URL": "https://m.example"},
     ["MCP_MEMORY_OAUTH_ISSUER", "absolute"]),
    ({"MCP_MEMORY_OAUTH_JWKS_URL": "https://id.example/jwks"}, ["MCP_MEMORY_OAUTH_ISSUER"]),
])
def test_settings_that_cannot_make_a_resource_server_are_refused_by_name(env: dict[str, str],
                                                                        words: list[str]) -> None:
    with pytest.raises(ValueError) as refused:
        oauth_from(env, "/mcp")
    for word in words:
        assert word in str(refused.value)
    assert "s3cret" not in str(refused.value)


def test_loopback_issuers_may_use_http_and_oauth_is_off_without_an_issuer() -> None:
    for host in ("127.0.0.1:9000", "localhost:9000", "[::1]:9000"):
        resource = oauth_from({"MCP_MEMORY_OAUTH_ISSUER": f"http://{host}/realm",
                               "MCP_MEMORY_PUBLIC_URL": "https://memory.example/"}, "/mcp")
        assert resource is not None and resource.resource == "https://memory.example/mcp"
        assert resource.metadata_url == "https://memory.example/.well-known/oauth-protected-resource/mcp"
    assert oauth_from({"MCP_MEMORY_HTTP_TOKEN": "t"}, "/mcp") is None


@pytest.mark.anyio
async def test_the_shared_token_mode_is_unchanged_when_oauth_is_off(tmp_path: Path) -> None:
    app = asgi_app(build_server(GraphStore(tmp_path / "memory.jsonl")), token="team-token")
    async with app.lifespan():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            assert (await call(client, "team-token", "tools/list")).status_code == 200
            wrong = await call(client, "other", "tools/list")
            assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == 'Bearer realm="mcp"'
            assert (await client.get("/.well-known/oauth-protected-resource/mcp")).status_code == 404


def test_an_app_with_both_a_token_and_oauth_is_refused(idp: TestIdP, tmp_path: Path) -> None:
    resource = oauth_from(environment(idp), "/mcp")
    with pytest.raises(ValueError, match="exclude each other"):
        asgi_app(build_server(GraphStore(tmp_path / "memory.jsonl")), token="t", oauth=resource)


# --- a real mcp-server-memory --http process --------------------------------------------------------------------

def test_a_real_server_process_discovers_the_keys_and_guards_its_endpoint(http_servers: HttpServers, tmp_path: Path,
                                                                         idp: TestIdP) -> None:
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    env = {"MCP_MEMORY_OAUTH_ISSUER": idp.issuer, "MCP_MEMORY_PUBLIC_URL": public}
    server = http_servers.command([sys.executable, "-m", "memory_server", "--http", f"127.0.0.1:{port}"],
                                  port=port, env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl"), **env})
    server.wait_ready()
    resource = f"{public}/mcp"
    used: list[str] = []

    def mint(audience: str, **claims: Any) -> str:
        used.append(idp.mint(audience, **claims))
        return used[-1]
    with httpx.Client(base_url=public, timeout=WAIT_SECONDS) as client:
        metadata = client.get("/.well-known/oauth-protected-resource/mcp").json()
        assert metadata["resource"] == resource and metadata["authorization_servers"] == [idp.issuer]

        def post(token: str | None, params: dict[str, Any]) -> httpx.Response:
            headers = modern_headers("tools/call", params["name"])
            if token is not None:
                headers.update(bearer(token))
            return client.post("/mcp", json=modern_request(1, "tools/call", params), headers=headers)

        missing = post(None, READ)
        assert missing.status_code == 401
        assert challenge(missing)["resource_metadata"] == f"{public}/.well-known/oauth-protected-resource/mcp"
        assert post(mint(RESOURCE), READ).status_code == 401  # a token for another resource
        assert post(mint(resource, exp=int(time.time()) - 600), READ).status_code == 401
        assert post(mint(resource, scope="memory:read"), CREATE).status_code == 403
        assert post(mint(resource), CREATE).status_code == 200
        graph = post(mint(resource, scope="memory:read"), READ).json()["result"]["structuredContent"]
        assert [entity["name"] for entity in graph["entities"]] == ["Ada"]
    assert "Ada" in (tmp_path / "memory.jsonl").read_text()
    server.kill()
    assert "OAuth" in server.stderr
    for token in used:
        assert not any(part in server.stderr for part in token.split(".")[1:])


def test_a_server_given_both_oauth_and_a_shared_token_does_not_start(http_servers: HttpServers, tmp_path: Path,
                                                                     idp: TestIdP) -> None:
    port = free_port()
    env = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl"), "MCP_MEMORY_HTTP_TOKEN": "team-secret",
           "MCP_MEMORY_OAUTH_ISSUER": idp.issuer, "MCP_MEMORY_PUBLIC_URL": "http://127.0.0.1:1"}
    server = http_servers.command([sys.executable, "-m", "memory_server", "--http", f"127.0.0.1:{port}"],
                                  port=port, env=env)
    assert server.wait() != 0
    assert "MCP_MEMORY_OAUTH_ISSUER" in server.stderr and "MCP_MEMORY_HTTP_TOKEN" in server.stderr
    assert "team-secret" not in server.stderr


# --- 8. a token that passed is remembered, within its times and its keys --------------------------------------

@pytest.mark.anyio
async def test_a_remembered_token_is_refused_once_it_expires_and_a_future_one_served_once_due(
        tmp_path: Path, idp: TestIdP) -> None:
    wall = Clock()
    wall.now = time.time()
    async with memory_client(tmp_path, idp) as (client, resource):
        resource.clock = wall
        token = idp.mint(RESOURCE, exp=int(wall.now) + 300)
        early = idp.mint(RESOURCE, nbf=int(wall.now) + 400, exp=int(wall.now) + 3600)
        assert (await call(client, token, "tools/list")).status_code == 200
        assert (await call(client, token, "tools/list")).status_code == 200  # remembered
        refused = await call(client, early, "tools/list")
        assert refused.status_code == 401 and challenge(refused)["error_description"] == "the token is not valid yet"
        wall.now += 300 + 60  # its exp and the leeway have passed
        expired = await call(client, token, "tools/list")
        assert expired.status_code == 401
        assert challenge(expired) | {"error_description": "the token has expired"} == challenge(expired)
        assert (await call(client, early, "tools/list")).status_code == 200  # nbf minus the leeway has come


@pytest.mark.anyio
async def test_a_remembered_token_of_a_key_the_issuer_withdrew_is_refused_once_the_keys_are_fetched_again(
        tmp_path: Path, idp: TestIdP) -> None:
    clock = Clock()
    async with memory_client(tmp_path, idp, clock=clock) as (client, resource):
        token = idp.mint(RESOURCE)
        assert (await call(client, token, "tools/list")).status_code == 200
        idp.publish(idp.ec)  # the RSA key is withdrawn
        assert (await call(client, token, "tools/list")).status_code == 200  # until the keys are fetched again
        clock.now += resource.keys.refetch_seconds
        assert (await call(client, idp.mint(RESOURCE, key=SigningKey("ES256", "ec-9")), "tools/list")).status_code \
            == 401  # an unknown kid: the keys are fetched again
        assert idp.jwks_fetches == 2
        withdrawn = await call(client, token, "tools/list")
        assert withdrawn.status_code == 401 and challenge(withdrawn)["error"] == "invalid_token"
        assert (await call(client, idp.mint(RESOURCE, key=idp.ec), "tools/list")).status_code == 200
