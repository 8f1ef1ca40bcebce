"""What the nine tools answer, declared once as msgspec Structs: the outputSchema each tool
advertises is made from these (protocol.arguments.output_schema), not written by hand.

1. Every result object is closed (`forbid_unknown_fields`, advertised as `additionalProperties:
   false`): a client may rely on every field it is given, and no other field is ever sent.
2. A field that defaults to UNSET is optional: it is sent only where it applies (an entity's dates
   and authors where known, `partial`, `skipped`, `summary`, `nextCursor`); every other field is
   required.
3. Field order is the advertised property order, and a field's Meta(description) its advertised
   words, as for the arguments (tools.py). The names and words are the reference server's,
   extended where our tools add fields.

The answers themselves are made by the stores and retrieval (dicts, and pages encoded once as
JSON): these Structs describe that wire shape, and the tests hold every answer to it.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec
from msgspec import UNSET, Meta, UnsetType

ENTITY_NAME: Final = "The name of the entity"
ENTITY_TYPE: Final = "The type of the entity"
OBSERVATIONS: Final = "An array of observation contents associated with the entity"


class _Result(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """Statement 1 for every result below."""


class AnsweredEntity(_Result):
    """An entity as answered: with the optional dates and authors shown where known (model/dates.py, authors.py)."""

    name: Annotated[str, Meta(description=ENTITY_NAME)]
    entity_type: Annotated[str, Meta(description=ENTITY_TYPE)]
    observations: Annotated[list[str], Meta(description=OBSERVATIONS)]
    created_at: Annotated[str, Meta(description="When the entity was created (UTC day), where known")] \
        | UnsetType = UNSET
    updated_at: Annotated[str, Meta(description="When the entity last changed (UTC day), where known")] \
        | UnsetType = UNSET
    observation_dates: Annotated[list[str | None], Meta(description=(
        "Parallel to observations: the UTC day each was recorded, as \"2026-12-01\" or "
        "\"happened 2023-05-07, recorded 2026-12-01\"; null where unknown"))] | UnsetType = UNSET
    observation_authors: Annotated[list[str | None], Meta(description=(
        "Parallel to observations: who wrote each (the signed-in user, or the client's name); "
        "null where unknown"))] | UnsetType = UNSET


class SearchedEntity(AnsweredEntity):
    """An entity in a search answer, which may show only the observations that answer the query."""

    partial: Annotated[str, Meta(description=(
        "Present when not every observation of the entity is shown: how many are; open_nodes gives all"))] \
        | UnsetType = UNSET


class AnsweredRelation(_Result):
    source: Annotated[str, Meta(description="The name of the entity where the relation starts")] = \
        msgspec.field(name="from")
    to: Annotated[str, Meta(description="The name of the entity where the relation ends")]
    relation_type: Annotated[str, Meta(description="The type of the relation")]


NextCursor = Annotated[str, Meta(description=(
    "Present when the answer was cut to fit the model's context: pass it back as `cursor` "
    "(with the same other arguments) for the next page"))]
Count = Annotated[int, Meta(ge=0)]


class TypeCount(_Result):
    entity_type: str
    count: Annotated[int, Meta(ge=1)]


class Connected(_Result):
    name: str
    relations: Annotated[int, Meta(ge=1, description="How many relations start or end there (one to itself counts twice)")]


class Summary(_Result):
    """What the whole graph holds (retrieval/paging/notes.py makes it)."""

    entities: Count
    relations: Count
    entity_types: Annotated[list[TypeCount], Meta(description="The most common entity types, most common first")]
    more_entity_types: Annotated[int, Meta(ge=0, description="How many entity types are not listed")]
    most_connected: Annotated[list[Connected], Meta(description="The entities with the most relations, most first")]


class NodesPage(_Result):
    """open_nodes: the entities asked for and the relations among them, a page at a time."""

    entities: list[AnsweredEntity]
    relations: list[AnsweredRelation]
    next_cursor: NextCursor | UnsetType = UNSET


class GraphPage(_Result, kw_only=True):
    """read_graph: the whole graph, a page at a time; a cut answer's first page starts with a summary
    (kw_only: so the optional summary may come before the required fields)."""

    summary: Annotated[Summary, Meta(description="On the first page of a cut read_graph: what the whole graph holds")] \
        | UnsetType = UNSET
    entities: list[AnsweredEntity]
    relations: list[AnsweredRelation]
    next_cursor: NextCursor | UnsetType = UNSET


class SearchPage(_Result):
    """search_nodes: the matching entities (their answering facts first) and their relations."""

    entities: list[SearchedEntity]
    relations: list[AnsweredRelation]
    next_cursor: NextCursor | UnsetType = UNSET


class CreatedEntities(_Result):
    entities: list[AnsweredEntity]
    skipped: Annotated[list[str], Meta(description="Names that were not created because they exist")] \
        | UnsetType = UNSET


class CreatedRelations(_Result):
    relations: list[AnsweredRelation]


class AddedTo(_Result):
    entity_name: str
    added_observations: list[str]


class AddedObservations(_Result):
    results: list[AddedTo]


class DeletedEntities(_Result):
    success: bool
    message: str
    not_found: Annotated[list[str], Meta(description="Names that matched no entity")]


class CountedDeletion(_Result):
    """delete_observations and delete_relations: how many were deleted."""

    success: bool
    message: str
    deleted_count: Count
