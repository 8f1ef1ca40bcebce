"""The spare (memory_server/storage/files.py): the version before the last save, written over by the next
save instead of a new file, but never while any process still has it open, never through a second
name or a link, and never so that the memory file could end up other than whole and private."""

from __future__ import annotations

import errno
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

from memory_server.storage import files
from memory_server.storage.store import GraphStore

REPO = Path(__file__).resolve().parents[1]
WAIT = 60.0

needs_leases = pytest.mark.skipif(files._SETLEASE is None, reason="writing over the spare needs Linux's file leases")


def entity(name: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": list(observations)}


def names_in(memory: Path) -> list[str]:
    return [entity["name"] for entity in GraphStore(memory).read_graph()["entities"]]


def test_the_spare_is_the_version_before_the_last_save_and_private(store: GraphStore, memory: Path) -> None:
    store.create_entities([entity("Alice")])
    first = memory.read_bytes()
    store.create_entities([entity("Bob")])
    spare = files.spare_path_for(memory)
    assert spare.read_bytes() == first
    assert stat.S_IMODE(spare.stat().st_mode) == 0o600
    assert names_in(memory) == ["Alice", "Bob"]


@needs_leases
def test_a_save_writes_into_the_spare_when_nobody_has_it_open(store: GraphStore, memory: Path) -> None:
    store.create_entities([entity("Alice")])
    store.create_entities([entity("Bob")])
    spare = files.spare_path_for(memory)
    spare_inode, memory_inode = spare.stat().st_ino, memory.stat().st_ino
    store.create_entities([entity("Carol")])
    # The spare's blocks became the memory file, and the replaced memory file the spare.
    assert memory.stat().st_ino == spare_inode
    assert spare.stat().st_ino == memory_inode
    assert names_in(memory) == ["Alice", "Bob", "Carol"]
    assert files.holds(memory, [memory.read_bytes()])


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


@needs_leases
def test_a_reader_still_reading_an_old_version_keeps_reading_it_whole(store: GraphStore, memory: Path) -> None:
    store.create_entities([entity("Alice", "x" * 5000)])
    version = memory.read_bytes()
    reader = subprocess.Popen([sys.executable, "-c", READER, str(memory)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert reader.stdout.readline().strip() == "open"
        # Its version becomes the spare at the next save; the saves after that must not write into it.
        for name in ("Bob", "Carol", "Dave", "Erin"):
            store.create_entities([entity(name, name * 3000)])
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == hashlib.sha256(version).hexdigest()
    finally:
        reader.kill()
        reader.wait(WAIT)
    assert names_in(memory) == ["Alice", "Bob", "Carol", "Dave", "Erin"]


def test_a_spare_with_another_name_is_never_written_into(store: GraphStore, memory: Path, tmp_path: Path) -> None:
    store.create_entities([entity("Alice")])
    store.create_entities([entity("Bob")])
    planted = tmp_path / "elsewhere.jsonl"
    os.link(files.spare_path_for(memory), planted)
    before = planted.read_bytes()
    store.create_entities([entity("Carol")])
    store.create_entities([entity("Dave")])
    assert planted.read_bytes() == before
    assert names_in(memory) == ["Alice", "Bob", "Carol", "Dave"]


def test_a_spare_that_is_a_link_is_not_followed(store: GraphStore, memory: Path, tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_bytes(b"not yours\n")
    files.spare_path_for(memory).symlink_to(target)
    for name in ("Alice", "Bob", "Carol"):
        store.create_entities([entity(name)])
    assert target.read_bytes() == b"not yours\n"
    assert names_in(memory) == ["Alice", "Bob", "Carol"]


def test_a_directory_in_the_spare_s_place_only_means_no_spare(store: GraphStore, memory: Path) -> None:
    files.spare_path_for(memory).mkdir()
    for name in ("Alice", "Bob", "Carol"):
        store.create_entities([entity(name)])
    assert names_in(memory) == ["Alice", "Bob", "Carol"]
    assert files.spare_path_for(memory).is_dir()
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl", "memory.jsonl.spare"]


def test_deleting_the_spare_loses_nothing(store: GraphStore, memory: Path) -> None:
    for name in ("Alice", "Bob", "Carol"):
        store.create_entities([entity(name)])
        files.spare_path_for(memory).unlink(missing_ok=True)  # the first save has no version before it
    store.create_entities([entity("Dave")])
    assert names_in(memory) == ["Alice", "Bob", "Carol", "Dave"]
    assert files.spare_path_for(memory).exists()


def test_a_spare_readable_by_others_becomes_a_private_memory_file(store: GraphStore, memory: Path) -> None:
    # A memory file another program made readable by everyone becomes the spare at the first save.
    memory.write_bytes(b'{"type":"entity","name":"Alice","entityType":"person","observations":[]}\n')
    memory.chmod(0o644)
    for name in ("Bob", "Carol", "Dave"):
        store.create_entities([entity(name)])
        assert stat.S_IMODE(memory.stat().st_mode) == 0o600
    assert names_in(memory) == ["Alice", "Bob", "Carol", "Dave"]


# Saves until killed, with each save's write into the spare (or a temporary file) slowed down in
# the middle, so that kills land while the spare is half written.
SLOW_SAVER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from memory_server.storage import files
    from memory_server.storage.store import GraphStore
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
        store.create_entities([{"name": f"e-{step:06d}", "entityType": "t", "observations": ["o" * 200] * 20}])
        print(step, flush=True)
        step += 1
""")


def test_a_kill_while_the_spare_is_being_written_leaves_the_memory_file_whole(memory: Path) -> None:
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


def test_where_the_filesystem_grants_no_leases_no_spare_is_kept(store: GraphStore, memory: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # A filesystem without leases (NFS answers EINVAL) cannot be had here, so the one call that
    # asks for the lease answers as such a filesystem does; everything else is real.
    store.create_entities([entity("Alice")])
    store.create_entities([entity("Bob")])
    assert files.spare_path_for(memory).exists()
    real_fcntl = files.fcntl.fcntl

    def no_leases(fd: int, command: int, argument: int = 0) -> Any:
        if command == files._SETLEASE:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_fcntl(fd, command, argument)

    monkeypatch.setattr(files.fcntl, "fcntl", no_leases)
    monkeypatch.setattr(files, "_without_leases", set())
    for name in ("Carol", "Dave", "Erin"):
        store.create_entities([entity(name)])
        assert not files.spare_path_for(memory).exists()
    assert names_in(memory) == ["Alice", "Bob", "Carol", "Dave", "Erin"]
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]
