"""The census of a graph: what the summary of a cut read_graph is counted from (entities by type,
the most connected names), kept with the graph and brought up to date by its writes, and the
summary cut from it.

A summary of a whole graph is the same whether it is counted from the graph's endpoint index,
from a file's lines, from the index cache or from the answer's own lists (:func:`summarise`):
the counting rules (:func:`ranked_types`, :func:`most_connected`) and the cut
(:func:`cut_summary`) are written here once.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import compress
from operator import attrgetter, eq, itemgetter
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

if TYPE_CHECKING:
    from .graph import Graph, Node, Triple

SUMMARY_TYPES: Final = 20
SUMMARY_CONNECTED: Final = 10

_encoder: Final = msgspec.json.Encoder()


class Listing(list[Any]):
    """The entities of a whole graph that also know how to summarise it: `summarise(limit)` gives
    what :func:`summarise` would, cheaper (from the graph's own indexes, once per graph)."""

    __slots__ = ("summarise",)

    def __init__(self, units: Iterable[Any], summarise: Callable[[int], dict[str, Any]]) -> None:
        super().__init__(units)
        self.summarise = summarise


def summarise(entities: Sequence[Mapping[str, Any]], relations: Sequence[Mapping[str, Any]],
              limit: int) -> dict[str, Any]:
    """Counts by entity type and the most connected names: what a model needs to choose what to open,
    cut to `limit` bytes of JSON."""
    types = ranked_types(Counter(map(itemgetter("entityType"), entities)))
    degrees = Counter(map(itemgetter("from"), relations))
    degrees.update(map(itemgetter("to"), relations))
    return cut_summary(len(entities), len(relations), types, most_connected(degrees.keys(), degrees.values()), limit)


def ranked_types(types: Mapping[str, int]) -> list[tuple[str, int]]:
    """Entity types with their counts, most common first, ties by name."""
    return sorted(types.items(), key=_by_count_then_name)


def _by_count_then_name(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def most_connected(names: Iterable[str], degrees: Iterable[int]) -> list[tuple[str, int]]:
    """The SUMMARY_CONNECTED names with the most relations, most first, ties by name: the same
    whichever order the names come in (the graph counts them from its endpoint index, a cold
    answer from its lists). Cheap when most names tie, as in a graph of even degrees."""
    names, degrees = list(names), list(degrees)
    if not names:
        return []
    least = heapq.nlargest(SUMMARY_CONNECTED, degrees)[-1]
    # Fewer than SUMMARY_CONNECTED names have more; those with just as many are picked by name.
    above = sorted((-degree, name) for name, degree in zip(compress(names, map(least.__lt__, degrees)),
                                                          filter(least.__lt__, degrees), strict=True))
    tied = heapq.nsmallest(SUMMARY_CONNECTED - len(above), compress(names, map(least.__eq__, degrees)))
    return [(name, -negative) for negative, name in above] + [(name, least) for name in tied]


def cut_summary(entities: int, relations: int, types: list[tuple[str, int]], connected: list[tuple[str, int]],
                limit: int) -> dict[str, Any]:
    """The summary of a graph from its counts, its entity types (most common first) and its most
    connected names, cut to `limit` bytes of JSON."""
    listed = [{"entityType": kind, "count": count} for kind, count in types[:SUMMARY_TYPES]]
    shown = [{"name": name, "relations": count} for name, count in connected[:SUMMARY_CONNECTED]]
    while True:
        summary = {"entities": entities, "relations": relations, "entityTypes": listed,
                   "moreEntityTypes": len(types) - len(listed), "mostConnected": shown}
        if len(_encoder.encode(summary)) <= limit or not (listed or shown):
            return summary
        if len(shown) >= len(listed):
            shown = shown[:-1]
        else:
            listed = listed[:-1]


def summary(graph: Graph, limit: int) -> dict[str, Any]:
    """:func:`summarise` of the whole graph, from its endpoint index: the same value, worked
    out once per graph."""
    key = ("summary", limit)
    if (known := graph.memo.get(key)) is None:
        types, connected = summary_counts(graph)
        known = graph.memo[key] = cut_summary(len(graph.entities), len(graph.relations), types, connected, limit)
    return known


_entity_type: Final = attrgetter("record.entityType")
_source: Final = itemgetter(0)
_target: Final = itemgetter(1)


class Census(NamedTuple):
    """What the summary of a cut read_graph is counted from."""

    types: Mapping[str, int]
    """Entities by type (types with none left are not there); never changed once made."""
    connected: tuple[tuple[str, int], ...] | None
    """The most connected names with their relation counts, as :func:`most_connected` gives them;
    None when a write may have let another name in that only a count of every name can find."""


def summary_counts(graph: Graph) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """What a summary of the graph is cut from: every entity type with its count (most common
    first, ties by name) and the most connected names (see :func:`most_connected`)."""
    census = census_of(graph)
    assert census.connected is not None
    return ranked_types(census.types), list(census.connected)


def census_of(graph: Graph) -> Census:
    """The graph's census: the one its writes kept up to date, or counted now (in C, no Python
    code per entity or relation) and kept with the graph."""
    known = known_census(graph)
    if known is not None and known.connected is not None:
        return known
    types = known.types if known is not None else Counter(map(_entity_type, graph.entities.values()))
    links = graph.links
    # The index holds a relation to itself once; it counts twice, as one start and one end.
    triples = graph.relations.keys()
    loops = Counter(compress(map(_source, triples), map(eq, map(_source, triples), map(_target, triples))))
    if loops:
        degrees = dict(zip(links.keys(), map(len, links.values())))
        for name, count in loops.items():
            degrees[name] += count
        connected = most_connected(degrees.keys(), degrees.values())
    else:
        connected = most_connected(links.keys(), map(len, links.values()))
    census = graph.memo["census"] = Census(types, tuple(connected))
    return census


def known_census(graph: Graph) -> Census | None:
    known: Census | None = graph.census or graph.memo.get("census")
    return known


def _degree(links: Mapping[str, AbstractSet[Triple]], name: str) -> int:
    triples = links.get(name, ())
    return len(triples) + sum(1 for source, target, _ in triples if source == target)


def census_after_entities(graph: Graph, entities: Mapping[str, Node], changed: Iterable[str]) -> Census | None:
    """The census once `changed` names have their nodes in `entities` (None: gone), when known."""
    census = known_census(graph)
    if census is None:
        return None
    types = dict(census.types)  # a few types, not one per entity: cheap to copy
    for name in changed:
        before, after = graph.entities.get(name), entities.get(name)
        if before is not None:
            if (left := types[before.record.entityType] - 1) > 0:
                types[before.record.entityType] = left
            else:
                del types[before.record.entityType]
        if after is not None:
            types[after.record.entityType] = types.get(after.record.entityType, 0) + 1
    return census._replace(types=types)


def census_after_links(census: Census | None, links: Mapping[str, AbstractSet[Triple]],
                        touched: Iterable[str]) -> Census | None:
    """The census once the relations of the `touched` names changed. Names not touched keep their
    counts, so while no name of the old top lost a relation, the new top is among the old top and
    the touched names; otherwise the next summary counts every name again."""
    if census is None or census.connected is None:
        return census
    counts = {name: _degree(links, name) for name in touched}
    for name, count in census.connected:
        if counts.setdefault(name, count) < count:
            return census._replace(connected=None)
    ranked = sorted((-count, name) for name, count in counts.items() if name in links)
    return census._replace(connected=tuple((name, -negative) for negative, name in ranked[:SUMMARY_CONNECTED]))

