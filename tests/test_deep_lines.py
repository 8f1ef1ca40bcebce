"""A deeply nested line of valid JSON (1,000 arrays one inside the other, 2 KB: Node's JSON.parse reads
it) is an unreadable line like any other: the server answers every tool and moves it to `.rejected`,
`check` reports it, and stats, export and import go on; no RecursionError anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from memory_helpers import (
    MemoryServers,
    entity,
    entity_record,
    memory_servers,  # noqa: F401  (a fixture)
    record_line,
    server_environment,
    texts,
)

from memory_server.model.records import Rejected, decode_file, decode_line

CONSOLE_SCRIPT = Path(sys.executable).with_name("mcp-server-memory")
ALICE = record_line(entity_record(entity("Alice", "person", ["Loves jazz"]))).encode()
DEEP = b'{"x":' + b"[" * 1000 + b"]" * 1000 + b"}"
# A known record whose extra field is deep: the whole line goes, as the server cannot read it.
DEEP_EXTRA = b'{"type":"entity","name":"Bob","entityType":"person","observations":[],"x":' + b"[" * 1000 + b"]" * 1000 + b"}"
DEEP_LINES = {"deep object": DEEP, "deep array": b"[" * 3000 + b"]" * 3000, "deep extra field": DEEP_EXTRA}


def cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CONSOLE_SCRIPT), *arguments], env=server_environment(None), capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("line", DEEP_LINES.values(), ids=DEEP_LINES.keys())
def test_a_deep_line_decodes_as_rejected(line: bytes) -> None:
    assert len(line) >= 2000
    decoded = decode_line(line, 2)
    assert isinstance(decoded, Rejected) and "nested too deeply" in decoded.reason
    lines = decode_file(ALICE + b"\n" + line + b"\n")
    assert isinstance(lines[1], Rejected) and lines[1].line == line and lines[1].number == 2


def test_node_reads_the_line_so_it_is_valid_json() -> None:
    import shutil
    node = shutil.which("node")
    assert node is not None, "node is needed (the reference server runs on it)"
    done = subprocess.run([node, "-e", "JSON.parse(require('fs').readFileSync(0, 'utf8')); console.log('ok')"],
                          input=DEEP, capture_output=True, timeout=60)
    assert done.stdout.strip() == b"ok", done


@pytest.mark.parametrize("line", DEEP_LINES.values(), ids=DEEP_LINES.keys())
def test_the_server_answers_every_tool_and_moves_the_line_aside(memory_servers: MemoryServers, tmp_path: Path,
                                                                line: bytes) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(ALICE + b"\n" + line + b"\n")
    client = memory_servers.client("legacy", memory)
    for name, arguments in (("read_graph", {}), ("search_nodes", {"query": "jazz"}),
                            ("open_nodes", {"names": ["Alice"]})):
        result = client.call(name, arguments)
        assert not result.get("isError"), result
        assert "Alice" in "".join(texts(result))
    written = client.call("create_entities", {"entities": [entity("Carol")]})
    assert not written.get("isError"), written
    assert "moved from the memory file" in "".join(texts(written))
    assert (tmp_path / "memory.jsonl.rejected").read_bytes() == line + b"\n"
    assert [json.loads(text)["name"] for text in memory.read_text().splitlines()] == ["Alice", "Carol"]
    client.process.finish()


@pytest.mark.parametrize("line", DEEP_LINES.values(), ids=DEEP_LINES.keys())
def test_the_commands_report_the_line_and_go_on(tmp_path: Path, line: bytes) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(ALICE + b"\n" + line + b"\n")
    checked = cli("check", "--file", str(memory))
    assert checked.returncode == 1, checked
    assert "line 2: unreadable: JSON nested too deeply to read" in checked.stdout
    stats = cli("stats", "--file", str(memory))
    assert stats.returncode == 0 and "       1  unreadable lines" in stats.stdout, stats
    for form in ("jsonl", "json", "graphml", "dot", "markdown", "html"):
        exported = cli("export", "--file", str(memory), "--format", form)
        assert exported.returncode == 0 and "Alice" in exported.stdout, (form, exported.stderr)
    target = tmp_path / "target.jsonl"
    imported = cli("import", str(memory), "--file", str(target))
    assert imported.returncode == 0, imported
    assert "line 2: JSON nested too deeply to read" in imported.stdout
    assert [json.loads(text)["name"] for text in target.read_text().splitlines()] == ["Alice"]
    for done in (checked, stats, imported):
        assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
