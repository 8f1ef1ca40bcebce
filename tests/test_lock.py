"""The lock protocol of memory_server/storage/lock.py: its record, its timings, and real processes racing for
it, dying with it, pausing with it, and sharing it with the previous version (filelock's lease)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import expect_line, python
from write_items import entity_items

from memory_server.storage.lock import (
    LOCK_REFRESH_EVERY,
    LOCK_STALE_AFTER,
    LOCK_TIMEOUT,
    LockTimings,
    MemoryFileLock,
    Record,
    encode_record,
    parse_record,
    process_gone,
    process_start,
    this_host,
)
from memory_server.storage.store import GraphStore, LockTimeout

WAIT = 60.0


def finish(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("done\n")
    process.stdin.flush()
    assert process.wait(WAIT) == 0, process.communicate()[1]


def a_gone_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(WAIT)
    return process.pid


def entity(name: str) -> dict[str, object]:
    return {"name": name, "entityType": "t", "observations": []}


# -- the record and the timings ------------------------------------------------------------------------


def test_a_record_reads_back_as_written() -> None:
    record = Record(4242, this_host(), "ab" * 16, 30.0, 123456)
    assert parse_record(encode_record(record)) == record
    assert encode_record(record).decode().splitlines() == [
        "filelock/2", "pid=4242", f"host={this_host()}", "mode=lease", f"token={'ab' * 16}", "duration=30.0",
        "start=123456"]


def test_the_previous_versions_marker_is_read() -> None:
    # As filelock 4.3's lease writes it: the start token carries the boot in its high bits.
    marker = (b"filelock/2\npid=77\nhost=box?pidns-effffffb\nmode=lease\ntoken=" + b"cd" * 16
              + b"\nduration=30.0\nstart=" + str((5 << 64) | 999).encode() + b"\n")
    assert parse_record(marker) == Record(77, "box?pidns-effffffb", "cd" * 16, 30.0, (5 << 64) | 999)


@pytest.mark.parametrize("content", [b"", b"filelock/2\npid=12", b"filelock/2\npid=x\nhost=h\n", b"\xff\xfe",
                                     b"12\nhost\n", b"filelock/2\npid=0\nhost=h\n", b"filelock/2\npid=5\nhost=\n"])
def test_empty_partial_and_foreign_lock_files_have_no_record(content: bytes) -> None:
    assert parse_record(content) is None


def test_the_timings_come_from_the_environment_only_when_set() -> None:
    assert LockTimings.from_environment({}) == LockTimings(LOCK_TIMEOUT, LOCK_STALE_AFTER, LOCK_REFRESH_EVERY)
    assert LockTimings.from_environment({"MEMORY_LOCK_TIMINGS": "1,0.2"}) == LockTimings(LOCK_TIMEOUT, 1.0, 0.2)
    assert LockTimings.from_environment({"MEMORY_LOCK_TIMINGS": "2,0.5,7"}) == LockTimings(7.0, 2.0, 0.5)
    for wrong in ("1", "0.2,1", "x,y", "1,0.2,0", "1,0.2,3,4", "-1,-2"):
        with pytest.raises(ValueError, match="MEMORY_LOCK_TIMINGS"):
            LockTimings.from_environment({"MEMORY_LOCK_TIMINGS": wrong})


def test_a_process_is_gone_when_it_exited_or_its_number_was_reused(children: list[subprocess.Popen[str]]) -> None:
    live = python("import sys; sys.stdin.readline()")
    children.append(live)
    start = process_start(live.pid)
    assert start is not None
    assert process_gone(live.pid, start) is False
    assert process_gone(live.pid, None) is False
    assert process_gone(live.pid, start + 1) is True  # the number now names another process
    assert process_gone(live.pid, (7 << 64) | start) is False  # the previous version's token, boot included
    assert process_gone(a_gone_pid(), None) is True
    assert process_gone(os.getpid(), process_start(os.getpid())) is False


# -- lock files on disk --------------------------------------------------------------------------------


def test_the_held_lock_file_carries_this_process_and_is_private(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    lock = MemoryFileLock(memory)
    with lock.held():
        record = parse_record(lock.path.read_bytes())
        assert record is not None
        assert (record.pid, record.host, record.duration) == (os.getpid(), this_host(), LOCK_STALE_AFTER)
        assert record.start == process_start(os.getpid())
        assert os.stat(lock.path).st_mode & 0o777 == 0o600
        assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl.lock"]
    assert list(tmp_path.iterdir()) == []


def test_a_lock_record_of_a_dead_process_is_taken_over_at_once(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    lock_file = tmp_path / "memory.jsonl.lock"
    lock_file.write_bytes(encode_record(Record(a_gone_pid(), this_host(), "ef" * 16, 600.0, None)))
    # Stale after 600 s by age; its process is gone, so it goes now.
    assert GraphStore(memory, lock_timeout=10, stale_after=600, refresh_every=200).create_entities(
        entity_items([entity("Alice")])).changed
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl"]


def test_a_lock_record_of_a_live_process_on_another_host_waits_for_age(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    (tmp_path / "memory.jsonl.lock").write_bytes(encode_record(Record(a_gone_pid(), "elsewhere", "ef" * 16, 0.5,
                                                                      None)))
    with pytest.raises(LockTimeout, match="held by process .* on elsewhere"):
        GraphStore(memory, lock_timeout=0.3, stale_after=0.5, refresh_every=0.1).create_entities(entity_items([entity("A")]))
    assert GraphStore(memory, lock_timeout=10, stale_after=0.5, refresh_every=0.1).create_entities(
        entity_items([entity("A")])).changed


def test_debris_of_writers_killed_while_taking_the_lock_is_removed(tmp_path: Path,
                                                                  children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    live = python("import sys; sys.stdin.readline()")
    children.append(live)
    dead_record = tmp_path / f"memory.jsonl.lock.{a_gone_pid()}.{'12' * 16}.new"
    dead_guard = tmp_path / f"memory.jsonl.lock.break.{a_gone_pid()}.{'34' * 16}.new"
    live_record = tmp_path / f"memory.jsonl.lock.{live.pid}.{'56' * 16}.new"
    for path in (dead_record, dead_guard, live_record):
        path.write_bytes(b"filelock/2\n")
    assert GraphStore(memory).create_entities(entity_items([entity("A")])).changed
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl", live_record.name]


# -- real processes --------------------------------------------------------------------------------------

# Takes the lock `rounds` times; inside each hold it appends "<name> in" and "<name> out" to a shared log.
RACER = """
import os, sys, time
from pathlib import Path
from memory_server.storage.store import MemoryFileLock
memory, log, name, rounds = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
lock = MemoryFileLock(memory, timeout=60, stale_after=1, refresh_every=0.2)
sys.stdin.readline()
for _ in range(rounds):
    with lock.held():
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{name} in\\n".encode())
        time.sleep(0.01)
        os.write(fd, f"{name} out\\n".encode())
        os.close(fd)
"""


@pytest.mark.parametrize("left", ["a dead process's lock", "an empty lock file"])
def test_two_processes_racing_for_a_stale_lock_never_hold_it_together(
        tmp_path: Path, children: list[subprocess.Popen[str]], left: str) -> None:
    memory = tmp_path / "memory.jsonl"
    log = tmp_path / "log"
    lock_file = tmp_path / "memory.jsonl.lock"
    if left == "an empty lock file":
        lock_file.write_bytes(b"")
    else:
        lock_file.write_bytes(encode_record(Record(a_gone_pid(), this_host(), "ab" * 16, 1.0, None)))
    racers = [python(RACER, str(memory), str(log), name, "20") for name in ("one", "two")]
    children.extend(racers)
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    for racer in racers:
        assert racer.wait(WAIT) == 0, racer.communicate()[1]
    lines = log.read_text().splitlines()
    assert len(lines) == 80
    # Holds never overlap: every "in" is followed by the same racer's "out".
    assert all(lines[i].split()[0] == lines[i + 1].split()[0] and lines[i].endswith(" in")
               and lines[i + 1].endswith(" out") for i in range(0, 80, 2)), lines
    assert sorted(path.name for path in tmp_path.iterdir()) == ["log"]


HOLDER = """
import sys
import time
from pathlib import Path
from memory_server.storage.store import MemoryFileLock
lock = MemoryFileLock(Path(sys.argv[1]), stale_after=float(sys.argv[2]), refresh_every=float(sys.argv[3]))
with lock.held():
    print("held", flush=True)
    sys.stdin.readline()
    try:
        lock.raise_if_lost()
        print("still mine", flush=True)
    except Exception as error:
        print(str(error), flush=True)
print("released", flush=True)
"""


def test_a_paused_holder_loses_the_lock_learns_it_and_leaves_the_new_holders_lock_alone(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    holder = python(HOLDER, str(memory), "1", "0.2")
    children.append(holder)
    expect_line(holder, "held")
    os.kill(holder.pid, signal.SIGSTOP)
    taker = MemoryFileLock(memory, timeout=30, stale_after=1, refresh_every=0.2)
    try:
        with taker.held():
            os.kill(holder.pid, signal.SIGCONT)
            assert holder.stdin is not None
            holder.stdin.write("go on\n")
            holder.stdin.flush()
            assert holder.stdout is not None
            assert holder.stdout.readline().startswith("Another process took over the lock")
            expect_line(holder, "released")
            assert holder.wait(WAIT) == 0
            taker.raise_if_lost()  # the resumed holder removed nothing of ours
            record = parse_record(taker.path.read_bytes())
            assert record is not None and record.pid == os.getpid()
    finally:
        if holder.poll() is None:
            os.kill(holder.pid, signal.SIGCONT)
    assert list(tmp_path.iterdir()) == []


# Holds the lock until its file's time has moved (a refresh), then prints the threads, closes the
# process's Background and prints them again, and checks the lock is still its own.
REFRESHED = """
import os, sys, threading
from pathlib import Path
from memory_server import background
from memory_server.storage.lock import MemoryFileLock
lock = MemoryFileLock(Path(sys.argv[1]), stale_after=30, refresh_every=0.05)
with lock.held():
    first = os.stat(lock.path).st_mtime_ns
    moved = threading.Event()
    while not moved.wait(0.01):
        if os.stat(lock.path).st_mtime_ns != first:
            moved.set()
    print(sorted(thread.name for thread in threading.enumerate()), flush=True)
    print(background.close_process(), flush=True)
    print(sorted(thread.name for thread in threading.enumerate()), flush=True)
    lock.raise_if_lost()
print("released", flush=True)
"""


def test_the_refresh_is_work_of_the_process_s_background_and_its_close_joins_it(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    holder = python(REFRESHED, str(tmp_path / "memory.jsonl"))
    children.append(holder)
    out, err = holder.communicate(timeout=WAIT)
    assert holder.returncode == 0, err
    assert out.splitlines() == ["['MainThread', 'memory-background-later']", "[]", "['MainThread']", "released"]
    assert list(tmp_path.iterdir()) == []


# -- the previous version: filelock 4.3's lease on the same lock file --------------------------------------

PREVIOUS = """
import sys
import time
from filelock import SoftFileLease, Timeout
lease = SoftFileLease(sys.argv[1], lease_duration=30.0, heartbeat_interval=15.0, mode=0o600)
try:
    lease.acquire(timeout=float(sys.argv[2]))
except Timeout:
    print("timeout", flush=True)
    sys.exit(0)
print("held", flush=True)
sys.stdin.readline()
lease.release()
"""


def test_a_previous_version_holding_the_lock_excludes_this_one_until_it_dies(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    previous = python(PREVIOUS, str(tmp_path / "memory.jsonl.lock"), "10")
    children.append(previous)
    expect_line(previous, "held")
    store = GraphStore(memory, lock_timeout=0.5)
    with pytest.raises(LockTimeout, match=f"held by process {previous.pid} on {this_host()}"):
        store.create_entities(entity_items([entity("Alice")]))
    previous.kill()
    previous.wait(WAIT)
    # Same host, same way of naming it, so its death frees the lock at once (30 s by age otherwise).
    assert GraphStore(memory, lock_timeout=10).create_entities(entity_items([entity("Alice")])).changed


def test_this_version_holding_the_lock_excludes_a_previous_one_until_it_dies(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    holder = python(HOLDER, str(memory), "30", "15")
    children.append(holder)
    expect_line(holder, "held")
    previous = python(PREVIOUS, str(tmp_path / "memory.jsonl.lock"), "0.5")
    children.append(previous)
    expect_line(previous, "timeout")
    holder.kill()
    holder.wait(WAIT)
    previous = python(PREVIOUS, str(tmp_path / "memory.jsonl.lock"), "10")
    children.append(previous)
    expect_line(previous, "held")
    finish(previous)


# -- staleness by the lock file's own age (its modification time) -------------------------------------

# One write with the default timings (stale after 30 s), giving up after 5 s: it succeeds only if the
# lock in its way is judged by its own age rather than by how long this writer has watched it.
WRITER = """
import sys, time
from pathlib import Path
from memory_server.storage.store import GraphStore
from memory_server.model.items import Entity
store = GraphStore(Path(sys.argv[1]), lock_timeout=float(sys.argv[2]))
try:
    store.create_entities([Entity("Alice", "t", [])])
except Exception as error:
    print(type(error).__name__, error, flush=True)
else:
    print("written", flush=True)
"""


def plant_lock(memory: Path, content: bytes, age: float) -> Path:
    lock_file = memory.with_name(memory.name + ".lock")
    lock_file.write_bytes(content)
    then = time.time() - age
    os.utime(lock_file, (then, then))
    return lock_file


def live_process(children: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    process = python("import sys; sys.stdin.readline()")
    children.append(process)
    return process


@pytest.mark.parametrize("holder", ["a live process on another host", "a live process on this host",
                                    "an unreadable record", "an empty file", "a previous version's record"])
def test_a_lock_two_minutes_old_is_taken_at_once_whoever_holds_it(
        tmp_path: Path, children: list[subprocess.Popen[str]], holder: str) -> None:
    memory = tmp_path / "memory.jsonl"
    live = live_process(children)
    content = {
        "a live process on another host": encode_record(Record(live.pid, "elsewhere", "ab" * 16, 30.0, None)),
        "a live process on this host": encode_record(Record(live.pid, this_host(), "ab" * 16, 30.0,
                                                            process_start(live.pid))),
        "an unreadable record": b"\x00\xff garbage",
        "an empty file": b"",
        # filelock 4.3's lease record, as the previous version wrote it, of a live process elsewhere
        "a previous version's record": (f"filelock/2\npid={live.pid}\nhost=elsewhere\nmode=lease\ntoken="
                                        f"{'cd' * 16}\nduration=600.0\n").encode(),
    }[holder]
    plant_lock(memory, content, age=120)
    writer = python(WRITER, str(memory), "5")
    children.append(writer)
    expect_line(writer, "written")
    assert writer.wait(WAIT) == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl"]
    assert live.poll() is None  # the holder was not asked to die: its lock was judged by age alone


def test_a_lock_refreshed_recently_is_not_taken_by_age(tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    live = live_process(children)
    plant_lock(memory, encode_record(Record(live.pid, "elsewhere", "ab" * 16, 30.0, None)), age=5)
    writer = python(WRITER, str(memory), "0.5")
    children.append(writer)
    assert writer.stdout is not None
    assert writer.stdout.readline().startswith("LockTimeout")
    assert not memory.exists()


def test_a_lock_from_the_future_is_taken_once_it_has_been_seen_unchanged_for_the_stale_time(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    # A modification time an hour ahead (the clock was set back since it was written): its age
    # cannot be told from it, so it counts from when the waiter first saw it.
    memory = tmp_path / "memory.jsonl"
    live = live_process(children)
    plant_lock(memory, encode_record(Record(live.pid, "elsewhere", "ab" * 16, 1.0, None)), age=-3600)
    with pytest.raises(LockTimeout):
        GraphStore(memory, lock_timeout=0.3, stale_after=1, refresh_every=0.2).create_entities(entity_items([entity("A")]))
    assert GraphStore(memory, lock_timeout=30, stale_after=1, refresh_every=0.2).create_entities(
        entity_items([entity("A")])).changed
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl"]


@pytest.mark.parametrize("kind", ["a FIFO", "a directory", "a symbolic link"])
def test_something_else_at_the_lock_s_name_fails_the_write_at_once_and_says_what_to_remove(
        tmp_path: Path, children: list[subprocess.Popen[str]], kind: str) -> None:
    memory = tmp_path / "memory.jsonl"
    lock_file = tmp_path / "memory.jsonl.lock"
    if kind == "a FIFO":
        os.mkfifo(lock_file)
    elif kind == "a directory":
        lock_file.mkdir()
    else:
        (tmp_path / "elsewhere").write_bytes(b"")
        lock_file.symlink_to(tmp_path / "elsewhere")
    # Even with a minute to wait, the answer comes at once: nothing there will ever be a lock.
    writer = python(WRITER, str(memory), "60")
    children.append(writer)
    try:
        out, _ = writer.communicate(timeout=WAIT / 2)
    finally:
        writer.kill()
    assert out.startswith("GraphError Cannot take the lock:"), out
    assert str(lock_file) in out and "not a regular file" in out and "remove it" in out
    assert not memory.exists()
