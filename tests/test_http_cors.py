"""`--allow-origin` from a real browser, and the Host and Origin checks (issue 21, item 7): a page on an
allowed origin, in headless Chromium, uses the server with a token (preflight answered without it,
`Mcp-Session-Id` readable); a page on another origin gets no CORS headers; malformed origins and
foreign Host names are refused. Against a real `mcp-server-memory --http` process on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cdp_browser import Browser, browser_in, chromium  # noqa: F401  (a fixture)
from conftest import WAIT_SECONDS, initialize
from http_helpers import (
    ACCEPT,
    HttpServers,
    http_servers,  # noqa: F401
    modern_headers,
    modern_post,
)

TOKEN = "browser-token"


class Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>app</title><p>app"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def page_port() -> Iterator[int]:
    site = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    yield int(site.server_address[1])
    site.shutdown()
    site.server_close()


@pytest.fixture
def browser(chromium: str, tmp_path: Path) -> Iterator[Browser]:
    with browser_in(chromium, tmp_path) as opened:
        yield opened


# What the page runs: a 2025-era session (initialize, its Mcp-Session-Id read from the answer, a
# write and a read in the session) and a 2026-07-28 call, all with the token.
SCRIPT = """
(async () => {
  const url = %(url)s, token = %(token)s;
  const base = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                "authorization": "Bearer " + token};
  const post = (headers, body) => fetch(url, {method: "POST", headers: {...base, ...headers}, body: JSON.stringify(body)});
  try {
    const opened = await post({}, %(initialize)s);
    const session = opened.headers.get("mcp-session-id");
    const inSession = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"};
    await post(inSession, {jsonrpc: "2.0", method: "notifications/initialized"});
    const written = await post(inSession, {jsonrpc: "2.0", id: 2, method: "tools/call",
      params: {name: "create_entities",
               arguments: {entities: [{name: "From the page", entityType: "thing", observations: []}]}}});
    const read = await (await post(inSession, {jsonrpc: "2.0", id: 3, method: "tools/call",
      params: {name: "read_graph", arguments: {}}})).json();
    const modern = await (await post(%(modern_headers)s, %(modern_call)s)).json();
    return {status: opened.status, session, written: written.status,
            names: read.result.structuredContent.entities.map(e => e.name),
            modern: modern.result.structuredContent.entities.map(e => e.name)};
  } catch (error) {
    return {error: String(error)};
  }
})()
"""


def page_script(url: str) -> str:
    modern_call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "open_nodes", "arguments": {"names": ["From the page"]},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {key: value for key, value in modern_headers("tools/call", "open_nodes").items()
               if key not in ("accept", "content-type")}
    return SCRIPT % {"url": json.dumps(url), "token": json.dumps(TOKEN), "initialize": json.dumps(initialize(1)),
                     "modern_headers": json.dumps(headers), "modern_call": json.dumps(modern_call)}


def test_a_page_on_an_allowed_origin_uses_the_server_from_chromium_and_another_origin_cannot(
        http_servers: HttpServers, tmp_path: Path, page_port: int, browser: Browser) -> None:
    allowed = f"http://localhost:{page_port}"
    server = http_servers.memory(tmp_path / "memory.jsonl", token=TOKEN, args=("--allow-origin", allowed))
    browser.navigate(f"{allowed}/")
    browser.wait_for("document.readyState === 'complete' && location.host !== ''")
    done = browser.evaluate(page_script(server.url))
    assert done == {"status": 200, "session": done.get("session"), "written": 200,
                    "names": ["From the page"], "modern": ["From the page"]}, (done, server.stderr)
    assert done["session"]
    # the same page from 127.0.0.1, an origin not named: the browser gets no CORS headers and refuses
    browser.navigate(f"http://127.0.0.1:{page_port}/")
    browser.wait_for("location.host.startsWith('127.0.0.1') && document.readyState === 'complete'")
    refused = browser.evaluate(page_script(server.url))
    assert "error" in refused and "Failed to fetch" in refused["error"], refused


def test_the_preflight_is_answered_without_the_token_and_answers_carry_the_cors_headers(
        http_servers: HttpServers, tmp_path: Path) -> None:
    allowed = "https://app.example"
    server = http_servers.memory(tmp_path / "memory.jsonl", token=TOKEN, args=("--allow-origin", allowed))
    with httpx.Client(timeout=WAIT_SECONDS) as client:
        preflight = client.options(server.url, headers={
            "origin": allowed, "access-control-request-method": "POST",
            "access-control-request-headers": "authorization,content-type,mcp-protocol-version,mcp-method,mcp-name"})
        assert preflight.status_code == 204, preflight.text
        assert preflight.headers["access-control-allow-origin"] == allowed
        assert "POST" in preflight.headers["access-control-allow-methods"]
        assert "authorization" in preflight.headers["access-control-allow-headers"]
        assert "Origin" in preflight.headers["vary"]
        opened = client.post(server.url, json=initialize(1), headers={
            "origin": allowed, "accept": ACCEPT, "authorization": f"Bearer {TOKEN}"})
        assert opened.status_code == 200 and opened.headers["access-control-allow-origin"] == allowed
        assert "Mcp-Session-Id" in opened.headers["access-control-expose-headers"]
        # an error is readable by the page too
        unauthorised = client.post(server.url, json=initialize(2), headers={"origin": allowed, "accept": ACCEPT})
        assert unauthorised.status_code == 401 and unauthorised.headers["access-control-allow-origin"] == allowed
        # another origin: refused as before, preflight included, and never given CORS headers
        for method in ("OPTIONS", "POST"):
            foreign = client.request(method, server.url, json=initialize(3), headers={
                "origin": "https://other.example", "access-control-request-method": "POST", "accept": ACCEPT,
                "authorization": f"Bearer {TOKEN}"})
            assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers
        # a loopback origin not named is served as before, without CORS headers
        local = modern_post(client, server.url, 4, "tools/list", origin="http://localhost:3000",
                            authorization=f"Bearer {TOKEN}")
        assert local.status_code == 200 and "access-control-allow-origin" not in local.headers


def raw_status(port: int, head: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS) as connection:
        body = json.dumps(initialize(1)).encode()
        connection.sendall(head + b"Content-Type: application/json\r\nAccept: application/json\r\n"
                           + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_malformed_origins_and_foreign_host_names_are_refused(http_servers: HttpServers, tmp_path: Path) -> None:
    server = http_servers.memory(tmp_path / "memory.jsonl")
    port = server.port
    start = b"POST /mcp HTTP/1.1\r\n"
    for origin in (rb"http://evil.com\@127.0.0.1", b"http://evil.com@127.0.0.1", b"http://127.0.0.1/path",
                   b"http://127.0.0.1:99999", b"javascript://127.0.0.1", b"null"):
        assert raw_status(port, start + b"Host: 127.0.0.1\r\nOrigin: " + origin + b"\r\n") == 403, origin
    for host in (b"evil.example", f"evil.example:{port}".encode(), b"127.0.0.1.evil.example", b"localhost.evil"):
        assert raw_status(port, start + b"Host: " + host + b"\r\n") == 421, host
    for host in (b"127.0.0.1", f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode(), b"[::1]:1"):
        assert raw_status(port, start + b"Host: " + host + b"\r\n") == 200, host
    for origin in (f"http://localhost:{port}".encode(), b"http://127.0.0.1:3000", b"https://[::1]"):
        assert raw_status(port, start + b"Host: 127.0.0.1\r\nOrigin: " + origin + b"\r\n") == 200, origin
