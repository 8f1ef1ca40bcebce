"""The team server under load from clients that misbehave (issue 21, items 1-6), each against a real
`mcp-server-memory --http` process over real sockets on 127.0.0.1: connections that never finish
their headers, bodies that stall, a query of a million words, a flood of listens, writes waiting for
a lock that another process holds, and one client's cut answers against another's cursors."""

from __future__ import annotations

import json
import re
import resource
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import REPO, WAIT_SECONDS, Deadline, modern_request, request
from http_helpers import (
    ACCEPT,
    HttpServers,
    http_servers,  # noqa: F401
    modern_headers,
    modern_post,
)
from memory_helpers import GRAPH_URI, entity, server_environment
from write_items import entity_items

from memory_server.storage.store import GraphStore

TOKEN = "the-team-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}


def open_files(limit: int) -> Callable[[], None]:
    """For preexec_fn: the child's open-file limit, soft and hard, so that it cannot raise it."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def memory_of(path: Path, count: int) -> Path:
    GraphStore(path).create_entities(entity_items([entity(f"Entity {i:04}", "thing", [f"fact {i} " + "x" * 60])
                                                   for i in range(count)]))
    return path


def modern_call(client: httpx.Client, url: str, name: str, arguments: dict[str, Any], **headers: str) -> dict[str, Any]:
    answer = modern_post(client, url, 1, "tools/call", {"name": name, "arguments": arguments}, **headers)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    assert found is not None, status
    return int(found.group(1))


def unread_by_server(port: int) -> int:
    """Bytes that clients sent to `port` and the server has not read yet, over its established connections."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(int(line.split()[4].split(":")[1], 16) for line in lines
               if line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "01")


def closed_by_server(connection: socket.socket, deadline: Deadline) -> bool:
    connection.settimeout(deadline.remaining())
    try:
        while connection.recv(65536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass
    except TimeoutError:
        return False
    return True


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for connection in opened:
        connection.close()


# -- 1: connections that never finish their headers ------------------------------------------------------------

def test_connections_that_never_finish_their_headers_neither_stop_the_service_nor_flood_the_log(
        http_servers: HttpServers, tmp_path: Path, sockets: list[socket.socket]) -> None:
    # 300 open files: the server keeps at most 300 - 100 (accept queue) - 64 (spare) = 136 connections
    server = http_servers.memory(tmp_path / "memory.jsonl", token=TOKEN, preexec_fn=open_files(300),
                                 extra_env={"MCP_MEMORY_HTTP_LIMITS": "header_seconds=3"})
    for _ in range(400):
        try:
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=2)
            connection.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        except OSError:
            continue
        sockets.append(connection)
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        assert modern_call(client, server.url, "read_graph", {}, **AUTH)["structuredContent"] == {
            "entities": [], "relations": []}
        assert modern_call(client, server.url, "create_entities", {"entities": [entity("Still here")]},
                           **AUTH)["structuredContent"]["entities"][0]["name"] == "Still here"
    # a connection that sent half its headers is closed after the header time
    late = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_SECONDS)
    sockets.append(late)
    late.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
    assert closed_by_server(late, Deadline(WAIT_SECONDS))
    assert server.process.poll() is None
    log = server.stderr
    assert log.count("Traceback") <= 1 and len(log) < 20_000, log[-3000:]


def test_headers_without_end_are_cut_off_at_their_size_limit(http_servers: HttpServers, tmp_path: Path,
                                                             sockets: list[socket.socket]) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    endless = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_SECONDS)
    sockets.append(endless)
    endless.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: ")
    try:
        for _ in range(64):  # 4 MiB of one header's value, far past the 64 KiB allowed
            endless.sendall(b"a" * 65536)
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert closed_by_server(endless, Deadline(WAIT_SECONDS))
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        assert modern_call(client, server.url, "read_graph", {})["structuredContent"]["entities"] == []


def test_a_flood_of_malformed_requests_leaves_one_line_in_the_log(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    for _ in range(300):
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_SECONDS) as connection:
            connection.sendall(b"\x16\x03\x01 not HTTP at all\r\n\r\n")
            assert connection.recv(65536).startswith(b"HTTP/1.1 400")
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        assert modern_call(client, server.url, "read_graph", {})["structuredContent"]["entities"] == []
    assert server.stderr.count("Invalid HTTP request") == 1, server.stderr[-3000:]


# -- 2: bodies held at once ------------------------------------------------------------------------------------

def test_stalled_bodies_are_bounded_in_flight_and_their_memory_is_given_back(
        http_servers: HttpServers, tmp_path: Path, sockets: list[socket.socket]) -> None:
    bound = 32 * 1024 * 1024
    # Without the model, which loads as the server starts: what is measured is the bodies' memory.
    server = http_servers.memory(tmp_path / "memory.jsonl", extra_env={
        "MCP_MEMORY_HTTP_LIMITS": f"bodies_bytes={bound}", "MEMORY_SEMANTIC": "off"})
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        modern_call(client, server.url, "read_graph", {})
    before = rss_kib(server.pid)
    piece = b" " * (1024 * 1024)
    refused: list[bytes] = []

    def stall() -> None:  # a body just under the 16 MiB cap, stopping short of its last MiB
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_SECONDS)
        sockets.append(connection)
        connection.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 16777000\r\n\r\n")
        try:
            for _ in range(15):
                connection.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            refused.append(connection.recv(65536))
        except (TimeoutError, OSError):
            pass

    stallers = [threading.Thread(target=stall, daemon=True) for _ in range(12)]
    for staller in stallers:
        staller.start()
    deadline = Deadline(WAIT_SECONDS * 2)
    while len(refused) < 8:  # 12 x 15 MiB sent; at most 32 MiB (two of them) held
        deadline.remaining()
        threading.Event().wait(0.05)
    assert all(answer.startswith(b"HTTP/1.1 503") for answer in refused), refused
    assert b"request bodies" in refused[0]
    with httpx.Client(timeout=WAIT_SECONDS) as client:  # a small request goes through meanwhile
        assert modern_call(client, server.url, "read_graph", {})["structuredContent"]["entities"] == []
    peak = rss_kib(server.pid, "VmHWM")
    assert peak - before < 100 * 1024, (before, peak)  # bound + 12 x 64 KiB free + pieces in transit
    for connection in sockets:
        connection.close()
    while rss_kib(server.pid) - before > 24 * 1024:
        deadline.remaining()
        threading.Event().wait(0.05)


# -- 3: one huge query -----------------------------------------------------------------------------------------

def test_a_query_of_a_million_words_is_refused_with_the_limit_and_a_thousand_words_still_search(
        http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(memory_of(tmp_path / "memory.jsonl", 50))
    flood = " ".join(f"w{i}" for i in range(1_100_000))
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        refused = modern_call(client, server.url, "search_nodes", {"query": flood})
        assert refused["isError"] is True
        assert "more than 1000 distinct words" in refused["content"][0]["text"]
        many = " ".join(f"w{i}" for i in range(999)) + " fact"
        found = modern_call(client, server.url, "search_nodes", {"query": many})
        assert "isError" not in found
        long = "fact " * 10_000  # one distinct word, 50 KB: searched by a worker
        assert len(modern_call(client, server.url, "search_nodes", {"query": long, "characters": 60_000})["structuredContent"][
            "entities"]) == 50


# -- 4: listens ------------------------------------------------------------------------------------------------

def raw_listen(port: int, sockets: list[socket.socket]) -> socket.socket:
    """A 2026-07-28 listen over a plain socket, read up to its acknowledgement and then held open."""
    body = json.dumps(modern_request("L", "subscriptions/listen", {
        "notifications": {"resourceSubscriptions": [GRAPH_URI]}})).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in modern_headers("subscriptions/listen").items())
    connection = socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS)
    sockets.append(connection)
    connection.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
                       + body)
    received = b""
    while b"notifications/subscriptions/acknowledged" not in received:
        chunk = connection.recv(65536)
        assert chunk, received
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return connection


def test_streams_beyond_the_cap_are_refused_with_the_reason_and_one_closed_makes_room(
        http_servers: HttpServers, tmp_path: Path, sockets: list[socket.socket]) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl", extra_env={"MCP_MEMORY_HTTP_LIMITS": "streams=4"})
    listens = [raw_listen(server.port, sockets) for _ in range(4)]
    listen = modern_request("L", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH_URI]}})
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        refused = client.post(server.url, json=listen, headers=modern_headers("subscriptions/listen"))
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == -32600 and "4 streams" in refused.json()["error"]["message"]
        assert refused.json()["id"] == "L" and refused.headers["retry-after"]
        # writes and reads go on meanwhile
        assert modern_call(client, server.url, "create_entities", {"entities": [entity("Written")]})
        listens[0].close()
        deadline = Deadline(WAIT_SECONDS)
        while True:  # the server sees the closed stream, and the next listen is served
            with client.stream("POST", server.url, json=listen, headers=modern_headers("subscriptions/listen")) as again:
                if again.status_code == 200:
                    break
                assert again.status_code == 503
            deadline.remaining()
            threading.Event().wait(0.05)


# -- 5: reads and writes waiting for the lock ------------------------------------------------------------------

HOLDER = """
import sys
from pathlib import Path
from memory_server.storage.store import MemoryFileLock
with MemoryFileLock(Path(sys.argv[1])).held():
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_reads_are_answered_while_seventy_writes_wait_for_a_lock_another_process_holds(
        http_servers: HttpServers, tmp_path: Path) -> None:
    memory = memory_of(tmp_path / "memory.jsonl", 5)
    server = http_servers.memory(memory)
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        assert len(modern_call(client, server.url, "read_graph", {})["structuredContent"]["entities"]) == 5
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(memory)], cwd=REPO, text=True,
                              env=server_environment(memory), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"

        sent = threading.Semaphore(0)

        def note_sent(event: str, _info: dict[str, Any]) -> None:
            if event == "http11.send_request_body.complete":
                sent.release()

        def write(number: int) -> int:
            params = {"name": "create_entities", "arguments": {"entities": [entity(f"Waiting {number}")]}}
            with httpx.Client(timeout=WAIT_SECONDS * 6) as client:
                answer = client.post(server.url, json=modern_request(number, "tools/call", params),
                                     headers=modern_headers("tools/call", "create_entities"),
                                     extensions={"trace": note_sent})
                return answer.status_code

        with ThreadPoolExecutor(70) as pool:
            writes = [pool.submit(write, number) for number in range(70)]
            deadline = Deadline(WAIT_SECONDS)
            # every write is in the server: each client sent its whole request (over loopback, it is
            # then in the server's receive queue), and the server has read every byte of them
            for _ in range(70):
                assert sent.acquire(timeout=deadline.remaining())
            while unread_by_server(server.port) > 0:
                deadline.remaining()
                threading.Event().wait(0.02)
            with httpx.Client(timeout=WAIT_SECONDS) as client:
                # the writes are in: more than every request slot of old waits for the lock now
                for _ in range(3):
                    found = modern_call(client, server.url, "search_nodes", {"query": "fact"})
                    assert len(found["structuredContent"]["entities"]) == 5
                assert client.post(server.url, json=modern_request(2, "tools/list"),
                                   headers=modern_headers("tools/list")).status_code == 200
            assert not any(write.done() for write in writes)
            holder.communicate("go\n", timeout=WAIT_SECONDS)
            assert [write.result() for write in writes] == [200] * 70
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert len(GraphStore(memory).read_graph()["entities"]) == 75


# -- 6: cursors of one client against another's cut answers ----------------------------------------------------

def session_of(client: httpx.Client, url: str) -> dict[str, str]:
    opened = client.post(url, json=request(0, "initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pager", "version": "0"}}),
        headers={"accept": ACCEPT})
    session = {"accept": ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
    client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return session


def legacy_call(client: httpx.Client, url: str, session: dict[str, str], name: str,
                arguments: dict[str, Any]) -> dict[str, Any]:
    answer = client.post(url, json=request(1, "tools/call", {"name": name, "arguments": arguments}), headers=session)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    assert "isError" not in result, result
    return result


WALKED = 40
"""Entities the walker pages through: some six pages of the answer budget below, each one more
round of 60 answers cut by the other clients (more than the 16 each keeps)."""


def test_one_clients_cut_answers_never_expire_another_clients_cursors(http_servers: HttpServers,
                                                                    tmp_path: Path) -> None:
    server = http_servers.memory(memory_of(tmp_path / "memory.jsonl", WALKED),
                                 extra_env={"MEMORY_ANSWER_BUDGET": "5000"})
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        walker, busy = session_of(client, server.url), session_of(client, server.url)
        page = legacy_call(client, server.url, walker, "search_nodes", {"query": "fact"})["structuredContent"]
        seen, pages = [entity["name"] for entity in page["entities"]], 1
        while (cursor := page.get("nextCursor")) is not None:
            pages += 1
            # between two of its pages, another session and a sessionless client cut 20 answers each
            for number in range(20):
                legacy_call(client, server.url, busy, "search_nodes", {"query": f"fact {number}"})
                legacy_call(client, server.url, busy, "read_graph", {})
                modern_call(client, server.url, "search_nodes", {"query": "x"})
            page = legacy_call(client, server.url, walker, "search_nodes",
                               {"query": "fact", "cursor": cursor})["structuredContent"]
            seen += [entity["name"] for entity in page["entities"]]
        assert sorted(seen) == [f"Entity {i:04}" for i in range(WALKED)]
        assert pages > 3, "the walk goes over several pages, each with the others' cuts between"
        # the busy one's own oldest cut answers do expire, beyond its 16
        first = legacy_call(client, server.url, busy, "read_graph", {})["structuredContent"]["nextCursor"]
        for _ in range(16):
            assert legacy_call(client, server.url, busy, "search_nodes", {"query": "fact"})["structuredContent"][
                "nextCursor"]
        expired = client.post(server.url, json=request(1, "tools/call", {
            "name": "read_graph", "arguments": {"cursor": first}}), headers=busy).json()["result"]
        assert expired["isError"] is True and "each client's last 16" in expired["content"][0]["text"]

