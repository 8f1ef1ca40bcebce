"""Helpers for the memory-server tests: start `python -m memory_server` on a memory file, talk to it in
either protocol era, check every tool result, and read the memory file the way the reference writes it.

The subprocess itself is conftest's `StdioProcess`; this module only adds what is specific to the
memory server. Test modules import the fixtures they use from here (`era`, `memory_servers`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    REPO,
    SUBSCRIPTION_ID,
    WAIT_SECONDS,
    Deadline,
    StdioProcess,
    assert_legacy_result,
    assert_modern_result,
    initialize,
    is_response_to,
    modern_request,
    notification,
    parse_server_line,
    request,
)
from jsonschema import Draft202012Validator

import memory_server
from conformance.dated import DATED_KEYS, without_dates
from memory_server.retrieval.paging.pages import Facts

GRAPH_URI = "memory://knowledge-graph"
ERAS = ("legacy", "modern")
PACKAGE_DIR = Path(memory_server.__file__).resolve().parent

TOOL_NAMES = (
    "create_entities", "create_relations", "add_observations", "delete_entities",
    "delete_observations", "delete_relations", "read_graph", "search_nodes", "open_nodes",
)
READ_TOOLS = ("read_graph", "search_nodes", "open_nodes")
DELETE_TOOLS = ("delete_entities", "delete_observations", "delete_relations")
ADD_TOOLS = ("create_entities", "create_relations", "add_observations")

UPDATED = "notifications/resources/updated"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"


# --- the memory file ---------------------------------------------------------------------------------------

def entity(name: str, entity_type: str = "thing", observations: list[str] | None = None) -> dict[str, Any]:
    return {"name": name, "entityType": entity_type, "observations": list(observations or [])}


def relation(source: str, target: str, relation_type: str) -> dict[str, Any]:
    return {"from": source, "to": target, "relationType": relation_type}


def entity_record(item: dict[str, Any]) -> dict[str, Any]:
    """The reference's record of an entity: `type` first, then its fields in the reference's order."""
    return {"type": "entity", "name": item["name"], "entityType": item["entityType"],
            "observations": item["observations"]}


def relation_record(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "relation", "from": item["from"], "to": item["to"], "relationType": item["relationType"]}


def record_line(record: dict[str, Any]) -> str:
    """One record as the reference's JSON.stringify writes it: compact, non-ASCII as is, key order kept."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def reference_lines(graph: dict[str, Any]) -> list[str]:
    """The lines the reference would write for `graph`: entities first, then relations."""
    return ([record_line(entity_record(item)) for item in graph["entities"]]
            + [record_line(relation_record(item)) for item in graph["relations"]])


def write_reference_file(path: Path, lines: list[str]) -> None:
    """A memory file exactly as the reference saves one: lines joined by newlines, none after the last."""
    path.write_bytes("\n".join(lines).encode())


def file_lines(path: Path) -> list[str]:
    """The record lines of a memory file; a final newline (which the reference omits) ends the last line."""
    text = path.read_bytes().decode()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


STORED_DATES = ("createdAt", "updatedAt", "recordedAt", "happenedOn", "recordedBy")
"""The keys a dated entity line holds after the reference's four (docs/dates.md, docs/oauth.md)."""
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def _stored_problem(record: dict[str, Any]) -> str | None:
    """Why the dates stored on an entity line lack their documented shape, or None."""
    count = len(record["observations"])
    for key in ("createdAt", "updatedAt"):
        if key in record and not (isinstance(record[key], str) and _STAMP.fullmatch(record[key])):
            return f"{key} is not a UTC stamp"
    for key in ("recordedAt", "happenedOn", "recordedBy"):
        values = record.get(key, [None] * count)
        if not (isinstance(values, list) and len(values) == count):
            return f"{key} is not parallel to the observations"
        if not all(value is None or (isinstance(value, str) and value) for value in values):
            return f"{key} holds something other than texts and nulls"
        if key == "recordedAt" and not all(value is None or _STAMP.fullmatch(value) for value in values):
            return "recordedAt holds something other than UTC stamps"
    return None


def without_stored_dates(graph: dict[str, Any]) -> dict[str, Any]:
    """A graph as `export --format json` gives it with the stored dates and authors of each entity left
    out, once they are checked to have their documented shape."""
    entities = []
    for item in graph["entities"]:
        problem = _stored_problem(item)
        assert problem is None, f"{problem}: {item}"
        entities.append({key: value for key, value in item.items() if key not in STORED_DATES})
    return {**graph, "entities": entities}


def undated_lines(path: Path) -> list[str]:
    """The memory file's lines with the dates and authors of each entity line left out, once they
    are checked to have their documented shape: the reference's lines, for a test about what the
    file holds besides its dates (a test of the exact bytes is marked `reference_exact`)."""
    lines = []
    for line in file_lines(path):
        record = json.loads(line)
        if not (isinstance(record, dict) and record.get("type") == "entity"):
            lines.append(line)
            continue
        problem = _stored_problem(record)
        assert problem is None, f"{problem}: {line}"
        lines.append(record_line({key: value for key, value in record.items() if key not in STORED_DATES}))
    return lines


def _entities_in(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        for item in value:
            yield from _entities_in(item)
    elif isinstance(value, dict):
        if isinstance(value.get("name"), str) and isinstance(value.get("observations"), list):
            yield value
        for item in value.values():
            yield from _entities_in(item)


def undated(answer: Any) -> Any:
    """An answer (or graph) with the dates and authors of its entities left out, once each is checked
    to have its documented shape (conformance/dated.py): for a test about what an answer holds
    besides them, as the reference would give it."""
    plain = without_dates(answer)
    misshapen = [item for item in _entities_in(plain) if any(key in item for key in DATED_KEYS)]
    assert not misshapen, f"dated fields without their documented shape: {misshapen}"
    return plain


# --- tool results ---------------------------------------------------------------------------------------

def check_tool_result(result: dict[str, Any], output_schema: dict[str, Any]) -> None:
    """A successful result: structuredContent fits the tool's outputSchema, and the first text item is it as JSON."""
    assert not result.get("isError"), f"unexpected tool error: {result}"
    structured = result["structuredContent"]
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                for e in Draft202012Validator(output_schema).iter_errors(structured)]
    assert not problems, f"structuredContent breaks the outputSchema: {problems} in {structured}"
    first = result["content"][0]
    assert first["type"] == "text", result
    assert json.loads(first["text"]) == structured, f"first text item is not the structured content: {result}"


def texts(result: dict[str, Any]) -> list[str]:
    return [item["text"] for item in result["content"] if item["type"] == "text"]


# --- a client of one era ---------------------------------------------------------------------------------

class MemoryClient:
    """A client of one era over one server process.

    Legacy: the initialize handshake, then bare requests. Modern: server/discover, then every
    request carries the protocol version and client capabilities in `_meta`. Responses are
    matched by id; every notification read on the way is kept, in order, in `notifications`.
    """

    def __init__(self, process: StdioProcess, era: str) -> None:
        assert era in ERAS, era
        self.process = process
        self.era = era
        self.notifications: list[dict[str, Any]] = []
        self.opening: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._chosen_ids: set[Any] = set()
        self._stray_responses: list[dict[str, Any]] = []
        self._tools: dict[str, dict[str, Any]] | None = None

    def open(self) -> MemoryClient:
        if self.era == "legacy":
            self.opening = self.request("initialize", initialize()["params"])
            self.process.send(notification("notifications/initialized"))
        else:
            self.opening = self.request("server/discover")
        return self

    # requests ----------------------------------------------------------------------------------------

    def send_request(self, method: str, params: dict[str, Any] | None = None, request_id: Any = None) -> Any:
        if request_id is None:
            # an automatic id never reuses one the test chose itself (a listen may stay in flight)
            request_id = next(candidate for candidate in self._ids if candidate not in self._chosen_ids)
        else:
            self._chosen_ids.add(request_id)
        if self.era == "modern":
            self.process.send(modern_request(request_id, method, params))
        else:
            self.process.send(request(request_id, method, params))
        return request_id

    def response(self, request_id: Any, timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        """The response to `request_id`, reading (and keeping) whatever arrives before it."""
        for index, message in enumerate(self._stray_responses):
            if is_response_to(message, request_id):
                return self._stray_responses.pop(index)
        deadline = Deadline(timeout)
        while True:
            message = self._read(deadline.remaining())
            if is_response_to(message, request_id):
                return message
            if "method" not in message:
                self._stray_responses.append(message)

    def request(self, method: str, params: dict[str, Any] | None = None,
                timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        """Send a request and return its result; a JSON-RPC error fails the test."""
        response = self.response(self.send_request(method, params), timeout)
        assert "result" in response, f"{method} failed: {response}"
        self.check_era_shape(method, response["result"])
        return response["result"]

    def request_error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.response(self.send_request(method, params))
        assert "error" in response, f"{method} was expected to fail: {response}"
        return response["error"]

    def check_era_shape(self, method: str, result: dict[str, Any]) -> None:
        definition = {"initialize": "InitializeResult", "server/discover": "DiscoverResult",
                      "tools/list": "ListToolsResult", "tools/call": "CallToolResult",
                      "resources/list": "ListResourcesResult",
                      "resources/read": "ReadResourceResult"}.get(method)
        if definition is None:
            return
        if self.era == "legacy":
            assert_legacy_result(definition, result)
        else:
            assert_modern_result(definition, result, cached=method not in ("tools/call",))

    # tools --------------------------------------------------------------------------------------------

    @property
    def tools(self) -> dict[str, dict[str, Any]]:
        if self._tools is None:
            self._tools = {tool["name"]: tool for tool in self.request("tools/list")["tools"]}
        return self._tools

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tools/call result as sent; a successful one is checked against the tool's outputSchema."""
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        if not result.get("isError"):
            check_tool_result(result, self.tools[name]["outputSchema"])
        return result

    def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The structured content of a successful call."""
        result = self.call(name, arguments or {})
        assert not result.get("isError"), f"{name} failed: {result}"
        return result["structuredContent"]

    def tool_error(self, name: str, arguments: dict[str, Any]) -> str:
        """The text of a call that must fail with a tool error (a result, not a JSON-RPC error)."""
        result = self.call(name, arguments)
        assert result.get("isError") is True, f"{name} was expected to fail: {result}"
        return "\n".join(texts(result))

    def graph(self) -> dict[str, Any]:
        return self.ok("read_graph")

    # notifications ------------------------------------------------------------------------------------

    def updates(self, subscription: Any = None) -> list[dict[str, Any]]:
        """The resource-updated notifications so far; modern ones only of the given subscription."""
        return [message for message in self.notifications if message["method"] == UPDATED
                and (subscription is None or subscription_of(message) == subscription)]

    def wait_for(self, condition: Callable[[], bool], timeout: float = WAIT_SECONDS) -> None:
        """Read messages until `condition()` holds; fails the test when the timeout runs out first."""
        deadline = Deadline(timeout)
        while not condition():
            message = self._read(deadline.remaining())
            if "method" not in message:
                self._stray_responses.append(message)

    def wait_updates(self, count: int, subscription: Any = None, timeout: float = WAIT_SECONDS) -> list[dict]:
        self.wait_for(lambda: len(self.updates(subscription)) >= count, timeout)
        return self.updates(subscription)

    def everything(self) -> list[dict[str, Any]]:
        """Every message the server wrote so far, in order, whether or not it has been read here."""
        return [parse_server_line(line) for line in list(self.process.lines)]

    def drain(self, timeout: float = WAIT_SECONDS) -> list[dict[str, Any]]:
        """Everything still to come up to end of output (after stdin closed or a signal), kept as well."""
        rest = self.process.rest(timeout)
        for message in rest:
            if "method" in message:
                self.notifications.append(message)
            else:
                self._stray_responses.append(message)
        return rest

    def _read(self, timeout: float) -> dict[str, Any]:
        message = self.process.recv(timeout)
        if "method" in message:
            self.notifications.append(message)
        return message


def subscription_of(message: dict[str, Any]) -> Any:
    return message.get("params", {}).get("_meta", {}).get(SUBSCRIPTION_ID)


# --- starting servers -------------------------------------------------------------------------------------

def server_environment(memory_file: Path | str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment with MEMORY_FILE_PATH set as given (None: unset), then `extra`. Dates
    and the model are on, as the README installs the server, except in a test marked
    `reference_exact` (conftest's `shipped_configuration` sets the test's environment).

    The server runs the repository's code, as this test process imports it, even where the
    project is also installed (non-editable) into the environment."""
    environment = {key: value for key, value in os.environ.items() if key != "MEMORY_FILE_PATH"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    if memory_file is not None:
        environment.update(memory_environment(memory_file))
    return {**environment, **(extra or {})}


STORE = os.environ.get("MEMORY_TEST_STORE", "file")
"""Where the servers of the store-independent tests keep their memory: "file" (the default), or
"postgres" to run the same tests on a database (MEMORY_TEST_DATABASE_URL; .ci/run does both). A
test that looks at the memory file itself is marked `file_store` and runs on files only."""


def memory_environment(memory_file: Path | str) -> dict[str, str]:
    """The environment naming the test's memory: its file, or, on the database, a memory of its own
    named after that file (servers given one file share one memory, as they would share the file)."""
    if STORE == "file":
        return {"MEMORY_FILE_PATH": str(memory_file)}
    digest = hashlib.sha256(os.path.abspath(memory_file).encode()).hexdigest()[:32]
    return {"MEMORY_DATABASE_URL": os.environ["MEMORY_TEST_DATABASE_URL"], "MEMORY_NAME": f"test-{digest}"}


class MemoryServers:
    """Starts memory servers for one test and kills whatever is left of them at teardown."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[StdioProcess] = []

    def process(self, memory_file: Path | str | None, *, argv: list[str] | None = None, cwd: Path | None = None,
                env: dict[str, str] | None = None, umask: int | None = None) -> StdioProcess:
        # The working directory is the test's own, so a stray relative write could never land in the repo.
        command = [sys.executable, "-m", "memory_server", *(argv or [])]
        if umask is not None:
            # The shell sets the umask and then becomes the server: same process, same pipes.
            command = ["/bin/sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", *command]
        process = StdioProcess(command, cwd=cwd or self.workdir, env=server_environment(memory_file, env))
        self.started.append(process)
        return process

    def client(self, era: str, memory_file: Path | str, *, env: dict[str, str] | None = None,
               umask: int | None = None) -> MemoryClient:
        return MemoryClient(self.process(memory_file, env=env, umask=umask), era).open()

    def close(self) -> None:
        for process in self.started:
            process.kill()
            for line in list(process.lines):
                parse_server_line(line)


@pytest.fixture
def memory_servers(tmp_path: Path) -> Iterator[MemoryServers]:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    servers = MemoryServers(workdir)
    yield servers
    servers.close()


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


def comparable(answer: Any) -> Any:
    """A search answer comparable across stores and start states: a Facts as its entities, its order,
    the relations of all its entities (a page asks for those of its own), its size and its kind;
    anything else as it is."""
    if not isinstance(answer, Facts):
        return answer
    return (answer.entities, list(answer.order), answer.touching({entity["name"] for entity in answer.entities}),
            answer.characters, answer.words, answer.remark)
