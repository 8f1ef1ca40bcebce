"""The semantic engine in a real server process, over real pipes, with the real model: it ends
cleanly in every state (end of input, SIGTERM while loading, embedding or idle: memory_server/
background.py B3), and embedding never stands between a request and its answer (retrieval/
semantic.py guarantee 5). Each exit is tried several times; nothing here is timed."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import entity, entity_record, record_line, server_environment

from memory_server.retrieval import semantic
from memory_server.retrieval.vectors import vectors_path

pytestmark = pytest.mark.file_store

RUNS = 3
WAIT_SECONDS = 600.0
"""Far above what any of these steps takes on a loaded machine, far below for ever."""
NATIVE_NOISE = ("terminate called", "onnxruntime", "Traceback", "Fatal Python error", "did not stop")


def memory_of(path: Path, observations: int, *, long: bool = False) -> list[str]:
    """A memory of `observations` notes over entities of five facts, and a person with a dog."""
    filler = " and the quarterly figures were discussed at length" * 40 if long else ""
    facts = [f"Note {number} about the report of team {number % 17}{filler}" for number in range(observations)]
    lines = [record_line(entity_record(entity(f"team-{start}", "log", facts[start:start + 5])))
             for start in range(0, len(facts), 5)]
    lines.append(record_line(entity_record(entity("Ann", "person", ["Has a border collie named Biscuit"]))))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return facts


class Server:
    """A server over pipes: requests written to stdin, answers read by id from stdout."""

    def __init__(self, memory: Path, **extra: str) -> None:
        environment = server_environment(memory, {key: value for key, value in extra.items()})
        for variable in (semantic.ENABLE_VARIABLE, semantic.MAX_VARIABLE):
            environment.pop(variable, None)
        if semantic.MODEL_VARIABLE not in extra:
            environment.pop(semantic.MODEL_VARIABLE, None)
        self.process = subprocess.Popen([sys.executable, "-m", "memory_server"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment)
        self.errors: list[bytes] = []
        self._drain = threading.Thread(target=self._read_errors, daemon=True)
        self._drain.start()
        self.serial = 0
        self.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "test", "version": "1"}})
        self.answer(self.serial)
        self.notify("notifications/initialized")

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line)

    def notify(self, method: str) -> None:
        self._write({"jsonrpc": "2.0", "method": method})

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        self.serial += 1
        self._write({"jsonrpc": "2.0", "id": self.serial, "method": method, **({"params": params} if params else {})})
        return self.serial

    def call(self, tool: str, **arguments: Any) -> int:
        return self.send("tools/call", {"name": tool, "arguments": arguments})

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def answer(self, serial: int) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], deadline - time.monotonic())
            if not ready:
                break
            line = self.process.stdout.readline()
            assert line, f"the server ended: {b''.join(self.errors).decode(errors='replace')}"
            message = json.loads(line)
            if message.get("id") == serial:
                return message
        raise AssertionError("no answer")

    def end(self, *, signal_number: int | None = None) -> tuple[int, str]:
        """Close stdin (or send a signal); the exit status and everything on stderr."""
        if signal_number is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
        else:
            self.process.send_signal(signal_number)
        status = self.process.wait(timeout=WAIT_SECONDS)
        self._drain.join(timeout=WAIT_SECONDS)
        return status, b"".join(self.errors).decode(errors="replace")


@pytest.fixture()
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()


def own_lines_only(errors: str) -> None:
    assert not any(noise in errors for noise in NATIVE_NOISE), errors
    for line in errors.splitlines():
        assert line.startswith(("Knowledge Graph MCP Server", "mcp-server-memory:", "protocol", "memory_server")), errors


def found_dog(answer: dict[str, Any]) -> bool:
    return "Has a border collie named Biscuit" in json.dumps(answer["result"]["structuredContent"])


@pytest.mark.parametrize("run", range(RUNS))
def test_one_write_one_search_then_end_of_input_exits_0_with_only_the_server_s_lines(
        tmp_path: Path, servers: list[Server], run: int) -> None:
    memory = tmp_path / "memory.jsonl"
    memory_of(memory, 1200)
    server = Server(memory)
    servers.append(server)
    wrote = server.answer(server.call("add_observations", observations=[
        {"entityName": "Ann", "contents": ["Drinks tea every afternoon"]}]))
    assert "result" in wrote and not wrote["result"].get("isError"), wrote
    searched = server.answer(server.call("search_nodes", query="dog"))
    assert "result" in searched, searched
    status, errors = server.end()
    assert status == 0, errors
    own_lines_only(errors)


@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("state", ["loading", "embedding", "idle"])
def test_sigterm_in_every_state_exits_by_the_signal_or_0_with_nothing_from_onnxruntime(
        tmp_path: Path, servers: list[Server], state: str, run: int) -> None:
    memory = tmp_path / "memory.jsonl"
    memory_of(memory, 1200, long=state == "embedding")
    server = Server(memory)
    servers.append(server)
    search = server.call("search_nodes", query="dog")
    if state != "loading":  # loading: the signal comes while the first search waits for the model
        assert "result" in server.answer(search)
    if state == "embedding":
        # Embedding 1,200 long notes is still going on: the side file is written when it ends.
        assert not vectors_path(memory).exists()
    if state == "idle":
        deadline = time.monotonic() + WAIT_SECONDS
        while not vectors_path(memory).exists() and server.process.poll() is None and time.monotonic() < deadline:
            select.select([], [], [], 0.05)  # the side file appears when embedding is done
        assert vectors_path(memory).exists()
    status, errors = server.end(signal_number=signal.SIGTERM)
    assert status in (0, -signal.SIGTERM), errors
    own_lines_only(errors)


def test_a_search_and_a_ping_answer_while_500_long_observations_are_embedded(tmp_path: Path,
                                                                              servers: list[Server]) -> None:
    memory = tmp_path / "memory.jsonl"
    memory_of(memory, 0)
    server = Server(memory)
    servers.append(server)
    assert found_dog(server.answer(server.call("search_nodes", query="dog")))  # the model is loaded
    notes = [f"Long note {number}: " + "the quarterly figures were discussed at length and " * 40
             for number in range(500)]
    wrote = server.answer(server.call("create_entities", entities=[
        {"name": f"note-{start}", "entityType": "log", "observations": notes[start:start + 5]}
        for start in range(0, 500, 5)]))
    assert not wrote["result"].get("isError"), wrote
    searched = server.answer(server.call("search_nodes", query="dog"))
    assert found_dog(searched), searched
    pong = server.answer(server.send("ping"))
    assert pong["result"] == {}
    # Both answered while the 500 were still being embedded: their vectors are not saved yet.
    assert not vectors_path(memory).exists()
    status, errors = server.end()
    assert status == 0, errors
    own_lines_only(errors)


def test_a_4_mb_observation_is_cut_before_it_is_tokenized(tmp_path: Path, servers: list[Server]) -> None:
    memory = tmp_path / "memory.jsonl"
    memory_of(memory, 0)
    huge = "A very long diary of walks with the border collie. " * 80_000
    assert len(huge) > 4_000_000
    server = Server(memory)
    servers.append(server)
    wrote = server.answer(server.call("create_entities", entities=[{"name": "diary", "entityType": "log",
                                                                    "observations": [huge]}]))
    assert not wrote["result"].get("isError"), wrote
    assert found_dog(server.answer(server.call("search_nodes", query="dog")))
    assert server.answer(server.send("ping"))["result"] == {}
    status, errors = server.end()
    assert status == 0, errors
    own_lines_only(errors)


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_model_path_that_is_not_a_regular_file_is_words_only_at_once_with_one_line(
        tmp_path: Path, servers: list[Server], kind: str) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_text(record_line(entity_record(entity("Ann", "person", ["Has a border collie named Biscuit",
                                                                         "Walks the dog daily"]))) + "\n")
    model = tmp_path / "model.onnx"
    if kind == "fifo":
        os.mkfifo(model)
    else:
        model.mkdir()
    server = Server(memory, MEMORY_SEMANTIC_MODEL=str(model))
    servers.append(server)
    for _ in range(2):
        # Not the whole query in any fact: the words answer, and meaning is asked for (and unavailable).
        answer = server.answer(server.call("search_nodes", query="dog walks"))
        assert "Walks the dog daily" in json.dumps(answer["result"]["structuredContent"]), answer
    status, errors = server.end()
    assert status == 0, errors
    assert errors.count("semantic search is off, words only: cannot read the model") == 1, errors
    assert ("a FIFO" if kind == "fifo" else "a directory") in errors
    own_lines_only(errors)


@pytest.mark.parametrize("run", range(RUNS))
def test_ctrl_c_while_embedding_exits_0_with_nothing_from_onnxruntime(tmp_path: Path, servers: list[Server],
                                                                       run: int) -> None:
    memory = tmp_path / "memory.jsonl"
    memory_of(memory, 1200, long=True)
    server = Server(memory)
    servers.append(server)
    assert "result" in server.answer(server.call("search_nodes", query="dog"))
    assert not vectors_path(memory).exists()  # still embedding
    status, errors = server.end(signal_number=signal.SIGINT)
    assert status in (0, -signal.SIGINT), errors
    own_lines_only(errors)


def test_over_http_a_search_and_another_request_answer_while_embedding_and_sigterm_then_ends_cleanly(tmp_path: Path) -> None:
    import httpx
    from conftest import modern_request
    from http_helpers import free_port, modern_headers

    memory = tmp_path / "memory.jsonl"
    memory_of(memory, 1200, long=True)
    port = free_port()
    environment = server_environment(memory)
    for variable in (semantic.ENABLE_VARIABLE, semantic.MAX_VARIABLE, semantic.MODEL_VARIABLE, "MCP_MEMORY_HTTP_TOKEN"):
        environment.pop(variable, None)
    process = subprocess.Popen([sys.executable, "-m", "memory_server", "--http", f"127.0.0.1:{port}"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=environment)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        with httpx.Client(timeout=WAIT_SECONDS) as client:
            deadline = time.monotonic() + WAIT_SECONDS
            while True:  # until the server listens
                try:
                    searched = client.post(url, json=modern_request(1, "tools/call", {
                        "name": "search_nodes", "arguments": {"query": "dog"}}),
                        headers=modern_headers("tools/call", "search_nodes"))
                    break
                except httpx.ConnectError:
                    assert process.poll() is None and time.monotonic() < deadline
                    select.select([], [], [], 0.05)
            assert searched.status_code == 200, searched.text
            # The modern era has no ping: the lightest request there is.
            pong = client.post(url, json=modern_request(2, "tools/list"), headers=modern_headers("tools/list"))
            assert pong.status_code == 200 and pong.json()["result"]["tools"], pong.text
            assert not vectors_path(memory).exists()  # both answered while the memory was being embedded
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=WAIT_SECONDS)
        assert process.stderr is not None
        errors = process.stderr.read().decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert status in (0, -signal.SIGTERM), errors
    assert not any(noise in errors for noise in NATIVE_NOISE), errors


def test_the_model_is_loaded_once_the_server_serves_without_a_search(tmp_path: Path, servers: list[Server]) -> None:
    memory = tmp_path / "memory.jsonl"
    memory_of(memory, 10)
    server = Server(memory)  # initialized, and nothing asked since
    servers.append(server)
    maps = Path(f"/proc/{server.process.pid}/maps")
    deadline = time.monotonic() + WAIT_SECONDS
    while "onnxruntime" not in maps.read_text() and time.monotonic() < deadline:
        select.select([], [], [], 0.05)
    assert "onnxruntime" in maps.read_text()
    assert server.answer(server.send("ping"))["result"] == {}
    status, errors = server.end()
    assert status == 0, errors
    own_lines_only(errors)
