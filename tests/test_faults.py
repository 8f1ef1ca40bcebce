"""Faults a hostile user or an unlucky machine can cause, each on real server processes over real pipes,
with real files, real signals and real concurrent processes: a memory file rewritten behind a server's
back with the same stat signature, a lock holder paused past the stale time, shutdown while a write
waits for the lock, lock files seen empty, planted debris, memory paths that are not regular files,
directory modes under a permissive umask, and a side file planted as a hard link."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Deadline, cancel, expect_line, python
from memory_helpers import (
    MemoryClient,
    MemoryServers,
    entity,
    entity_record,
    file_lines,
    memory_servers,  # noqa: F401  (a fixture)
    record_line,
    texts,
    undated,
    write_reference_file,
)

from memory_server.model.records import EntityRecord, encode_file
from protocol.session import SHUTDOWN_GRACE_SECONDS

FAST_LOCK = {"MEMORY_LOCK_TIMINGS": "1,0.2,30"}
"""Stale after 1 s, refreshed every 0.2 s, writes wait up to 30 s: every server of a test gets the same."""
EXIT_MARGIN = 4.0
"""Added to the shutdown grace when waiting for an exit: room for a loaded machine, far below the
30 s an unabandoned wait took."""


def names_in(memory: Path) -> list[str]:
    import json
    return [json.loads(line)["name"] for line in file_lines(memory) if json.loads(line)["type"] == "entity"]


def graph_names(client: MemoryClient) -> list[str]:
    return [item["name"] for item in client.graph()["entities"]]


def create(client: MemoryClient, *names: str) -> dict[str, Any]:
    return client.call("create_entities", {"entities": [entity(name) for name in names]})


def error_text(result: dict[str, Any]) -> str:
    assert result.get("isError") is True, f"expected a tool error: {result}"
    return "\n".join(texts(result))


def wait_until(condition: Any, timeout: float = 15.0) -> None:
    deadline = Deadline(timeout)
    while not condition():
        deadline.remaining()
        time.sleep(0.005)


# -- 1. a stale cache is never trusted under the lock ---------------------------------------------


def rewrite_in_place(memory: Path, old: bytes, new: bytes) -> None:
    """What a sync tool or an editor may do: the same inode rewritten, same size, mtime put back."""
    before = os.stat(memory)
    with open(memory, "r+b") as file:
        file.write(memory.read_bytes().replace(old, new))
    os.utime(memory, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(memory)
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (before.st_size, before.st_ino, before.st_mtime_ns)


def rewrite_through_a_reused_inode(memory: Path, old: bytes, new: bytes) -> bool:
    """Another writer's new file that lands on the freed inode with the same size and mtime, as on a
    filesystem with coarse timestamps; True when the inode number was reused (ext4 reuses it at once)."""
    before = os.stat(memory)
    data = memory.read_bytes().replace(old, new)
    for _ in range(20):
        memory.unlink()
        fd = os.open(memory, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.close(fd)
        os.utime(memory, ns=(before.st_atime_ns, before.st_mtime_ns))
        if os.stat(memory).st_ino == before.st_ino:
            return True
    return False


def test_a_same_size_rewrite_in_place_with_its_mtime_restored_is_not_undone(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    write_reference_file(memory, [record_line(entity_record(entity("Alice")))])
    client = memory_servers.client("legacy", memory)
    assert graph_names(client) == ["Alice"]
    rewrite_in_place(memory, b"Alice", b"Alina")
    assert not create(client, "Carol").get("isError")
    assert names_in(memory) == ["Alina", "Carol"]
    assert graph_names(client) == ["Alina", "Carol"]


def test_another_writers_file_on_a_reused_inode_with_the_same_signature_is_not_undone(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    write_reference_file(memory, [record_line(entity_record(entity("Alice", "person", ["likes tea"])))])
    client = memory_servers.client("legacy", memory)
    assert graph_names(client) == ["Alice"]
    # On ext4 (this machine's /tmp) the inode comes back; elsewhere the scenario is merely easier.
    rewrite_through_a_reused_inode(memory, b"likes tea", b"likes jam")
    assert not client.call("add_observations", {"observations": [
        {"entityName": "Alice", "contents": ["sings"]}]}).get("isError")
    assert undated(client.graph())["entities"] == [entity("Alice", "person", ["likes jam", "sings"])]
    assert [line.observations for line in map(parse_entity, file_lines(memory))] == [["likes jam", "sings"]]


def parse_entity(line: str) -> EntityRecord:
    import json
    record = json.loads(line)
    return EntityRecord(record["name"], record["entityType"], record["observations"])


# -- 2. a lock holder paused past the stale time -----------------------------------------------------


def test_a_writer_paused_holding_the_lock_fails_its_write_and_the_one_that_took_over_keeps_its_own(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    lock = memory.with_name("memory.jsonl.lock")
    # Large enough that a save takes several milliseconds, so the pause lands inside the write.
    memory.write_bytes(encode_file([EntityRecord(f"pad-{n:05d}", "padding", [f"observation {n} " * 8])
                                    for n in range(12000)]))
    paused = memory_servers.client("legacy", memory, env=FAST_LOCK)
    taker = memory_servers.client("legacy", memory, env=FAST_LOCK)
    for client in (paused, taker):
        assert client.ok("open_nodes", {"names": ["pad-00000"]})["entities"]
    request = paused.send_request("tools/call", {"name": "create_entities",
                                                 "arguments": {"entities": [entity("Paused")]}})
    wait_until(lock.exists)
    os.kill(paused.process.pid, signal.SIGSTOP)
    try:
        # Waits one stale time (the paused holder cannot refresh), then takes the lock over.
        assert not create(taker, "Taker").get("isError")
        assert lock.exists() is False
    finally:
        os.kill(paused.process.pid, signal.SIGCONT)
    response = paused.response(request)
    assert "result" in response, f"the resumed server answered with a protocol error: {response}"
    names = set(names_in(memory))
    assert "Taker" in names
    if response["result"].get("isError"):
        message = error_text(response["result"])
        assert "Another process took over the lock" in message and "Nothing was changed" in message
        assert "Paused" not in names
    else:  # the pause came after its save: its write had landed before the takeover
        assert "Paused" in names
    # Both go on serving, on the file as it now is.
    assert not create(paused, "After").get("isError")
    assert {"Taker", "After"} <= set(names_in(memory))
    # (read_graph pages a memory this large, so ask for the entity by name)
    assert [item["name"] for item in taker.ok("open_nodes", {"names": ["Taker"]})["entities"]] == ["Taker"]


LIVE = """
import sys
print("ready", flush=True)
sys.stdin.readline()
"""


def test_only_temporary_files_of_dead_writers_are_removed(memory_servers: MemoryServers, tmp_path: Path,
                                                          children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    writer = python(LIVE)
    children.append(writer)
    expect_line(writer, "ready")
    gone = python(LIVE)
    gone.kill()
    gone.wait(30)
    children.append(gone)
    live = memory.with_name(f"memory.jsonl.{'ab' * 16}.{writer.pid}.tmp")
    dead = memory.with_name(f"memory.jsonl.{'cd' * 16}.{gone.pid}.tmp")
    older = memory.with_name(f"memory.jsonl.{'ef' * 16}.tmp")  # named by the previous version: no pid
    for path in (live, dead, older):
        path.write_bytes(b"half a save")
    client = memory_servers.client("legacy", memory)
    assert not create(client, "Alice").get("isError")
    assert live.read_bytes() == b"half a save"  # a live writer (one that took the lock over) may still use it
    assert not dead.exists() and not older.exists()


# -- 3. shutdown while a write waits for the lock ----------------------------------------------------

HOLDER = """
import sys
from pathlib import Path
from memory_server.storage.store import MemoryFileLock
with MemoryFileLock(Path(sys.argv[1])).held():
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.mark.parametrize("held_by", ["a live process", "an empty lock file"])
@pytest.mark.parametrize("stop", ["end of input", "SIGTERM"])
def test_a_write_waiting_for_the_lock_is_abandoned_when_the_server_stops(
        memory_servers: MemoryServers, tmp_path: Path, children: list[subprocess.Popen[str]],
        held_by: str, stop: str) -> None:
    memory = tmp_path / "memory.jsonl"
    lock = memory.with_name("memory.jsonl.lock")
    if held_by == "a live process":
        holder = python(HOLDER, str(memory))
        children.append(holder)
        expect_line(holder, "held")
    else:
        lock.write_bytes(b"")  # left by an older version: only age (30 s) expires it
    client = memory_servers.client("legacy", memory)
    client.send_request("tools/call", {"name": "create_entities", "arguments": {"entities": [entity("Late")]}})
    # Reads do not wait for the lock; this answer shows the write request was read before it.
    assert client.ok("open_nodes", {"names": ["Late"]})["entities"] == []
    if stop == "end of input":
        client.process.close_stdin()
    else:
        client.process.signal(signal.SIGTERM)
    assert client.process.wait(SHUTDOWN_GRACE_SECONDS + EXIT_MARGIN) == 0
    assert lock.exists()  # the holder's lock, untouched
    if held_by == "a live process":
        assert children[0].stdin is not None
        children[0].stdin.write("done\n")
        children[0].stdin.flush()
        assert children[0].wait(30) == 0
    else:
        lock.unlink()
    assert not memory.exists()  # the abandoned write never landed
    assert "Traceback" not in client.process.stderr


def test_a_cancelled_write_that_waits_for_the_lock_never_lands(memory_servers: MemoryServers, tmp_path: Path,
                                                                children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    holder = python(HOLDER, str(memory))
    children.append(holder)
    expect_line(holder, "held")
    client = memory_servers.client("legacy", memory)
    request = client.send_request("tools/call", {"name": "create_entities",
                                                 "arguments": {"entities": [entity("Cancelled")]}})
    assert client.ok("open_nodes", {"names": ["Cancelled"]})["entities"] == []  # the write is waiting
    client.process.send(cancel(request))
    # The session reads its input in order: once a later ping is answered, the cancel has been read
    # (released before that, the lock could be taken by the write before its cancel arrives).
    client.request("ping")
    assert holder.stdin is not None
    holder.stdin.write("done\n")
    holder.stdin.flush()
    assert holder.wait(30) == 0
    # The next write gets the lock once the cancelled one has let go of its turn.
    assert not create(client, "Next").get("isError")
    assert names_in(memory) == ["Next"]
    client.process.finish()
    assert names_in(memory) == ["Next"]
    assert not any(message.get("id") == request for message in client.everything())


# -- 4. the lock file is never seen empty ----------------------------------------------------------------


def test_the_lock_file_is_never_seen_empty_or_partial(memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    lock = memory.with_name("memory.jsonl.lock")
    client = memory_servers.client("legacy", memory)
    sightings: list[bytes] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                sightings.append(lock.read_bytes())
            except FileNotFoundError:
                pass

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        for number in range(150):
            assert not create(client, f"e{number}").get("isError")
    finally:
        done.set()
        watcher.join(30)
    assert sightings, "the watcher never saw the lock file"
    incomplete = [content for content in sightings if not content.endswith(b"\n") or b"pid=" not in content]
    assert incomplete == [], f"{len(incomplete)} of {len(sightings)} sightings were empty or partial"
    assert f"pid={client.process.pid}\n".encode() in sightings[0]


# -- 5. debris that cannot be removed -------------------------------------------------------------------


def test_a_planted_directory_named_like_a_temporary_file_is_reported_once_and_skipped(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    planted = memory.with_name(f"memory.jsonl.{'0' * 32}.tmp")
    planted.mkdir()
    (planted / "inside").write_bytes(b"keep me")
    for run in range(2):  # across restarts as well
        client = memory_servers.client("legacy", memory)
        for number in range(3):
            assert not create(client, f"r{run}-{number}").get("isError")
        client.process.finish()
        assert client.process.stderr.count(str(planted)) == 1, client.process.stderr
    assert len(names_in(memory)) == 6
    assert (planted / "inside").read_bytes() == b"keep me"


# -- 6. memory paths that are not regular files ------------------------------------------------------------


def special_file(path: Path, kind: str) -> None:
    if kind == "FIFO":
        os.mkfifo(path, 0o600)
    else:  # a copy of /dev/null
        null = os.stat("/dev/null")
        os.mknod(path, 0o600 | stat.S_IFCHR, null.st_rdev)


@pytest.mark.parametrize("kind", ["FIFO", "character device"])
def test_a_memory_path_that_is_a_fifo_or_a_device_is_refused_without_hanging(
        memory_servers: MemoryServers, tmp_path: Path, kind: str) -> None:
    if kind == "character device" and os.geteuid() != 0:
        pytest.fail("making a device node needs root; run the suite as root (CI does) or in a container")
    memory = tmp_path / "memory.jsonl"
    special_file(memory, kind)
    client = memory_servers.client("legacy", memory)
    for name, arguments in (("read_graph", {}), ("search_nodes", {"query": "x"}), ("open_nodes", {"names": ["x"]}),
                            ("create_entities", {"entities": [entity("Alice")]})):
        message = error_text(client.call(name, arguments))
        assert f"Cannot read the memory file {memory}: it is a {kind}" in message, message
        assert "not a regular file" in message
    mode = os.lstat(memory).st_mode
    assert (stat.S_ISFIFO(mode) if kind == "FIFO" else stat.S_ISCHR(mode)), "the special file was replaced"
    assert sorted(path.name for path in tmp_path.iterdir() if path.name != "cwd") == ["memory.jsonl"]
    client.process.finish()  # still answers end of input


def test_a_symlink_to_a_regular_file_still_works(memory_servers: MemoryServers, tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    write_reference_file(target, [record_line(entity_record(entity("Alice")))])
    link = tmp_path / "memory.jsonl"
    link.symlink_to(target)
    client = memory_servers.client("legacy", link)
    assert not create(client, "Bob").get("isError")
    assert link.is_symlink() and names_in(target) == ["Alice", "Bob"]


# -- 7. directory modes --------------------------------------------------------------------------------------


def test_every_directory_made_for_the_memory_file_is_private_under_a_permissive_umask(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory = tmp_path / "a" / "b" / "c" / "memory.jsonl"
    client = memory_servers.client("legacy", memory, umask=0)
    assert not create(client, "Alice").get("isError")
    modes = {str(path.relative_to(tmp_path)): stat.S_IMODE(os.stat(path).st_mode)
             for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c")}
    assert modes == {"a": 0o700, "a/b": 0o700, "a/b/c": 0o700}
    assert stat.S_IMODE(os.stat(memory).st_mode) == 0o600


# -- 8. a side file planted as a hard link -------------------------------------------------------------------


def test_a_hard_link_planted_at_the_rejected_side_file_is_refused(memory_servers: MemoryServers,
                                                                  tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(b"{not json\n")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"someone else's file\n")
    os.chmod(victim, 0o644)
    os.link(victim, memory.with_name("memory.jsonl.rejected"))
    client = memory_servers.client("legacy", memory)
    message = error_text(create(client, "Alice"))
    assert "memory.jsonl.rejected is a hard link" in message and "Nothing was changed" in message
    assert victim.read_bytes() == b"someone else's file\n"
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o644
    assert memory.read_bytes() == b"{not json\n"
    # Once the link is gone, the unreadable line moves out as usual.
    memory.with_name("memory.jsonl.rejected").unlink()
    assert not create(client, "Alice").get("isError")
    assert memory.with_name("memory.jsonl.rejected").read_bytes() == b"{not json\n"
