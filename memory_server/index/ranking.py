"""Words, word forms and a BM25-family ranking of entities, for queries no entity holds whole.

Text is cut into terms: Unicode word runs (accented letters are letters; accents are folded
away, so "cafe" finds "Café"), lower-cased, reduced to their stem by the Snowball English
stemmer ("adopted" and "adoption" are both "adopt"), the past forms of irregular verbs first read
as their base ("bought" is "buy", "took" is "take": a fact is written "Bought a kayak", a question
asks "What did I buy?"). Text of scripts written without spaces
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
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
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


TERMS: Final = "2"
"""How text becomes terms, by version (2: irregular verbs' past forms read as their base). The
terms are kept: the index cache records the digest of these rules (:func:`rules_digest`), and
PostgreSQL's schema the version its terms column holds; terms of another are made again."""

_IRREGULAR_GROUPS: Final = """
arise arose arisen|awake awoke awoken|be was were been|beat beaten|become became|begin began begun
|bend bent|bet|bid|bite bitten|bleed bled|blow blew blown|break broke broken|breed bred|bring brought
|build built|burn burnt|buy bought|catch caught|choose chose chosen|cling clung|come came|cost|creep crept|cut
|deal dealt|dig dug|do did done|draw drew drawn|dream dreamt|drink drank drunk|drive drove driven|eat ate eaten
|fall fell fallen|feed fed|feel felt|fight fought|find found|flee fled|fly flew flown|forbid forbade forbidden
|forget forgot forgotten|forgive forgave forgiven|freeze froze frozen|get got gotten|give gave given
|grow grew grown|hang hung|have had|hear heard|hide hid hidden|hit|hold held|hurt|keep kept
|kneel knelt|know knew known|lay laid|lead led|leap leapt|learn learnt|leave left|lend lent|let|lose lost
|make made|mean meant|meet met|pay paid|prove proven|put|quit|read|rid|ride rode ridden|ring rang rung|rise risen
|run ran|say said|see saw seen|seek sought|sell sold|send sent|set|shake shook shaken|shine shone|shoot
|show shown|shrink shrank shrunk|shut|sing sang sung|sink sank sunk|sit sat|sleep slept|slide slid|speak spoke spoken
|spend spent|spin spun|spit spat|split|spread|spring sprang sprung|stand stood|steal stole stolen|stick stuck
|sting stung|stink stank|strike struck|swear swore sworn|sweep swept|swim swam swum|swing swung|take took taken
|teach taught|tear tore torn|tell told|think thought|throw threw thrown|understand understood|wake woke woken
|wear wore worn|weave wove woven|weep wept|win won|withdraw withdrew withdrawn|write wrote written
"""
"""Irregular verbs, each base and its past forms. Not "go" and "went": going says nothing of where
or what (every trip, move and visit), and matched, it made "Where did I go on my honeymoon?" answer
with every trip of a memory that holds no honeymoon. Nor forms that are more often nouns (rose,
ground, wound, shot, bit, bound, bore)."""


@cache
def _irregular() -> dict[str, str]:
    """An irregular verb's past forms -> its base form."""
    forms: dict[str, str] = {}
    for group in _IRREGULAR_GROUPS.replace("\n", "").split("|"):
        base, *past = group.split()
        for form in past:
            forms.setdefault(form, base)
    return forms


def is_past_form(word: str) -> bool:
    """Whether the word is an irregular verb's past form ("brought", "took")."""
    return word.lower() in _irregular()


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
            stem = self._stemmer.stemWord(_irregular().get(word, word))
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


_PROBE: Final = "Adopted adoption running cafés Café ÉTÉ naïve_résumé 東京都に住む ひらがなカタカナ Straße x2 12,5"


@cache
def rules_digest() -> str:
    """A digest of the rules that make an entity's terms and counts (their version, TERMS; the
    field weights, the irregular verbs, the words dropped, the tokens, the scripts cut into pairs,
    the stemmer's version and what it makes of a probe): a ranking index kept from a version whose
    rules differ (an index cache) is not used."""
    import hashlib

    import Stemmer

    described = [TERMS, ",".join(map(str, FIELD_WEIGHTS)), " ".join(sorted(STOP_WORDS)), _TOKEN.pattern,
                 _NO_SPACE_SCRIPTS, _IRREGULAR_GROUPS, str(Stemmer.version()), " ".join(terms(_PROBE))]
    return hashlib.blake2b("\n".join(described).encode(), digest_size=16).hexdigest()


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

_EMPTY_COLUMN: Final = array("I")


def _column(ordinals: Sequence[int], counts: Sequence[int]) -> array[int]:
    """One term's postings as one array: its holders' ordinals, then their counts in the same
    order (unsigned 32-bit; 64-bit when a value does not fit)."""
    try:
        column = array("I", ordinals)
        column.extend(array("I", counts))
    except OverflowError:
        column = array("Q", ordinals)
        column.extend(array("Q", counts))
    return column


def _fits_32(values: Sequence[int]) -> bool:
    """Whether every value fits 32 bits unsigned: known from an array's type when it is narrower
    (a pass over millions of values otherwise)."""
    return getattr(values, "typecode", "Q") in ("B", "H", "I") or max(values, default=0) < 1 << 32


def _set(column: array[int], at: int, value: int) -> array[int]:
    """`column` with `value` at `at`, widened to 64 bits when the value does not fit."""
    try:
        column[at] = value
    except OverflowError:
        column = array("Q", column)
        column[at] = value
    return column


class TermIndex:
    """Weighted term counts by term and entity, and entity lengths. Never changed once made.

    Columnar, so that half a million facts' postings cost arrays of integers rather than a dict
    per term: each entity has an ordinal (:attr:`names` gives its name, :attr:`spans` its length),
    and each term one array, :meth:`column`, of its holders' ordinals followed by their counts.
    An entity gone leaves its ordinal unused (its name "" and its length 0) until more than half
    of them are unused, then the ordinals are made again. :attr:`postings` and :attr:`lengths` read
    the same by name."""

    __slots__ = ("names", "spans", "ordinals", "columns", "total", "weights")

    def __init__(self, names: list[str], spans: array[int], ordinals: dict[str, int],
                 columns: dict[str, array[int]], total: int, weights: FieldWeights = FIELD_WEIGHTS) -> None:
        self.names = names
        """Each ordinal's entity name ("" for an ordinal no entity has any more)."""
        self.spans = spans
        """Each ordinal's entity length in tokens."""
        self.ordinals = ordinals
        """Each entity's ordinal, by name."""
        self.columns = columns
        self.total = total
        self.weights = weights

    @property
    def entities(self) -> int:
        return len(self.ordinals)

    def column(self, term: str) -> tuple[Sequence[int], Sequence[int]] | None:
        """The ordinals of the entities holding `term` and their counts (None: none holds it)."""
        column = self.columns.get(term)
        if column is None:
            return None
        half = len(column) >> 1
        return column[:half], column[half:]

    @property
    def postings(self) -> Mapping[str, Mapping[str, int]]:
        """Each term's counts by entity name (made when read)."""
        return _NamedPostings(self)

    @property
    def lengths(self) -> Mapping[str, int]:
        """Each entity's length in tokens, by name."""
        return _NamedLengths(self)

    @classmethod
    def build(cls, texts: Iterable[tuple[str, str]], weights: FieldWeights = FIELD_WEIGHTS) -> TermIndex:
        # Postings by token first (the work per entity stays in C as far as it can), then
        # the tokens of one term are merged: far fewer distinct tokens than (token, entity) pairs.
        by_token: dict[str, array[int]] = {}  # ordinal, count, ordinal, count...
        names: list[str] = []
        spans = array("Q")
        total = 0
        wide = False
        for ordinal, (name, text) in enumerate(texts):
            counts, length = _token_counts(text, weights)
            names.append(name)
            spans.append(length)
            total += length
            for token, count in counts.items():
                pairs = by_token.get(token)
                if pairs is None:
                    pairs = by_token[token] = array("Q" if wide else "I")
                try:
                    pairs.append(ordinal)
                    pairs.append(count)
                except OverflowError:
                    wide = True
                    pairs = by_token[token] = array("Q", pairs[:len(pairs) & ~1])
                    pairs.append(ordinal)
                    pairs.append(count)
        ordinals = {name: ordinal for ordinal, name in enumerate(names)}
        if len(ordinals) < len(names):
            raise ValueError("an entity name comes twice")
        merging: dict[str, list[array[int]]] = {}
        for token, pairs in by_token.items():
            for term in _index_terms(token):
                merging.setdefault(term, []).append(pairs)
        del by_token
        columns: dict[str, array[int]] = {}
        for term, parts in merging.items():
            if len(parts) == 1:
                pairs = parts[0]
                columns[term] = _column(pairs[0::2], pairs[1::2])
                continue
            merged: dict[int, int] = {}
            for pairs in parts:
                for ordinal, count in zip(pairs[0::2], pairs[1::2]):
                    merged[ordinal] = merged.get(ordinal, 0) + count
            ordered = sorted(merged)
            columns[term] = _column(ordered, list(map(merged.__getitem__, ordered)))
        return cls(names, spans, ordinals, columns, total, weights)

    @classmethod
    def of_postings(cls, names: list[str], spans: Sequence[int], total: int, terms: Sequence[str],
                    starts: Sequence[int], holders: Sequence[int], counts: Sequence[int],
                    weights: FieldWeights = FIELD_WEIGHTS) -> TermIndex:
        """The index whose term number n is held by holders[starts[n]:starts[n + 1]] (ordinals, that
        is places in `names`, ascending) with the counts at the same places: what :meth:`build`
        makes of the same entities, in a pass over arrays rather than over every text (an index
        cache's postings, storage/index_cache.py C7). ValueError when they do not fit together:
        a holder out of order or out of range, a count of 0, lengths that do not sum to `total`."""
        count = len(names)
        if (len(spans) != count or sum(spans) != total or len(starts) != len(terms) + 1 or len(holders) != len(counts)
                or (starts and (starts[0] != 0 or starts[-1] != len(holders)))
                or not all(map(operator.le, starts, itertools.islice(starts, 1, None)))):
            raise ValueError("the postings do not fit their entities")
        ordinals = {name: ordinal for ordinal, name in enumerate(names)}
        if len(ordinals) < count:
            raise ValueError("an entity name comes twice")
        # One array per term (holders, then counts: see _column), each cut from the two arrays as a
        # whole, of the type a build gives them. (A term's holders ascending, the last in range:
        # updated() finds an entity in them by bisection.)
        if 0 in counts:
            raise ValueError("a term counted 0 times")
        code = "I" if _fits_32(holders) and _fits_32(counts) else "Q"
        try:
            holders, counts = array(code, holders), array(code, counts)
        except OverflowError:  # (below 0, or beyond 64 bits)
            raise ValueError("a holder or a count out of range") from None
        columns: dict[str, array[int]] = {}
        for number, term in enumerate(terms):
            start, end = starts[number], starts[number + 1]
            if start == end or holders[end - 1] >= count or term in columns:
                raise ValueError(f"the postings of {term!r} do not fit their entities")
            column = columns[term] = holders[start:end] + counts[start:end]
            if not all(map(operator.lt, column[:end - start - 1], itertools.islice(column, 1, end - start))):
                raise ValueError(f"the holders of {term!r} are not in order")
        return cls(names, array("Q", spans), ordinals, columns, total, weights)

    def updated(self, changes: Iterable[TermChange]) -> TermIndex:
        """The index after the changes (at most one per entity); this one stays as it was. A
        term's holders stay in the order of their ordinals, as a build gives them."""
        changes = list(changes)
        if not changes:
            return self
        # Copies, never edits: the index before this change may still be searched. (The names
        # and ordinals only when entities come or go.)
        names, ordinals = self.names, self.ordinals
        spans, columns = array(self.spans.typecode, self.spans), dict(self.columns)
        total = self.total
        owned: dict[str, array[int]] = {}
        for name, before, after in changes:
            ordinal = ordinals.get(name)
            old = entity_terms(before, self.weights)[0] if before is not None and ordinal is not None else {}
            new, length = entity_terms(after, self.weights) if after is not None else ({}, 0)
            if ordinal is not None:
                total -= spans[ordinal]
            if (after is None) != (ordinal is None) and names is self.names:
                names, ordinals = list(names), dict(ordinals)
            if after is None:
                if ordinal is None:
                    continue
                del ordinals[name]
                names[ordinal], spans[ordinal] = "", 0
            elif ordinal is None:
                ordinal = ordinals[name] = len(names)
                names.append(name)
                spans.append(length)
            else:
                spans[ordinal] = length
            total += length
            for term in old.keys() | new.keys():
                count = new.get(term)
                if old.get(term) == count:
                    continue
                column = owned.get(term)
                if column is None:
                    held = columns.get(term, _EMPTY_COLUMN)
                    column = owned[term] = array(held.typecode, held)
                half = len(column) >> 1
                at = bisect_left(column, ordinal, 0, half)
                there = at < half and column[at] == ordinal
                if count is None:
                    if there:
                        del column[half + at]
                        del column[at]
                elif there:
                    owned[term] = _set(column, half + at, count)
                else:
                    column.insert(half + at, 0)
                    column.insert(at, 0)
                    owned[term] = _set(_set(column, at, ordinal), half + 1 + at, count)
        for term, column in owned.items():
            if column:
                columns[term] = column
            else:
                columns.pop(term, None)
        index = TermIndex(names, spans, ordinals, columns, total, self.weights)
        return index._compacted() if len(names) - len(ordinals) > max(len(ordinals), _UNUSED_KEPT) else index

    def _compacted(self) -> TermIndex:
        """The same index with ordinals 0 to n - 1 (in the order of the old ones)."""
        kept = sorted(self.ordinals.values())
        renumbered = array("Q", bytes(8 * len(self.names)))
        for new, old in enumerate(kept):
            renumbered[old] = new
        names = list(map(self.names.__getitem__, kept))
        spans = array(self.spans.typecode, map(self.spans.__getitem__, kept))
        columns = {}
        for term, column in self.columns.items():
            half = len(column) >> 1
            columns[term] = _column(list(map(renumbered.__getitem__, column[:half])), column[half:])
        return TermIndex(names, spans, {name: ordinal for ordinal, name in enumerate(names)}, columns,
                         self.total, self.weights)


_UNUSED_KEPT: Final = 4096
"""Unused ordinals an index keeps, however small, before it numbers its entities again."""


class _NamedPostings(Mapping[str, Mapping[str, int]]):
    """A :class:`TermIndex`'s postings by entity name: each term's made when read."""

    def __init__(self, index: TermIndex) -> None:
        self._index = index

    def __getitem__(self, term: str) -> Mapping[str, int]:
        found = self._index.column(term)
        if found is None:
            raise KeyError(term)
        ordinals, counts = found
        return dict(zip(map(self._index.names.__getitem__, ordinals), counts))

    def __iter__(self) -> Iterator[str]:
        return iter(self._index.columns)

    def __len__(self) -> int:
        return len(self._index.columns)

    def __contains__(self, term: object) -> bool:
        return term in self._index.columns


class _NamedLengths(Mapping[str, int]):
    """A :class:`TermIndex`'s lengths by entity name."""

    def __init__(self, index: TermIndex) -> None:
        self._index = index

    def __getitem__(self, name: str) -> int:
        return self._index.spans[self._index.ordinals[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index.ordinals)

    def __len__(self) -> int:
        return len(self._index.ordinals)

    def __contains__(self, name: object) -> bool:
        return name in self._index.ordinals


class Terms(Protocol):
    """What ranking reads of an index: a :class:`TermIndex`, or the same held on disk. Entities
    are numbered (their ordinals); a term's column gives its holders' ordinals and counts."""

    @property
    def names(self) -> Sequence[str]: ...
    @property
    def spans(self) -> Sequence[int]: ...
    @property
    def entities(self) -> int: ...
    @property
    def total(self) -> int: ...
    def column(self, term: str) -> tuple[Sequence[int], Sequence[int]] | None: ...


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
MASKED_TERMS: Final = 12
"""Queries of at most this many terms count each entity's terms as bits (a long one as sums)."""


PLAIN: Final = Ranker()
DEFAULT: Final = Ranker(k1=0.9, b=0.4, coverage=1.0, question_words=True, phrase=1.0)


def rank(index: Terms, query: str, ranker: Ranker = DEFAULT,
         text_of: Callable[[str], str] | None = None) -> dict[str, float]:
    """Scores of the entities holding at least one of the query's terms (none: an empty dict).
    `text_of` gives an entity's search text by name, for the phrase bonus."""
    wanted = query_terms(query, question_words=ranker.question_words)
    count = index.entities
    if not wanted or not count:
        return {}
    k1, b = ranker.k1, ranker.b
    average = index.total / count or 1.0
    spans_of = index.spans.__getitem__
    scores: dict[int, float] = {}
    weights: dict[str, float] = {}
    # Which of the terms each entity holds, as bits in the order of the terms (a few distinct
    # sets, each set's sum of rarities made once), or for a long query those sums themselves.
    masked = len(wanted) <= MASKED_TERMS
    covered: dict[int, Any] = {}
    saturation, kept = k1 + 1.0, 1.0 - b
    # The same sums in the same order as term by term and entity by entity (so the same floats),
    # with what depends on a count and a length alone worked out once per distinct pair (a memory
    # has few), and each term's scores and sums made in C over its columns: a word half the memory
    # holds brings tens of thousands of holders, and no Python code runs per holder.
    pull: dict[int, float] = {}
    part: dict[tuple[int, int], float] = {}
    for term in wanted:
        found = index.column(term)
        if not found or not found[0]:
            continue
        holders, tfs = found
        held = len(holders)
        idf = math.log(1.0 + (count - held + 0.5) / (held + 0.5))
        bit: Any = (1 << len(weights)) if masked else idf
        weights[term] = idf
        pairs = list(zip(tfs, map(spans_of, holders)))
        distinct = set(pairs)
        for pair in distinct.difference(part):
            tf, length = pair
            if (norm := pull.get(length)) is None:
                norm = pull[length] = k1 * (kept + b * length / average)
            part[pair] = tf * saturation / (tf + norm)
        scored = {pair: idf * part[pair] for pair in distinct}  # (one float each, shared by its holders)
        term_scores = map(scored.__getitem__, pairs)
        if not scores:
            scores = dict(zip(holders, term_scores))
            covered = dict.fromkeys(holders, bit)
            continue
        sums = list(map(operator.add, map(scores.get, holders, itertools.repeat(0.0)), term_scores))
        scores.update(zip(holders, sums))
        together = operator.or_ if masked else operator.add
        sums = list(map(together, map(covered.get, holders, itertools.repeat(0)), itertools.repeat(bit)))
        covered.update(zip(holders, sums))
    names = index.names
    if ranker.coverage and weights:
        # (covered holds the same entities as scores, in the same order)
        whole, power = sum(weights.values()), ranker.coverage
        if masked:
            rarities = list(weights.values())
            share_of = {}
            for mask in set(covered.values()):
                # The rarities of the terms held, summed in the order of the terms (as term by term).
                held_sum: float | None = None
                for position, rarity in enumerate(rarities):
                    if mask >> position & 1:
                        held_sum = rarity if held_sum is None else held_sum + rarity
                assert held_sum is not None
                share_of[mask] = (held_sum / whole) ** power
            shares: Iterable[float] = map(share_of.__getitem__, covered.values())
        else:
            shares = map(pow, map(operator.truediv, covered.values(), itertools.repeat(whole)), itertools.repeat(power))
        named = dict(zip(map(names.__getitem__, scores), map(operator.mul, scores.values(), shares)))
    else:
        named = dict(zip(map(names.__getitem__, scores), scores.values()))
    if ranker.phrase and text_of is not None and len(wanted) > 1:
        pairs_of_query = set(itertools.pairwise(wanted))
        best = heapq.nlargest(RERANKED, _at_least(named, RERANKED), key=_score_then_name)
        for name, score in best:
            found_pairs = set(itertools.pairwise(terms(text_of(name))))
            named[name] = score * (1.0 + ranker.phrase * len(pairs_of_query & found_pairs) / len(pairs_of_query))
    return named


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


def unheld_terms(found: FactHits, held: Container[str] | None = None) -> set[str]:
    """The query's terms that no fact of `found` holds (`held`: the terms its facts hold, when
    already counted), nor the name or type of one of its entities."""
    if held is None:
        held = set().union(*(hit for hits in found.hits for hit in hits))
    unheld = {term for term in found.wanted_set if term not in held}
    for name, entity_type, _ in found.entities:
        if not unheld:
            break
        unheld.difference_update(fact_terms(name), fact_terms(entity_type))
    return unheld


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
    rarest_held = max((idf[term] for term in wanted_set if df[term]), default=0.0)
    if rarest_held:
        # (a term only a name or a type holds keeps its rarity: it names the entity asked about)
        for term in unheld_terms(found, df):
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
    # (made in the order of positions and indexes, so a stable sort by score alone, in C, breaks
    # its ties as best_first does)
    scored.sort(key=_score_of, reverse=True)
    return scored


_score_of: Final = operator.itemgetter(2)


def best_first(facts: Iterable[ScoredFact]) -> list[ScoredFact]:
    """The facts (position, index, score) highest score first, ties by position, then index: the
    order of the key (-score, position, index), made by two sorts of C comparisons (a key function
    would run Python code for each of thousands of facts): by position and index (the tuples
    themselves), then stably by score (a reversed sort keeps equals in their order)."""
    ordered = sorted(facts)
    ordered.sort(key=_score_of, reverse=True)
    return ordered


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
