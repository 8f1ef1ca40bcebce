"""Group commit: writes of one process that wait together are applied in order and saved once.

Real files, real threads, the file lock held by another real process (and, for the failing save,
a real file size limit in a child process); a real server process over HTTP with many clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import REPO, expect_line, python
from http_helpers import HttpServers, http_servers, modern_post  # noqa: F401  (a fixture)
from write_items import entity_items, relation_items

from memory_server.model import graph as rules
from memory_server.model import writes
from memory_server.model.items import ObservationsToAdd, ObservationsToDelete
from memory_server.model.records import EntityRecord, encode_file
from memory_server.retrieval.search import search_nodes
from memory_server.storage import files
from memory_server.storage.interface import Queued, Until
from memory_server.storage.store import MAX_BATCH, GraphError, GraphStore, LockTimeout, WriteAbandoned, WriteResult

WAIT = 60.0
"""Generous bound on any wait; a test that reaches it has failed."""

# Holds the memory file's lock, as another server in the middle of a write does. On "replace" it
# puts <file>.incoming in place of the memory file, as that server's save would; on "release" it lets go.
HOLDER = """
import os, sys
from pathlib import Path
from memory_server.storage.store import MemoryFileLock
memory = Path(sys.argv[1])
with MemoryFileLock(memory).held():
    print("held", flush=True)
    for line in sys.stdin:
        if line.strip() != "replace":
            break
        os.replace(memory.with_name(memory.name + ".incoming"), memory)
        print("replaced", flush=True)
print("released", flush=True)
"""


def entity(name: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": "t", "observations": list(observations)}


def relation(source: str, target: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": "knows"}


def creating(store: GraphStore, name: str) -> Callable[[], WriteResult]:
    return lambda: store.create_entities(entity_items([entity(name)]))


def file_records(memory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in memory.read_text().splitlines()]


class Writer:
    """One write in its own thread; `outcome` is its WriteResult or the exception it raised."""

    def __init__(self, write: Callable[[], WriteResult]) -> None:
        self.outcome: WriteResult | BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(write,), daemon=True)
        self.thread.start()

    def _run(self, write: Callable[[], WriteResult]) -> None:
        try:
            self.outcome = write()
        except BaseException as error:
            self.outcome = error

    def result(self) -> WriteResult:
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the write never finished"
        assert isinstance(self.outcome, WriteResult), f"expected a result, got {self.outcome!r}"
        return self.outcome

    def error(self) -> BaseException:
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the write never finished"
        assert isinstance(self.outcome, BaseException), f"expected an error, got {self.outcome!r}"
        return self.outcome


def queue_in_order(store: GraphStore, writes: list[Callable[[], WriteResult]]) -> list[Writer]:
    """Each write started once the one before it waits in the store's queue, so the queue holds them in order."""
    writers = []
    already = store.queued_writes
    for count, write in enumerate(writes, start=1):
        writers.append(Writer(write))
        assert store.wait_until(Queued(already + count), WAIT), "the write never joined the queue"
    return writers


class Holder:
    """Another real process holding the memory file's lock."""

    def __init__(self, memory: Path, children: list[subprocess.Popen[str]]) -> None:
        self.memory = memory
        self.process = python(HOLDER, str(memory))
        children.append(self.process)
        expect_line(self.process, "held")

    def _say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def replace_file(self, content: bytes) -> None:
        """Another writer's save, under the lock: a new file renamed over the memory file."""
        self.memory.with_name(self.memory.name + ".incoming").write_bytes(content)
        self._say("replace")
        expect_line(self.process, "replaced")

    def release(self) -> None:
        self._say("release")
        expect_line(self.process, "released")
        assert self.process.wait(WAIT) == 0


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    return tmp_path / "memory.jsonl"


@pytest.fixture
def held(memory: Path, children: list[subprocess.Popen[str]]) -> Iterator[Holder]:
    yield Holder(memory, children)


# -- many threads at once ------------------------------------------------------------------------------


def test_threads_writing_at_once_each_land_exactly_once_with_their_own_results(memory: Path) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    store.create_entities(entity_items([entity("hub")]))
    workers = 32
    results: dict[int, list[WriteResult]] = {}
    start = threading.Barrier(workers)

    def work(worker: int) -> None:
        start.wait(WAIT)
        results[worker] = [
            store.create_entities(entity_items([entity(f"w{worker}", "born")])),
            store.add_observations([ObservationsToAdd("hub", [f"seen by {worker}"])]),
            store.add_observations([ObservationsToAdd(f"w{worker}", ["born", f"grew {worker}"])]),
            store.create_relations(relation_items([relation(f"w{worker}", "hub")])),
        ]

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    for worker in range(workers):
        assert [result.value for result in results[worker]] == [
            {"entities": [entity(f"w{worker}", "born")]},
            {"results": [{"entityName": "hub", "addedObservations": [f"seen by {worker}"]}]},
            {"results": [{"entityName": f"w{worker}", "addedObservations": [f"grew {worker}"]}]},
            {"relations": [relation(f"w{worker}", "hub")]},
        ]
        assert all(result.changed and result.notes == [] for result in results[worker])
    records = file_records(memory)
    names = [record["name"] for record in records if record["type"] == "entity"]
    assert sorted(names) == sorted(["hub", *(f"w{worker}" for worker in range(workers))])  # each once
    by_name = {record["name"]: record for record in records if record["type"] == "entity"}
    assert sorted(by_name["hub"]["observations"]) == sorted(f"seen by {worker}" for worker in range(workers))
    assert all(by_name[f"w{worker}"]["observations"] == ["born", f"grew {worker}"] for worker in range(workers))
    assert len([record for record in records if record["type"] == "relation"]) == workers
    assert GraphStore(memory).read_graph() == store.read_graph()
    assert store.saves <= 1 + workers * 4


# -- writes queued while another process holds the lock --------------------------------------------------


def test_writes_queued_behind_another_process_land_in_one_save_in_the_order_they_came(
        memory: Path, children: list[subprocess.Popen[str]]) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    store.create_entities(entity_items([entity("hub")]))
    saves = store.saves
    holder = Holder(memory, children)
    # Each write needs the ones before it: on the file as it is, only the first could succeed.
    writers = queue_in_order(store, [
        lambda: store.create_entities(entity_items([entity("X")])),
        lambda: store.add_observations([ObservationsToAdd("X", ["first"])]),
        lambda: store.create_entities(entity_items([entity("Y")])),
        lambda: store.create_relations(relation_items([relation("X", "Y")])),
        lambda: store.create_entities(entity_items([entity("X", "again")])),
        lambda: store.delete_entities(["hub"]),
    ])
    assert memory.read_bytes() == encode_file([EntityRecord("hub", "t", [])])  # nothing landed while held
    holder.release()
    results = [writer.result() for writer in writers]
    assert [result.value for result in results] == [
        {"entities": [entity("X")]},
        {"results": [{"entityName": "X", "addedObservations": ["first"]}]},
        {"entities": [entity("Y")]},
        {"relations": [relation("X", "Y")]},
        {"entities": [], "skipped": ["X"]},
        {"success": True, "message": "Deleted 1 entity.", "notFound": []},
    ]
    assert [result.changed for result in results] == [True, True, True, True, False, True]
    assert store.saves == saves + 1
    assert store.queued_writes == 0
    assert file_records(memory) == [
        {"type": "entity", **entity("X", "first")}, {"type": "entity", **entity("Y")},
        {"type": "relation", **relation("X", "Y")}]


def test_a_broken_rule_in_the_middle_of_a_batch_fails_only_that_write(memory: Path, held: Holder) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    writers = queue_in_order(store, [
        lambda: store.create_entities(entity_items([entity("A")])),
        lambda: store.create_relations(relation_items([relation("A", "Missing")])),
        lambda: store.add_observations([ObservationsToAdd("A", ["kept"])]),
        lambda: store.add_observations([ObservationsToAdd("Nobody", ["lost"])]),
    ])
    held.release()
    first, broken, third, missing = writers
    assert first.result().value == {"entities": [entity("A")]}
    error = broken.error()
    assert isinstance(error, GraphError) and str(error).startswith("Entity with name Missing not found")
    assert third.result().value == {"results": [{"entityName": "A", "addedObservations": ["kept"]}]}
    assert str(missing.error()).startswith("Entity with name Nobody not found")
    assert store.saves == 1
    assert file_records(memory) == [{"type": "entity", **entity("A", "kept")}]


def test_an_unexpected_failure_of_one_write_fails_only_that_write(memory: Path, held: Holder) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)

    def broken(graph: rules.Graph) -> rules.Change:
        raise RuntimeError("a fault in an operation")

    first, failing, third = queue_in_order(store, [
        lambda: store.create_entities(entity_items([entity("A")])),
        lambda: store.write(broken),
        lambda: store.create_entities(entity_items([entity("B")])),
    ])
    held.release()
    assert first.result().changed and third.result().changed
    error = failing.error()
    assert isinstance(error, RuntimeError) and str(error) == "a fault in an operation"
    assert [record["name"] for record in file_records(memory)] == ["A", "B"]
    assert store.saves == 1


def test_a_batch_that_changes_nothing_saves_nothing(memory: Path, children: list[subprocess.Popen[str]]) -> None:
    GraphStore(memory).create_entities(entity_items([entity("A", "known")]))
    held = Holder(memory, children)
    before, stat_before = memory.read_bytes(), os.stat(memory)
    store = GraphStore(memory, lock_timeout=WAIT)
    writers = queue_in_order(store, [
        lambda: store.create_entities(entity_items([entity("A")])),
        lambda: store.add_observations([ObservationsToAdd("A", ["known"])]),
        lambda: store.delete_entities(["B"]),
        lambda: store.delete_relations(relation_items([relation("A", "A")])),
    ])
    held.release()
    assert [writer.result().changed for writer in writers] == [False] * 4
    assert store.saves == 0
    assert memory.read_bytes() == before
    after = os.stat(memory)
    assert (after.st_ino, after.st_mtime_ns) == (stat_before.st_ino, stat_before.st_mtime_ns)


def test_unreadable_lines_move_once_and_the_first_write_that_changed_the_graph_says_so(
        memory: Path, held: Holder) -> None:
    memory.write_bytes(encode_file([EntityRecord("A", "t", [])]) + b"\n{half a line\n")
    store = GraphStore(memory, lock_timeout=WAIT)
    writers = queue_in_order(store, [
        lambda: store.create_entities(entity_items([entity("A")])),  # changes nothing
        lambda: store.create_entities(entity_items([entity("B")])),
        lambda: store.create_entities(entity_items([entity("C")])),
    ])
    held.release()
    notes = [writer.result().notes for writer in writers]
    side_file = memory.with_name("memory.jsonl.rejected")
    assert notes == [[], [f"1 unreadable line was moved from the memory file to {side_file}."], []]
    assert side_file.read_bytes() == b"{half a line\n"
    assert [record["name"] for record in file_records(memory)] == ["A", "B", "C"]
    assert store.saves == 1


def test_a_batch_that_started_from_an_outdated_file_is_done_again_on_the_file_as_it_is(
        memory: Path, children: list[subprocess.Popen[str]]) -> None:
    GraphStore(memory).create_entities(entity_items([entity("Alice")]))
    held = Holder(memory, children)
    store = GraphStore(memory, lock_timeout=WAIT)
    assert store.read_graph()["entities"] == [entity("Alice")]  # the graph the writes will start from
    writers = queue_in_order(store, [
        lambda: store.add_observations([ObservationsToAdd("Other", ["seen"])]),
        lambda: store.create_entities(entity_items([entity("Other"), entity("Bob")])),
        lambda: store.delete_entities(["Alice"]),
    ])
    # Another server's save lands under the lock it holds: Alice renamed, Other created.
    held.replace_file(encode_file([EntityRecord("Alina", "t", []), EntityRecord("Other", "t", [])]))
    held.release()
    observed, created, deleted = (writer.result() for writer in writers)
    assert observed.value == {"results": [{"entityName": "Other", "addedObservations": ["seen"]}]}
    assert created.value == {"entities": [entity("Bob")], "skipped": ["Other"]}
    assert deleted.value == {"success": True, "message": "Deleted 0 entities. Not found: Alice.",
                             "notFound": ["Alice"]}
    assert not deleted.changed
    assert store.saves == 1
    assert [(record["name"], record["observations"]) for record in file_records(memory)] == [
        ("Alina", []), ("Other", ["seen"]), ("Bob", [])]


def test_more_writes_than_a_batch_takes_are_saved_in_as_many_batches_as_needed(memory: Path, held: Holder) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    count = MAX_BATCH + 4
    writers = [Writer(creating(store, f"e{n:03d}")) for n in range(count)]
    assert store.wait_until(Queued(count), WAIT)
    held.release()
    assert all(writer.result().changed for writer in writers)
    assert store.saves == 2
    assert sorted(record["name"] for record in file_records(memory)) == [f"e{n:03d}" for n in range(count)]


def test_a_batch_leaves_the_search_indexes_as_a_fresh_load_would_make_them(memory: Path,
                                                                          children: list[subprocess.Popen[str]]) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    store.create_entities(entity_items([entity("Alice", "drinks tea"), entity("Bob", "plays chess"),
                                        entity("Carol", "likes tea")]))
    queries = ["tea", "chess", "jam", "Dora", "tea chess jam", "likes jam tea"]
    search_nodes(store, "tea chess")  # a search by words: both indexes are made
    assert store.poll_external_change() is False
    assert store.wait_until(Until.RANKED, WAIT)
    holder = Holder(memory, children)
    writers = queue_in_order(store, [
        lambda: store.add_observations([ObservationsToAdd("Bob", ["likes jam"])]),
        lambda: store.create_entities(entity_items([entity("Dora", "drinks tea with jam")])),
        lambda: store.delete_observations([ObservationsToDelete("Alice", ["drinks tea"])]),
        lambda: store.delete_entities(["Carol"]),
    ])
    holder.release()
    assert all(writer.result().changed for writer in writers)
    assert store.saves == 2
    graph = store.graph_in_memory
    assert graph is not None and graph.words is not None and graph.terms is not None  # kept up to date, not dropped
    fresh = GraphStore(memory)
    assert [search_nodes(store, query) for query in queries] == [search_nodes(fresh, query) for query in queries]
    assert [e["name"] for e in search_nodes(store, "jam")["entities"]] == ["Bob", "Dora"]


def test_an_index_made_while_a_batch_is_worked_out_is_carried_to_the_new_graph(memory: Path) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    store.create_entities(entity_items([entity("Alice", "drinks tea")]))
    assert store.graph_in_memory is not None and store.graph_in_memory.words is None  # no search or poll yet

    def index_meanwhile(graph: rules.Graph) -> rules.Change:
        store.poll_external_change()  # the poller makes the word index of the graph this write started from
        assert store.graph_in_memory is not None and store.graph_in_memory.words is not None
        return writes.create_entities(graph, entity_items([entity("Bob", "plays chess")]))

    assert store.write(index_meanwhile).changed
    graph = store.graph_in_memory
    assert graph is not None
    assert graph.words is not None  # not dropped by the save
    assert [e["name"] for e in search_nodes(store, "chess")["entities"]] == ["Bob"]
    assert [e["name"] for e in search_nodes(store, "tea")["entities"]] == ["Alice"]


def test_pieces_beyond_one_writev_and_empty_ones_are_all_written_in_order(tmp_path: Path) -> None:
    pieces = [f"piece {n}\n".encode() * (n % 7) for n in range(3 * files._IOV_MAX + 5)]  # every 7th is empty
    target = tmp_path / "pieces"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        files.write_pieces(fd, pieces)
    finally:
        os.close(fd)
    assert target.read_bytes() == b"".join(pieces)


# -- giving up while queued ------------------------------------------------------------------------------


def test_a_write_abandoned_while_queued_leaves_the_queue_and_the_others_land(memory: Path, held: Holder) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    gives_up = threading.Event()
    first, abandoned, third = queue_in_order(store, [
        lambda: store.create_entities(entity_items([entity("A")])),
        lambda: store.create_entities(entity_items([entity("B")]), abandon=gives_up),
        lambda: store.create_entities(entity_items([entity("C")])),
    ])
    gives_up.set()
    error = abandoned.error()  # at once, while the lock is still held
    assert isinstance(error, WriteAbandoned) and "Nothing was changed" in str(error)
    assert store.queued_writes == 2
    held.release()
    assert first.result().changed and third.result().changed
    assert [record["name"] for record in file_records(memory)] == ["A", "C"]
    assert store.saves == 1


def test_when_the_write_waiting_for_the_lock_is_abandoned_another_takes_its_turn(
        memory: Path, held: Holder) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    leader_gives_up = threading.Event()
    leader, second, third = queue_in_order(store, [
        lambda: store.create_entities(entity_items([entity("A")]), abandon=leader_gives_up),
        lambda: store.create_entities(entity_items([entity("B")])),
        lambda: store.create_entities(entity_items([entity("C")])),
    ])
    leader_gives_up.set()
    assert isinstance(leader.error(), WriteAbandoned)
    assert store.wait_until(Queued(2), WAIT)
    held.release()
    assert second.result().changed and third.result().changed
    assert [record["name"] for record in file_records(memory)] == ["B", "C"]
    assert store.saves == 1


def test_a_write_taken_into_a_batch_completes_even_if_abandoned_then(memory: Path, held: Holder) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    too_late = threading.Event()

    def create_and_abandon_the_next(graph: rules.Graph) -> rules.Change:
        too_late.set()  # the next write is in this batch already
        return writes.create_entities(graph, entity_items([entity("A")]))

    first, second = queue_in_order(store, [
        lambda: store.write(create_and_abandon_the_next),
        lambda: store.create_entities(entity_items([entity("B")]), abandon=too_late),
    ])
    held.release()
    assert first.result().changed and second.result().changed
    assert too_late.is_set()
    assert [record["name"] for record in file_records(memory)] == ["A", "B"]


def test_each_queued_write_gives_up_on_the_lock_after_its_own_timeout(memory: Path, held: Holder) -> None:
    store = GraphStore(memory, lock_timeout=0.5)
    writers = queue_in_order(store, [creating(store, name) for name in "ABC"])
    errors = [writer.error() for writer in writers]  # all while the lock is still held
    assert all(isinstance(error, LockTimeout) and "locked by another process" in str(error) for error in errors)
    assert store.queued_writes == 0
    held.release()
    assert not memory.exists()
    assert GraphStore(memory, lock_timeout=WAIT).create_entities(entity_items([entity("D")])).changed


# -- a failing save ------------------------------------------------------------------------------------

# Queues three writes behind this process's own hold of the lock, one of them too large for the file
# size limit (EFBIG, as ENOSPC on a full disk), then releases: the one save fails for all three.
FAILING_SAVE = """
import json, os, resource, signal, sys, threading
from pathlib import Path
from memory_server.storage.interface import Queued
from memory_server.storage.store import MAX_BATCH, GraphError, GraphStore, MemoryFileLock
from memory_server.model.items import Entity, ObservationsToAdd
memory = Path(sys.argv[1])
store = GraphStore(memory, lock_timeout=60)
store.create_entities([Entity("Alice", "t", [])])
before = memory.read_bytes()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
outcomes = {}
def write(name, call):
    try:
        outcomes[name] = call().value
    except GraphError as error:
        outcomes[name] = str(error)
writes = {
    "small": lambda: store.create_entities([Entity("Bob", "t", [])]),
    "big": lambda: store.add_observations([ObservationsToAdd("Alice", ["x" * 100000])]),
    "broken": lambda: store.add_observations([ObservationsToAdd("Nobody", ["y"])]),
}
threads = []
with MemoryFileLock(memory).held():
    for count, (name, call) in enumerate(writes.items(), start=1):
        threads.append(threading.Thread(target=write, args=(name, call)))
        threads[-1].start()
        assert store.wait_until(Queued(count), 60)
for thread in threads:
    thread.join(60)
print(json.dumps({"outcomes": outcomes, "saves": store.saves, "unchanged": memory.read_bytes() == before,
                  "files": sorted(os.listdir(memory.parent)), "graph": store.read_graph()}))
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
print(json.dumps(store.create_entities([Entity("Bob", "t", [])]).value))
"""


def test_a_failing_save_fails_every_write_of_its_batch_and_changes_nothing(memory: Path) -> None:
    process = subprocess.run([sys.executable, "-c", FAILING_SAVE, str(memory)], capture_output=True, text=True,
                             timeout=WAIT, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert process.returncode == 0, process.stderr
    failed, recovered = (json.loads(line) for line in process.stdout.splitlines())
    for name in ("small", "big", "broken"):
        assert failed["outcomes"][name].startswith(f"Could not save the memory file {memory}: File too large. "
                                                   "Nothing was changed."), name
    assert failed["saves"] == 1  # the first write, before the limit
    assert failed["unchanged"] is True
    assert failed["files"] == ["memory.jsonl"]
    assert failed["graph"] == {"entities": [entity("Alice")], "relations": []}
    assert recovered == {"entities": [entity("Bob")]}
    assert GraphStore(memory).read_graph()["entities"] == [entity("Alice"), entity("Bob")]


# -- a real server process: many HTTP clients while another process holds the lock -----------------------


def test_http_clients_writing_while_the_lock_is_held_elsewhere_each_get_their_own_answer(
        http_servers: HttpServers, memory: Path, children: list[subprocess.Popen[str]]) -> None:
    GraphStore(memory).create_entities(entity_items([entity("hub")]))
    server = http_servers.memory(memory)
    holder = Holder(memory, children)
    clients = 24
    answers: dict[int, list[dict[str, Any]]] = {}

    def client(number: int) -> None:
        with httpx.Client(timeout=WAIT) as http:
            calls = [
                ("create_entities", {"entities": [entity(f"c{number}")]}),
                ("add_observations", {"observations": [{"entityName": "hub", "contents": [f"from {number}"]}]}),
            ]
            if number % 6 == 0:  # a broken rule among the waiting writes
                calls.append(("create_relations", {"relations": [relation(f"c{number}", "nobody")]}))
            answers[number] = []
            for request_id, (tool, arguments) in enumerate(calls):
                response = modern_post(http, server.url, request_id, "tools/call",
                                       {"name": tool, "arguments": arguments})
                assert response.status_code == 200
                answers[number].append(response.json()["result"])

    threads = [threading.Thread(target=client, args=(number,), daemon=True) for number in range(clients)]
    for thread in threads:
        thread.start()
    with httpx.Client(timeout=WAIT) as http:  # reads are answered while the writes wait for the lock
        opened = modern_post(http, server.url, "read", "tools/call", {"name": "open_nodes", "arguments": {"names": ["hub"]}})
        assert opened.json()["result"]["structuredContent"]["entities"] == [entity("hub")]
    holder.release()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    for number in range(clients):
        created, observed, *rest = answers[number]
        assert created["structuredContent"] == {"entities": [entity(f"c{number}")]}
        assert observed["structuredContent"] == {"results": [{"entityName": "hub",
                                                              "addedObservations": [f"from {number}"]}]}
        if number % 6 == 0:
            assert rest[0]["isError"] is True
            assert rest[0]["content"][0]["text"].startswith("Entity with name nobody not found")
        else:
            assert rest == []
    records = file_records(memory)
    assert sorted(record["name"] for record in records) == sorted(["hub", *(f"c{n}" for n in range(clients))])
    hub = next(record for record in records if record["name"] == "hub")
    assert sorted(hub["observations"]) == sorted(f"from {n}" for n in range(clients))
