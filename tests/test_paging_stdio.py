"""The answer budget and paging end to end: `python -m memory_server` over real pipes, in both eras.

Every page is checked against its tool's outputSchema (MemoryClient.call), its text against the
budget, and its JSON-RPC line against a few hundred KB; following cursors must give the whole
answer exactly once, and a cursor across writes continues the answer as it was.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    GRAPH_URI,
    MemoryClient,
    MemoryServers,
    entity_record,
    era,
    memory_servers,
    record_line,
    relation_record,
    server_environment,
    texts,
    write_reference_file,
)

BUDGET = 5_000
ENTITIES = [{"name": f"person_{i:03d}", "entityType": ("person", "place", "project")[i % 3],
             "observations": [f"Observation {slot} of person_{i:03d}: enjoys {('tea', 'chess')[i % 2]}"
                              for slot in range(3)]} for i in range(120)]
RELATIONS = [{"from": f"person_{i:03d}", "to": f"person_{(i * 7 + 1) % 120:03d}", "relationType": "knows"}
             for i in range(120)]


def write_graph(path: Path, entities: list[dict[str, Any]], relations: list[dict[str, Any]]) -> None:
    write_reference_file(path, [record_line(entity_record(e)) for e in entities] +
                         [record_line(relation_record(r)) for r in relations])


@pytest.fixture
def memory_file(tmp_path: Path) -> Path:
    path = tmp_path / "memory.jsonl"
    write_graph(path, ENTITIES, RELATIONS)
    return path


def client_with(servers: MemoryServers, era: str, memory_file: Path, budget: int | None = BUDGET) -> MemoryClient:
    env = {} if budget is None else {"MEMORY_ANSWER_BUDGET": str(budget)}
    return MemoryClient(servers.process(memory_file, env=env), era).open()


def last_line(client: MemoryClient) -> bytes:
    return client.process.lines[-1]


def follow(client: MemoryClient, tool: str, arguments: dict[str, Any], budget: int = BUDGET) -> list[dict[str, Any]]:
    """Every page of one answer, each checked against the budget; the structured contents."""
    pages = []
    cursor = None
    while True:
        result = client.call(tool, arguments if cursor is None else {**arguments, "cursor": cursor})
        assert not result.get("isError"), result
        assert sum(len(text) for text in texts(result)) <= budget, "the text the model gets stays in the budget"
        assert len(last_line(client)) <= 4 * budget, "the line carries the page twice at most, escaped"
        # Later pages are made ahead, their text encoded then: still the very JSON of the page.
        assert json.loads(texts(result)[0]) == result["structuredContent"]
        pages.append(result["structuredContent"])
        cursor = result["structuredContent"].get("nextCursor")
        if cursor is None:
            return pages
        assert len(texts(result)) == 2 and "nextCursor" in texts(result)[1]
        assert len(pages) < 200


def union(pages: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    return [e for page in pages for e in page["entities"]], [r for page in pages for r in page["relations"]]


@pytest.mark.file_store
def test_read_graph_pages_give_the_whole_graph_once(memory_servers: MemoryServers, era: str,
                                                    memory_file: Path) -> None:
    client = client_with(memory_servers, era, memory_file)
    pages = follow(client, "read_graph", {})
    assert len(pages) > 3
    assert union(pages) == (ENTITIES, RELATIONS)
    summary = pages[0]["summary"]
    assert summary["entities"] == 120 and summary["relations"] == 120
    assert {kind["entityType"]: kind["count"] for kind in summary["entityTypes"]} == {
        "person": 40, "place": 40, "project": 40}
    assert all("summary" not in page for page in pages[1:])
    # the resource is for programs: always the whole graph, in one piece
    resource = client.request("resources/read", {"uri": GRAPH_URI})["contents"][0]["text"]
    assert json.loads(resource) == {"entities": ENTITIES, "relations": RELATIONS}


@pytest.mark.file_store
def test_search_and_open_pages_give_the_whole_answer_once(memory_servers: MemoryServers, era: str,
                                                          memory_file: Path) -> None:
    client = client_with(memory_servers, era, memory_file)
    chess = [e for e in ENTITIES if "chess" in e["observations"][0]]
    pages = follow(client, "search_nodes", {"query": "chess"})
    # Facts are on exactly one page each; an entity split over two pages is marked partial on both.
    shown: list[dict[str, Any]] = []
    for page in pages:
        for entity in page["entities"]:
            if shown and shown[-1]["name"] == entity["name"]:
                shown[-1] = {**shown[-1], "observations": shown[-1]["observations"] + entity["observations"]}
            else:
                shown.append({key: value for key, value in entity.items() if key != "partial"})
            whole = next(e for e in chess if e["name"] == entity["name"])
            assert ("partial" in entity) == (len(entity["observations"]) < len(whole["observations"]))
    assert shown == chess
    # A page's relations touch its entities, those between two of them first.
    for page in pages:
        on_page = {entity["name"] for entity in page["entities"]}
        assert all(r["from"] in on_page or r["to"] in on_page for r in page["relations"])
        assert len(page["relations"]) <= len([r for r in RELATIONS if r["from"] in on_page or r["to"] in on_page])
    opened = [e["name"] for e in ENTITIES[::2]]
    wanted = set(opened)
    assert union(follow(client, "open_nodes", {"names": opened})) == (
        ENTITIES[::2], [r for r in RELATIONS if r["from"] in wanted or r["to"] in wanted])


@pytest.mark.file_store
def test_an_answer_that_fits_is_exactly_as_before(memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    small = tmp_path / "small.jsonl"
    write_graph(small, ENTITIES[:3], RELATIONS[:1])
    client = client_with(memory_servers, era, small, budget=None)
    result = client.call("read_graph", {})
    whole = {"entities": ENTITIES[:3], "relations": RELATIONS[:1]}
    assert result["content"] == [{"type": "text", "text": json.dumps(whole, separators=(",", ":"))}]
    assert result["structuredContent"] == whole and "isError" not in result
    # the default budget holds the 120 entities of the other tests whole
    big = tmp_path / "big.jsonl"
    write_graph(big, ENTITIES, RELATIONS)
    client = client_with(memory_servers, era, big, budget=None)
    assert client.ok("read_graph") == {"entities": ENTITIES, "relations": RELATIONS}


@pytest.mark.file_store
def test_search_limit_returns_the_first_matches_and_their_relations(memory_servers: MemoryServers, era: str,
                                                                   memory_file: Path) -> None:
    client = client_with(memory_servers, era, memory_file, budget=None)
    # A page of room enough shows every relation touching its entities, in graph order.
    found = client.ok("search_nodes", {"query": "tea", "limit": 4, "characters": 5_000})
    assert found["entities"] == [e for e in ENTITIES if "tea" in e["observations"][0]][:4]
    names = {e["name"] for e in found["entities"]}
    assert found["relations"] == [r for r in RELATIONS if r["from"] in names or r["to"] in names]
    for bad in (0, -1, 1.5, "3"):
        message = client.tool_error("search_nodes", {"query": "tea", "limit": bad})
        assert "limit" in message


@pytest.mark.file_store
def test_cursors_walk_the_answer_as_it_was_when_writes_come_between(memory_servers: MemoryServers, era: str,
                                                                    memory_file: Path) -> None:
    client = client_with(memory_servers, era, memory_file)
    first = client.ok("read_graph")
    client.ok("create_entities", {"entities": [{"name": "newcomer", "entityType": "person", "observations": []}]})
    client.ok("delete_entities", {"entityNames": [ENTITIES[-1]["name"]]})
    # another process sharing the file writes too
    other = client_with(memory_servers, era, memory_file)
    other.ok("add_observations", {"observations": [{"entityName": "person_000", "contents": ["changed"]}]})
    pages = [first]
    while (cursor := pages[-1].get("nextCursor")) is not None:
        result = client.call("read_graph", {"cursor": cursor})
        assert "as it was when the first page was made" in texts(result)[1]
        pages.append(result["structuredContent"])
    assert union(pages) == (ENTITIES, RELATIONS), "the consistent view of the first page, whole"
    fresh = union(follow(client, "read_graph", {}))
    assert [e["name"] for e in fresh[0]] == [e["name"] for e in ENTITIES[:-1]] + ["newcomer"]
    assert fresh[0][0]["observations"][-1] == "changed"


@pytest.mark.file_store
def test_bad_cursors_are_tool_errors_that_say_what_to_do(memory_servers: MemoryServers, era: str,
                                                         memory_file: Path) -> None:
    client = client_with(memory_servers, era, memory_file)
    cursor = client.ok("read_graph")["nextCursor"]
    forged = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
    for bad in ("", "garbage", forged, cursor + "x"):
        message = client.tool_error("read_graph", {"cursor": bad})
        assert "not valid" in message and "without a cursor" in message
    assert "not of search_nodes" in client.tool_error("search_nodes", {"query": "tea", "cursor": cursor})
    search_cursor = client.ok("search_nodes", {"query": "person"})["nextCursor"]
    assert "other arguments" in client.tool_error("search_nodes", {"query": "chess", "cursor": search_cursor})
    assert "cursor" in client.tool_error("read_graph", {"cursor": 42}), "the input schema names it"
    # another process (or this one after a restart) does not know the cursor
    other = client_with(memory_servers, era, memory_file)
    assert "do not survive a restart" in other.tool_error("read_graph", {"cursor": cursor})
    # and the server keeps serving
    assert client.ok("read_graph", {"cursor": cursor})["entities"]
    # the process keeps the last 16 cut answers: a 17th first page makes the oldest cursor expire
    for _ in range(16):
        client.ok("read_graph")
    assert "expired" in client.tool_error("read_graph", {"cursor": cursor})


@pytest.mark.file_store
def test_a_huge_observation_is_cut_within_the_budget_and_said(memory_servers: MemoryServers, era: str,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    huge = {"name": "manual", "entityType": "document", "observations": ["intro", "ü" * 20_000, "outro"]}
    write_graph(path, [huge], [])
    client = client_with(memory_servers, era, path)
    pages = follow(client, "read_graph", {})
    observations = [o for page in pages for e in page["entities"] for o in e["observations"]]
    assert observations[0] == "intro" and observations[-1] == "outro" and "[cut:" in observations[1]
    assert path.read_text().count("ü") == 20_000, "the memory keeps it whole"


@pytest.mark.parametrize("value", ["lots", "100", "-1", "80000.5"])
def test_a_bad_budget_stops_the_server_at_start_with_the_reason(memory_servers: MemoryServers, value: str,
                                                                memory_file: Path) -> None:
    process = memory_servers.process(memory_file, env={"MEMORY_ANSWER_BUDGET": value})
    assert process.wait() != 0
    assert "MEMORY_ANSWER_BUDGET must be a whole number of characters, at least 5000" in process.stderr
    assert repr(value) in process.stderr
    assert process.lines == [], "nothing on the protocol channel"


def test_help_names_the_budget_setting(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "memory_server", "--help"], capture_output=True, text=True,
                          env=server_environment(tmp_path / "memory.jsonl"), cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "MEMORY_ANSWER_BUDGET" in done.stdout and "default 80000" in done.stdout and "cursor" in done.stdout
