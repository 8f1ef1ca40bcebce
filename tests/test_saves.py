"""Saves (memory_server/storage/files.py): each one through a new private temporary file renamed over
the memory file, so that no earlier version of the memory is kept anywhere, a reader keeps reading
the version it opened, a kill mid-save leaves the memory file whole, and the spare an earlier
version kept beside the memory (it held what later writes deleted) is removed."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_store import memory, store  # noqa: F401  (the fixtures: a memory file in a temporary folder, its store)
from write_items import entity_items

from memory_server.model.items import ObservationsToDelete
from memory_server.storage import files
from memory_server.storage.lock import MemoryFileLock, lock_path_for
from memory_server.storage.store import GraphStore

REPO = Path(__file__).resolve().parents[1]
WAIT = 60.0


def entity(name: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": list(observations)}


def names_in(memory: Path) -> list[str]:
    return [entity["name"] for entity in GraphStore(memory).read_graph()["entities"]]


def test_no_earlier_version_is_kept_beside_the_memory(store: GraphStore, memory: Path) -> None:
    store.create_entities(entity_items([entity("Alice", "lives at 1 Secret Road")]))
    store.delete_observations([ObservationsToDelete("Alice", ["lives at 1 Secret Road"])])
    store.create_entities(entity_items([entity("Bob")]))
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]
    assert b"Secret Road" not in memory.read_bytes()
    assert names_in(memory) == ["Alice", "Bob"]


def test_the_temporary_file_is_private_from_its_first_byte(store: GraphStore, memory: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever the umask allows, the file being written is 0600 before the first byte goes in.
    seen: list[tuple[int, int]] = []
    write = files.write_pieces

    def watched(fd: int, pieces: Any) -> None:
        st = os.fstat(fd)
        seen.append((stat.S_IMODE(st.st_mode), st.st_size))
        write(fd, pieces)

    monkeypatch.setattr(files, "write_pieces", watched)
    old = os.umask(0)
    try:
        store.create_entities(entity_items([entity("Alice")]))
        store.create_entities(entity_items([entity("Bob")]))
    finally:
        os.umask(old)
    assert seen == [(0o600, 0), (0o600, 0)]
    assert stat.S_IMODE(memory.stat().st_mode) == 0o600


def test_a_memory_file_readable_by_others_becomes_private_at_the_first_save(store: GraphStore, memory: Path) -> None:
    memory.write_bytes(b'{"type":"entity","name":"Alice","entityType":"person","observations":[]}\n')
    memory.chmod(0o644)
    for name in ("Bob", "Carol"):
        store.create_entities(entity_items([entity(name)]))
        assert stat.S_IMODE(memory.stat().st_mode) == 0o600
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]
    assert names_in(memory) == ["Alice", "Bob", "Carol"]


READER = """
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print("open", flush=True)
sys.stdin.readline()
chunks = []
while chunk := os.read(fd, 1 << 16):
    chunks.append(chunk)
print(hashlib.sha256(b"".join(chunks)).hexdigest(), flush=True)
"""


def test_a_reader_still_reading_an_old_version_keeps_reading_it_whole(store: GraphStore, memory: Path) -> None:
    store.create_entities(entity_items([entity("Alice", "x" * 5000)]))
    version = memory.read_bytes()
    reader = subprocess.Popen([sys.executable, "-c", READER, str(memory)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert reader.stdout.readline().strip() == "open"
        for name in ("Bob", "Carol", "Dave", "Erin"):
            store.create_entities(entity_items([entity(name, name * 3000)]))
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == hashlib.sha256(version).hexdigest()
    finally:
        reader.kill()
        reader.wait(WAIT)
    assert names_in(memory) == ["Alice", "Bob", "Carol", "Dave", "Erin"]


# -- the spare of an earlier version ---------------------------------------------------------------


def plant_spare(memory: Path) -> Path:
    spare = files.spare_path_for(memory)
    spare.write_bytes(b'{"type":"entity","name":"Gone","entityType":"t","observations":["PIN 4711"]}\n')
    return spare


def test_an_earlier_versions_spare_is_removed_when_a_store_starts(memory: Path) -> None:
    memory.write_bytes(b'{"type":"entity","name":"Alice","entityType":"person","observations":[]}\n')
    plant_spare(memory)
    store = GraphStore(memory)
    assert names_in(memory) == ["Alice"]
    assert store.read_graph()["entities"][0]["name"] == "Alice"
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]


def test_an_earlier_versions_spare_is_removed_by_the_next_save_when_the_lock_was_busy(memory: Path) -> None:
    plant_spare(memory)
    with MemoryFileLock(memory).held():  # another writer (an older server) at work while this store starts
        store = GraphStore(memory, lock_timeout=10)
        assert files.spare_path_for(memory).exists()
    store.create_entities(entity_items([entity("Alice")]))
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]


def test_a_link_or_directory_at_the_spares_name_is_not_ours_and_stays(store: GraphStore, memory: Path,
                                                                      tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-target.txt"
    outside.write_bytes(b"not yours\n")
    try:
        files.spare_path_for(memory).symlink_to(outside)
        store.create_entities(entity_items([entity("Alice")]))
        GraphStore(memory).create_entities(entity_items([entity("Bob")]))
        assert outside.read_bytes() == b"not yours\n"
        assert files.spare_path_for(memory).is_symlink()
        files.spare_path_for(memory).unlink()
        files.spare_path_for(memory).mkdir()
        store.create_entities(entity_items([entity("Carol")]))
        assert files.spare_path_for(memory).is_dir()
        assert names_in(memory) == ["Alice", "Bob", "Carol"]
    finally:
        outside.unlink()


# Saves until killed, with each save's write into its temporary file slowed down in the middle, so
# that kills land while the temporary file is half written.
SLOW_SAVER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from memory_server.storage import files
    from memory_server.storage.store import GraphStore
    from memory_server.model.items import Entity
    write = files.write_pieces
    def slowly(fd, pieces):
        half = len(pieces) // 2
        write(fd, pieces[:half])
        time.sleep(0.01)
        write(fd, pieces[half:])
    files.write_pieces = slowly
    store = GraphStore(Path(sys.argv[1]), lock_timeout=30, stale_after=1, refresh_every=0.2)
    step = len(store.read_graph()["entities"])
    while True:
        store.create_entities([Entity(f"e-{step:06d}", "t", ["o" * 200] * 20)])
        print(step, flush=True)
        step += 1
""")


def test_a_kill_while_the_temporary_file_is_being_written_leaves_the_memory_file_whole(memory: Path) -> None:
    for round_number in range(6):
        process = subprocess.Popen([sys.executable, "-c", SLOW_SAVER, str(memory)], stdout=subprocess.PIPE,
                                   text=True, cwd=REPO)
        try:
            assert process.stdout is not None
            committed = [int(process.stdout.readline()) for _ in range(3 + round_number)]
        finally:
            process.kill()
            process.wait(WAIT)
        names = names_in(memory)
        # Whole entities in order, every acknowledged one among them.
        assert names == [f"e-{n:06d}" for n in range(len(names))]
        assert len(names) > committed[-1]
    GraphStore(memory, stale_after=1, refresh_every=0.2).create_entities(entity_items([entity("last")]))
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]
    assert not lock_path_for(memory).exists()
