"""The ways stdio reads requests and writes answers, each on the real thing.

A pipe or socket on stdin is read by the event loop; a file (or a terminal) by a reader thread.
An answer that fits an empty stdout pipe is written at once; one that finds the pipe holding
answers the client has not read yet goes through the writer thread, behind them. Whatever the
way, every request gets its one complete answer, in the order written per request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, WAIT_SECONDS, encode, initialize, parse_server_line, request

EXAMPLE_SERVER = REPO / "tests" / "example_server.py"


def _tool_call(request_id: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return request(request_id, "tools/call", {"name": name, "arguments": arguments})


def test_requests_from_a_file_with_answers_into_a_file_are_all_served(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    answers = tmp_path / "answers.jsonl"
    requests.write_bytes(b"".join(
        encode(message) for message in (initialize(0), *(_tool_call(i, "add", {"a": i, "b": 1}) for i in range(1, 21)))))
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        finished = subprocess.run([sys.executable, str(EXAMPLE_SERVER)], cwd=REPO, stdin=stdin, stdout=stdout,
                                  stderr=subprocess.PIPE, timeout=WAIT_SECONDS)
    assert finished.returncode == 0, finished.stderr.decode(errors="replace")
    messages = [parse_server_line(line) for line in answers.read_bytes().splitlines(keepends=True)]
    by_id = {message["id"]: message for message in messages}
    assert sorted(by_id) == list(range(21)) and len(messages) == 21
    for i in range(1, 21):
        assert by_id[i]["result"]["structuredContent"] == {"sum": i + 1}


def test_answers_a_client_has_not_read_yet_are_queued_and_arrive_whole_in_order(tmp_path: Path) -> None:
    """Forty answers of about 80 KB each are more than the pipe holds: later ones wait in the writer's
    queue until the client reads, and each arrives whole, once."""
    memory = tmp_path / "memory.jsonl"
    memory.write_text("\n".join(json.dumps({
        "type": "entity", "name": f"entity {i:05}", "entityType": "thing",
        "observations": [f"observation {j} of entity {i}, long enough to fill a page quickly" for j in range(5)],
    }) for i in range(2000)) + "\n")
    server = subprocess.Popen([sys.executable, "-m", "memory_server"], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env={**os.environ, "MEMORY_FILE_PATH": str(memory)})
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(encode(initialize(0)))
        server.stdin.flush()
        assert parse_server_line(server.stdout.readline())["id"] == 0
        # Sent in one go, nothing read meanwhile; the server answers as they come.
        server.stdin.write(b"".join(encode(_tool_call(i, "read_graph", {})) for i in range(1, 41)))
        server.stdin.write(encode(request(41, "ping")))
        server.stdin.flush()
        answers = [parse_server_line(server.stdout.readline()) for _ in range(41)]
    finally:
        server.kill()
        server.wait(WAIT_SECONDS)
    assert sorted(answer["id"] for answer in answers) == list(range(1, 42))
    pages = [answer["result"] for answer in answers if answer["id"] != 41]
    first = pages[0]["structuredContent"]
    assert len(first["entities"]) > 100 and "nextCursor" in first
    for page in pages:
        # Every answer is whole: its text item is the JSON of its structured content.
        assert json.loads(page["content"][0]["text"]) == page["structuredContent"]
        assert page["structuredContent"]["entities"] == first["entities"]
