"""The command line: --help, --version, bad options, a stdout that carries only protocol, and where the
memory file goes (MEMORY_FILE_PATH absolute, relative, unset; the start-up line on stderr).

The unset case writes next to the package, so it runs on a copy of the packages in a temporary
directory: the repository's own package directory is never written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import WAIT_SECONDS, initialize, modern_request, notification, parse_server_line, request
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    PACKAGE_DIR,
    MemoryClient,
    MemoryServers,
    entity,
    entity_record,
    era,
    file_lines,
    memory_servers,
    mode_of,
    record_line,
    server_environment,
)

import memory_server

ALICE = entity("Alice", "person", ["Loves Jazz"])
CONSOLE_SCRIPT = Path(sys.executable).with_name("mcp-server-memory")
COMMANDS = {"module": [sys.executable, "-m", "memory_server"], "console script": [str(CONSOLE_SCRIPT)]}
MIGRATION_STARTED = ("DETECTED: Found legacy memory.json file, migrating to memory.jsonl for JSONL format "
                     "compatibility")
MIGRATION_DONE = "COMPLETED: Successfully migrated memory.json to memory.jsonl"


def run_cli(command: list[str], memory_file: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=server_environment(memory_file), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=WAIT_SECONDS)


# --- options ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", COMMANDS)
def test_help_explains_the_memory_file_and_touches_nothing(how: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    done = run_cli([*COMMANDS[how], "--help"], memory_file, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: mcp-server-memory")
    assert "MEMORY_FILE_PATH" in done.stdout and "--version" in done.stdout
    assert not memory_file.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", COMMANDS)
def test_version_prints_the_release_and_touches_nothing(how: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    done = run_cli([*COMMANDS[how], "--version"], memory_file, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"mcp-server-memory {memory_server.__version__}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("arguments", "named"), [
    (["--bogus"], "--bogus"), (["extra"], "extra"), (["-x"], "-x"), (["--version=2"], "--version"),
])
def test_an_invalid_option_exits_2_with_a_message_on_stderr_only(arguments: list[str], named: str,
                                                                 tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    done = run_cli([*COMMANDS["module"], *arguments], memory_file, tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "usage: mcp-server-memory" in done.stderr
    assert "error" in done.stderr and named in done.stderr, "the message names the offending argument"
    assert list(tmp_path.iterdir()) == []


# --- stdout is the protocol's -----------------------------------------------------------------------------------

def test_stdout_carries_only_protocol_messages(memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    # an unreadable line makes the server log at load and at the next write: on stderr, never stdout
    memory_file.write_bytes(record_line(entity_record(ALICE)).encode() + b"\nnot json at all")
    process = memory_servers.process(memory_file)

    def ask(request_id: int, method: str, params: dict | None = None) -> dict:
        return modern_request(request_id, method, params) if era == "modern" else request(request_id, method, params)

    opening = [initialize(1), notification("notifications/initialized")] if era == "legacy" else [
        ask(1, "server/discover")]
    messages = [
        *opening,
        ask(2, "tools/list"),
        ask(3, "tools/call", {"name": "create_entities", "arguments": {"entities": [entity("Bob")]}}),
        ask(4, "tools/call", {"name": "create_relations", "arguments": {
            "relations": [{"from": "Bob", "to": "Ghost", "relationType": "haunts"}]}}),
        ask(5, "tools/call", {"name": "open_nodes", "arguments": {"names": 3}}),
        ask(6, "tools/call", {"name": "no_such_tool", "arguments": {}}),
        ask(7, "resources/read", {"uri": "memory://knowledge-graph"}),
        ask(8, "no/such/method"),
        ask(9, "tools/call", {"name": "read_graph", "arguments": {}}),
    ]
    for message in messages:
        process.send(message)
    process.send(b"{broken json\n")
    process.send(ask(10, "tools/call", {"name": "search_nodes", "arguments": {"query": "bob"}}))
    process.finish()  # every line read is checked to be one JSON-RPC message a server may send

    answered = [message.get("id") for message in map(parse_server_line, process.lines) if "method" not in message]
    assert sorted(answered, key=str) == sorted([None, *range(1, 11)], key=str), \
        "one response per request, and one error for the broken line"
    stderr = process.stderr
    assert str(memory_file) in stderr, "the start-up line goes to stderr"
    assert f"{memory_file}.rejected" in stderr, "and so does the word about the unreadable line"


# --- where the memory file goes -----------------------------------------------------------------------------

def startup_and_write(servers: MemoryServers, era: str, configured: str | None, *, cwd: Path | None = None) -> str:
    """Start a server with MEMORY_FILE_PATH as given, write one entity, stop it; return its stderr."""
    client = MemoryClient(servers.process(configured, cwd=cwd), era).open()
    client.ok("create_entities", {"entities": [ALICE]})
    client.process.finish()
    return client.process.stderr


def test_an_absolute_path_is_used_as_is_and_its_parents_are_made(memory_servers: MemoryServers, era: str,
                                                                 tmp_path: Path) -> None:
    memory_file = tmp_path / "a" / "b" / "memory.jsonl"
    stderr = startup_and_write(memory_servers, era, str(memory_file))
    assert file_lines(memory_file) == [record_line(entity_record(ALICE))]
    assert mode_of(memory_file) == 0o600
    assert str(memory_file) in stderr


def test_a_relative_path_is_resolved_against_the_package_directory(memory_servers: MemoryServers, era: str,
                                                                   tmp_path: Path) -> None:
    memory_file = tmp_path / "relative" / "memory.jsonl"
    configured = os.path.relpath(memory_file, PACKAGE_DIR)
    assert configured.startswith(".."), "the path climbs out of the package, so the repository is not written"
    # the working directory differs from the package directory, so resolving against it would miss
    stderr = startup_and_write(memory_servers, era, configured)
    assert file_lines(memory_file) == [record_line(entity_record(ALICE))]
    assert str(memory_file) in stderr, "the resolved absolute path is printed"
    assert configured not in stderr.replace(str(memory_file), "")


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """The packages copied to a directory of their own, to run with MEMORY_FILE_PATH unset."""
    root = tmp_path / "copy"
    ignore = shutil.ignore_patterns("memory.json*")  # compiled files come along: they keep start-up quick
    for package in ("memory_server", "protocol"):
        shutil.copytree(PACKAGE_DIR.parent / package, root / package, ignore=ignore)
    return root


@pytest.mark.parametrize("configured", [None, ""], ids=["unset", "empty"])
def test_unset_means_memory_jsonl_in_the_package_directory(memory_servers: MemoryServers, era: str,
                                                           package_copy: Path, configured: str | None) -> None:
    repository_file = PACKAGE_DIR / "memory.jsonl"
    before = repository_file.stat().st_mtime_ns if repository_file.exists() else None
    # `python -m` puts the working directory first on sys.path, so the copy is the package that runs
    stderr = startup_and_write(memory_servers, era, configured, cwd=package_copy)
    memory_file = package_copy / "memory_server" / "memory.jsonl"
    assert file_lines(memory_file) == [record_line(entity_record(ALICE))]
    assert str(memory_file) in stderr
    assert (repository_file.stat().st_mtime_ns if repository_file.exists() else None) == before


def test_unset_moves_a_legacy_memory_json_once(memory_servers: MemoryServers, era: str, package_copy: Path) -> None:
    legacy = package_copy / "memory_server" / "memory.json"
    content = record_line(entity_record(entity("Old", "memory", ["from memory.json"]))).encode()
    legacy.write_bytes(content)
    client = MemoryClient(memory_servers.process(None, cwd=package_copy), era).open()
    assert client.graph()["entities"] == [entity("Old", "memory", ["from memory.json"])]
    client.process.finish()
    stderr = client.process.stderr
    assert MIGRATION_STARTED in stderr and MIGRATION_DONE in stderr
    assert not legacy.exists()
    assert (package_copy / "memory_server" / "memory.jsonl").read_bytes() == content

    legacy.write_bytes(b"")  # both present now: memory.jsonl wins, nothing moves, nothing is said
    again = MemoryClient(memory_servers.process(None, cwd=package_copy), era).open()
    assert again.graph()["entities"] == [entity("Old", "memory", ["from memory.json"])]
    again.process.finish()
    assert "DETECTED" not in again.process.stderr and legacy.exists()
