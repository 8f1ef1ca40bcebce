"""What every export format is made from: the graph as read_graph shows it, and what the
formats derive from it (export.py writes the text formats, html_view.py the page)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..model.graph import Graph


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class ExportView:
    """The graph as read_graph shows it, and what the exporters derive from it."""

    entities: Sequence[Mapping[str, Any]]
    relations: Sequence[Mapping[str, Any]]
    title: str = "Memory"
    tick: Callable[[], None] = field(default=_nothing, compare=False)

    @classmethod
    def of(cls, graph: Graph, title: str = "Memory", tick: Callable[[], None] = _nothing) -> ExportView:
        return cls([node.view for node in graph.entities.values()],
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
