"""`--http` says it serves only once it does: on a port in use, or without the http extra, the
server ends with one true line on stderr and a non-zero exit status, never "Streamable HTTP on ..."
nor uvicorn's start and shutdown lines."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
from conftest import WAIT_SECONDS, initialize
from http_helpers import free_port
from memory_helpers import server_environment


def started(tmp_path: Path, argv: list[str], prelude: str = "") -> subprocess.CompletedProcess[str]:
    script = f"{prelude}from memory_server.__main__ import main\nmain({argv!r})\n"
    return subprocess.run([sys.executable, "-c", script], env=server_environment(tmp_path / "memory.jsonl"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_SECONDS, stdin=subprocess.DEVNULL)


def said(done: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr without the line naming the memory file (true before the HTTP part starts)."""
    return [line for line in done.stderr.splitlines() if "memory file" not in line]


def test_a_port_in_use_ends_with_one_true_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = started(tmp_path, ["--http", f"127.0.0.1:{port}"])
    assert done.returncode != 0
    assert said(done) == [f"mcp-server-memory: cannot serve on http://127.0.0.1:{port}/mcp: Address already in use"]


def test_without_the_http_extra_nothing_claims_to_serve(tmp_path: Path) -> None:
    done = started(tmp_path, ["--http", "127.0.0.1:0"], "import sys; sys.modules['uvicorn'] = None\n")
    assert done.returncode != 0
    assert said(done) == ["mcp-server-memory: Streamable HTTP needs the http extra (uvicorn): "
                          "pip install 'kg-memory-mcp[http]'"]


def test_the_line_names_the_port_it_serves_on(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "memory_server", "--http", f"127.0.0.1:{port}"],
                               env=server_environment(tmp_path / "memory.jsonl"), cwd=tmp_path,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        while "memory file" in line:
            line = process.stderr.readline()
        assert line.startswith(f"Knowledge Graph MCP Server: Streamable HTTP on http://127.0.0.1:{port}/mcp")
        # Said once listening: the first request is answered.
        answer = httpx.post(f"http://127.0.0.1:{port}/mcp", timeout=WAIT_SECONDS, json=initialize(1),
                            headers={"accept": "application/json, text/event-stream"})
        assert answer.status_code == 200 and answer.json()["result"]["serverInfo"]["name"] == "memory-server"
    finally:
        process.terminate()
        process.wait(WAIT_SECONDS)
