"""`mcp-server-memory import`: merging a memory file or an export, by the tools' rules, under the server's lock.

Real files and real processes throughout: the console script imports while a real server runs on
the same file (its subscribed client is told, and reads the imported graph), and a file written
by the npm reference server itself imports cleanly.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import StdioProcess, one_at_a_time, shared_directory
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    MemoryClient,
    MemoryServers,
    entity,
    entity_record,
    era,
    file_lines,
    memory_servers,
    record_line,
    reference_lines,
    relation,
    relation_record,
    undated,
    undated_lines,
    without_stored_dates,
    write_reference_file,
)
from test_cli_commands import GRAPH, cli, write_memory
from test_memory_live import check_update, subscribe

REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory"


def graph_of(memory_file: Path) -> dict[str, Any]:
    """The graph as the export (the reference's read_graph answer) shows it."""
    done = cli("export", "--format", "json", "--file", str(memory_file))
    assert done.returncode == 0, done.stderr
    return without_stored_dates(json.loads(done.stdout))


def import_file(source: Path, memory_file: Path, *options: str) -> str:
    done = cli("import", str(source), *options, memory=memory_file)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    return done.stdout.decode()


# --- the rules -----------------------------------------------------------------------------------------------

def test_import_merges_by_the_tools_rules(tmp_path: Path) -> None:
    memory_file, source = tmp_path / "memory.jsonl", tmp_path / "other.jsonl"
    write_memory(memory_file, {
        "entities": [entity("Alice", "person", ["Loves jazz"]), entity("Acme", "organization", [])],
        "relations": [relation("Alice", "Acme", "works_at")],
    })
    write_reference_file(source, [
        record_line(entity_record(entity("Alice", "robot", ["Loves jazz", "Plays chess", "Plays chess"]))),
        record_line(entity_record(entity("Bob", "person", ["New here", "New here"]))),
        record_line(entity_record(entity("Bob", "person", ["Second line of Bob"]))),
        '{"type":"entity","name":"Carol","entityType":"person","observations":[],"colour":"red"}',
        record_line(relation_record(relation("Alice", "Acme", "works_at"))),
        record_line(relation_record(relation("Bob", "Alice", "knows"))),
        record_line(relation_record(relation("Bob", "Ghost", "fears"))),
        '{"type":"widget"}',
        "not json",
    ])
    out = import_file(source, memory_file)
    assert out.splitlines() == [
        f"Imported {source} (4 entities and 3 relations, one record per line) into {memory_file}:",
        "  created 2 entities",
        "  added 1 observation to 1 existing entity",
        "  created 1 relation",
        "  already there: 0 entities with nothing new, 1 relation",
        "  not imported: 3",
        "    relation 'Bob' -fears-> 'Ghost': no entity 'Ghost'",
        '    line 8: a record of unknown type "widget"',
        "    line 9: not valid JSON",
        "  types kept: 1",
        "    entity 'Alice' keeps its type 'person' (the import says 'robot')",
    ]
    assert graph_of(memory_file) == {
        "entities": [entity("Alice", "person", ["Loves jazz", "Plays chess"]), entity("Acme", "organization", []),
                     entity("Bob", "person", ["New here", "Second line of Bob"]), entity("Carol", "person", [])],
        "relations": [relation("Alice", "Acme", "works_at"), relation("Bob", "Alice", "knows")],
    }
    assert undated_lines(memory_file)[3] == ('{"type":"entity","name":"Carol","entityType":"person","observations":[],'
                                          '"colour":"red"}'), "extra fields come along with what they describe"

    again = import_file(source, memory_file)
    assert "created 0 entities" in again and "already there: 3 entities with nothing new, 2 relations" in again


def test_a_dry_run_reports_and_changes_nothing(tmp_path: Path) -> None:
    memory_file, source = tmp_path / "memory.jsonl", tmp_path / "export.json"
    write_memory(memory_file, {"entities": [entity("Alice", "person", [])], "relations": []})
    source.write_text(json.dumps(GRAPH), encoding="utf-8")
    before = memory_file.read_bytes(), memory_file.stat().st_mtime_ns
    out = import_file(source, memory_file, "--dry-run")
    assert out.splitlines()[:4] == [
        f"Dry run, nothing was changed. Importing {source} (4 entities and 4 relations, one graph object) "
        f"into {memory_file}:",
        "  would create 3 entities",
        "  would add 2 observations to 1 existing entity",
        "  would create 4 relations",
    ]
    assert (memory_file.read_bytes(), memory_file.stat().st_mtime_ns) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["export.json", "memory.jsonl"], "not even a lock"

    nowhere = tmp_path / "new" / "memory.jsonl"
    assert "would create 4 entities" in import_file(source, nowhere, "--dry-run")
    assert not nowhere.parent.exists()


@pytest.mark.parametrize("form", ["jsonl", "json"])
def test_an_export_imported_into_an_empty_memory_is_the_same_graph(form: str, tmp_path: Path) -> None:
    memory_file, exported, fresh = tmp_path / "memory.jsonl", tmp_path / f"export.{form}", tmp_path / "new" / "memory.jsonl"
    write_memory(memory_file, GRAPH)
    assert cli("export", "--format", form, "-o", str(exported), memory=memory_file).returncode == 0
    out = import_file(exported, fresh)
    assert "not imported" not in out
    assert graph_of(fresh) == graph_of(memory_file) == GRAPH
    assert fresh.read_bytes() == memory_file.read_bytes(), "the same file, line for line"


def test_a_file_in_the_reference_format_imports_cleanly(tmp_path: Path) -> None:
    memory_file, legacy = tmp_path / "memory.jsonl", tmp_path / "memory.json"
    # byte for byte as the reference saves: its records joined by newlines, none at the end
    write_reference_file(legacy, reference_lines(GRAPH))
    out = import_file(legacy, memory_file)
    assert "created 4 entities" in out and "created 4 relations" in out and "not imported" not in out
    assert graph_of(memory_file) == GRAPH


# --- bad input -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "says"), [
    (b"\x89PNG\r\n\x1a\n\x00\x00binary", "it holds no entity or relation: line 1: not valid UTF-8; line 2: not valid JSON"),
    (b'{"nodes": []}', 'it is a JSON object without "entities" or "relations"'),
    (b'{"entities": 5}', 'its "entities" is not a list'),
    (b"[1, 2, 3]", "it holds no entity or relation: line 1: a JSON array, not an object"),
])
def test_a_file_that_is_no_memory_is_refused_and_nothing_changes(content: bytes, says: str, tmp_path: Path) -> None:
    memory_file, source = tmp_path / "memory.jsonl", tmp_path / "source"
    write_memory(memory_file, GRAPH)
    before = memory_file.read_bytes()
    source.write_bytes(content)
    done = cli("import", str(source), memory=memory_file)
    assert done.returncode == 2
    assert done.stdout == b""
    assert f"mcp-server-memory import: error: {source} is not a memory to import: {says}" in done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert memory_file.read_bytes() == before


@pytest.mark.parametrize("problem", ["missing", "directory"])
def test_an_import_file_that_cannot_be_read_is_a_clear_error(problem: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    source = tmp_path / "missing.jsonl" if problem == "missing" else tmp_path
    done = cli("import", str(source), memory=memory_file)
    assert done.returncode == 2
    expected = (f"there is no file to import at {source}" if problem == "missing"
                else f"{source} is a directory, not a file to import")
    assert f"mcp-server-memory import: error: {expected}" in done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert not memory_file.exists()


def test_a_long_import_reports_progress_on_stderr(tmp_path: Path) -> None:
    memory_file, source = tmp_path / "memory.jsonl", tmp_path / "big.jsonl"
    count = 6_000
    write_memory(source, {"entities": [entity(f"e{number}") for number in range(count)],
                          "relations": [relation(f"e{number}", f"e{number + 1}", "next") for number in range(count - 1)]})
    done = cli("import", str(source), memory=memory_file)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines() == [
        f"import: read 6,000 entities and 5,999 relations, one record per line from {source}",
        f"import: merging into {memory_file} under its lock",
        "import: done",
    ]
    assert "created 6,000 entities" in done.stdout.decode() and "created 5,999 relations" in done.stdout.decode()


# --- with a running server -------------------------------------------------------------------------------------

def test_a_running_server_sees_the_import_as_one_change(memory_servers: MemoryServers, era: str,
                                                       tmp_path: Path) -> None:
    memory_file, source = tmp_path / "memory.jsonl", tmp_path / "export.json"
    client = memory_servers.client(era, memory_file)
    listen_id = subscribe(client)
    client.ok("create_entities", {"entities": [entity("Alice", "person", ["Loves jazz"])]})
    client.wait_updates(1, listen_id)
    source.write_text(json.dumps(GRAPH), encoding="utf-8")

    import_file(source, memory_file)
    (_, update) = client.wait_updates(2, listen_id)
    check_update(update, era, listen_id)
    assert undated(client.graph()) == GRAPH
    client.ok("add_observations", {"observations": [{"entityName": "Bob", "contents": ["after the import"]}]})
    assert graph_of(memory_file)["entities"][2] == entity("Bob", "person", ["after the import"])
    assert len(client.updates(listen_id)) == 3, "the import was one change"


# --- the npm reference server itself ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def reference_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command of the npm reference server, installed once into pytest's cache (when it has one)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed to run the reference server")
    prefix = shared_directory(request, tmp_path_factory, "reference-server-memory", across_runs=True)
    script = prefix / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    installed = prefix / "installed"  # written once the install is whole: one cut short is done again
    with one_at_a_time("reference-server-memory"):
        if not (script.exists() and installed.exists() and installed.read_text() == REFERENCE_PACKAGE):
            done = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                                   REFERENCE_PACKAGE], capture_output=True, timeout=600)
            if done.returncode != 0:
                pytest.fail(f"npm could not install {REFERENCE_PACKAGE}: {done.stderr.decode(errors='replace')[-500:]}")
            installed.write_text(REFERENCE_PACKAGE)
    return [node, str(script)]


def test_a_memory_written_by_the_reference_server_imports_cleanly(reference_server: list[str], tmp_path: Path) -> None:
    written, memory_file = tmp_path / "reference" / "memory.jsonl", tmp_path / "ours" / "memory.jsonl"
    written.parent.mkdir()
    process = StdioProcess(reference_server, cwd=tmp_path, env={"PATH": "/usr/bin:/bin",
                                                                "MEMORY_FILE_PATH": str(written)})
    try:
        client = MemoryClient(process, "legacy").open()
        # (raw calls: the reference's text items are not its structured content, which `ok` insists on)
        for name, arguments in (("create_entities", {"entities": GRAPH["entities"]}),
                                ("create_relations", {"relations": GRAPH["relations"]})):
            assert not client.request("tools/call", {"name": name, "arguments": arguments}).get("isError")
        answer = client.request("tools/call", {"name": "read_graph", "arguments": {}})
    finally:
        process.kill()
    out = import_file(written, memory_file)
    assert "created 4 entities" in out and "created 4 relations" in out and "not imported" not in out
    assert graph_of(memory_file) == GRAPH

    # and our exports are what the reference itself writes and answers
    assert cli("export", "--format", "jsonl", "--file", str(memory_file)).stdout == written.read_bytes()
    assert cli("export", "--format", "json", "--file", str(memory_file)).stdout.decode() == answer["content"][0]["text"]
