"""The memory file's candidate sources for retrieval/search.py (its CandidateSource protocol, met
structurally: storage does not import retrieval): the graph, and the first-answer sources of a
new process (the cache, the file's records) as coldstart.py lets them answer.

Guarantees:

F1. A source declines a step by answering None, before doing its work: the graph in memory
    without its ranking index declines a search by words when it may not make the index; a
    first-answer source declines what it does not hold (rule 2 for the records, a time window
    for both, a query the cache cannot match).
F2. A first-answer source that fails a check while answering (index_cache C3) is let go
    (coldstart S1) and declines: the graph answers that step.
F3. A first-answer source starts the warm-up (coldstart COLD -> WARM) once it has answered or
    declined, so that the graph is made off the request path.
F4. Once the warm-up has loaded the graph (and while the file is unchanged), a first-answer
    source's answers take their semantic candidates, entities and scope from it (``whole``),
    before its word index is made: the meaning answers from the first search after the load,
    not only once the index is made.
F5. Once the graph is loaded (as in F4), a first-answer source's candidates are the graph's own
    nodes and edges, found where the source says: an answer kept for its cursors refers to the
    graph's objects and holds no copy of them (at 100,000 entities, 20 kept answers held 200 MB
    of copies: docs/semantic.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..model import graph as rules
from ..model.graph import Graph

if TYPE_CHECKING:
    from .coldstart import ColdStart, FirstSource

_Found = TypeVar("_Found")


class GraphCandidates:
    """The graph as a search's candidates, every step answered from it.

    `graph` gives the graph when first asked (a load, for the store's last source); `ranked`
    gives it with its ranking index, or is None: a search by words then declines unless the graph
    has that index already (F1). `windows`: whether a search within a time window may use it (the
    dates of every match are read: not on the event loop)."""

    def __init__(self, graph: Callable[[], Graph], ranked: Callable[[], Graph] | None, *, windows: bool) -> None:
        self._made = graph
        self._graph: Graph | None = None
        self._ranked = ranked
        self._windows = windows

    def _now(self) -> Graph:
        if self._graph is None:
            self._graph = self._made()
        return self._graph

    def containing(self, query: str) -> Graph:
        return self._now()

    def holding(self, words: str) -> Graph | None:
        graph = self._now()
        if graph.terms is None:
            if self._ranked is None:
                return None
            graph = self._graph = self._ranked()
        return graph

    def dated(self, query: str, words: str | None) -> Graph | None:
        if not self._windows:
            return None
        return self.holding(query)

    def whole(self) -> Graph:
        return self._now()

    def meaning(self) -> None:
        return None

    def open_nodes(self, names: Sequence[str]) -> dict[str, Any]:
        return rules.open_nodes(self._now(), list(names))

    def answered(self) -> None:
        pass


class FirstAnswers:
    """A first-answer source (the cache or the file's records) as a search's candidates, while the
    cold start lets it answer (coldstart S1, S4). `loaded` gives the graph when it is in memory
    already, with or without its word index (F4: the source ranks, the graph gives the meaning);
    `open_nodes` is the store's, for the question's scope without a graph."""

    def __init__(self, cold: FirstSource, start: ColdStart, loaded: Callable[[], Graph | None],
                 open_nodes: Callable[[list[str]], dict[str, Any]]) -> None:
        self._cold = cold
        self._start = start
        self._loaded = loaded
        self._open_nodes = open_nodes

    def containing(self, query: str) -> Graph | None:
        return self._step(lambda: self._cold.containing(query, self._loaded()))

    def holding(self, words: str) -> Graph | None:
        return self._step(lambda: self._cold.holding(words, self._loaded()))

    def dated(self, query: str, words: str | None) -> None:
        return None  # the dates of each observation are the graph's to read

    def whole(self) -> Graph | None:
        return self._loaded()

    def meaning(self) -> None:
        return None

    def open_nodes(self, names: Sequence[str]) -> dict[str, Any]:
        return self._open_nodes(list(names))

    def answered(self) -> None:
        self._start.count(self._cold)
        self._start.start_warm_up()

    def _step(self, answer: Callable[[], _Found | None]) -> _Found | None:
        found = first_answer(self._start, self._cold, answer)
        if found is None:
            self._start.start_warm_up()
        return found


def first_answer(start: ColdStart, cold: FirstSource, answer: Callable[[], _Found | None]) -> _Found | None:
    """`answer()` from a first-answer source; None when it declines, or fails a check (F2)."""
    try:
        return answer()
    except Exception as error:  # a source that fails a check is not used again (coldstart S1)
        start.failed(error)
        return None
