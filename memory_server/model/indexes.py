"""The indexes a graph carries for searches: its word index and the ranking's term index, made
once and then kept up to date by every write, and the candidates they give a search."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ..index.search import TextChange, WordIndex

if TYPE_CHECKING:
    from .graph import Graph, Node


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
    words = later.words if indexed.words is None else indexed.words.updated(text_changes(before, after, changed))
    terms = later.terms if indexed.terms is None else indexed.terms.updated(text_changes(before, after, changed))
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


def text_changes(before: Mapping[str, Node], after: Mapping[str, Node], names: Iterable[str]) -> Iterator[TextChange]:
    """What the `names` changed between two versions of the entities, as the indexes take it:
    (name, text before, text after), None where there is no entity."""
    for name in names:
        old, new = before.get(name), after.get(name)
        yield name, None if old is None else old.text, None if new is None else new.text

