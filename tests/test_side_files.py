"""Every file beside the memory and every file the command line reads is opened without waiting on it
and refused unless it is a regular file (storage/files.py: open_regular): real FIFOs at the side
files' names, a real server subprocess over real pipes, and the console script bounded by a timeout."""

from __future__ import annotations

import os
import signal
import stat
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
    write_reference_file,
)

CONSOLE_SCRIPT = Path(sys.executable).with_name("mcp-server-memory")
CLI_TIMEOUT = 30.0
"""Far above what any command takes on these small files, far below for ever."""
ALICE = record_line(entity_record(entity("Alice", "person", ["Loves jazz"])))


def cli(*arguments: str, memory: Path | None = None) -> subprocess.CompletedProcess[str]:
    # A hang is a TimeoutExpired: the test fails instead of waiting on the FIFO for ever.
    return subprocess.run([str(CONSOLE_SCRIPT), *arguments], env=server_environment(memory), capture_output=True,
                          text=True, timeout=CLI_TIMEOUT)


def error_text(result: dict[str, object]) -> str:
    assert result.get("isError") is True, f"expected a tool error: {result}"
    return "\n".join(texts(result))


# -- the server ------------------------------------------------------------------------------------


def test_a_fifo_at_the_rejected_side_file_fails_the_write_at_once_and_the_server_keeps_serving(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(ALICE.encode() + b"\n{not json\n")
    side = tmp_path / "memory.jsonl.rejected"
    os.mkfifo(side, 0o600)
    client = memory_servers.client("legacy", memory)
    message = error_text(client.call("create_entities", {"entities": [entity("Bob")]}))
    assert f"{side} is a FIFO (named pipe), not a regular file" in message and "Nothing was changed" in message
    assert memory.read_bytes() == ALICE.encode() + b"\n{not json\n"
    # The lock was let go: another process's write is answered at once, with the same refusal.
    other = memory_servers.client("legacy", memory)
    assert "is a FIFO" in error_text(other.call("create_entities", {"entities": [entity("Carol")]}))
    assert [item["name"] for item in client.graph()["entities"]] == ["Alice"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cwd", "memory.jsonl", "memory.jsonl.rejected"]
    side.unlink()
    assert not client.call("create_entities", {"entities": [entity("Bob")]}).get("isError")
    assert side.read_bytes() == b"{not json\n"
    assert stat.S_IMODE(side.stat().st_mode) == 0o600
    client.process.signal(signal.SIGTERM)
    assert client.process.wait() in (0, -signal.SIGTERM)


@pytest.mark.parametrize("large", [False, True], ids=["small memory", "memory above the cache threshold"])
def test_a_fifo_at_the_cache_s_name_never_stops_an_answer(memory_servers: MemoryServers, tmp_path: Path,
                                                          large: bool) -> None:
    memory = tmp_path / "memory.jsonl"
    count = 6000 if large else 3
    lines = [record_line(entity_record(entity(f"e{n:05d}", "thing", [f"observation {n} " + "x" * 160])))
             for n in range(count)]
    write_reference_file(memory, lines)
    assert (memory.stat().st_size > 1 << 20) == large
    os.mkfifo(tmp_path / "memory.jsonl.index", 0o600)
    client = memory_servers.client("legacy", memory)
    # The first calls right after initialize, which a cache would serve.
    found = client.call("search_nodes", {"query": "e00002"})
    assert not found.get("isError"), found
    opened = client.call("open_nodes", {"names": ["e00001"]})
    assert not opened.get("isError"), opened
    assert not client.call("create_entities", {"entities": [entity("Bob")]}).get("isError")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "memory.jsonl.index").st_mode), "the FIFO is not ours to remove"
    client.process.signal(signal.SIGTERM)
    client.process.wait()


# -- the command line ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [("check",), ("stats",), ("export", "--format", "jsonl")])
def test_the_command_line_refuses_a_fifo_named_as_the_memory_file(tmp_path: Path, command: tuple[str, ...]) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo, 0o600)
    done = cli(*command, "--file", str(fifo))
    assert done.returncode == 2, done
    assert f"{fifo} is a FIFO (named pipe), not a memory file" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_import_refuses_a_fifo_to_import_and_a_fifo_as_the_memory(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo, 0o600)
    source = tmp_path / "source.jsonl"
    write_reference_file(source, [ALICE])
    done = cli("import", str(fifo), "--file", str(tmp_path / "memory.jsonl"))
    assert done.returncode == 2 and "is a FIFO" in done.stderr, done
    for dry_run in (["--dry-run"], []):
        done = cli("import", str(source), "--file", str(fifo), *dry_run)
        assert done.returncode == 2 and "is a FIFO" in done.stderr, done
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_stats_with_a_fifo_at_the_rejected_side_file_reports_it_and_goes_on(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    write_reference_file(memory, [ALICE])
    os.mkfifo(tmp_path / "memory.jsonl.rejected", 0o600)
    done = cli("stats", "--file", str(memory))
    assert done.returncode == 0, done
    assert "Entities        1" in done.stdout
    assert "is a FIFO (named pipe), not a regular file" in done.stderr
    assert f"       ?  rejected lines kept in {tmp_path / 'memory.jsonl.rejected'}" in done.stdout


def test_a_symlink_to_a_memory_file_is_still_read_by_the_command_line(tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    write_reference_file(target, [ALICE])
    link = tmp_path / "memory.jsonl"
    link.symlink_to(target)
    done = cli("check", "--file", str(link))
    assert done.returncode == 0 and "every line is usable" in done.stdout, done
