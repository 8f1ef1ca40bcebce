"""Words, word forms and a BM25-family ranking of entities, for queries no entity holds whole.

Text is cut into terms: Unicode word runs (accented letters are letters; accents are folded
away, so "cafe" finds "Café"), lower-cased, reduced to their stem by the Snowball English
stemmer ("adopted" and "adoption" are both "adopt"). Text of scripts written without spaces
(Chinese, Japanese) is cut into overlapping pairs of characters, so that any two characters of
a query that stand together in an entity find it. English stop words are never terms.

An entity's terms are counted per field: a term in the name counts :data:`NAME_WEIGHT` times,
one in the entity type :data:`TYPE_WEIGHT` times, one in an observation once. Counts are
integers and lengths too, so an index kept up to date write by write scores exactly as one
built afresh.
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import cache
from typing import Any, Final, NamedTuple, Protocol

from .search import FIELD_SEPARATOR

NAME_WEIGHT: Final = 3
TYPE_WEIGHT: Final = 2
FieldWeights = tuple[int, int]
"""How many times a term counts in the name and in the entity type (once in an observation)."""
FIELD_WEIGHTS: Final[FieldWeights] = (NAME_WEIGHT, TYPE_WEIGHT)

_NO_SPACE_SCRIPTS: Final = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u31f0-\u31ff"
# Runs of word characters (underscore separates words); a token mixing a no-space script with
# other letters is split further when its terms are made (once per distinct token).
_TOKEN: Final = re.compile(r"[^\W_]+")


@cache
def _no_space() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A character of those scripts, and a run of them (to split on). Compiled with the first word
    outside ASCII: the classes of these scripts are slow to compile, and most memories never need them."""
    return re.compile(f"[{_NO_SPACE_SCRIPTS}]"), re.compile(f"([{_NO_SPACE_SCRIPTS}]+)")


STOP_WORDS: Final = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t d ll m re ve
""".split())
"""English words that carry no topic; they are not terms, so they never match on their own."""

QUESTION_WORDS: Final = frozenset("""
also any anything ever get got kind many much one ones something sort thing things way
""".split())
"""Words a question uses around its topic ("What kind of ...", "How many ..."): dropped from
a query that has other words, since they would only pull in entities that share the phrasing."""


def _fold(word: str) -> str:
    """The word without accents ("café" -> "cafe"); ASCII words are returned as they are."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


class _Stems:
    """Snowball English stems, remembered: a memory repeats its words a lot."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}
        self._stemmer: Any = None

    def __call__(self, word: str) -> str:
        stem = self._known.get(word)
        if stem is None:
            if self._stemmer is None:
                import Stemmer  # PyStemmer: Snowball in C; loaded with the first word

                self._stemmer = Stemmer.Stemmer("english")
            stem = self._stemmer.stemWord(word)
            if len(self._known) > 1_000_000:
                self._known.clear()
            self._known[word] = stem
        return stem


stem: Final = _Stems()


class _Terms:
    """The terms of each distinct token, remembered: a memory repeats its words a lot."""

    def __init__(self, stop_words: frozenset[str]) -> None:
        self._stop_words = stop_words
        self._known: dict[str, tuple[str, ...]] = {}

    def __call__(self, token: str) -> tuple[str, ...]:
        known = self._known.get(token)
        if known is None:
            known = self._terms_of(token)
            if len(self._known) > 1_000_000:
                self._known.clear()
            self._known[token] = known
        return known

    def _terms_of(self, token: str) -> tuple[str, ...]:
        word = _fold(token)
        if not word.isascii() and (scripts := _no_space())[0].search(word):
            found = (self._word_terms(part) for part in scripts[1].split(word) if part)
            return tuple(dict.fromkeys(term for part in found for term in part))
        return self._word_terms(word)

    def _word_terms(self, word: str) -> tuple[str, ...]:
        if not word.isascii() and _no_space()[0].match(word):
            if len(word) == 1:
                return (word,)
            return tuple(dict.fromkeys(word[at:at + 2] for at in range(len(word) - 1)))
        if word in self._stop_words:
            return ()
        return (stem(word),)


_index_terms: Final = _Terms(STOP_WORDS)
_query_terms: Final = _Terms(STOP_WORDS | QUESTION_WORDS)


def terms(text: str) -> list[str]:
    """The terms of `text`, in order, repeats included."""
    return [term for token in _TOKEN.findall(text.lower()) for term in _index_terms(token)]


def query_terms(query: str, *, question_words: bool = True) -> list[str]:
    """The distinct terms of a query, in order. Question words are dropped when others remain."""
    # Each distinct token once, in the order it first comes (counted in C): a query of a few
    # words repeated over megabytes costs the scan, not a call per repeat.
    tokens = dict.fromkeys(_TOKEN.findall(query.lower()))
    if question_words and (topical := [term for token in tokens for term in _query_terms(token)]):
        return list(dict.fromkeys(topical))
    return list(dict.fromkeys(term for token in tokens for term in _index_terms(token)))


def _token_counts(text: str, weights: FieldWeights) -> tuple[dict[str, int], int]:
    """An entity's tokens of its search text (name, type, observations joined by the field
    separator) with their weighted counts, and its length in tokens."""
    lowered = text.lower()
    name, _, rest = lowered.partition(FIELD_SEPARATOR)
    entity_type, _, observations = rest.partition(FIELD_SEPARATOR)
    tokens = _TOKEN.findall(observations)
    counts = Counter(tokens)  # counted in C; only each distinct token goes through Python
    name_tokens, type_tokens = _TOKEN.findall(name), _TOKEN.findall(entity_type)
    for weight, field in zip(weights, (name_tokens, type_tokens), strict=True):
        for token in field:
            counts[token] += weight
    return counts, len(tokens) + len(name_tokens) + len(type_tokens)


def entity_terms(text: str, weights: FieldWeights = FIELD_WEIGHTS) -> tuple[dict[str, int], int]:
    """The weighted term counts of an entity's search text and its length in tokens."""
    counts, length = _token_counts(text, weights)
    found: dict[str, int] = {}
    for token, count in counts.items():
        for term in _index_terms(token):
            found[term] = found.get(term, 0) + count
    return found, length


TermChange = tuple[str, "str | None", "str | None"]
"""An entity's name, its search text before (None: it is new) and after (None: it is gone)."""


class TermIndex:
    """Weighted term counts by term and entity name, and entity lengths. Never changed once made."""

    __slots__ = ("postings", "lengths", "total", "weights")

    def __init__(self, postings: Mapping[str, Mapping[str, int]], lengths: Mapping[str, int], total: int,
                 weights: FieldWeights = FIELD_WEIGHTS) -> None:
        self.postings = postings
        self.lengths = lengths
        self.total = total
        self.weights = weights

    @classmethod
    def build(cls, texts: Iterable[tuple[str, str]], weights: FieldWeights = FIELD_WEIGHTS) -> TermIndex:
        # Postings by token first (the work per entity stays in C as far as it can), then
        # the tokens of one term are merged: far fewer distinct tokens than (token, entity) pairs.
        by_token: dict[str, dict[str, int]] = {}
        lengths: dict[str, int] = {}
        total = 0
        for name, text in texts:
            counts, length = _token_counts(text, weights)
            lengths[name] = length
            total += length
            for token, count in counts.items():
                holders = by_token.get(token)
                if holders is None:
                    by_token[token] = {name: count}
                else:
                    holders[name] = count
        postings: dict[str, dict[str, int]] = {}
        shared: set[str] = set()  # terms whose dict is still a token's, maybe another term's too
        for token, holders in by_token.items():
            for term in _index_terms(token):
                merged = postings.get(term)
                if merged is None:
                    postings[term] = holders
                    shared.add(term)
                    continue
                if term in shared:
                    merged = postings[term] = dict(merged)
                    shared.discard(term)
                for name, count in holders.items():
                    merged[name] = merged.get(name, 0) + count
        return cls(postings, lengths, total, weights)

    def updated(self, changes: Iterable[TermChange]) -> TermIndex:
        """The index after the changes (at most one per entity); this one stays as it was."""
        changes = list(changes)
        if not changes:
            return self
        postings = dict(self.postings)
        lengths = dict(self.lengths)
        total = self.total
        owned: set[str] = set()
        for name, before, after in changes:
            if before is not None:
                old, _ = entity_terms(before, self.weights)
                total -= lengths.pop(name, 0)
            else:
                old = {}
            new, length = entity_terms(after, self.weights) if after is not None else ({}, 0)
            if after is not None:
                lengths[name] = length
                total += length
            for term in old.keys() | new.keys():
                if old.get(term) == new.get(term):
                    continue
                if term not in owned:
                    # Dicts are copied, never edited: the index before this change may still be searched.
                    postings[term] = dict(postings.get(term, {}))
                    owned.add(term)
                holders = postings[term]
                assert isinstance(holders, dict)
                if term in new:
                    holders[name] = new[term]
                else:
                    holders.pop(name, None)
                if not holders:
                    del postings[term]
                    owned.discard(term)
        return TermIndex(postings, lengths, total, self.weights)


class Terms(Protocol):
    """What ranking reads of an index: a :class:`TermIndex`, or the same held on disk."""

    @property
    def postings(self) -> Mapping[str, Mapping[str, int]]: ...
    @property
    def lengths(self) -> Mapping[str, int]: ...
    @property
    def total(self) -> int: ...


class Ranker(NamedTuple):
    """How word matches are scored."""

    k1: float = 1.2
    """BM25's saturation of repeated terms."""
    b: float = 0.75
    """BM25's pull of an entity's length."""
    coverage: float = 0.0
    """How much an entity gains for holding more of the query's distinct terms, by their weight
    (0: plain BM25, the sum of the terms' scores)."""
    question_words: bool = False
    """Whether question phrasing (:data:`QUESTION_WORDS`) is dropped from the query."""
    phrase: float = 0.0
    """How much an entity among the best :data:`RERANKED` gains for holding the query's
    neighbouring terms side by side (stop words between them do not count), by their share."""


RERANKED: Final = 100


PLAIN: Final = Ranker()
DEFAULT: Final = Ranker(k1=0.9, b=0.4, coverage=1.0, question_words=True, phrase=1.0)


def rank(index: Terms, query: str, ranker: Ranker = DEFAULT,
         text_of: Callable[[str], str] | None = None) -> dict[str, float]:
    """Scores of the entities holding at least one of the query's terms (none: an empty dict).
    `text_of` gives an entity's search text by name, for the phrase bonus."""
    wanted = query_terms(query, question_words=ranker.question_words)
    count = len(index.lengths)
    if not wanted or not count:
        return {}
    k1, b = ranker.k1, ranker.b
    average = index.total / count or 1.0
    lengths = index.lengths
    scores: dict[str, float] = {}
    weights: dict[str, float] = {}
    covered: dict[str, float] = {}
    saturation, kept = k1 + 1.0, 1.0 - b
    # The same sums in the same order as term by term and entity by entity, with what depends on
    # an entity's length alone worked out once per distinct length (a memory has few), and each
    # term's scores made in one pass: a word half the memory holds brings tens of thousands.
    pull: dict[int, float] = {}
    for term in wanted:
        holders = index.postings.get(term)
        if not holders:
            continue
        idf = math.log(1.0 + (count - len(holders) + 0.5) / (len(holders) + 0.5))
        weights[term] = idf
        spans = list(map(lengths.__getitem__, holders))
        for length in set(spans).difference(pull):
            pull[length] = k1 * (kept + b * length / average)
        term_scores = [idf * (tf * saturation / (tf + pull[length])) for tf, length in zip(holders.values(), spans)]
        if not scores:
            scores = dict(zip(holders, term_scores))
            covered = dict.fromkeys(holders, idf)
            continue
        get, got = scores.get, covered.get
        for name, score in zip(holders, term_scores):
            scores[name] = get(name, 0.0) + score
            covered[name] = got(name, 0.0) + idf
    if ranker.coverage and weights:
        whole, power = sum(weights.values()), ranker.coverage
        scores = {name: score * (covered[name] / whole) ** power for name, score in scores.items()}
    if ranker.phrase and text_of is not None and len(wanted) > 1:
        pairs = set(itertools.pairwise(wanted))
        best = heapq.nlargest(RERANKED, _at_least(scores, RERANKED), key=_score_then_name)
        for name, score in best:
            found = set(itertools.pairwise(terms(text_of(name))))
            scores[name] = score * (1.0 + ranker.phrase * len(pairs & found) / len(pairs))
    return scores


def _at_least(scores: dict[str, float], count: int) -> Iterable[tuple[str, float]]:
    """The (name, score) items scoring at least the `count`-th best score: a superset of the best
    `count` by (score, name), picked in C (a key function per item costs more than the rest of
    the reranking when a word is held by most of the memory)."""
    if len(scores) <= count:
        return scores.items()
    least = heapq.nlargest(count, scores.values())[-1]
    return itertools.compress(scores.items(), map(operator.le, itertools.repeat(least), scores.values()))


def _score_then_name(item: tuple[str, float]) -> tuple[float, str]:
    return item[1], item[0]


# --------------------------------------------------------------------------------------------
# Facts: single observations ranked against a query (see retrieval.answer)
# --------------------------------------------------------------------------------------------

FACT_TERMS_KEPT: Final = 200_000
"""Observations whose terms are remembered between searches (then forgotten all at once)."""
_fact_terms: dict[str, tuple[str, ...]] = {}


def fact_terms(text: str) -> tuple[str, ...]:
    """The terms of one observation, in order, repeats included; remembered (an observation
    string is shared by the graph, so its hash is worked out once)."""
    known = _fact_terms.get(text)
    if known is None:
        known = tuple(terms(text))
        if len(_fact_terms) >= FACT_TERMS_KEPT:
            _fact_terms.clear()
        _fact_terms[text] = known
    return known


class FactRanker(NamedTuple):
    """How single observations (facts) are scored. A fact is scored as a short document whose
    context is its entity: a query term in the entity's name or type counts for every one of its
    facts (the question names the person), less than one in the fact itself."""

    k1: float = 1.2
    """BM25's saturation of repeated terms within a fact."""
    b: float = 0.5
    """BM25's pull of a fact's length."""
    name: float = 2.0
    """A query term in the entity's name, against the same term's score in the fact: more, since
    a fact of the entity the question names is about it, a fact that mentions the name is not."""
    kind: float = 0.4
    """A query term in the entity's type, likewise."""
    context_only: float = 1.0
    """The share of its score a fact keeps when none of the query's terms is in the fact itself,
    only in its entity's name or type (the person is named, but not what is asked)."""
    coverage: float = 1.0
    """How much a fact gains for holding (itself or through its entity) more of the query's
    distinct terms, by their rarity (0: the plain sum)."""
    proximity: float = 0.5
    """How much a fact gains when the query's terms it holds stand close together: at most
    this share, when they stand side by side (stop words between them do not count)."""


FACTS: Final = FactRanker()

ScoredFact = tuple[int, int, float]
"""(entity position, observation index or -1 for an entity without observations, score)."""


_NO_HITS: Final[frozenset[str]] = frozenset()


class FactHits(NamedTuple):
    """The query's terms in each fact of some entities: what scoring them needs, worked out once
    (:func:`fact_hits`), so that the same facts can be scored again read otherwise (:func:`read_as_one`)."""

    wanted: tuple[str, ...]
    wanted_set: frozenset[str]
    entities: Sequence[tuple[str, str, Sequence[str]]]
    held: Sequence[Sequence[tuple[str, ...]]]
    """Each entity's facts as terms."""
    hits: Sequence[Sequence[frozenset[str]]]
    """The query's terms in each fact."""
    facts: int
    length: int
    """Facts, and their terms in all: the rarity and the average length are counted over them."""


def fact_hits(query: str, entities: Sequence[tuple[str, str, Sequence[str]]]) -> FactHits | None:
    """The query's terms in each observation of `entities` (name, type, observations); None when
    the query has no terms."""
    wanted = tuple(query_terms(query, question_words=True))
    if not wanted:
        return None
    wanted_set = frozenset(wanted)
    held = [[fact_terms(observation) for observation in observations] for _, _, observations in entities]
    # (most facts hold none: one empty set for all of them, not one each kept to the end)
    hits = [[wanted_set.intersection(fact) or _NO_HITS for fact in found] for found in held]
    facts = sum(map(len, held))
    length = sum(len(fact) for found in held for fact in found)
    return FactHits(wanted, wanted_set, entities, held, hits, facts, length)


def read_as_one(found: FactHits, positions: AbstractSet[int]) -> FactHits:
    """The same facts, each entity at `positions` that has observations read as one fact (its
    observations' terms one after the other): the rarity and the average length count it once."""
    held, hits = list(found.held), list(found.hits)
    facts = found.facts
    for position in positions:
        if not held[position]:
            continue
        facts -= len(held[position]) - 1
        if any(hits[position]):
            joined = tuple(itertools.chain.from_iterable(held[position]))
            held[position], hits[position] = [joined], [found.wanted_set.intersection(joined)]
        else:  # (its length is counted already; a fact no query term reaches is read for nothing else)
            held[position], hits[position] = [()], [_NO_HITS]
    return found._replace(held=held, hits=hits, facts=facts)


def rank_facts(query: str, entities: Sequence[tuple[str, str, Sequence[str]]],
               ranker: FactRanker = FACTS, *, coverage_of: dict[tuple[int, int], float] | None = None) -> list[ScoredFact]:
    """The facts of `entities` (name, type, observations) that the query's terms reach, best
    first (ties: entity position, then the order the observations were added): :func:`score_facts`
    of :func:`fact_hits`."""
    found = fact_hits(query, entities)
    return [] if found is None else score_facts(found, ranker, coverage_of=coverage_of)


def score_facts(found: FactHits, ranker: FactRanker = FACTS, *, only: AbstractSet[int] | None = None,
                coverage_of: dict[tuple[int, int], float] | None = None) -> list[ScoredFact]:
    """The facts that the query's terms reach, best first (ties: entity position, then the order
    the observations were added); `only`: of the entities at these positions (the rarity is still
    counted over all).

    Rarity is counted over the facts given: pass every entity holding a query term and the
    counts are exactly those of the whole memory's facts for these terms. A query term no fact
    holds weighs as the rarest term one holds: the question asks something the memory words
    otherwise, and an unbounded rarity would make every fact's coverage of the rest nil.
    `coverage_of`: filled with each scored fact's share of the query's rarity, (position, index) ->
    0 to 1, the evidence its words give (see answer.MIN_COVERAGE)."""
    wanted, wanted_set, entities = found.wanted, found.wanted_set, found.entities
    df = Counter(itertools.chain.from_iterable(itertools.chain.from_iterable(found.hits)))
    average = found.length / found.facts if found.length else 1.0  # facts of no terms at all ("", "...") weigh as average
    count = max(found.facts, 1)
    idf = {term: math.log(1.0 + (count - df[term] + 0.5) / (df[term] + 0.5)) for term in wanted}
    unheld = {term for term in wanted_set if not df[term]}
    rarest_held = max((idf[term] for term in wanted_set if df[term]), default=0.0)
    if unheld and rarest_held:
        # (a term only a name or a type holds keeps its rarity: it names the entity asked about)
        for name, entity_type, _ in entities:
            unheld.difference_update(fact_terms(name), fact_terms(entity_type))
            if not unheld:
                break
        for term in unheld:
            idf[term] = rarest_held
    whole = sum(idf.values()) or 1.0
    k1, b = ranker.k1, ranker.b
    share_of = coverage_of
    scored: list[ScoredFact] = []
    for position, ((name, entity_type, _), facts, facts_hits) in enumerate(
            zip(entities, found.held, found.hits, strict=True)):
        if only is not None and position not in only:
            continue
        context: dict[str, float] = {}
        # (a name's and a type's terms are remembered as an observation's are: a search reads them
        # for every matching entity)
        for term in wanted_set.intersection(fact_terms(entity_type)):
            context[term] = ranker.kind
        for term in wanted_set.intersection(fact_terms(name)):
            context[term] = ranker.name
        if not facts:
            if context:
                score = sum(idf[term] * weight for term, weight in context.items())
                share = sum(idf[t] for t in context) / whole
                if coverage_of is not None:
                    coverage_of[position, -1] = share
                scored.append((position, -1, score * share ** ranker.coverage))
            continue
        for index, (fact, hits) in enumerate(zip(facts, facts_hits, strict=True)):
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
            if share_of is not None:
                share_of[position, index] = covered / whole
            if ranker.coverage:
                score *= (covered / whole) ** ranker.coverage
            if not hits:
                score *= ranker.context_only
            elif ranker.proximity and len(hits) > 1:
                score *= 1.0 + ranker.proximity * closeness(fact, hits)
            scored.append((position, index, score))
    scored.sort(key=_best_fact_first)
    return scored


def _best_fact_first(fact: ScoredFact) -> tuple[float, int, int]:
    return -fact[2], fact[0], fact[1]


def closeness(fact: Sequence[str], hits: AbstractSet[str]) -> float:
    """How close together the `hits` (two or more distinct terms) stand in the fact's terms: 1.0
    when two of them stand side by side, 1/n when the nearest two different ones are n apart."""
    nearest = len(fact)
    last_term, last_at = None, -1
    for at, term in enumerate(fact):
        if term in hits:
            if last_term is not None and term != last_term and at - last_at < nearest:
                nearest = at - last_at
            last_term, last_at = term, at
    return 1.0 / nearest if nearest else 1.0
