"""Helpers for the Streamable HTTP tests: a server process on a free loopback port, an in-process uvicorn,
modern request headers, and an SSE reader for raw streams."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from conftest import REPO, WAIT_SECONDS, Deadline, modern_request
from memory_helpers import server_environment

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpServerProcess:
    """`python -m memory_server --http` (or any script) on a free loopback port; stderr is collected."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], port: int,
                 preexec_fn: Any = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=preexec_fn)
        self._stderr: list[bytes] = []
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self) -> HttpServerProcess:
        deadline = Deadline(WAIT_SECONDS)
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited with {self.process.returncode}:\n{self.stderr}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(min(0.05, deadline.remaining()))

    def wait(self, timeout: float = WAIT_SECONDS) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the server did not exit within {timeout} s:\n{self.stderr}") from None

    @property
    def stderr(self) -> str:
        if self.process.poll() is not None:
            self._reader.join(WAIT_SECONDS)
        return b"".join(self._stderr).decode(errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(WAIT_SECONDS)
        self._reader.join(WAIT_SECONDS)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for chunk in iter(lambda: self.process.stderr.read1(65536), b""):  # type: ignore[union-attr]
            self._stderr.append(chunk)


class HttpServers:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[HttpServerProcess] = []

    def memory(self, memory_file: Path, *, token: str | None = None, args: tuple[str, ...] = (),
               ready: bool = True, extra_env: dict[str, str] | None = None,
               preexec_fn: Any = None) -> HttpServerProcess:
        port = free_port()
        env = {**server_environment(memory_file), **(extra_env or {})}
        env.pop("MCP_MEMORY_HTTP_TOKEN", None)
        if token:
            env["MCP_MEMORY_HTTP_TOKEN"] = token
        argv = [sys.executable, "-m", "memory_server", "--http", f"127.0.0.1:{port}", *args]
        server = HttpServerProcess(argv, cwd=self.workdir, env=env, port=port, preexec_fn=preexec_fn)
        self.started.append(server)
        return server.wait_ready() if ready else server

    def command(self, argv: list[str], *, port: int, env: dict[str, str] | None = None) -> HttpServerProcess:
        server = HttpServerProcess(argv, cwd=self.workdir, env=server_environment(None, env), port=port)
        self.started.append(server)
        return server

    def close(self) -> None:
        for server in self.started:
            server.kill()


@pytest.fixture
def http_servers(tmp_path: Path) -> Iterator[HttpServers]:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    servers = HttpServers(workdir)
    yield servers
    servers.close()


def modern_headers(method: str, name: str | None = None, version: str = MODERN) -> dict[str, str]:
    headers = {"accept": ACCEPT, "content-type": "application/json", "mcp-protocol-version": version,
               "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


def modern_post(client: httpx.Client, url: str, request_id: Any, method: str,
                params: dict[str, Any] | None = None, **extra_headers: str) -> httpx.Response:
    name = (params or {}).get("name") if method == "tools/call" else (params or {}).get("uri")
    headers = {**modern_headers(method, name if isinstance(name, str) else None), **extra_headers}
    return client.post(url, json=modern_request(request_id, method, params), headers=headers)


def sse_messages(lines: Iterator[str]) -> Iterator[dict[str, Any] | str]:
    """JSON-RPC messages of an SSE stream, and ":" for each comment line (a keep-alive)."""
    data: list[str] = []
    for line in lines:
        if line.startswith(":"):
            yield ":"
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            yield json.loads("\n".join(data))
            data = []


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn inside this test's event loop; yield its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning",
                                           ws="none", timeout_graceful_shutdown=1))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        with anyio.fail_after(WAIT_SECONDS):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


__all__ = ["REPO"]
