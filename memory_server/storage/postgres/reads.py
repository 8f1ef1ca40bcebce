"""What a store reads of a memory, and the graphs it makes of the rows (P2, P9, P12): the rows of
one snapshot, the candidates of a search (a superset of its matches, on which retrieval's rules then
run), and a whole memory read again that shares what did not change with the read before."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import Any, Final

import msgspec
import psycopg

from ...index import ranking
from ...model import graph as rules
from ...model.graph import Edge, Graph, GraphError, Node, Triple
from ...model.records import EntityRecord, Extended, RelationRecord, decode_file, decode_line
from ...model.writes import unique
from .. import collector
from .statements import (
    ALL_ENTITIES,
    ALL_RELATIONS,
    CONTAINING,
    CONTAINING_SCAN,
    COUNTS,
    HOLDING,
    NAMED_TOUCHING,
    REVISION,
    Version,
    haystack_of,
    indexed_term,
    like_pattern,
    utf8,
    version_of,
)

TRIGRAM_CHARACTERS: Final = 3
"""A whole query shorter than this has no trigram to look up: its candidates are found by a scan."""


def _record_from(line: bytes) -> tuple[Any, dict[str, msgspec.Raw] | None]:
    """A row's record and the extra fields its line carries (a line this server wrote)."""
    item = decode_line(line, 0)
    if isinstance(item, Extended):
        return item.record, item.extra
    return item, None


def node_from(seq: int, line: bytes) -> Node:
    record, extra = _record_from(line)
    if not isinstance(record, EntityRecord):
        raise GraphError(f"The database holds an entity row that is not an entity: {line[:200]!r}")
    return rules.make_node(record, seq, extra, line=line)


def _edge_from(seq: int, line: bytes) -> Edge:
    record, extra = _record_from(line)
    if not isinstance(record, RelationRecord):
        raise GraphError(f"The database holds a relation row that is not a relation: {line[:200]!r}")
    return rules.make_edge(record, seq, extra, line=line)


def _key(edge: Edge) -> Triple:
    record = edge.record
    return record.source, record.target, record.relationType


def subgraph(entity_rows: Iterable[tuple[int, bytes]], relation_rows: Iterable[tuple[int, bytes]] = (),
             next_seq: int = 0) -> Graph:
    """The graph of some rows of a memory, each in its place (seq), as the rules read a whole one."""
    # (psycopg gives bytea as bytes.)
    nodes = sorted((node_from(seq, line) for seq, line in entity_rows), key=_seq)
    edges = sorted((_edge_from(seq, line) for seq, line in relation_rows), key=_seq)
    relations = {_key(edge): edge for edge in edges}
    links: defaultdict[str, set[Triple]] = defaultdict(set)
    for triple in relations:
        links[triple[0]].add(triple)
        links[triple[1]].add(triple)
    return Graph({node.record.name: node for node in nodes}, relations, dict(links), next_seq=next_seq)


def graph_again(before: Graph, entity_lines: Sequence[bytes], relation_lines: Sequence[bytes],
                next_seq: int) -> Graph:
    """The graph of a memory's lines (what graph_of makes of them) made from an
    earlier read of it, `before` (P12): an entity or relation whose line is the same is the same
    node or edge (its place updated), so only the rows written since are decoded, and the answers
    of the earlier reads share their objects with this one's. A pager keeping a few cut read_graph
    answers (paging.kept.KEPT_ANSWERS) then holds one memory's objects, not one copy of them per read,
    and forgetting the oldest frees a few objects, not a whole memory's, whose cost would fall on
    whichever answer made the pager forget it, as often as not a search."""
    nodes = {node.line: node for node in before.entities.values()}
    edges = {edge.line: edge for edge in before.relations.values()}
    entities: dict[str, Node] = {}
    for seq, line in enumerate(entity_lines):
        node = nodes.get(line)
        if node is None:
            node = node_from(seq, line)
        elif node.seq != seq:  # (an entity before it was deleted)
            node = node._replace(seq=seq)
        entities[node.record.name] = node
    relations: dict[Triple, Edge] = {}
    links: defaultdict[str, set[Triple]] = defaultdict(set)
    for seq, line in enumerate(relation_lines):
        edge = edges.get(line)
        if edge is None:
            edge = _edge_from(seq, line)
        elif edge.seq != seq:
            edge = edge._replace(seq=seq)
        triple = _key(edge)
        relations[triple] = edge
        links[triple[0]].add(triple)
        links[triple[1]].add(triple)
    return Graph(entities, relations, dict(links), next_seq=max(next_seq, len(entities), len(relations)))


def union(graphs: Sequence[Graph]) -> Graph:
    """The rows of several reads of one snapshot as one graph, each in its place."""
    entities = {name: node for graph in graphs for name, node in graph.entities.items()}
    relations = {triple: edge for graph in graphs for triple, edge in graph.relations.items()}
    links: defaultdict[str, set[Triple]] = defaultdict(set)
    ordered = dict(sorted(relations.items(), key=lambda item: item[1].seq))
    for triple in ordered:
        links[triple[0]].add(triple)
        links[triple[1]].add(triple)
    return Graph(dict(sorted(entities.items(), key=lambda item: item[1].seq)), ordered, dict(links))


def _seq(item: Node | Edge) -> int:
    return item.seq


class MemoryTerms:
    """ranking.Terms of a memory from the holders of a query's terms and the memory's counts: the
    postings of those terms are all there (every holder was read), the statistics are the memory's
    (`entities` of them, `total` tokens)."""

    def __init__(self, holders: Graph, entities: int, total: int) -> None:
        built = ranking.TermIndex.build((name, node.text) for name, node in holders.entities.items())
        self.names = built.names
        self.spans = built.spans
        self.column = built.column
        self.entities = entities
        self.total = total


class Read:
    """The rows one statement of statements._with_touching read: the graph of its entities, and the
    keys of the relations touching them, each once, in graph order. Made into Edges (a whole
    :class:`Graph`) only when a rule needs them; a search's answer only needs the views of those
    touching its matches (:meth:`touching`): a search of a million entities reads 40,000."""

    __slots__ = ("entities", "relations")

    def __init__(self, rows: Sequence[tuple[Any, ...]]) -> None:
        self.entities = subgraph([(seq, line) for seq, line, source, _, _ in rows if source is None])
        places: dict[tuple[bytes, bytes, bytes], int] = {}  # (one between two entities read comes twice)
        for seq, _, source, target, kind in rows:
            if source is not None:
                places[source, target, kind] = seq
        self.relations = [(seq, _text(source), _text(target), _text(kind))
                          for (source, target, kind), seq in sorted(places.items(), key=_second)]

    def touching(self, names: AbstractSet[str]) -> list[dict[str, Any]]:
        """The views of the relations read with an end in `names`, in graph order (as
        rules.relations_touching gives them on the whole graph)."""
        return [{"from": source, "to": target, "relationType": kind} for _, source, target, kind in self.relations
                if source in names or target in names]

    def graph(self) -> Graph:
        relations: dict[Triple, Edge] = {}
        links: defaultdict[str, set[Triple]] = defaultdict(set)
        for seq, name, other, label in self.relations:
            triple = (name, other, label)
            # (A read's relations keep no line: it is never written back from a read.)
            relations[triple] = Edge(RelationRecord(name, other, label),
                                     {"from": name, "to": other, "relationType": label}, seq, b"")
            links[name].add(triple)
            links[other].add(triple)
        return replace(self.entities, relations=relations, links=dict(links))


def _second(item: tuple[Any, int]) -> int:
    return item[1]


def _text(column: bytes) -> str:
    return column.decode("utf-8", "surrogatepass")


class Snapshot:
    """The reads of one answer: one statement, or several in one REPEATABLE READ READ ONLY transaction (P2)."""

    def __init__(self, connection: psycopg.Connection[Any], memory: str, trigrams: bool) -> None:
        self._connection = connection
        self._memory = memory
        self._trigrams = trigrams
        self._counts: tuple[int, int, int] | None = None

    def _read(self, statement: str, value: Any) -> Read:
        """The rows a statement of statements._with_touching finds: the entities, and the relations touching them."""
        # Not prepared: a search's plan depends on its pattern (an index for a rare one, a scan else).
        # In binary: the lines (bytea) come as they are, not in hex, which doubles what is sent and
        # which both ends would encode and decode (a tenth of a search's statement at 10,000 entities).
        rows = self._connection.execute(statement, {"memory": self._memory, "value": value}, prepare=False,
                                        binary=True).fetchall()
        with collector.paused():
            return Read(rows)

    def _graph(self, statement: str, value: Any) -> Graph:
        """The graph of the entities a statement of statements._with_touching finds, with the relations touching them."""
        return self._read(statement, value).graph()

    def named(self, names: Iterable[str]) -> Graph:
        return self._graph(NAMED_TOUCHING, [utf8(name) for name in unique(names)])

    def containing(self, needle: str) -> Read:
        """A superset of the entities whose search text contains the lower-cased needle (P9)."""
        if self._trigrams and len(needle) >= TRIGRAM_CHARACTERS:
            return self._read(CONTAINING, like_pattern(needle))
        return self._read(CONTAINING_SCAN, haystack_of(needle))

    def holding(self, terms: Sequence[str]) -> Read:
        # A long term is looked up as the index holds it, and as it is (a row written before
        # INDEXED_TERM_BYTES held it whole, when it fitted).
        looked_up = [*(indexed_term(term) for term in terms), *(term for term in terms if indexed_term(term) != term)]
        return self._read(HOLDING, looked_up)

    def every_line(self) -> tuple[list[bytes], list[bytes]]:
        """Every row's line: the entities', and the relations', each in graph order."""
        return ([bytes(line) for (line,) in self._connection.execute(ALL_ENTITIES, (self._memory,))],
                [bytes(line) for (line,) in self._connection.execute(ALL_RELATIONS, (self._memory,))])

    def version(self) -> Version:
        return version_of(self._connection.execute(REVISION, (self._memory,)).fetchone())

    def counts(self) -> tuple[int, int, int]:
        """The memory's next position, entity count and total length (as of the snapshot)."""
        if self._counts is None:
            row = self._connection.execute(COUNTS, (self._memory,)).fetchone()
            self._counts = (0, 0, 0) if row is None else (row[0], row[1], row[2])
        return self._counts


def graph_of(lines: list[bytes], next_seq: int, where: str) -> Graph:
    """The graph of every line of a memory (its entities' and relations', in graph order)."""
    graph = rules.graph_from_lines(decode_file(b"\n".join(lines)))
    if graph.kept or graph.rejected:
        raise GraphError(f"The {where} holds rows this server cannot read; nothing was changed.")
    return replace(graph, next_seq=max(next_seq, graph.next_seq))
