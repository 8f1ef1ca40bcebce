"""The reverse-proxy example of docs/http.md, run: nginx (Debian's, installed with apt-get when it is
missing and this process may) with that configuration in front of a real `mcp-server-memory --http`,
both on 127.0.0.1, TLS with a certificate made for the test. Through it, tool calls are answered and a
listen's stream arrives unbuffered."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import REPO, WAIT_SECONDS, Deadline, modern_request
from http_helpers import HttpServers, free_port, http_servers, modern_headers, modern_post, sse_messages  # noqa: F401
from memory_helpers import GRAPH_URI, entity

TOKEN = "proxied-token"


def install_nginx() -> str | None:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "nginx"]):
            if subprocess.run(command, env=environment, capture_output=True, timeout=900).returncode != 0:
                return None
        found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    return found


def documented_configuration() -> str:
    found = re.search(r"```nginx\n(.*?)```", (REPO / "docs" / "http.md").read_text(), re.DOTALL)
    assert found is not None, "docs/http.md has no nginx example"
    return found.group(1)


@pytest.fixture
def nginx(tmp_path: Path, http_servers: HttpServers) -> Iterator[tuple[str, str]]:
    executable = install_nginx()
    if executable is None or shutil.which("openssl") is None:
        pytest.fail("this test needs a real nginx and openssl: none is here, and apt-get cannot install them")
    backend = http_servers.memory(tmp_path / "memory.jsonl", token=TOKEN)
    key, certificate = tmp_path / "memory.key", tmp_path / "memory.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=memory.example.lan", "-keyout", str(key), "-out", str(certificate)],
                   check=True, capture_output=True, timeout=WAIT_SECONDS * 2)
    port = free_port()
    site = documented_configuration()
    for documented, here in (("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
                             ("/etc/ssl/memory.crt", str(certificate)), ("/etc/ssl/memory.key", str(key)),
                             ("http://127.0.0.1:8000", f"http://127.0.0.1:{backend.port}")):
        assert documented in site, documented
        site = site.replace(documented, here)
    (tmp_path / "nginx").mkdir()
    configuration = tmp_path / "nginx.conf"
    configuration.write_text(f"""
user root;
daemon off;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/nginx-error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp_path}/nginx/body;
    proxy_temp_path {tmp_path}/nginx/proxy;
    fastcgi_temp_path {tmp_path}/nginx/fastcgi;
    uwsgi_temp_path {tmp_path}/nginx/uwsgi;
    scgi_temp_path {tmp_path}/nginx/scgi;
{site}
}}
""")
    process = subprocess.Popen([executable, "-c", str(configuration), "-p", str(tmp_path)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = Deadline(WAIT_SECONDS)
        while True:
            assert process.poll() is None, process.communicate()[1]
            try:
                httpx.get(f"https://127.0.0.1:{port}/", verify=False, timeout=1)
                break
            except httpx.TransportError:
                deadline.remaining()
                threading.Event().wait(0.05)
        yield f"https://127.0.0.1:{port}/mcp", backend.stderr
    finally:
        process.terminate()
        process.wait(WAIT_SECONDS)


def test_the_documented_nginx_configuration_serves_calls_and_streams_unbuffered(nginx: tuple[str, str]) -> None:
    url, _ = nginx
    auth = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(timeout=WAIT_SECONDS, verify=False) as client:
        written = modern_post(client, url, 1, "tools/call", {
            "name": "create_entities", "arguments": {"entities": [entity("Through the proxy")]}}, **auth)
        assert written.status_code == 200, written.text
        assert written.json()["result"]["structuredContent"]["entities"][0]["name"] == "Through the proxy"
        assert modern_post(client, url, 2, "tools/list").status_code == 401  # the token still guards it
        listen = modern_request("L", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH_URI]}})
        with client.stream("POST", url, json=listen, headers={**modern_headers("subscriptions/listen"), **auth}) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"] == "text/event-stream"
            messages = sse_messages(stream.iter_lines())
            first = next(message for message in messages if isinstance(message, dict))
            assert first["method"] == "notifications/subscriptions/acknowledged"
            # an update crosses the proxy as soon as it is sent, not when a buffer fills
            with httpx.Client(timeout=WAIT_SECONDS, verify=False) as writer:
                assert modern_post(writer, url, 3, "tools/call", {
                    "name": "create_entities", "arguments": {"entities": [entity("Second")]}}, **auth).status_code == 200
            update = next(message for message in messages if isinstance(message, dict))
            assert update["method"] == "notifications/resources/updated" and update["params"]["uri"] == GRAPH_URI
