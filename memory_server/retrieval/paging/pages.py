"""Pages and the answers they are cut from: the values the rest of the package works on."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import msgspec


class Page(msgspec.Struct, frozen=True):
    json: bytes
    """The structured content as compact JSON; also the first text item."""
    notes: tuple[str, ...] = ()
    """Further text items for the model."""
    following: tuple[int, int, int] | None = None
    """Where the next page of the answer starts (answer id, unit, part): see :meth:`.pager.Pager.prepare`."""
    text: bytes | None = None
    """`json` encoded as a JSON string, when the page was prepared ahead."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A full answer kept for its cursors: entities then relations, in one list."""

    tool: str
    request: bytes
    units: list[Any]
    entities: int
    """units[:entities] are the entities."""
    summary: bytes | None = None
    note_rooms: dict[bool, int] = field(default_factory=dict, compare=False)
    """The room a note of a first page (True) and of a later one (False) takes at most, once known."""
    facts: Facts | None = None
    """A search answer paged fact by fact (see :meth:`.pager.Pager.first_facts`); units then unused."""


Touching = Callable[[AbstractSet[str]], list[Any]]
"""The relations touching some of an answer's entities (by name): asked page by page, so that an
answer of thousands of entities works out the relations of the few a page shows, not of all."""


class FactOrder(Sequence[tuple[int, int]]):
    """The facts of an answer in reading order, (entity position, observation index), index -1 for an
    entity shown bare, without a Python object per fact: an answer of a hundred thousand entities
    costs a few lists, however few of its facts a page reads.

    First the facts listed one by one (`head`: positions and indexes), then runs of one entity each:
    its observations in the order they were written (`picks[k]` None: `counts[k]` of them; none:
    the bare entity), or the observations `picks[k]` lists, in that order."""

    __slots__ = ("_head", "_positions", "_picks", "_counts", "_ends")

    def __init__(self, positions: Sequence[int] = (), picks: Sequence[Sequence[int] | None] | None = None,
                 counts: Sequence[int] = (), *, head: tuple[Sequence[int], Sequence[int]] = ((), ())) -> None:
        self._head = head
        self._positions = positions
        self._picks = picks
        self._counts = counts
        widths: Iterable[int] = map(max, counts, itertools.repeat(1))
        if picks is not None:
            widths = (max(count, 1) if pick is None else len(pick) for pick, count in zip(picks, counts, strict=True))
        self._ends = list(itertools.accumulate(widths, initial=len(head[0])))

    def __len__(self) -> int:
        return self._ends[-1]

    def first_entities(self, limit: int) -> tuple[FactOrder, list[int]]:
        """The facts of the first `limit` entities to come, each entity renumbered by when it comes
        first, and their old positions (by new position). A run's entity is nowhere else in the order."""
        kept: dict[int, int] = {}
        for position in self._head[0]:
            if position not in kept:
                if len(kept) == limit:
                    break
                kept[position] = len(kept)
        positions: list[int] = []
        indexes: list[int] = []
        for position, index in zip(*self._head, strict=True):
            if (renumbered := kept.get(position)) is not None:
                positions.append(renumbered)
                indexes.append(index)
        runs = min(max(limit - len(kept), 0), len(self._positions))
        order = FactOrder(range(len(kept), len(kept) + runs), None if self._picks is None else self._picks[:runs],
                          self._counts[:runs], head=(positions, indexes))
        return order, [*kept, *self._positions[:runs]]

    def __getitem__(self, at: int) -> tuple[int, int]:  # type: ignore[override]  # (no slices)
        ends = self._ends
        if not 0 <= at < ends[-1]:
            raise IndexError(at)
        if at < ends[0]:
            return self._head[0][at], self._head[1][at]
        run = bisect.bisect_right(ends, at) - 1
        offset = at - ends[run]
        if self._picks is not None and (pick := self._picks[run]) is not None:
            return self._positions[run], pick[offset]
        return self._positions[run], offset if self._counts[run] else -1

    def __iter__(self) -> Iterator[tuple[int, int]]:
        # (Sequence's own walks __getitem__ to an IndexError: a bisection per fact)
        yield from zip(*self._head, strict=True)
        for run, position in enumerate(self._positions):
            pick = None if self._picks is None else self._picks[run]
            if pick is not None:
                yield from zip(itertools.repeat(position), pick)
            elif self._counts[run]:
                yield from zip(itertools.repeat(position), range(self._counts[run]))
            else:
                yield position, -1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(
            mine == theirs for mine, theirs in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FactOrder({list(self)!r})"


@dataclass(frozen=True, slots=True)
class Facts:
    """A search answer as the facts it is made of, in the order they are to be read.

    Made by :func:`memory_server.retrieval.answer.shape`; paged by :meth:`.pager.Pager.first_facts`.
    Each page takes the next facts in order while they fit `characters` (a page of words goes on,
    up to STRETCH times that, to show LEAST_ENTITIES entities), and shows them grouped by entity
    (entities in the order their first fact comes, each entity's facts in order)."""

    entities: list[Any]
    """The matched entities' objects (name, entityType, observations)."""
    order: Sequence[tuple[int, int]]
    """(entity position, observation index) to read, each once; index -1: an entity without
    observations, shown bare (a :class:`FactOrder`, or any sequence of such pairs)."""
    touching: Touching
    """The relations a page of these entities shows: those touching them, in graph order."""
    characters: int
    """What a page gives the model at most, in UTF-8 bytes of its JSON and its notes."""
    words: bool
    """Whether the query was taken as words (False: entities containing the whole query)."""
    remark: str = ""
    """What every page's note says first about how the query was taken (empty: nothing)."""
    unlisted: int = 0
    """Matching entities not in `entities`: none of their facts is in the answer (those past the
    facts scored, answer.SCORED_FACTS), so it does not hold them; the note still counts them."""
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What its pages work out once for all of them (the relations' sizes, the last page's relations)."""


class _Fill(msgspec.Struct):
    """What one page takes, from a position (unit, part of a split entity) to the next."""

    unit: int
    part: int
    entities: list[memoryview] = msgspec.field(default_factory=list)
    """The entities' JSON, each followed by a comma, in pieces (see take_fitting)."""
    relations: list[memoryview] = msgspec.field(default_factory=list)
    events: list[str] = msgspec.field(default_factory=list)
    """Notes about split entities, cut observations and what could not be shown."""
    used: int = 0


class _FactFill(msgspec.Struct):
    end: int
    shown: dict[int, list[str]]
    """Entity position -> the observations shown (a cut one carries its marker)."""
    indexes: dict[int, list[int]]
    relations: list[Any]
    more_relations: int
    cut: list[str]
