"""The items a write is given: an entity to create, a relation, observations to add or to delete.

They are the tools' arguments as their clients send them (tools.py decodes each call into them, and
advertises their JSON Schema), and what the write rules (:mod:`.writes`) and the stores take: an
item is checked once, when it is decoded, and read by attribute everywhere after.

1. The wire shape, and the schema advertised for it, are the reference server's: camelCase names
   (a relation's start is ``from``), fields in the advertised property order, each field's
   Meta(description) its advertised words (tests/test_memory_tools.py, the schemas as captured).
2. Unknown fields are ignored, as the schemas (without additionalProperties) allow them: a
   client's own ``recordedBy`` is no field, so it never names an author; who writes is the
   transport's to say, given to the write beside its items (tests/test_authors.py, over OAuth).

A class's name is its name in the schema's ``$defs``, and a docstring would become its advertised
description: so they are not renamed, and have none.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec
from msgspec import UNSET, Meta, UnsetType

HAPPENED_ON: Final = ("Optional: when what these observations tell happened, if the user said (ISO 8601: "
                      "2023, 2023-05, 2023-05-07 or 2023-05-07T14:30:00Z). When they were recorded is kept anyway")


class Entity(msgspec.Struct, rename="camel"):
    name: Annotated[str, Meta(description="The name of the entity")]
    entity_type: Annotated[str, Meta(description="The type of the entity")]
    observations: Annotated[list[str], Meta(description="An array of observation contents associated with the entity")]
    happened_on: Annotated[str, Meta(description=HAPPENED_ON)] | UnsetType = UNSET


class Relation(msgspec.Struct, rename="camel"):
    source: Annotated[str, Meta(description="The name of the entity where the relation starts")] = \
        msgspec.field(name="from")
    to: Annotated[str, Meta(description="The name of the entity where the relation ends")]
    relation_type: Annotated[str, Meta(description="The type of the relation")]


class ObservationsToAdd(msgspec.Struct, rename="camel"):
    entity_name: Annotated[str, Meta(description="The name of the entity to add the observations to")]
    contents: Annotated[list[str], Meta(description="An array of observation contents to add")]
    happened_on: Annotated[str, Meta(description=HAPPENED_ON)] | UnsetType = UNSET


class ObservationsToDelete(msgspec.Struct, rename="camel"):
    entity_name: Annotated[str, Meta(description="The name of the entity containing the observations")]
    observations: Annotated[list[str], Meta(description="An array of observations to delete")]
