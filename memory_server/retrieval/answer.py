"""A search's answer made of the facts that answer it, best first, sized for a glance.

Pure: the matched entities (see :mod:`.query`) go in, a :class:`~.paging.Facts` comes out, which
the pager cuts into pages of at most `characters` (see :func:`characters_from`).

Guarantees:

1. A query answered by the whole-query rule (entities containing it, as the reference server
   finds them) answers exactly those entities, in the same order as before. An entity that fits
   half a page is shown whole, its observations in the order they were written: such an answer
   is byte for byte the reference's entities. A larger one shows the observations containing
   the query first (in written order: every one holds the whole query, there is nothing in the
   query to rank them by), and is marked partial.
2. A query taken as words is answered by facts (observations), each scored on its own
   (:func:`..index.ranking.rank_facts`: rarity of the shared terms over all matching facts,
   the entity's name and type as the fact's context, coverage of the query, closeness of the
   matched terms) over every matching entity, up to :data:`SCORED_FACTS` facts (beyond them the
   remaining entities follow in the order the word index ranked them, observations as written).
   Entities come in the order of their best fact; a page shows its facts grouped by entity.
   A small entity (:data:`SMALL_ENTITY`) comes whole, placed by the score of its observations
   read as one text (:func:`_small_as_one`: a dialog turn's words, caption and date line together):
   its matching observations first, then the others, so that a one-turn entity keeps its date line.
3. Semantic candidates, when a model is installed (``retrieval/semantic.py``: ``nearest``), are
   fused with the word ranking fact by fact, by score (:data:`SEMANTIC_WEIGHT`); a fact only they
   find joins the answer. Without a model the word ranking stands alone.
4. Every fact of the answer is on exactly one page; an entity of which a page does not show every
   observation carries ``"partial": "3 of 300 observations shown; open_nodes gives all"``.
5. `limit` keeps the first `limit` entities (in the order of their best fact) and all their facts.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, Final

import msgspec

from ..index.search import FIELD_SEPARATOR
from .paging.pages import FactOrder, Facts

CHARACTERS_VARIABLE: Final = "MEMORY_SEARCH_CHARACTERS"
DEFAULT_CHARACTERS: Final = 1_500
"""A glance: about 400 tokens of JSON and notes per search page. The JSON-RPC line, which holds
the JSON twice (structured and as text), stays near 3.5 KB."""
MINIMUM_CHARACTERS: Final = 600
"""Room for a note, an entity and a fact or two."""
SCORED_FACTS: Final = 5_000
"""Facts scored one by one per search, at most; the entities beyond follow in the order the word
index ranked them. Bounds the work of a query whose words half the memory holds."""
SMALL_ENTITY: Final = 400
"""Bytes of JSON under which an entity found by words is shown whole."""
SEMANTIC_CANDIDATES: Final = 40
SEMANTIC_WEIGHT: Final = 0.1
"""The weight of a fact's similarity (as a share of the best) against its word score (as a share of
the best, weight 1). Words the question shares with a fact are the stronger evidence, and in a
conversation every turn resembles every question a little: meaning adds the facts words miss (all
of them when no word matches, as for `dog` and "a border collie"), and among word matches it
only reorders those within a tenth of each other. (0.5 was the first choice: on the recall
benchmark's dialog turns it cost a point of recall@5 and on its profile gained nothing.)"""

_encoder: Final = msgspec.json.Encoder()
_observations_of: Final = itemgetter("observations")

Nearest = Callable[[str, int], "list[tuple[str, int, float]] | None"]


def characters_from(environ: Mapping[str, str]) -> int:
    """The size of a search page set by MEMORY_SEARCH_CHARACTERS (unset or empty: the default).
    ValueError, saying what is allowed, for anything else than a whole number of at least the minimum."""
    raw = environ.get(CHARACTERS_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_CHARACTERS
    if not raw.isascii() or not raw.isdigit() or int(raw) < MINIMUM_CHARACTERS:
        raise ValueError(f"{CHARACTERS_VARIABLE} must be a whole number of characters, at least "
                         f"{MINIMUM_CHARACTERS} (default {DEFAULT_CHARACTERS}, unset or empty for the default); "
                         f"got {raw!r}")
    return int(raw)


class ArgumentError(ValueError):
    """A search argument that cannot be used; the message says what is allowed."""


def check_characters(value: Any, budget: int) -> int:
    """A call's `characters` argument, capped at the answer budget; ArgumentError saying what is allowed."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MINIMUM_CHARACTERS:
        raise ArgumentError(f"characters must be a whole number, at least {MINIMUM_CHARACTERS} (the default is "
                         f"{DEFAULT_CHARACTERS}; at most the answer budget, {budget:,}, is used); got {value!r}")
    return min(value, budget)


def whole_query_matches(query: str, entity: Mapping[str, Any]) -> bool:
    """Whether the entity holds the whole query (ignoring case) in its name, type or an observation."""
    needle = query.lower()
    fields = (entity["name"], entity["entityType"], *entity["observations"])
    return any(needle in field.lower() for field in fields)


def shape(query: str, entities: Sequence[Any], relations: Sequence[Any], characters: int, *,
          limit: int | None = None, nearest: Nearest | None = None,
          lookup: Callable[[str], Any | None] | None = None) -> Facts:
    """The answer to `query` from its matched entities (best first, as :func:`.query.matches` gives
    them) and the relations touching them (each with an end among them). `nearest`: semantic
    candidates (see guarantee 3); `lookup`: an entity's object by name, for a candidate that no
    word of the query matched."""
    entities = list(entities)
    words = not (entities and whole_query_matches(query, entities[0]))
    if not words:
        if limit is not None:
            entities = entities[:limit]
        order = _contained_order(query, entities, characters)
    else:
        order = _word_order(query, entities, nearest, lookup)
        if limit is not None:
            order, kept = order.first_entities(limit)
            entities = [entities[position] for position in kept]
    touching = list(relations)
    # Every relation given touches a given entity (and entities a semantic candidate adds bring none
    # of their own): only a limit can leave one with no end among the entities.
    if limit is not None:
        names = {entity["name"] for entity in entities}
        touching = [relation for relation in relations if relation["from"] in names or relation["to"] in names]
    return Facts(entities, order, touching, characters, words)


def _size(entity: Mapping[str, Any]) -> int:
    """About the bytes of an entity's JSON (characters, quotes and commas): cheap, for choosing
    how to show it, never for fitting a page."""
    observations = entity["observations"]
    return len(entity["name"]) + len(entity["entityType"]) + sum(map(len, observations)) + 3 * len(observations) + 44


def _contained_order(query: str, entities: list[Any], characters: int) -> FactOrder:
    needle = query.lower()
    observations = list(map(_observations_of, entities))
    counts = list(map(len, observations))
    picks: list[Sequence[int] | None] | None = None
    if FIELD_SEPARATOR not in needle:
        for position, entity in enumerate(entities):
            if (counts[position] and _size(entity) * 2 > characters
                    and needle not in entity["name"].lower() and needle not in entity["entityType"].lower()):
                held = observations[position]
                holding = [index for index in range(counts[position]) if needle in held[index].lower()]
                if holding:  # (else all of them, as written)
                    if picks is None:
                        picks = [None] * len(entities)
                    picks[position] = holding
    return FactOrder(range(len(entities)), picks, counts)


def _word_order(query: str, entities: list[Any], nearest: Nearest | None,
                lookup: Callable[[str], Any | None] | None) -> FactOrder:
    from ..index import ranking

    scored_entities, facts = 0, 0
    for entity in entities:
        if facts >= SCORED_FACTS:
            break
        facts += len(entity["observations"])
        scored_entities += 1
    scored = _small_as_one(query, entities[:scored_entities], ranking.rank_facts(
        query, [(entity["name"], entity["entityType"], entity["observations"]) for entity in entities[:scored_entities]]))
    ranked = [(position, index) for position, index, _ in scored]
    if nearest is not None:
        ranked = _fused(scored, entities, query, nearest, lookup)
    by_entity: dict[int, list[int]] = {}
    for position, index in ranked:
        by_entity.setdefault(position, []).append(index)
    positions: list[int] = []
    indexes: list[int] = []
    done: set[int] = set()
    for position, index in ranked:
        entity = entities[position]
        if position in done:
            continue
        if _size(entity) <= SMALL_ENTITY:
            done.add(position)
            first = [index for index in by_entity[position] if index >= 0]
            taken = set(first)
            rest = [index for index in range(len(entity["observations"])) if index not in taken]
            shown = first + rest or [-1]
            positions += [position] * len(shown)
            indexes += shown
        else:
            positions.append(position)
            indexes.append(index)
    # Entities not scored fact by fact (or reached by none of their facts): after the ranked ones,
    # in the word index's order, their observations as written (runs: no object per fact).
    unranked = list(itertools.filterfalse(by_entity.__contains__, range(len(entities))))
    counts = list(map(len, map(_observations_of, map(entities.__getitem__, unranked))))
    return FactOrder(unranked, None, counts, head=(positions, indexes))


def _small_as_one(query: str, entities: Sequence[Any], scored: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    """The facts scored, with each small entity (shown whole: guarantee 2) placed by the score of its
    observations read as one text (rarity counted over the same facts, a small entity's as one): a
    dialog turn whose words, caption and date line each hold part of the question answers it as a
    whole. Its best fact stays first within it."""
    from ..index import ranking

    best: dict[int, int] = {}
    for number, (position, _, _) in enumerate(scored):
        best.setdefault(position, number)
    small = {position for position in best if _size(entities[position]) <= SMALL_ENTITY}
    if not small:
        return scored
    # A small entity's terms, observation after observation, as one fact (each observation's terms
    # are remembered by fact_terms; a joined text would be tokenised again at every search).
    as_read = [[tuple(itertools.chain.from_iterable(map(ranking.fact_terms, entity["observations"])))]
               if position in small and entity["observations"] else list(map(ranking.fact_terms, entity["observations"]))
               for position, entity in enumerate(entities)]
    whole = {position: score for position, _, score in ranking.rank_facts(
        query, [(entity["name"], entity["entityType"], ()) for entity in entities], held=as_read)
             if position in small}
    placed = [(position, index, score if position not in whole
               else whole[position] if best[position] == number else min(score, whole[position]))
              for number, (position, index, score) in enumerate(scored)]
    placed.sort(key=lambda fact: (-fact[2], fact[0], fact[1]))
    return placed


def _fused(scored: list[tuple[int, int, float]], entities: list[Any], query: str, nearest: Nearest,
           lookup: Callable[[str], Any | None] | None) -> list[tuple[int, int]]:
    """The word ranking fused with the semantic candidates (guarantee 3): each fact's word score as a
    share of the best one, plus SEMANTIC_WEIGHT times its similarity as a share of the best one.
    Scores, not ranks: a strong word match keeps its lead over a fact that only resembles the
    question, and a fact no word reaches still joins, ahead of weak word matches. Candidates of
    entities the words did not match are added to `entities` (through `lookup`)."""
    ranked = [(position, index) for position, index, _ in scored]
    try:
        found = nearest(query, SEMANTIC_CANDIDATES)
    except Exception:  # a model that fails answers nothing; the words still do
        found = None
    if not found:
        return ranked
    best_word = max((score for _, _, score in scored), default=0.0) or 1.0
    best_meaning = max(similarity for _, _, similarity in found) or 1.0
    fused: dict[tuple[int, int], float] = {(position, index): score / best_word for position, index, score in scored}
    positions = {entity["name"]: position for position, entity in enumerate(entities)}
    for name, index, similarity in found:
        position = positions.get(name)
        if position is None:
            entity = lookup(name) if lookup is not None else None
            if entity is None:
                continue
            position = positions[name] = len(entities)
            entities.append(entity)
        if not 0 <= index < len(entities[position]["observations"]) or similarity <= 0:
            continue
        fact = (position, index)
        fused[fact] = fused.get(fact, 0.0) + SEMANTIC_WEIGHT * similarity / best_meaning
    return sorted(fused, key=lambda fact: (-fused[fact], fact))


__all__ = [
    "ArgumentError",
    "CHARACTERS_VARIABLE",
    "DEFAULT_CHARACTERS",
    "MINIMUM_CHARACTERS",
    "characters_from",
    "check_characters",
    "shape",
    "whole_query_matches",
]
