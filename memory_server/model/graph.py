"""The knowledge graph as an immutable value: its entities and relations, made from the memory
file's lines, their answer objects, the file they are written back to, and the reads.

A :class:`Graph` is never changed in place: every write (see :mod:`.writes`) returns a new graph
that shares the unchanged parts of the old one. The store publishes a graph by swapping one
reference, so a read in another thread sees the whole graph before a write or the whole graph after it.

The dicts inside results (entity and relation objects) are shared with the graph: callers
must treat every returned structure as read-only.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeAlias

import msgspec

from ..index.search import WordIndex, search_text
from . import authors, dates
from .census import Census, Listing, cut_summary, most_connected, ranked_types, summary
from .records import (
    EntityRecord,
    Extended,
    Layout,
    Line,
    Opaque,
    Record,
    Rejected,
    RelationRecord,
    Run,
    encode_line,
    entity_with_extra,
    file_layout,
    relation_with_extra,
)

if TYPE_CHECKING:
    # Loaded with the first search by words (see indexes.with_term_index), not at start-up.
    from ..index.ranking import TermIndex

Triple: TypeAlias = tuple[str, str, str]
"""A relation's identity: (from, to, relationType)."""


class GraphError(Exception):
    """A rule of the graph was broken; the message says what to do about it. Nothing was changed."""


class Node(NamedTuple):
    """An entity: its file record, its result object, its search text, its place in the file,
    and its line in the file (without the newline).

    The line is encoded once, when the node is made, so that a save only joins lines instead
    of encoding the whole graph again.
    """

    record: EntityRecord
    view: dict[str, Any]
    text: str
    seq: int
    extra: dict[str, msgspec.Raw] | None
    line: bytes


class Edge(NamedTuple):
    """A relation: its file record, its result object, its place in the file, its line in the file."""

    record: RelationRecord
    view: dict[str, Any]
    seq: int
    line: bytes


class Kept(msgspec.Struct, frozen=True):
    """A line written back verbatim after the known records.

    ``entity`` / ``relation`` is set when the line repeats an entity name or a relation that
    appeared earlier in the file (a hand edit): the first one wins, the repeat is kept
    and goes away together with the entity or relation it repeats.
    """

    line: bytes
    entity: str | None = None
    relation: Triple | None = None


@dataclass(frozen=True, slots=True)
class Graph:
    entities: Mapping[str, Node]
    relations: Mapping[Triple, Edge]
    links: Mapping[str, AbstractSet[Triple]]
    """Relations by endpoint name (from or to); never mutated once the graph is published."""
    kept: tuple[Kept, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    next_seq: int = 0
    words: WordIndex | None = field(default=None, compare=False)
    """Made after a load by the store (see :func:`.indexes.with_word_index`), then kept up to date by every write."""
    terms: TermIndex | None = field(default=None, compare=False)
    """The ranking's index, made by the store for the first search by words (see :func:`.indexes.with_term_index`),
    then kept up to date by every write."""
    census: Census | None = field(default=None, compare=False)
    """What a summary is counted from, once a summary was asked for (see :func:`.census.census_of`), then
    kept up to date by every write."""
    memo: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    """What reads work out from this graph and keep for the next read of it (a new graph, after a
    write, starts empty): the summary of a cut read_graph."""


EMPTY: Final = Graph({}, {}, {})


class Change(NamedTuple):
    graph: Graph
    value: dict[str, Any]
    changed: bool


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------


def make_node(record: EntityRecord, seq: int, extra: dict[str, msgspec.Raw] | None = None,
              view: dict[str, Any] | None = None, line: bytes | None = None) -> Node:
    """GraphError when the record cannot be stored (see :func:`record_line`). `view`: its
    node_view, when one was made already; `line`: the record's line when it is known to be it
    (read back from a database row), so as not to encode it again."""
    text = search_text(record.name, record.entityType, record.observations)
    return Node(record, node_view(record) if view is None else view, text, seq, extra,
                record_line(record, extra) if line is None else line)


def node_view(record: EntityRecord) -> dict[str, Any]:
    """An entity's answer object."""
    view = {"name": record.name, "entityType": record.entityType, "observations": record.observations}
    # (no call for an undated record: a load makes a node per entity, and most files have no dates yet)
    if record.recordedAt is not None or record.createdAt is not None or record.updatedAt is not None \
            or record.happenedOn is not None:
        view.update(dates.answer_dates(record))
    if record.recordedBy is not None:
        view.update(authors.answer_authors(record))
    return view


def make_edge(record: RelationRecord, seq: int, extra: dict[str, msgspec.Raw] | None = None,
              view: dict[str, Any] | None = None, line: bytes | None = None) -> Edge:
    """GraphError when the record cannot be stored (see :func:`record_line`). `view`: its
    edge_view, when one was made already; `line`: see :func:`make_node`."""
    return Edge(record, edge_view(record) if view is None else view, seq,
                record_line(record, extra) if line is None else line)


def edge_view(record: RelationRecord) -> dict[str, Any]:
    """A relation's answer object."""
    return {"from": record.source, "to": record.target, "relationType": record.relationType}


def record_line(record: Record, extra: dict[str, msgspec.Raw] | None = None) -> bytes:
    """The record's line in the memory file (without the newline), extra fields last.

    A string with an unpaired surrogate has no UTF-8 form: refusing it here, while the record
    is made, fails the write before anything is saved.
    """
    try:
        return encode_line(record if extra is None else _with_extra(record, extra))
    except UnicodeEncodeError:
        raise GraphError(f"{_describe(record)} contains an unpaired surrogate character, which cannot be "
                         "stored as UTF-8. Nothing was changed.") from None


def _with_extra(record: Record, extra: dict[str, msgspec.Raw]) -> dict[str, Any]:
    if isinstance(record, EntityRecord):
        return entity_with_extra(record, extra)
    return relation_with_extra(record, extra)


def _describe(record: Record) -> str:
    # repr escapes the surrogate, so the message itself can still be sent as UTF-8.
    if isinstance(record, EntityRecord):
        return f"The entity {record.name!r} (its name, type or an observation)"
    return f"The relation type {record.relationType!r}"


def plural(count: int, singular: str, many: str) -> str:
    return f"{count} {singular if count == 1 else many}"


# --------------------------------------------------------------------------------------------
# The file <-> the graph
# --------------------------------------------------------------------------------------------


Views: TypeAlias = "tuple[Sequence[dict[str, Any]], Sequence[dict[str, Any]]]"
"""The answer objects of a graph's entities and relations, in graph order (read_graph_of_lines)."""


def graph_from_lines(lines: Iterable[Line], views: Views | None = None) -> Graph:
    """The graph a memory file describes. Repeated names and relations: the first one wins.
    `views`: the answer objects read_graph_of_lines made of the same lines, which the graph then
    shares (made once, kept once)."""
    entity_views, relation_views = views if views is not None else ((), ())
    entities: dict[str, Node] = {}
    relations: dict[Triple, Edge] = {}
    # A defaultdict makes each set only when needed (setdefault would build a throwaway set per call).
    links: defaultdict[str, set[Triple]] = defaultdict(set)
    kept: list[Kept] = []
    rejected: list[Rejected] = []
    item: Any  # a Line, unwrapped from Extended below
    for item in lines:
        extra = None
        if type(item) is Extended:
            item, extra = item.record, item.extra
        line = item
        if type(line) is RelationRecord:
            triple = (line.source, line.target, line.relationType)
            if triple in relations:
                kept.append(Kept(record_line(line, extra), relation=triple))
                continue
            seq = len(relations)
            relations[triple] = make_edge(line, seq, extra, relation_views[seq] if relation_views else None)
            links[line.source].add(triple)
            links[line.target].add(triple)
        elif type(line) is EntityRecord:
            if line.name in entities:
                kept.append(Kept(record_line(line, extra), entity=line.name))
                continue
            seq = len(entities)
            entities[line.name] = make_node(line, seq, extra, entity_views[seq] if entity_views else None)
        elif type(line) is Opaque:
            kept.append(Kept(line.line))
        else:
            rejected.append(line)
    # A plain dict again: reading a missing name must not add it.
    return Graph(entities, relations, dict(links), tuple(kept), tuple(rejected),
                 max(len(entities), len(relations)))


def part_of_lines(lines: Iterable[Line], names: AbstractSet[str]) -> Graph:
    """The part of graph_from_lines(lines) that open_nodes or a search about `names` reads: their
    entities and every relation with an end among them, as graph_from_lines makes them (the first
    of a repeated name or relation wins, and the graph's order is kept; only the places, seq, are
    counted within the part). One pass, and nodes and edges for the part alone."""
    part: list[Line] = []
    item: Any
    record: Any
    for item in lines:
        record = item.record if type(item) is Extended else item
        kind = type(record)
        if kind is RelationRecord:
            if record.source in names or record.target in names:
                part.append(item)
        elif kind is EntityRecord and record.name in names:
            part.append(item)
    return graph_from_lines(part)


def part_of_graph(graph: Graph, names: Iterable[str]) -> Graph:
    """The part of `graph` that part_of_lines makes of its file for `names` (those of them it
    holds), of the graph's own nodes and edges: a part that costs references, not copies."""
    nodes, links, edges = graph.entities, graph.links, graph.relations
    held = sorted((nodes[name] for name in set(names) if name in nodes), key=_seq)
    entities = {node.record.name: node for node in held}
    triples = sorted({triple for name in entities for triple in links.get(name, ())}, key=lambda t: edges[t].seq)
    touching: defaultdict[str, set[Triple]] = defaultdict(set)
    for triple in triples:
        touching[triple[0]].add(triple)
        touching[triple[1]].add(triple)
    return Graph(entities, {triple: edges[triple] for triple in triples}, dict(touching))


def read_graph_of_lines(lines: Iterable[Line]) -> dict[str, Any]:
    """:func:`read_graph_for_pages` of graph_from_lines(lines), without making the graph: the same
    answer objects in the same order (the first of a repeated name or relation wins), and a
    summary of the same counts as the graph's census (every entity type; each name's relations,
    a relation to itself counted as one start and one end)."""
    entities: dict[str, EntityRecord] = {}
    relations: dict[Triple, RelationRecord] = {}
    item: Any
    record: Any
    for item in lines:
        record = item.record if type(item) is Extended else item
        kind = type(record)
        if kind is RelationRecord:
            relations.setdefault((record.source, record.target, record.relationType), record)
        elif kind is EntityRecord:
            entities.setdefault(record.name, record)
    types = Counter(map(attrgetter("entityType"), entities.values()))
    triples = relations.keys()
    degrees = Counter(chain(map(itemgetter(0), triples), map(itemgetter(1), triples)))
    counted = partial(cut_summary, len(entities), len(relations), ranked_types(types),
                      most_connected(degrees.keys(), degrees.values()))
    return {"entities": Listing(map(node_view, entities.values()), counted),
            "relations": list(map(edge_view, relations.values()))}


_line: Final = attrgetter("line")


def _file_parts(graph: Graph) -> tuple[tuple[object, Iterable[Node | Edge | Kept]], ...]:
    """The memory file's three parts (entities, relations, kept lines): each container, and its items in file order."""
    return ((graph.entities, graph.entities.values()), (graph.relations, graph.relations.values()),
            (graph.kept, graph.kept))


def file_layout_of(graph: Graph, saved: Graph | None = None, layout: Layout = ()) -> Layout:
    """The memory file of `graph` as pieces (records.file_layout of its three parts), reusing
    `layout`, the way the file of `saved` was laid out.

    A write replaces only the containers it changes, so a part whose container is `saved`'s very
    own (an entity added leaves the relations alone) has the same lines: it keeps its runs without
    its lines being listed."""
    saved_containers = [container for container, _ in _file_parts(saved)] if saved is not None else []
    laid_out: list[tuple[Run, ...]] = []
    for number, (container, items) in enumerate(_file_parts(graph)):
        old_runs = layout[number] if number < len(layout) else ()
        if number < len(saved_containers) and number < len(layout) and container is saved_containers[number]:
            laid_out.append(old_runs)
        else:
            laid_out.extend(file_layout([list(map(_line, items))], (old_runs,)))
    return tuple(laid_out)


def file_lines(graph: Graph) -> Iterator[bytes]:
    """The memory file's lines (without newlines), in order: entities, relations, then the kept lines."""
    return chain(map(_line, graph.entities.values()), map(_line, graph.relations.values()),
                 map(_line, graph.kept))


# --------------------------------------------------------------------------------------------
# Reads
# --------------------------------------------------------------------------------------------


def read_graph_for_pages(graph: Graph) -> dict[str, Any]:
    """read_graph for the pager, which only reads the lists: the same lists for every call on
    one graph: a client that reads the first page twice, or all pages after a first look, has
    them made once."""
    if (known := graph.memo.get("read_graph")) is None:
        known = graph.memo["read_graph"] = read_graph(graph)
    return {"entities": known["entities"], "relations": known["relations"]}


def read_graph(graph: Graph) -> dict[str, Any]:
    """The whole graph; its entities can also summarise it, for the first page of a cut answer."""
    return {
        "entities": Listing([node.view for node in graph.entities.values()], partial(summary, graph)),
        "relations": [edge.view for edge in graph.relations.values()],
    }


def open_nodes(graph: Graph, names: Sequence[str]) -> dict[str, Any]:
    """The named entities that exist, in graph order, and every relation touching one of them."""
    nodes = sorted((graph.entities[name] for name in set(names) if name in graph.entities), key=_seq)
    return {
        "entities": [node.view for node in nodes],
        "relations": relations_touching(graph, {node.record.name for node in nodes}),
    }


_seq: Final[Callable[[Node | Edge], int]] = attrgetter("seq")
_view: Final[Callable[[Node | Edge], dict[str, Any]]] = attrgetter("view")


def relations_touching(graph: Graph, names: set[str]) -> list[dict[str, Any]]:
    # Through the index the cost follows the answer, not the graph; for a large share of the
    # graph one pass over all relations is cheaper than sorting what the index finds.
    if 4 * len(names) > len(graph.entities):
        return [edge.view for (source, target, _), edge in graph.relations.items()
                if source in names or target in names]
    return linked(graph.links, graph.relations, names)


def linked(links: Mapping[str, AbstractSet[Triple]], relations: Mapping[Triple, Edge],
           names: AbstractSet[str]) -> list[dict[str, Any]]:
    """The relations touching `names`, found through a graph's `links`, in graph order: what an
    answer's page asks, holding these two of its graph's maps and nothing else of it."""
    triples: set[Triple] = set().union(*[links[name] for name in names if name in links])
    return list(map(_view, sorted(map(relations.__getitem__, triples), key=_seq)))
