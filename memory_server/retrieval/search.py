"""The one read pipeline of search_nodes: a request goes in, its answer comes out, whatever store
and whatever start state give the candidates.

Candidates come from :class:`CandidateSource` objects, which the stores make (``store.sources()``)
without importing retrieval: the graph in memory, the index cache, the file's records at a first
start, the database. Each gives graphs of candidates; the rules run here, once, on whichever
source answered:

1. The whole query (retrieval/query.py rule 1) on the source's candidates that contain it.
2. Otherwise the words (rule 2) on the candidates holding one of its terms.
3. The answer made of facts (rule 3: :func:`.query.answer_of`, or :func:`.answer.shape` with the
   source's own meaning).

Then the time rules of retrieval/when.py, guarantees 1 to 4, the fallback of guarantee 4 included.

Guarantees:

1. A source that cannot answer a step says so by returning None, before it does any work for it
   or as its answer; the next source of the list then answers the whole step. No source raises
   to decline.
2. Sources are tried in the order the store gives them, and the last one answers every step,
   unless the list was made for an answer that must not wait (``in_memory``): then :func:`search`
   answers None when no source could, and the caller asks again with sources that may wait.
3. Every source's answer to a query is the answer of the whole memory's graph to it: the sources
   give candidates (a superset of what matches, with what the rules read of the memory), never
   a different rule.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, overload

import msgspec

from ..model import dates
from ..model.dates import Span
from . import answer as answers
from . import query as matching
from . import when
from .dated import fact_date
from .paging.pages import Facts

if TYPE_CHECKING:
    from ..model.graph import Graph, Node

Nearest = Callable[[str, int], list[tuple[str, int, float]]]
"""Semantic candidates of a query: (entity name, observation index, similarity), best first."""


class CandidateSource(Protocol):
    """Where a search's candidates come from. Every method but `answered` may answer None: this
    source cannot give that (guarantee 1)."""

    def containing(self, query: str) -> Graph | None:
        """A graph holding every entity whose name, type or an observation contains `query`
        (ignoring case), maybe others, and every relation touching them."""

    def holding(self, words: str) -> Graph | None:
        """A graph holding every entity that holds a term of `words`, and every relation touching
        them, with the ranking's index (`terms`) counting as the whole memory does."""

    def dated(self, query: str, words: str | None) -> Graph | None:
        """The candidates of a search within a time window (when.search) of `query`, whose words
        without the time phrase are `words`: those containing the query or the words whole, and
        those holding a term of the words, with `terms` as in :meth:`holding`; every entity when
        `words` is None (no topic: any fact of the window answers)."""

    def whole(self) -> Graph | None:
        """The memory's whole graph, when it is in memory: semantic candidates, the entities'
        objects and the question's scope come from it."""

    def meaning(self) -> tuple[Nearest, Callable[[str], Any | None]] | None:
        """Without a whole graph: this memory's own semantic candidates and the objects of their
        entities by name (None: none)."""

    def open_nodes(self, names: Sequence[str]) -> dict[str, Any]:
        """open_nodes of these names, for the question's scope without a whole graph."""

    def answered(self) -> None:
        """This source gave the matches of a search."""


class SearchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One search_nodes call, as its arguments were checked."""

    query: str
    limit: int | None = None
    characters: int | None = None
    """The size of a page of facts; None: the matched entities and the relations touching them (rules
    1 and 2 alone, no time rules)."""
    window: Span | None = None
    """The window since/until give (when.window_of): the query is then taken as it is."""
    now: datetime | None = None
    """What a time phrase in the query is counted from; None: no phrase is looked for."""
    hemisphere: str = "north"


class _Unanswerable(Exception):
    """No source of an in-memory list could give a step (guarantee 2): the whole answer is asked
    again by the caller. Never leaves this module."""


def search(sources: Sequence[CandidateSource], request: SearchRequest) -> Facts | dict[str, Any] | None:
    """The answer to `request`: Facts, or a dict of entities and relations (rules 1 and 2 without
    `characters`; a search within a window, when.search's answer); None: see guarantee 2."""
    try:
        if request.characters is None:
            return matches(sources, request.query, request.limit)[1]
        return _timed(sources, request, request.characters)
    except _Unanswerable:
        return None


def _timed(sources: Sequence[CandidateSource], request: SearchRequest, characters: int) -> Facts | dict[str, Any]:
    """Rule 3 and the time rules (when.py's guarantees 1 to 4)."""
    query, limit, explicit = request.query, request.limit, request.window
    window: Span | None
    if explicit is not None:
        words, window = query, explicit
    elif request.now is not None:
        words, window = when.parse_query(query, request.now, hemisphere=request.hemisphere,
                                         events=partial(_event_date, sources, characters))
    else:
        words, window = query, None
    remark = ""
    if window is not None:
        if not when.content_terms(words):
            # Nothing asked but a time ("what did I do last week?"): every fact within it.
            # (paged as facts, a glance at a time: a month of a memory is thousands of them)
            timed = _within(sources, query, words, window, explicit=explicit is not None, limit=limit,
                            characters=characters)
            if timed is not None and (timed.order or explicit is not None):
                return timed
            remark = "" if timed is None else when.nothing_within(window)
        else:
            whole = _matched(sources, query)
            if _held_whole(whole, query):
                # The whole query held by entities: the reference's answer; within since/until,
                # their facts of that time, the latest first among equals.
                if explicit is None:
                    return _shaped(whole, query, characters, limit)
                within = _within(sources, query, words, window, explicit=True, limit=limit)
                assert within is not None
                return within
            value = facts(sources, words, characters, limit, window)
            if value.order or explicit is not None:
                return value
            # A window the query's own words name, in which no fact answering them falls (guarantee 4
            # of when.py): the words answer at any time, and the note says so. (Shaped only now: a
            # question that names a time is answered within it far more often than not.)
            return replace(_shaped(whole, query, characters, limit), remark=when.nothing_answers_within(window))
    value = facts(sources, query, characters, limit)
    return replace(value, remark=remark) if remark else value


def _event_date(sources: Sequence[CandidateSource], characters: int, event: str) -> datetime | None:
    """"since we moved": when the fact that best tells of moving happened (or was recorded)."""
    found = facts(sources, event, characters)
    for position, index in itertools.islice(found.order, 20):
        if day := fact_date(found.entities[position], index):
            with suppress(ValueError):
                return dates.parse_when(day)[0][0]
    return None


def matches(sources: Sequence[CandidateSource], query: str,
            limit: int | None = None) -> tuple[CandidateSource, dict[str, Any]]:
    """Rules 1 and 2 on the first source that gives them: that source, and the best `limit`
    (default: all) entities, best first, with every relation touching them."""
    source, candidates, matched = _matched(sources, query)
    return source, matching.found(candidates, matched, limit)


def _matched(sources: Sequence[CandidateSource], query: str) -> tuple[CandidateSource, Graph, Sequence[Node]]:
    """Rules 1 and 2 on the first source that gives them: that source, the graph of candidates it
    gave, and the entities matched, best first."""
    for source in sources:
        candidates = source.containing(query)
        if candidates is None:
            continue

        def by_words(words: str, source: CandidateSource = source) -> Sequence[Node] | None:
            nonlocal candidates
            candidates = source.holding(words)
            return None if candidates is None else matching.ranked_by_words(candidates, words)

        matched = matching.rule(partial(matching.contains_query, candidates), by_words, query)
        if matched is None:
            continue
        source.answered()
        assert candidates is not None
        return source, candidates, matched
    raise _Unanswerable


def facts(sources: Sequence[CandidateSource], query: str, characters: int, limit: int | None = None,
          window: Span | None = None) -> Facts:
    """Rules 1 to 3: the answer made of the facts of what rules 1 and 2 matched (all of it:
    `limit` applies to the facts' entities)."""
    return _shaped(_matched(sources, query), query, characters, limit, window)


Matched: TypeAlias = "tuple[CandidateSource, Graph, Sequence[Node]]"
"""What :func:`_matched` gives: the source that answered, its graph of candidates, the entities matched."""


def _held_whole(found: Matched, query: str) -> bool:
    """Whether rules 1 and 2 answered the query by rule 1 (an entity holds the whole query)."""
    entities = matching.views_of(found[2])
    return bool(entities) and answers.whole_query_matches(query, entities[0])


def _shaped(found: Matched, query: str, characters: int, limit: int | None = None,
            window: Span | None = None) -> Facts:
    """Rule 3 on what rules 1 and 2 matched."""
    source, candidates, matched = found
    entities = matching.views_of(matched)
    # (a page asks for the relations of its own entities: an answer of thousands works out few)
    touching = matching.touching_in(candidates)
    if (graph := source.whole()) is not None:
        return matching.answer_of(graph, query, entities, touching, characters=characters, limit=limit,
                                  window=window)
    meaning = None if _held_whole(found, query) else source.meaning()
    nearest, lookup = meaning if meaning is not None else (None, None)
    return answers.shape(query, entities, touching, characters, limit=limit, nearest=nearest,
                         lookup=lookup, opened=source.open_nodes, window=window)


@overload
def _within(sources: Sequence[CandidateSource], query: str, words: str, window: Span, *, explicit: bool,
            limit: int | None, characters: None = None) -> dict[str, Any] | None: ...


@overload
def _within(sources: Sequence[CandidateSource], query: str, words: str, window: Span, *, explicit: bool,
            limit: int | None, characters: int) -> Facts | None: ...


def _within(sources: Sequence[CandidateSource], query: str, words: str, window: Span, *, explicit: bool,
            limit: int | None, characters: int | None = None) -> dict[str, Any] | Facts | None:
    """when.search on the first source that gives its candidates (None: answered as without a
    window); with `characters`, as facts paged at that size (when.facts_within)."""
    topic = words if when.content_terms(words) else None
    for source in sources:
        candidates = source.dated(query, topic)
        if candidates is not None:
            if characters is not None:
                return when.facts_within(candidates, query, words, window, explicit=explicit, limit=limit,
                                         characters=characters)
            return when.search(candidates, query, words, window, explicit=explicit, limit=limit)
    raise _Unanswerable


class _Store(Protocol):
    def sources(self, *, in_memory: bool = False) -> Any: ...


def search_nodes(store: _Store, query: str, limit: int | None = None, *, characters: int | None = None,
                 in_memory: bool = False) -> Facts | dict[str, Any] | None:
    """One search of `store`'s sources without time rules: the matches (see :func:`matches`);
    with `characters`, the answer made of their facts. None: see guarantee 2."""
    with store.sources(in_memory=in_memory) as sources:
        return search(sources, SearchRequest(query=query, limit=limit, characters=characters))


def search_within(store: _Store, query: str, words: str, window: Span, *, explicit: bool,
                  limit: int | None = None) -> dict[str, Any] | None:
    """when.search on `store`'s candidates for it (None: answered as without a window)."""
    with store.sources() as sources:
        try:
            return _within(sources, query, words, window, explicit=explicit, limit=limit)
        except _Unanswerable:  # (an in-memory list only: a store's own list always answers)
            raise AssertionError("the last source answers every step") from None
