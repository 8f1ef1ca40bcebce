"""The vectors' side file, ``<memory>.vectors`` (memory_server/retrieval/vectors.py): each of its
numbered guarantees V1 to V6, with the real model, real files and real server processes."""

from __future__ import annotations

import os
import select
import stat
import time
from pathlib import Path

import pytest
from memory_helpers import entity, entity_record, record_line
from test_semantic_process import Server, found_dog, own_lines_only

from memory_server.model import writes
from memory_server.model.graph import EMPTY, Graph
from memory_server.model.items import Entity
from memory_server.retrieval import semantic
from memory_server.retrieval.semantic import Engine, text_key
from memory_server.retrieval.vectors import VectorFile, vectors_path

pytestmark = pytest.mark.file_store

WAIT_SECONDS = 600.0
DOG = "Has a border collie named Biscuit"
FACTS = [DOG, "Allergic to shellfish", "Plays the cello", "Takes levothyroxine every morning"]


def fresh_engine() -> Engine:
    """A loaded model with an empty table, as a new process has it."""
    path, digest = semantic._model_file(os.environ)
    assert not isinstance(path, str), "the semantic extra is installed for the tests"
    engine = semantic._session(path, digest, semantic.DEFAULT_MAX)
    assert isinstance(engine, Engine), engine
    return engine


def graph_of(facts: list[str]) -> Graph:
    return writes.create_entities(EMPTY, [Entity("Ann", "person", facts)]).graph


def saved(side: Path, facts: list[str], memory_name: str = "memory.jsonl") -> Engine:
    engine = fresh_engine()
    engine.open_vectors(side, memory_name)
    graph = graph_of(facts)
    assert engine.ready(graph, WAIT_SECONDS)
    engine.save(graph)
    assert side.exists()
    return engine


def test_v6_a_new_process_answers_from_the_file_without_running_the_model(tmp_path: Path) -> None:
    side = tmp_path / "memory.jsonl.vectors"
    first = saved(side, FACTS)
    again = fresh_engine()
    again.open_vectors(side, "memory.jsonl")
    graph = graph_of(FACTS)
    found = again.nearest(graph, "dog", 3)
    assert found is not None and found[0][:2] == ("Ann", 0)
    assert again.embedded == 0
    assert found == first.nearest(graph, "dog", 3)


def test_v2_another_model_s_or_another_memory_s_file_is_not_used(tmp_path: Path) -> None:
    side = tmp_path / "memory.jsonl.vectors"
    engine = saved(side, FACTS)
    assert VectorFile(side, "memory.jsonl").read(engine.digest) is not None
    assert VectorFile(side, "memory.jsonl").read("0" * 64) is None
    assert VectorFile(side, "other.jsonl").read(engine.digest) is None
    other = fresh_engine()
    other.open_vectors(side, "other.jsonl")
    graph = graph_of(FACTS)
    assert other.ready(graph, WAIT_SECONDS)
    assert other.embedded == len(FACTS)  # embedded again, and the file replaced by the next save
    other.save(graph)
    assert VectorFile(side, "other.jsonl").read(engine.digest) is not None
    assert VectorFile(side, "memory.jsonl").read(engine.digest) is None


@pytest.mark.parametrize("damage", ["a changed byte", "cut short", "a byte more", "empty", "not ours"])
def test_v3_a_damaged_file_is_not_used_and_the_next_save_replaces_it(tmp_path: Path, damage: str) -> None:
    side = tmp_path / "memory.jsonl.vectors"
    engine = saved(side, FACTS)
    data = bytearray(side.read_bytes())
    if damage == "a changed byte":
        data[len(data) // 2] ^= 0x01
    elif damage == "cut short":
        del data[-100:]
    elif damage == "a byte more":
        data += b"\0"
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"PK\x03\x04 some other file")
    side.write_bytes(bytes(data))
    assert VectorFile(side, "memory.jsonl").read(engine.digest) is None
    again = fresh_engine()
    again.open_vectors(side, "memory.jsonl")
    graph = graph_of(FACTS)
    assert again.ready(graph, WAIT_SECONDS)
    assert again.embedded == len(FACTS)
    again.save(graph)
    assert VectorFile(side, "memory.jsonl").read(engine.digest) is not None


def test_v3_a_missing_file_is_made_by_the_first_save_and_deleting_it_loses_nothing(tmp_path: Path) -> None:
    side = tmp_path / "memory.jsonl.vectors"
    saved(side, FACTS)
    side.unlink()
    again = fresh_engine()
    again.open_vectors(side, "memory.jsonl")
    graph = graph_of(FACTS)
    assert again.ready(graph, WAIT_SECONDS)
    found = again.nearest(graph, "dog", 3)
    assert found is not None and found[0][:2] == ("Ann", 0)
    again.save(graph)
    assert side.exists()


def test_v4_a_vector_whose_text_is_gone_never_answers_and_leaves_the_file(tmp_path: Path) -> None:
    side = tmp_path / "memory.jsonl.vectors"
    saved(side, FACTS)
    assert text_key(DOG) in side.read_bytes()
    # A new process on the memory after the dog's fact was deleted by another process.
    again = fresh_engine()
    again.open_vectors(side, "memory.jsonl")
    without = graph_of(FACTS[1:])
    found = again.nearest(without, "dog", 3)
    assert found is not None and all(index < len(FACTS) - 1 for _, index, _ in found)
    assert again.count == len(FACTS) - 1 and again.embedded == 0  # dropped from the table at once
    again.save()
    assert text_key(DOG) not in side.read_bytes()
    assert text_key(FACTS[1]) in side.read_bytes()
    # And a text deleted while the process runs leaves the file with the next save.
    fewer = graph_of(FACTS[2:])
    again.nearest(fewer, "music", 3)
    again.save()
    assert text_key(FACTS[1]) not in side.read_bytes() and again.count == len(FACTS) - 2


def test_v1_private_written_whole_and_a_killed_writer_s_temporary_goes(tmp_path: Path) -> None:
    side = tmp_path / "memory.jsonl.vectors"
    debris = tmp_path / "memory.jsonl.vectors.999999999.0123456789abcdef.tmp"
    debris.write_bytes(b"half a file")
    old = os.umask(0o022)  # a usual umask: the file is 0600 whatever it is
    try:
        saved(side, FACTS)
    finally:
        os.umask(old)
    assert stat.S_IMODE(side.stat().st_mode) == 0o600
    assert not debris.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl.vectors"]


def write_memory(memory: Path, facts: list[str]) -> None:
    memory.write_text(record_line(entity_record(entity("Ann", "person", facts))) + "\n", encoding="utf-8")


def test_v4_in_a_server_a_deleted_observation_s_vector_is_gone_from_disk_when_it_exits(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    write_memory(memory, FACTS)
    server = Server(memory)
    try:
        assert found_dog(server.answer(server.call("search_nodes", query="dog")))
        deleted = server.answer(server.call("delete_observations", deletions=[
            {"entityName": "Ann", "observations": [DOG]}]))
        assert not deleted["result"].get("isError"), deleted
    finally:
        status, errors = server.end()
    assert status == 0, errors
    own_lines_only(errors)
    side = vectors_path(memory)
    assert stat.S_IMODE(side.stat().st_mode) == 0o600
    data = side.read_bytes()
    assert text_key(DOG) not in data and text_key(FACTS[1]) in data


def test_a_fresh_server_on_an_embedded_memory_answers_by_meaning_at_once_and_embeds_nothing(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    write_memory(memory, FACTS)
    first = Server(memory)
    assert found_dog(first.answer(first.call("search_nodes", query="dog")))
    status, errors = first.end()
    assert status == 0, errors
    side = vectors_path(memory)
    before = side.stat()
    second = Server(memory)
    assert found_dog(second.answer(second.call("search_nodes", query="dog")))
    status, errors = second.end()
    assert status == 0, errors
    own_lines_only(errors)
    after = side.stat()
    # Nothing new to keep: the file was not written again (same inode, same bytes).
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize("kind", ["fifo", "symlink", "hard link"])
def test_v5_something_not_ours_at_the_name_is_neither_read_nor_replaced(tmp_path: Path, kind: str) -> None:
    memory = tmp_path / "memory.jsonl"
    write_memory(memory, FACTS)
    side = vectors_path(memory)
    target = tmp_path / "elsewhere"
    target.write_bytes(b"someone else's file")
    if kind == "fifo":
        os.mkfifo(side)
    elif kind == "symlink":
        side.symlink_to(target)
    else:
        os.link(target, side)
    server = Server(memory)
    try:
        for _ in range(2):
            assert found_dog(server.answer(server.call("search_nodes", query="dog")))  # vectors in memory
    finally:
        status, errors = server.end()
    assert status == 0, errors
    assert errors.count("the vectors are kept in memory only") == 1, errors
    own_lines_only(errors)
    assert target.read_bytes() == b"someone else's file"
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(side).st_mode)
    elif kind == "symlink":
        assert side.is_symlink()
    else:
        assert os.lstat(side).st_nlink == 2


def test_v4_a_search_that_finds_texts_gone_has_the_file_rewritten_without_them(tmp_path: Path) -> None:
    side = tmp_path / "memory.jsonl.vectors"
    engine = saved(side, FACTS)
    engine.nearest(graph_of(FACTS), "dog", 3)
    assert text_key(DOG) in side.read_bytes()
    found = engine.nearest(graph_of(FACTS[1:]), "dog", 3)  # the dog's fact was deleted by a write
    assert found is not None and all(index < len(FACTS) - 1 for _, index, _ in found)
    deadline = time.monotonic() + WAIT_SECONDS
    while text_key(DOG) in side.read_bytes():  # the save comes SAVE_DELAY later, in the Background
        assert time.monotonic() < deadline, "the side file still holds the deleted fact's vector"
        select.select([], [], [], 0.05)
    assert text_key(FACTS[1]) in side.read_bytes()
    assert VectorFile(side, "memory.jsonl").read(engine.digest) is not None
