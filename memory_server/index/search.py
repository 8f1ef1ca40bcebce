"""What a search compares (an entity's lower-cased text) and the word index that narrows it.

A word is a maximal run of characters that are neither whitespace nor the field separator.
Wherever a query occurs in a field, each whitespace-separated part of the query lies inside
one word of that field, so the entities holding a word that contains the query's longest part
include every match. The index only proposes candidates; search_nodes still checks each
candidate's text, so the index can make a search faster but never change its answer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

FIELD_SEPARATOR: Final = "\x00"
"""Joins the searchable fields of an entity. A query holding it falls back to a per-field check."""

# Between the words of the vocabulary; no word holds whitespace, so no word holds it.
_WORD_SEPARATOR: Final = "\n"


def search_text(name: str, entity_type: str, observations: Iterable[str]) -> str:
    return FIELD_SEPARATOR.join((name, entity_type, *observations)).lower()


def words_of(text: str) -> set[str]:
    return set(text.replace(FIELD_SEPARATOR, " ").split())


TextChange = tuple[str, "str | None", "str | None"]
"""An entity's name, its search text before (None: it is new) and after (None: it is gone)."""


class WordIndex:
    """Entity names by word, plus every word in one string so that a substring is found in
    one scan of the vocabulary rather than of every observation. Never changed once made.

    A word held by one entity maps to its name, not to a list of it: most words of a large memory
    are held by one (numbers, names, codes: at 100,000 entities of five facts, 600,000 of the
    600,092 words), and their lists took 53 MB of the index's 128."""

    __slots__ = ("_holders", "_vocabulary", "_stale")

    def __init__(self, holders: Mapping[str, str | list[str]], vocabulary: str, stale: int) -> None:
        self._holders = holders
        # May still hold words nobody has any more (`stale` of them): they only cost a lookup.
        self._vocabulary = vocabulary
        self._stale = stale

    @classmethod
    def build(cls, texts: Iterable[tuple[str, str]]) -> WordIndex:
        """The index of (name, search text) pairs, one pair per entity."""
        holders: dict[str, Any] = {}
        hold = holders.setdefault  # (one call in C for a new word: as fast as a defaultdict of lists)
        for name, text in texts:
            for word in words_of(text):
                held = hold(word, name)
                if held is not name:
                    if type(held) is str:
                        holders[word] = [held, name]
                    else:
                        held.append(name)
        return cls(holders, _WORD_SEPARATOR.join(holders), 0)

    def updated(self, changes: Iterable[TextChange]) -> WordIndex:
        """The index after the given changes, at most one per entity; this one stays as it was."""
        gained: defaultdict[str, list[str]] = defaultdict(list)
        lost: defaultdict[str, set[str]] = defaultdict(set)
        for name, before, after in changes:
            old = words_of(before) if before is not None else set()
            new = words_of(after) if after is not None else set()
            for word in new - old:
                gained[word].append(name)
            for word in old - new:
                lost[word].add(name)
        if not gained and not lost:
            return self
        holders = dict(self._holders)
        fresh = []
        stale = self._stale
        # Lists are copied, never edited: the index before this change may still be searched.
        for word in gained.keys() | lost.keys():
            now = _without(_names(holders.get(word)), lost.get(word, ())) + gained.get(word, [])
            if now:
                if word not in holders:
                    fresh.append(word)
                holders[word] = now[0] if len(now) == 1 else now
            elif word in holders:
                del holders[word]
                stale += 1
        if stale > len(holders):
            return WordIndex(holders, _WORD_SEPARATOR.join(holders), 0)
        return WordIndex(holders, _WORD_SEPARATOR.join([self._vocabulary, *fresh]), stale)

    def candidates(self, needle: str, limit: int) -> set[str] | None:
        """The names of the entities whose text may contain the lower-cased `needle`, or None
        when the index cannot narrow the search to `limit` entities or fewer."""
        if FIELD_SEPARATOR in needle:
            return None
        part = max(needle.split(), key=len, default="")
        if not part:
            return None
        vocabulary = self._vocabulary
        found: set[str] = set()
        at = vocabulary.find(part)
        while at >= 0:
            start = vocabulary.rfind(_WORD_SEPARATOR, 0, at) + 1
            end = vocabulary.find(_WORD_SEPARATOR, at)
            if end < 0:
                end = len(vocabulary)
            held = self._holders.get(vocabulary[start:end], ())
            if isinstance(held, str):
                found.add(held)
            else:
                found.update(held)
            if len(found) > limit:
                return None
            at = vocabulary.find(part, end)
        return found


def _names(held: str | list[str] | None) -> list[str]:
    """The names of a word's holders as a list (never one the index holds: see _without)."""
    if held is None:
        return []
    return [held] if isinstance(held, str) else held


def _without(names: list[str], gone: Collection[str]) -> list[str]:
    """A copy of `names` without those in `gone`, every one of which is in `names`."""
    if len(gone) * 16 > len(names):
        return [name for name in names if name not in gone]
    # A word held by much of the graph loses a few holders at a time: a copy and a few removals,
    # both in C, cost far less than a Python-level pass over every holder.
    remaining = names.copy()
    for name in gone:
        remaining.remove(name)
    return remaining
