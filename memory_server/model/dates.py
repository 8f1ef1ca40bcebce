"""When things were recorded and when they happened: the dates of entities and observations.

Stored on the entity's line, after the reference server's keys, each field optional:

- ``createdAt``, ``updatedAt``: when the entity was created here, and when its line last changed
  (its type, or an observation added or deleted): a UTC stamp such as ``2026-12-01T12:51:29Z``.
- ``recordedAt``: parallel to ``observations``, when each observation was added (a stamp), or
  null when unknown (written before this version, or imported without one).
- ``happenedOn``: parallel to ``observations``, when what the observation tells happened, as
  the model was told (``2023``, ``2023-05``, ``2023-05-07`` or a UTC stamp), or null; absent
  while no observation of the entity has one.

Guarantees:

1. A record without dates encodes exactly as before (and as the reference writes it); the
   reference reads only its own keys, so it loads a dated file whole.
2. A date list whose length is not that of ``observations`` (a program that kept the field
   while changing the observations) dates none of them; it stays on the line as written until
   a write changes the entity, which puts an aligned list there (the old observations undated).
3. A stamp that does not parse is an unknown date, kept as written.
4. Everything here is pure: the writes are given the time (``now``) by their caller; without
   one (None) they record no new date and keep the ones there, so the graph's operations
   stay deterministic and a store without a clock writes exactly the reference's lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Final, TypeAlias

import msgspec

from .records import EntityRecord

Span: TypeAlias = tuple[datetime, datetime]
"""A stretch of time, start included and end excluded, both in UTC."""

ACCEPTED: Final = ("an ISO 8601 date or date-time: 2023, 2023-05, 2023-05-07, 2023-05-07T14:30, "
                   "2023-05-07T14:30:00Z or 2023-05-07T14:30:00+02:00 (no offset: UTC)")
"""What a date given to a tool may look like; every error about a date says it."""

_END_OF_TIME: Final = datetime.max.replace(tzinfo=UTC)
_DATE: Final = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")
_DATE_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|z|[+-]\d{2}:?\d{2})?")


def stamp_of(moment: datetime) -> str:
    """The stored form of a moment: UTC, to the second, the year in four digits (strftime's %Y
    writes the year 999 as ``999``, which no date pattern reads back and which sorts after 2026)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    m = moment.astimezone(UTC)
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}Z"


def _after(start: datetime, length: timedelta) -> datetime:
    """The end of a span that starts at `start`: the last day, month or second of the year 9999
    ends at the end of time, which datetime cannot pass."""
    return start + length if _END_OF_TIME - start >= length else _END_OF_TIME


def now_stamp() -> str:
    return stamp_of(datetime.now(UTC))


DATES_VARIABLE: Final = "MEMORY_DATES"


def clock_from(environ: Mapping[str, str]) -> Callable[[], str] | None:
    """The clock a server's writes record (UTC, see :func:`now_stamp`); None (no dates written,
    lines exactly as the reference writes them) when MEMORY_DATES is off, 0, false or no.
    SettingError (model/switch.py) for a value that is neither on nor off."""
    from .switch import switch

    return now_stamp if switch(environ, DATES_VARIABLE) else None


# --------------------------------------------------------------------------------------------
# Dates as given (tool arguments) and as stored
# --------------------------------------------------------------------------------------------


def parse_when(text: str) -> tuple[Span, str]:
    """A date given to a tool: the span it covers and its stored form.

    ``2023`` is that year, ``2023-05`` that month, ``2023-05-07`` that day (stored as written);
    a date-time is that second (stored as a UTC stamp). Every year from 0001 to 9999 is one (the
    last day of 9999 ends at the end of time). ValueError, saying what is accepted, otherwise."""
    cleaned = text.strip()
    moment: datetime | None = None
    try:
        if (day := _DATE.fullmatch(cleaned)) is not None:
            year, month, date = int(day[1]), int(day[2] or 1), int(day[3] or 1)
            start = datetime(year, month, date, tzinfo=UTC)
            if day[3]:
                end = _after(start, timedelta(days=1))
            elif day[2]:
                end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC) if (year, month) < (9999, 12) \
                    else _END_OF_TIME
            else:
                end = datetime(year + 1, 1, 1, tzinfo=UTC) if year < 9999 else _END_OF_TIME
            return (start, end), cleaned
        if _DATE_TIME.fullmatch(cleaned) is not None:
            moment = datetime.fromisoformat(cleaned.replace(" ", "T").replace("z", "Z").replace(",", "."))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            moment = moment.astimezone(UTC).replace(microsecond=0)
            return (moment, _after(moment, timedelta(seconds=1))), stamp_of(moment)
    except (ValueError, OverflowError):
        if moment is not None:  # read, but its offset moves it out of the years datetime holds
            raise ValueError(f"{text!r} falls outside the years 0001 to 9999 in UTC; give it in UTC "
                             "(Z, or no offset)") from None
    raise ValueError(f"{text!r} is not a date; expected {ACCEPTED}")


_SHORT_YEAR_STAMP: Final = re.compile(r"(\d{1,3})(-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)")


def _four_digit_year(stored: str) -> str:
    """A stamp as an earlier version wrote a year before 1000 (``999-05-07T10:00:00Z``, strftime's
    %Y unpadded) in the form written now; any other text as it is."""
    if (short := _SHORT_YEAR_STAMP.fullmatch(stored)) is None:
        return stored
    return f"{int(short[1]):04d}{short[2]}"


@lru_cache(maxsize=65_536)
def stored_span(text: str) -> Span | None:
    """The span of a stored date (a stamp, or a date as the model gave it); None: not a date."""
    try:
        return parse_when(_four_digit_year(text))[0]
    except ValueError:
        return None


_STAMP_SHAPE: Final = re.compile(r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\dZ")


@lru_cache(maxsize=65_536)
def compact_day(stamp: str | None) -> str | None:
    """A stored date as an answer shows it: a stamp by its UTC day, a date as it was given."""
    if stamp is None:
        return None
    if _STAMP_SHAPE.fullmatch(stamp) is not None:
        return stamp[:10]  # every load shows the day of each stamp: the shape is checked in C, no parse
    if stored_span(stamp) is None:
        return None
    stamp = _four_digit_year(stamp)
    return stamp[:10] if "T" in stamp else stamp


@lru_cache(maxsize=65_536)
def compact(recorded: str | None, happened: str | None) -> str | None:
    """One observation's dates as an answer shows them: ``2026-12-01`` (recorded that day),
    ``happened 2023-05-07, recorded 2026-12-01``, ``happened 2023-05-07``, or None (unknown)."""
    day, when = compact_day(recorded), compact_day(happened)
    if when is None:
        return day
    return f"happened {when}" if day is None else f"happened {when}, recorded {day}"


# --------------------------------------------------------------------------------------------
# The dates of a record
# --------------------------------------------------------------------------------------------


def _aligned(values: list[str | None] | None, count: int) -> list[str | None]:
    if values is None or len(values) != count:
        return [None] * count
    return values


def recorded_dates(record: EntityRecord) -> list[str | None]:
    """When each observation was recorded (None: unknown), in observation order."""
    return _aligned(record.recordedAt, len(record.observations))


def happened_dates(record: EntityRecord) -> list[str | None]:
    """When what each observation tells happened (None: not given), in observation order."""
    return _aligned(record.happenedOn, len(record.observations))


def is_dated(record: EntityRecord) -> bool:
    return not (record.createdAt is None and record.updatedAt is None and record.recordedAt is None
                and record.happenedOn is None)


def answer_dates(record: EntityRecord, order: Sequence[int] | None = None) -> dict[str, Any]:
    """What an answer's entity object shows of the record's dates, compactly, only what is known:
    ``createdAt``, ``updatedAt`` (UTC days) and ``observationDates``, parallel to the observations
    shown. `order`: the observations shown, as indexes into the record's (default: all, in order),
    for an answer that shows some of them, or in another order."""
    if not is_dated(record):
        return {}
    shown: dict[str, Any] = {}
    if (created := compact_day(record.createdAt)) is not None:
        shown["createdAt"] = created
    if (updated := compact_day(record.updatedAt)) is not None:
        shown["updatedAt"] = updated
    recorded, happened = recorded_dates(record), happened_dates(record)
    indexes: Iterable[int] = range(len(record.observations)) if order is None else order
    dates = [compact(recorded[index], happened[index]) for index in indexes]
    if any(date is not None for date in dates):
        shown["observationDates"] = dates
    return shown


def shown_dates(view: Mapping[str, Any], indexes: Sequence[int]) -> dict[str, Any]:
    """The dates an answer's entity object (`view`, as :func:`answer_dates` made it, from the graph
    or the index cache) shows when it shows only the observations at `indexes`, in that order: for
    answers that pick and reorder observations (a search made of facts)."""
    shown = {key: view[key] for key in ("createdAt", "updatedAt") if key in view}
    if (every := view.get("observationDates")) is not None:
        picked = [every[index] for index in indexes if 0 <= index < len(every)]
        if any(date is not None for date in picked):
            shown["observationDates"] = picked
    if (written_by := view.get("observationAuthors")) is not None:  # the authors too (see .authors)
        picked = [written_by[index] for index in indexes if 0 <= index < len(written_by)]
        if any(author is not None for author in picked):
            shown["observationAuthors"] = picked
    return shown


def stored_dates(record: EntityRecord) -> dict[str, Any]:
    """The record's date fields as stored (for exports that carry them whole), only those it has."""
    return {key: value for key in ("createdAt", "updatedAt", "recordedAt", "happenedOn")
            if (value := getattr(record, key)) is not None}


def latest(record: EntityRecord, indexes: Iterable[int] | None = None) -> str:
    """The latest stored date among the given observations (default: the entity's own and all of
    them), comparable as text; empty when none is known. For recency as a tie-break."""
    recorded, happened = recorded_dates(record), happened_dates(record)
    chosen = range(len(record.observations)) if indexes is None else indexes
    dates = [date for index in chosen for date in (recorded[index], happened[index])]
    if indexes is None:
        dates.append(record.updatedAt)
    spans = [span for date in dates if date is not None and (span := stored_span(date)) is not None]
    return max((stamp_of(span[0]) for span in spans), default="")


def overlaps(date: str | None, window: Span) -> bool:
    if date is None or (span := stored_span(date)) is None:
        return False
    return span[0] < window[1] and window[0] < span[1]


def in_window(record: EntityRecord, window: Span) -> list[int]:
    """The observations (indexes) recorded, or told to have happened, within the window."""
    recorded, happened = recorded_dates(record), happened_dates(record)
    return [index for index in range(len(record.observations))
            if overlaps(recorded[index], window) or overlaps(happened[index], window)]


# --------------------------------------------------------------------------------------------
# Writes: the record after a change, its dates kept in step with its observations
# --------------------------------------------------------------------------------------------


def _known_list(values: list[str | None]) -> list[str | None] | None:
    return values if any(value is not None for value in values) else None


def created(name: str, entity_type: str, observations: list[str], now: str | None,
            happened: str | None = None) -> EntityRecord:
    """A new entity, created `now` (None: no time known), its observations recorded then and,
    with `happened` (stored form), told to have happened then."""
    return EntityRecord(name, entity_type, observations, now, now,
                        [now] * len(observations) if now is not None and observations else None,
                        [happened] * len(observations) if happened is not None and observations else None)


def with_added(record: EntityRecord, added: Sequence[tuple[str, str | None, str | None]],
               now: str | None) -> EntityRecord:
    """The record with observations appended, each (content, recorded, happened); changed `now`."""
    recorded = list(recorded_dates(record)) + [when for _, when, _ in added]
    happened = list(happened_dates(record)) + [when for _, _, when in added]
    return EntityRecord(record.name, record.entityType, [*record.observations, *(text for text, _, _ in added)],
                        record.createdAt, now or record.updatedAt, _known_list(recorded), _known_list(happened))


def with_kept(record: EntityRecord, keep: Sequence[bool], now: str | None) -> EntityRecord:
    """The record with only the observations whose `keep` is true, their dates with them; changed `now`."""
    recorded, happened = recorded_dates(record), happened_dates(record)
    chosen = [index for index, wanted in enumerate(keep) if wanted]
    return EntityRecord(record.name, record.entityType, [record.observations[index] for index in chosen],
                        record.createdAt, now or record.updatedAt, _known_list([recorded[index] for index in chosen]),
                        _known_list([happened[index] for index in chosen]))


def incoming(record: EntityRecord) -> list[tuple[str, str | None, str | None]]:
    """Each observation of a record to merge, with its dates (for import)."""
    return list(zip(record.observations, recorded_dates(record), happened_dates(record), strict=True))


def undated(record: EntityRecord) -> EntityRecord:
    """The record as the reference server saves it: its dates (and authors) gone, every observation kept."""
    return msgspec.structs.replace(record, createdAt=None, updatedAt=None, recordedAt=None, happenedOn=None,
                                   recordedBy=None)
