"""Several real processes on one memory file: concurrent writers, SIGKILL mid-write, stale and live
locks, a full disk, file modes under a permissive umask, and where the memory file lives."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from write_items import entity_items

from memory_server.model.records import EntityRecord, decode_file, encode_file
from memory_server.storage.paths import MIGRATION_DONE, MIGRATION_STARTED, resolve_memory_path
from memory_server.storage.store import GraphStore, LockTimeout

REPO = Path(__file__).resolve().parents[1]
WAIT = 60.0
"""Generous bound on any wait; a test that reaches it has failed."""

# Writes `count` entities and as many observations on the shared entity, starting on "go".
WRITER = """
import sys
from pathlib import Path
from memory_server.storage.store import GraphStore
from memory_server.model.items import Entity, ObservationsToAdd
path, worker, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store = GraphStore(path)
sys.stdin.readline()
for step in range(count):
    store.create_entities([Entity(f"{worker}-{step}", "t", [])])
    store.add_observations([ObservationsToAdd("shared", [f"{worker}-{step}"])])
"""

# Holds the lock, as a writer in the middle of a save does, until a line arrives on stdin.
HOLDER = """
import os, sys
from pathlib import Path
from memory_server.storage.store import MemoryFileLock
os.umask(0)
lock = MemoryFileLock(Path(sys.argv[1]), stale_after=float(sys.argv[2]), refresh_every=float(sys.argv[3]))
with lock.held():
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""

# Appends entities e-000000, e-000001, ... one write at a time until killed; after each write
# that returned it prints the entity's number. A kill between creating the lock file and writing
# the holder's record into it leaves an empty lock that only age can expire, hence the short stale time.
APPENDER = """
import sys
from pathlib import Path
from memory_server.storage.store import GraphStore
from memory_server.model.items import Entity
store = GraphStore(Path(sys.argv[1]), lock_timeout=30, stale_after=1, refresh_every=0.2)
step = sum(1 for e in store.read_graph()["entities"] if e["name"].startswith("e-"))
print("ready", flush=True)
while True:
    store.create_entities([Entity(f"e-{step:06d}", "t", [])])
    print(step, flush=True)
    step += 1
"""


def python(code: str, *args: str, stdin: int | None = subprocess.PIPE) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          env=env, timeout=WAIT, check=False)


def stderr_of(process: subprocess.Popen[str]) -> str:
    """What a child wrote to stderr; it is killed first so that reading cannot block."""
    process.kill()
    process.wait(WAIT)
    return process.stderr.read() if process.stderr is not None else ""


def expect_line(process: subprocess.Popen[str], expected: str) -> None:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line == expected, f"expected {expected!r}, got {line!r}; stderr: {line != expected and stderr_of(process)}"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def entity(name: str) -> dict[str, object]:
    return {"name": name, "entityType": "t", "observations": []}


# -- writers in parallel -----------------------------------------------------------------------


def test_four_processes_writing_at_once_lose_nothing(tmp_path: Path,
                                                    children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    GraphStore(memory).create_entities(entity_items([entity("shared")]))
    workers = [f"w{number}" for number in range(4)]
    children += [python(WRITER, str(memory), worker, "15") for worker in workers]
    for process in children:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in children:
        assert process.wait(WAIT) == 0, stderr_of(process)
    graph = GraphStore(memory).read_graph()
    expected = {f"{worker}-{step}" for worker in workers for step in range(15)}
    assert {e["name"] for e in graph["entities"]} == expected | {"shared"}
    shared = next(e for e in graph["entities"] if e["name"] == "shared")
    assert sorted(shared["observations"]) == sorted(expected)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl"]


# -- SIGKILL ---------------------------------------------------------------------------------


# Writes c<name>-000000, c<name>-000001, ... until its stdin closes, printing each number once its
# write returned: a process sharing the file with the one being killed, never killed itself.
COMPANION = """
import sys, threading
from pathlib import Path
from memory_server.storage.store import GraphStore
from memory_server.model.items import Entity
store = GraphStore(Path(sys.argv[1]), lock_timeout=30, stale_after=1, refresh_every=0.2)
name = sys.argv[2]
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
step = 0
print("ready", flush=True)
while not done.is_set():
    store.create_entities([Entity(f"c{name}-{step:06d}", "t", [])])
    print(step, flush=True)
    step += 1
"""
KILLS = 50


class _Acknowledged:
    """The numbers a companion printed, collected by a thread (its owner: the test) as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.numbers: list[int] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.strip().isdigit():
                with self._lock:
                    self.numbers.append(int(line))

    def so_far(self) -> int:
        with self._lock:
            return len(self.numbers)

    def join(self) -> None:
        self._thread.join(WAIT)


def test_sigkill_at_random_moments_always_leaves_a_complete_committed_file(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    # A graph big enough that a save takes a while, so that kills land inside saves too.
    padding = [EntityRecord(f"pad-{n:05d}", "padding", [f"observation {k} of {n} " * 4 for k in range(3)])
               for n in range(3000)]
    memory.write_bytes(encode_file(padding))
    companions = [python(COMPANION, str(memory), name) for name in ("a", "b")]
    children.extend(companions)
    for companion in companions:
        expect_line(companion, "ready")
    acknowledged = [_Acknowledged(companion) for companion in companions]
    chooser = random.Random(20261201)
    committed = -1
    for _ in range(KILLS):
        process = python(APPENDER, str(memory), stdin=subprocess.DEVNULL)
        children.append(process)
        expect_line(process, "ready")
        # A first write gets through: whatever the previous kill left (a lock, a temporary file) is dealt with.
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.strip().isdigit(), stderr_of(process)
        committed = max(committed, int(first))
        delay = chooser.uniform(0.0, 0.25)
        try:
            process.wait(delay)  # the random moment of the kill; the child never exits by itself
        except subprocess.TimeoutExpired:
            pass
        process.kill()
        process.wait(WAIT)
        reported = [int(line) for line in process.stdout.read().split()]
        committed = max([committed, *reported])
        # What the companions had acknowledged before the file is read must be in it.
        companion_counts = [companion.so_far() for companion in acknowledged]

        lines = decode_file(memory.read_bytes())
        assert all(type(line) is EntityRecord for line in lines), "the file holds a partial or foreign line"
        assert lines[:3000] == padding
        appended = [line.name for line in lines[3000:]]
        # Exactly one of the committed states: e-000000 .. e-N in order, with every write that returned.
        mine = [name for name in appended if name.startswith("e-")]
        assert mine == [f"e-{n:06d}" for n in range(len(mine))]
        assert len(mine) >= committed + 1
        for name, count in zip(("a", "b"), companion_counts, strict=True):
            theirs = [entry for entry in appended if entry.startswith(f"c{name}-")]
            assert theirs[:count] == [f"c{name}-{n:06d}" for n in range(count)]
    for companion in companions:
        assert companion.stdin is not None
        companion.stdin.close()
        assert companion.wait(WAIT) == 0, stderr_of(companion)
    for companion in acknowledged:
        companion.join()
    # The next writer gets past whatever the last kill left and sweeps the leftovers.
    survivor = GraphStore(memory, lock_timeout=30, stale_after=1, refresh_every=0.2)
    assert survivor.create_entities(entity_items([entity("after the storm")])).changed
    names = {line.name for line in decode_file(memory.read_bytes()) if isinstance(line, EntityRecord)}
    for name, companion in zip(("a", "b"), acknowledged, strict=True):
        assert {f"c{name}-{n:06d}" for n in companion.numbers} <= names
    # Nothing of ours but the memory file, and the cache beside a large one (with its own temporaries
    # and journal while one is being built: the cache's to sweep).
    left = sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith("memory.jsonl.index"))
    assert left == ["memory.jsonl"]


# -- stale and live locks ----------------------------------------------------------------------


def test_the_lock_of_a_dead_process_is_broken_at_once(tmp_path: Path,
                                                      children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    holder = python(HOLDER, str(memory), "600", "200")
    children.append(holder)
    expect_line(holder, "held")
    lock = tmp_path / "memory.jsonl.lock"
    assert lock.exists() and mode(lock) == 0o600
    holder.kill()
    holder.wait(WAIT)
    assert lock.exists()  # left behind by the killed holder
    # Waiting for age would take 600 s; the lock goes because its process is known to be gone.
    store = GraphStore(memory, lock_timeout=30, stale_after=600, refresh_every=200)
    assert store.create_entities(entity_items([entity("Alice")])).changed
    assert not lock.exists()


def test_an_empty_lock_file_left_by_a_writer_killed_while_creating_it_expires(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    (tmp_path / "memory.jsonl.lock").write_bytes(b"")
    # No process to ask, so only age tells: not broken before the stale time...
    with pytest.raises(LockTimeout):
        GraphStore(memory, lock_timeout=0.3, stale_after=600).create_entities(entity_items([entity("Alice")]))
    # ...and broken once it has gone that long without a refresh.
    assert GraphStore(memory, lock_timeout=30, stale_after=0.5, refresh_every=0.1).create_entities(
        entity_items([entity("Alice")])).changed
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl"]


def test_an_abandoned_break_guard_does_not_stop_stale_locks_from_being_broken(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    holder = python(HOLDER, str(memory), "0.5", "0.1")
    children.append(holder)
    expect_line(holder, "held")
    holder.kill()
    holder.wait(WAIT)
    (tmp_path / "memory.jsonl.lock.break").write_bytes(b"")  # a breaker killed as it took the guard
    store = GraphStore(memory, lock_timeout=30, stale_after=0.5, refresh_every=0.1)
    assert store.create_entities(entity_items([entity("Alice")])).changed
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl"]


def test_a_live_holder_makes_writes_time_out_and_changes_nothing(tmp_path: Path,
                                                                 children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    GraphStore(memory).create_entities(entity_items([entity("Alice")]))
    before = memory.read_bytes()
    holder = python(HOLDER, str(memory), "2", "0.2")
    children.append(holder)
    expect_line(holder, "held")
    # Longer than the stale time: the holder's refreshes keep its lock alive all along.
    store = GraphStore(memory, lock_timeout=4, stale_after=2, refresh_every=0.2)
    with pytest.raises(LockTimeout) as raised:
        store.create_entities(entity_items([entity("Bob")]))
    assert f"{memory}.lock" in str(raised.value)
    assert f"held by process {holder.pid}" in str(raised.value)
    assert "Nothing was changed" in str(raised.value)
    assert memory.read_bytes() == before
    assert holder.stdin is not None
    holder.stdin.write("done\n")
    holder.stdin.flush()
    expect_line(holder, "released")
    assert store.create_entities(entity_items([entity("Bob")])).changed


def test_a_record_declaring_a_longer_stale_time_does_not_keep_its_lock_from_age(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    # The stale time is the sharers' (30 s by default), whatever a record says: a holder started with
    # 600 s refreshes every 200 s, so its lock looks abandoned to a writer configured for 1 s, which
    # takes it (a holder that then tried to save would find out, see test_lock.py's paused holder).
    memory = tmp_path / "memory.jsonl"
    holder = python(HOLDER, str(memory), "600", "200")
    children.append(holder)
    expect_line(holder, "held")
    impatient = GraphStore(memory, lock_timeout=30, stale_after=1, refresh_every=0.2)
    assert impatient.create_entities(entity_items([entity("Alice")])).changed
    assert holder.stdin is not None
    holder.stdin.write("go on\n")
    holder.stdin.flush()
    expect_line(holder, "released")
    assert holder.wait(WAIT) == 0
    assert GraphStore(memory).read_graph()["entities"] == [entity("Alice")]


def test_a_holder_that_stopped_refreshing_loses_the_lock_after_the_stale_time(
        tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    memory = tmp_path / "memory.jsonl"
    holder = python(HOLDER, str(memory), "1", "0.2")
    children.append(holder)
    expect_line(holder, "held")
    os.kill(holder.pid, signal.SIGSTOP)  # alive, but neither working nor refreshing
    try:
        store = GraphStore(memory, lock_timeout=30, stale_after=1, refresh_every=0.2)
        assert store.create_entities(entity_items([entity("Alice")])).changed
        assert store.read_graph()["entities"] == [entity("Alice")]
        assert holder.poll() is None
    finally:
        os.kill(holder.pid, signal.SIGKILL)


# -- a failing disk ------------------------------------------------------------------------------

FULL_DISK = """
import json, os, resource, signal, sys
from pathlib import Path
from memory_server.storage.store import GraphError, GraphStore
from memory_server.model.items import Entity
memory = Path(sys.argv[1])
store = GraphStore(memory)
store.create_entities([Entity("Alice", "t", [])])
# Past this size writes fail with EFBIG, as they fail with ENOSPC on a full disk.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
try:
    store.create_entities([Entity("Big", "t", ["x" * 100000])])
    print(json.dumps({"error": None}))
except GraphError as error:
    print(json.dumps({"error": str(error), "graph": store.read_graph(), "files": sorted(os.listdir(memory.parent))}))
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
print(json.dumps(store.create_entities([Entity("Bob", "t", [])]).value))
"""


def test_a_save_that_fails_changes_nothing_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    result = run_python(FULL_DISK, str(memory))
    assert result.returncode == 0, result.stderr
    failed, recovered = (json.loads(line) for line in result.stdout.splitlines())
    assert failed["error"].startswith(f"Could not save the memory file {memory}: File too large.")
    assert "Nothing was changed" in failed["error"]
    assert failed["graph"] == {"entities": [entity("Alice")], "relations": []}
    assert failed["files"] == ["memory.jsonl"]
    assert recovered == {"entities": [entity("Bob")]}
    assert GraphStore(memory).read_graph()["entities"] == [entity("Alice"), entity("Bob")]


# -- privacy -----------------------------------------------------------------------------------

PERMISSIVE = """
import os, sys
from pathlib import Path
from memory_server.storage.store import GraphStore
from memory_server.model.items import Entity
os.umask(0)
memory = Path(sys.argv[1])
memory.write_bytes(b"{not json\\n")
os.chmod(memory, 0o666)
GraphStore(memory).create_entities([Entity("Alice", "t", [])])
"""


def test_files_are_private_even_under_a_permissive_umask(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    result = run_python(PERMISSIVE, str(memory))
    assert result.returncode == 0, result.stderr
    assert mode(memory) == 0o600
    assert mode(tmp_path / "memory.jsonl.rejected") == 0o600
    assert (tmp_path / "memory.jsonl.rejected").read_bytes() == b"{not json\n"


# -- where the memory file lives ----------------------------------------------------------------


def no_log(line: str) -> None:
    raise AssertionError(f"unexpected log line: {line}")


def test_an_absolute_memory_file_path_is_used_as_is(tmp_path: Path) -> None:
    configured = str(tmp_path / "x" / ".." / "mine.jsonl")
    assert resolve_memory_path({"MEMORY_FILE_PATH": configured}, tmp_path / "server", no_log) == Path(configured)


def test_a_relative_memory_file_path_is_resolved_against_the_server_directory(tmp_path: Path) -> None:
    server = tmp_path / "server"
    assert resolve_memory_path({"MEMORY_FILE_PATH": "data/mine.jsonl"}, server, no_log) == server / "data/mine.jsonl"
    assert resolve_memory_path({"MEMORY_FILE_PATH": "../mine.jsonl"}, server, no_log) == tmp_path / "mine.jsonl"
    assert not server.exists()  # resolving creates nothing


def test_a_windows_style_path_follows_the_running_os(tmp_path: Path) -> None:
    configured = "C:\\Users\\me\\memory.jsonl"
    expected = Path(configured) if sys.platform == "win32" else tmp_path / configured
    assert resolve_memory_path({"MEMORY_FILE_PATH": configured}, tmp_path, no_log) == expected


def test_unset_or_empty_means_memory_jsonl_in_the_server_directory(tmp_path: Path) -> None:
    assert resolve_memory_path({}, tmp_path, no_log) == tmp_path / "memory.jsonl"
    assert resolve_memory_path({"MEMORY_FILE_PATH": ""}, tmp_path, no_log) == tmp_path / "memory.jsonl"


def test_a_legacy_memory_json_is_migrated_byte_for_byte(tmp_path: Path) -> None:
    content = b'{"type":"entity","name":"A","entityType":"t","observations":[]}\n\xff odd bytes kept'
    (tmp_path / "memory.json").write_bytes(content)
    logged: list[str] = []
    assert resolve_memory_path({}, tmp_path, logged.append) == tmp_path / "memory.jsonl"
    assert (tmp_path / "memory.jsonl").read_bytes() == content
    assert not (tmp_path / "memory.json").exists()
    assert logged == [MIGRATION_STARTED, MIGRATION_DONE]


def test_no_migration_when_both_files_exist_or_a_path_is_configured(tmp_path: Path) -> None:
    (tmp_path / "memory.json").write_bytes(b"old")
    assert resolve_memory_path({"MEMORY_FILE_PATH": "other.jsonl"}, tmp_path, no_log) == tmp_path / "other.jsonl"
    (tmp_path / "memory.jsonl").write_bytes(b"new")
    assert resolve_memory_path({}, tmp_path, no_log) == tmp_path / "memory.jsonl"
    assert (tmp_path / "memory.json").read_bytes() == b"old"
    assert (tmp_path / "memory.jsonl").read_bytes() == b"new"


MIGRATE = """
import os, sys
from pathlib import Path
from memory_server.storage.paths import resolve_memory_path
print(resolve_memory_path(os.environ, Path(sys.argv[1]), lambda line: print(line, file=sys.stderr, flush=True)))
"""


def test_the_migration_logs_the_references_two_lines_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "memory.json").write_bytes(b"{}")
    env_free = {key: value for key, value in os.environ.items() if key != "MEMORY_FILE_PATH"}
    result = subprocess.run([sys.executable, "-c", MIGRATE, str(tmp_path)], capture_output=True, text=True,
                            env={**env_free, "PYTHONPATH": str(REPO)}, timeout=WAIT, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "memory.jsonl")
    assert result.stderr.splitlines() == [
        "DETECTED: Found legacy memory.json file, migrating to memory.jsonl for JSONL format compatibility",
        "COMPLETED: Successfully migrated memory.json to memory.jsonl",
    ]
