"""The graph's indexes as the file store makes them (storage/store.py): the kinds, what losing one
costs, and how an index made from one graph joins the snapshot, which a write may have replaced
meanwhile. Pure: the store holds the locks and publishes what :func:`published` gives."""

from __future__ import annotations

from typing import Final

from ..model import indexes
from ..model.graph import Graph
from .saving import Snapshot

KINDS: Final = {
    "words": ("with_word_index", "Searches will scan every entity: the word index could not be made"),
    "terms": ("with_term_index", "Searches by words will be slow: their index could not be made"),
}
"""Each kind of index: the model's function that makes it, and what losing it costs."""


def published(snapshot: Snapshot, unindexable: dict[str, Graph], graph: Graph, indexed: Graph) -> Snapshot:
    """`snapshot` with `indexed`, made from `graph`, in its place; a graph one index could not be
    made for keeps that mark in `unindexable` with the other index."""
    if snapshot.graph is graph:
        for kind, failed in list(unindexable.items()):
            if failed is graph:
                unindexable[kind] = indexed
        return snapshot._replace(graph=indexed)
    if (snapshot.graph.words is None and indexed.words is not None) or (
            snapshot.graph.terms is None and indexed.terms is not None):
        # A write of this process landed meanwhile: the indexes are brought up to its graph.
        # (After a reload the graph is all new, and the next search or poll indexes it.)
        if (carried := indexes.carry_word_index(indexed, snapshot.graph)) is not None:
            return snapshot._replace(graph=carried)
    return snapshot
