"""writes.merge_graph, the pure operation behind `mcp-server-memory import`: the tools' rules in one change,
and everything the graph keeps beside its records (endpoint index, word index, file order) kept right."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from memory_server.model import graph as rules
from memory_server.model import indexes, writes
from memory_server.model.graph import EMPTY, Graph
from memory_server.model.items import Entity, ObservationsToAdd, Relation
from memory_server.model.records import EntityRecord, RelationRecord, decode_file, join_lines
from memory_server.retrieval import query as retrieval


def build(data: bytes) -> Graph:
    return indexes.with_word_index(rules.graph_from_lines(decode_file(data)))


BASE = (b'{"type":"entity","name":"Alice","entityType":"person","observations":["Loves jazz"]}\n'
        b'{"type":"entity","name":"Acme","entityType":"organization","observations":[]}\n'
        b'{"type":"relation","from":"Alice","to":"Acme","relationType":"works_at"}\n'
        b'{"type":"widget"}\n')


def test_a_merge_follows_the_tools_rules_and_keeps_the_indexes() -> None:
    graph = build(BASE)
    change = writes.merge_graph(graph, [
        (EntityRecord("Alice", "robot", ["Loves jazz", "Plays chess"]), None),
        (EntityRecord("Bob", "person", ["Quiet", "Quiet"]), None),
    ], [
        (RelationRecord("Bob", "Alice", "knows"), None),
        (RelationRecord("Alice", "Acme", "works_at"), None),
        (RelationRecord("Bob", "Nobody", "fears"), None),
    ])
    assert change.changed
    assert change.value == {
        "createdEntities": ["Bob"],
        "addedObservations": [{"entityName": "Alice", "addedObservations": ["Plays chess"]}],
        "createdRelations": [{"from": "Bob", "to": "Alice", "relationType": "knows"}],
        "unchangedEntities": 0,
        "presentRelations": 1,
        "typeConflicts": [{"name": "Alice", "entityType": "person", "incomingType": "robot"}],
        "relationsWithoutEntities": [{"from": "Bob", "to": "Nobody", "relationType": "fears", "missing": ["Nobody"]}],
    }
    merged = change.graph
    assert join_lines(rules.file_lines(merged)) == (
        b'{"type":"entity","name":"Alice","entityType":"person","observations":["Loves jazz","Plays chess"]}\n'
        b'{"type":"entity","name":"Acme","entityType":"organization","observations":[]}\n'
        b'{"type":"entity","name":"Bob","entityType":"person","observations":["Quiet"]}\n'
        b'{"type":"relation","from":"Alice","to":"Acme","relationType":"works_at"}\n'
        b'{"type":"relation","from":"Bob","to":"Alice","relationType":"knows"}\n'
        b'{"type":"widget"}\n'), "existing entities stay in place, new ones follow; unknown records stay last"
    # the word index and the endpoint index were brought along: the indexed answers match a fresh load
    fresh = build(join_lines(rules.file_lines(merged)))
    for query in ("chess", "quiet", "bob", "jazz", "acme"):
        assert retrieval.matches(merged, query) == retrieval.matches(fresh, query)
    assert rules.open_nodes(merged, ["Bob"]) == rules.open_nodes(fresh, ["Bob"])
    assert writes.delete_entities(merged, ["Alice"]).graph.relations.keys() == set()
    assert graph.entities["Alice"].record.observations == ["Loves jazz"], "the graph merged into is unchanged"


def test_merging_what_is_there_changes_nothing() -> None:
    graph = build(BASE)
    change = writes.merge_graph(graph, [(EntityRecord("Alice", "person", ["Loves jazz"]), None)],
                                [(RelationRecord("Alice", "Acme", "works_at"), None)])
    assert not change.changed and change.graph is graph
    assert change.value["unchangedEntities"] == 1 and change.value["presentRelations"] == 1


def test_a_merge_into_nothing_is_the_incoming_graph() -> None:
    entities = [(EntityRecord(f"e{number}", "thing", [f"o{number}"]), None) for number in range(50)]
    relations = [(RelationRecord(f"e{number}", f"e{number + 1}", "next"), None) for number in range(49)]
    merged = writes.merge_graph(EMPTY, entities, relations).graph
    assert rules.read_graph(merged) == rules.read_graph(rules.graph_from_lines(
        [record for record, _ in entities] + [record for record, _ in relations]))
    assert merged.next_seq == 99


# --- the same as calling the tools one by one -----------------------------------------------------------------

names = st.sampled_from(["Alice", "alice", "Bob", "Ünï", ""])
types = st.sampled_from(["person", "thing"])
texts = st.sampled_from(["likes tea", "LIKES TEA", "tea", "", "é"])
incoming_entities = st.lists(st.builds(EntityRecord, names, types, st.lists(texts, max_size=3)), max_size=5)
incoming_relations = st.lists(st.builds(RelationRecord, names, names, st.sampled_from(["knows", "likes"])), max_size=5)


def by_the_tools(graph: Graph, entities: list[EntityRecord], relations: list[RelationRecord]) -> Graph:
    """What a model calling create_entities, add_observations and create_relations one at a time leaves."""
    for record in entities:
        if record.name in graph.entities:
            graph = writes.add_observations(graph, [ObservationsToAdd(record.name, record.observations)]).graph
        else:
            graph = writes.create_entities(graph, [Entity(record.name, record.entityType, record.observations)]).graph
    for link in relations:
        if link.source in graph.entities and link.target in graph.entities:
            graph = writes.create_relations(graph, [Relation(link.source, link.target, link.relationType)]).graph
    return graph


@settings(max_examples=300, deadline=None)
@given(incoming_entities, incoming_relations, incoming_entities, incoming_relations)
def test_a_merge_is_the_tools_called_one_by_one(before_entities: list[EntityRecord], before_relations: list[RelationRecord],
                                                 entities: list[EntityRecord], relations: list[RelationRecord]) -> None:
    start = indexes.with_word_index(by_the_tools(EMPTY, before_entities, before_relations))
    merged = writes.merge_graph(start, [(record, None) for record in entities],
                                [(link, None) for link in relations]).graph
    expected = by_the_tools(start, entities, relations)
    assert rules.read_graph(merged) == rules.read_graph(expected)
    assert join_lines(rules.file_lines(merged)) == join_lines(rules.file_lines(expected))
    for query in ("tea", "alice", "é", ""):
        assert retrieval.matches(merged, query) == retrieval.matches(expected, query)
    again = writes.merge_graph(merged, [(record, None) for record in entities], [(link, None) for link in relations])
    assert not again.changed, "merging the same again changes nothing"
