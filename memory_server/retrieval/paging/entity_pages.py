"""Pages of an answer of entities and relations (read_graph, open_nodes, a search by entities):
whole units while they fit, an entity too large for any page in parts, each page with its note."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from .budget import _ENVELOPE, _NOTE_ROOM, _NOTE_SLACK, _cut_observation, _without_last_comma, take_fitting
from .notes import _entity_note, _shown
from .pages import Answer, Page, _Fill

_EVENTS_PER_PAGE: Final = 3
"""Split entities and unshowable units a page tells about, at most; more wait for the next page."""

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder()


def entity_parts(entity: Mapping[str, Any], room: int) -> list[tuple[dict[str, Any], tuple[int, int, int] | None]]:
    """An entity too large for one page as parts of at most `room` bytes of JSON each, its observations
    in order. An observation larger than a part is cut, alone in its part, which then comes with
    (observation number, characters shown, characters in all). No parts: not even the name and type fit."""
    name, kind = entity["name"], entity["entityType"]
    bare = len(_encoder.encode({"name": name, "entityType": kind, "observations": []}))
    if bare > room:
        return []
    parts: list[tuple[list[str], tuple[int, int, int] | None]] = []
    run: list[str] = []
    used = bare
    for number, observation in enumerate(entity["observations"], start=1):
        size = len(_encoder.encode(observation))
        if run and used + 1 + size <= room:
            run.append(observation)
            used += 1 + size
            continue
        if run:
            parts.append((run, None))
            run, used = [], bare
        if used + size <= room:
            run, used = [observation], used + size
            continue
        shortened, shown = _cut_observation(observation, room - bare)
        parts.append(([shortened], (number, shown, len(observation))))
    if run or not parts:
        parts.append((run, None))
    return [({"name": name, "entityType": kind, "observations": observations}, cut) for observations, cut in parts]


class EntityPages:
    """Cuts kept answers of entities and relations into pages of at most `budget` bytes; `cursor`
    makes the cursor of a page's next one (answer id, unit, part)."""

    def __init__(self, budget: int, cursor: Callable[[int, int, int], str]) -> None:
        self.budget = budget
        self._cursor = cursor
        # The largest unit (with its comma) a page without a summary holds; larger entities are split.
        self._unit_room = budget - _ENVELOPE - _NOTE_ROOM

    def page(self, answer_id: int, answer: Answer, unit: int, part: int, *, first: bool) -> Page:
        """The page of `answer` starting at `unit` (and, in a split entity, `part`); the first one
        carries the summary."""
        summary = answer.summary if first else None
        # Room for the note as long as it can be (its numbers at their longest), not more: a page
        # holds as many units as fit. Notes about split entities, rare, take their room when made.
        if (note_room := answer.note_rooms.get(first)) is None:
            longest = _entity_note(self.budget, answer, 0, _Fill(len(answer.units) - 1, 0), first)
            note_room = answer.note_rooms[first] = min(_NOTE_ROOM, len(longest.encode()) + _NOTE_SLACK)
        room = self.budget - _ENVELOPE - note_room - (len(summary) + len(b'"summary":,') if summary else 0)
        while True:
            fill = self._fill(answer, unit, part, room)
            page = self._render(answer_id, answer, unit, fill, summary, first)
            over = len(page.json) + sum(len(note.encode()) for note in page.notes) - self.budget
            # A note longer than the room kept for it (many long names) takes room from the units.
            if over <= 0 or fill.used == 0:
                return page
            room -= over

    def _fill(self, answer: Answer, unit: int, part: int, room: int) -> _Fill:
        units, split = answer.units, answer.entities
        fill = _Fill(unit, part)
        while fill.unit < len(units) and len(fill.events) < _EVENTS_PER_PAGE:
            target = fill.entities if fill.unit < split else fill.relations
            if fill.part == 0:
                stop = split if fill.unit < split else len(units)
                pieces, fill.unit, used = take_fitting(units, fill.unit, stop, room - fill.used)
                target += pieces
                fill.used += used
                if fill.unit == stop:
                    continue
                if len(_encoder.encode(units[fill.unit])) + 1 <= self._unit_room:
                    break  # the next unit fits the next page
            if not self._fill_parts(answer, fill, room, target):
                break
        return fill

    def _fill_parts(self, answer: Answer, fill: _Fill, room: int, target: list[memoryview]) -> bool:
        """Parts of a unit too large for any page, from fill.part on, while they fit; False when the page is full."""
        unit = answer.units[fill.unit]
        if isinstance(unit, msgspec.Raw):
            unit = _decoder.decode(unit)
        parts = entity_parts(unit, self._unit_room - 1) if fill.unit < answer.entities else []
        if not parts:
            kind = (f"the entity {_shown(unit['name'])}" if fill.unit < answer.entities else
                    f"the relation {_shown(unit['from'])} {_shown(unit['relationType'])} {_shown(unit['to'])}")
            fill.events.append(f"Not shown at all: {kind}, because even alone it exceeds the answer budget. It "
                               "stays in the memory file.")
            fill.unit, fill.part = fill.unit + 1, 0
            return True
        while fill.part < len(parts):
            piece, cut = parts[fill.part]
            encoded = _encoder.encode(piece)
            if fill.used + len(encoded) + 1 > room:
                return False
            target.append(memoryview(encoded + b","))
            fill.used += len(encoded) + 1
            fill.part += 1
            event = (f"The entity {_shown(unit['name'])} is too large for one page: here is its part {fill.part} "
                     f"of {len(parts)} (its observations in order; name and type repeat on every part).")
            if cut is not None:
                number, shown, total = cut
                event += (f" Its observation {number} has {total:,} characters, more than a page holds: only the "
                          f"first {shown:,} are shown, marked [cut: ...]. The memory file keeps it whole.")
            fill.events.append(event)
            if len(fill.events) >= _EVENTS_PER_PAGE:
                break
        if fill.part == len(parts):
            fill.unit, fill.part = fill.unit + 1, 0
        return True

    def _render(self, answer_id: int, answer: Answer, unit: int, fill: _Fill, summary: bytes | None,
                first: bool) -> Page:
        pieces: list[bytes | memoryview] = [b"{"]
        if summary is not None:
            pieces += [b'"summary":', summary, b","]
        pieces += [b'"entities":[', *_without_last_comma(fill.entities), b'],"relations":[',
                   *_without_last_comma(fill.relations), b"]"]
        if fill.unit < len(answer.units):
            pieces += [b',"nextCursor":"', self._cursor(answer_id, fill.unit, fill.part).encode("ascii"), b'"']
        pieces.append(b"}")
        following = (answer_id, fill.unit, fill.part) if fill.unit < len(answer.units) else None
        return Page(b"".join(pieces), (_entity_note(self.budget, answer, unit, fill, first),), following)
