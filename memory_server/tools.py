"""The nine memory tools: their declarations (as the reference server names and describes them,
extended where our README adds result fields) and the thin handlers that call the store."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import anyio
import msgspec

from protocol import Server, ToolError, ToolResult

from .retrieval import answer as answers
from .retrieval.paging import CursorError, Facts, Page, Pager, budget_from, request_key
from .storage.store import GraphError, GraphStore, NotInMemory, WriteResult

GRAPH_URI = "memory://knowledge-graph"


def _string(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def _strings(description: str | None = None) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, **({"description": description} if description else {})}


def _object(properties: dict[str, Any], *, closed: bool = False, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in optional],
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


def _entity(closed: bool = False) -> dict[str, Any]:
    return _object({
        "name": _string("The name of the entity"),
        "entityType": _string("The type of the entity"),
        "observations": _strings("An array of observation contents associated with the entity"),
    }, closed=closed)


def _relation(closed: bool = False) -> dict[str, Any]:
    return _object({
        "from": _string("The name of the entity where the relation starts"),
        "to": _string("The name of the entity where the relation ends"),
        "relationType": _string("The type of the relation"),
    }, closed=closed)


def _list(item: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    return {"type": "array", "items": item, **({"description": description} if description else {})}


GRAPH_OUTPUT = _object({"entities": _list(_entity(closed=True)), "relations": _list(_relation(closed=True))},
                       closed=True)
NEXT_CURSOR = _string("Present when the answer was cut to fit the model's context: pass it back as `cursor` "
                      "(with the same other arguments) for the next page")
CURSOR_INPUT = _string("The nextCursor of the previous page, to get the next page of a cut answer; "
                       "omit it for the first page")
PAGE_OUTPUT = _object({**GRAPH_OUTPUT["properties"], "nextCursor": NEXT_CURSOR}, closed=True,
                      optional=("nextCursor",))
SUMMARY = _object({
    "entities": {"type": "integer", "minimum": 0},
    "relations": {"type": "integer", "minimum": 0},
    "entityTypes": _list(_object({"entityType": _string(), "count": {"type": "integer", "minimum": 1}}, closed=True),
                         "The most common entity types, most common first"),
    "moreEntityTypes": {"type": "integer", "minimum": 0, "description": "How many entity types are not listed"},
    "mostConnected": _list(_object({"name": _string(), "relations": {
        "type": "integer", "minimum": 1,
        "description": "How many relations start or end there (one to itself counts twice)"}}, closed=True),
                           "The entities with the most relations, most first"),
}, closed=True)
SEARCH_OUTPUT = _object({
    "entities": _list(_object({**_entity()["properties"], "partial": _string(
        "Present when not every observation of the entity is shown: how many are; open_nodes gives all")},
        closed=True, optional=("partial",))),
    "relations": _list(_relation(closed=True)), "nextCursor": NEXT_CURSOR}, closed=True, optional=("nextCursor",))
GRAPH_PAGE_OUTPUT = _object({
    "summary": {**SUMMARY, "description": "On the first page of a cut read_graph: what the whole graph holds"},
    **PAGE_OUTPUT["properties"]}, closed=True, optional=("summary", "nextCursor"))
DELETE_OUTPUT = {"success": {"type": "boolean"}, "message": {"type": "string"}}
COUNTED_DELETE_OUTPUT = _object({**DELETE_OUTPUT, "deletedCount": {"type": "integer", "minimum": 0}}, closed=True)

WRITE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
DELETE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
READ = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def register_tools(server: Server, store: GraphStore, *, budget: int | None = None) -> None:
    """The nine tools on `server`. The three reads answer within `budget` characters, by default
    MEMORY_ANSWER_BUDGET (or its default): at start-up a bad value ends the process with the reason."""
    if budget is None:
        try:
            budget = budget_from(os.environ)
        except ValueError as error:
            # Before any protocol traffic: the client sees the server exit, its log shows why.
            raise SystemExit(f"mcp-server-memory: {error}") from None
    pager = Pager(budget)
    try:
        glance = min(answers.characters_from(os.environ), budget)
    except ValueError as error:
        raise SystemExit(f"mcp-server-memory: {error}") from None

    def announce(write: Callable[..., WriteResult]) -> Callable[[Any, threading.Event], WriteResult]:
        # Runs in the worker thread, so a change is announced even when the caller was cancelled
        # meanwhile (a write that got the lock is atomic and completes either way).
        def run(argument: Any, abandon: threading.Event) -> WriteResult:
            outcome = write(argument, abandon=abandon)
            if outcome.changed:
                server.resource_updated(GRAPH_URI)  # safe from any thread
            return outcome
        return run

    async def write(operation: Callable[..., WriteResult], argument: Any,
                    extra_notes: Callable[[WriteResult], list[str]] = lambda _: []) -> ToolResult:
        # Set when the caller is cancelled (or the server shuts down): a write still waiting for the
        # lock then gives up at once instead of landing after its client has gone.
        abandon = threading.Event()
        try:
            outcome = await anyio.to_thread.run_sync(announce(operation), argument, abandon, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            abandon.set()
            raise
        except GraphError as error:
            raise ToolError(str(error)) from error
        return ToolResult.of(outcome.value, *extra_notes(outcome), *outcome.notes)

    async def read(tool: str, arguments: dict[str, Any], answer: Callable[[bool], dict[str, Any] | Facts]) -> ToolResult:
        """The answer, or the page of it a cursor asks for, within the answer budget."""
        def page(in_memory: bool = False) -> Page:
            request = request_key(tool, arguments)
            if (cursor := arguments.get("cursor")) is not None:
                return pager.next_page(cursor, tool, request)
            value = answer(in_memory)
            if isinstance(value, Facts):
                return pager.first_facts(tool, request, value)
            return pager.first_page(tool, request, value["entities"], value["relations"],
                                    summarise_graph=tool == "read_graph")
        try:
            # A later page is pure work bounded by the budget (no file, no lock), and so is a read of
            # the graph in memory: no thread needed. A read that needs the file loaded, the cache
            # or an index made first goes to a worker, so the event loop keeps serving meanwhile.
            try:
                result = page(in_memory=True)
            except NotInMemory:
                result = await anyio.to_thread.run_sync(page)
        except (GraphError, CursorError, answers.ArgumentError) as error:
            raise ToolError(str(error)) from error
        if result.following is not None:
            # Right after this answer is written out (this handler returns to the engine, which
            # encodes and sends the answer in the same step of the event loop): the next page is made
            # while the client reads this one. A bounded piece of pure work, like a later page itself.
            # (Under another event loop than asyncio's, pages are made when asked for.)
            with suppress(RuntimeError):
                asyncio.get_running_loop().call_soon(pager.prepare, result)
        # The same shape as ToolResult.of: the JSON once as structured content, once as text
        # (already encoded as a JSON string when the page was prepared ahead).
        text: str | msgspec.Raw = result.json.decode() if result.text is None else msgspec.Raw(result.text)
        items: list[str | msgspec.Raw] = [text, *result.notes]
        return ToolResult([{"type": "text", "text": item} for item in items], msgspec.Raw(result.json))

    def skipped_note(outcome: WriteResult) -> list[str]:
        skipped = outcome.value.get("skipped")
        if not skipped:
            return []
        return [f"Skipped {len(skipped)} entit{'y' if len(skipped) == 1 else 'ies'} whose name already exists "
                f"(or repeats a name earlier in this call): {', '.join(skipped)}. Their observations were not "
                "added; use add_observations to extend an existing entity."]

    @server.tool("create_entities", title="Create Entities",
                 description="Create multiple new entities in the knowledge graph",
                 input_schema=_object({"entities": _list(_entity())}),
                 output_schema=_object({"entities": _list(_entity(closed=True)),
                                        "skipped": _strings("Names that were not created because they exist")},
                                       closed=True, optional=("skipped",)),
                 annotations=WRITE)
    async def create_entities(arguments: dict[str, Any]) -> ToolResult:
        return await write(store.create_entities, arguments["entities"], skipped_note)

    @server.tool("create_relations", title="Create Relations",
                 description="Create multiple new relations between entities in the knowledge graph. "
                             "Relations should be in active voice",
                 input_schema=_object({"relations": _list(_relation())}),
                 output_schema=_object({"relations": _list(_relation(closed=True))}, closed=True),
                 annotations=WRITE)
    async def create_relations(arguments: dict[str, Any]) -> ToolResult:
        return await write(store.create_relations, arguments["relations"])

    @server.tool("add_observations", title="Add Observations",
                 description="Add new observations to existing entities in the knowledge graph",
                 input_schema=_object({"observations": _list(_object({
                     "entityName": _string("The name of the entity to add the observations to"),
                     "contents": _strings("An array of observation contents to add"),
                 }))}),
                 output_schema=_object({"results": _list(_object({
                     "entityName": _string(), "addedObservations": _strings()}, closed=True))}, closed=True),
                 annotations=WRITE)
    async def add_observations(arguments: dict[str, Any]) -> ToolResult:
        return await write(store.add_observations, arguments["observations"])

    @server.tool("delete_entities", title="Delete Entities",
                 description="Delete multiple entities and their associated relations from the knowledge graph",
                 input_schema=_object({"entityNames": _strings("An array of entity names to delete")}),
                 output_schema=_object({**DELETE_OUTPUT, "notFound": _strings("Names that matched no entity")},
                                       closed=True),
                 annotations=DELETE)
    async def delete_entities(arguments: dict[str, Any]) -> ToolResult:
        return await write(store.delete_entities, arguments["entityNames"])

    @server.tool("delete_observations", title="Delete Observations",
                 description="Delete specific observations from entities in the knowledge graph",
                 input_schema=_object({"deletions": _list(_object({
                     "entityName": _string("The name of the entity containing the observations"),
                     "observations": _strings("An array of observations to delete"),
                 }))}),
                 output_schema=COUNTED_DELETE_OUTPUT,
                 annotations=DELETE)
    async def delete_observations(arguments: dict[str, Any]) -> ToolResult:
        return await write(store.delete_observations, arguments["deletions"])

    @server.tool("delete_relations", title="Delete Relations",
                 description="Delete multiple relations from the knowledge graph",
                 input_schema=_object({"relations": _list(_relation(), "An array of relations to delete")}),
                 output_schema=COUNTED_DELETE_OUTPUT,
                 annotations=DELETE)
    async def delete_relations(arguments: dict[str, Any]) -> ToolResult:
        return await write(store.delete_relations, arguments["relations"])

    @server.tool("read_graph", title="Read Graph",
                 description="Read the entire knowledge graph. A large graph comes in pages: the first one "
                             "starts with a summary (entity types, most connected entities); pass nextCursor "
                             "back as cursor for the next page",
                 input_schema=_object({"cursor": CURSOR_INPUT}, optional=("cursor",)),
                 output_schema=GRAPH_PAGE_OUTPUT, annotations=READ)
    async def read_graph(arguments: dict[str, Any]) -> ToolResult:
        return await read("read_graph", arguments, lambda in_memory: store.read_graph_for_pages(in_memory=in_memory))

    # search_nodes: the store finds the matching entities, retrieval.answer makes the answer of
    # their facts (best first, a glance per page: see docs/search.md).
    @server.tool("search_nodes", title="Search Nodes",
                 description="Search for nodes in the knowledge graph based on a query",
                 input_schema=_object({
                     "query": _string("The search query to match against entity names, types, and observation content"),
                     "limit": {"type": "integer", "minimum": 1, "description": "Return at most this many entities"},
                     "characters": {"type": "integer", "minimum": answers.MINIMUM_CHARACTERS, "description": (
                         "How large a page of the answer may be, in characters (default "
                         f"{glance:,}): the best-matching facts first; pass nextCursor back as cursor for more")},
                     "cursor": CURSOR_INPUT,
                 }, optional=("limit", "characters", "cursor")),
                 output_schema=SEARCH_OUTPUT, annotations=READ)
    async def search_nodes(arguments: dict[str, Any]) -> ToolResult:
        def found(in_memory: bool) -> Facts:
            characters = answers.check_characters(arguments.get("characters", glance), pager.budget)
            value = store.search_nodes(arguments["query"], None, in_memory=in_memory)
            if isinstance(value, Facts):  # a store that shapes the answer itself
                return value
            return answers.shape(arguments["query"], value["entities"], value["relations"], characters,
                                 limit=arguments.get("limit"))
        return await read("search_nodes", arguments, found)

    @server.tool("open_nodes", title="Open Nodes",
                 description="Open specific nodes in the knowledge graph by their names",
                 input_schema=_object({"names": _strings("An array of entity names to retrieve"),
                                       "cursor": CURSOR_INPUT}, optional=("cursor",)),
                 output_schema=PAGE_OUTPUT, annotations=READ)
    async def open_nodes(arguments: dict[str, Any]) -> ToolResult:
        return await read("open_nodes", arguments,
                          lambda in_memory: store.open_nodes(arguments["names"], in_memory=in_memory))
