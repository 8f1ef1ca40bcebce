"""The graph rules as pure functions: every operation's result, its change, and what it leaves alone."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from write_items import addition_items, entity_items, relation_items

from memory_server.model import census, writes
from memory_server.model import graph as rules
from memory_server.model.census import summarise
from memory_server.model.graph import EMPTY, Graph, GraphError
from memory_server.model.items import ObservationsToAdd, ObservationsToDelete
from memory_server.model.records import decode_file, join_lines, layout_pieces
from memory_server.retrieval import query as retrieval

Entity = dict[str, Any]


def entity(name: str, entity_type: str = "person", *observations: str) -> Entity:
    return {"name": name, "entityType": entity_type, "observations": list(observations)}


def relation(source: str, target: str, relation_type: str = "knows") -> dict[str, str]:
    return {"from": source, "to": target, "relationType": relation_type}


def build(*entities: Entity, relations: tuple[dict[str, str], ...] = ()) -> Graph:
    graph = writes.create_entities(EMPTY, entity_items(list(entities))).graph
    return writes.create_relations(graph, relation_items(list(relations))).graph if relations else graph


def from_file(data: bytes) -> Graph:
    return rules.graph_from_lines(decode_file(data))


def file_of(graph: Graph) -> bytes:
    return join_lines(rules.file_lines(graph))


PEOPLE = build(entity("Alice", "person", "likes tea"), entity("Bob", "person", "plays chess"),
               entity("Acme", "organization", "makes anvils"),
               relations=(relation("Alice", "Bob"), relation("Alice", "Acme", "works_at"),
                          relation("Bob", "Acme", "works_at")))


# -- create_entities ---------------------------------------------------------------------------


def test_created_entities_come_back_exactly_as_stored() -> None:
    change = writes.create_entities(EMPTY, entity_items([{**entity("Alice", "person", "likes tea"), "extra": "ignored"}]))
    assert change.changed
    assert change.value == {"entities": [entity("Alice", "person", "likes tea")]}
    assert rules.read_graph(change.graph) == {"entities": [entity("Alice", "person", "likes tea")], "relations": []}


def test_existing_names_and_repeats_within_the_call_are_skipped_whole() -> None:
    change = writes.create_entities(PEOPLE, entity_items([entity("Carol", "person", "first"), entity("Alice", "robot", "new"),
                                                          entity("Carol", "cat", "second"), entity("Alice", "x")]))
    assert change.value == {"entities": [entity("Carol", "person", "first")], "skipped": ["Alice", "Carol"]}
    stored = rules.open_nodes(change.graph, ["Alice", "Carol"])["entities"]
    assert stored == [entity("Alice", "person", "likes tea"), entity("Carol", "person", "first")]


def test_skipping_everything_changes_nothing() -> None:
    change = writes.create_entities(PEOPLE, entity_items([entity("Alice")]))
    assert (change.changed, change.graph) == (False, PEOPLE)
    assert change.value == {"entities": [], "skipped": ["Alice"]}


def test_no_skipped_key_when_nothing_was_skipped() -> None:
    assert "skipped" not in writes.create_entities(PEOPLE, entity_items([entity("Dan")])).value
    assert writes.create_entities(PEOPLE, []).value == {"entities": []}


def test_repeated_observations_of_a_new_entity_are_stored_once() -> None:
    change = writes.create_entities(EMPTY, entity_items([entity("A", "t", "x", "y", "x", "y", "z")]))
    assert change.value["entities"] == [entity("A", "t", "x", "y", "z")]


def test_entities_keep_insertion_order() -> None:
    graph = writes.create_entities(PEOPLE, entity_items([entity("Zed"), entity("Ann")])).graph
    assert [e["name"] for e in rules.read_graph(graph)["entities"]] == ["Alice", "Bob", "Acme", "Zed", "Ann"]


# -- create_relations --------------------------------------------------------------------------


def test_duplicate_relations_are_skipped_also_within_the_call() -> None:
    change = writes.create_relations(PEOPLE, relation_items([relation("Alice", "Bob"), relation("Bob", "Alice"),
                                                             relation("Bob", "Alice"), relation("Alice", "Bob", "likes")]))
    assert change.value == {"relations": [relation("Bob", "Alice"), relation("Alice", "Bob", "likes")]}
    assert rules.read_graph(change.graph)["relations"][-2:] == change.value["relations"]


def test_only_duplicates_change_nothing() -> None:
    change = writes.create_relations(PEOPLE, relation_items([relation("Alice", "Bob")]))
    assert (change.changed, change.graph, change.value) == (False, PEOPLE, {"relations": []})


def test_a_relation_to_itself_is_allowed() -> None:
    change = writes.create_relations(PEOPLE, relation_items([relation("Alice", "Alice", "admires")]))
    assert rules.open_nodes(change.graph, ["Alice"])["relations"][-1] == relation("Alice", "Alice", "admires")
    assert writes.delete_entities(change.graph, ["Alice"]).value["message"] == (
        "Deleted 1 entity and 3 relations connected to them.")


def test_missing_endpoints_fail_the_whole_call_and_every_missing_name_is_named() -> None:
    with pytest.raises(GraphError) as raised:
        writes.create_relations(PEOPLE, relation_items([relation("Alice", "Bob", "new"), relation("Carol", "Alice"),
                                                        relation("Bob", "Dan"), relation("Carol", "Eve")]))
    message = str(raised.value)
    assert message.startswith("Entities with names Carol, Dan, Eve not found")
    assert "No relations were created" in message


def test_one_missing_endpoint_reads_like_the_reference() -> None:
    with pytest.raises(GraphError, match="^Entity with name Nobody not found"):
        writes.create_relations(PEOPLE, relation_items([relation("Alice", "Nobody")]))


# -- add_observations --------------------------------------------------------------------------


def test_observations_are_deduplicated_against_the_entity_and_within_the_call() -> None:
    change = writes.add_observations(PEOPLE, addition_items([
        {"entityName": "Alice", "contents": ["likes tea", "rides a bike", "rides a bike"], "extra": 1},
        {"entityName": "Bob", "contents": []},
        {"entityName": "Alice", "contents": ["rides a bike", "sings"]},
    ]))
    assert change.value == {"results": [
        {"entityName": "Alice", "addedObservations": ["rides a bike"]},
        {"entityName": "Bob", "addedObservations": []},
        {"entityName": "Alice", "addedObservations": ["sings"]},
    ]}
    assert rules.open_nodes(change.graph, ["Alice"])["entities"] == [
        entity("Alice", "person", "likes tea", "rides a bike", "sings")]


def test_adding_only_known_observations_changes_nothing() -> None:
    change = writes.add_observations(PEOPLE, [ObservationsToAdd("Alice", ["likes tea"])])
    assert (change.changed, change.graph) == (False, PEOPLE)


def test_a_missing_entity_fails_the_whole_call() -> None:
    with pytest.raises(GraphError, match="^Entity with name Zed not found"):
        writes.add_observations(PEOPLE, [ObservationsToAdd("Alice", ["new"]),
                                         ObservationsToAdd("Zed", ["x"])])
    with pytest.raises(GraphError, match="^Entities with names Zed, Ann not found"):
        writes.add_observations(PEOPLE, [ObservationsToAdd("Zed", []), ObservationsToAdd("Ann", []),
                                         ObservationsToAdd("Zed", [])])


# -- delete_entities ---------------------------------------------------------------------------


def test_deleting_an_entity_removes_every_relation_touching_it() -> None:
    change = writes.delete_entities(PEOPLE, ["Acme", "Nobody", "Acme"])
    assert change.changed
    assert change.value == {"success": True, "notFound": ["Nobody"],
                            "message": "Deleted 1 entity and 2 relations connected to them. Not found: Nobody."}
    assert rules.read_graph(change.graph) == {
        "entities": [entity("Alice", "person", "likes tea"), entity("Bob", "person", "plays chess")],
        "relations": [relation("Alice", "Bob")]}
    assert rules.open_nodes(change.graph, ["Acme"]) == {"entities": [], "relations": []}


def test_deleting_unknown_names_changes_nothing_and_does_not_fail() -> None:
    change = writes.delete_entities(PEOPLE, ["X", "Y"])
    assert (change.changed, change.graph) == (False, PEOPLE)
    assert change.value == {"success": True, "message": "Deleted 0 entities. Not found: X, Y.", "notFound": ["X", "Y"]}


def test_a_deleted_name_can_be_created_again_without_its_old_relations() -> None:
    graph = writes.delete_entities(PEOPLE, ["Bob"]).graph
    graph = writes.create_entities(graph, entity_items([entity("Bob", "robot")])).graph
    assert rules.open_nodes(graph, ["Bob"]) == {"entities": [entity("Bob", "robot")], "relations": []}


# -- delete_observations / delete_relations ----------------------------------------------------


def test_deleting_observations_counts_what_was_removed_and_ignores_the_unknown() -> None:
    graph = writes.add_observations(PEOPLE, [ObservationsToAdd("Alice", ["a", "b"])]).graph
    change = writes.delete_observations(graph, [
        ObservationsToDelete("Alice", ["a", "nope", "likes tea"]),
        ObservationsToDelete("Ghost", ["a"]),
        ObservationsToDelete("Alice", ["a", "b"]),
    ])
    assert change.value == {"success": True, "message": "Deleted 3 observations.", "deletedCount": 3}
    assert rules.open_nodes(change.graph, ["Alice"])["entities"] == [entity("Alice", "person")]


def test_deleting_no_observation_changes_nothing() -> None:
    change = writes.delete_observations(PEOPLE, [ObservationsToDelete("Alice", ["nope"])])
    assert (change.changed, change.graph, change.value["deletedCount"]) == (False, PEOPLE, 0)


def test_every_copy_of_an_observation_goes() -> None:
    graph = from_file(b'{"type":"entity","name":"A","entityType":"t","observations":["x","y","x"]}')
    change = writes.delete_observations(graph, [ObservationsToDelete("A", ["x"])])
    assert change.value["deletedCount"] == 2
    assert rules.read_graph(change.graph)["entities"] == [entity("A", "t", "y")]


def test_deleting_relations_counts_and_ignores_the_unknown() -> None:
    change = writes.delete_relations(PEOPLE, relation_items([relation("Alice", "Bob"), relation("Alice", "Bob"),
                                                             relation("Bob", "Alice"), relation("Alice", "Acme", "knows")]))
    assert change.value == {"success": True, "message": "Deleted 1 relation.", "deletedCount": 1}
    assert relation("Alice", "Bob") not in rules.read_graph(change.graph)["relations"]
    nothing = writes.delete_relations(PEOPLE, relation_items([relation("X", "Y")]))
    assert (nothing.changed, nothing.graph, nothing.value["deletedCount"]) == (False, PEOPLE, 0)


# -- reads -------------------------------------------------------------------------------------


def test_search_ignores_case_across_name_type_and_observations() -> None:
    assert [e["name"] for e in retrieval.matches(PEOPLE, "ALI")["entities"]] == ["Alice"]
    assert [e["name"] for e in retrieval.matches(PEOPLE, "Organ")["entities"]] == ["Acme"]
    assert [e["name"] for e in retrieval.matches(PEOPLE, "CHESS")["entities"]] == ["Bob"]
    assert retrieval.matches(PEOPLE, "zebra") == {"entities": [], "relations": []}


def test_search_returns_relations_with_at_least_one_matching_end() -> None:
    result = retrieval.matches(PEOPLE, "anvils")
    assert result["relations"] == [relation("Alice", "Acme", "works_at"), relation("Bob", "Acme", "works_at")]


def test_an_empty_query_matches_everything() -> None:
    assert retrieval.matches(PEOPLE, "") == rules.read_graph(PEOPLE)


def test_a_match_never_spans_two_fields() -> None:
    graph = build(entity("ab", "cd", "ef"))
    assert retrieval.matches(graph, "b\x00c")["entities"] == []
    assert retrieval.matches(graph, "bc")["entities"] == []
    with_separator = build(entity("a\x00b", "t"))
    assert retrieval.matches(with_separator, "A\x00B")["entities"] == [entity("a\x00b", "t")]


def test_open_nodes_gives_graph_order_and_relations_touching_either_end() -> None:
    result = rules.open_nodes(PEOPLE, ["Acme", "Nobody", "Bob", "Bob"])
    assert [e["name"] for e in result["entities"]] == ["Bob", "Acme"]
    assert result["relations"] == [relation("Alice", "Bob"), relation("Alice", "Acme", "works_at"),
                                   relation("Bob", "Acme", "works_at")]
    assert rules.open_nodes(PEOPLE, ["Nobody"]) == {"entities": [], "relations": []}


def test_open_nodes_in_a_large_graph_uses_the_index_and_agrees_with_a_full_scan() -> None:
    names = [f"e{i}" for i in range(200)]
    graph = build(*(entity(name) for name in names),
                  relations=tuple(relation(names[i % 200], names[(i * 7) % 200], f"r{i % 3}") for i in range(400)))
    wanted = {"e3", "e21", "e150"}
    result = rules.open_nodes(graph, sorted(wanted))
    every = rules.read_graph(graph)["relations"]
    assert result["relations"] == [r for r in every if r["from"] in wanted or r["to"] in wanted]
    assert [e["name"] for e in result["entities"]] == ["e3", "e21", "e150"]


def test_results_never_show_the_record_type() -> None:
    result = rules.read_graph(PEOPLE)
    assert all(set(e) == {"name", "entityType", "observations"} for e in result["entities"])
    assert all(set(r) == {"from", "to", "relationType"} for r in result["relations"])


def test_a_write_leaves_the_graph_it_started_from_untouched() -> None:
    before = copy.deepcopy(rules.read_graph(PEOPLE))
    graph = writes.add_observations(PEOPLE, [ObservationsToAdd("Alice", ["new"])]).graph
    graph = writes.delete_entities(graph, ["Bob"]).graph
    graph = writes.delete_observations(graph, [ObservationsToDelete("Acme", ["makes anvils"])]).graph
    writes.create_relations(graph, relation_items([relation("Alice", "Acme", "owns")]))
    assert rules.read_graph(PEOPLE) == before
    assert rules.open_nodes(PEOPLE, ["Bob"])["relations"] == [relation("Alice", "Bob"),
                                                              relation("Bob", "Acme", "works_at")]


# -- the file ----------------------------------------------------------------------------------

NOTE = b'{"type":"note","text":"from a newer version"}'
BAD_TYPES = b'{"type":"entity","name":7,"entityType":"t","observations":[]}'


def test_the_file_holds_entities_then_relations_then_kept_lines() -> None:
    data = (NOTE + b"\n" + b'{"type":"relation","from":"A","to":"B","relationType":"r"}\n' + BAD_TYPES + b"\n"
            + b'{"type":"entity","name":"A","entityType":"t","observations":[]}\n')
    assert file_of(from_file(data)) == (
        b'{"type":"entity","name":"A","entityType":"t","observations":[]}\n'
        b'{"type":"relation","from":"A","to":"B","relationType":"r"}\n' + NOTE + b"\n" + BAD_TYPES + b"\n")


WRITES_ON_PEOPLE = [
    lambda g: writes.create_entities(g, entity_items([entity("Carol", "person", "new")])),
    lambda g: writes.add_observations(g, [ObservationsToAdd("Bob", ["likes go"])]),
    lambda g: writes.delete_observations(g, [ObservationsToDelete("Alice", ["likes tea"])]),
    lambda g: writes.create_relations(g, relation_items([relation("Bob", "Alice")])),
    lambda g: writes.delete_relations(g, relation_items([relation("Alice", "Bob")])),
    lambda g: writes.delete_entities(g, ["Acme"]),
]


@pytest.mark.parametrize("write", WRITES_ON_PEOPLE)
def test_a_saved_layout_is_the_whole_new_file_and_keeps_the_parts_a_write_left_alone(write: Any) -> None:
    saved = from_file(NOTE + b"\n" + file_of(PEOPLE))
    layout = rules.file_layout_of(saved)
    after = write(saved).graph
    laid_out = rules.file_layout_of(after, saved, layout)
    assert b"".join(layout_pieces(laid_out)) == file_of(after)
    for number, (new, old) in enumerate(zip((after.entities, after.relations, after.kept),
                                            (saved.entities, saved.relations, saved.kept), strict=True)):
        # The very part of the old layout when the write left its container alone, never otherwise.
        assert (laid_out[number] is layout[number]) == (new is old)


def test_a_layout_from_nothing_saved_is_the_whole_file() -> None:
    graph = from_file(NOTE + b"\n" + file_of(PEOPLE))
    assert b"".join(layout_pieces(rules.file_layout_of(graph))) == file_of(graph)
    assert b"".join(layout_pieces(rules.file_layout_of(graph, PEOPLE, ()))) == file_of(graph)


def test_kept_lines_survive_every_operation() -> None:
    graph = from_file(NOTE + b"\n" + BAD_TYPES)
    graph = writes.create_entities(graph, entity_items([entity("A"), entity("B")])).graph
    graph = writes.create_relations(graph, relation_items([relation("A", "B")])).graph
    graph = writes.add_observations(graph, [ObservationsToAdd("A", ["x"])]).graph
    graph = writes.delete_relations(graph, relation_items([relation("A", "B")])).graph
    graph = writes.delete_entities(graph, ["A", "B"]).graph
    assert file_of(graph) == NOTE + b"\n" + BAD_TYPES + b"\n"
    assert rules.read_graph(graph) == {"entities": [], "relations": []}


def test_extra_fields_survive_changes_to_their_record() -> None:
    graph = from_file(b'{"type":"entity","name":"A","entityType":"t","observations":["x"],"color":"red"}\n'
                      b'{"type":"entity","name":"B","entityType":"t","observations":[]}\n'
                      b'{"type":"relation","from":"A","to":"B","relationType":"r","weight":2}')
    assert rules.read_graph(graph)["entities"][0] == entity("A", "t", "x")
    graph = writes.add_observations(graph, [ObservationsToAdd("A", ["y"])]).graph
    graph = writes.delete_observations(graph, [ObservationsToDelete("A", ["x"])]).graph
    assert file_of(graph) == (
        b'{"type":"entity","name":"A","entityType":"t","observations":["y"],"color":"red"}\n'
        b'{"type":"entity","name":"B","entityType":"t","observations":[]}\n'
        b'{"type":"relation","from":"A","to":"B","relationType":"r","weight":2}\n')


def test_a_repeated_name_in_the_file_the_first_wins_and_the_repeat_is_kept() -> None:
    first = b'{"type":"entity","name":"A","entityType":"person","observations":["first"]}'
    repeat = b'{"type":"entity","name":"A","entityType":"robot","observations":["second"]}'
    graph = from_file(first + b"\n" + repeat)
    assert rules.read_graph(graph)["entities"] == [entity("A", "person", "first")]
    assert writes.create_entities(graph, entity_items([entity("A")])).value["skipped"] == ["A"]
    assert file_of(graph) == first + b"\n" + repeat + b"\n"


def test_deleting_a_repeated_entity_removes_its_repeats_too() -> None:
    graph = from_file(b'{"type":"entity","name":"A","entityType":"person","observations":["first"]}\n'
                      b'{"type":"entity","name":"A","entityType":"robot","observations":["second"]}\n' + NOTE)
    graph = writes.delete_entities(graph, ["A"]).graph
    # Otherwise the repeat would come back as "A" the next time the file is read.
    assert file_of(graph) == NOTE + b"\n"
    assert rules.read_graph(from_file(file_of(graph))) == {"entities": [], "relations": []}


def test_a_repeated_relation_goes_with_the_relation_it_repeats() -> None:
    line = b'{"type":"relation","from":"A","to":"B","relationType":"r"}'
    graph = from_file(b'{"type":"entity","name":"A","entityType":"t","observations":[]}\n'
                      b'{"type":"entity","name":"B","entityType":"t","observations":[]}\n'
                      + line + b"\n" + line + b"\n")
    assert rules.read_graph(graph)["relations"] == [relation("A", "B", "r")]
    removed = writes.delete_relations(graph, relation_items([relation("A", "B", "r")]))
    assert removed.value["deletedCount"] == 1
    assert b'"relation"' not in file_of(removed.graph)
    cascaded = writes.delete_entities(graph, ["B"]).graph
    assert b'"relation"' not in file_of(cascaded)


def test_relations_to_missing_entities_in_a_hand_edited_file_are_shown_and_deletable() -> None:
    graph = from_file(b'{"type":"entity","name":"A","entityType":"t","observations":[]}\n'
                      b'{"type":"relation","from":"A","to":"Gone","relationType":"r"}')
    assert rules.read_graph(graph)["relations"] == [relation("A", "Gone", "r")]
    change = writes.delete_entities(graph, ["Gone"])
    assert change.changed and change.value["notFound"] == ["Gone"]
    assert rules.read_graph(change.graph)["relations"] == []


def test_rejected_lines_are_not_part_of_the_graph_or_its_file() -> None:
    graph = from_file(b'{"type":"entity","name":"A","entityType":"t","observations":[]}\n{oops\n')
    assert [line.line for line in graph.rejected] == [b"{oops"]
    assert file_of(graph) == b'{"type":"entity","name":"A","entityType":"t","observations":[]}\n'


def test_records_written_in_another_spelling_are_written_back_in_the_file_format() -> None:
    # Each record's line is encoded when it is read, not copied from the file.
    graph = from_file(b'{"type": "entity", "name": "Zo\\u00eb", "entityType": "t", "observations": ["a\\/b"]}\n'
                      b'{ "relationType" : "r", "to" : "Zo\xc3\xab", "from" : "Zo\xc3\xab", "type" : "relation" }\n'
                      b'{"type": "entity", "name": "Zo\xc3\xab", "entityType": "repeat", "observations": []}')
    assert file_of(graph) == (
        b'{"type":"entity","name":"Zo\xc3\xab","entityType":"t","observations":["a/b"]}\n'
        b'{"type":"relation","from":"Zo\xc3\xab","to":"Zo\xc3\xab","relationType":"r"}\n'
        b'{"type":"entity","name":"Zo\xc3\xab","entityType":"repeat","observations":[]}\n')


@pytest.mark.parametrize(("write", "named"), [
    (lambda graph: writes.create_entities(graph, entity_items([entity("Carol"), entity("Dan\ud800")])),
     "The entity 'Dan\\ud800'"),
    (lambda graph: writes.create_entities(graph, entity_items([entity("Carol", "t\udfff")])), "The entity 'Carol'"),
    (lambda graph: writes.add_observations(graph, [ObservationsToAdd("Bob", ["ok", "x\udc80"])]),
     "The entity 'Bob'"),
    (lambda graph: writes.create_relations(graph, relation_items([relation("Alice", "Bob", "likes"),
                                                                  relation("Bob", "Alice", "\ud83d")])),
     "The relation type '\\ud83d'"),
], ids=["entity name", "entity type", "observation", "relation type"])
def test_an_unpaired_surrogate_fails_the_whole_write_naming_the_record(write: Any, named: str) -> None:
    before = file_of(PEOPLE)
    with pytest.raises(GraphError, match="unpaired surrogate") as caught:
        write(PEOPLE)
    message = str(caught.value)
    assert message.startswith(named) and message.endswith("Nothing was changed.")
    # The message goes back to the client as UTF-8, so the surrogate in it must be escaped.
    assert message.encode("utf-8").decode("utf-8") == message
    assert file_of(PEOPLE) == before


# -- the summary of a cut read_graph, from the graph's endpoint index -----------------------------------


@st.composite
def summarised_files(draw: st.DrawFn) -> bytes:
    """Memory files whose relations tie, loop back to their entity, or end at names no entity has."""
    names = draw(st.lists(st.sampled_from("abcdefghijklmn"), unique=True, min_size=1, max_size=12))
    ends = st.sampled_from([*names, "ghost", "phantom"])
    lines = [{"type": "entity", "name": name, "entityType": draw(st.sampled_from(["person", "place", "thing"])),
              "observations": []} for name in names]
    triples = draw(st.lists(st.tuples(ends, ends, st.sampled_from(["knows", "likes"])), unique=True, max_size=40))
    lines += [{"type": "relation", "from": a, "to": b, "relationType": kind} for a, b, kind in triples]
    return b"\n".join(msgspec.json.encode(line) for line in lines)


@settings(max_examples=200, deadline=None)
@given(data=summarised_files(), limit=st.sampled_from([20_000, 400, 150]),
       created=st.lists(st.tuples(st.sampled_from("abcxyz"), st.sampled_from("abcxyz")), max_size=4),
       gone=st.lists(st.sampled_from("abcdef"), max_size=2))
def test_the_graph_summarises_itself_as_its_lists_would_also_after_writes(
        data: bytes, limit: int, created: list[tuple[str, str]], gone: list[str]) -> None:
    graph = from_file(data)
    for step in range(3):
        listed = rules.read_graph(graph)
        expected = summarise(list(listed["entities"]), listed["relations"], limit)
        assert census.summary(graph, limit) == expected
        assert listed["entities"].summarise(limit) == expected
        assert census.summary(graph, limit) == expected, "kept for the next read of the same graph"
        if step == 0:
            names = [name for pair in created for name in pair]
            graph = writes.create_entities(graph, entity_items([entity(name, "new") for name in names])).graph
            graph = writes.create_relations(graph, relation_items([relation(a, b, "met") for a, b in created])).graph
        else:
            graph = writes.delete_entities(graph, gone).graph


def test_the_most_connected_tie_by_name_and_a_loop_counts_twice() -> None:
    graph = build(*(entity(name) for name in "dcba"), relations=(
        relation("d", "d"), relation("c", "a"), relation("b", "a", "likes"), relation("c", "b")))
    connected = census.summary(graph, 20_000)["mostConnected"]
    assert connected == [{"name": "a", "relations": 2}, {"name": "b", "relations": 2},
                         {"name": "c", "relations": 2}, {"name": "d", "relations": 2}]


census_names = [f"n{number:02d}" for number in range(24)]
census_steps = st.lists(st.one_of(
    st.tuples(st.just("relate"), st.sampled_from(census_names), st.sampled_from(census_names),
              st.sampled_from(["knows", "likes"])),
    st.tuples(st.just("unrelate"), st.sampled_from(census_names), st.sampled_from(census_names),
              st.sampled_from(["knows", "likes"])),
    st.tuples(st.just("create"), st.sampled_from(census_names), st.sampled_from(["person", "place", "thing"])),
    st.tuples(st.just("delete"), st.sampled_from(census_names)),
    st.tuples(st.just("summary"))), max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps=census_steps)
def test_the_summary_kept_up_to_date_by_writes_is_the_one_counted_afresh(steps: list[tuple[Any, ...]]) -> None:
    # More names than the summary lists, so that names enter and leave the most connected.
    graph = build(*(entity(name, "person") for name in census_names[:16]))
    for step in steps:
        kind = step[0]
        if kind == "summary":
            census.summary(graph, 20_000)  # from here on writes keep the census up to date
            continue
        try:
            if kind == "relate":
                graph = writes.create_relations(graph, relation_items([relation(step[1], step[2], step[3])])).graph
            elif kind == "unrelate":
                graph = writes.delete_relations(graph, relation_items([relation(step[1], step[2], step[3])])).graph
            elif kind == "create":
                graph = writes.create_entities(graph, entity_items([entity(step[1], step[2])])).graph
            else:
                graph = writes.delete_entities(graph, [step[1]]).graph
        except GraphError:
            continue  # a relation to an entity that does not exist: nothing changed
        afresh = from_file(file_of(graph))
        assert census.summary_counts(graph) == census.summary_counts(afresh)
        assert census.summary(graph, 20_000) == summarise(rules.read_graph(afresh)["entities"],
                                                        rules.read_graph(afresh)["relations"], 20_000)
