"""The facts of a question's scope, weighed by where they stand (answer guarantee 6; scope.py says
what the scope is): whom the question names as their facts scored, where its relations led
doubled, their neighbours less, a fact telling of the relation followed first, and what is new
or who they are when that is all it asks.

Pure: the facts (position, index, score) an answer found, the entities they are of, and the scope
go in; the facts to answer with, best first, come out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final

from ..model.dates import Span
from . import scope as scopes
from .dated import fact_date, within

Fact = tuple[int, int, float]

TARGET_SHARE: Final = 0.6
"""The score, as a share of the answer's best, of the facts of an entity reached through a
relation the question names, when nothing else makes them evidence."""
MEANING_SCOPED: Final = 0.25
"""A fact no word reaches is evidence by meaning at this cosine similarity inside the scope of a
named entity (its facts are few, and about what is asked), where answer.MEANING_ALONE holds elsewhere."""


def weigh(fused: list[Fact], entities: Sequence[Any], scope: scopes.Scope, asks: bool,
          covered: Mapping[tuple[int, int], float], by_words: AbstractSet[tuple[int, int]],
          resemblance: Mapping[tuple[int, int], float], joined_here: set[tuple[int, int]],
          told_here: dict[tuple[int, int], float], *, dated: bool = False) -> list[Fact]:
    """The answer's facts (`fused`, best first) weighed by the scope (:func:`_weighed`), then only
    those that are evidence about whom the question names: a neighbour's fact the words find
    (`covered`: its share of the question) when it holds most of the question, names them, or is
    like it ("year" in a neighbour's "eleven years" says nothing of "How much do I earn a
    year?"); when nothing of whom the question asks answers, a neighbour's fact only meaning finds
    is no answer about them ("Which rugby team does Callum support?" and his wife's netball),
    unless it names them ("Rosa: off to Lisbon next week", for "Where is Rosa going on a trip?")."""
    fused = _weighed(fused, entities, scope, asks, resemblance, joined_here, told_here, dated=dated)
    around = {position for position, entity in enumerate(entities)
              if entity["name"] not in scope.named and entity["name"] not in scope.targets}

    def names_them(fact: Fact) -> bool:
        return fact[1] >= 0 and scopes.names(entities[fact[0]]["observations"][fact[1]], scope.named)

    def calls_them(fact: Fact) -> bool:
        # ("Looked after Ingrid's cat Pus": written as a name, as the question's possessive wrote it)
        return fact[1] >= 0 and bool(set(scope.owned) & scopes.called_in(entities[fact[0]]["observations"][fact[1]]))

    def evidence(fact: Fact) -> bool:
        if scope.owned:
            # ("What is Ingrid's dog called?": her son's wish for a dog, her father's dog, say nothing of hers)
            return calls_them(fact)
        return ((fact[0], fact[1]) not in covered or covered[fact[0], fact[1]] >= NEIGHBOUR_COVERAGE
                or resemblance.get((fact[0], fact[1]), 0.0) >= MEANING_SCOPED)

    fused = [fact for fact in fused if fact[0] not in around or names_them(fact) or evidence(fact)]
    if not _about(fused, entities, scope):
        fused = [fact for fact in fused if (fact[0], fact[1]) in by_words or names_them(fact)
                 or calls_them(fact)]
    return fused


def first_within(fused: list[Fact], entities: Sequence[Any], scope: scopes.Scope, window: Span,
                 resemblance: Mapping[tuple[int, int], float]) -> list[Fact]:
    """The facts within the window (`fused`); when none is of whom the question is about, their
    facts of that time come first (:func:`_scope_within`), the others after at NEIGHBOUR_SHARE."""
    if _about(fused, entities, scope):
        return fused
    return _scope_within(entities, scope, window, resemblance) + [
        (position, index, score * NEIGHBOUR_SHARE) for position, index, score in fused]


def _weighed(fused: list[Fact], entities: Sequence[Any], scope: scopes.Scope, asks: bool,
             resemblance: Mapping[tuple[int, int], float], joined_here: set[tuple[int, int]],
             told_here: dict[tuple[int, int], float], *, dated: bool = False) -> list[Fact]:
    """The facts of a scope, weighed by where they stand (guarantee 6): the named entities' as they
    scored, the targets' doubled, the other neighbours' and those that mention a named entity at
    NEIGHBOUR_SHARE. A target's facts that nothing else brings join at TARGET_SHARE of the best, the
    one most like the question first (`resemblance`, the similarities the model gave; else in the
    order they were written), and are added to `joined_here`; a question with nothing but names
    (`asks` false) answers with the named entities' facts first (within a window, `dated`, the newest first)."""
    if scope.news:
        return _news(entities, scope, joined_here)
    named, targets, last = set(scope.named), set(scope.targets), set(scope.last)
    # (an entity that only mentions a named one, as a place a person went, is no more than a neighbour;
    # one a relation passed through on the way is as the named)
    weight = [2.0 if entity["name"] in last else 1.0 if entity["name"] in named or entity["name"] in targets
              else NEIGHBOUR_SHARE for entity in entities]
    joined = [(position, index, score * weight[position]) for position, index, score in fused]
    top = max((score for _, _, score in joined), default=1.0)
    have = {(position, index) for position, index, _ in fused}
    if scope.last:
        # A fact naming where the last relation followed led, of whom it was followed from, tells of
        # that relation: it counts as the best of the answer (at least), before the target's own facts.
        # Among themselves they keep the order of their own scores (`told_here`: by these, not by
        # their place above the rest, are they versions of one kind of fact: answer guarantee 9).
        told = _telling(entities, set(scope.tellers), scope.last, scope.naming_last)
        joined = _above(joined, told, top, told_here)
        told_here.update((fact, 0.0) for fact in told - have)
        joined += [(position, index, top * TOLD_ABOVE) for position, index in sorted(told - have)]
        have |= told
    known: set[tuple[int, int]] = set()
    if scope.user_called:
        # "How do I know Odd?": their facts calling the user by name tell it (scope guarantee 8).
        known = set(_facts_of(entities, set(scope.named), lambda entity, index: bool(
            set(scope.user_called) & scopes.called_in(entity["observations"][index]))))
        # Those the words or the model found keep the order of their scores; the others follow in
        # the order they were told (how one came to know someone is told first), and are no versions.
        joined = _above(joined, known, top, told_here)
        unfound = sorted(known - have)
        joined += [(position, index, top * TOLD_ABOVE * (1.0 - place / (10 * len(unfound) + 10)))
                   for place, (position, index) in enumerate(unfound)]
        joined_here.update(unfound)
        have |= known
    if not asks:
        # A question asking nothing but whom it names ("Who is Seoyeon?", "What did Jisung do in
        # 2025?"): their facts first, the most like it first (within a window, the newest), then
        # what else was found (the user's "Started dating Kang Seoyeon").
        mine = _theirs(entities, scope)
        if dated:
            mine.sort(key=lambda fact: fact_date(entities[fact[0]], fact[1]), reverse=True)
        else:
            mine.sort(key=lambda fact: -resemblance.get(fact, 0.0))  # (stable: written order)
        mine.sort(key=lambda fact: fact not in known)  # ("Who is Dana to me?": those calling the user first)
        taken = set(mine)
        joined = [fact for fact in joined if (fact[0], fact[1]) not in taken] + [
            (position, index, top * TOLD_ABOVE * (1 - place / (10 * len(mine) + 10)))
            for place, (position, index) in enumerate(mine)]
        joined_here.update(taken)
        joined.sort(key=lambda fact: (-fact[2], fact[0], fact[1]))
        return joined
    wanted = [*scope.targets]
    for rank, name in enumerate(wanted):
        for position, entity in enumerate(entities):
            if entity["name"] == name:
                count = len(entity["observations"])
                brought = [index for index in (range(count) if count else [-1]) if (position, index) not in have]
                brought.sort(key=lambda index: -resemblance.get((position, index), 0.0))  # (stable: written order)
                for place, index in enumerate(brought):
                    joined.append((position, index, top * (TARGET_SHARE - 0.01 * rank) * (1 - place / (10 * count + 10))))
                    joined_here.add((position, index))
                break
    joined.sort(key=lambda fact: (-fact[2], fact[0], fact[1]))
    return joined


def _above(joined: list[Fact], telling: AbstractSet[tuple[int, int]], top: float,
           told_here: dict[tuple[int, int], float]) -> list[Fact]:
    """The facts, those `telling` placed just above the best (`top`), among themselves in the order
    of their own scores, which go to `told_here` (answer guarantee 9 takes their versions by these)."""
    told_here.update({(position, index): score for position, index, score in joined if (position, index) in telling})
    return [(position, index, top * TOLD_ABOVE * (1.0 + TOLD_ORDER * score / top) if (position, index) in telling
             else score) for position, index, score in joined]


def _news(entities: Sequence[Any], scope: scopes.Scope, joined_here: set[tuple[int, int]]) -> list[tuple[int, int, float]]:
    """What is new with whom the question asks about (the last relation's targets, else the named
    entities): their facts, newest first (scope guarantee 6)."""
    held = _theirs(entities, scope)
    held.sort(key=lambda fact: fact_date(entities[fact[0]], fact[1]), reverse=True)
    joined_here.update(held)
    return [(position, index, 1.0 - place / (len(held) + 1)) for place, (position, index) in enumerate(held)]


def _theirs(entities: Sequence[Any], scope: scopes.Scope) -> list[tuple[int, int]]:
    """The facts of whom the question asks about (the last relation's targets, else the named
    entities), in written order; an entity without observations as itself (index -1)."""
    whose = set(scope.last or scope.named)
    return [(position, index) for position, entity in enumerate(entities) if entity["name"] in whose
            for index in (range(len(entity["observations"])) if entity["observations"] else [-1])]


def _scope_within(entities: Sequence[Any], scope: scopes.Scope, window: Span,
                  resemblance: Mapping[tuple[int, int], float]) -> list[tuple[int, int, float]]:
    """When nothing found within the window is of the entities the question is about, their facts
    within it (the targets', else the named ones': "Where did we take the children last fall?"),
    the most like the question first, then the newest (guarantee 10)."""
    held = _facts_of(entities, set(scope.targets), lambda entity, index: within(entity, index, window))
    if not held:
        held = _facts_of(entities, set(scope.named), lambda entity, index: within(entity, index, window))
    held.sort(key=lambda fact: fact_date(entities[fact[0]], fact[1]), reverse=True)
    held.sort(key=lambda fact: -resemblance.get(fact, 0.0))  # (stable: the newest first among equals)
    return [(position, index, 1.0 - place / (len(held) + 1)) for place, (position, index) in enumerate(held)]


def _about(fused: Sequence[tuple[int, int, float]], entities: Sequence[Any], scope: scopes.Scope) -> bool:
    """Whether some fact of the answer is of whom the question asks (its named entities or targets)."""
    return any(entities[position]["name"] in scope.named or entities[position]["name"] in scope.targets
               for position, _, _ in fused)


def _facts_of(entities: Sequence[Any], names: AbstractSet[str],
              keep: Callable[[Any, int], bool]) -> list[tuple[int, int]]:
    """The facts (position, index) of the entities of these names that `keep` keeps, in order."""
    return [(position, index) for position, entity in enumerate(entities) if entity["name"] in names
            for index in range(len(entity["observations"])) if keep(entity, index)]


def _telling(entities: Sequence[Any], tellers: AbstractSet[str], targets: Sequence[str],
             naming: Sequence[str] = ()) -> set[tuple[int, int]]:
    """The facts of the `tellers` that tell of the relation to one of the `targets` (scope guarantee 5)."""
    def telling(entity: Any, index: int) -> bool:
        return scopes.tells(entity["observations"][index], targets, naming)

    return set(_facts_of(entities, tellers, telling))


TOLD_ABOVE: Final = 1.01
"""A fact that tells of the relation asked about comes before the best of the rest (guarantee 6)."""
TOLD_ORDER: Final = 0.001
"""How much of its own score a fact that tells keeps above TOLD_ABOVE: enough to order such facts
among themselves, too little to matter beside anything else."""
NEIGHBOUR_COVERAGE: Final = 0.6
"""The share of the question's rarity a neighbour's fact found by words holds to be evidence about
whom the question names, unless it names them or is like the question (guarantee 6)."""
NEIGHBOUR_SHARE: Final = 0.35
"""What a fact of an entity one relation from the named one counts, against the named entity's
own: the question is about the named entity; its neighbours answer through a relation."""
