"""Live updates of the knowledge-graph resource, and one memory file shared by several server processes.

Legacy clients subscribe with resources/subscribe, modern ones with subscriptions/listen. "No
notification" is never proved by waiting: a later changing write is the barrier (its notification
must be the only one), or the server's whole remaining output is read up to end of output.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    LEGACY_SPEC,
    MODERN_SPEC,
    SUBSCRIPTION_ID,
    WAIT_SECONDS,
    Deadline,
    assert_schema,
    cancel,
    is_response_to,
)
from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    ACKNOWLEDGED,
    GRAPH_URI,
    MemoryClient,
    MemoryServers,
    entity,
    entity_record,
    era,
    memory_servers,
    record_line,
    relation,
    subscription_of,
    undated,
    undated_lines,
)

ALICE = entity("Alice", "person", ["Loves Jazz"])
BOB = entity("Bob", "person", ["Plays chess"])

# Writes that change nothing: each must go by without a notification.
NO_OP_WRITES = [
    ("create_entities", {"entities": [entity("Alice", "robot", ["ignored"])]}),
    ("create_relations", {"relations": []}),
    ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["Loves Jazz"]}]}),
    ("delete_entities", {"entityNames": ["Ghost"]}),
    ("delete_observations", {"deletions": [{"entityName": "Alice", "observations": ["never said"]}]}),
    ("delete_relations", {"relations": [relation("Alice", "Ghost", "haunts")]}),
]

# One write of each kind that changes the graph: each must be announced exactly once.
CHANGING_WRITES = [
    ("create_entities", {"entities": [ALICE, BOB]}),
    ("create_relations", {"relations": [relation("Alice", "Bob", "knows")]}),
    ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["Sings"]}]}),
    ("delete_observations", {"deletions": [{"entityName": "Alice", "observations": ["Sings"]}]}),
    ("delete_relations", {"relations": [relation("Alice", "Bob", "knows")]}),
    ("delete_entities", {"entityNames": ["Bob"]}),
]

# An atomic rewrite by a process that is no memory server: a temporary file renamed over the memory file.
REWRITE_SCRIPT = """
import os, sys
path, line = sys.argv[1], sys.argv[2]
with open(path, encoding="utf-8") as memory:
    text = memory.read().rstrip("\\n")
temporary = path + ".rewrite.tmp"
with open(temporary, "w", encoding="utf-8") as rewritten:
    rewritten.write(text + "\\n" + line)
os.replace(temporary, path)
"""


def subscribe(client: MemoryClient, listen_id: str = "watch") -> Any:
    """Subscribe to the graph in the client's era; the modern subscription's id, None for legacy."""
    if client.era == "legacy":
        assert client.request("resources/subscribe", {"uri": GRAPH_URI}) == {}
        return None
    client.send_request("subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH_URI]}},
                        request_id=listen_id)
    client.wait_for(lambda: acknowledgement(client, listen_id) is not None)
    return listen_id


def acknowledgement(client: MemoryClient, listen_id: Any) -> dict[str, Any] | None:
    return next((message for message in client.notifications
                 if message["method"] == ACKNOWLEDGED and subscription_of(message) == listen_id), None)


def check_update(message: dict[str, Any], era: str, listen_id: Any = None) -> None:
    if era == "legacy":
        assert message["params"] == {"uri": GRAPH_URI}, message
        assert_schema(LEGACY_SPEC, "ResourceUpdatedNotification", message)
    else:
        assert message["params"] == {"_meta": {SUBSCRIPTION_ID: listen_id}, "uri": GRAPH_URI}, message
        assert_schema(MODERN_SPEC, "ResourceUpdatedNotification", message)


def closure_of(client: MemoryClient, listen_id: Any) -> list[dict[str, Any]]:
    """Every response the server wrote for the listen request `listen_id`."""
    return [message for message in client.everything() if is_response_to(message, listen_id)]


# --- legacy: resources/subscribe --------------------------------------------------------------------------

def test_legacy_subscriber_gets_one_update_per_changing_write_and_none_after_unsubscribe(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    client = memory_servers.client("legacy", tmp_path / "memory.jsonl")
    subscribe(client)

    for count, (tool, arguments) in enumerate(CHANGING_WRITES, start=1):
        client.ok(tool, arguments)
        client.wait_updates(count)
        for no_op, no_op_arguments in NO_OP_WRITES:
            client.ok(no_op, no_op_arguments)
    client.graph()  # a round trip after the last change: everything owed before it has arrived
    assert len(client.updates()) == len(CHANGING_WRITES), f"a no-op write was announced: {client.updates()}"
    for message in client.updates():
        check_update(message, "legacy")

    assert client.request("resources/unsubscribe", {"uri": GRAPH_URI}) == {}
    client.ok("create_entities", {"entities": [BOB]})
    assert undated(client.graph()) == {"entities": [ALICE, BOB], "relations": []}
    client.process.close_stdin()
    client.drain()
    assert client.process.wait() == 0
    assert len(client.updates()) == len(CHANGING_WRITES), "an update arrived after unsubscribe"


def test_a_client_that_did_not_subscribe_gets_no_updates(memory_servers: MemoryServers, era: str,
                                                         tmp_path: Path) -> None:
    client = memory_servers.client(era, tmp_path / "memory.jsonl")
    for tool, arguments in CHANGING_WRITES:
        client.ok(tool, arguments)
    client.process.finish()
    assert [message for message in client.everything() if "method" in message] == []


# --- modern: subscriptions/listen -----------------------------------------------------------------------------

def test_modern_listens_are_acknowledged_notified_cancelled_and_closed_on_sigterm(
        memory_servers: MemoryServers, tmp_path: Path) -> None:
    client = memory_servers.client("modern", tmp_path / "memory.jsonl")
    unknown = "memory://somewhere-else"
    client.send_request("subscriptions/listen", {"notifications": {
        "resourceSubscriptions": [GRAPH_URI, unknown], "toolsListChanged": True}}, request_id="a")
    client.send_request("subscriptions/listen", {"notifications": {"resourceSubscriptions": [GRAPH_URI]}},
                        request_id=7)
    client.send_request("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, request_id="c")
    client.wait_for(lambda: all(acknowledgement(client, key) for key in ("a", 7, "c")))
    acknowledged = {key: acknowledgement(client, key) for key in ("a", 7, "c")}
    for message in acknowledged.values():
        assert_schema(MODERN_SPEC, "SubscriptionsAcknowledgedNotification", message)
    assert acknowledged["a"]["params"]["notifications"] == {"resourceSubscriptions": [GRAPH_URI]}
    assert acknowledged[7]["params"]["notifications"] == {"resourceSubscriptions": [GRAPH_URI]}
    assert acknowledged["c"]["params"]["notifications"] == {}, "the tool list never changes here"

    client.ok("create_entities", {"entities": [ALICE]})
    client.wait_updates(1, "a")
    client.wait_updates(1, 7)
    for tool, arguments in NO_OP_WRITES:
        client.ok(tool, arguments)
    client.ok("add_observations", {"observations": [{"entityName": "Alice", "contents": ["Sings"]}]})
    client.wait_updates(2, "a")
    client.wait_updates(2, 7)
    client.graph()
    assert len(client.updates("a")) == len(client.updates(7)) == 2, client.updates()

    client.process.send(cancel("a"))
    client.ok("create_entities", {"entities": [BOB]})
    client.wait_updates(3, 7)

    client.process.signal(signal.SIGTERM)
    client.drain()
    assert client.process.wait() == 0

    for key in ("a", 7, "c"):
        # the acknowledgement is the first message of each subscription
        first = next(message for message in client.everything() if subscription_of(message) == key)
        assert first["method"] == ACKNOWLEDGED, first
    for message in client.updates("a") + client.updates(7):
        check_update(message, "modern", subscription_of(message))
    assert len(client.updates("a")) == 2, "the cancelled listen got more"
    assert len(client.updates(7)) == 3
    assert client.updates("c") == [], "a listen that asked for no resource got an update"
    assert closure_of(client, "a") == [], "a cancelled request gets no response"
    for key in (7, "c"):
        (closure,) = closure_of(client, key)
        result = closure["result"]
        assert result["resultType"] == "complete" and result["_meta"][SUBSCRIPTION_ID] == key, closure
        assert_schema(MODERN_SPEC, "SubscriptionsListenResult", result)


# --- changes by other processes -----------------------------------------------------------------------------

@pytest.mark.file_store
@pytest.mark.parametrize("writer", ["second server", "plain rewrite"])
def test_a_change_by_another_process_is_announced_and_read(memory_servers: MemoryServers, era: str,
                                                           tmp_path: Path, writer: str) -> None:
    memory_file = tmp_path / "memory.jsonl"
    client = memory_servers.client(era, memory_file)
    listen_id = subscribe(client)
    client.ok("create_entities", {"entities": [ALICE]})
    client.wait_updates(1, listen_id)

    if writer == "second server":
        other = memory_servers.client("legacy" if era == "modern" else "modern", memory_file)
        other.ok("create_entities", {"entities": [BOB]})
    else:
        subprocess.run([sys.executable, "-c", REWRITE_SCRIPT, str(memory_file), record_line(entity_record(BOB))],
                       check=True, timeout=WAIT_SECONDS)

    # the watcher polls the file's signature; no bound on how soon, only a generous one on how late
    (_, external) = client.wait_updates(2, listen_id)
    check_update(external, era, listen_id)
    assert undated(client.graph()) == {"entities": [ALICE, BOB], "relations": []}


# --- sharing one file -------------------------------------------------------------------------------------------

SERVERS = 3
CALLS_EACH = 20


@pytest.mark.file_store
def test_several_servers_writing_one_file_at_once_lose_nothing(memory_servers: MemoryServers, era: str,
                                                               tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    clients = [memory_servers.client(era, memory_file) for _ in range(SERVERS)]
    expected = {index: [entity(f"server{index}-entity{call}", "test", [f"written by server {index}"])
                        for call in range(CALLS_EACH)] for index in range(SERVERS)}
    # Every request of every server is on the wire before any response is read: they all race.
    sent = {index: [client.send_request("tools/call", {"name": "create_entities", "arguments": {"entities": [item]}})
                    for item in expected[index]] for index, client in enumerate(clients)}
    deadline = Deadline(60)
    for index, client in enumerate(clients):
        for request_id, item in zip(sent[index], expected[index], strict=True):
            result = client.response(request_id, deadline.remaining())["result"]
            assert result.get("structuredContent") == {"entities": [item]}, result

    everything = [item for index in range(SERVERS) for item in expected[index]]
    for client in clients:
        graph = client.graph()
        assert sorted(item["name"] for item in graph["entities"]) == sorted(item["name"] for item in everything)
    assert sorted(undated_lines(memory_file)) == sorted(record_line(entity_record(item)) for item in everything)
    leftovers = sorted(path.name for path in tmp_path.iterdir())
    assert leftovers == ["cwd", "memory.jsonl"], "no lock, break guard or temporary file is left behind"
