"""The part of the memory a question is about: the people and things it names, and their neighbours.

Pure but for `opened` (the entities and relations of some names, as open_nodes gives them, from
whichever store answers). A question that names an entity ("What pet does Maria have?") is about
that entity and what it is related to, not about every fact that shares a word with it; and the
name is no evidence for one of its facts over another.

Guarantees (for :func:`find`):

1. An entity is named when every term of its name is a term of the question, or when its name
   has several terms and the question holds the first one as a capitalised word ("Maria" for
   ``Maria_Garcia``). Only the first :data:`NAMED_AMONG` matched entities are looked at (they are
   ranked with a name term counting three times, so a named entity is among them).
2. A question that names no entity but speaks in the first person (I, my, me, mine, we, our,
   us) names :data:`USER`, the entity the README's prompt tells the model to keep the user in,
   when it exists.
3. The scope is the named entities, every entity one relation away from them, the entities whose
   observations name them (among those matched), and, past a relation the question names, the
   entities one relation further: "my brother's wife" follows a relation whose type matches
   "brother" (by stemmed words, or a word of the same kind in :data:`RELATION_WORDS`), then one
   matching "wife". The entities so reached are the scope's targets.
4. The words left to rank the scope's facts are the question without the names' terms.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from ..index import ranking

USER: Final = "default_user"
NAMED_AMONG: Final = 200
_FIRST_PERSON: Final = re.compile(r"\b(?:i|my|me|mine|myself|we|our|ours|us)\b", re.I)
_WORD: Final = re.compile(r"[^\W_]+")

RELATION_WORDS: Final = (
    "wife husband spouse partner married marry girlfriend boyfriend fiance fiancee",
    "brother sister sibling",
    "mother father mom mum dad parent",
    "son daughter child kid",
    "grandmother grandfather grandma grandpa grandparent grandchild grandson granddaughter",
    "aunt uncle niece nephew cousin",
    "boss manager supervisor report manage lead",
    "colleague coworker teammate",
    "friend",
    "work employer company job employ office",
    "pet dog cat own",
    "live home city house resident",
    "doctor dentist therapist physician",
    "member belong team club",
    "study school university college attend",
)
"""Words of one kind of relation: a question's word matches a relation type holding any of its kind."""

Opened = Callable[[Sequence[str]], Mapping[str, Any]]
"""The entities of some names (those that exist) and the relations touching them: open_nodes."""


@cache
def _kinds() -> dict[str, frozenset[str]]:
    kinds: dict[str, frozenset[str]] = {}
    for line in RELATION_WORDS:
        kind = frozenset(ranking.terms(line))
        for term in kind:
            kinds[term] = kinds.get(term, frozenset()) | kind
    return kinds


@dataclass(frozen=True)
class Scope:
    named: tuple[str, ...]
    """The entities the question names (or the user's)."""
    names: frozenset[str]
    """Every entity of the scope."""
    targets: tuple[str, ...]
    """The entities reached through the relations the question names, the last hop's first."""
    rest: str
    """The question without the names' terms: what ranks the scope's facts."""
    views: dict[str, Any] = field(default_factory=dict)
    """The scope's entity objects, by name."""
    relations: list[Any] = field(default_factory=list)
    """The relations touching the named entities and the targets."""


def _name_terms(name: str) -> tuple[str, ...]:
    return ranking.fact_terms(name)


def named_in(query: str, entities: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of the matched entities the query names (guarantee 1), in their order."""
    wanted = set(ranking.query_terms(query, question_words=False))
    if not wanted:
        return []
    capitalised = {term for word in _WORD.findall(query) if word[:1].isupper() for term in ranking.terms(word)}
    named = []
    for entity in entities[:NAMED_AMONG]:
        terms = _name_terms(entity["name"])
        if terms and (wanted.issuperset(terms) or (len(terms) > 1 and terms[0] in capitalised)):
            named.append(entity["name"])
    return named


def speaks_of_user(query: str) -> bool:
    return _FIRST_PERSON.search(query) is not None


def _kind_matches(relation_type: str, other_type: str, words: set[str]) -> set[str]:
    """The question's terms that name this relation: its type's terms, words of their kind, or the
    type of the entity at its other end."""
    kinds = _kinds()
    found = set()
    for term in ranking.fact_terms(relation_type):
        if term in words:
            found.add(term)
        found |= words & kinds.get(term, frozenset())
    found |= words & set(ranking.fact_terms(other_type))
    return found


def _other(relation: Mapping[str, Any], name: str) -> str:
    return relation["to"] if relation["from"] == name else relation["from"]


def find(query: str, entities: Sequence[Mapping[str, Any]], opened: Opened) -> Scope | None:
    """The scope of the question (guarantees 1 to 4); None when it names no entity and the user's
    entity is not spoken of (or does not exist)."""
    named = named_in(query, entities)
    if not named and speaks_of_user(query):
        named = [USER]
    if not named:
        return None
    first = opened(named)
    views = {entity["name"]: entity for entity in first["entities"]}
    named = [name for name in named if name in views]
    if not named:
        return None
    name_terms = {term for name in named for term in _name_terms(name)}
    rest_words = [word for word in _WORD.findall(query) if not name_terms.issuperset(ranking.terms(word))
                  or not ranking.terms(word)]
    rest = " ".join(rest_words)
    wanted = set(ranking.query_terms(rest, question_words=False))
    relations = list(first["relations"])
    neighbours = {_other(relation, name) for relation in relations for name in named
                  if name in (relation["from"], relation["to"])}
    # What the neighbours are (their types) is needed to follow a relation by the type at its end.
    around = opened(sorted(neighbours - views.keys()))
    views.update((entity["name"], entity) for entity in around["entities"])
    hop: list[str] = []
    used: set[str] = set()
    for relation in relations:
        for name in named:
            if name in (relation["from"], relation["to"]):
                other = _other(relation, name)
                if other in views and other not in named and (
                        matched := _kind_matches(relation["relationType"], views[other]["entityType"], wanted)):
                    if other not in hop:
                        hop.append(other)
                    used |= matched
    targets = list(hop)
    if hop:
        second = opened(hop)
        further = [relation for relation in second["relations"] if relation not in relations]
        ends = {_other(relation, name) for relation in further for name in hop if name in (relation["from"], relation["to"])}
        more = opened(sorted(ends - views.keys()))
        views.update((entity["name"], entity) for entity in more["entities"])
        left = wanted - used
        last: list[str] = []
        for relation in further:
            for name in hop:
                if name in (relation["from"], relation["to"]):
                    other = _other(relation, name)
                    if other in views and other not in named and other not in hop and left and _kind_matches(
                            relation["relationType"], views[other]["entityType"], left):
                        if other not in last:
                            last.append(other)
        relations += further
        targets = last + hop
    return Scope(tuple(named), frozenset(views), tuple(targets), rest, views, relations)


def mentions(entity: Mapping[str, Any], named: Sequence[str]) -> bool:
    """Whether one of the entity's observations holds every term of a named entity's name."""
    for name in named:
        terms = set(_name_terms(name))
        if terms and any(terms.issubset(ranking.fact_terms(observation)) for observation in entity["observations"]):
            return True
    return False


__all__ = ["NAMED_AMONG", "RELATION_WORDS", "USER", "Opened", "Scope", "find", "mentions", "named_in",
           "speaks_of_user"]
