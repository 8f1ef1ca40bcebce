"""First answers from a file's records before its graph is made (storage/coldstart.py S2, S4):
the same answers as the graph's, on random files with repeated names and relations, dates, extra
fields and lines the server cannot read; and a store that answers from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from test_store_cache import WAIT

from memory_server.model import graph as rules
from memory_server.model.items import Entity, ObservationsToAdd
from memory_server.model.records import decode_file
from memory_server.retrieval import query as retrieval
from memory_server.retrieval import search
from memory_server.retrieval.paging.budget import DEFAULT_BUDGET
from memory_server.retrieval.search import search_nodes
from memory_server.storage import cache_build, index_cache
from memory_server.storage.coldstart import FileBytes, FirstRecords
from memory_server.storage.files import rejected_path_for
from memory_server.storage.interface import Until
from memory_server.storage.store import GraphStore, State

# Small alphabets, so that names repeat, relations touch and searches hit.
names = st.sampled_from(["Alice", "alice", "Bob", "Ünï", "", "x y", "Zed"])
types = st.sampled_from(["person", "Person", "thing"])
texts = st.sampled_from(["likes tea", "LIKES TEA", "tea", "", "é", "x", "green\u3000tea", "Zephyr fan"])
stamps = st.sampled_from(["2026-01-02T03:04:05Z", "2025-12-31T23:59:59Z"])


def asked(store: GraphStore, tool: str) -> Any:
    """The store's read of this tool (a search through retrieval's pipeline, the others the store's own)."""
    if tool == "search_nodes":
        return lambda *arguments: search_nodes(store, *arguments)
    return getattr(store, tool)


@st.composite
def entity_line(draw: Any) -> bytes:
    observations = draw(st.lists(texts, max_size=3))
    line: dict[str, Any] = {"type": "entity", "name": draw(names), "entityType": draw(types),
                            "observations": observations}
    if draw(st.booleans()):  # a dated line, as this server writes them
        line["createdAt"] = line["updatedAt"] = draw(stamps)
        line["recordedAt"] = [draw(st.one_of(st.none(), stamps)) for _ in observations]
    if draw(st.booleans()):
        line["color"] = "blue"  # an extra field: an Extended record
    return json.dumps(line, ensure_ascii=draw(st.booleans())).encode()


@st.composite
def relation_line(draw: Any) -> bytes:
    line: dict[str, Any] = {"type": "relation", "from": draw(names), "to": draw(names),
                            "relationType": draw(st.sampled_from(["knows", "likes"]))}
    if draw(st.booleans()):
        line["since"] = 2020
    return json.dumps(line).encode()


other_line = st.sampled_from([b'{"type":"note","text":"kept"}', b"[1, 2]", b"not json", b"{\"type\":\"entity\"",
                              b"", b"   ", b'{"type":"entity","name":"Bob"}', b"\xff\xfe"])
files = st.lists(st.one_of(entity_line(), relation_line(), other_line), max_size=14).map(b"\n".join)
queries = st.sampled_from(["tea", "ALI", "zephyr", "x y", "é", "e", "Bob", "", "nothing here", "person"])


class RecordsAlone:
    def __init__(self, first: FirstRecords) -> None:
        self.containing, self.holding = first.containing, first.holding

    def answered(self) -> None:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=files, asked=st.lists(names, max_size=4), query=queries)
def test_s4_records_answer_as_the_graph_does(data: bytes, asked: list[str], query: str) -> None:
    lines = decode_file(data)
    graph = rules.graph_from_lines(lines)
    read = FileBytes(data, None)
    first = FirstRecords(read, lines)

    assert first.open_nodes(asked) == rules.open_nodes(graph, asked)

    expected = retrieval.contains_query(graph, query)
    for limit in (None, 1):
        # The records as a search's only candidate source, through the one pipeline.
        answer = search.search([RecordsAlone(first)], search.SearchRequest(query=query, limit=limit))  # type: ignore[list-item]
        if expected is None:
            assert answer is None  # the records decline rule 2: the graph ranks by words
        else:
            assert answer == retrieval.found(graph, expected, limit)

    units, whole = first.graph_units(), rules.read_graph_for_pages(graph)
    assert list(units["entities"]) == list(whole["entities"])
    assert units["relations"] == whole["relations"]
    for limit in (DEFAULT_BUDGET, 200, 60):
        assert units["entities"].summarise(limit) == whole["entities"].summarise(limit)

    # The graph made after shares those answer objects (S2), and is the same graph.
    assert read.views is not None
    shared = rules.graph_from_lines(lines, read.views)
    assert shared == graph
    assert all(node.view is view for node, view in zip(shared.entities.values(), units["entities"], strict=True))
    assert all(edge.view is view for edge, view in zip(shared.relations.values(), units["relations"], strict=True))


def test_s4_the_part_of_a_graph_keeps_the_first_of_each_name_and_relation() -> None:
    data = b"\n".join([
        b'{"type":"entity","name":"A","entityType":"first","observations":["one"]}',
        b'{"type":"relation","from":"A","to":"B","relationType":"knows"}',
        b'{"type":"entity","name":"A","entityType":"repeat","observations":["two"]}',
        b'{"type":"relation","from":"C","to":"D","relationType":"knows"}',
        b'{"type":"relation","from":"B","to":"A","relationType":"knows"}',
        b'{"type":"relation","from":"A","to":"B","relationType":"knows"}',
    ])
    part = rules.part_of_lines(decode_file(data), {"A"})
    assert [node.record.entityType for node in part.entities.values()] == ["first"]
    assert list(part.relations) == [("A", "B", "knows"), ("B", "A", "knows")]


def memory_lines(count: int) -> list[bytes]:
    """A file worth a cache (above index_cache.WORTH_CACHING), with what a hand edit leaves."""
    lines = [json.dumps({"type": "entity", "name": f"person {n}", "entityType": "person",
                         "observations": [f"Observation about person {n}: enjoys tea and chess " * 3,
                                          "Mentioned the Zephyr initiative" if n % 100 == 0 else "Plays the cello"]},
                        separators=(",", ":")).encode() for n in range(count)]
    lines += [json.dumps({"type": "relation", "from": f"person {n}", "to": f"person {(n * 7 + 3) % count}",
                          "relationType": "knows"}, separators=(",", ":")).encode() for n in range(count)]
    lines += [b'{"type":"entity","name":"person 1","entityType":"repeat","observations":["zephyr again"]}',
              b'{"type":"relation","from":"person 1","to":"person 1","relationType":"is"}',
              b"not json at all", b'{"type":"note"}']
    return lines


ASKED: list[tuple[str, Any]] = [
    ("open_nodes", ["person 1", "person 4499", "nobody"]),
    ("search_nodes", "zephyr"),
    ("search_nodes", "Who plays the cello, person 7?"),  # by words: the graph answers
    ("read_graph_for_pages", None),
    ("read_graph", None),
]


def first_answer(memory: Path, tool: str, argument: Any) -> tuple[Any, GraphStore]:
    store = GraphStore(memory)
    return asked(store, tool)(*([] if argument is None else [argument])), store


def plain(answer: dict[str, Any], limit: int = DEFAULT_BUDGET) -> Any:
    summarise = getattr(answer["entities"], "summarise", None)
    return (list(answer["entities"]), answer["relations"], summarise(limit) if summarise else None)


def test_s4_a_new_store_without_a_cache_answers_from_the_records_as_from_its_graph(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(b"\n".join(memory_lines(4500)))
    assert memory.stat().st_size >= index_cache.WORTH_CACHING
    with GraphStore(memory, cache=False) as warm:
        expected = [plain(asked(warm, tool)(*([] if argument is None else [argument])))
                    for tool, argument in ASKED]
    for (tool, argument), want in zip(ASKED, expected, strict=True):
        cache_build.remove(memory)
        answer, store = first_answer(memory, tool, argument)
        with store:
            assert plain(answer) == want, tool
            by_words = tool == "search_nodes" and argument.startswith("Who")
            assert store.record_answers == (0 if by_words else 1), tool
            # The graph is made of the same records after the first answer (S2), and answers the same.
            assert store.wait_until(Until.HOT, WAIT), "the graph"
            assert plain(asked(store, tool)(*([] if argument is None else [argument]))) == want
            assert store.record_answers == (0 if by_words else 1)
            assert store.graph_in_memory is not None and len(store.graph_in_memory.rejected) == 1
    # Nothing silently lost: a write moves the unreadable line to the side file, as before.
    cache_build.remove(memory)
    with GraphStore(memory) as store:
        assert store.open_nodes(["person 2"])["entities"]
        assert store.record_answers == 1
        assert store.create_entities([Entity("Quinn", "person", [])]).changed
    assert rejected_path_for(memory).read_bytes() == b"not json at all\n"
    assert b'"entityType":"repeat"' in memory.read_bytes() and b'{"type":"note"}' in memory.read_bytes()


def test_s1_records_are_let_go_when_the_file_changes(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(b"\n".join(memory_lines(4500)))
    with GraphStore(memory) as reader:
        reader.look_ahead()
        assert reader.open_nodes(["person 1"])["entities"][0]["entityType"] == "person"
        assert reader.record_answers == 1
        with GraphStore(memory, cache=False) as writer:
            writer.add_observations([ObservationsToAdd("person 1", ["changed by another"])])
        assert reader.open_nodes(["person 1"])["entities"][0]["observations"][-1] == "changed by another"
        assert reader.record_answers == 1 and reader.cold_state is State.HOT


def test_a_graph_made_before_any_read_answers_the_first_read(tmp_path: Path) -> None:
    # A write (or the watcher's poll) came first: its graph answers, the records are not decoded again.
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(b"\n".join(memory_lines(4500)))
    with GraphStore(memory) as store:
        looking = store.look_ahead()
        assert looking is not None and store.cold_state is State.LOOKING
        assert store.create_entities([Entity("Quinn", "person", ["zephyr"])]).changed
        assert store.cold_state is State.HOT
        assert "Quinn" in [item["name"] for item in search_nodes(store, "zephyr")["entities"]]
        assert store.record_answers == store.cache_answers == 0
    with GraphStore(memory) as store:
        cache_build.remove(memory)
        assert not store.poll_external_change()
        assert store.cold_state is State.HOT and store.open_nodes(["Quinn"])["entities"]
        assert store.record_answers == store.cache_answers == 0


def test_s2_the_graph_made_after_a_read_graph_from_the_records_shares_its_objects(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(b"\n".join(memory_lines(4500)))
    with GraphStore(memory) as store:
        answer = store.read_graph_for_pages()
        assert store.record_answers == 1
        assert store.wait_until(Until.HOT, WAIT), "the graph"
        graph = store.graph_in_memory
        assert graph is not None
        assert all(node.view is view for node, view in zip(graph.entities.values(), answer["entities"], strict=True))
        assert all(edge.view is view for edge, view in zip(graph.relations.values(), answer["relations"], strict=True))
