"""What someone does, for a living and for pleasure, as a memory writes it: the facts that answer
"What does Tom do for a living?" or "What does Callum do in his spare time?" although they share no
word with it ("Fire captain with Halifax Regional Fire", "Fishes lobster out of Shediac on his
boat", "Plays the bagpipes in the Aberdeen City Pipe Band").

Pure: the question, the scope's entities and what meaning gives go in; the facts to put first come out.

Guarantees (answer guarantee 13):

1. A question asks someone's occupation (:data:`OCCUPATION`, :func:`asks_occupation`) when it asks
   what they do for a living, for work or for money, their line of work, what their job,
   profession or occupation is (not "When did Evan lose his job?"), or, past a relation, what they
   do ("What does my best friend's wife do?": present, and nothing after it). It asks their
   pastime (:data:`PASTIME`) when it asks what they do in their spare or free time, for fun, to
   relax or at weekends, or their hobby.
2. Whom it asks about is the scope's last targets, or, when the last relation was named by a word
   of work (their employer), those it was followed from, or else the named entities; the user
   (:data:`.scope.USER`) only when the question asks of "my job", "my title", "my position" or
   what "I do for a living": "What does my brother do for work?" of a memory holding no brother
   asks nothing of the user's own job. Of the user's hundreds of facts only the surest forms count
   (``strict``: "Works as", a change of job, a business of one's own).
3. Their facts written as what is asked (:func:`written_as_work`, :func:`written_as_pastime`),
   scored by that plus their likeness to the pursuit's prototype sentence, at least
   :data:`AT_LEAST`, come before the rest of the answer, the best first; for a question about now
   ("What does my sister do for work these days?") they are versions of one kind of fact among
   themselves, the newest first (answer guarantee 9: "Was promoted to principal" before "Teaches
   third grade").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from ..index import ranking
from . import scope as scopes

_ASKED: Final = re.compile(
    r"\b(?:for\s+(?:a\s+)?living|for\s+work|for\s+money|line\s+of\s+work|work\s+as|works\s+as)\b"
    r"|^\s*(?:what|which)\b(?!\s+(?:made|happened|caused|led|kind|sort|type))[^?]*\b(?:job|profession|occupation)(?:\s+title)?(?:\s+(?:now|these\s+days|today|currently))?"
    r"\s*\??\s*$|^\s*what\s+(?:job|work|profession)\s+(?:does|do|is)\b", re.I)
"""... the job asked as the thing ("What is Jordan's job?", "What job does my sister have?"), not a
job of which something else is asked ("When did Evan lose his job?")."""
_ONLY_DOES: Final = re.compile(r"^\s*what\s+(?:does|do)\b.*\bdo\s*\??\s*$", re.I)
"""... or, past a relation, nothing but what they do ("What does my son's partner do?")."""

PROTOTYPE: Final = ("Works as a professional, runs her own business, teaches at a school, doctor at the hospital, "
                    "engineer at a company")
"""A fact stating an occupation, in general: meaning's side of :func:`pursued`."""
PASTIME_PROTOTYPE: Final = "Enjoys playing music, sport and games in his free time; his hobby"
"""... a pastime."""
AT_LEAST: Final = 0.6
"""How surely a fact states what is asked to come first (one written so is 0.7 to 1 of its own)."""

_WORKS: Final = re.compile(r"^(?:works?|worked|working|employed|self-employed|is\s+an?|was\s+an?)\b"
                           r".*\b(?:as|at|for|with|in|by)\b|^used\s+to\s+be\s+an?\b|\b(?:job|career|profession|occupation)\b",
                           re.I)
_CHANGED: Final = re.compile(r"^(?:was\s+|got\s+)?(?:promoted|made|appointed|named|hired)\s+(?:to|as|a|an|the)\b|"
                             r"^got\s+a\s+promotion\b|^started\s+(?:as|at)\b|^(?:took|got|landed|accepted)\s+(?:a|the)\s+"
                             r"(?:new\s+)?(?:job|position|role|post)\b|^became\s+(?:a|an|the)\b", re.I)
"""... a change of job: "Promoted to design lead", "Was made a line training captain", "Started as vice-principal"."""
_BUSINESS: Final = re.compile(
    r"^(?:runs|ran|owns|owned|manages|managed|opened|started|co-founded|founded)\s+(?:a|an|the|his|her|their|own)"
    r"(?:\s+(?!for\b|of\b|with\b|at\b|in\b|on\b|about\b|to\b)[\w'’&-]+){0,3}?\s+(?:business|company|firm|shop|store|salon|caf[eé]|restaurant|bar|pub|bakery|"
    r"pharmacy|clinic|practice|studio|agency|farm|garage|hotel|guesthouse|b&b|breakfast|kitchen|workshop|gym|"
    r"nursery|school|surgery|office|stall|brewery|winery|dealership|consultancy|startup|start-up)s?\b", re.I)
"""... a business of one's own ("Runs a hair salon in Catarroja"), not a club or a page one runs."""
_TRADE: Final = re.compile(r"^(?:teaches|taught|fishes|farms|nurses|coaches|repairs|designs|builds|makes|drives)\b"
                           r".*\b(?:at|for|in|on|out\s+of|from)\b", re.I)
_NOUN_LED: Final = re.compile(r"^([A-Z][\w'’-]*)(?:\s[\w'’-]+){0,3}?\s(?:with|at|for|who|working|in|of|on)\s")
"""A fact that begins with what someone is ("Pharmacist who owns...", "Real estate agent with...")."""
_NOT_A_TITLE: Final = re.compile(
    r"^(?:\w+(?:s|ed)|got|went|took|had|has|is|was|made|came|gave|left|lost|met|saw|sold|bought|grew|became|fell|"
    r"felt|said|told|won|can't|cannot|never|still|always|often|her|his|their|the|a|an|one|two|three|born|from|"
    r"married|daughter|son|wife|husband|sister|brother|mother|father|friend|neighbour|neighbor|partner)$", re.I)
"""First words that begin something else than a title: a verb told ("Lives in", "Moved to"), a
possessive or an article, a relation ("Daughter of")."""


_USERS_OWN: Final = re.compile(r"\bmy\s+(?:current\s+|latest\s+|new\s+|present\s+)?(?:job|title|position|role|"
                               r"line\s+of\s+work|profession|occupation)\b|\b(?:do|did)\s+I\s+do\s+for\s+(?:a\s+)?"
                               r"(?:living|work)\b", re.I)
"""The user's own job asked ("What's my latest position at work?", "What do I do for a living?")."""


def asks_occupation(query: str, scope: scopes.Scope) -> bool:
    """Whether the question asks someone's occupation (guarantee 1)."""
    return (_ASKED.search(query) is not None or (bool(scope.hops) and _ONLY_DOES.search(query) is not None)
            or _USERS_OWN.search(query) is not None)


_PASTIME_ASKED: Final = re.compile(r"\b(?:spare|free)\s+time\b|\bfor\s+fun\b|\bhobby\b|\bhobbies\b|\bpastimes?\b|"
                                   r"\bto\s+(?:relax|unwind)\b|\b(?:at|on)\s+(?:the\s+)?weekends\b", re.I)
_PASTIME: Final = re.compile(
    r"^(?:plays|goes\s+(?:\w+\s+)?\w+ing|builds|collects|paints|knits|sings|loves|enjoys|swims|hikes|climbs|"
    r"runs|rides|skis|surfs|bakes|grows|fishes|cycles|reads|watches|dances|draws|restores|brews|makes|"
    r"is\s+(?:a\s+)?(?:keen|big|avid|huge)\b)", re.I)
"""How a pastime is written: something done again and again, told in the present ("Plays
competitive darts", "Goes pike fishing", "Builds model ships in bottles", "Is a keen fly fisherman")."""


def asks_pastime(query: str, scope: scopes.Scope) -> bool:
    """Whether the question asks someone's pastime (guarantee 1)."""
    return _PASTIME_ASKED.search(query) is not None


def written_as_pastime(text: str, *, strict: bool = False) -> float:
    """How surely the fact is written as a pastime, 0 or 1 (:data:`_PASTIME`)."""
    return 1.0 if _PASTIME.search(text) else 0.0


def written_as_work(text: str, *, strict: bool = False) -> float:
    """How surely the fact is written as an occupation, 0 to 1: "Works as a midwife at...",
    "Runs a bed and breakfast", "Teaches maths at a secondary school", "Firefighter with..."."""
    if _WORKS.search(text) or _CHANGED.search(text):
        return 1.0
    if _BUSINESS.search(text):
        return 0.9
    if strict:  # (the user's hundreds of facts: "First physio session with Annie" is no title)
        return 0.0
    titled = _NOUN_LED.match(text)
    if titled is not None and _NOT_A_TITLE.match(first := titled.group(1)) is None and not ranking.is_past_form(first):
        return 0.8
    if _TRADE.search(text):
        return 0.7
    return 0.0


_WORK_WORDS: Final = "work works employ employer employs job"


def subjects(scope: scopes.Scope, query: str = "") -> frozenset[str]:
    """Whom the question asks the occupation of (guarantee 2)."""
    if scope.hops and not set(ranking.terms(_WORK_WORDS)).isdisjoint(scope.naming_last):
        asked = scope.tellers
    else:
        asked = scope.last or scope.named
    own = _USERS_OWN.search(query) is not None
    return frozenset(asked) - (frozenset() if own else {scopes.USER})


def first(fused: list[tuple[int, int, float]], found: Mapping[tuple[int, int], float], *, current: bool,
          joined: set[tuple[int, int]], told: dict[tuple[int, int], float]) -> list[tuple[int, int, float]]:
    """The answer's facts with those stating what is asked (`found`) first, the surest first
    (guarantee 3); they go to `told` as versions among themselves when the question asks about
    now (`current`), else to `joined`, keeping that order."""
    if not found:
        return fused
    top = max((score for _, _, score in fused), default=1.0) or 1.0
    best = max(found.values())
    placed = [(position, index, top * ABOVE * (1.0 + 0.01 * score / best)) for (position, index), score in found.items()]
    if current:
        told.update(found)
    else:
        joined.update(found)
    rest = [fact for fact in fused if (fact[0], fact[1]) not in found]
    return ranking.best_first(placed + rest)


ABOVE: Final = 1.02
"""Where such a fact stands against the answer's best: above it (and above a fact that
tells of the relation followed, :data:`.scoped.TOLD_ABOVE`)."""


def likeness(nearest: Callable[[str, int], Sequence[tuple[str, int, float]] | None] | None, k: int,
             text: str) -> dict[tuple[str, int], float]:
    """How like `text` the memory's `k` facts most like it are, by meaning (`nearest`, as
    answer.Nearest): (entity name, index) -> similarity; none without a model."""
    if nearest is None:
        return {}
    try:
        found = nearest(text, k)
    except Exception:  # (a model that fails answers nothing: the words still do)
        return {}
    return {(name, index): similarity for name, index, similarity in found or ()}


class Pursuit(NamedTuple):
    """A kind of thing someone does that a question asks (guarantee 1)."""

    asked: Callable[[str, scopes.Scope], bool]
    written: Callable[..., float]
    """How surely a fact is written as it (0 to 1); `strict` for the user's own facts."""
    prototype: str


OCCUPATION: Final = Pursuit(asks_occupation, written_as_work, PROTOTYPE)
PASTIME: Final = Pursuit(asks_pastime, written_as_pastime, PASTIME_PROTOTYPE)


def asked(query: str, scope: scopes.Scope) -> Pursuit | None:
    """What the question asks someone does (the occupation before the pastime), if it asks it."""
    return next((pursuit for pursuit in (OCCUPATION, PASTIME) if pursuit.asked(query, scope)), None)


def pursued(entities: Sequence[Any], scope: scopes.Scope, pursuit: Pursuit,
            likeness: Callable[[str], Mapping[tuple[str, int], float]], query: str = "") -> dict[tuple[int, int], float]:
    """The facts of whom the question asks about that state what it asks (guarantee 3), (position,
    index) -> how surely: as it is written plus the likeness to the pursuit's prototype
    (`likeness`: fact (entity name, index) -> similarity, of a text)."""
    whose = subjects(scope, query)
    if not whose:
        return {}
    like = likeness(pursuit.prototype)
    found: dict[tuple[int, int], float] = {}
    for position, entity in enumerate(entities):
        if entity["name"] not in whose:
            continue
        for index, text in enumerate(entity["observations"]):
            score = (pursuit.written(text, strict=entity["name"] == scopes.USER)
                     + like.get((entity["name"], index), 0.0))
            if score >= AT_LEAST:
                found[position, index] = score
    return found


__all__ = ["ABOVE", "AT_LEAST", "OCCUPATION", "PASTIME", "PROTOTYPE", "Pursuit", "asked", "asks_occupation",
           "asks_pastime", "first", "likeness", "pursued", "subjects", "written_as_pastime", "written_as_work"]
