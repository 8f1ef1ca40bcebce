"""The word index: it may only narrow a search, so every entity that matches must be a candidate,
and an index kept up to date write by write must answer as one built afresh."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings
from write_items import entity_items

from memory_server.index.search import WordIndex, search_text, words_of
from memory_server.model import graph as rules
from memory_server.model import indexes, writes
from memory_server.model.graph import EMPTY, Graph
from memory_server.model.items import Entity, ObservationsToAdd, ObservationsToDelete
from memory_server.model.records import decode_file, join_lines
from memory_server.retrieval import query as retrieval

UNLIMITED = 10**9

# Few letters, so that words repeat and overlap; whitespace of several kinds, including the
# Unicode ones str.split() knows and ASCII file separators that are whitespace to Python too.
fields = st.text(alphabet="abAB éÉ\t\n\u3000\x1c\x00", max_size=12)
needles = st.text(alphabet="abAB éÉ\t\u3000\x1c\x00", max_size=5)


def texts_by_name(draw: Any) -> dict[str, str]:
    names = draw(st.lists(st.sampled_from("pqrstuvw"), unique=True, max_size=6))
    return {name: search_text(name, draw(fields), draw(st.lists(fields, max_size=3))) for name in names}


def test_words_are_runs_without_whitespace_or_field_separator() -> None:
    assert words_of(search_text("Ada Lovelace", "person", ["Wrote\u3000the first\tprogram", "x\x1cy"])) == {
        "ada", "lovelace", "person", "wrote", "the", "first", "program", "x", "y"}


@given(st.data(), needles)
def test_every_entity_containing_the_needle_is_a_candidate(data: st.DataObject, needle: str) -> None:
    texts = texts_by_name(data.draw)
    needle = needle.lower()
    candidates = WordIndex.build(texts.items()).candidates(needle, UNLIMITED)
    if candidates is None:
        # Only a needle the index cannot narrow for: empty, blank, or spanning two fields.
        assert not needle.split() or "\x00" in needle
        return
    assert {name for name, text in texts.items() if needle in text} <= candidates


def test_a_needle_inside_a_word_finds_the_entities_holding_that_word() -> None:
    index = WordIndex.build([("a", "alpha\x00beta"), ("b", "alphabet"), ("c", "gamma")])
    assert index.candidates("pha", UNLIMITED) == {"a", "b"}
    assert index.candidates("lph bet", UNLIMITED) == {"a", "b"}  # its longest part, "lph", decides
    assert index.candidates("zeta", UNLIMITED) == set()


def test_the_index_gives_up_past_its_limit_and_on_what_it_cannot_narrow() -> None:
    index = WordIndex.build([(name, "common") for name in "abcde"])
    assert index.candidates("common", 5) == set("abcde")
    assert index.candidates("common", 4) is None
    assert index.candidates("", UNLIMITED) is None
    assert index.candidates(" \t", UNLIMITED) is None
    assert index.candidates("on\x00c", UNLIMITED) is None


@settings(max_examples=200)
@given(st.data())
def test_an_index_updated_change_by_change_answers_as_one_built_afresh(data: st.DataObject) -> None:
    texts = texts_by_name(data.draw)
    index = WordIndex.build(texts.items())
    for _ in range(data.draw(st.integers(0, 6))):
        name = data.draw(st.sampled_from("pqrstuvwxyz"))
        after = data.draw(st.one_of(st.none(), fields.map(str.lower)))
        index = index.updated([(name, texts.get(name), after)])
        if after is None:
            texts.pop(name, None)
        else:
            texts[name] = after
    fresh = WordIndex.build(texts.items())
    for needle in [*{word for text in texts.values() for word in words_of(text)}, "a", "é", "ab"]:
        assert index.candidates(needle, UNLIMITED) == fresh.candidates(needle, UNLIMITED)


def test_the_index_before_an_update_is_left_as_it_was() -> None:
    before = WordIndex.build([("a", "tea"), ("b", "tea")])
    after = before.updated([("a", "tea", "coffee"), ("c", None, "tea")])
    assert before.candidates("tea", UNLIMITED) == {"a", "b"}
    assert before.candidates("coffee", UNLIMITED) == set()
    assert after.candidates("tea", UNLIMITED) == {"b", "c"}
    assert after.candidates("coffee", UNLIMITED) == {"a"}


def test_words_nobody_holds_any_more_are_dropped_from_the_vocabulary_in_time() -> None:
    index = WordIndex.build([("a", "w0")])
    for number in range(1, 50):
        index = index.updated([("a", f"w{number - 1}", f"w{number}")])
    assert index.candidates("w", UNLIMITED) == {"a"}
    assert len(index._vocabulary.split()) <= 3  # rebuilt as it went, not 50 words of which 49 are stale


# -- through the graph ---------------------------------------------------------------------------

entities = st.lists(st.fixed_dictionaries({
    "name": st.text(alphabet="abAB é\x00", min_size=1, max_size=4),
    "entityType": fields,
    "observations": st.lists(fields, max_size=3)}), max_size=8)


def graph_of(items: list[dict[str, Any]]) -> Graph:
    return writes.create_entities(EMPTY, entity_items(items)).graph


@settings(max_examples=200)
@given(entities, entities, st.lists(st.text(alphabet="abAB é", max_size=3), max_size=4), needles)
def test_search_with_the_index_equals_a_search_of_every_entity(
        first: list[dict[str, Any]], more: list[dict[str, Any]], dropped: list[str], query: str) -> None:
    # The index is made, then carried through writes of each kind before it is searched.
    indexed = indexes.with_word_index(graph_of(first))
    plain = graph_of(first)
    for operation, argument in (
            (writes.create_entities, entity_items(more)),
            (writes.add_observations, [ObservationsToAdd(item["name"], ["added tea", query]) for item in more]),
            (writes.delete_observations, [ObservationsToDelete(item["name"], item["observations"][:1]) for item in first]),
            (writes.delete_entities, dropped)):
        indexed, plain = operation(indexed, argument).graph, operation(plain, argument).graph
    assert indexed.words is not None and plain.words is None
    assert retrieval.matches(indexed, query) == retrieval.matches(plain, query)
    assert retrieval.matches(indexes.with_word_index(plain), query) == retrieval.matches(plain, query)


def test_an_index_made_for_an_earlier_graph_is_carried_to_the_graph_a_write_made_meanwhile() -> None:
    items = [{"name": f"e{n}", "entityType": "thing", "observations": [f"likes tea {n}"]} for n in range(10)]
    indexed = indexes.with_word_index(graph_of(items))
    # The write was computed from the graph before its index existed, as a concurrent write is.
    unindexed = replace(indexed, words=None)
    later = writes.add_observations(unindexed, [ObservationsToAdd("e3", ["plays chess"])]).graph
    later = writes.delete_entities(later, ["e4"]).graph
    later = writes.create_entities(later, [Entity("new", "thing", ["tea"])]).graph
    carried = indexes.carry_word_index(indexed, later)
    assert carried is not None and carried.words is not None
    for query in ("chess", "tea", "likes tea 4", "new", "e4"):
        assert retrieval.matches(carried, query) == retrieval.matches(later, query)


def test_an_index_is_not_carried_over_a_reload_that_changed_everything() -> None:
    items = [{"name": f"e{n}", "entityType": "thing", "observations": []} for n in range(100)]
    indexed = indexes.with_word_index(graph_of(items))
    reloaded = rules.graph_from_lines(decode_file(join_lines(rules.file_lines(indexed))))
    assert indexes.carry_word_index(indexed, reloaded) is None


def test_a_word_held_by_many_loses_exactly_the_holders_that_dropped_it() -> None:
    names = [f"e{n}" for n in range(40)]
    index = WordIndex.build((name, f"{name}\x00likes tea") for name in names)
    index = index.updated([("e7", "e7\x00likes tea", "e7\x00likes coffee"), ("e30", "e30\x00likes tea", None)])
    assert index.candidates("tea", UNLIMITED) == set(names) - {"e7", "e30"}
    assert index.candidates("likes", UNLIMITED) == set(names) - {"e30"}
    assert index.candidates("coffee", UNLIMITED) == {"e7"}


# Word characters of several kinds (letters with and without accents, digits, the underscore, a
# Roman numeral that is numeric) and a few that are not, so that boundaries fall everywhere.
word_texts = st.text(alphabet="ab_1Ⅻé -.\x00\u3000", max_size=16)


@given(st.text(alphabet="ab_1Ⅻé -.\x00\u3000", min_size=1, max_size=4), word_texts)
def test_a_whole_word_is_found_as_the_regular_expression_finds_it(needle: str, text: str) -> None:
    expected = re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", text) is not None
    assert retrieval.stands_alone(needle, text) == expected
