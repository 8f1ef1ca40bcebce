"""Who wrote what (issue 32): every observation records its author, the token's sub over OAuth and the client's
name over stdio; answers show it as observationAuthors, the file keeps it as an optional field the reference
ignores, deleting a fact deletes its author, writing it again keeps the first; on PostgreSQL too."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import WAIT_SECONDS, modern_request
from http_helpers import modern_headers
from jsonschema import Draft202012Validator
from memory_helpers import MemoryServers, entity, memory_servers, server_environment  # noqa: F401
from oauth_helpers import TestIdP, idp  # noqa: F401
from postgres_helpers import database_url, memory_name  # noqa: F401

from memory_server.app import build_server
from memory_server.model.dates import now_stamp
from memory_server.model.items import Entity, ObservationsToAdd
from memory_server.model.records import EntityRecord, Extended, decode_line, encode_line
from memory_server.oauth_settings import oauth_from, required_scope
from memory_server.storage.store import GraphStore
from protocol import asgi_app

DATED = {"MEMORY_DATES": "on"}
PUBLIC_URL = "http://127.0.0.1:8000"
RESOURCE = f"{PUBLIC_URL}/mcp"


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- over stdio: the client's name ---------------------------------------------------------------------------

def test_over_stdio_the_clients_name_is_the_author_and_the_file_stays_the_references(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client("legacy", memory_file, env=DATED)  # initialize names the client "tests"
    client.ok("create_entities", {"entities": [entity("Ada", "person", ["writes programs"])]})
    client.ok("add_observations", {"observations": [{"entityName": "Ada", "contents": ["likes tea"]}]})
    shown = client.ok("open_nodes", {"names": ["Ada"]})["entities"][0]
    assert shown["observations"] == ["writes programs", "likes tea"]
    assert shown["observationAuthors"] == ["tests", "tests"]
    assert client.ok("read_graph")["entities"][0]["observationAuthors"] == ["tests", "tests"]
    line = records_of(memory_file)[0]
    # The reference's keys first, as it writes them; the dates and authors after, which it ignores.
    assert list(line)[:4] == ["type", "name", "entityType", "observations"]
    assert line["recordedBy"] == ["tests", "tests"]


def test_an_author_unknown_is_null_beside_the_ones_known(memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    anonymous = memory_servers.client("modern", memory_file, env=DATED)  # its requests carry no clientInfo
    anonymous.ok("create_entities", {"entities": [entity("Ada", "person", ["writes programs"])]})
    assert "observationAuthors" not in anonymous.ok("open_nodes", {"names": ["Ada"]})["entities"][0]
    assert "recordedBy" not in records_of(memory_file)[0]
    named = memory_servers.client("legacy", memory_file, env=DATED)  # a second process on the same file
    named.ok("add_observations", {"observations": [{"entityName": "Ada", "contents": ["likes tea"]}]})
    assert named.ok("open_nodes", {"names": ["Ada"]})["entities"][0]["observationAuthors"] == [None, "tests"]
    assert anonymous.ok("read_graph")["entities"][0]["observationAuthors"] == [None, "tests"]


def test_without_dates_no_author_is_written_either(memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client("legacy", memory_file, env={"MEMORY_DATES": "off"})
    client.ok("create_entities", {"entities": [entity("Ada", "person", ["writes programs"])]})
    assert records_of(memory_file) == [{"type": "entity", "name": "Ada", "entityType": "person",
                                        "observations": ["writes programs"]}]
    assert "observationAuthors" not in client.ok("open_nodes", {"names": ["Ada"]})["entities"][0]


# --- over OAuth: the token's sub, on the file store and on PostgreSQL -------------------------------------------

@contextmanager
def file_store(tmp_path: Path, _: Any) -> Iterator[Any]:
    yield GraphStore(tmp_path / "memory.jsonl", clock=now_stamp)


@contextmanager
def postgres_store(_: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    from memory_server.storage.postgres.store import PostgresStore

    with PostgresStore(request.getfixturevalue("database_url"), memory_name("authors"), clock=now_stamp) as store:
        yield store


class Writer:
    def __init__(self, client: httpx.AsyncClient, token: str, schemas: dict[str, Any]) -> None:
        self.client, self.token, self.schemas = client, token, schemas

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = await self.client.post("/mcp", json=modern_request(1, "tools/call", {"name": name, "arguments": arguments}),
                                        headers={**modern_headers("tools/call", name),
                                                 "authorization": f"Bearer {self.token}"})
        assert answer.status_code == 200, answer.text
        result = answer.json()["result"]
        assert not result.get("isError"), result
        structured: dict[str, Any] = result["structuredContent"]
        problems = [error.message for error in Draft202012Validator(self.schemas[name]).iter_errors(structured)]
        assert not problems, (name, problems, structured)
        return structured

    async def authors(self, name: str = "Ada") -> tuple[list[str], list[str | None] | None]:
        opened = (await self.call("open_nodes", {"names": [name]}))["entities"][0]
        read = [found for found in (await self.call("read_graph", {}))["entities"] if found["name"] == name][0]
        assert read == opened
        return opened["observations"], opened.get("observationAuthors")


@asynccontextmanager
async def team(tmp_path: Path, idp: TestIdP, store: Any) -> AsyncIterator[Callable[[str], Writer]]:
    resource = oauth_from({"MCP_MEMORY_OAUTH_ISSUER": idp.issuer, "MCP_MEMORY_OAUTH_JWKS_URL": idp.jwks_url,
                           "MCP_MEMORY_PUBLIC_URL": PUBLIC_URL}, "/mcp")
    app = asgi_app(build_server(store), oauth=resource, required_scope=required_scope)
    async with app.lifespan():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PUBLIC_URL,
                                     timeout=WAIT_SECONDS) as client:
            listed = await client.post("/mcp", json=modern_request(1, "tools/list"), headers={
                **modern_headers("tools/list"), "authorization": f"Bearer {idp.mint(RESOURCE)}"})
            schemas = {tool["name"]: tool["outputSchema"] for tool in listed.json()["result"]["tools"]}
            yield lambda subject: Writer(client, idp.mint(RESOURCE, sub=subject), schemas)


@pytest.mark.anyio
@pytest.mark.parametrize("store_of", [file_store, postgres_store], ids=["file", "postgres"])
async def test_over_oauth_the_tokens_sub_is_the_author_first_author_kept_deleted_with_the_fact(
        tmp_path: Path, idp: TestIdP, store_of: Any, request: pytest.FixtureRequest) -> None:
    with store_of(tmp_path, request) as store:
        async with team(tmp_path, idp, store) as writer:
            alice, bob = writer("alice"), writer("bob")
            await alice.call("create_entities", {"entities": [entity("Ada", "person", ["writes programs"])]})
            assert await bob.authors() == (["writes programs"], ["alice"])
            # Bob writes Alice's fact again (nothing changes: hers it stays) and one of his own; the
            # recordedBy he puts in the arguments is no argument of the tool, so it is ignored.
            added = await bob.call("add_observations", {"observations": [
                {"entityName": "Ada", "contents": ["writes programs", "likes tea"], "recordedBy": "alice"}]})
            assert added["results"][0]["addedObservations"] == ["likes tea"]
            assert await alice.authors() == (["writes programs", "likes tea"], ["alice", "bob"])
            await alice.call("create_entities", {"entities": [entity("Ada", "robot", ["is a robot"])]})  # skipped
            assert await alice.authors() == (["writes programs", "likes tea"], ["alice", "bob"])
            # Deleting a fact deletes its authorship; written again, it is its new writer's.
            await bob.call("delete_observations", {"deletions": [{"entityName": "Ada",
                                                                   "observations": ["writes programs"]}]})
            assert await alice.authors() == (["likes tea"], ["bob"])
            await bob.call("add_observations", {"observations": [{"entityName": "Ada", "contents": ["writes programs"]}]})
            assert await alice.authors() == (["likes tea", "writes programs"], ["bob", "bob"])
            # A search shows the authors of the facts it shows.
            found = (await alice.call("search_nodes", {"query": "tea"}))["entities"][0]
            assert found["observationAuthors"][found["observations"].index("likes tea")] == "bob"
            await alice.call("delete_entities", {"entityNames": ["Ada"]})
            await alice.call("create_entities", {"entities": [entity("Ada", "person", ["writes programs"])]})
            assert await bob.authors() == (["writes programs"], ["alice"])


# --- the record ---------------------------------------------------------------------------------------------

def test_authors_of_the_wrong_length_name_nobody_and_of_the_wrong_type_stay_as_written(tmp_path: Path) -> None:
    misaligned = b'{"type":"entity","name":"Ada","entityType":"person","observations":["a","b"],"recordedBy":["x"]}'
    record = decode_line(misaligned, 1)
    assert isinstance(record, EntityRecord) and record.recordedBy == ["x"]
    wrong = b'{"type":"entity","name":"Ada","entityType":"person","observations":["a"],"recordedBy":"alice"}'
    extended = decode_line(wrong, 2)
    assert isinstance(extended, Extended) and extended.record.recordedBy is None
    assert json.loads(bytes(extended.extra["recordedBy"])) == "alice"
    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_bytes(misaligned + b"\n" + wrong.replace(b'"Ada"', b'"Bob"') + b"\n")
    store = GraphStore(memory_file, clock=now_stamp)
    shown = {found["name"]: found for found in store.open_nodes(["Ada", "Bob"])["entities"]}
    assert "observationAuthors" not in shown["Ada"] and "observationAuthors" not in shown["Bob"]
    store.add_observations([ObservationsToAdd("Ada", ["c"])], author="carol")
    store.add_observations([ObservationsToAdd("Bob", ["c"])], author="carol")
    ada, bob = records_of(memory_file)
    assert ada["recordedBy"] == [None, None, "carol"]  # aligned again, the old ones without author
    assert bob["recordedBy"] == [None, "carol"]  # the record's own field; the string it replaced held no list
    assert encode_line(EntityRecord("Ada", "person", ["a"])) == \
        b'{"type":"entity","name":"Ada","entityType":"person","observations":["a"]}'


# --- exports ------------------------------------------------------------------------------------------------

def test_exports_carry_the_authors_and_an_import_brings_them_back(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    store = GraphStore(memory_file, clock=now_stamp)
    store.create_entities([Entity("Ada", "person", ["writes programs"])], author="alice")
    store.add_observations([ObservationsToAdd("Ada", ["likes tea"])])

    def command(*args: str) -> str:
        finished = subprocess.run([sys.executable, "-m", "memory_server", *args], capture_output=True, text=True,
                                  timeout=WAIT_SECONDS, env=server_environment(memory_file, DATED), cwd=tmp_path)
        assert finished.returncode == 0, finished.stderr
        return finished.stdout
    exported = json.loads(command("export", "--format", "json"))
    assert exported["entities"][0]["recordedBy"] == ["alice", None]
    assert "writes programs *(" in command("export", "--format", "markdown")
    assert "by alice" in command("export", "--format", "markdown")
    (tmp_path / "export.json").write_text(json.dumps(exported))
    copy = tmp_path / "copy.jsonl"
    finished = subprocess.run([sys.executable, "-m", "memory_server", "import", "--file", str(copy),
                               str(tmp_path / "export.json")], capture_output=True, text=True, timeout=WAIT_SECONDS,
                              env=server_environment(copy, DATED), cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert records_of(copy)[0]["recordedBy"] == ["alice", None]
