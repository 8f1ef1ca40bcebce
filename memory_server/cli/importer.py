"""`mcp-server-memory import`: what a file to import holds, and what merging it did (or would do).

Pure: bytes in, records and a report out. Two shapes are read:

- JSON Lines, one record per line: a memory file of this server or of the reference (its
  `memory.jsonl`, or a legacy `memory.json`, which holds the same lines), or `export --format jsonl`;
- one JSON object ``{"entities": [...], "relations": [...]}``: the reference's read_graph
  answer, or `export --format json`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from ..model.records import BOM, OPTIONAL_KEYS, EntityRecord, Extended, Opaque, Rejected, RelationRecord
from ..model.writes import IncomingEntity, IncomingRelation
from .inspection import numbered_lines, why_unusable
from .text import counted

SHAPES: Final = {"jsonl": "one record per line", "json": "one graph object"}


class ImportFormatError(ValueError):
    """The file is not a memory in any shape this command reads."""


@dataclass
class Incoming:
    shape: str
    """"jsonl" or "json"."""
    entities: list[IncomingEntity] = field(default_factory=list)
    relations: list[IncomingRelation] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)
    """What the file holds that is not an entity or a relation, each with where and why."""


def parse_import(data: bytes) -> Incoming:
    """ImportFormatError when the file holds nothing this command can read."""
    text = data.removeprefix(BOM).strip()
    if text.startswith(b"{"):
        try:
            whole = json.loads(text)
        except (ValueError, RecursionError):
            whole = None  # JSON Lines, or broken: read line by line below
        if isinstance(whole, dict) and "type" not in whole:
            return _from_graph_object(whole)
    incoming = Incoming("jsonl")
    for number, item in numbered_lines(data):
        extra = None
        line = item.record if isinstance(item, Extended) else item
        if isinstance(item, Extended):
            extra = item.extra
        if isinstance(line, EntityRecord):
            incoming.entities.append((line, extra))
        elif isinstance(line, RelationRecord):
            incoming.relations.append((line, extra))
        elif isinstance(line, Opaque):
            incoming.unusable.append(f"line {number}: {why_unusable(line.line)}")
        elif isinstance(line, Rejected):
            incoming.unusable.append(f"line {number}: {line.reason}")
    if incoming.unusable and not (incoming.entities or incoming.relations):
        raise ImportFormatError("it holds no entity or relation: " + "; ".join(incoming.unusable[:3])
                                + ("; ..." if len(incoming.unusable) > 3 else ""))
    return incoming


def _from_graph_object(whole: Mapping[str, Any]) -> Incoming:
    if not {"entities", "relations"} & whole.keys():
        raise ImportFormatError('it is a JSON object without "entities" or "relations"')
    incoming = Incoming("json")
    for key in ("entities", "relations"):
        if not isinstance(whole.get(key, []), list):
            raise ImportFormatError(f'its "{key}" is not a list')
    for number, item in enumerate(whole.get("entities", [])):
        if _fits(item, {"name": str, "entityType": str, "observations": list}) and all(
                isinstance(text, str) for text in item["observations"]):
            incoming.entities.append((_dated(EntityRecord(item["name"], item["entityType"], item["observations"]),
                                             item), None))
        else:
            incoming.unusable.append(f"entities[{number}]: not an entity with a name, an entityType and "
                                     "observations (a list of strings)")
    for number, item in enumerate(whole.get("relations", [])):
        if _fits(item, {"from": str, "to": str, "relationType": str}):
            incoming.relations.append((RelationRecord(item["from"], item["to"], item["relationType"]), None))
        else:
            incoming.unusable.append(f"relations[{number}]: not a relation with from, to and relationType (strings)")
    return incoming


def _dated(record: EntityRecord, item: Mapping[str, Any]) -> EntityRecord:
    """The record with the dates an exported entity carries (see model/dates.py); a date field of
    another type than the memory file's is left out, as it carries no date."""
    given: dict[str, Any] = {}
    for key in OPTIONAL_KEYS:
        value = item.get(key)
        if key in ("createdAt", "updatedAt"):
            if isinstance(value, str):
                given[key] = value
        elif isinstance(value, list) and all(date is None or isinstance(date, str) for date in value):
            given[key] = value
    return msgspec.structs.replace(record, **given) if given else record


def _fits(item: Any, fields: Mapping[str, type]) -> bool:
    return isinstance(item, dict) and all(isinstance(item.get(name), kind) for name, kind in fields.items())


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------



def describe_merge(value: Mapping[str, Any], incoming: Incoming, *, dry_run: bool, listed: int = 20) -> list[str]:
    """The merge's report for a person; at most `listed` names per kind of left-out item."""
    created, grown = value["createdEntities"], value["addedObservations"]
    added = sum(len(item["addedObservations"]) for item in grown)
    relations = value["createdRelations"]
    verb = ("would create", "would add") if dry_run else ("created", "added")
    lines = [
        f"{verb[0]} {counted(len(created), 'entity', 'entities')}",
        f"{verb[1]} {counted(added, 'observation', 'observations')} to "
        f"{counted(len(grown), 'existing entity', 'existing entities')}",
        f"{verb[0]} {counted(len(relations), 'relation', 'relations')}",
        f"already there: {counted(value['unchangedEntities'], 'entity', 'entities')} with nothing new, "
        f"{counted(value['presentRelations'], 'relation', 'relations')}",
    ]
    left_out = [f"relation {item['from']!r} -{item['relationType']}-> {item['to']!r}: no entity "
                + " and ".join(repr(name) for name in item["missing"])
                for item in value["relationsWithoutEntities"]]
    conflicts = [f"entity {item['name']!r} keeps its type {item['entityType']!r} (the import says "
                 f"{item['incomingType']!r})" for item in value["typeConflicts"]]
    for title, items in (("not imported", left_out + incoming.unusable), ("types kept", conflicts)):
        if items:
            lines.append(f"{title}: {len(items):,}")
            lines.extend(f"  {item}" for item in items[:listed])
            if len(items) > listed:
                lines.append(f"  ... and {len(items) - listed:,} more")
    return lines


def summary(incoming: Incoming) -> str:
    return (f"{counted(len(incoming.entities), 'entity', 'entities')} and "
            f"{counted(len(incoming.relations), 'relation', 'relations')}, {SHAPES[incoming.shape]}")


def total_items(incoming: Incoming) -> int:
    return len(incoming.entities) + len(incoming.relations)


__all__: Sequence[str] = ["ImportFormatError", "Incoming", "describe_merge", "parse_import", "summary", "total_items"]
