"""The store inside one process: the file it writes and reads, what it keeps that it cannot use,
reloading after other writers, bad files and bad input, and many threads at once."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from write_items import entity_items, relation_items

from memory_server.model import indexes
from memory_server.model.items import ObservationsToAdd, ObservationsToDelete
from memory_server.retrieval.search import search_nodes
from memory_server.storage.store import GraphError, GraphStore, LockTimeout, MemoryFileLock, WriteAbandoned, WriteResult

WAIT = 30.0
"""Generous bound on any wait in these tests; reaching it means the test failed."""

ALICE_LINE = b'{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea"]}'
BOB_LINE = b'{"type":"entity","name":"Bob","entityType":"person","observations":[]}'
KNOWS_LINE = b'{"type":"relation","from":"Alice","to":"Bob","relationType":"knows"}'


def entity(name: str, entity_type: str = "person", *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": entity_type, "observations": list(observations)}


def relation(source: str, target: str, relation_type: str = "knows") -> dict[str, str]:
    return {"from": source, "to": target, "relationType": relation_type}


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    return tmp_path / "memory.jsonl"


@pytest.fixture
def store(memory: Path) -> GraphStore:
    return GraphStore(memory, lock_timeout=WAIT)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def run_in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(target())
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


# -- the file ----------------------------------------------------------------------------------


def test_a_missing_file_is_an_empty_graph_and_reading_creates_nothing(tmp_path: Path) -> None:
    memory = tmp_path / "not" / "yet" / "memory.jsonl"
    store = GraphStore(memory)
    assert store.read_graph() == {"entities": [], "relations": []}
    assert search_nodes(store, "") == {"entities": [], "relations": []}
    assert store.open_nodes(["x"]) == {"entities": [], "relations": []}
    assert not (tmp_path / "not").exists()


def test_the_first_write_creates_missing_directories_and_a_private_file(tmp_path: Path) -> None:
    memory = tmp_path / "a" / "b" / "memory.jsonl"
    store = GraphStore(memory)
    store.create_entities(entity_items([entity("Alice", "person", "likes tea")]))
    assert memory.read_bytes() == ALICE_LINE + b"\n"
    assert mode(memory) == 0o600
    assert mode(memory.parent) == 0o700


def test_the_file_holds_entities_then_relations_in_the_reference_format(store: GraphStore, memory: Path) -> None:
    store.create_entities(entity_items([entity("Alice", "person", "likes tea")]))
    store.create_relations(relation_items([relation("Alice", "Alice", "is")]))
    store.create_entities(entity_items([entity("Bob")]))
    store.create_relations(relation_items([relation("Alice", "Bob")]))
    assert memory.read_bytes().splitlines() == [
        ALICE_LINE, BOB_LINE,
        b'{"type":"relation","from":"Alice","to":"Alice","relationType":"is"}', KNOWS_LINE]


def test_a_file_the_reference_wrote_is_read_as_is(memory: Path) -> None:
    memory.write_bytes(ALICE_LINE + b"\n" + BOB_LINE + b"\n" + KNOWS_LINE)  # the reference ends without a newline
    store = GraphStore(memory)
    assert store.read_graph() == {"entities": [entity("Alice", "person", "likes tea"), entity("Bob")],
                                  "relations": [relation("Alice", "Bob")]}


def test_crlf_lines_are_read_and_written_back_with_lf(memory: Path) -> None:
    memory.write_bytes(ALICE_LINE + b"\r\n" + BOB_LINE + b"\r\n")
    store = GraphStore(memory)
    assert [e["name"] for e in store.read_graph()["entities"]] == ["Alice", "Bob"]
    store.create_relations(relation_items([relation("Alice", "Bob")]))
    assert memory.read_bytes() == ALICE_LINE + b"\n" + BOB_LINE + b"\n" + KNOWS_LINE + b"\n"


def test_unknown_records_extra_fields_and_mistyped_records_survive_rewrites(memory: Path) -> None:
    note = b'{"type":"note","text":"written by a newer version"}'
    mistyped = b'{"type":"entity","name":["A"],"entityType":"t","observations":[]}'
    memory.write_bytes(note + b"\n" + b'{"type":"entity","name":"Alice","entityType":"person",'
                       b'"observations":["likes tea"],"color":"red"}\n' + mistyped + b"\n")
    store = GraphStore(memory)
    assert store.read_graph() == {"entities": [entity("Alice", "person", "likes tea")], "relations": []}
    store.add_observations([ObservationsToAdd("Alice", ["sings"])])
    store.create_entities(entity_items([entity("Bob")]))
    assert memory.read_bytes().splitlines() == [
        b'{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea","sings"],"color":"red"}',
        BOB_LINE, note, mistyped]


def test_a_write_that_changes_nothing_leaves_the_file_alone(store: GraphStore, memory: Path) -> None:
    store.create_entities(entity_items([entity("Alice")]))
    before = os.stat(memory)
    outcomes = [
        store.create_entities(entity_items([entity("Alice")])),
        store.add_observations([ObservationsToAdd("Alice", [])]),
        store.delete_entities(["nobody"]),
        store.delete_observations([ObservationsToDelete("Alice", ["nope"])]),
        store.delete_relations(relation_items([relation("Alice", "Alice")])),
        store.create_relations([]),
    ]
    assert [outcome.changed for outcome in outcomes] == [False] * 6
    after = os.stat(memory)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_write_results_are_the_tool_values(store: GraphStore) -> None:
    assert store.create_entities(entity_items([entity("Alice"), entity("Alice", "robot")])) == WriteResult(
        {"entities": [entity("Alice")], "skipped": ["Alice"]}, True, [])
    assert store.delete_entities(["Alice", "Zed"]) == WriteResult(
        {"success": True, "message": "Deleted 1 entity. Not found: Zed.", "notFound": ["Zed"]}, True, [])


def test_the_lock_file_exists_only_during_a_write(store: GraphStore, memory: Path) -> None:
    store.create_entities(entity_items([entity("Alice")]))
    store.delete_entities(["Alice"])
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]


# -- unreadable lines --------------------------------------------------------------------------


def test_unreadable_lines_move_to_the_side_file_on_the_next_write(memory: Path, caplog: pytest.LogCaptureFixture) -> None:
    memory.write_bytes(ALICE_LINE + b"\n{not json\n" + b"\xff\xfe broken \r\n" + BOB_LINE)
    store = GraphStore(memory)
    assert [e["name"] for e in store.read_graph()["entities"]] == ["Alice", "Bob"]
    logged = caplog.text
    assert "2 lines are not valid JSON (line 2, 3)" in logged and "memory.jsonl.rejected" in logged
    side_file = memory.with_name("memory.jsonl.rejected")
    assert not side_file.exists()

    outcome = store.create_entities(entity_items([entity("Carol")]))
    assert outcome.notes == [f"2 unreadable lines were moved from the memory file to {side_file}."]
    assert side_file.read_bytes() == b"{not json\n\xff\xfe broken \r\n"
    assert mode(side_file) == 0o600
    assert memory.read_bytes().splitlines() == [ALICE_LINE, BOB_LINE, BOB_LINE.replace(b"Bob", b"Carol")]
    assert store.create_entities(entity_items([entity("Dan")])).notes == []


def test_the_side_file_is_appended_to(memory: Path) -> None:
    side_file = memory.with_name("memory.jsonl.rejected")
    side_file.write_bytes(b"earlier\n")
    os.chmod(side_file, 0o644)
    memory.write_bytes(b"{later\n")
    store = GraphStore(memory)
    assert store.create_entities(entity_items([entity("A")])).notes
    assert side_file.read_bytes() == b"earlier\n{later\n"
    assert mode(side_file) == 0o600


def test_a_write_that_changes_nothing_does_not_move_unreadable_lines(memory: Path) -> None:
    memory.write_bytes(ALICE_LINE + b"\n{oops\n")
    store = GraphStore(memory)
    assert store.create_entities(entity_items([entity("Alice")])).changed is False
    assert memory.read_bytes() == ALICE_LINE + b"\n{oops\n"
    assert not memory.with_name("memory.jsonl.rejected").exists()


def test_repeated_names_in_a_hand_edited_file_are_logged_and_kept(memory: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    repeat = b'{"type":"entity","name":"Alice","entityType":"robot","observations":["beeps"]}'
    memory.write_bytes(ALICE_LINE + b"\n" + repeat + b"\n")
    store = GraphStore(memory)
    assert store.read_graph()["entities"] == [entity("Alice", "person", "likes tea")]
    assert "1 line repeats an entity name or relation defined earlier" in caplog.text
    store.create_entities(entity_items([entity("Bob")]))
    assert memory.read_bytes().splitlines() == [ALICE_LINE, BOB_LINE, repeat]
    store.delete_entities(["Alice"])
    assert memory.read_bytes().splitlines() == [BOB_LINE]


# -- other writers -----------------------------------------------------------------------------


def open_descriptors() -> int:
    return len(os.listdir("/dev/fd"))


def test_the_replaced_files_are_all_let_go(store: GraphStore, memory: Path) -> None:
    # Each save keeps the file it replaces open for a moment, so that its blocks are freed
    # after the answer; none of them may stay open.
    store.create_entities(entity_items([entity("Alice")]))
    before = open_descriptors()
    for number in range(30):
        store.add_observations([ObservationsToAdd("Alice", [f"note {number}"])])
    deadline = time.monotonic() + WAIT
    while open_descriptors() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert open_descriptors() == before
    assert len(store.read_graph()["entities"][0]["observations"]) == 30


def test_a_write_by_another_store_is_seen_and_reported_once(memory: Path) -> None:
    mine, theirs = GraphStore(memory), GraphStore(memory)
    mine.create_entities(entity_items([entity("Alice")]))
    assert mine.poll_external_change() is False
    theirs.create_entities(entity_items([entity("Bob")]))
    assert mine.poll_external_change() is True
    assert mine.poll_external_change() is False
    assert [e["name"] for e in mine.read_graph()["entities"]] == ["Alice", "Bob"]


def test_a_change_noticed_by_a_read_is_still_reported_by_the_next_poll(memory: Path) -> None:
    mine, theirs = GraphStore(memory), GraphStore(memory)
    assert mine.poll_external_change() is False
    theirs.create_entities(entity_items([entity("Bob")]))
    assert mine.open_nodes(["Bob"])["entities"] == [entity("Bob")]
    assert mine.poll_external_change() is True


def test_a_write_starts_from_what_another_store_saved(memory: Path) -> None:
    mine, theirs = GraphStore(memory), GraphStore(memory)
    mine.create_entities(entity_items([entity("Alice")]))
    theirs.create_entities(entity_items([entity("Bob")]))
    assert mine.create_relations(relation_items([relation("Alice", "Bob")])).changed
    assert [e["name"] for e in theirs.read_graph()["entities"]] == ["Alice", "Bob"]
    assert theirs.read_graph()["relations"] == [relation("Alice", "Bob")]


def test_an_edit_in_place_is_noticed(memory: Path) -> None:
    store = GraphStore(memory)
    store.create_entities(entity_items([entity("Alice", "person", "likes tea")]))
    with open(memory, "ab") as file:  # same inode, as an editor appending by hand would
        file.write(BOB_LINE + b"\n")
    assert store.poll_external_change() is True
    assert [e["name"] for e in store.read_graph()["entities"]] == ["Alice", "Bob"]


def test_a_deleted_file_reads_as_an_empty_graph(store: GraphStore, memory: Path) -> None:
    store.create_entities(entity_items([entity("Alice")]))
    memory.unlink()
    assert store.poll_external_change() is True
    assert store.read_graph() == {"entities": [], "relations": []}


def test_a_symlinked_memory_file_stays_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "real" / "memory.jsonl"
    target.parent.mkdir()
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    store = GraphStore(link)
    store.create_entities(entity_items([entity("Alice", "person", "likes tea")]))
    assert link.is_symlink()
    assert target.read_bytes() == ALICE_LINE + b"\n"
    assert store.path == link


def test_a_temporary_file_left_by_a_killed_writer_is_removed_by_the_next_write(store: GraphStore,
                                                                               memory: Path) -> None:
    stray = memory.with_name("memory.jsonl." + "ab" * 16 + ".tmp")
    unrelated = memory.with_name("memory.jsonl.notes.tmp")
    stray.write_bytes(b"half a file")
    unrelated.write_bytes(b"someone else's")
    store.create_entities(entity_items([entity("Alice")]))
    assert not stray.exists()
    assert unrelated.read_bytes() == b"someone else's"


# -- bad files and bad input -------------------------------------------------------------------


def test_a_memory_path_that_is_a_directory_gives_clear_errors_until_fixed(memory: Path) -> None:
    memory.mkdir()
    store = GraphStore(memory)
    with pytest.raises(GraphError, match="Cannot read the memory file .*memory.jsonl"):
        store.read_graph()
    with pytest.raises(GraphError, match="Cannot read the memory file"):
        store.create_entities(entity_items([entity("Alice")]))
    assert store.poll_external_change() is False
    memory.rmdir()
    assert store.create_entities(entity_items([entity("Alice")])).changed
    assert store.read_graph()["entities"] == [entity("Alice")]


def test_a_directory_that_cannot_be_created_gives_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"not a directory")
    store = GraphStore(blocker / "memory.jsonl")
    with pytest.raises(GraphError, match="Cannot create the directory"):
        store.create_entities(entity_items([entity("Alice")]))
    assert blocker.read_bytes() == b"not a directory"


def test_an_unpaired_surrogate_is_refused_and_nothing_changes(store: GraphStore, memory: Path) -> None:
    store.create_entities(entity_items([entity("Alice")]))
    before = memory.read_bytes()
    with pytest.raises(GraphError, match="unpaired surrogate"):
        store.create_entities(entity_items([entity("\ud800")]))
    with pytest.raises(GraphError, match="unpaired surrogate"):
        store.add_observations([ObservationsToAdd("Alice", ["\udfff"])])
    assert memory.read_bytes() == before
    assert store.read_graph()["entities"] == [entity("Alice")]
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]


def test_an_unpaired_surrogate_is_refused_before_unreadable_lines_move(memory: Path) -> None:
    memory.write_bytes(ALICE_LINE + b"\n{oops\n" + BOB_LINE + b"\n")
    store = GraphStore(memory, lock_timeout=WAIT)
    with pytest.raises(GraphError, match="relation type '\\\\ud800' contains an unpaired surrogate"):
        store.create_relations(relation_items([relation("Alice", "Bob", "\ud800")]))
    assert memory.read_bytes() == ALICE_LINE + b"\n{oops\n" + BOB_LINE + b"\n"
    assert sorted(path.name for path in memory.parent.iterdir()) == ["memory.jsonl"]
    assert store.create_relations(relation_items([relation("Alice", "Bob")])).changed
    assert memory.read_bytes().splitlines() == [ALICE_LINE, BOB_LINE, KNOWS_LINE]
    assert memory.with_name("memory.jsonl.rejected").read_bytes() == b"{oops\n"


def test_a_rule_violation_changes_nothing(store: GraphStore, memory: Path) -> None:
    store.create_entities(entity_items([entity("Alice")]))
    before = memory.read_bytes()
    with pytest.raises(GraphError, match="Entity with name Bob not found"):
        store.create_relations(relation_items([relation("Alice", "Bob")]))
    with pytest.raises(GraphError, match="Entity with name Bob not found"):
        store.add_observations([ObservationsToAdd("Alice", ["x"]), ObservationsToAdd("Bob", [])])
    assert memory.read_bytes() == before
    assert store.read_graph() == {"entities": [entity("Alice")], "relations": []}


# -- the lock, inside one process --------------------------------------------------------------


def test_a_held_lock_makes_a_write_time_out_without_changing_anything(memory: Path) -> None:
    GraphStore(memory).create_entities(entity_items([entity("Alice")]))
    before = memory.read_bytes()
    store = GraphStore(memory, lock_timeout=0.2)
    with MemoryFileLock(memory).held():
        with pytest.raises(LockTimeout) as raised:
            store.create_entities(entity_items([entity("Bob")]))
    message = str(raised.value)
    assert "locked by another process" in message
    assert f"{memory}.lock" in message
    assert "Nothing was changed" in message
    assert isinstance(raised.value, GraphError)
    assert memory.read_bytes() == before
    assert store.create_entities(entity_items([entity("Bob")])).changed


def test_reads_go_on_while_a_write_waits_for_the_lock(memory: Path) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    store.create_entities(entity_items([entity("Alice")]))
    with MemoryFileLock(memory).held():
        writer, outcome = run_in_thread(lambda: store.create_entities(entity_items([entity("Bob")])))
        assert store.read_graph() == {"entities": [entity("Alice")], "relations": []}
        assert search_nodes(store, "ali")["entities"] == [entity("Alice")]
        assert store.poll_external_change() is False
        assert writer.is_alive() and outcome == []
    writer.join(WAIT)
    assert outcome and isinstance(outcome[0], WriteResult) and outcome[0].changed
    assert [e["name"] for e in store.read_graph()["entities"]] == ["Alice", "Bob"]


def test_a_write_waiting_for_the_lock_is_abandoned_at_once_when_asked(memory: Path) -> None:
    GraphStore(memory).create_entities(entity_items([entity("Alice")]))
    before = memory.read_bytes()
    store = GraphStore(memory, lock_timeout=WAIT)
    abandon = threading.Event()
    with MemoryFileLock(memory).held():
        writer, outcome = run_in_thread(lambda: store.create_entities(entity_items([entity("Bob")]), abandon=abandon))
        assert writer.is_alive() and outcome == []
        abandon.set()
        writer.join(WAIT)
        assert not writer.is_alive()
    assert isinstance(outcome[0], WriteAbandoned) and "Nothing was changed" in str(outcome[0])
    assert memory.read_bytes() == before
    # A second write of the same store waiting for its turn inside the process is abandoned too.
    with MemoryFileLock(memory).held():
        first, _ = run_in_thread(lambda: store.create_entities(entity_items([entity("Carol")]), abandon=threading.Event()))
        later = threading.Event()
        second, second_outcome = run_in_thread(lambda: store.create_entities(entity_items([entity("Dan")]), abandon=later))
        later.set()
        second.join(WAIT)
        assert isinstance(second_outcome[0], WriteAbandoned)
    first.join(WAIT)
    assert [e["name"] for e in store.read_graph()["entities"]] == ["Alice", "Carol"]


def test_a_write_compares_the_files_bytes_not_its_stat_signature(memory: Path) -> None:
    store = GraphStore(memory)
    store.create_entities(entity_items([entity("Alice")]))
    before = os.stat(memory)
    # Rewritten in place, same size, modification time put back: the signature is unchanged.
    memory.write_bytes(memory.read_bytes().replace(b"Alice", b"Alina"))
    os.utime(memory, ns=(before.st_atime_ns, before.st_mtime_ns))
    store.create_entities(entity_items([entity("Bob")]))
    assert [e["name"] for e in store.read_graph()["entities"]] == ["Alina", "Bob"]
    # A write that only makes sense on the rewritten file (on the graph held before, Carla is unknown).
    before = os.stat(memory)
    memory.write_bytes(memory.read_bytes().replace(b"Bob", b"Bib").replace(b"Alina", b"Carla"))
    os.utime(memory, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert store.add_observations([ObservationsToAdd("Carla", ["sings"])]).changed
    assert store.read_graph()["entities"] == [entity("Carla", "person", "sings"), entity("Bib")]


# -- threads -----------------------------------------------------------------------------------


def test_concurrent_writes_from_many_threads_all_land(memory: Path) -> None:
    stores = [GraphStore(memory, lock_timeout=WAIT) for _ in range(2)]
    stores[0].create_entities(entity_items([entity("hub")]))

    def work(worker: int) -> None:
        store = stores[worker % 2]
        for step in range(8):
            store.create_entities(entity_items([entity(f"w{worker}-{step}")]))
            store.add_observations([ObservationsToAdd("hub", [f"seen by {worker} at {step}"])])

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    graph = GraphStore(memory).read_graph()
    names = {e["name"] for e in graph["entities"]}
    assert names == {"hub"} | {f"w{worker}-{step}" for worker in range(6) for step in range(8)}
    hub = next(e for e in graph["entities"] if e["name"] == "hub")
    assert sorted(hub["observations"]) == sorted(f"seen by {w} at {s}" for w in range(6) for s in range(8))


def test_readers_never_see_half_a_write(memory: Path) -> None:
    store = GraphStore(memory, lock_timeout=WAIT)
    store.create_entities(entity_items([entity("A"), entity("B")]))
    done = threading.Event()
    problems: list[str] = []

    def write() -> None:
        try:
            for step in range(12):
                # Each call changes two entities, or an entity and its relations: a reader must see all or none.
                store.add_observations([ObservationsToAdd("A", [f"o{step}"]),
                                        ObservationsToAdd("B", [f"o{step}"])])
                store.create_entities(entity_items([entity(f"X{step}")]))
                store.create_relations(relation_items([relation("A", f"X{step}"), relation(f"X{step}", "B")]))
                store.delete_entities([f"X{step}"])
        finally:
            done.set()

    def read() -> None:
        while not done.is_set():
            graph = store.read_graph()
            names = {e["name"] for e in graph["entities"]}
            observed = {e["name"]: len(e["observations"]) for e in graph["entities"]}
            if observed["A"] != observed["B"]:
                problems.append(f"A and B differ: {observed}")
            dangling = [r for r in graph["relations"] if r["from"] not in names or r["to"] not in names]
            if dangling:
                problems.append(f"relations without their entity: {dangling}")
            links = len(store.open_nodes([name for name in names if name.startswith("X")])["relations"])
            if links not in (0, 2):
                problems.append(f"{links} relations touch the X entity")

    readers = [threading.Thread(target=read) for _ in range(2)]
    writer = threading.Thread(target=write)
    for thread in (*readers, writer):
        thread.start()
    for thread in (writer, *readers):
        thread.join(WAIT)
        assert not thread.is_alive()
    assert problems == []
    final = store.read_graph()
    assert json.dumps(final)  # plain JSON values throughout
    assert len(final["entities"]) == 2 and final["relations"] == []


def test_a_writer_whose_lock_was_taken_over_notices_before_saving(memory: Path) -> None:
    lock = MemoryFileLock(memory)
    with lock.held():
        lock.raise_if_lost()
        # What a peer does when it decides this holder is stale: the marker is replaced.
        lock.path.unlink()
        lock.path.write_bytes(b"another holder's record\n")
        with pytest.raises(GraphError, match="Another process took over the lock.*Nothing was changed"):
            lock.raise_if_lost()
    assert lock.path.read_bytes() == b"another holder's record\n"  # the new holder's marker is left alone


def test_when_the_word_index_cannot_be_made_searches_scan_and_the_poller_goes_on(
        memory: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # No real input makes the index fail short of running out of memory, so the failure is
    # injected: the index only speeds searches up, and losing it must cost nothing else.
    attempts = []

    def fail(graph: Any) -> Any:
        attempts.append(graph)
        raise MemoryError("no room for the index")

    monkeypatch.setattr(indexes, "with_word_index", fail)
    store = GraphStore(memory)
    store.create_entities(entity_items([entity("Alice", "person", "likes tea"), entity("Bob", "person", "plays chess")]))
    assert store.poll_external_change() is False
    assert search_nodes(store, "TEA")["entities"] == [entity("Alice", "person", "likes tea")]
    assert search_nodes(store, "chess")["entities"] == [entity("Bob", "person", "plays chess")]
    assert len(attempts) == 1  # not tried again for the same graph
    assert "word index could not be made" in caplog.text
    store.add_observations([ObservationsToAdd("Bob", ["drinks tea"])])
    assert [e["name"] for e in search_nodes(store, "tea")["entities"]] == ["Alice", "Bob"]


def test_a_first_search_after_a_load_answers_as_the_index_would_and_the_index_follows(memory: Path) -> None:
    # Just after a load the graph has no word index: the first search answers by scanning every
    # entity (a new process's first answer does not wait for the index), and the index is made
    # off the request path without any further call.
    writer = GraphStore(memory)
    writer.create_entities(entity_items([entity(f"person {n}", "person", f"drinks {'tea' if n % 3 else 'coffee'}")
                                         for n in range(40)] + [entity("Tea Club", "club")]))
    assert writer.poll_external_change() is False  # the poller makes the writer's index
    assert writer.graph_in_memory is not None and writer.graph_in_memory.words is not None
    expected = [search_nodes(writer, query) for query in ("tea", "COFFEE", "person 1", "club", "nothing here")]

    reader = GraphStore(memory)
    assert [search_nodes(reader, query) for query in ("tea", "COFFEE", "person 1", "club", "nothing here")] == expected
    deadline = time.monotonic() + WAIT
    while (graph := reader.graph_in_memory) is None or graph.words is None:
        assert time.monotonic() < deadline, "the word index was never made"
        time.sleep(0.02)
    assert [search_nodes(reader, query) for query in ("tea", "COFFEE", "person 1", "club", "nothing here")] == expected
