"""The nine memory tools as a table: each row names a tool, declares its arguments (a msgspec
Struct, which gives both the advertised input schema and the check of each call), its result's
Struct (results.py, which gives the advertised output schema), its annotations, and the plain
`MemoryTools` method that serves it by calling the store.

The names, descriptions and schemas are the reference server's, extended where our tools add
result fields (skipped, notFound, deletedCount, nextCursor, summary) and a cursor argument.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from types import MethodType
from typing import Annotated, Any

import anyio
import msgspec
from msgspec import UNSET, Meta, UnsetType

from protocol import RequestContext, Server, ToolError, ToolResult

from . import results
from .model.items import Entity, ObservationsToAdd, ObservationsToDelete, Relation
from .retrieval import answer as answers
from .retrieval.paging.budget import budget_from
from .retrieval.paging.cursors import CursorError, request_key
from .retrieval.paging.pager import Pager
from .retrieval.paging.pages import Facts, Page
from .storage.interface import MemoryStore
from .storage.store import GraphError, NotInMemory, WriteResult

GRAPH_URI = "memory://knowledge-graph"
MAX_QUERY_WORDS = 1_000
"""Distinct words (whitespace-separated parts) a search_nodes query may hold: the work of a search
grows with them, and one client's query must not keep the others waiting for seconds."""
MAX_QUERY_CHARS = 100_000
"""Characters a search_nodes query may hold: the work of a search also grows with its length (every
step reads the whole query: the time phrase, the words, the match of the whole query), even when
it repeats a few words over megabytes."""
LONG_QUERY_CHARS = 4_096
"""A longer query is searched in a worker thread, so the event loop keeps serving meanwhile."""
_WORD = re.compile(r"\S+")


def bounded_query(query: str) -> str:
    """`query`, or a ToolError when it holds more than MAX_QUERY_WORDS distinct words, or is longer
    than MAX_QUERY_CHARS. Both are checked before any search work, reading at most MAX_QUERY_CHARS
    characters (the words counted only as far as needed: a flood of words is refused after the
    first thousand)."""
    if len(query) <= 2 * MAX_QUERY_WORDS:
        return query  # too short to hold that many words
    seen: set[str] = set()
    for word in _WORD.finditer(query, 0, MAX_QUERY_CHARS):
        seen.add(word.group())
        if len(seen) > MAX_QUERY_WORDS:
            raise ToolError(f"The query holds more than {MAX_QUERY_WORDS} distinct words, the most a search takes. "
                            "Search with a few specific words (names, types, the words of an observation).")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"The query is {len(query):,} characters long; a search takes at most {MAX_QUERY_CHARS:,}. "
                        "Search with a few specific words (names, types, the words of an observation).")
    return query


# -- arguments ------------------------------------------------------------------------------------------
# Field order is the advertised property order; a field's Meta(description) is its advertised words.
# Unknown fields are ignored, as the schemas (without additionalProperties) allow them. The items of
# the writes (Entity, Relation, ...) are the model's (model/items.py), which the stores take as they are.

Cursor = Annotated[str, Meta(description="The nextCursor of the previous page, to get the next page of a cut answer; "
                                         "omit it for the first page")]


class CreateEntities(msgspec.Struct):
    entities: list[Entity]


class CreateRelations(msgspec.Struct):
    relations: list[Relation]


class AddObservations(msgspec.Struct):
    observations: list[ObservationsToAdd]


class DeleteEntities(msgspec.Struct, rename="camel"):
    entity_names: Annotated[list[str], Meta(description="An array of entity names to delete")]


class DeleteObservations(msgspec.Struct):
    deletions: list[ObservationsToDelete]


class DeleteRelations(msgspec.Struct):
    relations: Annotated[list[Relation], Meta(description="An array of relations to delete")]


class ReadGraph(msgspec.Struct):
    cursor: Cursor | UnsetType = UNSET


class SearchNodes(msgspec.Struct):
    query: Annotated[str, Meta(description="The search query to match against entity names, types, and observation content")]
    limit: Annotated[int, Meta(ge=1, description="Return at most this many entities")] | UnsetType = UNSET
    since: Annotated[str, Meta(description=(
        "Optional: only observations recorded (or told to have happened) from this ISO 8601 date or "
        "date-time on, e.g. 2023-05-01 or 2023-05-01T09:00:00Z"))] | UnsetType = UNSET
    until: Annotated[str, Meta(description=(
        "Optional: only observations up to this ISO 8601 date or date-time (a date includes its whole day, "
        "2023-05 its whole month)"))] | UnsetType = UNSET
    characters: Annotated[int, Meta(ge=answers.MINIMUM_CHARACTERS, description=(
        f"How large a page of the answer may be, in characters (default {answers.DEFAULT_CHARACTERS:,}, or "
        f"{answers.CHARACTERS_VARIABLE}): the best-matching facts first; pass nextCursor back as cursor for more"))] \
        | UnsetType = UNSET
    cursor: Cursor | UnsetType = UNSET


class OpenNodes(msgspec.Struct):
    names: Annotated[list[str], Meta(description="An array of entity names to retrieve")]
    cursor: Cursor | UnsetType = UNSET


# -- annotations ---------------------------------------------------------------------------------------------

WRITE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
DELETE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
READ = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


# -- the tools ---------------------------------------------------------------------------------------------

class MemoryTools:
    """The tools as plain methods on one store. A write announces a change through `changed`; the
    three reads answer within `budget` characters, by default MEMORY_ANSWER_BUDGET (or its default):
    at start-up a bad value ends the process with the reason."""

    def __init__(self, store: MemoryStore, changed: Callable[[], None], *, budget: int | None = None) -> None:
        if budget is None:
            try:
                budget = budget_from(os.environ)
            except ValueError as error:
                # Before any protocol traffic: the client sees the server exit, its log shows why.
                raise SystemExit(f"mcp-server-memory: {error}") from None
        self.store = store
        self.changed = changed
        self.pager = Pager(budget)
        try:
            self.glance = min(answers.characters_from(os.environ), budget)
        except ValueError as error:
            raise SystemExit(f"mcp-server-memory: {error}") from None

    async def create_entities(self, arguments: CreateEntities, context: RequestContext) -> ToolResult:
        return await self._write(self.store.create_entities, arguments.entities, _skipped_note, author=author_of(context))

    async def create_relations(self, arguments: CreateRelations) -> ToolResult:
        return await self._write(self.store.create_relations, arguments.relations)

    async def add_observations(self, arguments: AddObservations, context: RequestContext) -> ToolResult:
        return await self._write(self.store.add_observations, arguments.observations, author=author_of(context))

    async def delete_entities(self, arguments: DeleteEntities) -> ToolResult:
        return await self._write(self.store.delete_entities, arguments.entity_names)

    async def delete_observations(self, arguments: DeleteObservations) -> ToolResult:
        return await self._write(self.store.delete_observations, arguments.deletions)

    async def delete_relations(self, arguments: DeleteRelations) -> ToolResult:
        return await self._write(self.store.delete_relations, arguments.relations)

    async def read_graph(self, arguments: ReadGraph, context: RequestContext) -> ToolResult:
        return await self._read("read_graph", arguments,
                                lambda in_memory: self.store.read_graph_for_pages(in_memory=in_memory), context)

    async def search_nodes(self, arguments: SearchNodes, context: RequestContext) -> ToolResult:
        # retrieval.search makes the answer of the store's candidates: rules 1 to 3 and the time
        # rules (see docs/search.md). A time window (since/until, or a phrase such as "last week")
        # keeps the facts within it, once words and meaning found them.
        from .retrieval import search, when  # loaded with the first search, not at start-up

        query = bounded_query(arguments.query)
        wanted = self.glance if isinstance(arguments.characters, UnsetType) else arguments.characters
        try:
            explicit = when.window_of(None if isinstance(arguments.since, UnsetType) else arguments.since,
                                      None if isinstance(arguments.until, UnsetType) else arguments.until)
        except ValueError as error:
            raise ToolError(str(error)) from None
        request = search.SearchRequest(
            query=query, limit=None if isinstance(arguments.limit, UnsetType) else arguments.limit,
            characters=answers.check_characters(wanted, self.pager.budget), window=explicit, now=datetime.now(UTC),
            hemisphere=when.hemisphere_from(os.environ))  # (checked at start: settings.py)

        def answer(in_memory: bool) -> dict[str, Any] | Facts:
            with self.store.sources(in_memory=in_memory) as sources:
                found = search.search(sources, request)
            if found is None:
                raise NotInMemory
            return found
        return await self._read("search_nodes", arguments, answer, context, long=len(request.query) > LONG_QUERY_CHARS)

    async def open_nodes(self, arguments: OpenNodes, context: RequestContext) -> ToolResult:
        return await self._read("open_nodes", arguments,
                                lambda in_memory: self.store.open_nodes(arguments.names, in_memory=in_memory), context)

    # -- how a write and a read are served -----------------------------------------------------------

    async def _write(self, operation: Callable[..., WriteResult], argument: Any,
                     extra_notes: Callable[[WriteResult], list[str]] = lambda _: [], **options: Any) -> ToolResult:
        """`operation` on the call's items (and `options`: who writes), in a worker thread."""
        # Set when the caller is cancelled (or the server shuts down): a write still waiting for the
        # lock then gives up at once instead of landing after its client has gone.
        abandon = threading.Event()

        def run() -> WriteResult:
            # In the worker thread, so a change is announced even when the caller was cancelled
            # meanwhile (a write that got the lock is atomic and completes either way).
            outcome = operation(argument, abandon=abandon, **options)
            if outcome.changed:
                self.changed()  # safe from any thread
            return outcome

        try:
            outcome = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            abandon.set()
            raise
        except GraphError as error:
            raise ToolError(str(error)) from error
        return ToolResult.of(outcome.value, *extra_notes(outcome), *outcome.notes)

    async def _read(self, tool: str, arguments: ReadGraph | SearchNodes | OpenNodes,
                    answer: Callable[[bool], dict[str, Any] | Facts], context: RequestContext, *,
                    long: bool = False) -> ToolResult:
        """The answer, or the page of it a cursor asks for, within the answer budget (a cut answer
        is kept among the pages of the client that asked, as its transport tells clients apart)."""
        pager = self.pager

        def page(in_memory: bool = False) -> Page:
            request = request_key(tool, msgspec.to_builtins(arguments))
            if not isinstance(arguments.cursor, UnsetType):
                return pager.next_page(arguments.cursor, tool, request)
            value = answer(in_memory)
            if isinstance(value, Facts):
                return pager.first_facts(tool, request, value, client=context.client)
            return pager.first_page(tool, request, value["entities"], value["relations"],
                                    summarise_graph=tool == "read_graph", client=context.client)
        try:
            # A later page is pure work bounded by the budget (no file, no lock), and so is a read of
            # the graph in memory: no thread needed. A read that needs the file loaded, the cache
            # or an index made first goes to a worker, so the event loop keeps serving meanwhile.
            # A long query (`long`) is work of its own size: a worker makes its answer.
            if long:
                result = await anyio.to_thread.run_sync(page)
            else:
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
            asyncio.get_running_loop().call_soon(pager.prepare, result)
        # The same shape as ToolResult.of: the JSON once as structured content, once as text
        # (already encoded as a JSON string when the page was prepared ahead).
        text: str | msgspec.Raw = result.json.decode() if result.text is None else msgspec.Raw(result.text)
        items: list[str | msgspec.Raw] = [text, *result.notes]
        return ToolResult([{"type": "text", "text": item} for item in items], msgspec.Raw(result.json))


def author_of(context: RequestContext) -> str | None:
    """Who writes (see model/authors.py): the signed-in user (OAuth's sub), else the name the client
    gave in its clientInfo, else nobody known. An argument cannot name one (model/items.py 2)."""
    if context.user:
        return context.user
    name = (context.client_info or {}).get("name")
    return name if isinstance(name, str) and name.strip() else None


def _skipped_note(outcome: WriteResult) -> list[str]:
    skipped = outcome.value.get("skipped")
    if not skipped:
        return []
    return [f"Skipped {len(skipped)} entit{'y' if len(skipped) == 1 else 'ies'} whose name already exists "
            f"(or repeats a name earlier in this call): {', '.join(skipped)}. Their observations were not "
            "added; use add_observations to extend an existing entity."]


# -- the table -------------------------------------------------------------------------------------------

class MemoryTool(msgspec.Struct, frozen=True):
    name: str
    title: str
    description: str
    arguments: type[msgspec.Struct]
    result: type[msgspec.Struct]
    annotations: dict[str, bool]
    method: Callable[..., Awaitable[ToolResult]]
    """(tools, arguments) or, for a read that keeps pages per client, (tools, arguments, context)."""


TOOLS = (
    MemoryTool("create_entities", "Create Entities", "Create multiple new entities in the knowledge graph",
               CreateEntities, results.CreatedEntities, WRITE, MemoryTools.create_entities),
    MemoryTool("create_relations", "Create Relations",
               "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
               CreateRelations, results.CreatedRelations, WRITE, MemoryTools.create_relations),
    MemoryTool("add_observations", "Add Observations", "Add new observations to existing entities in the knowledge graph",
               AddObservations, results.AddedObservations, WRITE, MemoryTools.add_observations),
    MemoryTool("delete_entities", "Delete Entities",
               "Delete multiple entities and their associated relations from the knowledge graph",
               DeleteEntities, results.DeletedEntities, DELETE, MemoryTools.delete_entities),
    MemoryTool("delete_observations", "Delete Observations",
               "Delete specific observations from entities in the knowledge graph",
               DeleteObservations, results.CountedDeletion, DELETE, MemoryTools.delete_observations),
    MemoryTool("delete_relations", "Delete Relations", "Delete multiple relations from the knowledge graph",
               DeleteRelations, results.CountedDeletion, DELETE, MemoryTools.delete_relations),
    MemoryTool("read_graph", "Read Graph",
               "Read the entire knowledge graph. A large graph comes in pages: the first one starts with a summary "
               "(entity types, most connected entities); pass nextCursor back as cursor for the next page",
               ReadGraph, results.GraphPage, READ, MemoryTools.read_graph),
    MemoryTool("search_nodes", "Search Nodes", "Search for nodes in the knowledge graph based on a query",
               SearchNodes, results.SearchPage, READ, MemoryTools.search_nodes),
    MemoryTool("open_nodes", "Open Nodes", "Open specific nodes in the knowledge graph by their names",
               OpenNodes, results.NodesPage, READ, MemoryTools.open_nodes),
)


def register_tools(server: Server, store: MemoryStore, *, budget: int | None = None) -> MemoryTools:
    """Declare the table's tools on `server`, served by one `MemoryTools` on `store`."""
    tools = MemoryTools(store, lambda: server.resource_updated(GRAPH_URI), budget=budget)
    for row in TOOLS:
        server.tool(row.name, title=row.title, description=row.description, arguments=row.arguments,
                    result=row.result, annotations=row.annotations)(MethodType(row.method, tools))
    return tools
