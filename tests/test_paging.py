"""The answer budget and paging (memory_server/retrieval/paging.py), as pure functions: lists in, pages out.

Pages are followed the way a client does, by passing each nextCursor back; the pages together
must give the full answer exactly once, each page within the budget. Over real pipes the same is
checked in test_paging_stdio.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_server.model.census import Listing, summarise
from memory_server.retrieval.paging.budget import BUDGET_VARIABLE, DEFAULT_BUDGET, MINIMUM_BUDGET, budget_from
from memory_server.retrieval.paging.cursors import CURSOR_LENGTH, CursorError, request_key
from memory_server.retrieval.paging.pager import Pager
from memory_server.retrieval.paging.pages import Page

READ_GRAPH = request_key("read_graph", {})


def page_size(page: Page) -> int:
    """The UTF-8 bytes of all text a page gives the model (never fewer than its characters)."""
    return len(page.json) + sum(len(note.encode()) for note in page.notes)


def all_pages(pager: Pager, entities: list[Any], relations: list[Any], tool: str = "read_graph",
              arguments: dict[str, Any] | None = None) -> list[Page]:
    request = request_key(tool, arguments or {})
    pages = [pager.first_page(tool, request, entities, relations, summarise_graph=tool == "read_graph")]
    while (cursor := json.loads(pages[-1].json).get("nextCursor")) is not None:
        assert isinstance(cursor, str) and len(cursor) == CURSOR_LENGTH
        pages.append(pager.next_page(cursor, tool, request))
        assert len(pages) <= 10 * (len(entities) + len(relations)) + 10, "paging does not move on"
    return pages


def joined(pages: list[Page]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Entities and relations of all pages; consecutive parts of one split entity merged back."""
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    for page in pages:
        value = json.loads(page.json)
        for entity in value["entities"]:
            if entities and entities[-1]["name"] == entity["name"]:
                entities[-1] = {**entities[-1], "observations": entities[-1]["observations"] + entity["observations"]}
            else:
                entities.append(entity)
        relations += value["relations"]
    return entities, relations


# --- generated graphs -------------------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8"), max_size=40)
# Shorter than any page (a longer observation is cut: tested on its own below).
long_text = st.one_of(text, st.text(st.characters(codec="utf-8"), min_size=100, max_size=300))


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = draw(st.lists(st.text(max_size=30), unique=True, max_size=60))
    entities = [{"name": name, "entityType": draw(st.sampled_from(["person", "place", "projekt", "événement"])),
                 "observations": draw(st.lists(long_text, max_size=12, unique=True))} for name in names]
    relations = []
    if names:
        triples = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(names), text),
                                unique=True, max_size=120))
        relations = [{"from": a, "to": b, "relationType": kind} for a, b, kind in triples]
    return entities, relations


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), budget=st.integers(MINIMUM_BUDGET, 12_000), tool=st.sampled_from(
    ["read_graph", "search_nodes", "open_nodes"]))
def test_following_cursors_yields_everything_exactly_once_within_the_budget(
        graph: tuple[list[dict[str, Any]], list[dict[str, Any]]], budget: int, tool: str) -> None:
    entities, relations = graph
    pages = all_pages(Pager(budget), entities, relations, tool, {"query": "x"} if tool == "search_nodes" else {})
    for page in pages:
        assert page_size(page) <= budget
        assert len(page.json.decode()) + sum(map(len, page.notes)) <= budget, "characters, too"
    assert joined(pages) == (entities, relations)
    full = msgspec.json.encode({"entities": entities, "relations": relations})
    if len(full) <= budget:
        assert pages == [Page(full)], "an answer that fits is the answer as it always was: no cursor, no note"
    else:
        assert all(len(page.notes) == 1 for page in pages)
        assert "nextCursor" not in json.loads(pages[-1].json)
        assert "last page" in pages[-1].notes[0]
        assert all("nextCursor" in json.loads(page.json) for page in pages[:-1])


def test_a_fitting_answer_is_byte_for_byte_the_uncut_one() -> None:
    entities = [{"name": "Zoë", "entityType": "person", "observations": ["likes \"quotes\"", "naïve\n"]}]
    relations = [{"from": "Zoë", "to": "Zoë", "relationType": "knows"}]
    page = Pager().first_page("read_graph", READ_GRAPH, entities, relations, summarise_graph=True)
    assert page == Page(msgspec.json.encode({"entities": entities, "relations": relations}))
    assert page.json == json.dumps({"entities": entities, "relations": relations}, separators=(",", ":"),
                                   ensure_ascii=False).encode()


def many(count: int, observations: int = 3) -> list[dict[str, Any]]:
    return [{"name": f"entity {index}", "entityType": ("person", "place", "project")[index % 3],
             "observations": [f"fact {slot} about entity {index}" for slot in range(observations)]}
            for index in range(count)]


def test_the_default_budget_holds_a_large_graph_in_pages_with_a_summary_first() -> None:
    entities = many(3000)
    relations = [{"from": f"entity {i}", "to": f"entity {(i * 7) % 3000}", "relationType": "knows"}
                 for i in range(3000)] + [{"from": "entity 5", "to": f"entity {i}", "relationType": "met"}
                                          for i in range(6, 46)]
    pages = all_pages(Pager(), entities, relations)
    assert len(pages) > 2 and all(page_size(page) <= DEFAULT_BUDGET for page in pages)
    assert joined(pages) == (entities, relations)
    first = json.loads(pages[0].json)
    assert list(first)[0] == "summary", "the summary comes at the top"
    summary = first["summary"]
    assert summary["entities"] == 3000 and summary["relations"] == 3040
    assert summary["entityTypes"] == [{"entityType": "person", "count": 1000}, {"entityType": "place", "count": 1000},
                                      {"entityType": "project", "count": 1000}]
    assert summary["mostConnected"][0] == {"name": "entity 5", "relations": 42}, "2 knows and 40 met"
    assert "summary" not in json.loads(pages[1].json), "only the first page carries it"
    note = pages[0].notes[0]
    assert "3,000 entities and 3,040 relations" in note and "cursor" in note and "nextCursor" in note
    assert "search_nodes" in note and "open_nodes" in note, "it says how to narrow the question down"
    assert "as it was when the first page was made" in pages[1].notes[0]


def test_search_and_open_pages_have_no_summary_and_say_how_to_narrow() -> None:
    entities = many(500)
    for tool, narrow in (("search_nodes", "narrower query"), ("open_nodes", "fewer names")):
        pages = all_pages(Pager(MINIMUM_BUDGET), entities, [], tool, {"query": "fact"})
        assert all("summary" not in json.loads(page.json) for page in pages)
        assert narrow in pages[0].notes[0] and f"call {tool} again" in pages[0].notes[0]



@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), budget=st.integers(MINIMUM_BUDGET, 12_000), oversized=st.booleans())
def test_pages_of_unparsed_json_with_a_known_summary_equal_pages_of_the_objects(
        graph: tuple[list[dict[str, Any]], list[dict[str, Any]]], budget: int, oversized: bool) -> None:
    # What a read_graph answered from the index cache gives the pager: each object's JSON as
    # msgspec.Raw and the summary counted when the cache was made. The pages must not differ.
    entities, relations = graph
    if oversized:  # an entity larger than a page: split, which needs its fields
        entities = [*entities, {"name": "big", "entityType": "person", "observations": ["y" * 90] * (budget // 40)}]
    raw_entities = Listing((msgspec.Raw(msgspec.json.encode(item)) for item in entities),
                           lambda limit: summarise(entities, relations, limit))
    raw_relations = [msgspec.Raw(msgspec.json.encode(item)) for item in relations]
    key = b"k" * 32
    assert all_pages(Pager(budget, key=key), raw_entities, raw_relations) == \
        all_pages(Pager(budget, key=key), entities, relations)

def test_summary_counts_types_and_connections_and_fits_its_share() -> None:
    entities = [{"name": f"n{i}", "entityType": f"type {i % 30}", "observations": []} for i in range(300)]
    relations = [{"from": "n1", "to": f"n{i}", "relationType": "r"} for i in range(2, 12)]
    summary = summarise(entities, relations, 10_000)
    assert len(summary["entityTypes"]) == 20 and summary["moreEntityTypes"] == 10
    assert summary["entityTypes"][0] == {"entityType": "type 0", "count": 10}
    assert summary["mostConnected"][0] == {"name": "n1", "relations": 10}
    small = summarise(entities, relations, 300)
    assert len(msgspec.json.encode(small)) <= 300 and small["entities"] == 300


def test_an_entity_larger_than_a_page_comes_in_parts_on_consecutive_pages() -> None:
    big = {"name": "default_user", "entityType": "person",
           "observations": [f"preference number {i}: " + "x" * 80 for i in range(400)]}
    entities = [*many(3), big, *many(2)]
    pages = all_pages(Pager(MINIMUM_BUDGET), entities, [])
    assert all(page_size(page) <= MINIMUM_BUDGET for page in pages)
    assert joined(pages) == (entities, [])
    parted = [page for page in pages if "'default_user' is too large for one page" in page.notes[0]]
    assert len(parted) >= 8 and "part 1 of" in parted[0].notes[0]


def test_an_observation_larger_than_a_page_is_cut_and_the_note_says_so() -> None:
    huge = "The whole manual: " + "é" * 30_000
    entities = [{"name": "manual", "entityType": "document", "observations": ["short", huge, "after"]}]
    pages = all_pages(Pager(MINIMUM_BUDGET), entities, [])
    assert all(page_size(page) <= MINIMUM_BUDGET for page in pages)
    (entity,), _ = joined(pages)
    shown = entity["observations"]
    assert shown[0] == "short" and shown[-1] == "after" and len(shown) == 3
    assert shown[1].startswith("The whole manual: éé") and "[cut:" in shown[1] and "of 30,018 characters" in shown[1]
    cut_notes = [page.notes[0] for page in pages if "observation 2 has 30,018 characters" in page.notes[0]]
    assert len(cut_notes) == 1 and "memory file keeps it whole" in cut_notes[0]


def test_what_cannot_fit_even_alone_is_named_not_silently_dropped() -> None:
    entities = [{"name": "N" * 6000, "entityType": "person", "observations": []}, *many(2)]
    relations = [{"from": "entity 0", "to": "entity 1", "relationType": "r" * 7000},
                 {"from": "entity 0", "to": "entity 1", "relationType": "knows"}]
    pages = all_pages(Pager(MINIMUM_BUDGET), entities, relations)
    assert all(page_size(page) <= MINIMUM_BUDGET for page in pages)
    assert joined(pages) == (entities[1:], relations[1:])
    notes = " ".join(page.notes[0] for page in pages)
    assert "Not shown at all: the entity 'NNNN" in notes and "Not shown at all: the relation 'entity 0'" in notes


# --- cursors ----------------------------------------------------------------------------------------------

@pytest.fixture
def cut() -> tuple[Pager, str]:
    pager = Pager(MINIMUM_BUDGET)
    first = pager.first_page("read_graph", READ_GRAPH, many(200), [])
    return pager, json.loads(first.json)["nextCursor"]


def test_a_cursor_can_be_followed_again_with_the_same_page(cut: tuple[Pager, str]) -> None:
    pager, cursor = cut
    assert pager.next_page(cursor, "read_graph", READ_GRAPH) == pager.next_page(cursor, "read_graph", READ_GRAPH)


@pytest.mark.parametrize("cursor", ["", "x", "not a cursor at all", "é" * CURSOR_LENGTH, "=" * CURSOR_LENGTH,
                                    "A" * CURSOR_LENGTH, "A" * (CURSOR_LENGTH + 4)])
def test_a_malformed_cursor_is_refused_with_what_to_do(cut: tuple[Pager, str], cursor: str) -> None:
    pager, _ = cut
    with pytest.raises(CursorError, match="not valid.*Call read_graph again without a cursor"):
        pager.next_page(cursor, "read_graph", READ_GRAPH)


def test_a_forged_cursor_is_refused(cut: tuple[Pager, str]) -> None:
    pager, cursor = cut
    raw = bytearray(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    raw[15] ^= 1  # another position in the same answer
    forged = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    with pytest.raises(CursorError, match="not valid"):
        pager.next_page(forged, "read_graph", READ_GRAPH)


def test_a_cursor_of_another_process_is_refused(cut: tuple[Pager, str]) -> None:
    _, cursor = cut
    with pytest.raises(CursorError, match="do not survive a restart"):
        Pager(MINIMUM_BUDGET).next_page(cursor, "read_graph", READ_GRAPH)


def test_a_cursor_of_another_tool_or_other_arguments_is_refused() -> None:
    pager = Pager(MINIMUM_BUDGET)
    request = request_key("search_nodes", {"query": "fact"})
    cursor = json.loads(pager.first_page("search_nodes", request, many(200), []).json)["nextCursor"]
    with pytest.raises(CursorError, match="continues an answer of search_nodes, not of read_graph"):
        pager.next_page(cursor, "read_graph", READ_GRAPH)
    with pytest.raises(CursorError, match="other arguments"):
        pager.next_page(cursor, "search_nodes", request_key("search_nodes", {"query": "other"}))
    with pytest.raises(CursorError, match="other arguments"):
        pager.next_page(cursor, "search_nodes", request_key("search_nodes", {"query": "fact", "limit": 3}))
    assert pager.next_page(cursor, "search_nodes", request_key("search_nodes", {"query": "fact", "cursor": "-"}))


def test_the_oldest_cut_answers_expire() -> None:
    pager = Pager(MINIMUM_BUDGET, keep=2)
    cursors = [json.loads(pager.first_page("read_graph", READ_GRAPH, many(100 + i), []).json)["nextCursor"]
               for i in range(3)]
    with pytest.raises(CursorError, match="expired.*last 2 cut answers.*without a cursor"):
        pager.next_page(cursors[0], "read_graph", READ_GRAPH)
    for cursor in cursors[1:]:
        pager.next_page(cursor, "read_graph", READ_GRAPH)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), budget=st.integers(MINIMUM_BUDGET, 9_000))
def test_a_page_made_ahead_is_the_page_a_cursor_gets_anyway(
        graph: tuple[list[dict[str, Any]], list[dict[str, Any]]], budget: int) -> None:
    entities, relations = graph
    key = b"the same key, so the same cursors"
    plain = all_pages(Pager(budget, key=key), entities, relations)
    pager = Pager(budget, key=key)
    pages = [pager.first_page("read_graph", READ_GRAPH, entities, relations, summarise_graph=True)]
    while (cursor := json.loads(pages[-1].json).get("nextCursor")) is not None:
        pager.prepare(pages[-1])
        page = pager.next_page(cursor, "read_graph", READ_GRAPH)
        assert page.text == msgspec.json.encode(page.json.decode()), "its text is its JSON as a JSON string"
        pages.append(page)
    assert [(page.json, page.notes) for page in pages] == [(page.json, page.notes) for page in plain]


def test_a_page_made_ahead_is_given_only_for_its_own_cursor_tool_and_arguments() -> None:
    pager = Pager(MINIMUM_BUDGET, keep=1)
    request = request_key("search_nodes", {"query": "fact"})
    first = pager.first_page("search_nodes", request, many(200), [])
    pager.prepare(first)
    cursor = json.loads(first.json)["nextCursor"]
    with pytest.raises(CursorError, match="not of read_graph"):
        pager.next_page(cursor, "read_graph", READ_GRAPH)
    with pytest.raises(CursorError, match="other arguments"):
        pager.next_page(cursor, "search_nodes", request_key("search_nodes", {"query": "other"}))
    second = pager.next_page(cursor, "search_nodes", request)
    assert second.text is not None, "made ahead"
    pager.prepare(second)
    later = json.loads(second.json)["nextCursor"]
    pager.first_page("read_graph", READ_GRAPH, many(200), [])  # the search's pages expire (keep=1)
    with pytest.raises(CursorError, match="expired"):
        pager.next_page(later, "search_nodes", request)


def test_pages_continue_the_answer_as_it_was_at_the_first_page() -> None:
    pager = Pager(MINIMUM_BUDGET)
    entities = many(200)
    first = pager.first_page("read_graph", READ_GRAPH, entities, [])
    later = many(300)  # what a fresh read would see now; the cursor still walks the old answer
    assert later
    pages = [first]
    while (cursor := json.loads(pages[-1].json).get("nextCursor")) is not None:
        pages.append(pager.next_page(cursor, "read_graph", READ_GRAPH))
    assert joined(pages) == (entities, [])


# --- the budget setting -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "budget"), [(None, DEFAULT_BUDGET), ("", DEFAULT_BUDGET), ("  ", DEFAULT_BUDGET),
                                               ("5000", 5000), (" 120000 ", 120_000)])
def test_the_budget_comes_from_the_environment(value: str | None, budget: int) -> None:
    assert budget_from({} if value is None else {BUDGET_VARIABLE: value}) == budget


@pytest.mark.parametrize("value", ["abc", "-5", "4999", "0", "8e4", "80_000", "80,000", "１２０００", "80000.0"])
def test_a_bad_budget_is_refused_with_what_is_allowed(value: str) -> None:
    with pytest.raises(ValueError, match=f"{BUDGET_VARIABLE} must be a whole number of characters, at least 5000"):
        budget_from({BUDGET_VARIABLE: value})


def test_a_pager_below_the_minimum_cannot_be_made() -> None:
    with pytest.raises(ValueError):
        Pager(MINIMUM_BUDGET - 1)
