"""What the pager keeps of a cut answer: a digest of its call (not the call's query, which may be
megabytes), and kept answers bounded by the bytes they hold as well as by their count."""

from __future__ import annotations

import json

import msgspec
import pytest
from test_paging import many

from memory_server.retrieval.paging.budget import MINIMUM_BUDGET
from memory_server.retrieval.paging.cursors import CursorError, request_key
from memory_server.retrieval.paging.kept import footprint
from memory_server.retrieval.paging.pager import Pager


def test_a_cut_answer_keeps_a_digest_of_its_call_not_its_query() -> None:
    query = "tea chess " * 1_200_000  # 12 MB
    key = request_key("search_nodes", {"query": query, "limit": 3, "cursor": "ignored"})
    assert len(key) == 32
    assert key == request_key("search_nodes", {"limit": 3, "query": query})
    assert key != request_key("search_nodes", {"query": query + "x", "limit": 3})
    assert key != request_key("read_graph", {"query": query, "limit": 3})
    pager = Pager(MINIMUM_BUDGET)
    first = pager.first_page("search_nodes", key, many(300), [])
    cursor = json.loads(first.json)["nextCursor"]
    assert pager.kept.kept_bytes < 64 * 1024, "the query is not kept"
    assert json.loads(pager.next_page(cursor, "search_nodes", key).json)["entities"]
    with pytest.raises(CursorError, match="other arguments"):
        pager.next_page(cursor, "search_nodes", request_key("search_nodes", {"query": query[:-1], "limit": 3}))


def test_kept_answers_are_bounded_by_bytes_the_oldest_forgotten() -> None:
    raw = [msgspec.Raw(msgspec.json.encode(item)) for item in many(400, observations=20)]  # as the cache gives them
    pager = Pager(MINIMUM_BUDGET, keep=100, keep_in_all=100)
    cursors = []
    for number in range(8):
        key = request_key("read_graph", {"n": number})
        cursors.append((key, json.loads(pager.first_page("read_graph", key, list(raw), []).json)["nextCursor"]))
        if number == 0:
            assert pager.kept.kept_bytes > sum(map(len, raw))
            pager.kept.keep_bytes = 3 * pager.kept.kept_bytes  # room for three such answers
        assert pager.kept.kept_bytes <= pager.kept.keep_bytes
    for key, cursor in cursors[:-3]:
        with pytest.raises(CursorError, match="expired"):
            pager.next_page(cursor, "read_graph", key)
    for key, cursor in cursors[-3:]:
        assert json.loads(pager.next_page(cursor, "read_graph", key).json)["entities"]


def test_the_newest_answer_is_kept_however_large() -> None:
    raw = [msgspec.Raw(msgspec.json.encode(item)) for item in many(200)]
    pager = Pager(MINIMUM_BUDGET, keep_bytes=1)
    key = request_key("read_graph", {})
    cursor = json.loads(pager.first_page("read_graph", key, raw, []).json)["nextCursor"]
    assert pager.kept.kept_bytes > pager.kept.keep_bytes
    assert json.loads(pager.next_page(cursor, "read_graph", key).json)["entities"]


def test_the_footprint_counts_what_an_answer_holds_of_its_own() -> None:
    raw = [msgspec.Raw(b'{"name":"a","entityType":"t","observations":[]}')] * 10
    pager = Pager(MINIMUM_BUDGET)
    pager.first_page("read_graph", request_key("read_graph", {}), raw * 20, [])
    (answer,) = pager.kept._answers.values()
    assert footprint(answer) >= sum(map(len, answer.units)) + 32
    assert pager.kept.kept_bytes == footprint(answer)
