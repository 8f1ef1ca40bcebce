"""Search answers made of facts (memory_server/retrieval/answer.py, query.py, and the fact pages of
paging.py): pure functions over generated graphs, and the real server over pipes for the wire shape.

Pages are followed as a client follows them, by passing each nextCursor back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    MemoryServers,
    entity_record,
    era,
    memory_servers,
    record_line,
    server_environment,
    texts,
    write_reference_file,
)
from write_items import entity_items, relation_items

from memory_server.index import ranking
from memory_server.model import graph as rules
from memory_server.model import indexes, writes
from memory_server.retrieval import answer as answers
from memory_server.retrieval import query
from memory_server.retrieval import query as retrieval
from memory_server.retrieval.paging import fact_pages
from memory_server.retrieval.paging.cursors import request_key
from memory_server.retrieval.paging.pager import Pager
from memory_server.retrieval.paging.pages import Facts, Page

REQUEST = request_key("search_nodes", {"query": "x"})


def pages_of(pager: Pager, facts: Facts) -> list[Page]:
    pages = [pager.first_facts("search_nodes", REQUEST, facts)]
    while (cursor := json.loads(pages[-1].json).get("nextCursor")) is not None:
        pages.append(pager.next_page(cursor, "search_nodes", REQUEST))
        assert len(pages) <= len(facts.order) + 1, "paging does not move on"
    return pages


def graph_of(entities: list[dict[str, Any]], relations: list[dict[str, Any]] = ()) -> rules.Graph:  # type: ignore[assignment]
    graph = writes.create_entities(rules.EMPTY, entity_items(entities)).graph
    if relations:
        graph = writes.create_relations(graph, relation_items(list(relations))).graph
    return indexes.with_term_index(indexes.with_word_index(graph))


def shown_facts(pages: list[Page]) -> list[tuple[str, str]]:
    return [(entity["name"], observation) for page in pages for entity in json.loads(page.json)["entities"]
            for observation in entity["observations"]]


WORDS = ["cello", "tea", "chess", "Lisbon", "allergic", "shellfish", "dog", "collie", "run", "running", "blue"]
fact_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


@st.composite
def memories(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(["Alice", "Bob", "Carol", "default_user", "Dog Park", "tea house"]),
                          unique=True, min_size=1, max_size=6))
    return [{"name": name, "entityType": draw(st.sampled_from(["person", "place"])),
             "observations": draw(st.lists(fact_text, unique=True, max_size=40))} for name in names]


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(memories(), st.sampled_from(["cello", "what about dogs and running?", "Alice tea", "LISBON", "blue chess",
                                    "nothing matches zzz", "allergic"]),
       st.sampled_from([answers.MINIMUM_CHARACTERS, 900, answers.DEFAULT_CHARACTERS, 10_000]))
def test_pages_give_every_fact_once_each_within_its_size_and_partial_entities_say_so(
        entities: list[dict[str, Any]], question: str, characters: int) -> None:
    graph = graph_of(entities)
    facts = query.search(graph, question, characters=characters)
    pages = pages_of(Pager(), facts)
    expected = [(facts.entities[position]["name"], facts.entities[position]["observations"][index])
                for position, index in facts.order if index >= 0]
    assert sorted(shown_facts(pages)) == sorted(expected), "every fact of the answer exactly once"
    held = {entity["name"]: entity["observations"] for entity in entities}
    for page in pages:
        size = len(page.json) + sum(len(note.encode()) for note in page.notes)
        shown = json.loads(page.json)["entities"]
        # A page of words may stretch past its size (up to fact_pages.STRETCH times) only to show its
        # first LEAST_ENTITIES entities.
        assert size <= characters or (facts.words and size <= characters * fact_pages.STRETCH
                                      and len(shown) <= fact_pages.LEAST_ENTITIES), (size, len(shown))
        for entity in shown:
            whole = held[entity["name"]]
            if len(entity["observations"]) < len(whole):
                assert entity["partial"] == f"{len(entity['observations'])} of {len(whole)} observations shown; " \
                                            "open_nodes gives all"
            else:
                assert "partial" not in entity and sorted(entity["observations"]) == sorted(whole)


@SETTINGS
@given(memories(), st.sampled_from(["cello", "tea", "ALICE", "o", "lisbon allergic", "user", "dog park", " "]))
def test_a_query_some_entity_contains_answers_exactly_the_entities_that_contain_it(
        entities: list[dict[str, Any]], needle: str) -> None:
    graph = graph_of(entities)
    containing = [entity["name"] for entity in entities
                  if any(needle.lower() in field.lower()
                         for field in (entity["name"], entity["entityType"], *entity["observations"]))]
    if not containing:
        return
    facts = query.search(graph, needle, characters=answers.MINIMUM_CHARACTERS)
    assert not facts.words
    pages = pages_of(Pager(), facts)
    names = list(dict.fromkeys(entity["name"] for page in pages for entity in json.loads(page.json)["entities"]))
    assert sorted(names) == sorted(containing)
    assert names == [entity["name"] for entity in retrieval.matches(graph, needle)["entities"]]


def test_a_fitting_answer_to_a_contained_query_is_the_reference_s_whole_entities_byte_for_byte() -> None:
    entities = [{"name": "Ada", "entityType": "person", "observations": ["Born in 1815", "Wrote programs"]},
                {"name": "Engine", "entityType": "machine", "observations": ["Designed in 1837"]}]
    relations = [{"from": "Ada", "to": "Engine", "relationType": "wrote for"}]
    graph = graph_of(entities, relations)
    page = Pager().first_facts("search_nodes", REQUEST, query.search(graph, "1815"))
    assert page.json == json.dumps({"entities": [entities[0]], "relations": relations},
                                   separators=(",", ":")).encode()
    assert page.notes == ()


PERSON_FACTS = [f"Mentioned the weather on day {day}" for day in range(300)]


def profile() -> list[dict[str, Any]]:
    facts = PERSON_FACTS[:150] + ["Allergic to shellfish since childhood"] + PERSON_FACTS[150:]
    return [{"name": "default_user", "entityType": "person", "observations": facts},
            {"name": "Bob", "entityType": "person", "observations": ["Allergic to cats", "Plays the cello"]}]


def test_the_fact_that_answers_comes_first_out_of_hundreds_and_the_entity_is_marked_partial() -> None:
    graph = graph_of(profile())
    page = Pager().first_facts("search_nodes", REQUEST, query.search(graph, "What is default_user allergic to?"))
    value = json.loads(page.json)
    first = value["entities"][0]
    assert first["name"] == "default_user"
    assert first["observations"][0] == "Allergic to shellfish since childhood"
    assert first["partial"].endswith("of 301 observations shown; open_nodes gives all")
    assert len(page.json) + sum(len(note) for note in page.notes) <= answers.DEFAULT_CHARACTERS
    # The name narrows the search to default_user (Bob's allergy is not asked about) and is no
    # evidence for any of its facts: the one that answers is the whole answer, no filler.
    assert "open_nodes" in page.notes[0] and "nextCursor" not in value
    assert [entity["observations"] for entity in value["entities"]] == [["Allergic to shellfish since childhood"]]


def test_a_contained_query_in_a_large_entity_shows_the_observations_that_hold_it() -> None:
    graph = graph_of(profile())
    value = json.loads(Pager().first_facts("search_nodes", REQUEST, query.search(graph, "shellfish")).json)
    assert value["entities"] == [{"name": "default_user", "entityType": "person",
                                  "observations": ["Allergic to shellfish since childhood"],
                                  "partial": "1 of 301 observations shown; open_nodes gives all"}]


def test_a_small_entity_comes_whole_its_matching_observation_first() -> None:
    graph = graph_of([{"name": "turn 7", "entityType": "dialog_turn",
                       "observations": ["Session 3, 8 May 2023", "Caroline: I went to the support group"]}])
    value = json.loads(Pager().first_facts("search_nodes", REQUEST,
                                           query.search(graph, "When did Caroline go to a support group?")).json)
    assert value["entities"] == [{"name": "turn 7", "entityType": "dialog_turn", "observations": [
        "Caroline: I went to the support group", "Session 3, 8 May 2023"]}]


def test_relations_shown_touch_the_entities_on_the_page_and_the_rest_are_counted() -> None:
    people = [{"name": f"p{number}", "entityType": "person", "observations": [f"likes chess opening {number}"]}
              for number in range(40)]
    hub = {"name": "club", "entityType": "place", "observations": ["a quiet room"]}
    relations = [{"from": f"p{number}", "to": "club", "relationType": "member of"} for number in range(40)]
    relations += [{"from": "club", "to": "p0", "relationType": "founded by"}]
    graph = graph_of([*people, hub], relations)
    pages = pages_of(Pager(), query.search(graph, "who likes chess openings?"))
    assert len(pages) > 1
    for page in pages:
        value = json.loads(page.json)
        names = {entity["name"] for entity in value["entities"]}
        assert all(r["from"] in names or r["to"] in names for r in value["relations"])
        touching = [r for r in relations if r["from"] in names or r["to"] in names]
        left_out = len(touching) - len(value["relations"])
        if left_out:
            assert f"{left_out} more relation" in page.notes[0]


def test_limit_keeps_the_first_entities_with_all_their_facts() -> None:
    graph = graph_of(profile())
    facts = query.search(graph, "allergic", limit=1)
    assert [entity["name"] for entity in facts.entities] == ["default_user"]
    facts = query.search(graph, "who is allergic to cats?", limit=1)
    assert [entity["name"] for entity in facts.entities] == ["Bob"]


def test_semantic_candidates_join_by_reciprocal_rank_and_a_failing_model_leaves_the_words() -> None:
    entities = [{"name": "default_user", "entityType": "person",
                 "observations": ["Has a border collie named Biscuit", "Walks in the park daily"]},
                {"name": "Rex", "entityType": "dog", "observations": ["A stray"]}]
    graph = graph_of(entities)
    matched = query.matches(graph, "dog")  # the whole query: "dog" is Rex's type
    assert [entity["name"] for entity in matched["entities"]] == ["Rex"]
    words = retrieval.matches(graph, "my pet")
    assert words["entities"] == []

    def nearest(question: str, k: int) -> list[tuple[str, int, float]]:
        return [("default_user", 0, 0.71), ("nobody", 0, 0.5), ("default_user", 9, 0.4)]

    facts = answers.shape("my pet", [], answers.listed([]), 1_500, nearest=nearest,
                          lookup=lambda name: query.view_of(graph, name))
    assert [(facts.entities[position]["name"], index) for position, index in facts.order] == [
        ("default_user", 0), ("default_user", 1)]  # a small entity comes whole; unknown names are dropped

    def broken(question: str, k: int) -> list[tuple[str, int, float]]:
        raise RuntimeError("model failed")

    facts = answers.shape("does she walk?", words_of(graph, "does she walk?"), answers.listed([]), 1_500, nearest=broken)
    assert facts.words
    assert facts.order == [(0, 1), (0, 0)]
    assert query.semantic_nearest(graph) is None or callable(query.semantic_nearest(graph))


def words_of(graph: rules.Graph, question: str) -> list[Any]:
    return retrieval.matches(graph, question)["entities"]


def test_closeness_is_one_side_by_side_and_falls_with_distance() -> None:
    assert ranking.closeness(("support", "group"), frozenset({"support", "group"})) == 1.0
    assert ranking.closeness(("support", "x", "y", "group"), frozenset({"support", "group"})) == pytest.approx(1 / 3)
    assert ranking.closeness(("group", "x", "support", "group"), frozenset({"support", "group"})) == 1.0
    near = ranking.rank_facts("support group", [("a", "t", ["support group meeting", "support for the big group"])])
    assert [index for _, index, _ in near] == [0, 1]


@pytest.mark.parametrize("value", [0, 599, -5, "1500", 1.5, True])
def test_a_bad_characters_argument_is_refused_with_what_is_allowed(value: Any) -> None:
    with pytest.raises(answers.ArgumentError, match="at least 600"):
        answers.check_characters(value, 80_000)
    assert answers.check_characters(10**9, 80_000) == 80_000


@pytest.mark.parametrize(("raw", "expected"), [(None, answers.DEFAULT_CHARACTERS), ("", answers.DEFAULT_CHARACTERS),
                                               ("4000", 4000)])
def test_the_page_size_comes_from_the_environment(raw: str | None, expected: int) -> None:
    environ = {} if raw is None else {answers.CHARACTERS_VARIABLE: raw}
    assert answers.characters_from(environ) == expected


@pytest.mark.parametrize("raw", ["12", "lots", "-3", "1e4"])
def test_a_bad_page_size_in_the_environment_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match=answers.CHARACTERS_VARIABLE):
        answers.characters_from({answers.CHARACTERS_VARIABLE: raw})


# --- over real pipes ---------------------------------------------------------------------------------------


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "memory.jsonl"
    write_reference_file(path, [record_line(entity_record(entity)) for entity in profile()])
    return path


def test_the_server_answers_a_glance_marks_partial_entities_and_pages_to_every_fact(
        memory_servers: MemoryServers, era: str, profile_file: Path) -> None:
    client = memory_servers.client(era, profile_file)
    # MemoryClient.call checks every structuredContent against the advertised outputSchema.
    result = client.call("search_nodes", {"query": "What is default_user allergic to?"})
    first = result["structuredContent"]["entities"][0]
    assert first["observations"][0] == "Allergic to shellfish since childhood" and "partial" in first
    assert sum(len(text) for text in texts(result)) <= answers.DEFAULT_CHARACTERS
    seen: list[tuple[str, str]] = []
    arguments: dict[str, Any] = {"query": "Who is allergic?", "characters": 600}
    while True:
        value = client.ok("search_nodes", arguments)
        seen += [(entity["name"], observation) for entity in value["entities"]
                 for observation in entity["observations"]]
        if "nextCursor" not in value:
            break
        arguments = {**arguments, "cursor": value["nextCursor"]}
    # every fact that answers, once: default_user's, and Bob whole (a small entity); none of the 300 others
    assert sorted(seen) == sorted(set(seen)) == [("Bob", "Allergic to cats"), ("Bob", "Plays the cello"),
                                                 ("default_user", "Allergic to shellfish since childhood")]
    message = client.tool_error("search_nodes", {"query": "allergic", "characters": 10})
    assert "characters" in message and "600" in message
    assert client.ok("search_nodes", {"query": "cello"})["entities"] == [profile()[1]]


def test_a_bad_page_size_in_the_environment_ends_the_server_with_the_reason(profile_file: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "memory_server"], input=b"", capture_output=True, timeout=60,
                         env={**server_environment(profile_file), answers.CHARACTERS_VARIABLE: "12"})
    assert run.returncode != 0
    assert answers.CHARACTERS_VARIABLE.encode() in run.stderr


def test_the_ranking_index_is_asked_for_only_when_the_query_is_taken_as_words() -> None:
    plain = writes.create_entities(rules.EMPTY, entity_items(profile())).graph
    asked: list[rules.Graph] = []

    def ranked(graph: rules.Graph) -> rules.Graph:
        asked.append(graph)
        return indexes.with_term_index(graph)

    assert [entity["name"] for entity in query.search(plain, "cello", ranked=ranked).entities] == ["Bob"]
    assert asked == []
    assert query.search(plain, "who plays an instrument like the cello?", ranked=ranked).words
    assert asked == [plain]


def turns(count: int) -> list[dict[str, Any]]:
    """Dialog turns of about 330 bytes each, every one holding the word 'camping'."""
    return [{"name": f"turn {number}", "entityType": "dialog_turn",
             "observations": [f"Melanie: we went camping by the lake, number {number}, " + "and it rained a lot " * 10,
                              f"Session {number}, 8 May 2023"]} for number in range(count)]


def test_a_page_of_words_stretches_to_show_five_entities_and_no_more_facts_of_those_it_holds() -> None:
    graph = graph_of(turns(8))
    facts = query.search(graph, "where did Melanie go camping?")
    page = Pager().first_facts("search_nodes", REQUEST, facts)
    shown = json.loads(page.json)["entities"]
    assert len(shown) == fact_pages.LEAST_ENTITIES, "five turns, although three fill 1,500 characters"
    assert answers.DEFAULT_CHARACTERS < len(page.json) <= answers.DEFAULT_CHARACTERS * fact_pages.STRETCH
    assert all("partial" not in entity for entity in shown), "each turn whole"
    # a large entity already on the page gets no more facts from the stretch
    big = {"name": "default_user", "entityType": "person",
           "observations": [f"Went camping in year {year}, " + "a long story " * 20 for year in range(40)]}
    page = Pager().first_facts("search_nodes", REQUEST, query.search(graph_of([big]), "camping"))
    assert len(page.json) + sum(len(note.encode()) for note in page.notes) <= answers.DEFAULT_CHARACTERS


def test_a_small_entity_is_placed_by_all_its_observations_together() -> None:
    # The question's words are split between the turn's text and its date line in the first, and
    # all in one observation of the second, which holds fewer of them.
    split = {"name": "turn A", "entityType": "dialog_turn",
             "observations": ["Caroline: I joined the support group", "Session 4, 9 June 2023 pride parade"]}
    single = {"name": "turn B", "entityType": "dialog_turn",
              "observations": ["Caroline: the support group was nice", "Session 5, 1 July 2023"]}
    filler = [{"name": f"turn {number}", "entityType": "dialog_turn",
               "observations": [f"Melanie: talk {number}", "Session 1, 8 May 2023"]} for number in range(5)]
    graph = graph_of([single, split, *filler])
    facts = query.search(graph, "Caroline support group pride parade")
    first = json.loads(Pager().first_facts("search_nodes", REQUEST, facts).json)["entities"][0]
    assert first["name"] == "turn A" and first["observations"][0] == "Session 4, 9 June 2023 pride parade"


def test_an_answer_kept_for_its_cursors_holds_the_relations_of_its_graph_not_the_graph() -> None:
    """A page asks for its own relations; a later page must show the memory as the first did, so the
    answer keeps its graph's relations and links, but not the graph (entities, indexes), which a
    write replaces."""
    import gc

    people = [{"name": f"p{number}", "entityType": "person", "observations": [f"likes chess opening {number}"]}
              for number in range(40)]
    relations = [{"from": f"p{number}", "to": f"p{number + 1}", "relationType": "knows"} for number in range(39)]
    graph = graph_of(people, relations)
    facts = query.search(graph, "who likes chess openings?")
    reached, seen, todo = False, {id(facts)}, [facts]
    while todo and not reached:  # what the answer holds, all the way down
        for referent in gc.get_referents(todo.pop()):
            reached = reached or referent is graph
            if id(referent) not in seen:
                seen.add(id(referent))
                todo.append(referent)
    assert not reached
    assert any(referent is graph.relations for referent in gc.get_referents(facts.touching.args))
    pages = pages_of(Pager(), facts)
    assert len(pages) > 1
    for page in pages:
        value = json.loads(page.json)
        names = {entity["name"] for entity in value["entities"]}
        if not any("more relation" in note for note in page.notes):
            assert value.get("relations", []) == [r for r in relations if r["from"] in names or r["to"] in names]
