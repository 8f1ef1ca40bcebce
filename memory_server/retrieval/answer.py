"""A search's answer made of the facts that answer it, best first, sized for a glance.

Pure: the matched entities (see :mod:`.query`) go in, a :class:`~.paging.pages.Facts` comes out, which
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
   matched terms) over every matching entity, up to :data:`SCORED_FACTS` facts (the entities
   beyond them, in the order the word index ranked them, are not scored and not shown).
   Entities come in the order of their best fact; a page shows its facts grouped by entity.
   A small entity (:data:`SMALL_ENTITY`) comes whole, placed by the score of its observations
   read as one text (:func:`_small_as_one`: a dialog turn's words, caption and date line together):
   its matching observations first, then the others, so that a one-turn entity keeps its date line.
3. Semantic candidates, when a model is installed (``retrieval/semantic``: ``nearest``), are
   fused with the word ranking fact by fact, by score (:data:`SEMANTIC_WEIGHT`); a fact only they
   find joins the answer. Without a model the word ranking stands alone.
4. Every fact of the answer is on exactly one page; an entity of which a page does not show every
   observation carries ``"partial": "3 of 300 observations shown; open_nodes gives all"``.
5. `limit` keeps the first `limit` entities (in the order of their best fact) and all their facts.
6. A name in the question scopes it (:mod:`.scope`), and no longer ranks its entity's facts. A fact
   naming where the last relation the question followed led, of whom it was followed from, scores
   above the answer's best (:mod:`.scoped`: ``_telling``, ``TOLD_ABOVE``); the entities that relation
   reached count double, those it passed through as the named; a neighbour's fact the words find
   is evidence when it holds ``scoped.NEIGHBOUR_COVERAGE`` of the question, is like it, or names them;
   when nothing of the named entities or targets answers, a neighbour's fact only meaning finds is
   no answer either, unless it names them.
7. Only evidence answers (:data:`MIN_COVERAGE`, or four fifths of the best coverage when that is
   less, :data:`RELATIVE_COVERAGE`; :data:`MEANING_ALONE`, :data:`MEANING_ONE_WORD`,
   :data:`MEANING_SCOPED`): a question about something never said answers empty arrays;
   a small entity's facts are evidence by what the entity, read as one, covers (guarantee 2).
   Within a scope, a question whose words are in good part held by none of its facts
   (:data:`UNHELD_SHARE`) is answered by the facts the words find only where meaning finds them
   like it (:data:`UNHELD_MEANING`): "When did we go to Disney World?" is not answered by "go".
8. An entity is shown only when its best fact scores within :data:`MARGIN` of the answer's best,
   or the question's scope names it or reached it through a relation (guarantee 6).
9. Versions of one kind of fact within an entity come newest first (:data:`VERSIONS_BAND`,
   :data:`CURRENT_BAND`).
10. A window keeps the facts within it after 6 to 9 found and ranked them; when none left is of the
    scope's targets or named entities, their facts within it come first (:func:`.scoped.first_within`).
11. A fact that asks is weaker evidence than one that tells: its score, by words and by meaning, is
    cut by :data:`ASKING_CUT` times the share of its text in sentences that end in a question mark
    (:func:`asking`). "What sort of cars do you work on?" restates a question; it does not answer it.
12. A question asking how much something cost, was paid or earned (:func:`asks_price`) is answered
    only by facts that hold an amount of money (:data:`_MONEY`: a currency's sign or name): "Bought
    a 1998 upright piano" does not tell what it cost, and the answer is empty rather than that.
    ("How many" is not held to a number: "Went to the beach again" counts towards one.)
13. A question asking someone's occupation or pastime puts first their facts written as one
    (:mod:`.pursuits`): "Fire captain with Halifax Regional Fire" for "What does Tom do for a living?".

The rules in full, with their figures: docs/search.md, "The person named, the time asked...".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import cache, partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..index.search import FIELD_SEPARATOR
from ..model.dates import Span
from . import pursuits, scoped
from . import scope as scopes
from .dated import fact_date, within
from .paging.pages import FactOrder, Facts, Touching
from .time_words import TIME_WORDS

if TYPE_CHECKING:  # (ranking itself is imported with the first search by words)
    from ..index import ranking

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
only reorders those within a tenth of each other. (0.2, 0.3 and 0.5 were tried:
docs/benchmarks-recall.md.)"""

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


def shape(query: str, entities: Sequence[Any], touching: Touching, characters: int, *,
          limit: int | None = None, nearest: Nearest | None = None,
          lookup: Callable[[str], Any | None] | None = None, opened: scopes.Opened | None = None,
          window: Span | None = None) -> Facts:
    """The answer to `query` from its matched entities (best first, as :func:`.query.matches` gives
    them) and the relations touching them (`touching`: those of some of these entities, by name,
    in graph order; :func:`listed` makes it of a list). `nearest`: semantic candidates (see
    guarantee 3); `lookup`: an entity's object by name, for a candidate that no word of the query
    matched; `opened`: the entities and relations of some names (open_nodes), for the question's
    scope (guarantee 6); `window`: the time the answer's facts must fall in (guarantee 10)."""
    words = not (entities and whole_query_matches(query, entities[0]))
    if not words:
        entities = list(entities) if limit is None else list(entities[:limit])
        order: Sequence[tuple[int, int]] = _contained_order(query, entities, characters)
        if window is not None:
            order = _kept_within(order, entities, window)
        return Facts(entities, order, touching, characters, words)
    entities_given = entities
    entities, order, unlisted = _word_order(query, entities, nearest, lookup, opened, window)
    if limit is not None:
        assert isinstance(order, FactOrder)
        order, kept = order.first_entities(limit)
        entities = [entities[position] for position in kept]
        unlisted = 0
    if opened is None:
        return Facts(entities, order, touching, characters, words, unlisted=unlisted)
    given = _names_of(entities_given)
    if not (shown := {entities[position]["name"] for position, _ in order} - given):
        return Facts(entities, order, touching, characters, words, unlisted=unlisted)
    # Entities of a scope (or only meaning found) bring relations of their own: open_nodes gives
    # them, once, as the memory is now (a later page shows the memory as the first one did).
    own = [relation for relation in opened(sorted(shown))["relations"]
           if relation["from"] not in given and relation["to"] not in given]
    return Facts(entities, order, partial(_with_own, touching, given, own), characters, words, unlisted=unlisted)


def _names_of(entities: Sequence[Any]) -> AbstractSet[str]:
    """The names of the matched entities (of a ranking by words, as it holds them: query.Ranked)."""
    names = getattr(entities, "names", None)
    if isinstance(names, AbstractSet):
        return names
    return {entity["name"] for entity in entities}


def _beyond(matched: Sequence[Any], start: int, names: Sequence[str]) -> list[Any]:
    """The matched entities from `start` on that have these names, in the matches' order (of a
    ranking by words, without ordering the rest of it: query.Ranked.among)."""
    among = getattr(matched, "among", None)
    if among is not None:
        found: list[Any] = among(names)
        return found
    wanted = set(names)
    return [entity for entity in matched[start:] if entity["name"] in wanted]


def listed(relations: Sequence[Any]) -> Touching:
    """The relations of a list touching some entities, in the list's order."""
    def touching(names: AbstractSet[str]) -> list[Any]:
        return [relation for relation in relations if relation["from"] in names or relation["to"] in names]
    return touching


def _with_own(touching: Touching, given: AbstractSet[str], own: Sequence[Any], names: AbstractSet[str]) -> list[Any]:
    """The relations touching `names` that have an end among the matched entities (`given`), then
    those of the entities only a scope or meaning brought (`own`)."""
    found = [relation for relation in touching(names) if relation["from"] in given or relation["to"] in given]
    return found + listed(own)(names)


def _kept_within(order: Sequence[tuple[int, int]], entities: Sequence[Any], window: Span) -> FactOrder:
    """The facts of an order that fall within the window (the whole-query rule's answer, windowed)."""
    kept = [(position, index) for position, index in order if index >= 0 and within(entities[position], index, window)]
    return FactOrder((), None, (), head=([position for position, _ in kept], [index for _, index in kept]))


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


def _word_order(query: str, matched: Sequence[Any], nearest: Nearest | None,
                lookup: Callable[[str], Any | None] | None, opened: scopes.Opened | None = None,
                window: Span | None = None) -> tuple[list[Any], FactOrder, int]:
    """The facts answering a query taken as words (guarantees 2, 3, 6 to 9), the entities they
    refer to by position (the matches scored and those meaning brought, or the question's scope),
    and how many matches these leave out (none of their facts is in the answer)."""
    from ..index import ranking

    scope = scopes.find(query, matched, opened) if opened is not None else None
    ranked_by = query
    entities: Sequence[Any] = matched
    if scope is not None:
        # The question's scope (guarantee 6): its named entities, their targets, the rest, then
        # the matches whose observations name them; ranked by the question without the names.
        order_of = {name: number for number, name in enumerate((*scope.named, *scope.targets))}
        pool = sorted(scope.views.values(), key=lambda entity: (order_of.get(entity["name"], len(order_of)),
                                                                 entity["name"]))
        pool += [entity for entity in matched[:scopes.NAMED_AMONG]
                 if entity["name"] not in scope.names and scopes.mentions(entity, scope.named)]
        entities = pool
        ranked_by = scope.rest
    changed = scopes.is_about_now(query) and scopes.with_changes(ranked_by) != ranked_by
    if changed:
        ranked_by = scopes.with_changes(ranked_by)
    terms = ranking.query_terms(ranked_by)
    scored_entities, facts = 0, 0
    for entity in entities:
        if facts >= SCORED_FACTS:
            break
        facts += len(entity["observations"])
        scored_entities += 1
    beyond, unlisted = None, 0
    if scope is None:
        # The answer's entities: those scored, then those only meaning brings (the matches past
        # them in their order, then others), never the rest of the matches: none of their facts is
        # shown (and a ranking by words leaves them unordered). Their places keep the order of the
        # matches, so facts of equal scores come as they would among all of them.
        entities = list(matched[:scored_entities])
        beyond = partial(_beyond, matched, scored_entities)
    covered: dict[tuple[int, int], float] = {}
    found = ranking.fact_hits(ranked_by, [(entity["name"], entity["entityType"], entity["observations"])
                                          for entity in entities[:scored_entities]])
    if changed and found is not None:
        found = _state_once(found)
    scored = [] if found is None else _small_as_one(
        found, entities, ranking.score_facts(found, coverage_of=covered), covered, changed=changed)
    meaning_query = scope.asked if scope is not None and ranking.query_terms(scope.asked) else query
    resemblance: dict[tuple[int, int], float] = {}
    assert isinstance(entities, list)
    bar = _coverage_bar(covered)
    by_words = {(position, index) for position, index, _ in scored if covered.get((position, index), 1.0) >= bar}
    fused = _fused(scored, by_words, entities, meaning_query, nearest, lookup, scope, len(terms), resemblance, beyond,
                   window)
    if nearest is not None and found is not None and scope is not None and (unheld := _unheld(found)) \
            and len(unheld) >= UNHELD_SHARE * len(found.wanted_set):
        fused = _vouched(fused, by_words, resemblance, MEANING_WITHIN if window is not None else UNHELD_MEANING)
    if beyond is not None:
        unlisted = len(matched) - len(_names_of(entities) & _names_of(matched))
    joined: set[tuple[int, int]] = set()
    told: dict[tuple[int, int], float] = {}
    if scope is not None:
        # (what is left but filler, "Tell me about Bori", asks nothing of them but who they are)
        fused = scoped.weigh(fused, entities, scope, bool(terms) and scope.asks, covered, by_words, resemblance,
                             joined, told, dated=window is not None)
    if scope is not None and (pursuit := pursuits.asked(query, scope)) is not None:
        found_pursued = pursuits.pursued(entities, scope, pursuit, partial(pursuits.likeness, nearest, SCORED_FACTS),
                                         query)
        fused = pursuits.first(fused, found_pursued, current=scopes.is_about_now(query), joined=joined, told=told)
    if window is not None:
        fused = [fact for fact in fused if within(entities[fact[0]], fact[1], window)]
        if scope is not None:
            fused = scoped.first_within(fused, entities, scope, window, resemblance)
    asked = frozenset() if scope is None else frozenset(
        position for position, entity in enumerate(entities)
        if entity["name"] in scope.named or entity["name"] in scope.targets)
    if asks_price(query):
        fused = [fact for fact in fused if _holds_money(entities[fact[0]], fact[1])]
    fused = _plausible(fused, asked)
    fused = _newest_first(fused, entities, current=scopes.is_about_now(query), joined=joined, told=told)
    by_entity: dict[int, list[int]] = {}
    for position, index, _ in fused:
        by_entity.setdefault(position, []).append(index)
    positions: list[int] = []
    indexes: list[int] = []
    done: set[int] = set()
    for position, index, _ in fused:
        entity = entities[position]
        if position in done:
            continue
        # (within a scope an entity shows its evidence only: its other facts are what the question
        # did not ask about the person it names)
        if _size(entity) <= SMALL_ENTITY and scope is None:
            done.add(position)
            first = [index for index in by_entity[position] if index >= 0]
            taken = set(first)
            rest = [] if window is not None else [
                index for index in range(len(entity["observations"])) if index not in taken]
            shown = first + rest or [-1]
            positions += [position] * len(shown)
            indexes += shown
        else:
            positions.append(position)
            indexes.append(index)
    return entities, FactOrder((), None, (), head=(positions, indexes)), unlisted


# --------------------------------------------------------------------------------------------
# Evidence, scope, window, precision and versions (guarantees 6 to 9)
# --------------------------------------------------------------------------------------------

MIN_COVERAGE: Final = 0.4
"""A fact is evidence by words when it holds at least this share of the question's rarity."""
RELATIVE_COVERAGE: Final = 0.8
LOW_COVERAGE: Final = 0.2
"""A fact is evidence by words when it holds MIN_COVERAGE of the question's rarity or four fifths of
the best fact's coverage (RELATIVE_COVERAGE), whichever is less, and never under LOW_COVERAGE: a
long question no fact covers much of ("What dish that includes garlic did Audrey share with Andrew
on 3 July?") is answered by the facts that cover the most of it."""


def _coverage_bar(covered: Mapping[tuple[int, int], float]) -> float:
    """The share of the question's rarity a fact holds to be evidence by words (guarantee 7)."""
    best = max(covered.values(), default=1.0)
    return max(LOW_COVERAGE, min(MIN_COVERAGE, RELATIVE_COVERAGE * best))


UNHELD_MEANING: Final = 0.25
UNHELD_SHARE: Final = 0.3
"""Within a scope, when at least this share of the question's terms are held by nothing the search
read (no fact, name or type of the scope's entities; a word naming a time excepted: dates answer
it), a fact the words find is evidence only at UNHELD_MEANING similarity to the question (within a
window, MEANING_WITHIN). The scope's facts are few and about whom it names, so a word of the question
none of them holds is what is asked and never said: "When did we go to Disney World?" is not
answered by "Passed her road test on the first go", nor "What's my sister's dog called?" by her
other facts, while "Do I need spectacles to drive?" still is by "Has to wear glasses for driving"
(0.72 alike). Across a whole memory of dialog turns, or for a long question one stray word of which
is unheld, the words stand as they are (tried: docs/benchmarks-recall.md, "Run of 2026-12-03 14:30")."""


def _unheld(found: ranking.FactHits) -> frozenset[str]:
    """The question's terms that no fact read holds, nor the name or type of an entity read, and
    that name no time (a date, a month, "week": dates answer those): a word of what is asked that
    the memory, where it was looked for, never says."""
    from ..index import ranking

    return frozenset(term for term in ranking.unheld_terms(found)
                     if term not in _time_terms() and not any(map(str.isdigit, term)))


@cache
def _time_terms() -> frozenset[str]:
    """The terms of the words naming a time (:data:`.time_words.TIME_WORDS`)."""
    from ..index import ranking

    return frozenset(term for word in TIME_WORDS for term in ranking.fact_terms(word))


def _vouched(fused: list[tuple[int, int, float]], by_words: AbstractSet[tuple[int, int]],
             resemblance: Mapping[tuple[int, int], float], floor: float) -> list[tuple[int, int, float]]:
    """The facts of `fused` but those found by words that meaning finds less than `floor` like the
    question (guarantee 7: a question holding a word nothing holds, :func:`_unheld`)."""
    return [fact for fact in fused if (fact[0], fact[1]) not in by_words
            or resemblance.get((fact[0], fact[1]), 0.0) >= floor]


MEANING_ALONE: Final = 0.45
"""A fact no word reaches is evidence by meaning at this cosine similarity to the question."""
MEANING_ONE_WORD: Final = 0.27
"""... to a one-word question (``dog`` and "a border collie named Biscuit" are 0.37 apart)."""
MEANING_SCOPED: Final = scoped.MEANING_SCOPED
"""... inside the scope of a named entity (:mod:`.scoped`)."""
MEANING_WITHIN: Final = 0.2
"""... for a fact within the window the question names: its date answers the question's when, so
its meaning need answer only the rest ("Where did we go on holiday last summer?" and "Spent a
fortnight on the Isle of Skye" are 0.24 apart)."""
MARGIN: Final = 0.35
"""An entity is shown when its best fact scores at least this share of the answer's best."""
VERSIONS_BAND: Final = 0.75
"""Facts of one entity scoring within this share of its best are versions of one kind of fact:
newest first. For a question about the present, :data:`CURRENT_BAND`."""
CURRENT_BAND: Final = 0.35
ASKING_CUT: Final = 0.8
"""How much of a fact's score the share of it that asks takes away (guarantee 11): a fact that is
all question keeps a fifth; one that tells and then asks back keeps most of its own."""
_ASKED: Final = re.compile(r"[^.!?\n]*\?")


_HOW_MUCH: Final = re.compile(r"\bhow\s+much\b", re.I)
_MONEY_ASKED: Final = re.compile(r"\b(?:cost|costs|pay|paid|price|priced|spend|spent|earn|earns|earned|charge|charged|"
                                 r"owe|owed|sell|sold|worth|salary|rent|fee|fees|budget)\b", re.I)
_MONEY: Final = re.compile(r"[$€£¥₩]|\d\s*k\b|\b(?:euros?|eur|pounds?|quid|dollars?|usd|kroner?|krone|kr|nok|sek|dkk|"
                           r"złoty|zloty|zł|pln|yen|won|francs?|chf|rupees?|cents?|pence|grand|free)\b", re.I)
"""How much money: what a question asking a price (`_MONEY_ASKED`) needs a fact to hold."""


def asks_price(query: str) -> bool:
    """Whether the question asks how much something cost, was paid or earned (guarantee 12)."""
    return _HOW_MUCH.search(query) is not None and _MONEY_ASKED.search(query) is not None


def _holds_money(entity: Mapping[str, Any], index: int) -> bool:
    """Whether the fact (an entity read as one, for index -1) holds an amount of money (guarantee 12)."""
    observations = entity["observations"]
    texts = observations[index:index + 1] if 0 <= index < len(observations) else observations
    return any(_MONEY.search(text) is not None for text in texts)


def asking(text: str) -> float:
    """The share of `text` in sentences that ask (ending in a question mark), from 0 to 1."""
    if "?" not in text:
        return 0.0
    asked = sum(len(found.group(0)) for found in _ASKED.finditer(text))
    return min(asked / len(text), 1.0) if text else 0.0


def _told(entity: Mapping[str, Any], index: int) -> float:
    """What is left of a fact's score once what it asks is taken away (guarantee 11)."""
    observations = entity["observations"]
    return 1.0 - ASKING_CUT * asking(observations[index]) if 0 <= index < len(observations) else 1.0


def _fused(scored: list[tuple[int, int, float]], by_words: AbstractSet[tuple[int, int]], entities: list[Any],
           query: str, nearest: Nearest | None, lookup: Callable[[str], Any | None] | None,
           scope: scopes.Scope | None, terms: int,
           resemblance: dict[tuple[int, int], float] | None = None,
           beyond: Callable[[Sequence[str]], list[Any]] | None = None,
           window: Span | None = None) -> list[tuple[int, int, float]]:
    """The facts that are evidence (guarantee 7: those of `scored` in `by_words`, and what meaning
    finds), fused by score: each fact's word score as a
    share of the best, plus SEMANTIC_WEIGHT times its similarity as a share of the best, or, for a
    fact only meaning finds, MEANING_SHARE times that similarity's share; each cut by what it asks
    (guarantee 11); within a `window`, MEANING_WITHIN is the floor for a fact it holds.
    Candidates of entities the words did not match are added to `entities` (the matches past
    those scored through `beyond`, in their order, then others through `lookup`; in a scope, only
    its own). Each candidate's similarity goes to `resemblance`."""
    evidence = [(position, index, score * _told(entities[position], index)) for position, index, score in scored
                if (position, index) in by_words]
    found = None
    if nearest is not None:
        try:
            # Within a scope the question without its names resembles everyone's facts alike: all
            # the candidates are asked for, and the scope's kept (the others have no place here).
            # Within a window, likewise: a fact of that time need be only a little like the question
            # (MEANING_WITHIN), and the best few of the whole memory are seldom of that time.
            found = nearest(query, SCORED_FACTS if scope is not None or window is not None else SEMANTIC_CANDIDATES)
        except Exception:  # a model that fails answers nothing; the words still do
            found = None
    best_word = max((score for _, _, score in evidence), default=0.0) or 1.0
    fused: dict[tuple[int, int], float] = {(position, index): score / best_word for position, index, score in evidence}
    if found:
        floor = (MEANING_USER_ALONE if not evidence and _users_own(scope) else MEANING_SCOPED) if scope is not None \
            else MEANING_ONE_WORD if terms <= 1 else MEANING_ALONE
        best_meaning = max(similarity for _, _, similarity in found) or 1.0
        positions = {entity["name"]: position for position, entity in enumerate(entities)}
        if beyond is not None:
            for entity in beyond([name for name, _, _ in found if name not in positions]):
                positions[entity["name"]] = len(entities)
                entities.append(entity)
        for name, index, similarity in found:
            position = positions.get(name)
            if position is None:
                entity = lookup(name) if lookup is not None and scope is None else None
                if entity is None:
                    continue
                position = positions[name] = len(entities)
                entities.append(entity)
            if not 0 <= index < len(entities[position]["observations"]) or similarity <= 0:
                continue
            fact = (position, index)
            if resemblance is not None:
                resemblance[fact] = similarity
            share = similarity / best_meaning * _told(entities[position], index)
            if fact in fused:
                fused[fact] += SEMANTIC_WEIGHT * share
            elif similarity >= floor or (window is not None and similarity >= MEANING_WITHIN
                                         and within(entities[position], index, window)):
                fused[fact] = MEANING_SHARE * share if evidence else share
    from ..index import ranking

    return ranking.best_first((position, index, score) for (position, index), score in fused.items())


MEANING_USER_ALONE: Final = 0.33
"""... inside the user's own scope when no word of the question is evidence anywhere in it: the
user's facts are hundreds, and some are 0.25 to 0.35 like any question ("Which cryptocurrency do
I own?" and "Bought a thermal flask"), so meaning alone must say more there than of a named
person's few facts (see docs/benchmarks-recall.md, bench_absent)."""


def _users_own(scope: scopes.Scope) -> bool:
    """Whether the scope is the user's alone, following no relation."""
    return scope.named == (scopes.USER,) and not scope.hops
MEANING_SHARE: Final = 0.6
"""A fact only meaning finds, against word matches: this share of its similarity's share of the
best (the best such fact ranks with a word match 0.6 as good as the best)."""


def _plausible(fused: list[tuple[int, int, float]],
               asked: AbstractSet[int] = frozenset()) -> list[tuple[int, int, float]]:
    """Only the entities whose best fact scores within MARGIN of the answer's best (guarantee 8),
    and those the question asks about (`asked`: the positions of a scope's named entities and
    targets): "What engine does Frøya have?" is about the boat as much as about its engine, whose
    facts the scope counts double."""
    if not fused:
        return fused
    best: dict[int, float] = {}
    for position, _, score in fused:
        best.setdefault(position, score)
    bar = MARGIN * fused[0][2]
    return [fact for fact in fused if best[fact[0]] >= bar or fact[0] in asked]


def _newest_first(fused: list[tuple[int, int, float]], entities: Sequence[Any], *,
                  current: bool, joined: set[tuple[int, int]],
                  told: Mapping[tuple[int, int], float] | None = None) -> list[tuple[int, int, float]]:
    """Within each entity, the dated facts scoring within the band of its best are its versions
    of one kind of fact: newest first, taking the places (scores) of the band in turn (guarantee 9).
    The facts a scope `joined` without evidence are no versions of anything: their places stay.
    The facts that tell of the relation a question followed (`told`: their own scores, before they
    were put above the rest) are versions among themselves, those within CURRENT_BAND of the best
    of them by those scores: "Sold the Marex and bought Frøya" for "Which boat did I buy?", before
    every later fact that names the boat."""
    band = CURRENT_BAND if current else VERSIONS_BAND
    told = told or {}
    groups: dict[tuple[int, bool], list[int]] = {}
    for number, (position, index, _) in enumerate(fused):
        groups.setdefault((position, (position, index) in told), []).append(number)
    result = list(fused)
    for (position, telling), numbers in groups.items():
        def score(number: int, telling: bool = telling) -> float:
            fact = fused[number]
            return told[fact[0], fact[1]] if telling else fact[2]

        top = max(score(number) for number in numbers)
        versions = [number for number in numbers if score(number) >= (CURRENT_BAND if telling else band) * top
                    and (position, fused[number][1]) not in joined and fact_date(entities[position], fused[number][1])]
        if len(versions) < 2:
            continue
        newest = sorted(versions, key=lambda number: fact_date(entities[position], fused[number][1]), reverse=True)
        for place, number in zip(versions, newest, strict=True):
            result[place] = (position, fused[number][1], fused[place][2])
    return result


def _state_once(found: ranking.FactHits) -> ranking.FactHits:
    """The hits of a question about the present asked with the verbs of its states' changes too
    (scope.with_changes): a fact holding a state and the verb of its change ("Lives in Denver since
    the move") holds it once, as one holding either does (the newest of them is the answer)."""
    changes = scopes.changes()

    def once(hit: frozenset[str]) -> frozenset[str]:
        extra = {term for term in hit if term in changes and hit & changes[term]}
        return hit - extra if extra else hit

    return found._replace(hits=[[once(hit) for hit in hits] for hits in found.hits])


def _small_as_one(found: ranking.FactHits, entities: Sequence[Any], scored: list[tuple[int, int, float]],
                  covered: dict[tuple[int, int], float], *, changed: bool = False) -> list[tuple[int, int, float]]:
    """The facts scored, with each small entity (shown whole: guarantee 2) placed by the score of its
    observations read as one text (rarity counted over the same facts, a small entity's as one): a
    dialog turn whose words, caption and date line each hold part of the question answers it as a
    whole. Its best fact stays first within it. Its facts' evidence (`covered`, guarantee 7) is
    likewise what the entity read as one covers, where that is more than a fact's own: the turn
    "Session 3, 21 June, 2023" dates answers "what did Maria plan on 21 June, 2023?". `found`: the
    query's terms in the facts scored (ranking.fact_hits), read again rather than worked out twice;
    `changed`: asked with the verbs of states' changes too (:func:`_state_once`)."""
    from ..index import ranking

    best: dict[int, int] = {}
    for number, (position, _, _) in enumerate(scored):
        best.setdefault(position, number)
    small = {position for position in best if _size(entities[position]) <= SMALL_ENTITY}
    if not small:
        return scored
    whole_covered: dict[tuple[int, int], float] = {}
    together = ranking.read_as_one(found, small)
    whole = {position: score for position, _, score in ranking.score_facts(
        _state_once(together) if changed else together, only=small, coverage_of=whole_covered)}
    share_of = {position: share for (position, _), share in whole_covered.items()}
    for position, index, _ in scored:  # (the evidence of the facts scored is all that is read of it)
        if (share := share_of.get(position)) is not None and covered.get((position, index), 0.0) < share:
            covered[position, index] = share
    placed = [(position, index, score if position not in whole
               else whole[position] if best[position] == number else min(score, whole[position]))
              for number, (position, index, score) in enumerate(scored)]
    return ranking.best_first(placed)


__all__ = [
    "ArgumentError",
    "CHARACTERS_VARIABLE",
    "DEFAULT_CHARACTERS",
    "MINIMUM_CHARACTERS",
    "characters_from",
    "check_characters",
    "listed",
    "shape",
    "whole_query_matches",
]
