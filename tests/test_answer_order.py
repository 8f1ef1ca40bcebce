"""The order of an answer's facts (retrieval/answer.py, paging.pages.FactOrder), and the ranking that
makes it (index/ranking.py, retrieval/query.py), against the straightforward ways. The order: a
list with one (entity position, observation index) pair per fact, worked out entity by entity,
as the answer was first written. FactOrder keeps runs of whole entities instead of a pair
per fact, and a limit cuts it run by run; the facts, their order, the entities and the relations
an answer holds must be exactly those of the straightforward order, on generated memories; facts
are scored, and entities found by words ordered, exactly as the straightforward code does."""

from __future__ import annotations

import heapq
import json
import math
from collections import Counter
from functools import partial
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from write_items import entity_items, relation_items

from memory_server.index import ranking
from memory_server.index.search import FIELD_SEPARATOR
from memory_server.model import graph as rules
from memory_server.model import indexes, writes
from memory_server.retrieval import answer as answers
from memory_server.retrieval import query
from memory_server.retrieval.paging.cursors import request_key
from memory_server.retrieval.paging.pager import Pager
from memory_server.retrieval.paging.pages import FactOrder

Order = list[tuple[int, int]]
REQUEST = request_key("search_nodes", {"query": "x"})


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


def first_entities(order: Order, entities: list[Any], limit: int) -> tuple[Order, list[Any]]:
    kept: dict[int, int] = {}
    for position, _ in order:
        if position not in kept:
            if len(kept) == limit:
                break
            kept[position] = len(kept)
    return ([(kept[position], index) for position, index in order if position in kept],
            [entities[position] for position in kept])


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


def best_evidence(question: str, entities: list[Any]) -> dict[int, float]:
    """Each entity's best fact score by words among its facts that are evidence: MIN_COVERAGE of the
    question's rarity or RELATIVE_COVERAGE of the best coverage, whichever is less, and at least
    LOW_COVERAGE."""
    coverage: dict[tuple[int, int], float] = {}
    scored = ranking.rank_facts(question, [(entity["name"], entity["entityType"], entity["observations"])
                                           for entity in entities], coverage_of=coverage)
    widest = max(coverage.values(), default=0.0)
    bar = max(answers.LOW_COVERAGE, min(answers.MIN_COVERAGE, answers.RELATIVE_COVERAGE * widest))
    best: dict[int, float] = {}
    for position, index, score in scored:
        if coverage[position, index] >= bar:
            best[position] = max(best.get(position, 0.0), score)
    return best


large_fact = st.lists(st.sampled_from(WORDS), min_size=40, max_size=90).map(" ".join)


@SETTINGS
@given(st.lists(st.lists(large_fact, unique=True, min_size=1, max_size=6), min_size=1, max_size=6),
       st.sampled_from(QUESTIONS), st.one_of(st.none(), st.integers(1, 5)))
def test_an_entity_is_shown_only_when_its_best_evidence_is_within_the_margin_of_the_answers_best(
        facts: list[list[str]], question: str, limit: int | None) -> None:
    """Guarantees 7 and 8 (docs/search.md, precision), on entities too large to come whole: an
    entity is in the answer exactly when one of its facts is evidence by its coverage of the
    question (best_evidence) and its best such fact scores at least MARGIN of the best; best first;
    no other fact."""
    entities = [{"name": f"e{number}", "entityType": "note", "observations": observations}
                for number, observations in enumerate(facts)]
    graph = indexes.with_term_index(indexes.with_word_index(writes.create_entities(rules.EMPTY, entity_items(entities)).graph))
    matched = query.matches(graph, question)
    answer = answers.shape(question, matched["entities"], answers.listed(matched["relations"]), 1_500, limit=limit)
    if not answer.words:
        return  # the whole-query rule: the reference's entities (test below)
    best = best_evidence(question, matched["entities"])
    top = max(best.values(), default=0.0)
    expected = sorted((position for position, score in best.items() if score >= answers.MARGIN * top),
                      key=lambda position: (-best[position], position))
    expected_names = [matched["entities"][position]["name"] for position in expected][:limit]
    shown: list[str] = []
    for position, _ in answer.order:
        name = answer.entities[position]["name"]
        if name not in shown:
            shown.append(name)
    assert shown == expected_names
    if not best:
        assert len(answer.order) == 0  # nothing is evidence: empty arrays


@SETTINGS
@given(memories(), st.sampled_from(QUESTIONS), st.sampled_from([answers.MINIMUM_CHARACTERS, 900, 1_500, 10_000]))
def test_a_whole_query_answer_is_the_reference_entities_in_their_order(
        memory: tuple[list[dict[str, Any]], list[dict[str, Any]]], question: str, characters: int) -> None:
    entities, relations = memory
    graph = indexes.with_term_index(indexes.with_word_index(
        writes.create_relations(writes.create_entities(rules.EMPTY, entity_items(entities)).graph,
                                relation_items(relations)).graph))
    matched = query.matches(graph, question)
    facts = answers.shape(question, matched["entities"], query.touching_in(graph), characters)
    if facts.words:
        return
    assert list(facts.order) == contained_order(question, matched["entities"], characters)
    assert facts.entities == matched["entities"]
    assert facts.touching({entity["name"] for entity in facts.entities}) == matched["relations"]


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
    assert [order[at] for at in range(len(order))] == listed  # (read by place, as a page reads it)
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
    # a term nothing holds (no fact, name or type) weighs as the rarest term a fact holds
    in_context = {term for name, entity_type, _ in entities for term in ranking.terms(f"{name} {entity_type}")}
    rarest = max((idf[term] for term in wanted if df[term]), default=0.0)
    if rarest:
        idf.update({term: rarest for term in wanted if not df[term] and term not in in_context})
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
@given(memories(), st.sampled_from(QUESTIONS), st.data())
def test_entities_read_as_one_score_as_their_observations_joined_into_one(
        memory: tuple[list[dict[str, Any]], list[dict[str, Any]]], question: str, data: st.DataObject) -> None:
    """read_as_one reuses the facts' hits: it scores as though each chosen entity had one observation,
    its observations joined (the rarity and the average length counting it once)."""
    given_entities = [(entity["name"], entity["entityType"], entity["observations"]) for entity in memory[0]]
    chosen = data.draw(st.sets(st.sampled_from(range(len(given_entities)))))
    found = ranking.fact_hits(question, given_entities)
    joined = [(name, kind, [" ".join(observations)] if position in chosen and observations else observations)
              for position, (name, kind, observations) in enumerate(given_entities)]
    expected = [fact for fact in straightforward_rank_facts(question, joined) if fact[0] in chosen]
    if found is None:
        assert expected == []
    else:
        assert ranking.score_facts(ranking.read_as_one(found, chosen), only=chosen) == expected


@SETTINGS
@given(memories(), st.sampled_from(QUESTIONS))
def test_entities_found_by_words_come_by_score_then_in_graph_order(
        memory: tuple[list[dict[str, Any]], list[dict[str, Any]]], question: str) -> None:
    graph = indexes.with_term_index(writes.create_entities(rules.EMPTY, entity_items(memory[0])).graph)
    assert graph.terms is not None
    scores = ranking.rank(graph.terms, question, ranking.DEFAULT, lambda name: graph.entities[name].text)
    expected = sorted((graph.entities[name] for name in scores), key=lambda node: (-scores[node.record.name], node.seq))
    assert list(query.ranked_by_words(graph, question)) == expected


@SETTINGS
@given(st.dictionaries(st.text(min_size=1, max_size=3), st.sampled_from([0.5, 1.0, 1.25, 2.0, 3.5]), max_size=40),
       st.integers(1, 12))
def test_the_items_reranked_are_the_best_by_score_then_name(scores: dict[str, float], count: int) -> None:
    best = heapq.nlargest(count, scores.items(), key=lambda item: (item[1], item[0]))
    assert heapq.nlargest(count, ranking._at_least(scores, count), key=lambda item: (item[1], item[0])) == best


@SETTINGS
@given(memories(), st.sampled_from(QUESTIONS), st.sampled_from([answers.MINIMUM_CHARACTERS, 1_500, 20_000]))
def test_each_page_shows_the_relations_touching_its_entities_in_graph_order(
        memory: tuple[list[dict[str, Any]], list[dict[str, Any]]], question: str, characters: int) -> None:
    """A page asks for the relations of its own entities (matched, or brought by the question's scope
    or by meaning): it shows every relation touching one of them, none other (but those the note
    counts as left out): those of the matched entities in graph order, then the others'."""
    entities, relations = memory
    graph = indexes.with_term_index(indexes.with_word_index(
        writes.create_relations(writes.create_entities(rules.EMPTY, entity_items(entities)).graph,
                                relation_items(relations)).graph))
    matched = {entity["name"] for entity in query.matches(graph, question)["entities"]}
    facts = query.search(graph, question, characters=characters)
    pager = Pager()
    page = pager.first_facts("search_nodes", REQUEST, facts)
    for _ in range(len(facts.order) + 1):
        value = json.loads(page.json)
        names = {entity["name"] for entity in value["entities"]}
        touching = sorted(rules.relations_touching(graph, names),
                          key=lambda relation: relation["from"] not in matched and relation["to"] not in matched)
        if not any("more relation" in note for note in page.notes):
            assert value.get("relations", []) == touching
        else:
            assert all(relation in touching for relation in value["relations"])
        if (cursor := value.get("nextCursor")) is None:
            break
        page = pager.next_page(cursor, "search_nodes", REQUEST)
    else:
        raise AssertionError("paging does not move on")


# -- the ranking by words, ordered only as far as it is read (query.Ranked) ---------------------

POOL = ["cello tea", "tea", "chess Lisbon", "dog collie run", "blue", "running dog", "allergic shellfish tea",
        "Lisbon", "chess", "collie", "tea blue chess", "run run dog"]


@st.composite
def many_facts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Entities drawn from a few observations (many alike: ties of score), some with many facts, so
    that an answer's scored entities (answers.SCORED_FACTS) may stop before the matches do."""
    if draw(st.booleans()):  # past answers.SCORED_FACTS facts
        count, each = draw(st.integers(30, 45)), draw(st.sampled_from([400, 500]))
    else:
        count, each = draw(st.integers(1, 40)), draw(st.sampled_from([1, 3, 12, 160]))
    seed = draw(st.integers(0, 2**16))
    entities = []
    for number in range(count):
        picked = [POOL[(seed + number * 7 + step * step) % len(POOL)] for step in range(1 + (seed + number) % 5)]
        observations = list(dict.fromkeys(picked)) + [f"{POOL[(seed + number + k) % len(POOL)]} {k % 97}"
                                                     for k in range(each if number % 3 == 0 else each // 4)]
        entities.append({"name": f"n{(number * 37 + seed) % 1000}-{number}", "entityType": "note",
                         "observations": list(dict.fromkeys(observations))})
    return entities


def _pages(pager: Pager, facts: Any) -> list[tuple[dict[str, Any], list[str]]]:
    """Every page of an answer and its notes, first and through its cursors, without the cursors
    (they name the answer)."""
    page = pager.first_facts("search_nodes", REQUEST, facts)
    pages = []
    while True:
        value = json.loads(page.json)
        cursor = value.pop("nextCursor", None)
        pages.append((value, [note.replace(cursor or "-", "CURSOR") for note in page.notes]))
        if cursor is None:
            return pages
        page = pager.next_page(cursor, "search_nodes", REQUEST)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(many_facts(), st.sampled_from(["tea", "dog running", "chess Lisbon tea", "blue collie", "n1 tea"]),
       st.integers(1, 9),
       st.lists(st.tuples(st.integers(0, 60), st.integers(-1, 4), st.sampled_from([0.3, 0.5, 0.9, 0.9])), max_size=12),
       st.sampled_from([answers.MINIMUM_CHARACTERS, 1_500]), st.one_of(st.none(), st.integers(1, 4)),
       st.data())
def test_a_ranking_ordered_as_far_as_it_is_read_answers_as_the_whole_sort(
        entities: list[dict[str, Any]], question: str, head: int, picks: list[tuple[int, int, float]],
        characters: int, limit: int | None, data: st.DataObject) -> None:
    """query.Ranked orders the best `head` entities by a threshold and the rest only when read: every
    entity, slice and subset it gives is the whole sort's (by score, then place in the graph; ties
    included), and the answer made of it (semantic candidates past the scored entities included)
    has exactly the pages, first and through the cursors, of the answer made of the whole sort."""
    graph = indexes.with_term_index(writes.create_entities(rules.EMPTY, entity_items(entities)).graph)
    assert graph.terms is not None
    scores = ranking.rank(graph.terms, question, ranking.DEFAULT, lambda name: graph.entities[name].text)
    whole = sorted((graph.entities[name] for name in scores), key=lambda node: (-scores[node.record.name], node.seq))
    ranked = query.ranked_by_words(graph, question, head=head)
    assert len(ranked) == len(whole)
    if whole:
        at = data.draw(st.integers(-len(whole), len(whole) - 1))
        stop = data.draw(st.integers(0, len(whole) + 2))
        assert ranked[at] is whole[at]
        assert ranked[:stop] == whole[:stop]
    some = data.draw(st.sets(st.sampled_from([*graph.entities, "nobody"])))
    assert query.Ranked.among(query.ranked_by_words(graph, question, head=head), some) == [
        node for node in whole if node.record.name in some]
    assert list(ranked) == whole
    assert set(ranked.names) == {node.record.name for node in whole}

    nearest = nearest_of(graph, picks)
    lookup = partial(query.view_of, graph)
    pager = Pager()
    lazy = answers.shape(question, query.views_of(query.ranked_by_words(graph, question, head=head)),
                         query.touching_in(graph), characters, limit=limit, nearest=nearest, lookup=lookup)
    plain = answers.shape(question, [node.view for node in whole], query.touching_in(graph), characters,
                          limit=limit, nearest=nearest, lookup=lookup)
    assert _pages(pager, lazy) == _pages(pager, plain)
    if lazy.words and limit is None:
        # (the note counts every match, and the entities only meaning brought, as when all were held)
        brought = {entity["name"] for entity in lazy.entities} - {node.record.name for node in whole}
        assert len(lazy.entities) + lazy.unlisted == len(whole) + len(brought)


def test_meaning_past_the_scored_entities_keeps_the_order_of_the_matches_among_equals() -> None:
    """Two entities past those scored (answers.SCORED_FACTS), alike in every word, brought by meaning
    at the same similarity: the one first among the matches (in graph order) comes first, as it did
    when the answer held every match, though the ranking never ordered them."""
    per = 200
    count = answers.SCORED_FACTS // per + 5
    entities = [{"name": f"e{number:02}", "entityType": "note", "observations": [f"tea {k}" for k in range(per)]}
                for number in range(count)]
    graph = indexes.with_term_index(writes.create_entities(rules.EMPTY, entity_items(entities)).graph)
    last, before = f"e{count - 2:02}", f"e{count - 4:02}"

    def nearest(question: str, k: int) -> list[tuple[str, int, float]]:
        return [(last, 0, 0.9), (before, 0, 0.9)]

    def names(facts: Any) -> list[tuple[str, int]]:
        return [(facts.entities[position]["name"], index) for position, index in facts.order]

    lazy = answers.shape("teas", query.views_of(query.ranked_by_words(graph, "teas", head=4)), query.touching_in(graph),
                         1_500, nearest=nearest)
    plain = answers.shape("teas", [graph.entities[entity["name"]].view for entity in entities], query.touching_in(graph),
                          1_500, nearest=nearest)
    shown = names(lazy)
    assert shown == names(plain)
    assert shown.index((before, 0)) < shown.index((last, 0))
    assert len(lazy.entities) == answers.SCORED_FACTS // per + 2  # the scored ones and the two meaning brought
