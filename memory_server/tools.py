"""The nine memory tools: their declarations (as the reference server names and describes them,
extended where our README adds result fields) and the thin handlers that call the store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from protocol import Server, ToolError, ToolResult

from .store import GraphError, GraphStore, WriteResult

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
DELETE_OUTPUT = {"success": {"type": "boolean"}, "message": {"type": "string"}}
COUNTED_DELETE_OUTPUT = _object({**DELETE_OUTPUT, "deletedCount": {"type": "integer", "minimum": 0}}, closed=True)

WRITE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
DELETE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
READ = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def register_tools(server: Server, store: GraphStore) -> None:
    def announce(write: Callable[[Any], WriteResult]) -> Callable[[Any], WriteResult]:
        # Runs in the worker thread, so a change is announced even when the caller was cancelled
        # meanwhile (the write itself is atomic and completes either way).
        def run(argument: Any) -> WriteResult:
            outcome = write(argument)
            if outcome.changed:
                server.resource_updated(GRAPH_URI)  # safe from any thread
            return outcome
        return run

    async def write(operation: Callable[[Any], WriteResult], argument: Any,
                    extra_notes: Callable[[WriteResult], list[str]] = lambda _: []) -> ToolResult:
        try:
            outcome = await anyio.to_thread.run_sync(announce(operation), argument, abandon_on_cancel=True)
        except GraphError as error:
            raise ToolError(str(error)) from error
        return ToolResult.of(outcome.value, *extra_notes(outcome), *outcome.notes)

    async def read(operation: Callable[..., dict[str, Any]], *arguments: Any) -> ToolResult:
        try:
            return await anyio.to_thread.run_sync(lambda: ToolResult.of(operation(*arguments)))
        except GraphError as error:
            raise ToolError(str(error)) from error

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

    @server.tool("read_graph", title="Read Graph", description="Read the entire knowledge graph",
                 input_schema=_object({}), output_schema=GRAPH_OUTPUT, annotations=READ)
    async def read_graph(arguments: dict[str, Any]) -> ToolResult:
        return await read(store.read_graph)

    @server.tool("search_nodes", title="Search Nodes",
                 description="Search for nodes in the knowledge graph based on a query",
                 input_schema=_object({"query": _string(
                     "The search query to match against entity names, types, and observation content")}),
                 output_schema=GRAPH_OUTPUT, annotations=READ)
    async def search_nodes(arguments: dict[str, Any]) -> ToolResult:
        return await read(store.search_nodes, arguments["query"])

    @server.tool("open_nodes", title="Open Nodes",
                 description="Open specific nodes in the knowledge graph by their names",
                 input_schema=_object({"names": _strings("An array of entity names to retrieve")}),
                 output_schema=GRAPH_OUTPUT, annotations=READ)
    async def open_nodes(arguments: dict[str, Any]) -> ToolResult:
        return await read(store.open_nodes, arguments["names"])
