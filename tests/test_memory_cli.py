"""The command line: --help, --version, bad options, a stdout that carries only protocol, and where the
memory file goes (MEMORY_FILE_PATH absolute, relative, unset; the start-up line on stderr).

The unset case writes next to the package, so it runs on a copy of the packages in a temporary
directory: the repository's own package directory is never written.
"""

from __future__ import annotations

import json
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
    undated,
    undated_lines,
)

import memory_server
from memory_server.storage.paths import configured_path, fragile_location_warning, installation_holding, lasting_location

ALICE = entity("Alice", "person", ["Loves Jazz"])
CONSOLE_SCRIPT = Path(sys.executable).with_name("mcp-server-memory")
COMMANDS = {"module": [sys.executable, "-m", "memory_server"], "console script": [str(CONSOLE_SCRIPT)]}
MIGRATION_STARTED = ("DETECTED: Found legacy memory.json file, migrating to memory.jsonl for JSONL format "
                     "compatibility")
MIGRATION_DONE = "COMPLETED: Successfully migrated memory.json to memory.jsonl"


def run_cli(command: list[str], memory_file: Path, cwd: Path,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=server_environment(memory_file, env), stdin=subprocess.DEVNULL,
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
    assert undated_lines(memory_file) == [record_line(entity_record(ALICE))]
    assert mode_of(memory_file) == 0o600
    assert str(memory_file) in stderr


def test_a_relative_path_is_resolved_against_the_package_directory(memory_servers: MemoryServers, era: str,
                                                                   tmp_path: Path) -> None:
    memory_file = tmp_path / "relative" / "memory.jsonl"
    configured = os.path.relpath(memory_file, PACKAGE_DIR)
    assert configured.startswith(".."), "the path climbs out of the package, so the repository is not written"
    # the working directory differs from the package directory, so resolving against it would miss
    stderr = startup_and_write(memory_servers, era, configured)
    assert undated_lines(memory_file) == [record_line(entity_record(ALICE))]
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
    assert undated_lines(memory_file) == [record_line(entity_record(ALICE))]
    assert str(memory_file) in stderr
    assert (repository_file.stat().st_mtime_ns if repository_file.exists() else None) == before


def test_unset_moves_a_legacy_memory_json_once(memory_servers: MemoryServers, era: str, package_copy: Path) -> None:
    legacy = package_copy / "memory_server" / "memory.json"
    content = record_line(entity_record(entity("Old", "memory", ["from memory.json"]))).encode()
    legacy.write_bytes(content)
    client = MemoryClient(memory_servers.process(None, cwd=package_copy), era).open()
    assert undated(client.graph())["entities"] == [entity("Old", "memory", ["from memory.json"])]
    client.process.finish()
    stderr = client.process.stderr
    assert MIGRATION_STARTED in stderr and MIGRATION_DONE in stderr
    assert not legacy.exists()
    assert (package_copy / "memory_server" / "memory.jsonl").read_bytes() == content

    legacy.write_bytes(b"")  # both present now: memory.jsonl wins, nothing moves, nothing is said
    again = MemoryClient(memory_servers.process(None, cwd=package_copy), era).open()
    assert undated(again.graph())["entities"] == [entity("Old", "memory", ["from memory.json"])]
    again.process.finish()
    assert "DETECTED" not in again.process.stderr and legacy.exists()


# --- a memory file inside the installation -----------------------------------------------------------------------

WARNING = "WARNING: the memory file"


def test_a_memory_inside_the_package_is_warned_about_once(memory_servers: MemoryServers, era: str,
                                                          package_copy: Path) -> None:
    memory_file = package_copy / "memory_server" / "memory.jsonl"
    client = MemoryClient(memory_servers.process(None, cwd=package_copy), era).open()
    client.ok("create_entities", {"entities": [ALICE]})
    client.ok("create_entities", {"entities": [entity("Bob")]})
    client.process.finish()
    stderr = client.process.stderr
    assert stderr.count(WARNING) == 1, "at start, once, whatever the writes"
    (warning,) = [line for line in stderr.splitlines() if WARNING in line]
    assert f"{WARNING} {memory_file} lives inside the installation at {package_copy / 'memory_server'}" in warning
    assert "deletes your memory" in warning
    home = os.path.expanduser("~")
    assert f'"env": {{"MEMORY_FILE_PATH": "{home}/.local/share/mcp-memory/memory.jsonl"}}' in warning

    # `stats` says the same, about the same file
    done = subprocess.run([sys.executable, "-m", "memory_server", "stats"], cwd=package_copy,
                          env=server_environment(None), capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert done.returncode == 0, done.stderr
    assert f"Memory file     {memory_file}" in done.stdout
    assert warning in done.stdout.splitlines()


def test_a_memory_inside_the_python_environment_is_warned_about(memory_servers: MemoryServers, tmp_path: Path) -> None:
    # (never written: the server only starts and stops, so the environment stays as it is)
    inside = Path(sys.prefix) / "var" / "mcp-memory-test-never-written" / "memory.jsonl"
    process = memory_servers.process(inside)
    process.finish()
    assert process.stderr.count(WARNING) == 1
    assert f"lives inside the installation at {sys.prefix}" in process.stderr
    assert not inside.parent.exists()


def test_a_memory_outside_the_installation_gets_no_warning(memory_servers: MemoryServers, era: str,
                                                           tmp_path: Path) -> None:
    stderr = startup_and_write(memory_servers, era, str(tmp_path / "memory.jsonl"))
    assert WARNING not in stderr and "WARNING" not in stderr


def test_a_leading_tilde_is_the_home_directory(memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    client = MemoryClient(memory_servers.process("~/mcp/memory.jsonl", env={"HOME": str(home)}), era).open()
    client.ok("create_entities", {"entities": [ALICE]})
    client.process.finish()
    memory_file = home / "mcp" / "memory.jsonl"
    assert undated_lines(memory_file) == [record_line(entity_record(ALICE))]
    assert f"memory file {memory_file}" in client.process.stderr
    assert not (PACKAGE_DIR / "~").exists(), "no folder named ~ inside the package"
    # the commands resolve it the same way
    done = run_cli([*COMMANDS["console script"], "stats"], Path("~/mcp/memory.jsonl"), tmp_path,
                   env={"HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert f"Memory file     {memory_file}" in done.stdout


@pytest.mark.parametrize(("configured", "expected"), [
    ("~", "{home}"), ("~/a/memory.jsonl", "{home}/a/memory.jsonl"),
    ("~user/memory.jsonl", "{server}/~user/memory.jsonl"), ("a/~/memory.jsonl", "{server}/a/~/memory.jsonl"),
])
def test_only_a_leading_tilde_and_separator_is_expanded(configured: str, expected: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    server = tmp_path / "server"
    assert configured_path(configured, server) == Path(expected.format(home=tmp_path / "home", server=server))


def test_where_a_file_is_fragile(tmp_path: Path) -> None:
    package, prefix = tmp_path / "env" / "lib" / "site-packages" / "memory_server", tmp_path / "env"
    assert installation_holding(package / "memory.jsonl", package, str(prefix)) == package
    assert installation_holding(prefix / "memory.jsonl", package, str(prefix)) == prefix
    assert installation_holding(tmp_path / "data" / "memory.jsonl", package, str(prefix)) is None
    assert installation_holding(tmp_path / "data" / "memory.jsonl", package, "/") is None, "a root prefix says nothing"
    assert fragile_location_warning(tmp_path / "envy" / "memory.jsonl", package, str(prefix)) is None


def test_the_lasting_place_follows_the_platform() -> None:
    assert lasting_location("linux", {}, "/home/you") == "/home/you/.local/share/mcp-memory/memory.jsonl"
    assert lasting_location("linux", {"XDG_DATA_HOME": "/data"}, "/home/you") == "/data/mcp-memory/memory.jsonl"
    assert lasting_location("darwin", {}, "/Users/you") == \
        "/Users/you/Library/Application Support/mcp-memory/memory.jsonl"
    assert lasting_location("win32", {"APPDATA": "C:\\Users\\you\\AppData\\Roaming"}, "C:\\Users\\you") == \
        "C:\\Users\\you\\AppData\\Roaming\\mcp-memory\\memory.jsonl"


# --- the README's install-and-start command, verbatim, on a clean copy of the repository ------------------------

def readme_install_command() -> str:
    readme = (PACKAGE_DIR.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Install and start\n"):]
    start = section.index("```sh\n") + len("```sh\n")
    return section[start:section.index("\n```", start)]


def test_the_readme_install_and_start_command_works_on_a_clean_copy(tmp_path: Path) -> None:
    command = readme_install_command()
    assert "MEMORY_FILE_PATH=~/.local/share/mcp-memory/memory.jsonl" in command
    clone = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=PACKAGE_DIR.parent, capture_output=True, check=True,
                             timeout=WAIT_SECONDS).stdout.decode().split("\0")
    for name in filter(None, tracked):
        source = PACKAGE_DIR.parent / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    home = tmp_path / "home"
    home.mkdir()
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("MEMORY_FILE_PATH", "PYTHONPATH", "VIRTUAL_ENV")}
    environment["HOME"] = str(home)
    request_line = json.dumps(initialize(1)) + "\n"
    done = subprocess.run(["bash", "-c", command], cwd=clone, env=environment, input=request_line,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    memory_file = home / ".local" / "share" / "mcp-memory" / "memory.jsonl"
    assert f"memory file {memory_file}" in done.stderr
    assert WARNING not in done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "memory-server"

    # the installed package carries the page's template and the vendored library
    memory_file.parent.mkdir(parents=True)
    memory_file.write_text(record_line(entity_record(ALICE)), encoding="utf-8")
    page = tmp_path / "memory.html"
    exported = subprocess.run([str(clone / ".venv" / "bin" / "mcp-server-memory"), "export", "--format", "html",
                               "-o", str(page)], cwd=tmp_path, env={**environment, "MEMORY_FILE_PATH": str(memory_file)},
                              capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert exported.returncode == 0, exported.stderr
    html = page.read_text(encoding="utf-8")
    assert "Copyright (c) 2016-2026, The Cytoscape Consortium" in html and '"Loves Jazz"' in html

    # the install carries the semantic extra: a search by meaning finds a fact that shares no word
    dog = entity("Ann", "person", ["Has a border collie named Biscuit", "Works as a nurse"])
    memory_file.write_text(record_line(entity_record(dog)), encoding="utf-8")
    search = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "search_nodes", "arguments": {"query": "dog"}}})
    served = subprocess.run([str(clone / ".venv" / "bin" / "mcp-server-memory")], cwd=tmp_path,
                            env={**environment, "MEMORY_FILE_PATH": str(memory_file)},
                            input=request_line + json.dumps(notification("notifications/initialized")) + "\n" + search + "\n",
                            capture_output=True, text=True, timeout=WAIT_SECONDS * 4)
    answers = [json.loads(line) for line in served.stdout.splitlines()]
    found = next(answer for answer in answers if answer.get("id") == 2)["result"]["structuredContent"]
    assert found["entities"][0]["observations"][0] == "Has a border collie named Biscuit", found
