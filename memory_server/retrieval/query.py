"""The one place where a search finds what it answers: the rule, the entry point, the answer.

Rules (the docs repeat them in docs/search.md):

1. The whole query first: when entities contain the whole query (ignoring case) in their name,
   type or an observation, those are the matches, exactly as the reference server finds them;
   they are ordered by :func:`relevance` (the query is the name, starts it, is in it, in the
   type, only in observations; whole words before parts; more occurrences first; graph order).
2. Then words: otherwise the query is taken as words, and every entity holding one of its
   terms matches, ranked by :func:`..index.ranking.rank` (BM25 over entities).
3. The answer is made of facts: :func:`.answer.shape` orders the observations of the matches
   (rule 1: as written, matching ones first in a large entity; rule 2: each fact scored on its
   own, fused with semantic candidates when a model is installed), and the pager cuts it into
   pages of a glance each (:data:`.answer.DEFAULT_CHARACTERS`), each page's cursor to the next.

The server's searches go through retrieval/search.py, which runs :func:`rule` on the candidates
of whichever source answers (the graph, the index cache, the file's records, the database) and
then :func:`answer_of` or :func:`.answer.shape`. :func:`search` and :func:`matches` are the same
rules on a graph in memory alone (the command line, the benchmarks, the tests).
"""

from __future__ import annotations

import heapq
import importlib
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

from ..index import ranking
from ..index.search import FIELD_SEPARATOR
from ..model import graph as rules
from ..model import indexes
from ..model.graph import Graph, Node
from . import answer as answers
from .paging.pages import Facts, Touching

if TYPE_CHECKING:
    from ..index.ranking import Ranker
    from ..model.dates import Span

_Match = TypeVar("_Match")
_Ranked = TypeVar("_Ranked")
_Item = TypeVar("_Item")
_Other = TypeVar("_Other")

MODEL_QUERY_CHARS: Final = 32_768
"""The start of a query the semantic model is given: it reads at most 256 tokens, and a token is
made of at most about a hundred characters, so the rest of a long query could not change its
vector; given whole, a pasted text of megabytes would cost seconds before it is cut."""


def search(graph: Graph, query: str, *, characters: int = answers.DEFAULT_CHARACTERS,
           limit: int | None = None, ranked: Callable[[Graph], Graph] | None = None,
           window: Span | None = None) -> Facts:
    """The answer to a search_nodes call on the graph in memory: rules 1 to 3, semantic candidates
    included when ``retrieval/semantic`` and its model are installed. `ranked`: see :func:`matches`."""
    graph, nodes = matched_in(graph, query, ranked=ranked)
    return answer_of(graph, query, views_of(nodes), touching_in(graph), characters=characters,
                     limit=limit, window=window)


def answer_of(graph: Graph, query: str, entities: Sequence[Any], touching: Touching, *, characters: int,
              limit: int | None = None, window: Span | None = None) -> Facts:
    """Rule 3 on what rules 1 and 2 matched (all of it: `limit` applies here), and the relations
    touching them (see answer.shape). `graph`: the whole graph, for semantic candidates and the
    question's scope. `window`: see answer.shape."""
    nearest = None
    if not (entities and answers.whole_query_matches(query, entities[0])):
        nearest = semantic_nearest(graph)
    return answers.shape(query, entities, touching, characters, limit=limit, nearest=nearest,
                         lookup=partial(view_of, graph), opened=partial(opened_in, graph), window=window)


def touching_in(graph: Graph) -> Touching:
    """The relations of `graph` touching some entities, in graph order: what an answer's page asks.
    An answer kept for its cursors holds the graph's relations and links, not the graph: a write of
    relations makes new ones (about 14 MB at 200,000 relations), any other write shares them."""
    return partial(rules.linked, graph.links, graph.relations)


def opened_in(graph: Graph, names: Sequence[str]) -> dict[str, Any]:
    """open_nodes on the graph: the entities of these names that exist and the relations touching them."""
    return rules.open_nodes(graph, list(names))


def view_of(graph: Graph, name: str) -> dict[str, Any] | None:
    node = graph.entities.get(name)
    return None if node is None else node.view


def semantic_nearest(graph: Graph) -> answers.Nearest | None:
    """The semantic candidates of a query, (entity name, observation index, similarity) best first,
    from ``retrieval/semantic`` when it is there (loaded with the first search that asks for it);
    None without it. ``nearest`` itself answers None when no model is installed."""
    try:
        # By name: the module may not be there (an install without the semantic extra's code).
        semantic = importlib.import_module(f"{__package__}.semantic")
    except ImportError:
        return None
    nearest: Callable[[Graph, str, int], list[tuple[str, int, float]] | None] | None = getattr(semantic, "nearest", None)
    if nearest is None:
        return None
    return lambda query, k: nearest(graph, query[:MODEL_QUERY_CHARS], k)


def rule(containing: Callable[[str], Sequence[_Match] | None], by_words: Callable[[str], _Ranked],
         query: str) -> Sequence[_Match] | _Ranked:
    """Rules 1 and 2, wherever the candidates come from (see search.py): the entities containing
    the whole query when any does, else the query taken as words, ranked (or what `by_words`
    answers instead: None from a source that cannot rank)."""
    matched = containing(query)
    return by_words(query) if matched is None else matched


def matches(graph: Graph, query: str, limit: int | None = None, ranker: Ranker | None = None, *,
            ranked: Callable[[Graph], Graph] | None = None) -> dict[str, Any]:
    """The best `limit` (default: all) entities for the query, best first, and every relation
    with at least one end among them, in graph order.

    When entities contain the whole query (ignoring case) in their name, type or an
    observation, those are the matches, as the reference server finds them; otherwise the query
    is taken as words and entities holding any of its terms are ranked (see :mod:`..index.ranking`).

    `ranked`: the graph with its ranking index, asked for only when the query is taken as words
    (the store makes that index once per load, or raises its NotInMemory for a read that must not
    wait for it); without it a graph lacking the index gets one for this search."""
    graph, nodes = matched_in(graph, query, ranker, ranked=ranked)
    return found(graph, nodes, limit)


def matched_in(graph: Graph, query: str, ranker: Ranker | None = None, *,
               ranked: Callable[[Graph], Graph] | None = None) -> tuple[Graph, Sequence[Node]]:
    """Rules 1 and 2 on a graph: the entities matched, best first, and the graph they were found
    in (with its ranking index when the query was taken as words). See :func:`matches`."""
    def by_words(words: str) -> Sequence[Node]:
        nonlocal graph
        if ranked is not None:
            graph = ranked(graph)
        return ranked_by_words(graph, words, ranker)

    nodes = rule(partial(contains_query, graph), by_words, query)
    return graph, nodes


def found(graph: Graph, matched: Sequence[Node], limit: int | None = None) -> dict[str, Any]:
    """A search's answer: the first `limit` of the matched entities and the relations touching them."""
    if limit is not None:
        matched = matched[:limit]
    return {
        "entities": [node.view for node in matched],
        "relations": rules.relations_touching(graph, {node.record.name for node in matched}),
    }


def contains_query(graph: Graph, query: str) -> list[Node] | None:
    """The entities containing the whole query, most relevant first (None: no entity does).

    Relevance: the query is the name, starts it, is inside it, is inside the type, or only in
    observations; then whole-word occurrences before parts of words, more occurrences first;
    then graph order. A blank query (every entity holds it) keeps graph order."""
    needle = query.lower()
    if FIELD_SEPARATOR in needle:
        matched = [node for node in graph.entities.values() if indexes.fields_contain(node, needle)]
    elif (names := indexes.candidates(graph, needle)) is not None:
        # In no particular order: the sort by relevance below ends in graph order.
        matched = [node for node in map(graph.entities.__getitem__, names) if needle in node.text]
    else:
        matched = [node for node in graph.entities.values() if needle in node.text]
    if not matched:
        return None
    if not needle.strip() or FIELD_SEPARATOR in needle:
        return matched
    key = relevance(needle)
    return sorted(matched, key=lambda node: key(node.record.name, node.record.entityType, node.text, node.seq))


def relevance(needle: str) -> Callable[[str, str, str, int], tuple[int, bool, int, int]]:
    """The sort key of an entity containing the lower-cased `needle`, from its name, type,
    search text and place in the graph: lowest first."""

    def key(name: str, entity_type: str, text: str, seq: int) -> tuple[int, bool, int, int]:
        name = name.lower()
        if name == needle:
            tier = 0
        elif name.startswith(needle):
            tier = 1
        elif needle in name:
            tier = 2
        elif needle in entity_type.lower():
            tier = 3
        else:
            tier = 4
        return tier, not stands_alone(needle, text), -text.count(needle), seq

    return key


def stands_alone(needle: str, text: str) -> bool:
    """Whether `needle` occurs in `text` as a whole word: with no word character (a letter, digit or
    underscore, as the regular expression \\w) right before or after it. A few finds beat a regular
    expression scanning the whole text."""
    at, size = text.find(needle), len(needle)
    while at >= 0:
        if not (at and _wordy(text[at - 1])) and not _wordy(text[at + size:at + size + 1]):
            return True
        at = text.find(needle, at + 1)
    return False


def _wordy(character: str) -> bool:
    return character.isalnum() or character == "_"


def ranked_by_words(graph: Graph, query: str, ranker: Ranker | None = None, *, head: int | None = None) -> Ranked[Node]:
    """The entities holding a term of the query, best first (ties in graph order); without the
    graph's term index, one is made for this search. `ranker`: by default the server's; `head`:
    how many are ordered first (:data:`HEAD`; see :class:`Ranked`)."""
    terms = graph.terms if graph.terms is not None else indexes.with_term_index(graph).terms
    assert terms is not None
    entities = graph.entities
    scores = ranking.rank(terms, query, ranker or ranking.DEFAULT, lambda name: entities[name].text)
    return Ranked(_Order(scores, lambda name: entities[name].seq, HEAD if head is None else head), entities.__getitem__)


def views_of(nodes: Sequence[Node]) -> Sequence[Any]:
    """The answer objects of matched entities, in their order (of a :class:`Ranked`, as lazily)."""
    if isinstance(nodes, Ranked):
        return nodes.with_items(_view_of)
    return [node.view for node in nodes]


_view_of: Final = operator.attrgetter("view")

HEAD: Final = 512
"""Entities a ranking by words orders first; four times as many each time more are read."""


class _Order:
    """The order of entities by score, highest first, ties by place in the graph, worked out only
    as far as it is read (see :class:`Ranked`)."""

    __slots__ = ("scores", "_place", "_first", "head", "_whole")

    def __init__(self, scores: Mapping[str, float], place: Callable[[str], int], first: int = HEAD) -> None:
        self.scores = scores
        self._place = place
        self._first = first
        self.head: list[str] = []
        """The names of the first len(head) entities of the whole order."""
        self._whole = not scores

    def ordered(self, names: Sequence[str]) -> list[str]:
        """These names in the whole order: by place, then (a stable sort) by score, two sorts of
        plain numbers in C (a key function would run Python code per entity)."""
        places = list(map(self._place, names))
        negated = [-self.scores[name] for name in names]
        ranked = sorted(range(len(names)), key=places.__getitem__)
        ranked.sort(key=negated.__getitem__)
        return list(map(names.__getitem__, ranked))

    def cover(self, count: int) -> list[str]:
        """The names of at least the first `count` entities (all of them, when fewer), in order."""
        if self._whole or count <= len(self.head):
            return self.head
        scores = self.scores
        wanted = max(count, 4 * len(self.head), self._first)
        if 4 * wanted >= len(scores):
            self.head = self.ordered(list(scores))
            self._whole = True
            return self.head
        least = heapq.nlargest(wanted, scores.values())[-1]
        # Every entity scoring at least the wanted-th best score: all of them come before any other.
        self.head = self.ordered(list(itertools.compress(scores, map(operator.le, itertools.repeat(least),
                                                                    scores.values()))))
        return self.head


class Ranked(Sequence[_Item]):
    """Entities ranked by words, best first (ties in graph order), ordered only as far as they are read.

    The order is the sort of every entity by its score (highest first), then its place in the
    graph; but only its first entities are worked out: the best `n` by a threshold (the `n`-th
    best score, and every entity scoring at least that: exactly the first entities of the whole
    order, ties included), sorted as the whole would be. An answer's facts are scored from the
    first few hundred of tens of thousands (answer.SCORED_FACTS): a common word then costs the
    entities' scores, not a sort of every entity holding it and a list of their objects. Reading
    further orders four times as many, and past a quarter of them every entity, as before.

    `item`: an entity's object by name (its node; :meth:`with_items` gives its view instead)."""

    __slots__ = ("_order", "_item")

    def __init__(self, order: _Order, item: Callable[[str], _Item]) -> None:
        self._order = order
        self._item = item

    @property
    def names(self) -> AbstractSet[str]:
        """The names of every entity ranked, in no order."""
        return self._order.scores.keys()

    def with_items(self, item: Callable[[_Item], _Other]) -> Ranked[_Other]:
        """The same ranking (ordered as far as this one is, and further with it), each entity given
        as item(its object here)."""
        own = self._item
        return Ranked(self._order, lambda name: item(own(name)))

    def among(self, names: Iterable[str]) -> list[_Item]:
        """The entities of these names that are ranked here, once each, in the ranking's order."""
        scores = self._order.scores
        held = [name for name in dict.fromkeys(names) if name in scores]
        return list(map(self._item, self._order.ordered(held)))

    def __len__(self) -> int:
        return len(self._order.scores)

    @overload
    def __getitem__(self, at: int) -> _Item: ...
    @overload
    def __getitem__(self, at: slice) -> list[_Item]: ...

    def __getitem__(self, at: int | slice) -> _Item | list[_Item]:
        if isinstance(at, slice):
            _, stop, step = at.indices(len(self))
            return list(map(self._item, self._order.cover(stop if step > 0 else len(self))[at]))
        if at < 0:
            at += len(self)
        if not 0 <= at < len(self):
            raise IndexError(at)
        return self._item(self._order.cover(at + 1)[at])

    def __iter__(self) -> Iterator[_Item]:
        at = 0
        while at < len(self):
            head = self._order.cover(at + 1)
            yield from map(self._item, head[at:])
            at = len(head)
