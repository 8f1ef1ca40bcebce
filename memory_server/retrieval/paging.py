"""Answers that fit a model's context: a read's full answer, cut into pages within a budget.

Pure: the entity and relation objects of a full answer go in; pages come out, each the JSON of
its structured content plus the notes that tell the model what was left out and how to get it.
A cut answer is kept (a few of them, most recent first) under an id that its cursors carry,
signed with a key of this process, so following cursors walks one consistent answer: the
memory as it was when the first page was made.

The budget counts UTF-8 bytes of all text a page gives the model (its JSON and its notes).
A character is at least one byte, so no page holds more characters than the budget either,
and the JSON-RPC line (the JSON twice: as structured content, and escaped as text) stays
within about three times the budget.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import hmac
import itertools
import secrets
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter
from typing import Any, Final

import msgspec

from ..model.census import Listing, summarise
from ..model.dates import shown_dates

BUDGET_VARIABLE: Final = "MEMORY_ANSWER_BUDGET"
DEFAULT_BUDGET: Final = 80_000
"""About 20,000 tokens: well under the 25,000 tokens at which common clients cut a tool answer."""
MINIMUM_BUDGET: Final = 5_000
"""Room for the notes and the summary of a page, and for some entities besides."""
KEPT_ANSWERS: Final = 16
"""Cut answers kept for each client's cursors; its oldest is forgotten (its cursors expire) after this many."""
KEPT_ANSWERS_IN_ALL: Final = 256
"""Cut answers kept for all clients together; beyond it the one unused for longest is forgotten."""
KEPT_ANSWER_BYTES: Final = 64 << 20
"""Bytes the kept answers may hold of their own (see :func:`footprint`), all clients together;
beyond it the one unused for longest is forgotten (the newest is always kept)."""

# The smallest JSON an entity or a relation can have: a cheap proof that an answer cannot fit.
_SMALLEST_ENTITY: Final = len(b'{"name":"","entityType":"","observations":[]},')
_SMALLEST_RELATION: Final = len(b'{"from":"","to":"","relationType":""},')
_NOTE_ROOM: Final = 2_500
"""Bytes kept free for a page's note; a page whose note runs longer gives up units instead."""
_NOTE_SLACK: Final = 64
"""Bytes a page's note may take beyond the longest note of its answer's counts."""
_SHOWN_NAME: Final = 60
_EVENTS_PER_PAGE: Final = 3
"""Split entities and unshowable units a page tells about, at most; more wait for the next page."""

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder()
_PAYLOAD: Final = struct.Struct(">QQI")  # answer id; the page's first unit and, in a split entity, part
_TAG_BYTES: Final = 16
CURSOR_LENGTH: Final = len(base64.urlsafe_b64encode(bytes(_PAYLOAD.size + _TAG_BYTES)).rstrip(b"="))
_ENVELOPE: Final = len(b'{"entities":[],"relations":[],"nextCursor":""}') + CURSOR_LENGTH


class CursorError(ValueError):
    """A cursor that cannot be followed; the message tells the model what to do instead."""


def budget_from(environ: Mapping[str, str]) -> int:
    """The answer budget set by MEMORY_ANSWER_BUDGET (unset or empty: the default).

    ValueError, saying what is allowed, for anything but a whole number of at least MINIMUM_BUDGET."""
    raw = environ.get(BUDGET_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_BUDGET
    if not raw.isascii() or not raw.isdigit() or int(raw) < MINIMUM_BUDGET:
        raise ValueError(f"{BUDGET_VARIABLE} must be a whole number of characters, at least {MINIMUM_BUDGET} "
                         f"(default {DEFAULT_BUDGET}, unset or empty for the default); got {raw!r}")
    return int(raw)


# --------------------------------------------------------------------------------------------
# Pages and the answers they are cut from
# --------------------------------------------------------------------------------------------


class Page(msgspec.Struct, frozen=True):
    json: bytes
    """The structured content as compact JSON; also the first text item."""
    notes: tuple[str, ...] = ()
    """Further text items for the model."""
    following: tuple[int, int, int] | None = None
    """Where the next page of the answer starts (answer id, unit, part): see :meth:`Pager.prepare`."""
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
    """A search answer paged fact by fact (see :meth:`Pager.first_facts`); units then unused."""


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

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(
            mine == theirs for mine, theirs in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FactOrder({list(self)!r})"


@dataclass(frozen=True, slots=True)
class Facts:
    """A search answer as the facts it is made of, in the order they are to be read.

    Made by :func:`memory_server.retrieval.answer.shape`; paged by :meth:`Pager.first_facts`.
    Each page takes the next facts in order while they fit `characters` (a page of words goes on,
    up to STRETCH times that, to show LEAST_ENTITIES entities), and shows them grouped by entity
    (entities in the order their first fact comes, each entity's facts in order)."""

    entities: list[Any]
    """The matched entities' objects (name, entityType, observations)."""
    order: Sequence[tuple[int, int]]
    """(entity position, observation index) to read, each once; index -1: an entity without
    observations, shown bare (a :class:`FactOrder`, or any sequence of such pairs)."""
    relations: list[Any]
    """Every relation touching a matched entity; a page shows those touching its entities."""
    characters: int
    """What a page gives the model at most, in UTF-8 bytes of its JSON and its notes."""
    words: bool
    """Whether the query was taken as words (False: entities containing the whole query)."""
    remark: str = ""
    """What every page's note says first about how the query was taken (empty: nothing)."""
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What its pages work out once for all of them (relations by endpoint, their sizes)."""


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


def _cut_marker(shown: int, total: int) -> str:
    return f" [cut: {shown:,} of {total:,} characters shown, the rest does not fit one answer]"


def _cut_observation(observation: str, room: int) -> tuple[str, int]:
    """The longest prefix of the observation that, with its marker, takes at most `room` bytes of JSON."""
    low, high = 0, len(observation)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_encoder.encode(observation[:middle] + _cut_marker(middle, len(observation)))) <= room:
            low = middle
        else:
            high = middle - 1
    return observation[:low] + _cut_marker(low, len(observation)), low


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


def _shown(name: str) -> str:
    text = repr(name)
    return text if len(text) <= _SHOWN_NAME else text[:_SHOWN_NAME] + "...'"


def take_fitting(units: list[Any], start: int, stop: int, room: int) -> tuple[list[memoryview], int, int]:
    """Whole units from units[start:stop] while their JSON, with a comma after each, takes at most
    `room` bytes: that JSON, each unit followed by its comma (in pieces), where they end, and the
    bytes they take.

    Encodes a chunk at a time in C, each chunk sized from the ones before, so a page costs about
    what it holds whatever the length of the answer; a piece is a view of its chunk's bytes, copied
    once more only into the page."""
    pieces: list[memoryview] = []
    used, index, guess = 0, start, 32
    while index < stop:
        chunk = units[index:min(stop, index + guess)]
        blob = _encoder.encode_lines(chunk)
        # JSON escapes every newline inside strings, so each newline ends one unit, and a unit
        # with its comma takes as many bytes as its line with the newline.
        if len(blob) <= room - used:
            pieces.append(memoryview(blob.replace(b"\n", b",")))
            used += len(blob)
            index += len(chunk)
            guess = max(8, int((room - used) * len(chunk) / len(blob)) + 2)
            continue
        end = blob.rfind(b"\n", 0, room - used) + 1  # after the last unit that fits; 0: none does
        if end:
            pieces.append(memoryview(blob.replace(b"\n", b","))[:end])
            used += end
            # The units after the cut are few (the chunk was sized to fit): count those.
            index += len(chunk) - blob.count(b"\n", end)
        break
    return pieces, index, used


def request_key(tool: str, arguments: Mapping[str, Any]) -> bytes:
    """What a cursor must be used with again: the tool and its arguments but the cursor, as the
    sha256 of their JSON (a kept answer holds 32 bytes of its call, not a query of megabytes)."""
    encoded = _encoder.encode([tool, {key: arguments[key] for key in sorted(arguments) if key != "cursor"}])
    return hashlib.sha256(encoded).digest()


_REFERENCE: Final = 8
"""Bytes of one reference in a list."""


def footprint(answer: Answer) -> int:
    """About how many bytes a kept answer holds of its own: its call's key, its summary, the JSON
    of units read from the index cache (msgspec.Raw, copies of the file's bytes), and a reference
    per unit and per fact (the objects they refer to are the graph's)."""
    size = len(answer.request) + len(answer.summary or b"") + _REFERENCE * len(answer.units)
    size += sum(len(unit) for unit in answer.units if type(unit) is msgspec.Raw)
    if (facts := answer.facts) is not None:
        size += _REFERENCE * (len(facts.entities) + len(facts.relations)) + 2 * _REFERENCE * len(facts.order)
    return size


# --------------------------------------------------------------------------------------------
# The pager: a process's cut answers and the cursors into them
# --------------------------------------------------------------------------------------------


class Pager:
    """Cuts answers larger than `budget` into pages, and follows cursors into the last few of them.

    Safe to share between threads."""

    def __init__(self, budget: int = DEFAULT_BUDGET, *, keep: int = KEPT_ANSWERS,
                 keep_in_all: int = KEPT_ANSWERS_IN_ALL, keep_bytes: int = KEPT_ANSWER_BYTES,
                 key: bytes | None = None) -> None:
        if budget < MINIMUM_BUDGET:
            raise ValueError(f"the answer budget must be at least {MINIMUM_BUDGET}")
        self.budget = budget
        self.keep = keep
        self.keep_in_all = keep_in_all
        self.keep_bytes = keep_bytes
        self._sizes: dict[int, int] = {}  # each kept answer's footprint
        self.kept_bytes = 0
        """The footprints of the answers kept now, added up."""
        self._key = key if key is not None else secrets.token_bytes(32)
        self._answers: OrderedDict[int, Answer] = OrderedDict()  # least recently used first
        # Each client's answers, least recently used first, and whose each answer is: one client
        # making many cut answers forgets its own, never another's (see `_keep`).
        self._of_client: dict[str | None, OrderedDict[int, None]] = {}
        self._client_of: dict[int, str | None] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._ahead: tuple[tuple[int, int, int], Page] | None = None  # see prepare
        # The largest unit (with its comma) a page without a summary holds; larger entities are split.
        self._unit_room = budget - _ENVELOPE - _NOTE_ROOM

    # -- the first page ------------------------------------------------------------------------

    def first_page(self, tool: str, request: bytes, entities: list[Any], relations: list[Any], *,
                   summarise_graph: bool = False, client: str | None = None) -> Page:
        """The whole answer when it fits the budget (exactly as an uncut answer is encoded),
        else the first page of it, led by the graph's summary when `summarise_graph` (from the
        entities' own `summarise` when they are a Listing, else counted here).

        Entities and relations are their objects, or their JSON as msgspec.Raw (an answer read
        from the index cache, not decoded until a page needs more than its bytes). A cut answer is
        kept among `client`'s (whoever the transport says asked; None for a lone client)."""
        smallest = _SMALLEST_ENTITY * len(entities) + _SMALLEST_RELATION * len(relations)
        if smallest <= self.budget:
            encoded = _encoder.encode({"entities": entities, "relations": relations})
            if len(encoded) <= self.budget:
                return Page(encoded)
        summary = None
        if summarise_graph:
            limit = self.budget // 4
            graph_summary = entities.summarise if isinstance(entities, Listing) else None
            summary = _encoder.encode(graph_summary(limit) if graph_summary is not None
                                      else summarise(entities, relations, limit))
        answer = Answer(tool, request, entities + relations, len(entities), summary)
        with self._lock:
            answer_id = next(self._ids)
            self._keep(answer_id, answer, client)
        return self._page(answer_id, answer, 0, 0, first=True)

    def _keep(self, answer_id: int, answer: Answer, client: str | None) -> None:
        """Under the lock: keep `answer`, forgetting its client's oldest beyond `keep` and the
        oldest of all beyond `keep_in_all`, or while all of them hold more than `keep_bytes`."""
        self._answers[answer_id] = answer
        self._client_of[answer_id] = client
        self._sizes[answer_id] = size = footprint(answer)
        self.kept_bytes += size
        mine = self._of_client.setdefault(client, OrderedDict())
        mine[answer_id] = None
        while len(mine) > self.keep:
            self._forget(next(iter(mine)))
        while len(self._answers) > self.keep_in_all or (self.kept_bytes > self.keep_bytes and len(self._answers) > 1):
            self._forget(next(iter(self._answers)))

    def _forget(self, answer_id: int) -> None:
        del self._answers[answer_id]
        self.kept_bytes -= self._sizes.pop(answer_id)
        client = self._client_of.pop(answer_id)
        theirs = self._of_client[client]
        del theirs[answer_id]
        if not theirs:
            del self._of_client[client]

    def first_facts(self, tool: str, request: bytes, facts: Facts, *, client: str | None = None) -> Page:
        """The first page of a search answer made of facts (see :class:`Facts`): the whole answer
        when it fits `facts.characters` (exactly as an uncut answer is encoded, when every entity
        is shown whole), else its first page, with a cursor to the next."""
        with self._lock:
            answer_id = next(self._ids)  # an id unused when the answer fits: ids only need to differ
        page = self._facts_page(answer_id, facts, 0)
        if page.following is not None:
            with self._lock:
                self._keep(answer_id, Answer(tool, request, [], 0, facts=facts), client)
        return page

    def _facts_page(self, answer_id: int, facts: Facts, start: int) -> Page:
        def cursor(end: int) -> str | None:
            return self._cursor(answer_id, end, 0) if end < len(facts.order) else None

        return _facts_page(facts, start, cursor, answer_id)

    # -- later pages ---------------------------------------------------------------------------

    def next_page(self, cursor: str, tool: str, request: bytes) -> Page:
        """The page a cursor points at. CursorError when it is malformed, forged, expired, or made
        for another tool or other arguments."""
        start_again = f"Call {tool} again without a cursor to start from the first page."
        answer_id, unit, part = self._open(cursor, start_again)
        with self._lock:
            answer = self._answers.get(answer_id)
            if answer is not None:
                self._answers.move_to_end(answer_id)
                self._of_client[self._client_of[answer_id]].move_to_end(answer_id)
        if answer is None:
            raise CursorError(f"This cursor has expired: the server keeps the pages of each client's last {self.keep} "
                              f"cut answers ({self.keep_in_all} in all, fewer when they are large) and forgets them all "
                              f"when it restarts. {start_again}")
        if answer.tool != tool:
            raise CursorError(f"This cursor continues an answer of {answer.tool}, not of {tool}: pass it to "
                              f"{answer.tool} with the same arguments as before, or call {tool} without a cursor.")
        if answer.request != request:
            raise CursorError(f"This cursor continues a {tool} call with other arguments: pass the same arguments "
                              f"as for the first page together with the cursor, or call {tool} again without a "
                              "cursor to start over.")
        with self._lock:
            ahead = self._ahead
        if ahead is not None and ahead[0] == (answer_id, unit, part):
            return ahead[1]
        return self._page(answer_id, answer, unit, part, first=False)

    def prepare(self, page: Page) -> None:
        """Makes the page after `page` now, text included, for the cursor `page` gave. A client that
        follows cursors reads one page while the next is made, and finds it ready when it asks (the
        checks of its cursor stay the same); only the latest one is kept."""
        if page.following is None:
            return
        answer_id, unit, part = page.following
        with self._lock:
            answer = self._answers.get(answer_id)
        if answer is None:
            return
        made = self._page(answer_id, answer, unit, part, first=False)
        made = Page(made.json, made.notes, made.following, _encoder.encode(made.json.decode()))
        with self._lock:
            self._ahead = (page.following, made)

    def _cursor(self, answer_id: int, unit: int, part: int) -> str:
        payload = _PAYLOAD.pack(answer_id, unit, part)
        tag = _signature(self._key, payload)
        return base64.urlsafe_b64encode(payload + tag).rstrip(b"=").decode("ascii")

    def _open(self, cursor: str, start_again: str) -> tuple[int, int, int]:
        invalid = CursorError("This cursor is not valid: pass nextCursor back exactly as the last page gave it, to "
                              f"the same server process (cursors do not survive a restart). {start_again}")
        if len(cursor) != CURSOR_LENGTH or not cursor.isascii():
            raise invalid
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except ValueError:
            raise invalid from None
        payload, tag = raw[:_PAYLOAD.size], raw[_PAYLOAD.size:]
        expected = _signature(self._key, payload)
        if len(raw) != _PAYLOAD.size + _TAG_BYTES or not hmac.compare_digest(tag, expected):
            raise invalid
        answer_id, unit, part = _PAYLOAD.unpack(payload)
        return answer_id, unit, part

    # -- cutting one page ----------------------------------------------------------------------

    def _page(self, answer_id: int, answer: Answer, unit: int, part: int, *, first: bool) -> Page:
        if answer.facts is not None:
            return self._facts_page(answer_id, answer.facts, unit)
        summary = answer.summary if first else None
        # Room for the note as long as it can be (its numbers at their longest), not more: a page
        # holds as many units as fit. Notes about split entities, rare, take their room when made.
        if (note_room := answer.note_rooms.get(first)) is None:
            longest = self._note(answer, 0, _Fill(len(answer.units) - 1, 0), first)
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
        return Page(b"".join(pieces), (self._note(answer, unit, fill, first),), following)

    def _note(self, answer: Answer, start: int, fill: _Fill, first: bool) -> str:
        split = answer.entities
        relations = len(answer.units) - split
        done_entities = min(fill.unit + (1 if fill.part else 0), split)
        shown_entities = _span("entity", "entities", start + 1, done_entities)
        first_relation, done_relations = max(start - split, 0), max(fill.unit - split, 0)
        shown_relations = _span("relation", "relations", first_relation + 1, done_relations)
        tool = answer.tool
        lines = [f"This {tool} answer is too large for one reply ({split:,} entities and {relations:,} relations; "
                 f"the answer budget is {self.budget:,} characters), so it comes in pages. This page holds "
                 f"{shown_entities} and {shown_relations}."]
        if first and answer.summary is not None:
            lines.append("The summary at the top counts the entities by type and names the most connected ones: "
                         "open_nodes or search_nodes them to read just what you need.")
        if fill.unit < len(answer.units):
            same = {"read_graph": "", "search_nodes": " with the same query and limit",
                    "open_nodes": " with the same names"}.get(tool, " with the same arguments")
            narrow = {"read_graph": "search_nodes with a query or open_nodes with names",
                      "search_nodes": "a narrower query or a limit",
                      "open_nodes": "fewer names"}.get(tool, "narrower arguments")
            lines.append(f"Left for the next pages: {split - min(fill.unit, split):,} entities and "
                         f"{relations - done_relations:,} relations. To get them, call {tool} again{same} with "
                         f"cursor set to this answer's nextCursor; or narrow it down with {narrow}.")
        else:
            lines.append("This is the last page.")
        if not first:
            lines.append("Pages show the memory as it was when the first page was made; changes since then are "
                         "not in them.")
        return " ".join(lines + fill.events)


# --------------------------------------------------------------------------------------------
# Pages of facts (search answers)
# --------------------------------------------------------------------------------------------

_FACT_NOTE_ROOM: Final = 380
"""Bytes kept for a page's note (the longest it can be, but for names in it)."""
RELATION_SHARE: Final = 4
LEAST_ENTITIES: Final = 5
"""Entities a page of an answer by words shows at least, when that many matched and they fit
STRETCH times the page's size."""
STRETCH: Final = 3
"""Relations take at most 1/RELATION_SHARE of a page that has facts left for it."""


def partial_marker(shown: int, total: int) -> str:
    """What an entity shown with only some of its observations says about itself."""
    return f"{shown:,} of {total:,} observations shown; open_nodes gives all"


class _FactFill(msgspec.Struct):
    end: int
    shown: dict[int, list[str]]
    """Entity position -> the observations shown (a cut one carries its marker)."""
    indexes: dict[int, list[int]]
    relations: list[Any]
    more_relations: int
    cut: list[str]


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
        if fill.end < len(facts.order) and facts.relations:
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


_source_of: Final = itemgetter("from")
_target_of: Final = itemgetter("to")


def _touching(facts: Facts, shown: Mapping[int, Any]) -> list[tuple[bool, Any, int]]:
    """The relations touching the entities shown, in graph order, each with whether both its
    ends are shown and its size (with a comma)."""
    key = frozenset(shown)
    memo = facts.memo
    if memo.get("touching", (None,))[0] == key:
        return memo["touching"][1]
    sizes: dict[int, int] = memo.setdefault("sizes", {})
    if (ends := memo.get("ends")) is None:
        ends = memo["ends"] = (list(map(_source_of, facts.relations)), list(map(_target_of, facts.relations)))
    names = {facts.entities[position]["name"] for position in shown}
    touching = []
    # A page holds few entities, an answer may touch thousands of relations: picked in C, no
    # Python code per relation.
    count = len(facts.relations)
    numbers = set(compress(range(count), map(names.__contains__, ends[0])))
    numbers.update(compress(range(count), map(names.__contains__, ends[1])))
    for number in sorted(numbers):
        relation = facts.relations[number]
        if (size := sizes.get(number)) is None:
            size = sizes[number] = len(_encoder.encode(relation)) + 1
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


def _facts_note(facts: Facts, fill: _FactFill, start: int, more: bool, partial: int) -> str:
    shown = sum(len(observations) for observations in fill.shown.values())
    how = "best first" if facts.words else "entities holding the query, most relevant first"
    lines = [f"search_nodes: {_count(shown, 'observation')} of {_count(len(fill.shown), 'entity')}, {how} "
             f"(facts {start + 1:,}-{fill.end:,} of {len(facts.order):,}, from "
             f"{_count(len(facts.entities), 'matching entity')})."]
    if facts.remark:
        lines.insert(0, facts.remark)
    if partial:
        lines.append('An entity marked "partial" has more observations: open_nodes gives it whole.')
    if fill.more_relations:
        lines.append(f"{_count(fill.more_relations, 'more relation')} touch the entities shown: open_nodes "
                     "gives them.")
    if more:
        lines.append("More: the same arguments with cursor set to nextCursor (or a larger characters).")
    return " ".join(lines + fill.cut)


def _count(number: int, thing: str) -> str:
    if number == 1:
        return f"1 {thing}"
    plural = thing[:-1] + "ies" if thing.endswith("y") else thing + "s"
    return f"{number:,} {plural}"


def _without_last_comma(pieces: list[memoryview]) -> list[memoryview]:
    return [*pieces[:-1], pieces[-1][:-1]] if pieces else []


def _signature(key: bytes, payload: bytes) -> bytes:
    """A cursor's tag: keyed BLAKE2b, a MAC in one call of the standard library (HMAC through
    OpenSSL looks its digest up again on every call, which a page paid for twice)."""
    return hashlib.blake2b(payload, key=key[:64], digest_size=_TAG_BYTES).digest()


def _span(one: str, many: str, first: int, last: int) -> str:
    if last < first:
        return f"no {many}"
    return f"{one} {first:,}" if first == last else f"{many} {first:,} to {last:,}"


__all__ = [
    "BUDGET_VARIABLE",
    "CURSOR_LENGTH",
    "DEFAULT_BUDGET",
    "MINIMUM_BUDGET",
    "Answer",
    "CursorError",
    "FactOrder",
    "Facts",
    "Page",
    "Pager",
    "budget_from",
    "entity_parts",
    "partial_marker",
    "request_key",
    "take_fitting",
]
