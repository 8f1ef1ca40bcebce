"""Pages of a search answer made of facts (see :class:`.pages.Facts`): the facts that fit, in
reading order, grouped by entity, with the relations touching the entities shown."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from ...model.dates import shown_dates
from .budget import _ENVELOPE, _cut_observation
from .notes import _facts_note, _shown, partial_marker
from .pages import Facts, Page, _FactFill

_encoder: Final = msgspec.json.Encoder()

_FACT_NOTE_ROOM: Final = 380
"""Bytes kept for a page's note (the longest it can be, but for names in it)."""
RELATION_SHARE: Final = 4
LEAST_ENTITIES: Final = 5
"""Entities a page of an answer by words shows at least, when that many matched and they fit
STRETCH times the page's size."""
STRETCH: Final = 3
"""Relations take at most 1/RELATION_SHARE of a page that has facts left for it."""

def _facts_page(facts: Facts, start: int, cursor: Callable[[int], str | None], answer_id: int) -> Page:
    """The page starting at fact `start`, within facts.characters: the facts that fit (at least one,
    an observation too long for any page cut with its marker), then the relations touching their
    entities (within a share of the page when facts are left for it)."""
    # A remark on how the query was taken comes on top of the page: it says why the facts are
    # these, and must not push the fifth of them out.
    budget = facts.characters + (len(facts.remark.encode()) + 1 if facts.remark else 0)
    room = facts.characters - _ENVELOPE - _FACT_NOTE_ROOM
    if facts.words:
        # A glance at a few candidates: a page of words goes on past its size to show at least
        # LEAST_ENTITIES entities (up to STRETCH times its size), so that an answer is never
        # three long entities when the fourth is the one asked for.
        fill, used = _take_facts(facts, start, room, least=LEAST_ENTITIES, stretch=room * (STRETCH - 1))
        if used > room:
            budget, room = budget + used - room, used
    while True:
        fill, used = _take_facts(facts, start, room)
        if fill.end < len(facts.order):
            # Relations take their share only when facts are left for the room; a page of few
            # relations leaves the rest to facts.
            wanted = sum(size for _, _, size in _touching(facts, fill.shown))
            if wanted:
                fill, used = _take_facts(facts, start, room - min(wanted, room // RELATION_SHARE))
        fill.relations, fill.more_relations = _fit_relations(_touching(facts, fill.shown), room - used)
        page = _render_facts(facts, fill, start, cursor(fill.end), answer_id)
        over = len(page.json) + sum(len(note.encode()) for note in page.notes) - budget
        if over <= 0 or room <= 64:
            return page
        # What overflows is mostly the note and partial markers, not what room keeps: a page's
        # content only changes once a whole relation or fact gives way, so step by at least that.
        room -= max(over, 48)


def _take_facts(facts: Facts, start: int, room: int, *, least: int = 0,
                stretch: int = 0) -> tuple[_FactFill, int]:
    """The facts from `start` that fit `room`; with `least`, while fewer than that many entities are
    taken, the next entities too (their facts that follow in order) when they fit `room + stretch`."""
    shown: dict[int, list[str]] = {}
    indexes: dict[int, list[int]] = {}
    cut: list[str] = []
    stretched: set[int] = set()  # entities begun past `room`: the stretch takes them whole, no others' facts
    used = 0
    at = start
    order = facts.order
    while at < len(order):
        position, index = order[at]
        entity = facts.entities[position]
        cost = 0
        if position not in shown:
            # A partial marker's room is not kept here: the page is measured once rendered.
            cost += len(_encoder.encode({"name": entity["name"], "entityType": entity["entityType"],
                                         "observations": []})) + 1
        observation = entity["observations"][index] if index >= 0 else None
        if observation is not None:
            cost += len(_encoder.encode(observation)) + 1 + _dates_cost(entity, index, position not in shown)
        if used + cost > room and (at == start or used + cost > room + stretch or not (
                position in stretched or (position not in shown and len(shown) < least))):
            if at > start:
                break
            if observation is None:
                break  # not even the bare entity fits: the page says so below
            bare = cost - len(_encoder.encode(observation)) - 1
            observation, kept = _cut_observation(observation, max(room - used - bare - 1, 16))
            cut.append(f"Observation {index + 1} of {_shown(entity['name'])} has "
                       f"{len(entity['observations'][index]):,} characters, more than a page holds: the first "
                       f"{kept:,} are shown, marked [cut: ...]; open_nodes gives it whole.")
            cost = bare + len(_encoder.encode(observation)) + 1
        if used + cost > room and position not in shown:
            stretched.add(position)
        taken = shown.setdefault(position, [])
        indexes.setdefault(position, [])
        if observation is not None:
            taken.append(observation)
            indexes[position].append(index)
        used += cost
        at += 1
    if at == start and at < len(order):
        at += 1  # nothing fits, not even a bare entity: skipped, and named in the note
        cut.append(f"Not shown at all: the entity {_shown(facts.entities[order[start][0]]['name'])}, because even "
                   "its name exceeds the page. It stays in the memory file.")
    return _FactFill(at, shown, indexes, [], 0, cut), used


def _dates_cost(entity: Mapping[str, Any], index: int, first: bool) -> int:
    """The bytes a shown fact's date and author take beside it (observationDates, observationAuthors),
    with the keys and the entity's own dates for its first fact: left out, a page of dated facts
    overflowed and was cut again and again until its first fact showed nothing."""
    cost = 0
    for key in ("observationDates", "observationAuthors"):
        values = entity.get(key)
        if values and 0 <= index < len(values):
            cost += len(_encoder.encode(values[index])) + 1 + (len(key) + 5 if first else 0)
    if first:
        cost += sum(len(key) + 17 for key in ("createdAt", "updatedAt") if key in entity)
    return cost


def _touching(facts: Facts, shown: Mapping[int, Any]) -> list[tuple[bool, Any, int]]:
    """The relations touching the entities shown, in graph order, each with whether both its
    ends are shown and its size (with a comma)."""
    key = frozenset(shown)
    memo = facts.memo
    if memo.get("touching", (None,))[0] == key:
        return memo["touching"][1]
    sizes: dict[tuple[str, str, str], int] = memo.setdefault("sizes", {})
    names = {facts.entities[position]["name"] for position in shown}
    touching = []
    for relation in facts.touching(names):
        triple = relation["from"], relation["to"], relation["relationType"]
        if (size := sizes.get(triple)) is None:
            size = sizes[triple] = len(_encoder.encode(relation)) + 1
        touching.append((relation["from"] in names and relation["to"] in names, relation, size))
    memo["touching"] = (key, touching)
    return touching


def _fit_relations(touching: list[tuple[bool, Any, int]], room: int) -> tuple[list[Any], int]:
    """The relations that fit `room`, in graph order: all when they fit, else those between two
    entities shown first, then those with one end shown; and how many were left out."""
    if sum(size for _, _, size in touching) <= room:
        return [relation for _, relation, _ in touching], 0
    chosen: set[int] = set()
    used = 0
    for wanted in (True, False):
        for number, (both, _, size) in enumerate(touching):
            if both == wanted and used + size <= room:
                chosen.add(number)
                used += size
    return [relation for number, (_, relation, _) in enumerate(touching) if number in chosen], len(touching) - len(chosen)


def _shown_entity(facts: Facts, position: int, fill: _FactFill) -> Any:
    entity = facts.entities[position]
    observations = fill.shown[position]
    total = len(entity["observations"])
    if fill.indexes[position] == list(range(total)) and not any(
            observation is not entity["observations"][index]
            for observation, index in zip(observations, fill.indexes[position], strict=True)):
        return entity  # whole, in the order it was written: the object itself, as an uncut answer has it
    shown = {"name": entity["name"], "entityType": entity["entityType"], "observations": observations,
             **shown_dates(entity, fill.indexes[position])}
    if len(observations) < total or any(observation is not entity["observations"][index] for observation, index
                                        in zip(observations, fill.indexes[position], strict=True)):
        shown["partial"] = partial_marker(len(observations), total)
    return shown


def _render_facts(facts: Facts, fill: _FactFill, start: int, cursor: str | None, answer_id: int = 0) -> Page:
    value: dict[str, Any] = {"entities": [_shown_entity(facts, position, fill) for position in fill.shown],
                             "relations": fill.relations}
    if cursor is not None:
        value["nextCursor"] = cursor
    encoded = _encoder.encode(value)
    partial = sum(1 for entity in value["entities"] if "partial" in entity)
    notes: tuple[str, ...] = ()
    if cursor is not None or partial or fill.more_relations or fill.cut or start or facts.remark:
        notes = (_facts_note(facts, fill, start, cursor is not None, partial),)
    following = (answer_id, fill.end, 0) if cursor is not None else None
    return Page(encoded, notes, following)
