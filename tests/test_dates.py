"""Memory that knows when (issue 19 §2): dates on the memory file's lines, through the graph's writes,
the server's tools (a real subprocess, dates on), import, export and stats (the console script), and the
npm reference server itself (a real node process) reading a file that holds dates."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import StdioProcess
from hypothesis import example, given, settings
from hypothesis import strategies as st
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    MemoryClient,
    MemoryServers,
    entity,
    era,
    file_lines,
    memory_servers,
    reference_lines,
    relation,
    texts,
    write_reference_file,
)
from postgres_helpers import database_url  # noqa: F401  (a fixture)
from test_cli_commands import cli
from test_cli_import import reference_server  # noqa: F401  (a fixture)
from write_items import entity_items

from memory_server.model import dates, writes
from memory_server.model import graph as rules
from memory_server.model.graph import EMPTY, graph_from_lines
from memory_server.model.graph import file_lines as graph_lines
from memory_server.model.items import Entity, ObservationsToAdd, ObservationsToDelete
from memory_server.model.records import EntityRecord, Extended, decode_file, join_lines
from memory_server.retrieval import when
from memory_server.retrieval.search import search_within
from memory_server.storage.store import GraphStore

DATED = {"MEMORY_DATES": "on"}
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
T0, T1 = "2026-01-05T10:00:00Z", "2026-02-07T11:30:00Z"


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in file_lines(path)]


def stamp(moment: datetime) -> str:
    return dates.stamp_of(moment)


def undated(graph: dict[str, Any]) -> dict[str, Any]:
    """An answer without the dates (and authors, issue 32) it shows (what the reference would answer)."""
    return {"entities": [{key: value for key, value in item.items()
                          if key not in ("createdAt", "updatedAt", "observationDates", "observationAuthors")}
                         for item in graph["entities"]],
            "relations": graph["relations"]}


# --- the lines -------------------------------------------------------------------------------------


def test_a_dated_line_reads_in_one_pass_and_writes_back_byte_for_byte() -> None:
    line = (b'{"type":"entity","name":"Ann","entityType":"person","observations":["a","b"],'
            b'"createdAt":"2026-01-05T10:00:00Z","updatedAt":"2026-02-07T11:30:00Z",'
            b'"recordedAt":["2026-01-05T10:00:00Z",null],"happenedOn":[null,"2023-05-07"]}')
    [record] = decode_file(line + b"\n")
    assert type(record) is EntityRecord  # a known record, not one with extra fields
    assert record.recordedAt == [T0, None] and record.happenedOn == [None, "2023-05-07"]
    graph = graph_from_lines([record])
    assert join_lines(graph_lines(graph)) == line + b"\n"


def test_a_date_field_of_the_wrong_type_is_no_date_and_stays_on_the_line() -> None:
    line = (b'{"type":"entity","name":"Ann","entityType":"person","observations":["a"],'
            b'"createdAt":5,"recordedAt":["2026-01-05T10:00:00Z"],"colour":"red"}')
    [item] = decode_file(line)
    assert isinstance(item, Extended)
    assert item.record.createdAt is None and item.record.recordedAt == [T0]
    assert set(item.extra) == {"createdAt", "colour"}
    graph = graph_from_lines([item])
    assert json.loads(join_lines(graph_lines(graph))) == json.loads(line)
    # a write gives the entity a createdAt of its own? no: it keeps the one it has (none), and the odd one stays
    grown = writes.add_observations(graph, [ObservationsToAdd("Ann", ["b"])], T1).graph
    written = json.loads(join_lines(graph_lines(grown)))
    assert written["createdAt"] == 5 and written["colour"] == "red"
    assert written["recordedAt"] == [T0, T1] and written["updatedAt"] == T1


def test_a_file_without_dates_and_one_the_reference_wrote_load_and_save_unchanged() -> None:
    lines = reference_lines({"entities": [entity("Ann", "person", ["likes tea", "é😀"]), entity("Bo", "robot")],
                             "relations": [relation("Ann", "Bo", "built")]})
    ours = "".join(line + "\n" for line in lines).encode()
    reference = "\n".join(lines).encode()
    for data in (ours, reference):
        graph = graph_from_lines(decode_file(data))
        assert join_lines(graph_lines(graph)) == ours
        assert all(not dates.is_dated(node.record) for node in graph.entities.values())


# --- the graph's writes -----------------------------------------------------------------------------


def test_writes_given_the_time_record_it_and_writes_without_it_record_none() -> None:
    made = writes.create_entities(EMPTY, [Entity("Ann", "person", ["a"], happened_on="2023-05-07"),
                                          Entity("Bo", "robot", [])], T0)
    ann = made.graph.entities["Ann"].record
    assert (ann.createdAt, ann.updatedAt, ann.recordedAt, ann.happenedOn) == (T0, T0, [T0], ["2023-05-07"])
    bo = made.graph.entities["Bo"].record
    assert (bo.createdAt, bo.recordedAt, bo.happenedOn) == (T0, None, None)
    assert made.value == {"entities": [entity("Ann", "person", ["a"]), entity("Bo", "robot")]}

    grown = writes.add_observations(made.graph, [
        ObservationsToAdd("Ann", ["a", "b"], happened_on="2024-02-03T04:05:06+01:00"),
        ObservationsToAdd("Ann", ["c"])], T1).graph.entities["Ann"].record
    assert grown.observations == ["a", "b", "c"]
    assert grown.recordedAt == [T0, T1, T1]
    assert grown.happenedOn == ["2023-05-07", "2024-02-03T03:05:06Z", None]
    assert (grown.createdAt, grown.updatedAt) == (T0, T1)

    plain = writes.create_entities(EMPTY, entity_items([entity("Ann", "person", ["a"])]))
    assert plain.graph.entities["Ann"].record == EntityRecord("Ann", "person", ["a"])


def test_an_undated_entity_that_grows_dates_only_what_is_new() -> None:
    graph = graph_from_lines([EntityRecord("Ann", "person", ["old"])])
    record = writes.add_observations(graph, [ObservationsToAdd("Ann", ["new"])], T1).graph.entities["Ann"].record
    assert (record.createdAt, record.updatedAt, record.recordedAt) == (None, T1, [None, T1])
    assert rules.open_nodes(graph_from_lines([record]), ["Ann"])["entities"] == [
        {"name": "Ann", "entityType": "person", "observations": ["old", "new"], "updatedAt": T1[:10],
         "observationDates": [None, T1[:10]]}]


@pytest.mark.parametrize("given", ["yesterday", "2023-13-01", "07/05/2023", "", 20230507])
def test_a_malformed_happened_on_changes_nothing_and_says_what_is_accepted(given: object) -> None:
    graph = writes.create_entities(EMPTY, entity_items([entity("Ann", "person", ["a"])]), T0).graph
    for write in (lambda: writes.create_entities(graph, [Entity("Bo", "thing", [], happened_on=given)], T1),
                  lambda: writes.add_observations(graph, [ObservationsToAdd("Ann", ["b"], happened_on=given)],
                                                  T1)):
        with pytest.raises(rules.GraphError) as caught:
            write()
        assert "2023-05-07" in str(caught.value) and "Nothing was changed" in str(caught.value)


def test_deleting_observations_removes_their_dates() -> None:
    graph = writes.create_entities(EMPTY, entity_items([entity("Ann", "person", ["a", "b", "c"])]), T0).graph
    graph = writes.delete_observations(graph, [ObservationsToDelete("Ann", ["b"])], T1).graph
    record = graph.entities["Ann"].record
    assert (record.observations, record.recordedAt, record.updatedAt) == (["a", "c"], [T0, T0], T1)


def test_a_merge_keeps_the_dates_it_brings() -> None:
    mine = writes.create_entities(EMPTY, entity_items([entity("Ann", "person", ["a"])]), T0).graph
    theirs = [(EntityRecord("Ann", "person", ["a", "b"], T0, T0, [T0, "2025-01-01T00:00:00Z"], [None, "2020"]), None),
              (EntityRecord("Cy", "cat", ["purrs"], "2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z",
                            ["2024-06-01T00:00:00Z"]), None),
              (EntityRecord("Di", "dog", ["barks"]), None)]
    merged = writes.merge_graph(mine, theirs, [], T1).graph.entities
    ann, cy, di = merged["Ann"].record, merged["Cy"].record, merged["Di"].record
    assert (ann.recordedAt, ann.happenedOn, ann.updatedAt) == ([T0, "2025-01-01T00:00:00Z"], [None, "2020"], T1)
    assert (cy.createdAt, cy.updatedAt, cy.recordedAt) == ("2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z",
                                                           ["2024-06-01T00:00:00Z"])
    assert (di.createdAt, di.updatedAt, di.recordedAt) == (None, None, None)  # when it was made is not known


def test_dates_survive_a_save_and_a_load_by_another_store(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    clock = iter([T0, T1, T1]).__next__
    writer = GraphStore(memory_file, clock=clock)
    writer.create_entities([Entity("Ann", "person", ["a"], happened_on="2023-05"), Entity("Bo", "robot", ["b"])])
    writer.add_observations([ObservationsToAdd("Ann", ["c"])])
    saved = memory_file.read_bytes()
    reader = GraphStore(memory_file)  # no clock: it reads dates all the same, and writes none of its own
    assert reader.open_nodes(["Ann", "Bo"])["entities"] == [
        {**entity("Ann", "person", ["a", "c"]), "createdAt": T0[:10], "updatedAt": T1[:10],
         "observationDates": [f"happened 2023-05, recorded {T0[:10]}", T1[:10]]},
        {**entity("Bo", "robot", ["b"]), "createdAt": T0[:10], "updatedAt": T0[:10], "observationDates": [T0[:10]]}]
    reader.add_observations([ObservationsToAdd("Bo", ["d"])])
    after = memory_file.read_bytes().split(b"\n")
    assert after[0] == saved.split(b"\n")[0], "the line no write changed keeps its bytes"
    assert json.loads(after[1])["recordedAt"] == [T0, None] and json.loads(after[1])["updatedAt"] == T0


# --- the server, dates on ---------------------------------------------------------------------------


def test_the_server_records_when_and_answers_with_the_day(memory_servers: MemoryServers, era: str,
                                                           tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client(era, memory_file, env=DATED)
    before = datetime.now(UTC).replace(microsecond=0)
    created = client.ok("create_entities", {"entities": [
        {**entity("Caroline", "person", ["Joined a support group"]), "happenedOn": "2023-05-07"},
        entity("Mel", "person", ["Paints"])]})
    assert created == {"entities": [entity("Caroline", "person", ["Joined a support group"]),
                                    entity("Mel", "person", ["Paints"])]}
    client.ok("add_observations", {"observations": [{"entityName": "Mel", "contents": ["Ran a charity race"],
                                                     "happenedOn": "2023-05"}]})
    after = datetime.now(UTC)
    records = records_of(memory_file)
    caroline, mel = records
    assert STAMP.fullmatch(caroline["createdAt"]) and caroline["createdAt"] == caroline["updatedAt"]
    assert before <= datetime.fromisoformat(caroline["createdAt"]) <= after
    assert caroline["recordedAt"] == [caroline["createdAt"]] and caroline["happenedOn"] == ["2023-05-07"]
    assert mel["happenedOn"] == [None, "2023-05"] and len(mel["recordedAt"]) == 2
    day = caroline["createdAt"][:10]
    answer = client.ok("open_nodes", {"names": ["Caroline", "Mel"]})
    assert answer["entities"][0] == {"name": "Caroline", "entityType": "person",
                                     "observations": ["Joined a support group"], "createdAt": day,
                                     "updatedAt": day, "observationDates": [f"happened 2023-05-07, recorded {day}"],
                                     # the legacy client named itself in initialize: its name is the author (issue 32)
                                     **({"observationAuthors": ["tests"]} if era == "legacy" else {})}
    assert answer["entities"][1]["observationDates"] == [mel["recordedAt"][0][:10],
                                                         f"happened 2023-05, recorded {mel['recordedAt'][1][:10]}"]
    assert client.ok("read_graph")["entities"] == answer["entities"]
    assert client.ok("search_nodes", {"query": "support"})["entities"] == answer["entities"][:1]
    # the text item is the same JSON as the structured content (checked by `call`), dates included
    assert "happened 2023-05-07" in texts(client.call("search_nodes", {"query": "support"}))[0]


def test_a_malformed_date_is_a_tool_error_and_nothing_changes(memory_servers: MemoryServers, era: str,
                                                              tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client(era, memory_file, env=DATED)
    client.ok("create_entities", {"entities": [entity("Ann", "person", ["a"])]})
    before = memory_file.read_bytes()
    message = client.tool_error("add_observations", {"observations": [
        {"entityName": "Ann", "contents": ["b"], "happenedOn": "last tuesday"}]})
    assert "2023-05-07" in message and "happenedOn" in message
    message = client.tool_error("create_entities", {"entities": [{**entity("Bo"), "happenedOn": "2023-02-30"}]})
    assert "2023-05-07" in message
    for arguments in ({"query": "a", "since": "yesterday"}, {"query": "a", "until": "2023/05/07"},
                      {"query": "a", "since": "2024-01-01", "until": "2023-01-01"}):
        message = client.tool_error("search_nodes", arguments)
        assert ("since" in message or "until" in message), message
    assert "2023-05-07T14:30:00Z" in client.tool_error("search_nodes", {"query": "a", "since": "May"})
    assert memory_file.read_bytes() == before
    assert client.ok("search_nodes", {"query": "a"})["entities"][0]["name"] == "Ann"  # the server goes on


def dated_memory(path: Path, now: datetime) -> None:
    """A memory written a while ago: observations recorded 1, 2, 20 and 400 days before now, one
    undated, one told to have happened in May 2023."""
    newest, recent, older, oldest = (stamp(now - timedelta(days=days)) for days in (1, 2, 20, 400))
    lines = [
        {"type": "entity", "name": "default_user", "entityType": "person",
         "observations": ["Adopted a border collie", "Started learning the cello", "Allergic to shellfish",
                          "Moved to Lisbon", "Joined a support group"],
         "createdAt": oldest, "updatedAt": recent,
         "recordedAt": [recent, older, oldest, None, oldest], "happenedOn": [None, None, None, None, "2023-05-07"]},
        {"type": "entity", "name": "Biscuit", "entityType": "dog", "observations": ["A border collie puppy"],
         "createdAt": newest, "updatedAt": newest, "recordedAt": [newest]},
        {"type": "entity", "name": "Old friend", "entityType": "person", "observations": ["Plays the cello too"],
         "createdAt": oldest, "updatedAt": oldest, "recordedAt": [oldest]},
        {"type": "entity", "name": "Undated", "entityType": "note", "observations": ["cello lessons on Fridays"]},
        {"type": "relation", "from": "default_user", "to": "Biscuit", "relationType": "owns"},
    ]
    path.write_text("".join(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines))


def names(answer: dict[str, Any]) -> list[str]:
    return [item["name"] for item in answer["entities"]]


def test_search_within_since_and_until(memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    now = datetime.now(UTC)
    dated_memory(memory_file, now)
    before = memory_file.read_bytes()
    client = memory_servers.client(era, memory_file, env=DATED)
    week_ago = (now - timedelta(days=7)).date().isoformat()
    # the query's matches as usual (whole query first), only their observations within the window;
    # equally relevant, the more recent first (Biscuit's was recorded a day later)
    answer = client.ok("search_nodes", {"query": "border collie", "since": week_ago})
    assert names(answer) == ["Biscuit", "default_user"]
    user = answer["entities"][1]
    assert user["observations"] == ["Adopted a border collie"]
    assert user["partial"] == "1 of 5 observations shown; open_nodes gives all"
    assert answer["relations"] == [relation("default_user", "Biscuit", "owns")]
    # words, ranked, within the window; the undated entity and the old one are left out
    cello = client.ok("search_nodes", {"query": "cello", "since": (now - timedelta(days=30)).date().isoformat()})
    assert names(cello) == ["default_user"]
    assert cello["entities"][0]["observations"] == ["Started learning the cello"]
    assert names(client.ok("search_nodes", {"query": "cello", "until": (now - timedelta(days=300)).date().isoformat()})) \
        == ["Old friend"]
    assert names(client.ok("search_nodes", {"query": "cello", "limit": 1,
                                            "since": (now - timedelta(days=500)).date().isoformat()})) == ["default_user"]
    # what happened, as the user said, counts too
    may = client.ok("search_nodes", {"query": "support", "since": "2023-05", "until": "2023-05"})
    assert names(may) == ["default_user"] and may["entities"][0]["observations"] == ["Joined a support group"]
    assert client.ok("search_nodes", {"query": "support", "since": "2030-01-01"}) == {"entities": [], "relations": []}
    # without a window: as before, whole entities in the reference's order
    plain = client.ok("search_nodes", {"query": "cello"})
    assert names(plain) == ["default_user", "Old friend", "Undated"]
    assert len(plain["entities"][0]["observations"]) == 5 and "partial" not in plain["entities"][0]
    assert memory_file.read_bytes() == before, "a read writes nothing"


def test_time_phrases_in_a_query(memory_servers: MemoryServers, era: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    dated_memory(memory_file, datetime.now(UTC))
    client = memory_servers.client(era, memory_file, env=DATED)
    told = client.ok("search_nodes", {"query": "What did I tell you last week?"})
    assert names(told) == ["Biscuit", "default_user"]  # no word but filler: all of the week, the latest first
    user = told["entities"][1]
    assert user["observations"] == ["Adopted a border collie"] and "partial" in user
    assert names(client.ok("search_nodes", {"query": "cello in the past 30 days"})) == ["default_user"]
    assert names(client.ok("search_nodes", {"query": "support group in May 2023"})) == ["default_user"]
    # nothing about the cello yesterday: the words answer at any time, and the note says so
    # (a fact told long after it happened has no date of its own)
    anytime = client.call("search_nodes", {"query": "cello yesterday"})
    assert sorted(names(anytime["structuredContent"])) == ["Old friend", "Undated", "default_user"]
    assert "No fact answering these words is dated from " in "\n".join(texts(anytime))
    assert names(client.ok("search_nodes", {"query": "puppy yesterday"})) == ["Biscuit"]
    # a query that an entity holds whole is the reference's answer, phrase or not
    memory_file.write_text(memory_file.read_text() + json.dumps(
        {"type": "entity", "name": "Diary", "entityType": "note", "observations": ["we met last week"]}) + "\n")
    assert names(client.ok("search_nodes", {"query": "last week"})) == ["Diary"]


def test_memory_dates_off_writes_the_reference_lines(memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client("legacy", memory_file, env={"MEMORY_DATES": "off"})
    client.ok("create_entities", {"entities": [{**entity("Ann", "person", ["a"]), "happenedOn": "2023-05-07"}]})
    client.ok("add_observations", {"observations": [{"entityName": "Ann", "contents": ["b"]}]})
    # the date the model gave is still kept (it is what the user said), the time of writing is not
    assert records_of(memory_file) == [{"type": "entity", "name": "Ann", "entityType": "person",
                                        "observations": ["a", "b"], "happenedOn": ["2023-05-07", None]}]


# --- import, export, stats ----------------------------------------------------------------------------


def test_dates_survive_export_and_import_in_every_format(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    dated_memory(memory_file, datetime(2026, 11, 30, 12, tzinfo=UTC))
    original = graph_from_lines(decode_file(memory_file.read_bytes()))
    for form in ("jsonl", "json"):
        done = cli("export", "--format", form, "--file", str(memory_file))
        assert done.returncode == 0, done.stderr
        exported = tmp_path / f"export.{form}"
        exported.write_bytes(done.stdout)
        target = tmp_path / f"into-{form}.jsonl"
        imported = cli("import", str(exported), memory=target, env=DATED)
        assert imported.returncode == 0, imported.stderr
        again = graph_from_lines(decode_file(target.read_bytes()))
        assert [node.record for node in again.entities.values()] == [node.record for node in original.entities.values()]
    jsonl = cli("export", "--format", "jsonl", "--file", str(memory_file)).stdout
    assert jsonl == memory_file.read_bytes().rstrip(b"\n")

    graphml = ElementTree.fromstring(cli("export", "--format", "graphml", "--file", str(memory_file)).stdout)
    space = "{http://graphml.graphdrawing.org/xmlns}"
    node = next(item for item in graphml.iter(f"{space}node")
                if item.find(f"{space}data[@key='label']").text == "default_user")  # type: ignore[union-attr]
    data = {item.get("key"): item.text for item in node.iter(f"{space}data")}
    assert data["createdAt"] == "2025-10-26T12:00:00Z"
    assert data["observationDates"] == ("2026-11-28\n2026-11-10\n2025-10-26\n\n"
                                        "happened 2023-05-07, recorded 2025-10-26")

    markdown = cli("export", "--format", "markdown", "--file", str(memory_file)).stdout.decode()
    assert "- Adopted a border collie *(2026-11-28)*" in markdown
    assert "- Moved to Lisbon\n" in markdown
    assert "Created 2025-10-26, changed 2026-11-28." in markdown
    dot = cli("export", "--format", "dot", "--file", str(memory_file)).stdout.decode()
    assert "Joined a support group [happened 2023-05-07, recorded 2025-10-26]" in dot

    stats = cli("stats", "--file", str(memory_file)).stdout.decode()
    assert "dated         6 with the day they were recorded (2025-10-26 to 2026-11-29), " \
           "1 with the day they happened" in stats


def test_a_graph_without_dates_exports_as_before(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    lines = reference_lines({"entities": [entity("Ann", "person", ["a"])], "relations": []})
    write_reference_file(memory_file, lines)
    assert cli("export", "--format", "jsonl", "--file", str(memory_file)).stdout == memory_file.read_bytes()
    assert "createdAt" not in cli("export", "--format", "graphml", "--file", str(memory_file)).stdout.decode()
    stats = cli("stats", "--file", str(memory_file)).stdout.decode()
    assert "Observations    1\n" in stats and "dated" not in stats


# --- the npm reference server reads a file with dates -------------------------------------------------------


def test_the_reference_server_loads_a_file_with_dates_and_saving_loses_only_the_dates(
        reference_server: list[str], memory_servers: MemoryServers, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    ours = memory_servers.client("legacy", memory_file, env=DATED)
    ours.ok("create_entities", {"entities": [
        {**entity("Caroline", "person", ["Joined a support group", "Paints"]), "happenedOn": "2023-05-07"},
        entity("Mel", "person", ["Runs"])]})
    ours.ok("create_relations", {"relations": [relation("Caroline", "Mel", "knows")]})
    ours.ok("add_observations", {"observations": [{"entityName": "Mel", "contents": ["Swims"]}]})
    assert all("recordedAt" in record for record in records_of(memory_file)[:2])
    graph = undated(ours.graph())

    process = StdioProcess(reference_server, cwd=tmp_path, env={"PATH": "/usr/bin:/bin",
                                                                "MEMORY_FILE_PATH": str(memory_file)})
    try:
        reference = MemoryClient(process, "legacy").open()
        answer = reference.request("tools/call", {"name": "read_graph", "arguments": {}})
        assert not answer.get("isError"), answer
        assert json.loads(answer["content"][0]["text"]) == graph
        found = reference.request("tools/call", {"name": "search_nodes", "arguments": {"query": "support"}})
        assert json.loads(found["content"][0]["text"])["entities"] == graph["entities"][:1]
        # a write makes the reference save the whole file: the dates go, every observation stays
        added = reference.request("tools/call", {"name": "add_observations", "arguments": {
            "observations": [{"entityName": "Mel", "contents": ["Cycles"]}]}})
        assert not added.get("isError"), added
    finally:
        process.kill()
    saved = records_of(memory_file)
    assert all(set(record) <= {"type", "name", "entityType", "observations", "from", "to", "relationType"}
               for record in saved)
    assert saved[0]["observations"] == ["Joined a support group", "Paints"]
    assert saved[1]["observations"] == ["Runs", "Swims", "Cycles"]
    # and this server reads the saved file (undated now), and dates what is added from then on
    again = memory_servers.client("legacy", memory_file, env=DATED)
    assert undated(again.graph())["entities"][1]["observations"] == ["Runs", "Swims", "Cycles"]
    again.ok("add_observations", {"observations": [{"entityName": "Mel", "contents": ["Climbs"]}]})
    mel = records_of(memory_file)[1]
    assert mel["recordedAt"][:3] == [None, None, None] and STAMP.fullmatch(mel["recordedAt"][3])
    assert "createdAt" not in mel and DAY.match(mel["updatedAt"])


# --- the database store ------------------------------------------------------------------------------------


def test_the_database_store_keeps_dates_too(database_url: str) -> None:
    from postgres_helpers import memory_name

    from memory_server.retrieval.when import window_of
    from memory_server.storage.postgres.store import PostgresStore

    memory = memory_name("dates")
    with PostgresStore(database_url, memory, clock=iter([T0, T1]).__next__) as store:
        store.create_entities(entity_items([{**entity("Ann", "person", ["a"]), "happenedOn": "2023-05-07"}]))
        store.add_observations([ObservationsToAdd("Ann", ["b"])])
    with PostgresStore(database_url, memory) as store:  # another server, without a clock: reads the dates
        assert store.open_nodes(["Ann"])["entities"] == [
            {**entity("Ann", "person", ["a", "b"]), "createdAt": T0[:10], "updatedAt": T1[:10],
             "observationDates": [f"happened 2023-05-07, recorded {T0[:10]}", T1[:10]]}]
        window = window_of("2026-02-01", None)
        assert window is not None
        within = search_within(store, "a", "a", window, explicit=True)
        assert within is not None and within["entities"][0]["observations"] == ["b"]


# --- the whole range of years (0001 to 9999) ---------------------------------------------------------

MOMENTS = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)).map(
    lambda moment: moment.replace(microsecond=0, tzinfo=UTC))


@settings(max_examples=400, deadline=None)
@given(MOMENTS, MOMENTS)
@example(datetime(999, 5, 7, 10, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
@example(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), datetime(1, 1, 1, tzinfo=UTC))
def test_every_moment_of_every_year_is_stored_read_back_and_sorts_as_text(first: datetime, second: datetime) -> None:
    for moment in (first, second):
        written = dates.stamp_of(moment)
        assert STAMP.fullmatch(written), written
        assert dates.parse_when(written) == ((moment, dates.stored_span(written)[1]), written)  # type: ignore[index]
        assert dates.stored_span(written)[0] == moment  # type: ignore[index]
        assert dates.compact_day(written) == moment.date().isoformat()
    assert (dates.stamp_of(first) < dates.stamp_of(second)) == (first < second)


@settings(max_examples=400, deadline=None)
@given(st.dates(min_value=datetime(1, 1, 1).date(), max_value=datetime(9999, 12, 31).date()))
@example(datetime(9999, 12, 31).date())
@example(datetime(999, 5, 7).date())
def test_every_year_month_and_day_is_a_date_for_since_until_and_happened_on(day: Any) -> None:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    for given_text in (f"{day.year:04d}", f"{day.year:04d}-{day.month:02d}", day.isoformat()):
        (begins, ends), stored = dates.parse_when(given_text)
        assert stored == given_text and begins <= start < ends
        assert when.window_of(given_text, given_text) == (begins, ends)
    made = writes.create_entities(EMPTY, entity_items([{**entity("Ann", "person", ["a"]), "happenedOn": day.isoformat()}]), T0)
    assert made.graph.entities["Ann"].record.happenedOn == [day.isoformat()]


def test_the_edges_of_time_are_dates() -> None:
    end = datetime.max.replace(tzinfo=UTC)
    assert dates.parse_when("9999-12")[0] == (datetime(9999, 12, 1, tzinfo=UTC), end)
    assert dates.parse_when("9999-12-31")[0] == (datetime(9999, 12, 31, tzinfo=UTC), end)
    assert dates.parse_when("9999-12-31T23:59:59Z")[0][1] == end
    assert when.window_of("9999-12", "9999-12-31") == (datetime(9999, 12, 1, tzinfo=UTC), end)
    assert dates.parse_when("0999-05-07T10:00+00:00")[1] == "0999-05-07T10:00:00Z"
    for outside in ("0001-01-01T00:30+01:00", "9999-12-31T23:30-01:00"):
        with pytest.raises(ValueError, match="falls outside the years 0001 to 9999"):
            dates.parse_when(outside)
    for wrong in ("999-05-07", "0000", "10000-01-01"):
        with pytest.raises(ValueError, match="is not a date"):
            dates.parse_when(wrong)


def test_a_stamp_an_earlier_version_wrote_for_a_year_before_1000_is_read_as_that_moment() -> None:
    assert dates.stored_span("999-05-07T10:00:00Z") == dates.stored_span("0999-05-07T10:00:00Z") is not None
    assert dates.compact_day("999-05-07T10:00:00Z") == "0999-05-07"
    record = EntityRecord("Ann", "person", ["a"], None, None, ["999-05-07T10:00:00Z"])
    assert dates.latest(record) == "0999-05-07T10:00:00Z"


def test_the_server_keeps_dates_before_the_year_1000_and_in_the_year_9999(memory_servers: MemoryServers, era: str,
                                                                          tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client(era, memory_file, env=DATED)
    client.ok("create_entities", {"entities": [entity("Rome", "city", ["founded"])]})
    client.ok("add_observations", {"observations": [
        {"entityName": "Rome", "contents": ["sacked by the Vandals"], "happenedOn": "0455-06-02T12:00:00+00:00"},
        {"entityName": "Rome", "contents": ["Charlemagne crowned"], "happenedOn": "0800-12-25"},
        {"entityName": "Rome", "contents": ["still standing"], "happenedOn": "9999-12-31"}]})
    rome = records_of(memory_file)[0]
    assert rome["happenedOn"] == [None, "0455-06-02T12:00:00Z", "0800-12-25", "9999-12-31"]
    sacked = client.ok("search_nodes", {"query": "Vandals", "since": "0455", "until": "0455-06"})
    assert names(sacked) == ["Rome"] and sacked["entities"][0]["observations"] == ["sacked by the Vandals"]
    crowned = client.ok("search_nodes", {"query": "crowned", "since": "0800-12-25", "until": "0800-12-25"})
    assert crowned["entities"][0]["observations"] == ["Charlemagne crowned"]
    last = client.ok("search_nodes", {"query": "standing", "since": "9999-12", "until": "9999-12-31"})
    assert last["entities"][0]["observations"] == ["still standing"]
    shown = client.ok("open_nodes", {"names": ["Rome"]})["entities"][0]["observationDates"]
    assert [date.split(",")[0] for date in shown[1:]] == ["happened 0455-06-02", "happened 0800-12-25",
                                                          "happened 9999-12-31"]
