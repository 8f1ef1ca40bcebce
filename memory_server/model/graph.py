"""The knowledge graph as an immutable value, and the nine operations as pure functions on it.

A :class:`Graph` is never changed in place: every write returns a new graph that shares the
unchanged parts of the old one. The store publishes a graph by swapping one reference, so a
read in another thread sees the whole graph before a write or the whole graph after it.

The dicts inside results (entity and relation objects) are shared with the graph: callers
must treat every returned structure as read-only.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import chain, compress
from operator import attrgetter, eq, itemgetter
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeAlias

import msgspec

from ..index.search import TextChange, WordIndex, search_text
from ..retrieval.paging import SUMMARY_CONNECTED, Listing, cut_summary, most_connected, ranked_types
from . import authors, dates
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
    # Loaded with the first search by words (see _ranking), not at start-up.
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
    """Made after a load by the store (see :func:`with_word_index`), then kept up to date by every write."""
    terms: TermIndex | None = field(default=None, compare=False)
    """The ranking's index, made by the store for the first search by words (see :func:`with_term_index`),
    then kept up to date by every write."""
    census: Census | None = field(default=None, compare=False)
    """What a summary is counted from, once a summary was asked for (see :func:`census_of`), then
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


def unique(items: Iterable[str]) -> list[str]:
    """The items without repeats, first occurrence first."""
    return list(dict.fromkeys(items))


def plural(count: int, singular: str, many: str) -> str:
    return f"{count} {singular if count == 1 else many}"


def _with_record(node: Node, record: EntityRecord) -> Node:
    return make_node(record, node.seq, node.extra)


def _undated_view(node: Node) -> dict[str, Any]:
    view = node.view
    return {"name": view["name"], "entityType": view["entityType"], "observations": view["observations"]}


def _grown(record: EntityRecord, added: Sequence[tuple[str, str | None, str | None]], now: str | None,
           written_by: Sequence[str | None]) -> EntityRecord:
    """The record with observations appended (see dates.with_added), each with its author."""
    return authors.grown(record, dates.with_added(record, added, now), written_by)


def _happened(item: Mapping[str, Any]) -> str | None:
    """The stored form of an item's optional happenedOn; GraphError, saying what is accepted, when malformed."""
    given = item.get("happenedOn")
    if given is None:
        return None
    if not isinstance(given, str):
        raise GraphError(f"happenedOn must be a string: {dates.ACCEPTED}. Nothing was changed.")
    try:
        return dates.parse_when(given)[1]
    except ValueError as error:
        raise GraphError(f"happenedOn {error}. Nothing was changed.") from None


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
    degrees = Counter(chain(map(_source, triples), map(_target, triples)))
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


def summary(graph: Graph, limit: int) -> dict[str, Any]:
    """:func:`paging.summarise` of the whole graph, from its endpoint index: the same value, worked
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
    """The most connected names with their relation counts, as paging.most_connected gives them;
    None when a write may have let another name in that only a count of every name can find."""


def summary_counts(graph: Graph) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """What a summary of the graph is cut from: every entity type with its count (most common
    first, ties by name) and the most connected names (see paging.most_connected)."""
    census = census_of(graph)
    assert census.connected is not None
    return ranked_types(census.types), list(census.connected)


def census_of(graph: Graph) -> Census:
    """The graph's census: the one its writes kept up to date, or counted now (in C, no Python
    code per entity or relation) and kept with the graph."""
    known = _known_census(graph)
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


def _known_census(graph: Graph) -> Census | None:
    known: Census | None = graph.census or graph.memo.get("census")
    return known


def _degree(links: Mapping[str, AbstractSet[Triple]], name: str) -> int:
    triples = links.get(name, ())
    return len(triples) + sum(1 for source, target, _ in triples if source == target)


def _census_after_entities(graph: Graph, entities: Mapping[str, Node], changed: Iterable[str]) -> Census | None:
    """The census once `changed` names have their nodes in `entities` (None: gone), when known."""
    census = _known_census(graph)
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


def _census_after_links(census: Census | None, links: Mapping[str, AbstractSet[Triple]],
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


def with_word_index(graph: Graph) -> Graph:
    """The graph with its word index, which makes most searches read only the entities that match."""
    if graph.words is not None:
        return graph
    return replace(graph, words=WordIndex.build((name, node.text) for name, node in graph.entities.items()))


def with_term_index(graph: Graph) -> Graph:
    """The graph with the index that ranks entities for a query taken as words."""
    if graph.terms is not None:
        return graph
    from ..index import ranking

    return replace(graph, terms=ranking.TermIndex.build((name, node.text) for name, node in graph.entities.items()))


def carry_word_index(indexed: Graph, later: Graph) -> Graph | None:
    """`later` with the indexes of `indexed`, an earlier version of it, brought up to date;
    None when so much changed (a reload from the file changes everything) that new indexes are cheaper."""
    before, after = indexed.entities, later.entities
    # Writes keep the Node of every entity they leave alone, so identity tells what changed.
    changed = [name for name, node in after.items() if before.get(name) is not node]
    changed += [name for name in before if name not in after]
    if len(changed) > _worth_one_by_one(len(after)):
        return None
    words = later.words if indexed.words is None else indexed.words.updated(_text_changes(before, after, changed))
    terms = later.terms if indexed.terms is None else indexed.terms.updated(_text_changes(before, after, changed))
    return replace(later, words=words, terms=terms)


def candidates(graph: Graph, needle: str) -> set[str] | None:
    if graph.words is None:
        return None
    return graph.words.candidates(needle, limit=_worth_one_by_one(len(graph.entities)))


def _worth_one_by_one(entities: int) -> int:
    """How many entities are worth handling one by one before a pass over all of them is cheaper:
    a quarter of a large graph; a small graph is cheap either way."""
    return max(entities // 4, 64)


def fields_contain(node: Node, needle: str) -> bool:
    fields = (node.record.name, node.record.entityType, *node.record.observations)
    return any(needle in field.lower() for field in fields)


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
    links = graph.links
    triples: set[Triple] = set().union(*[links[name] for name in names if name in links])
    return list(map(_view, sorted(map(graph.relations.__getitem__, triples), key=_seq)))


# --------------------------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------------------------


class _LinkEdits:
    """Copy-on-write edits of the endpoint index: each touched name's set is copied once."""

    def __init__(self, links: Mapping[str, AbstractSet[Triple]]) -> None:
        self._links: dict[str, AbstractSet[Triple]] = dict(links)
        self._owned: dict[str, set[Triple]] = {}
        self.touched: set[str] = set()

    def _own(self, name: str) -> set[Triple]:
        if (owned := self._owned.get(name)) is None:
            owned = self._owned[name] = set(self._links.get(name, ()))
            self._links[name] = owned
            self.touched.add(name)
        return owned

    def add(self, triple: Triple) -> None:
        self._own(triple[0]).add(triple)
        self._own(triple[1]).add(triple)

    def discard(self, triple: Triple) -> None:
        for name in (triple[0], triple[1]):
            if name in self._links:
                links = self._own(name)
                links.discard(triple)
                if not links:
                    del self._links[name]
                    del self._owned[name]

    def result(self) -> dict[str, AbstractSet[Triple]]:
        return self._links


def _with_entities(graph: Graph, entities: Mapping[str, Node], changed: Iterable[str], **fields: Any) -> Graph:
    """The graph with new entities, its indexes and census told about the `changed` names."""
    words, terms = graph.words, graph.terms
    changed = list(changed)
    if words is not None:
        words = words.updated(_text_changes(graph.entities, entities, changed))
    if terms is not None:
        terms = terms.updated(_text_changes(graph.entities, entities, changed))
    census = _census_after_entities(graph, entities, changed)
    return replace(graph, entities=entities, words=words, terms=terms, census=census, **fields)


def _text_changes(before: Mapping[str, Node], after: Mapping[str, Node], names: Iterable[str]) -> Iterator[TextChange]:
    for name in names:
        old, new = before.get(name), after.get(name)
        yield name, None if old is None else old.text, None if new is None else new.text


def _missing_message(missing: Sequence[str]) -> str:
    if len(missing) == 1:
        return f"Entity with name {missing[0]} not found"
    return f"Entities with names {', '.join(missing)} not found"


def create_entities(graph: Graph, entities: Sequence[Mapping[str, Any]], now: str | None = None) -> Change:
    """New entities; names that exist, or repeat an earlier name of the call, are skipped whole.

    Each is created `now` (a UTC stamp; None: no dates), its observations recorded now and,
    with the item's `happenedOn`, told to have happened then (see :mod:`.dates`)."""
    happened = [_happened(item) for item in entities]  # every date checked before anything is made
    fresh: dict[str, Node] = {}
    skipped: dict[str, None] = {}
    seq = graph.next_seq
    for item, when in zip(entities, happened, strict=True):
        name = item["name"]
        if name in graph.entities or name in fresh:
            skipped[name] = None
            continue
        record = dates.created(name, item["entityType"], unique(item["observations"]), now, when)
        if (author := authors.author_of(item, now)) is not None:
            record = authors.with_authors(record, [author] * len(record.observations))
        fresh[name] = make_node(record, seq)
        seq += 1
    # The entities as given (as the reference answers): their dates show in reads.
    value: dict[str, Any] = {"entities": [_undated_view(node) for node in fresh.values()]}
    if skipped:
        value["skipped"] = list(skipped)
    if not fresh:
        return Change(graph, value, False)
    return Change(_with_entities(graph, {**graph.entities, **fresh}, fresh, next_seq=seq), value, True)


def create_relations(graph: Graph, relations: Sequence[Mapping[str, Any]]) -> Change:
    """New relations between existing entities; relations that exist already are skipped."""
    missing = unique(name for item in relations for name in (item["from"], item["to"])
                     if name not in graph.entities)
    if missing:
        raise GraphError(f"{_missing_message(missing)}; create the missing entities first "
                         "(create_entities). No relations were created.")
    fresh: dict[Triple, Edge] = {}
    seq = graph.next_seq
    for item in relations:
        triple = (item["from"], item["to"], item["relationType"])
        if triple in graph.relations or triple in fresh:
            continue
        fresh[triple] = make_edge(RelationRecord(*triple), seq)
        seq += 1
    value = {"relations": [edge.view for edge in fresh.values()]}
    if not fresh:
        return Change(graph, value, False)
    edits = _LinkEdits(graph.links)
    for triple in fresh:
        edits.add(triple)
    links = edits.result()
    new = replace(graph, relations={**graph.relations, **fresh}, links=links, next_seq=seq,
                  census=_census_after_links(_known_census(graph), links, edits.touched))
    return Change(new, value, True)


def add_observations(graph: Graph, observations: Sequence[Mapping[str, Any]], now: str | None = None) -> Change:
    """Observations the entities do not have yet; fails whole when any entity is missing (or a
    happenedOn is not a date). Each is recorded `now` (None: undated), with its item's happenedOn."""
    missing = unique(item["entityName"] for item in observations if item["entityName"] not in graph.entities)
    if missing:
        raise GraphError(f"{_missing_message(missing)}. No observations were added.")
    happened = [_happened(item) for item in observations]
    lists: dict[str, tuple[list[tuple[str, str | None, str | None]], set[str]]] = {}
    written_by: dict[str, list[str | None]] = {}
    results = []
    for item, when in zip(observations, happened, strict=True):
        name = item["entityName"]
        if name not in lists:
            lists[name] = ([], set(graph.entities[name].record.observations))
        current, present = lists[name]
        author = authors.author_of(item, now)
        added = []
        for content in item["contents"]:
            if content not in present:  # one already there keeps its first author
                present.add(content)
                current.append((content, now, when))
                written_by.setdefault(name, []).append(author)
                added.append(content)
        results.append({"entityName": name, "addedObservations": added})
    grown = {name: _with_record(graph.entities[name], _grown(graph.entities[name].record, current, now, written_by[name]))
             for name, (current, _) in lists.items() if current}
    value = {"results": results}
    if not grown:
        return Change(graph, value, False)
    return Change(_with_entities(graph, {**graph.entities, **grown}, grown), value, True)


def delete_entities(graph: Graph, entity_names: Sequence[str]) -> Change:
    """Removes the entities and every relation touching one of the names; never fails."""
    requested = unique(entity_names)
    found = [name for name in requested if name in graph.entities]
    not_found = [name for name in requested if name not in graph.entities]
    doomed: set[Triple] = set()
    for name in requested:
        doomed.update(graph.links.get(name, ()))
    message = _deleted_entities_message(len(found), len(doomed), not_found)
    value = {"success": True, "message": message, "notFound": not_found}
    if not found and not doomed:
        return Change(graph, value, False)
    gone = set(found)
    new = _without_relations(_with_entities(graph, _without_keys(graph.entities, gone), gone), doomed, gone)
    return Change(new, value, True)


def _deleted_entities_message(entities: int, relations: int, not_found: Sequence[str]) -> str:
    message = f"Deleted {plural(entities, 'entity', 'entities')}"
    if relations:
        message += f" and {plural(relations, 'relation', 'relations')} connected to them"
    message += "."
    if not_found:
        message += f" Not found: {', '.join(not_found)}."
    return message


def _without_keys(mapping: Mapping[Any, Any], keys: set[Any]) -> Mapping[Any, Any]:
    if not keys:
        return mapping
    # Copying a dict whole is much cheaper than rebuilding it item by item.
    copy = dict(mapping)
    for key in keys:
        del copy[key]
    return copy


def _without_relations(graph: Graph, doomed: set[Triple], gone_entities: Collection[str] = ()) -> Graph:
    """The graph without the given relations and without the repeats of anything removed."""
    relations: Mapping[Triple, Edge] = graph.relations
    links: Mapping[str, AbstractSet[Triple]] = graph.links
    census = _known_census(graph)
    if doomed:
        relations = _without_keys(graph.relations, doomed)
        edits = _LinkEdits(graph.links)
        for triple in doomed:
            edits.discard(triple)
        links = edits.result()
        census = _census_after_links(census, links, edits.touched)
    kept = tuple(line for line in graph.kept
                 if line.entity not in gone_entities and line.relation not in doomed)
    return replace(graph, relations=relations, links=links, kept=kept, census=census)


def delete_observations(graph: Graph, deletions: Sequence[Mapping[str, Any]], now: str | None = None) -> Change:
    """Removes the given observations (every copy of each, with their dates); unknown entities and
    observations are ignored. An entity that lost one was changed `now` (None: its dates kept as they are)."""
    unwanted: dict[str, set[str]] = {}
    for item in deletions:
        name = item["entityName"]
        if name in graph.entities:
            unwanted.setdefault(name, set()).update(item["observations"])
    shrunk: dict[str, Node] = {}
    for name, doomed in unwanted.items():
        record = graph.entities[name].record
        keep = [observation not in doomed for observation in record.observations]
        if not all(keep):
            shrunk[name] = _with_record(graph.entities[name], authors.kept(record, dates.with_kept(record, keep, now), keep))
    count = sum(len(graph.entities[name].record.observations) - len(node.record.observations)
                for name, node in shrunk.items())
    value = {"success": True, "message": f"Deleted {plural(count, 'observation', 'observations')}.",
             "deletedCount": count}
    if not shrunk:
        return Change(graph, value, False)
    return Change(_with_entities(graph, {**graph.entities, **shrunk}, shrunk), value, True)


def delete_relations(graph: Graph, relations: Sequence[Mapping[str, Any]]) -> Change:
    """Removes the given relations; relations that do not exist are ignored."""
    doomed = {triple for triple in ((item["from"], item["to"], item["relationType"]) for item in relations)
              if triple in graph.relations}
    value = {"success": True, "message": f"Deleted {plural(len(doomed), 'relation', 'relations')}.",
             "deletedCount": len(doomed)}
    if not doomed:
        return Change(graph, value, False)
    return Change(_without_relations(graph, doomed), value, True)


# --------------------------------------------------------------------------------------------
# Merging another memory into this one (mcp-server-memory import)
# --------------------------------------------------------------------------------------------

IncomingEntity: TypeAlias = tuple[EntityRecord, "dict[str, msgspec.Raw] | None"]
"""An entity to merge, with the extra fields its line carried (kept on what it creates)."""
IncomingRelation: TypeAlias = tuple[RelationRecord, "dict[str, msgspec.Raw] | None"]


def merge_graph(graph: Graph, entities: Sequence[IncomingEntity], relations: Sequence[IncomingRelation],
                now: str | None = None) -> Change:
    """Another graph merged in by the tools' rules, in order, as one change.

    An entity whose name is new is created (create_entities); an entity that exists gains the
    observations it lacks (add_observations), and keeps its type even when the incoming one
    differs; a relation is created when both ends exist after the entities are merged and it
    is not there yet (create_relations). The value reports all of it, and what was left out.

    Dates come along: an observation keeps the recordedAt and happenedOn it carries (one without
    stays undated: when it was recorded is not known, the import is not that time); a created
    entity keeps its createdAt and updatedAt and gets none it does not bring (so that an export
    imported into an empty memory is the same memory); an entity that gained observations was
    changed `now` (None: no new dates).
    """
    # name -> (the first incoming record, its observations with their dates, their contents, extra fields)
    Dated = list[tuple[str, str | None, str | None]]
    created: dict[str, tuple[EntityRecord, Dated, set[str], dict[str, msgspec.Raw] | None]] = {}
    grown: dict[str, tuple[Dated, set[str]]] = {}
    added: dict[str, list[str]] = {}
    conflicts: list[dict[str, str]] = []
    for record, extra in entities:
        name = record.name
        if name in created:
            kept_type, current, present = created[name][0].entityType, created[name][1], created[name][2]
        elif name in graph.entities:
            kept_type = graph.entities[name].record.entityType
            if name not in grown:
                grown[name] = ([], set(graph.entities[name].record.observations))
            current, present = grown[name]
        else:
            current, present = [], set()
            created[name] = (record, current, present, extra or None)
            kept_type = record.entityType
        if record.entityType != kept_type:
            conflicts.append({"name": name, "entityType": kept_type, "incomingType": record.entityType})
        for content, recorded, happened in dates.incoming(record):
            if content not in present:
                present.add(content)
                current.append((content, recorded, happened))
                if name in grown:
                    added.setdefault(name, []).append(content)
    seq = graph.next_seq
    fresh: dict[str, Node] = {}
    written_by = authors.by_content(record for record, _ in entities)

    def authors_for(name: str, observations: Dated) -> list[str | None]:
        return [written_by.get(name, {}).get(content) for content, _, _ in observations]
    for name, (first, observations, _, extra) in created.items():
        made = _grown(EntityRecord(name, first.entityType, []), observations, first.updatedAt,
                      authors_for(name, observations))
        made = msgspec.structs.replace(made, createdAt=first.createdAt)
        fresh[name] = make_node(made, seq, extra)
        seq += 1
    extended = {name: _with_record(graph.entities[name], _grown(graph.entities[name].record, grown[name][0], now,
                                                                authors_for(name, grown[name][0])))
                for name in added}
    everyone = {**graph.entities, **extended, **fresh}

    new_relations: dict[Triple, Edge] = {}
    present_relations = 0
    left_out: list[dict[str, Any]] = []
    for link, extra in relations:
        triple = (link.source, link.target, link.relationType)
        if triple in graph.relations or triple in new_relations:
            present_relations += 1
        elif missing := unique(name for name in triple[:2] if name not in everyone):
            left_out.append({"from": triple[0], "to": triple[1], "relationType": triple[2], "missing": missing})
        else:
            new_relations[triple] = make_edge(link, seq, extra or None)
            seq += 1

    value: dict[str, Any] = {
        "createdEntities": list(fresh),
        "addedObservations": [{"entityName": name, "addedObservations": contents} for name, contents in added.items()],
        "createdRelations": [edge.view for edge in new_relations.values()],
        "unchangedEntities": len({record.name for record, _ in entities} - fresh.keys() - added.keys()),
        "presentRelations": present_relations,
        "typeConflicts": conflicts,
        "relationsWithoutEntities": left_out,
    }
    if not (fresh or extended or new_relations):
        return Change(graph, value, False)
    merged = _with_entities(graph, everyone, [*extended, *fresh], next_seq=seq)
    if new_relations:
        edits = _LinkEdits(merged.links)
        for triple in new_relations:
            edits.add(triple)
        links = edits.result()
        merged = replace(merged, relations={**graph.relations, **new_relations}, links=links,
                         census=_census_after_links(_known_census(merged), links, edits.touched))
    return Change(merged, value, True)


# --------------------------------------------------------------------------------------------
# A memory shared through a database: what a write changed, row by row
# --------------------------------------------------------------------------------------------


class RowChanges(NamedTuple):
    """What a write changed, row by row: what a database store writes in its transaction."""

    entities: list[Node]
    """Entities made or replaced (new observations, fewer observations)."""
    gone_entities: list[str]
    relations: list[Edge]
    gone_relations: list[Triple]


def row_changes(before: Graph, after: Graph, names: Iterable[str] | None = None,
                triples: Iterable[Triple] | None = None) -> RowChanges:
    """The rows that differ between two versions of a graph.

    `names` and `triples`: where the write may have changed something (the names and relations
    it was given); the relations touching those names are looked at too. None: look everywhere
    (an import), which costs a pass over the whole graph."""
    if names is None or triples is None:
        name_set: set[str] = set(before.entities) | set(after.entities)
        triple_set: set[Triple] = set(before.relations) | set(after.relations)
    else:
        name_set = set(names)
        triple_set = set(triples)
        for name in name_set:
            triple_set.update(before.links.get(name, ()))
            triple_set.update(after.links.get(name, ()))
    entities = [node for name in name_set if (node := after.entities.get(name)) is not None
                and before.entities.get(name) is not node]
    entities.sort(key=_seq)
    gone = [name for name in name_set if name in before.entities and name not in after.entities]
    relations = sorted((edge for triple in triple_set if (edge := after.relations.get(triple)) is not None
                        and triple not in before.relations), key=_seq)
    gone_relations = [triple for triple in triple_set if triple in before.relations and triple not in after.relations]
    return RowChanges(entities, gone, relations, gone_relations)
