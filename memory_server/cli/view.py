"""What every export format is made from: the graph as read_graph shows it, and what the
formats derive from it (export.py writes the text formats, html_view.py the page)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..model import authors, dates
from ..model.graph import Graph
from ..model.records import EntityRecord


def _nothing() -> None:
    pass


def _exported(record: EntityRecord, view: Mapping[str, Any]) -> Mapping[str, Any]:
    """An entity as the exports take it: its answer object, or, when it has dates, its record's
    fields with the dates and authors as the memory file stores them (see model/dates.py, model/authors.py)."""
    if not dates.is_dated(record) and record.recordedBy is None:
        return view
    written_by = {"recordedBy": record.recordedBy} if record.recordedBy is not None else {}
    return {"name": record.name, "entityType": record.entityType, "observations": record.observations,
            **dates.stored_dates(record), **written_by}


@dataclass(frozen=True)
class ExportView:
    """The graph as read_graph shows it, and what the exporters derive from it."""

    entities: Sequence[Mapping[str, Any]]
    relations: Sequence[Mapping[str, Any]]
    title: str = "Memory"
    tick: Callable[[], None] = field(default=_nothing, compare=False)

    @classmethod
    def of(cls, graph: Graph, title: str = "Memory", tick: Callable[[], None] = _nothing) -> ExportView:
        """The graph's entities with their dates as stored (createdAt, updatedAt, recordedAt, happenedOn)."""
        return cls([_exported(node.record, node.view) for node in graph.entities.values()],
                   [edge.view for edge in graph.relations.values()], title, tick)

    @cached_property
    def index(self) -> dict[str, int]:
        """Each entity's position, then each missing entity's, after the real ones."""
        index = {entity["name"]: number for number, entity in enumerate(self.entities)}
        for relation in self.relations:
            for name in (relation["from"], relation["to"]):
                index.setdefault(name, len(index))
        return index

    @cached_property
    def missing(self) -> list[str]:
        """Names that relations use and no entity has, in order of appearance."""
        return list(self.index)[len(self.entities):]

    @cached_property
    def degree(self) -> list[int]:
        """Relations touching each node (by index); a relation from a node to itself counts once."""
        degree = [0] * len(self.index)
        for relation in self.relations:
            source, target = self.index[relation["from"]], self.index[relation["to"]]
            degree[source] += 1
            if target != source:
                degree[target] += 1
        return degree

    @cached_property
    def types(self) -> list[str]:
        """Entity types, the most common first."""
        counts = Counter(entity["entityType"] for entity in self.entities)
        return [name for name, _ in sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))]


def entity_record(entity: Mapping[str, Any]) -> EntityRecord:
    """The record of an exported entity, its dates and authors included."""
    return EntityRecord(entity["name"], entity["entityType"], entity["observations"], entity.get("createdAt"),
                        entity.get("updatedAt"), entity.get("recordedAt"), entity.get("happenedOn"),
                        entity.get("recordedBy"))


def observation_dates(entity: Mapping[str, Any]) -> list[str | None]:
    """Each observation's dates as answers show them, then its author (`2026-12-01, by alice`; None:
    neither known), for the formats made for people."""
    record = entity_record(entity)
    return [_with_author(dates.compact(recorded, happened), author) for recorded, happened, author
            in zip(dates.recorded_dates(record), dates.happened_dates(record), authors.authors_of(record), strict=True)]


def _with_author(date: str | None, author: str | None) -> str | None:
    if author is None:
        return date
    return f"by {author}" if date is None else f"{date}, by {author}"
