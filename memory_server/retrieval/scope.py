"""The part of the memory a question is about: the people and things it names, and their neighbours.

Pure but for `opened` (the entities and relations of some names, as open_nodes gives them, from
whichever store answers). A question that names an entity ("What pet does Maria have?") is about
that entity and what it is related to, not about every fact that shares a word with it; and the
name is no evidence for one of its facts over another.

Guarantees (for :func:`find`):

1. An entity is named when every term of its name is a term of the question, or when its name
   has several terms and the question holds the first one as a capitalised word ("Maria" for
   ``Maria_Garcia``), or the last one when no other of these names ends with it ("Jaewon" for
   ``Lee_Jaewon``: names written family name first). A name with accents is matched by its
   accents ("take" is not the dog ``Tåke``); a one-word name, in a question that begins with a
   capital, only where the question writes it with one. Only the first :data:`NAMED_AMONG` matched
   entities are looked at (they are ranked with a name term counting three times, so a named
   entity is among them).
2. A question that names no entity but speaks in the first person (I, my, me, mine, we, our,
   us) names :data:`USER`, the entity the README's prompt tells the model to keep the user in,
   when it exists; so does one that speaks of kin without a possessor (:data:`KIN_WORDS`: "Which
   grandchild is the youngest?"), when a relation of the user's is what it names; one naming an
   entity beside the user ("Liv and I", "me and Tom") names the user as well.
3. The scope is the named entities, every entity one relation away from them, the entities whose
   observations name them (among those matched), and, past a relation the question names, the
   entities one relation further: "my brother's wife" follows, from the named entity, the
   relations the first such word names (its stemmed word in the relation's type, a type word
   :data:`RELATION_WORDS` gives it, or the type or a name term of the entity at the other end:
   "dog", "my boss's fleet"), then from where they led those a later word names. A word naming a
   relation only by what is at its other end yields to a later word naming a relation of the same
   entity by its own type ("the place I volunteer at": ``volunteers_at``, not every relation to a
   place), and a light verb (:data:`LIGHT_VERBS`) names one only when no other word does ("Which
   vet do we take our dog to?"), and a plain kin word no in-law relation ("Dad" is not the
   ``father_in_law_of``). The entities so reached are the scope's targets, the last hop's first.
4. The words left to rank the scope's facts are the question without the names' terms and
   without the words that named the relations followed, but for a word that named one only by a
   name at its other end ("a long weekend" and ``Morella_Weekend``: another weekend may answer). A name is no evidence for its own
   entity's facts, but it is for another named entity's fact that mentions it ("Alice's reason
   for visiting Lisbon": Alice's facts that name Lisbon): such a name's terms stay.
5. At most :data:`MAX_HOPS` relations are followed. A fact of the entities the last relation was
   followed from (`tellers`: the named ones, after one) that names an entity it reached (`last`),
   or holds the word that named that relation (or the verb of its change, :data:`CHANGED_BY`:
   "moved" for "live") and calls the entity by its first or last name,
   or holds every term of the entity's name the question wrote when those named the relation
   (:func:`tells`), tells of the very relation asked about: "Started a new job at Lumen Health",
   for "Who is my employer now?"; "Firefighter with the Changwon fire department", for "What does
   my sister's husband do for work?"; "Coxswain of the station's rescue boat", for "What is
   Kjetil's role at the rescue station?".
6. A question that asks nothing of whom it names but what is new with them ("What happened to
   Jaewon recently?", "How is my sister doing?", "What did Inés go off to do?") has no words left to rank by (`news`): their
   facts come newest first.
7. `asks` is false when the words left are filler ("Tell me about Bo") or, past a relation, only a
   name asked ("What is my dog called?"): the question asks who they are.
8. A question asking how the user knows whom it names ("How do I know Odd?", "How did I meet
   Liv?", "Who is Bo to me?", :data:`_ACQUAINTANCE`), following no relation, carries the names the
   user goes by (`user_called`: the terms of the capitalised words after "Name is", "goes by",
   "known as" or "calls him" in the user's facts): the named entities' facts calling the user so
   tell it.
9. A question asking, by a possessive, of a thing of a named entity's that no relation of theirs
   names ("What is Ingrid's dog called?": she has none) carries the possessive's terms (`owned`):
   a neighbour's fact is then evidence only when it names them, or writes that name as a name
   ("Looked after Ingrid's cat Pus"); her son's wish for a dog and her father's dog are not.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from ..index import ranking

USER: Final = "default_user"
NAMED_AMONG: Final = 200
MAX_HOPS: Final = 3
"""Relations followed at most ("what my sister's husband does for work": sister, husband, work)."""
_FIRST_PERSON: Final = re.compile(r"\b(?:i|my|me|mine|myself|we|our|ours|us)\b", re.I)
_WITH_USER: Final = re.compile(r"\b(?:and|&)\s+(?:I|me|myself)\b|\b(?:I|me)\s+and\b", re.I)
"""The user named beside another: "Liv and I", "me and Tom"."""
_ACQUAINTANCE: Final = re.compile(
    r"\bhow\s+(?:do|did)\s+(?:I|we)\s+(?:know|meet|get\s+to\s+know)\b|\bwhere\s+did\s+(?:I|we)\s+meet\b"
    r"|\bhow\s+(?:does|did|do)\s+.+\s+know\s+(?:me|us)\b|\bwho\s+(?:is|was|are|were)\s+.+\s+to\s+(?:me|us)\b"
    r"|\brelated\s+to\s+(?:me|us)\b", re.I)
"""A question asking how the user knows whom it names: "How do I know Odd?", "Who is Bo to me?"."""
_CALLED: Final = re.compile(
    r"\b(?:[Nn]ame\s+is|[Gg]oes\s+by|[Kk]nown\s+as|calls?\s+(?:him|her|them))\s+([A-Z][^\W_]*)(?:\s+([A-Z][^\W_]*))?")
"""How a fact of the user's gives the name they go by: "Name is Terje Solbakken", "goes by Nell"."""
_WORD: Final = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
"""A word, with what follows its apostrophe ("Jordan's" is one word, not "Jordan" and a stray "s"
 that the question's meaning would be asked with)."""

RELATION_WORDS: Final = {
    "brother": "brother sibling", "sister": "sister sibling", "sibling": "sibling brother sister",
    "wife": "wife spouse married marry widower", "husband": "husband spouse married marry widow",
    "spouse": "spouse wife husband married marry widow widower",
    "partner": "partner spouse married girlfriend boyfriend dating relationship engaged",
    "girlfriend": "girlfriend partner dating relationship engaged",
    "boyfriend": "boyfriend partner dating relationship engaged",
    "fiance": "fiance fiancee engaged", "fiancee": "fiance fiancee engaged",
    "mother": "mother parent", "mom": "mother parent", "mum": "mother parent", "father": "father parent",
    "dad": "father parent", "parent": "parent mother father", "son": "son child", "daughter": "daughter child",
    "child": "child son daughter", "kid": "child son daughter",
    "boss": "boss manager manage supervisor lead report", "manager": "manager manage boss supervisor lead report",
    "supervisor": "supervisor manager manage boss report", "colleague": "colleague coworker teammate",
    "coworker": "coworker colleague teammate", "employer": "work employ employer",
    "company": "work employ employer company", "job": "work employ job", "work": "work employ",
    "team": "team member", "pet": "pet own", "dog": "pet own", "cat": "pet own",
    "home": "home live resident", "house": "house home live", "vet": "vet treat", "doctor": "doctor patient treat",
    "dentist": "dentist patient", "friend": "friend", "neighbour": "neighbour neighbor",
    "neighbor": "neighbour neighbor", "exspouse": "divorced divorce ex former separated",
    "family": "mother father parent son daughter child brother sister sibling wife husband spouse married cousin",
    "relative": "mother father parent son daughter child brother sister sibling wife husband spouse cousin",
}
"""The words of relation types a question's word names ("brother": a relation of type brother_of or
sibling_of), beside the word itself."""

COMPOSED: Final = {
    "grandmother": ("parent", "mother"), "grandma": ("parent", "mother"), "granny": ("parent", "mother"),
    "grandfather": ("parent", "father"), "grandpa": ("parent", "father"), "grandparent": ("parent", "parent"),
    "grandson": ("child", "son"), "granddaughter": ("child", "daughter"), "grandchild": ("child", "child"),
    "grandkid": ("child", "child"), "nephew": ("sibling", "son"), "niece": ("sibling", "daughter"),
    "aunt": ("parent", "sister"), "uncle": ("parent", "brother"),
    "motherinlaw": ("spouse", "mother"), "fatherinlaw": ("spouse", "father"), "parentinlaw": ("spouse", "parent"),
    "exmotherinlaw": ("exspouse", "mother"), "exfatherinlaw": ("exspouse", "father"),
    "exparentinlaw": ("exspouse", "parent"),
    "sisterinlaw": ("spouse", "sister"), "brotherinlaw": ("spouse", "brother"),
    "soninlaw": ("child", "husband"), "daughterinlaw": ("child", "wife"),
    "stepson": ("spouse", "son"), "stepdaughter": ("spouse", "daughter"), "stepchild": ("spouse", "child"),
    "stepkid": ("spouse", "child"), "stepmother": ("father", "wife"), "stepfather": ("mother", "husband"),
}
"""Kin two relations away, which a memory keeps as two ("my grandmother": the mother of a parent;
"my sister-in-law": my spouse's sister, the reading taken of the two; "my stepson": my spouse's son)."""

INVERSE: Final = {
    "mother": "child son daughter", "father": "child son daughter", "parent": "child son daughter",
    "son": "parent mother father", "daughter": "parent mother father", "child": "parent mother father",
    "brother": "sibling brother sister", "sister": "sibling brother sister", "sibling": "sibling brother sister",
    "wife": "spouse wife husband partner married", "husband": "spouse wife husband partner married",
    "spouse": "spouse wife husband partner married", "partner": "spouse wife husband partner married",
    "married": "spouse wife husband partner married",
}
"""What a relation ``A mother_of B`` makes B of A (a child): a kin type read from its other end."""

_IDIOMS: Final = (
    (re.compile(r"\bfor\s+a\s+living\b", re.I), "for work"),
    (re.compile(r"\b(?:used|use)\s+to\b", re.I), " "),  # ("did I use to work for": once, no relation of use)
    (re.compile(r"\b(?:ex|former)[-\s]+(mother|father|parent)s?[-\s]+in[-\s]+law\b", re.I), r"ex\1inlaw"),
    (re.compile(r"\b(mother|father|parent|sister|brother|son|daughter)s?[-\s]+in[-\s]+law\b", re.I), r"\1inlaw"),
    (re.compile(r"\bstep[-\s]+(son|daughter|child|kid|mother|father)", re.I), r"step\1"),
    (re.compile(r"\b(?:ex|former)[-\s]+in[-\s]+laws\b", re.I), "exparentinlaw"),
    (re.compile(r"\bin[-\s]+laws\b", re.I), "parentinlaw"),
    (re.compile(r"\b(?:ex|former)[-\s]+(?:wife|husband|spouse|partner|girlfriend|boyfriend)\b|\bex\b", re.I), "exspouse"),
)
"""Ways of asking that name a relation in other words ("What does Leila do for a living?": her
work; "my mother-in-law": my spouse's mother; "my ex", "my former wife": whom I divorced)."""
_POSSESSING: Final = frozenset({"my", "our", "your", "his", "her", "their"})

Opened = Callable[[Sequence[str]], Mapping[str, Any]]
"""The entities of some names (those that exist) and the relations touching them: open_nodes."""


@cache
def _kinds() -> dict[str, frozenset[str]]:
    """Stemmed: a question's term -> the relation type terms it names."""
    kinds: dict[str, frozenset[str]] = {}
    for word, named in RELATION_WORDS.items():
        for term in ranking.terms(word):
            kinds[term] = kinds.get(term, frozenset()) | frozenset(ranking.terms(named))
    return kinds


@cache
def _composed() -> dict[str, tuple[str, str]]:
    """Stemmed: a question's term -> the two words of the relations it names, in turn."""
    return {term: (ranking.terms(first)[0], ranking.terms(second)[0])
            for word, (first, second) in COMPOSED.items() for term in ranking.terms(word)}


@cache
def _inverse() -> dict[str, frozenset[str]]:
    """Stemmed: a kin type's term -> the terms of what it makes the relation's other end."""
    return {term: frozenset(ranking.terms(named)) for word, named in INVERSE.items() for term in ranking.terms(word)}


@dataclass(frozen=True)
class Scope:
    named: tuple[str, ...]
    """The entities the question names (or the user's)."""
    names: frozenset[str]
    """Every entity of the scope."""
    targets: tuple[str, ...]
    """The entities reached through the relations the question names, the last hop's first."""
    rest: str
    """The question without the names' terms and the words of the relations followed: what ranks
    the scope's facts by words (all but the names', when nothing else is left)."""
    asked: str
    """The question without the names' terms: what ranks them by meaning."""
    views: dict[str, Any] = field(default_factory=dict)
    """The scope's entity objects, by name."""
    relations: list[Any] = field(default_factory=list)
    """The relations touching the named entities and the targets."""
    hops: int = 0
    """How many relations the question followed to reach the targets."""
    last: tuple[str, ...] = ()
    """The targets the last relation followed reached: whom the question asks about."""
    tellers: tuple[str, ...] = ()
    """Those the last relation was followed from: their facts naming the last targets tell of that
    relation (guarantee 5)."""
    news: bool = False
    """Whether the question asks only what is new with whom it names (guarantee 6)."""
    naming_last: tuple[str, ...] = ()
    """The terms of the word that named the last relation followed (guarantee 5)."""
    asks: bool = True
    """Whether the words left ask something of whom the question is about (not only filler, nor,
    past a relation, their name): else it asks who they are, and their facts answer (guarantee 7)."""
    user_called: tuple[str, ...] = ()
    """When the question asks how the user knows whom it names (guarantee 8): the terms of the
    names the user goes by, as the user's facts give them; their facts calling the user so tell it."""
    owned: tuple[str, ...] = ()
    """When the question asks of a thing of a named entity's, by its possessive, that no relation
    of theirs names ("What is Ingrid's dog called?"): the terms of that possessive. A neighbour's
    fact says nothing of the thing unless it names them, or calls them so (guarantee 9)."""


LIGHT_VERBS: Final = "take have get make do give put keep go come"
"""Verbs that say little of their own, which name a relation only when no other word of the
question does ("What do I take for my blood pressure?": the medication taken)."""


@cache
def _light_verbs() -> frozenset[str]:
    return frozenset(ranking.terms(LIGHT_VERBS) + [ranking.stem(word) for word in LIGHT_VERBS.split()])


def _name_terms(name: str) -> tuple[str, ...]:
    return ranking.fact_terms(name)




def called_in(text: str) -> set[str]:
    """The terms of the words written with a capital: names, as people write them."""
    return {term for word in _WORD.findall(text) if word[:1].isupper() for term in ranking.terms(word)}


def named_in(query: str, entities: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of the matched entities the query names (guarantee 1), in their order."""
    wanted = set(ranking.query_terms(query, question_words=False))
    if not wanted:
        return []
    capitalised = called_in(query)
    spelled, spelled_capitalised = _spelled(query)
    # (one who writes the question's first word with a capital writes names so: "Did I take my pills?"
    # does not name the dog Take)
    cased = query.lstrip()[:1].isupper()
    among = [(entity["name"], _name_terms(entity["name"])) for entity in entities[:NAMED_AMONG]]
    # (a last name term is a given name where it comes last, "Lee_Jaewon", when no other name ends so)
    endings = Counter(terms[-1] for _, terms in among if len(terms) > 1)
    named = []
    for name, terms in among:
        if not terms:
            continue
        if not name.isascii():
            # (a name written with accents is matched as it is written: "Tåke" is not "take")
            held, held_capitalised, terms = spelled, spelled_capitalised, _name_words(name)
        else:
            held, held_capitalised = wanted, capitalised
        if len(terms) == 1 and cased and terms[0] not in held_capitalised:
            continue
        if held.issuperset(terms) or (len(terms) > 1 and (
                terms[0] in held_capitalised or (terms[-1] in held_capitalised and endings[terms[-1]] == 1))):
            named.append(name)
    return named


def _name_words(name: str) -> tuple[str, ...]:
    """A name's terms with their accents kept ("tåke", not "take")."""
    return tuple(_spelled_terms(name))


def _spelled_terms(text: str) -> list[str]:
    """The terms of a text with their accents kept, in order."""
    return [ranking.stem(word) for word in _SPELLED.findall(text.lower()) if word not in ranking.STOP_WORDS]


def _spelled(text: str) -> tuple[set[str], set[str]]:
    """The terms of the text's words with their accents kept: all, and those of words written with a capital."""
    words = _SPELLED.findall(text)
    return set(_spelled_terms(text)), set(_spelled_terms(" ".join(word for word in words if word[:1].isupper())))


_SPELLED: Final = re.compile(r"[^\W_]+")


def speaks_of_user(query: str) -> bool:
    return _FIRST_PERSON.search(query) is not None


KIN_WORDS: Final = frozenset("""mother mom mum mummy mommy father dad daddy parent parents brother sister sibling son
daughter child children kid kids wife husband grandmother grandma granny grandfather grandpa grandparent grandson
granddaughter grandchild grandchildren grandkid grandkids nephew niece aunt uncle stepson stepdaughter""".split())
"""Words for kin, which without a possessor are the user's in a memory of one user (guarantee 2)."""


def _speaks_of_kin(query: str) -> bool:
    return any(word.lower() in KIN_WORDS for word in _WORD.findall(query))


_OF: Final = re.compile(r"(?:^|[\W_])of$", re.I)


BY_TYPE: Final = 2
"""How a term names a relation: by the relation's own type (or a word :data:`RELATION_WORDS` gives it) ..."""
BY_END: Final = 1
"""... or only by the type of the entity at its other end ("place", "dog")."""


def _names_relation(term: str, relation_type: str, other_type: str, other_is_from: bool = True,
                    other_name: str = "") -> int:
    """How the question's term names this relation (0: not at all): a term of its type, a type's
    term the word names (RELATION_WORDS), else a term of the type or the name of the entity at its
    other end ("my boss's fleet": ``Fleet_737``).
    A kin type read from its other end names what it makes that end (``Helen mother_of Sam``, from
    Helen: a child)."""
    held = frozenset(ranking.fact_terms(relation_type))
    if "law" in held:  # ("Dad" is not a father-in-law: an in-law is named only as one, two relations away)
        held = frozenset()
    if not other_is_from and _OF.search(relation_type.strip()):
        kin = [_inverse()[term_held] for term_held in held if term_held in _inverse()]
        if kin:
            held = frozenset().union(*kin)
    if term in held or not _kinds().get(term, frozenset()).isdisjoint(held):
        return BY_TYPE
    # (a name written with accents is no word of a question's: "take" is no relation to the dog Tåke)
    name_terms = _name_terms(other_name) if other_name.isascii() else _name_words(other_name)
    return BY_END if term in ranking.fact_terms(other_type) or term in name_terms else 0


def _other(relation: Mapping[str, Any], name: str) -> str:
    return relation["to"] if relation["from"] == name else relation["from"]


_NOW_WORDS: Final = re.compile(r"\b(?:now|currently|current|latest|still|these\s+days|nowadays|at\s+the\s+moment|"
                               r"at\s+present|any\s*more|most\s+recent|recently|newest)\b", re.I)


_NEWS_WORDS: Final = re.compile(r"\b(?:happen(?:ed|ing|s)?|new|news|going\s+on|doing|been\s+up\s+to|up\s+to|"
                                r"lately|update[sd]?|how\s+is|how's|(?:go|goes|gone|went)\s+(?:off|on)\s+to|"
                                r"end(?:ed|s)?\s+up)\b", re.I)


def asks_for_news(rest: str) -> bool:
    """Whether what is left of a question once its names are taken asks only what is new with them
    ("What happened to Jaewon recently?", "How is my sister doing these days?")."""
    if _NEWS_WORDS.search(rest) is None:
        return False  # ("Where do I work now?": the relation followed is what it asks)
    return not ranking.query_terms(_NEWS_WORDS.sub(" ", _NOW_WORDS.sub(" ", rest)))


_TELLING: Final = "tell told say said mention mentioned talk talked discuss discussed"
"""Words asking what was told: "What did I tell you last week?" asks for all that was recorded."""
_FILLER: Final = (_TELLING + " happen happened "
                  "remember note noted record recorded learn learned add added anything something stuff thing things "
                  "me us we you i")


def asks_what_was_told(query: str) -> bool:
    return not {word.lower() for word in _WORD.findall(query)}.isdisjoint(_TELLING.split())


def content_terms(words: str) -> list[str]:
    filler = set(ranking.query_terms(_FILLER))
    return [term for term in ranking.query_terms(words) if term not in filler]


@cache
def _naming() -> frozenset[str]:
    return frozenset(ranking.query_terms("name names named called call"))


CHANGED_BY: Final = {"live": "move", "lives": "move", "living": "move", "based": "move"}
"""The word of a state and the verb of its change, as memories are written: one asks "Where do I
live now?" of "Moved into the house in Alboraia" (guarantee 5; answer guarantee 9)."""


def with_changes(words: str) -> str:
    """The words, and for a word of a state the verb that changes it: a question about the present
    finds the facts of the changes, whose newest is the answer."""
    added = [CHANGED_BY[word.lower()] for word in _WORD.findall(words) if word.lower() in CHANGED_BY]
    return " ".join([words, *dict.fromkeys(added)]) if added else words


@cache
def changes() -> dict[str, frozenset[str]]:
    """Stemmed: the term of a change's verb -> the terms of the states it changes."""
    changed: dict[str, frozenset[str]] = {}
    for state, verb in CHANGED_BY.items():
        for term in ranking.terms(verb):
            changed[term] = changed.get(term, frozenset()) | frozenset(ranking.terms(state))
    return changed


def is_about_now(query: str) -> bool:
    """Whether the question asks about the present ("Where do I live now?")."""
    return _NOW_WORDS.search(query) is not None


def find(query: str, entities: Sequence[Mapping[str, Any]], opened: Opened) -> Scope | None:
    """The scope of the question (guarantees 1 to 4); None when it names no entity and the user's
    entity is not spoken of (or does not exist)."""
    said = query
    for idiom, meaning in _IDIOMS:
        query = idiom.sub(meaning, query)
    named = named_in(query, entities)
    # ("Which grandchild is the youngest?": kin without a possessor are the user's, when the user
    # has such kin; a question that follows no relation from there is not scoped)
    implied = not named and not speaks_of_user(query) and _speaks_of_kin(query)
    if not named and (implied or speaks_of_user(query)):
        named = [USER]
    elif named and USER not in named and _WITH_USER.search(query):
        # ("Which city did Liv and I visit?": the two of them)
        named.append(USER)
    if not named:
        return None
    first = opened(named)
    views = {entity["name"]: entity for entity in first["entities"]}
    named = [name for name in named if name in views]
    if not named:
        return None
    # (a name another named entity's facts mention links the two: its words rank those facts)
    name_terms = {term for name in named if not any(mentions(views[other], [name]) for other in named if other != name)
                  for term in _name_terms(name)}
    every_word = _WORD.findall(query)
    kept = {place for place, word in enumerate(every_word) if not name_terms.issuperset(ranking.terms(word))
            or not ranking.terms(word)}
    rest_words = [word for place, word in enumerate(every_word) if place in kept]
    # (the meaning is asked in the question's own words: an idiom rewritten is for the relations)
    said_words = [word for word in _WORD.findall(said)
                  if not name_terms.issuperset(ranking.terms(word)) or not ranking.terms(word)]
    # The relations are named after the possessor ("What job does my husband's sister have?": the
    # husband's sister, then her job): words after the last "my" or named possessive come first
    # ("my friend Jisung's friend": Jisung is the friend; the hop is his friend).
    anchor = max((place for place, word in enumerate(every_word) if word.lower() in _POSSESSING
                  or (place not in kept and re.search(r"['’]s$", word))), default=-1)
    hop_words = [word for place, word in enumerate(every_word) if place in kept and place > anchor] + [
        word for place, word in enumerate(every_word) if place in kept and place <= anchor]
    relations = list(first["relations"])
    neighbours = {_other(relation, name) for relation in relations for name in named
                  if name in (relation["from"], relation["to"])}
    # What the neighbours are (their types) is needed to follow a relation by the type at its end.
    around = opened(sorted(neighbours - views.keys()))
    views.update((entity["name"], entity) for entity in around["entities"])
    # "my brother's wife": the first word naming a relation of the named entity is the first hop,
    # a later one naming a relation of where that led, the second.
    # A kin word two relations away ("grandmother") is two steps of one word, the second taken
    # only where the first led.
    steps = [(word, step, part) for word in hop_words for term in ranking.query_terms(word, question_words=False)
             for part, step in enumerate(_composed().get(term, (term,)))]
    # ("my friend Jisung's friend" is not me: one who asks in the first person is no target)
    asker = {USER} if USER not in named and speaks_of_user(query) else set()
    used: set[str] = set()
    by_name: set[str] = set()
    targets: list[str] = []
    hop: list[str] = list(named)
    reached: list[str] = []
    hops = 0

    def naming(term: str, at_least: int = BY_END) -> list[str]:
        """The entities one relation from the hop that the term names the relation to (guarantee 3)."""
        return [other for relation in relations for name in hop if name in (relation["from"], relation["to"])
                and (other := _other(relation, name)) in views and other not in named and other not in reached
                and other not in asker
                and _names_relation(term, relation["relationType"], views[other]["entityType"],
                                    other == relation["from"], other) >= at_least]

    tellers: list[str] = []
    naming_last: tuple[str, ...] = ()
    two_steps = {word for word, _, part in steps if part}
    before: tuple[int, list[str], list[str], list[str], list[str], tuple[str, ...]] = (
        hops, [], tellers, hop, targets, naming_last)
    for number, (word, term, part) in enumerate(steps):
        if hops == MAX_HOPS or (word in used and part == 0):
            break
        if part and word not in used:
            continue
        found = naming(term)
        if found and not part and not naming(term, BY_TYPE) and any(
                naming(later_term, BY_TYPE) for later_word, later_term, later_part in steps[number + 1:]
                if not later_part and later_word != word and later_term not in _light_verbs()):
            # A word naming only what is at the other end ("the place I volunteer at") yields to a
            # later one naming the relation itself: that is the relation asked about.
            continue
        if found and not part and term in _light_verbs() and (hops or any(
                naming(later_term) for later_word, later_term, later_part in steps[number + 1:]
                if not later_part and later_word != word and later_term not in _light_verbs())):
            # A light verb ("take", "keep") names a relation only when no other word does: "Which vet
            # do we take our dog to?" asks of the dog's vet, not of what is taken (trips, pills), and
            # "What illness took my late wife?" of her.
            continue
        if not found:
            if part:
                # The kin word's second step found nothing: its first one is no answer either (the
                # children of "my son-in-law" are not him), and no other word is a hop from here.
                hops, reached, tellers, hop, targets, naming_last = before
                break
            continue
        if not part and word in two_steps:
            before = (hops, list(reached), tellers, hop, list(targets), naming_last)
        used.add(word)
        if not naming(term, BY_TYPE) and not any(term in ranking.fact_terms(views[other]["entityType"]) for other in found):
            # (a relation named only by a name at its end, "a long weekend" and Morella_Weekend: the
            # word still ranks the facts, which may tell of another weekend)
            by_name.add(word)
        # ("Where does my mum live?": her "Moved in with Carmen in Alboraia" tells it too)
        naming_last = tuple(ranking.query_terms(with_changes(word), question_words=False))
        if any(set(naming_last) & set(_name_terms(other)) for other in found):
            # ("Kjetil's role at the rescue station": the relation named by the name at its end; the
            # whole of that name the question writes names it)
            naming_last = tuple(dict.fromkeys(
                term for every in every_word for term in ranking.query_terms(every, question_words=False)
                if any(term in _name_terms(other) for other in found)))
        hops += 1
        reached += found
        tellers, hop = hop, list(dict.fromkeys(found))
        targets = hop + [target for target in targets if target not in hop]
        if hops < MAX_HOPS:
            second = opened(hop)
            further = [relation for relation in second["relations"] if relation not in relations]
            ends = {_other(relation, name) for relation in further for name in hop
                    if name in (relation["from"], relation["to"])}
            more = opened(sorted(ends - views.keys()))
            views.update((entity["name"], entity) for entity in more["entities"])
            relations += further
    rest = " ".join(word for word in rest_words if word not in used - by_name)
    asked = " ".join(said_words)
    news = asks_for_news(rest)
    if news:
        rest = ""  # (nothing to rank by: whom it names, newest first)
    elif not ranking.query_terms(rest):
        rest = asked  # "What is Jordan's job?": the word that led to the employer still asks about Jordan
    if implied and not hops:
        return None
    last = tuple(hop) if hops else ()
    # ("What are my kids' names?": past a relation, a name asked is who they are)
    asks = any(term not in _naming() for term in content_terms(rest)) if hops else bool(content_terms(rest))
    called = _user_called(query, named, opened) if not hops else ()
    # ("What is Ingrid's dog called?": a thing of hers that no relation of hers names)
    owned = () if hops else tuple(dict.fromkeys(
        term for place, word in enumerate(every_word) if place not in kept and re.search(r"['’]s$", word)
        for term in ranking.terms(word)))
    return Scope(tuple(named), frozenset(views), tuple(targets), rest, asked, views, relations, hops,
                 last, tuple(tellers) if hops else (), news, naming_last, asks, called, owned)


def _user_called(query: str, named: Sequence[str], opened: Opened) -> tuple[str, ...]:
    """The terms of the names the user goes by, when the question asks how the user knows whom it
    names (guarantee 8); else nothing."""
    if USER in named or not _ACQUAINTANCE.search(query):
        return ()
    user = next((entity for entity in opened([USER])["entities"] if entity["name"] == USER), None)
    if user is None:
        return ()
    return tuple(dict.fromkeys(term for observation in user["observations"] for found in _CALLED.finditer(observation)
                               for word in found.groups() if word for term in ranking.terms(word)))


def mentions(entity: Mapping[str, Any], named: Sequence[str]) -> bool:
    """Whether one of the entity's observations names a named entity (:func:`names`)."""
    return any(names(observation, named) for observation in entity["observations"])


def names(observation: str, named: Sequence[str]) -> bool:
    """Whether the observation holds every term of a named entity's name, or its name's terms
    run together as terms that follow one another ("VW ID.4" for ``VW_ID4``)."""
    held = ranking.fact_terms(observation)
    spelled: Sequence[str] | None = None
    for name in named:
        terms: Sequence[str] = _name_terms(name)
        among: Sequence[str] = held
        if not name.isascii():  # (as written: "Took Liv to the fjord" does not name the dog Tåke)
            if spelled is None:
                spelled = _spelled_terms(observation)
            terms, among = _name_words(name), spelled
        if terms and (set(terms).issubset(among) or _run_together(among, "".join(terms))):
            return True
    return False


def _run_together(held: Sequence[str], whole: str) -> bool:
    """Whether some terms that follow one another in `held` make `whole` when joined."""
    for start, term in enumerate(held):
        if not whole.startswith(term):
            continue
        joined = term
        for following in held[start + 1:]:
            if len(joined) >= len(whole):
                break
            joined += following
        if joined == whole:
            return True
    return False


def tells(observation: str, targets: Sequence[str], naming: Sequence[str]) -> bool:
    """Whether the observation tells of the relation to a target (guarantee 5): it names one
    (:func:`names`), or it holds the word that named the relation and calls one by the first or
    the last term of its name, written as a name ("Divorce from Hyejin was finalised", for "When
    did I get divorced?" and ``Yoon_Hyejin``)."""
    if names(observation, targets):
        return True
    held = ranking.fact_terms(observation)
    if not naming or not set(naming) & set(held):
        return False
    if len(naming) > 1 and set(naming) <= set(held):
        return True
    called = called_in(observation)
    return any(len(terms := _name_terms(name)) > 1 and (terms[0] in called or terms[-1] in called) for name in targets)


__all__ = ["NAMED_AMONG", "RELATION_WORDS", "USER", "Opened", "Scope", "called_in", "find", "mentions", "named_in", "names",
           "speaks_of_user"]
