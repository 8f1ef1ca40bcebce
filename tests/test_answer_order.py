"""The order of an answer's facts (retrieval/answer.py, paging.FactOrder), and the ranking that
makes it (index/ranking.py, retrieval/query.py), against the straightforward ways. The order: a
list with one (entity position, observation index) pair per fact, worked out entity by entity,
as the answer was first written. FactOrder keeps runs of whole entities instead of a pair
per fact, and a limit cuts it run by run; the facts, their order, the entities and the relations
an answer holds must be exactly those of the straightforward order, on generated memories; facts
are scored, and entities found by words ordered, exactly as the straightforward code does."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_server.index import ranking
from memory_server.index.search import FIELD_SEPARATOR
from memory_server.model import graph as rules
from memory_server.model import indexes, writes
from memory_server.retrieval import answer as answers
from memory_server.retrieval import query
from memory_server.retrieval.paging.pages import FactOrder

Order = list[tuple[int, int]]


# -- the straightforward order --------------------------------------------------------------------

def contained_order(question: str, entities: list[Any], characters: int) -> Order:
    needle = question.lower()
    order: Order = []
    for position, entity in enumerate(entities):
        observations = entity["observations"]
        if not observations:
            order.append((position, -1))
            continue
        every = range(len(observations))
        if (answers._size(entity) * 2 > characters and FIELD_SEPARATOR not in needle
                and needle not in entity["name"].lower() and needle not in entity["entityType"].lower()):
            holding = [index for index in every if needle in observations[index].lower()]
            order += [(position, index) for index in holding or every]
        else:
            order += [(position, index) for index in every]
    return order


def word_order(question: str, entities: list[Any], nearest: answers.Nearest | None,
               lookup: Callable[[str], Any] | None) -> Order:
    scored_entities, facts = 0, 0
    for entity in entities:
        if facts >= answers.SCORED_FACTS:
            break
        facts += len(entity["observations"])
        scored_entities += 1
    scored = answers._small_as_one(question, entities[:scored_entities], ranking.rank_facts(
        question, [(entity["name"], entity["entityType"], entity["observations"]) for entity in entities[:scored_entities]]))
    ranked = [(position, index) for position, index, _ in scored]
    if nearest is not None:
        ranked = answers._fused(scored, entities, question, nearest, lookup)
    by_entity: dict[int, list[int]] = {}
    for position, index in ranked:
        by_entity.setdefault(position, []).append(index)
    order: Order = []
    done: set[int] = set()
    for position, index in ranked:
        entity = entities[position]
        if position in done:
            continue
        if answers._size(entity) <= answers.SMALL_ENTITY:
            done.add(position)
            first = [index for index in by_entity[position] if index >= 0]
            rest = [index for index in range(len(entity["observations"])) if index not in set(first)]
            order += [(position, index) for index in first + rest] or [(position, -1)]
        else:
            order.append((position, index))
    for position, entity in enumerate(entities):
        if position not in by_entity:
            order += [(position, index) for index in range(len(entity["observations"]))] or [(position, -1)]
    return order


def first_entities(order: Order, entities: list[Any], limit: int) -> tuple[Order, list[Any]]:
    kept: dict[int, int] = {}
    for position, _ in order:
        if position not in kept:
            if len(kept) == limit:
                break
            kept[position] = len(kept)
    return ([(kept[position], index) for position, index in order if position in kept],
            [entities[position] for position in kept])


def straightforward(question: str, entities: list[Any], relations: list[Any], characters: int, limit: int | None,
                    nearest: answers.Nearest | None,
                    lookup: Callable[[str], Any] | None) -> tuple[Order, list[Any], list[Any], bool]:
    entities = list(entities)
    words = not (entities and answers.whole_query_matches(question, entities[0]))
    if not words:
        if limit is not None:
            entities = entities[:limit]
        order = contained_order(question, entities, characters)
    else:
        order = word_order(question, entities, nearest, lookup)
        if limit is not None:
            order, entities = first_entities(order, entities, limit)
    names = {entity["name"] for entity in entities}
    touching = [relation for relation in relations if relation["from"] in names or relation["to"] in names]
    return order, entities, touching, words


# -- generated memories ---------------------------------------------------------------------------

WORDS = ["cello", "tea", "chess", "Lisbon", "allergic", "shellfish", "dog", "collie", "run", "running", "blue"]
# Long observations make entities too large for half a page, whose matching facts come first.
fact_text = st.one_of(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
                      st.lists(st.sampled_from(WORDS), min_size=40, max_size=90).map(" ".join))
NAMES = ["Alice", "Bob", "Carol", "default_user", "Dog Park", "tea house", "Chess club", "Lisbon"]


@st.composite
def memories(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=len(NAMES)))
    entities = [{"name": name, "entityType": draw(st.sampled_from(["person", "place", "tea room"])),
                 "observations": draw(st.lists(fact_text, unique=True, max_size=12))} for name in names]
    pairs = st.tuples(st.sampled_from(names), st.sampled_from(names), st.sampled_from(["knows", "likes"]))
    relations = [{"from": source, "to": target, "relationType": kind}
                 for source, target, kind in draw(st.lists(pairs, unique=True, max_size=12))]
    return entities, relations


QUESTIONS = ["cello", "tea", "ALICE", "o", "lisbon allergic", "dog park", "what about dogs and running?",
             "Alice tea", "blue chess", "collies", "nothing matches zzz", "chess club players"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nearest_of(graph: rules.Graph, picks: list[tuple[int, int, float]]) -> answers.Nearest:
    """Semantic candidates as a model would give them: (entity name, observation index, similarity)."""
    names = list(graph.entities)

    def nearest(question: str, k: int) -> list[tuple[str, int, float]]:
        return [(names[entity % len(names)], index, similarity) for entity, index, similarity in picks][:k]
    return nearest


@SETTINGS
@given(memories(), st.sampled_from(QUESTIONS), st.sampled_from([answers.MINIMUM_CHARACTERS, 900, 1_500, 10_000]),
       st.one_of(st.none(), st.integers(1, 5)),
       st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 7), st.integers(-1, 12), st.floats(0.0, 1.0)),
                                     max_size=6)))
def test_an_answers_facts_entities_and_relations_are_those_of_the_straightforward_order(
        memory: tuple[list[dict[str, Any]], list[dict[str, Any]]], question: str, characters: int,
        limit: int | None, picks: list[tuple[int, int, float]] | None) -> None:
    entities, relations = memory
    graph = indexes.with_term_index(indexes.with_word_index(
        writes.create_relations(writes.create_entities(rules.EMPTY, entities).graph, relations).graph))
    matched = query.matches(graph, question)
    nearest = None if picks is None else nearest_of(graph, picks)
    lookup: Callable[[str], Any] = lambda name: query.view_of(graph, name)  # noqa: E731
    facts = answers.shape(question, matched["entities"], matched["relations"], characters, limit=limit,
                          nearest=nearest, lookup=lookup)
    order, shown, touching, words = straightforward(question, matched["entities"], matched["relations"], characters,
                                                    limit, nearest, lookup)
    assert list(facts.order) == order == [facts.order[at] for at in range(len(facts.order))]
    assert len(facts.order) == len(order) and facts.entities == shown
    assert facts.relations == touching and facts.words == words


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(-1, 6)), max_size=12),
       st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.lists(st.integers(0, 5), min_size=1,
                                                                            max_size=4))), max_size=8),
       st.integers(1, 12))
def test_a_fact_order_reads_as_its_list_of_facts_and_a_limit_keeps_the_facts_of_its_first_entities(
        head: list[tuple[int, int]], runs: list[tuple[int, list[int] | None]], limit: int) -> None:
    # Runs are of entities 10 and up, found nowhere else in the order (as answer.py makes them).
    positions = [10 + number for number in range(len(runs))]
    picks = [pick for _, pick in runs]
    counts = [count for count, _ in runs]
    order = FactOrder(positions, picks if any(pick is not None for pick in picks) else None, counts,
                      head=([position for position, _ in head], [index for _, index in head]))
    listed = list(head)
    for position, (count, pick) in zip(positions, runs, strict=True):
        listed += [(position, index) for index in (pick if pick is not None else range(count) if count else [-1])]
    assert list(order) == listed and len(order) == len(listed) and order == listed
    cut, kept = order.first_entities(limit)
    entities = list(range(10 + len(runs)))
    expected_order, expected_entities = first_entities(listed, entities, limit)
    assert list(cut) == expected_order and kept == expected_entities


# -- the ranking's fast paths against the straightforward ones ------------------------------------

def straightforward_rank_facts(question: str, entities: list[tuple[str, str, list[str]]],
                               ranker: ranking.FactRanker = ranking.FACTS) -> list[ranking.ScoredFact]:
    """ranking.rank_facts as first written: the rarity of each term counted fact by fact."""
    wanted = ranking.query_terms(question, question_words=True)
    if not wanted:
        return []
    wanted_set = frozenset(wanted)
    held: list[list[tuple[str, ...]]] = []
    df: Counter[str] = Counter()
    facts = length = 0
    for _, _, observations in entities:
        found = [ranking.fact_terms(observation) for observation in observations]
        for fact in found:
            df.update(wanted_set.intersection(fact))
            length += len(fact)
        facts += len(found)
        held.append(found)
    average = length / facts if facts else 1.0
    count = max(facts, 1)
    idf = {term: math.log(1.0 + (count - df[term] + 0.5) / (df[term] + 0.5)) for term in wanted}
    whole = sum(idf.values()) or 1.0
    k1, b = ranker.k1, ranker.b
    scored: list[ranking.ScoredFact] = []
    for position, ((name, entity_type, _), found) in enumerate(zip(entities, held, strict=True)):
        context: dict[str, float] = {}
        for term in wanted_set.intersection(ranking.terms(entity_type)):
            context[term] = ranker.kind
        for term in wanted_set.intersection(ranking.terms(name)):
            context[term] = ranker.name
        if not found:
            if context:
                score = sum(idf[term] * weight for term, weight in context.items())
                scored.append((position, -1, score * (sum(idf[t] for t in context) / whole) ** ranker.coverage))
            continue
        for index, fact in enumerate(found):
            hits = wanted_set.intersection(fact)
            if not hits and not context:
                continue
            score = covered = 0.0
            norm = k1 * (1.0 - b + b * len(fact) / average)
            for term in hits:
                tf = fact.count(term)
                score += idf[term] * tf * (k1 + 1.0) / (tf + norm)
                covered += idf[term]
            for term, weight in context.items():
                if term not in hits:
                    score += idf[term] * weight
                    covered += idf[term]
            if ranker.coverage:
                score *= (covered / whole) ** ranker.coverage
            if not hits:
                score *= ranker.context_only
            elif ranker.proximity and len(hits) > 1:
                score *= 1.0 + ranker.proximity * ranking.closeness(fact, hits)
            scored.append((position, index, score))
    scored.sort(key=lambda fact: (-fact[2], fact[0], fact[1]))
    return scored


@SETTINGS
@given(memories(), st.sampled_from(QUESTIONS))
def test_facts_are_scored_as_by_the_straightforward_count_of_rarity(
        memory: tuple[list[dict[str, Any]], list[dict[str, Any]]], question: str) -> None:
    given_entities = [(entity["name"], entity["entityType"], entity["observations"]) for entity in memory[0]]
    assert ranking.rank_facts(question, given_entities) == straightforward_rank_facts(question, given_entities)


@SETTINGS
@given(memories(), st.sampled_from(QUESTIONS))
def test_entities_found_by_words_come_by_score_then_in_graph_order(
        memory: tuple[list[dict[str, Any]], list[dict[str, Any]]], question: str) -> None:
    graph = indexes.with_term_index(writes.create_entities(rules.EMPTY, memory[0]).graph)
    assert graph.terms is not None
    scores = ranking.rank(graph.terms, question, ranking.DEFAULT, lambda name: graph.entities[name].text)
    expected = sorted((graph.entities[name] for name in scores), key=lambda node: (-scores[node.record.name], node.seq))
    assert query.ranked_by_words(graph, question) == expected


@SETTINGS
@given(st.dictionaries(st.text(min_size=1, max_size=3), st.sampled_from([0.5, 1.0, 1.25, 2.0, 3.5]), max_size=40),
       st.integers(1, 12))
def test_the_items_reranked_are_the_best_by_score_then_name(scores: dict[str, float], count: int) -> None:
    best = heapq.nlargest(count, scores.items(), key=lambda item: (item[1], item[0]))
    assert heapq.nlargest(count, ranking._at_least(scores, count), key=lambda item: (item[1], item[0])) == best
