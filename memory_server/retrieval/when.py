"""Time in a search: the window a query or the since/until arguments name, and the search within it.

:func:`parse_query` is pure: a query and the time now go in; the query without its time phrase
and the window the phrase names come out. Phrases understood (any case, as whole words):

- ``today``, ``yesterday``, ``this morning`` / ``tonight`` (today);
- ``this week`` / ``month`` / ``year``: from its start to now;
- ``last week`` / ``month`` / ``year``: from the start of the previous one to now (what a person
  calls last week often happened a few days ago: the window is generous, ranking orders it);
- ``past`` / ``last`` N ``days`` / ``weeks`` / ``months`` / ``years`` (also ``few``, ``couple of``):
  the N units before now;
- N ``days`` / ``weeks`` / ``months`` / ``years ago``: from the unit before that one to the unit
  after it (``two weeks ago``: the calendar weeks three to one weeks back; ``3 days ago``: 4 to 2
  days back), never past now;
- ``last monday`` ... ``last sunday``, ``on monday``: the most recent such day before today;
- a date: ``2023-05-07``, ``2023-05``, ``in 2023``, ``may 2023``, ``in may``, ``may 7``,
  ``7 may 2023``, ``may 7, 2023`` (a month without a year is its latest one not after now; a bare
  month name is a date only after in, on, during, since, before, until, after or by, or with a
  day or year: "may" alone is a verb);
- ``since`` / ``after`` X: from X on; ``before`` / ``until`` X: up to X;
- seasons: ``spring``, ``summer``, ``autumn`` / ``fall``, ``winter`` after ``last``, ``this``,
  ``over the``, ``in the``, ``during the``, ``the``, or with a year (``summer 2025``, ``the winter of
  2025``): meteorological seasons of the hemisphere :data:`HEMISPHERE_VARIABLE` names (default
  north: spring is March to May, winter December to February; south: spring is September to
  November). ``last`` S is the latest S that has ended; ``this`` S and the others the S under way
  for a month at least, else the latest that has ended; S of a year Y is the one that starts in Y (a winter of Y starts
  in its December... except that ``winter 2025`` means the winter holding January 2025);
- ``since`` or ``after`` an event (``since we moved``, ``since I started at Acme``, ``after moving
  in with Liv``): from the date of the fact
  that best answers the event's words (its ``happenedOn``, else when it was recorded), given by the
  caller as `events`; no such dated fact, no window.

"Now" is the caller's clock: the server's, in UTC.

Guarantees (for :func:`search`):

1. A query that entities contain whole is answered exactly as without a window (the reference's
   rule). With `since` or `until` given, the query is taken as it is (no phrase in it names a
   time) and its matches, by the usual rules, are kept within their window.
2. Otherwise the entities that match the remaining words (all of them when no word is left but
   filler such as "what did I tell you") and have an answering observation recorded, or told to
   have happened, within the window are the matches: an observation answers when it holds the
   words (the whole of them, or a term of them, by the rule that matched), or any within the
   window when the entity's name or type holds them. Each shows its answering observations, most
   recent first, and is marked ``partial`` when it holds others. A query that asks nothing but a
   time is paged as facts are (:func:`facts_within`: a glance a page, a cursor for the rest).
3. Order: the word rules' relevance first; recency (the latest date within the window) breaks
   ties, then graph order.
4. A window named by the query's own words (not `since`/`until`) within which nothing answers
   does not empty the answer: search_nodes then answers the whole query as without a window, and
   its note says so (:func:`nothing_within`). A fact told long after it happened ("we went camping
   in June", recorded in December) carries no date of that June: its words still find it.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from ..model import authors, dates
from ..model.dates import Span
from .scope import content_terms
from .time_words import DAYS as _DAYS
from .time_words import MONTHS as _MONTHS
from .time_words import SEASONS as _SEASONS
from .time_words import UNITS as _UNITS

if TYPE_CHECKING:
    from ..model.graph import Graph, Node
    from .paging.pages import Facts

MAX_PHRASE_QUERY: Final = 500
"""Characters of a query beyond which no time phrase is looked for (each pattern is a pass over it)."""
_COUNTS: Final = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                  "eight": 8, "nine": 9, "ten": 10, "few": 3, "couple of": 2, "a couple of": 2, "a few": 3}
_LEAD: Final = r"(?:in|on|during|since|before|until|till|after|by|from)"
HEMISPHERE_VARIABLE: Final = "MEMORY_HEMISPHERE"
HEMISPHERES: Final = ("north", "south")
_OPEN: Final = {"since": "from", "after": "from", "from": "from", "before": "to", "until": "to", "till": "to", "by": "to"}

_month = "|".join(sorted(_MONTHS, key=len, reverse=True))
_day = "|".join(_DAYS)
_count = r"\d{1,3}|" + "|".join(sorted(map(re.escape, _COUNTS), key=len, reverse=True))
_unit = "|".join(_UNITS)
_season = "|".join(_SEASONS)

# What every pattern below needs one of: a digit, or one of these words standing alone (the
# same engine and flags, so a query without any matches none of them). A query without any is
# left whole without the patterns being compiled (2 ms, which a first search paid otherwise).
_TRIGGER: Final = re.compile(r"\d|\b(?:" + "|".join(sorted(
    {*_MONTHS, *_DAYS, *_SEASONS, "today", "tonight", "this", "yesterday", "ago", "past", "last", "previous",
     "since", "after"},
    key=len, reverse=True)) + r")\b", re.I)


@cache
def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    """Each pattern names its groups; the first that matches (in this order) is the query's window."""
    return [
        ("iso", re.compile(rf"(?:(?P<lead>{_LEAD})\s+)?(?P<date>\d{{4}}-\d{{2}}(?:-\d{{2}})?)\b", re.I)),
        ("day_month_year", re.compile(rf"(?:(?P<lead>{_LEAD})\s+)?(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+"
                                      rf"(?P<m>{_month})\.?(?:,?\s+(?P<y>\d{{4}}))?\b", re.I)),
        ("month_day_year", re.compile(rf"(?:(?P<lead>{_LEAD})\s+)?(?P<m>{_month})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b"
                                      rf"(?:,?\s+(?P<y>\d{{4}}))?(?!\d)", re.I)),
        ("month_year", re.compile(rf"(?:(?P<lead>{_LEAD})\s+)?(?P<m>{_month})\.?,?\s+(?P<y>\d{{4}})\b", re.I)),
        ("lead_month", re.compile(rf"(?P<lead>{_LEAD})\s+(?P<m>{_month})\b", re.I)),
        ("season_year", re.compile(rf"(?:(?P<lead>{_LEAD})\s+)?(?:the\s+)?(?P<season>{_season})\s+(?:of\s+)?"
                                   rf"(?P<y>(?:19|20)\d{{2}})\b", re.I)),
        ("season", re.compile(rf"\b(?:(?P<lead>{_LEAD}|over)\s+)?(?:(?P<which>last|this|past|previous)\s+|the\s+)"
                              rf"(?P<season>{_season})\b|\b(?P<lead2>in|during|over)\s+(?P<bare>{_season})\b", re.I)),
        ("year", re.compile(rf"(?P<lead>{_LEAD})\s+(?:the\s+year\s+)?(?P<y>(?:19|20)\d{{2}})\b", re.I)),
        ("today", re.compile(r"(?:(?P<lead>since|until|before)\s+)?\b(?P<word>today|tonight|this\s+morning|"
                             r"this\s+afternoon|this\s+evening)\b", re.I)),
        ("yesterday", re.compile(r"(?:(?P<lead>since|until|before)\s+)?\b(?:the\s+day\s+before\s+)?(?P<word>yesterday)\b",
                                 re.I)),
        ("ago", re.compile(rf"\b(?P<n>{_count})\s+(?P<unit>{_unit})\s+ago\b", re.I)),
        ("past", re.compile(rf"\b(?:in\s+|over\s+|during\s+|within\s+)?(?:the\s+)?(?:past|last|previous)\s+"
                            rf"(?P<n>{_count})\s+(?P<unit>{_unit})\b", re.I)),
        ("weekday", re.compile(rf"\b(?:(?P<lead>on|since)\s+)?(?:(?P<last>last)\s+)?(?P<wd>{_day})\b", re.I)),
        ("this", re.compile(rf"\b(?:(?P<lead>{_LEAD})\s+)?this\s+(?P<unit>week|month|year)\b", re.I)),
        ("last", re.compile(rf"\b(?:(?P<lead>{_LEAD})\s+)?(?:the\s+)?(?:last|previous|past)\s+(?P<unit>week|month|year)\b",
                            re.I)),
    ]


def _day_start(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    while month < 1:
        year, month = year - 1, month + 12
    while month > 12:
        year, month = year + 1, month - 12
    return datetime(year, month, 1, tzinfo=UTC)


def _unit_span(unit: str, moment: datetime) -> Span:
    """The calendar day, week (Monday first), month or year holding `moment`."""
    day = _day_start(moment)
    if unit == "day":
        return day, day + timedelta(days=1)
    if unit == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if unit == "month":
        start = _month_start(day.year, day.month)
        return start, _month_start(day.year, day.month + 1)
    return datetime(day.year, 1, 1, tzinfo=UTC), datetime(day.year + 1, 1, 1, tzinfo=UTC)


def _back(moment: datetime, unit: str, count: int) -> datetime:
    if unit == "day":
        return moment - timedelta(days=count)
    if unit == "week":
        return moment - timedelta(weeks=count)
    months = count * (12 if unit == "year" else 1)
    start = _month_start(moment.year, moment.month - months)
    return start.replace(day=min(moment.day, calendar.monthrange(start.year, start.month)[1]),
                         hour=moment.hour, minute=moment.minute, second=moment.second)


def _count_of(text: str) -> int:
    cleaned = " ".join(text.lower().split())
    return int(cleaned) if cleaned.isdigit() else _COUNTS[cleaned]


def hemisphere_from(environ: Mapping[str, str]) -> str:
    """MEMORY_HEMISPHERE: north (the default, also unset or empty) or south; ValueError saying so."""
    raw = environ.get(HEMISPHERE_VARIABLE, "").strip().lower()
    if not raw:
        return HEMISPHERES[0]
    if raw not in HEMISPHERES:
        raise ValueError(f"{HEMISPHERE_VARIABLE} must be north or south (the seasons a question names; "
                         f"default north, unset or empty for the default); got {environ[HEMISPHERE_VARIABLE]!r}")
    return raw


def season_span(season: str, year: int, hemisphere: str = "north") -> Span:
    """The season (meteorological: three whole months) that starts in `year`."""
    first = _SEASONS[season.lower()] + (6 if hemisphere == "south" else 0)
    start = _month_start(year, first)
    return start, _month_start(start.year, start.month + 3)


def _season_around(season: str, now: datetime, hemisphere: str, *, ended: bool) -> Span:
    """The season under way at `now` (unless `ended`), else the latest that has ended by now."""
    for year in (now.year + 1, now.year, now.year - 1, now.year - 2):
        span = season_span(season, year, hemisphere)
        # (a season begun less than a month ago is not yet the one a person talks of)
        if span[1] <= now or (not ended and span[0] + timedelta(days=30) <= now):
            return span
    return season_span(season, now.year - 2, hemisphere)


def _span(kind: str, found: re.Match[str], now: datetime, hemisphere: str = "north") -> Span | None:
    groups = found.groupdict()
    today = _day_start(now)
    if kind == "season_year":
        year = int(groups["y"])
        season = groups["season"].lower()
        # "winter 2025" is the winter holding January 2025 (it starts in the December before)
        starts = season_span(season, year, hemisphere)
        if starts[0].year == year and starts[1].year > year:
            starts = season_span(season, year - 1, hemisphere)
        return starts
    if kind == "season":
        season = (groups.get("season") or groups.get("bare") or "").lower()
        which = (groups.get("which") or "").lower()
        return _season_around(season, now, hemisphere, ended=which in ("last", "past", "previous"))
    if kind == "iso":
        try:
            return dates.parse_when(groups["date"])[0]
        except ValueError:
            return None
    if kind in ("day_month_year", "month_day_year", "month_year", "lead_month"):
        month = _MONTHS[groups["m"].lower()]
        year = int(groups["y"]) if groups.get("y") else (now.year if month <= now.month else now.year - 1)
        if groups.get("d"):
            day = int(groups["d"])
            if not 1 <= day <= calendar.monthrange(year, month)[1]:
                return None
            if not groups.get("y") and datetime(year, month, day, tzinfo=UTC) > now:
                year -= 1
            start = datetime(year, month, day, tzinfo=UTC)
            return start, start + timedelta(days=1)
        return _month_start(year, month), _month_start(year, month + 1)
    if kind == "year":
        year = int(groups["y"])
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    if kind == "today":
        return today, today + timedelta(days=1)
    if kind == "yesterday":
        start = today - timedelta(days=2 if found.group(0).lower().startswith("the day before") else 1)
        return start, start + timedelta(days=1)
    if kind == "ago":
        # A person's "two weeks ago" is rarely the calendar week: from the unit before it to the
        # unit after it (the ranking orders what the window keeps), never past now.
        unit = _UNITS[groups["unit"].lower()]
        count = _count_of(groups["n"])
        start = _unit_span(unit, _back(now, unit, count + 1))[0]
        end = _unit_span(unit, _back(now, unit, count - 1))[1] if count > 1 or unit != "day" else today
        return start, min(end, now + timedelta(seconds=1))
    if kind == "past":
        unit = _UNITS[groups["unit"].lower()]
        return _back(now, unit, _count_of(groups["n"])), now + timedelta(seconds=1)
    if kind == "weekday":
        if not (groups.get("lead") or groups.get("last")):
            return None  # a bare day name ("Monday meetings") names no date
        back = (today.weekday() - _DAYS[groups["wd"].lower()]) % 7 or 7
        start = today - timedelta(days=back)
        return start, start + timedelta(days=1)
    if kind == "this":
        return _unit_span(groups["unit"].lower(), now)
    if kind == "last":
        unit = groups["unit"].lower()
        return _unit_span(unit, _back(now, unit, 1))[0], now + timedelta(seconds=1)
    return None


def _opened(span: Span, lead: str | None, now: datetime) -> Span:
    """`since X`: from the start of X on; `before X`: up to its start; `until X`: to its end."""
    side = _OPEN.get((lead or "").lower())
    if side == "from":
        return span[0], datetime.max.replace(tzinfo=UTC)
    if side == "to":
        end = span[0] if (lead or "").lower() == "before" else span[1]
        return datetime.min.replace(tzinfo=UTC), end
    return span


_SINCE_EVENT: Final = re.compile(
    r"\b(?:[Ss]ince|[Aa]fter)\s+(?P<event>(?i:we|i|you|he|she|they|my|our|his|her|their|the)\s+[^?.!,;]{2,60}?"
    r"|[a-z]+ing\s+[^?.!,;]{0,40}?\b[A-Z][^?.!,;]{0,30}?)\s*(?=[?.!,;]|$)")
"""An event the question counts from: "since we moved", "after moving in with Liv" (a subject, or a
verb in -ing with a name: not "after dinner", nor the every day of "after waking up")."""

Events = Callable[[str], "datetime | None"]
"""The date of the fact that best answers some words (None: no dated fact answers them)."""


def parse_query(query: str, now: datetime, *, hemisphere: str = "north",
                events: Events | None = None) -> tuple[str, Span | None]:
    """The query without its time phrase, and the window the phrase names (None: no phrase).

    Pure but for `events`: `now` (aware, UTC) is what "today" and "last week" are counted from;
    `events` dates the event of "since we moved". A query longer than MAX_PHRASE_QUERY characters
    is a pasted text, not a question about a time: it is left whole."""
    if len(query) > MAX_PHRASE_QUERY or not _TRIGGER.search(query):
        return query, None
    for kind, pattern in _patterns():
        for found in pattern.finditer(query):
            try:
                span = _span(kind, found, now, hemisphere)
            except (ValueError, OverflowError, KeyError):
                span = None
            if span is None:
                continue
            groups = found.groupdict()
            window = _opened(span, groups.get("lead") or groups.get("lead2"), now)
            rest = query[:found.start()] + " " + query[found.end():]
            return _tidy(rest), window
    if events is not None and (since := _SINCE_EVENT.search(query)) is not None:
        event = since.group("event")
        if content_terms(event) and (start := events(event)) is not None and start < now:
            rest = query[:since.start()] + " " + query[since.end():]
            return _tidy(rest), (start, datetime.max.replace(tzinfo=UTC))
    return query, None


_DANGLING: Final = re.compile(rf"\b{_LEAD}\s*(?=[?.!,]*\s*$)", re.I)


def _tidy(text: str) -> str:
    text = _DANGLING.sub("", text)
    text = re.sub(r"(?:^|(?<=\s))['’]s\b", "", text)  # "this morning's run": the possessive went with the phrase
    text = re.sub(r"\s+([?.!,])", r"\1", text)
    return " ".join(text.split()).strip(" ,")


def window_of(since: str | None, until: str | None) -> Span | None:
    """The window the since/until arguments give (each ISO 8601; until includes its whole day,
    month or year); ValueError saying what is accepted, naming the argument."""
    if since is None and until is None:
        return None
    start, end = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
    for name, given in (("since", since), ("until", until)):
        if given is None:
            continue
        if not isinstance(given, str):
            raise ValueError(f"{name} must be a string: {dates.ACCEPTED}")
        try:
            span = dates.parse_when(given)[0]
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
        if name == "since":
            start = span[0]
        else:
            end = span[1]
    if start >= end:
        raise ValueError(f"since ({since}) must come before until ({until})")
    return start, end


def both(first: Span | None, second: Span | None) -> Span | None:
    """The overlap of two windows (None: no window); an empty overlap stays an empty window."""
    if first is None:
        return second
    if second is None:
        return first
    return max(first[0], second[0]), max(max(first[0], second[0]), min(first[1], second[1]))


# --------------------------------------------------------------------------------------------
# The search within a window
# --------------------------------------------------------------------------------------------

def search(graph: Graph, query: str, words: str, window: Span, *, explicit: bool,
           limit: int | None = None) -> dict[str, Any] | None:
    """search_nodes within a window (guarantees 1 to 3); None when guarantee 1 says the query is
    answered as without one. `words`: the query without its time phrase."""
    from . import query as retrieval

    found = _kept(graph, query, words, window, explicit=explicit, limit=limit)
    if found is None:
        return None
    kept, within = found
    return {"entities": [shown_within(node, within[node.record.name]) for node in kept],
            "relations": retrieval.found(graph, kept)["relations"]}


def facts_within(graph: Graph, query: str, words: str, window: Span, *, explicit: bool, characters: int,
                 limit: int | None = None) -> Facts | None:
    """The same answer as :func:`search`, as facts paged at `characters` a page (a glance, and a
    cursor for the rest), each entity's facts of the window most recent first."""
    from . import query as retrieval
    from .paging.pages import FactOrder, Facts

    found = _kept(graph, query, words, window, explicit=explicit, limit=limit)
    if found is None:
        return None
    kept, within = found
    positions: list[int] = []
    indexes: list[int] = []
    for position, node in enumerate(kept):
        shown = _newest_first(node, within[node.record.name])
        positions += [position] * len(shown)
        indexes += shown
    return Facts([node.view for node in kept], FactOrder((), None, (), head=(positions, indexes)),
                 retrieval.touching_in(graph), characters, True)


def _named(query: str, kept: Sequence[Node]) -> list[str]:
    """The entities among `kept` the query names, else the user's when it speaks in the first person
    of what they did ("What did I do in 2025?"; "What did I tell you last week?" asks all that was told)."""
    from . import scope

    names = scope.named_in(query, [node.view for node in kept[:scope.NAMED_AMONG]])
    if not names and scope.speaks_of_user(query) and not scope.asks_what_was_told(query):
        names = [scope.USER]
    return names


def _newest_first(node: Node, indexes: Sequence[int]) -> list[int]:
    return sorted(indexes, key=lambda index: dates.latest(node.record, [index]), reverse=True)


def _kept(graph: Graph, query: str, words: str, window: Span, *, explicit: bool,
          limit: int | None = None) -> tuple[list[Node], dict[str, list[int]]] | None:
    """The entities answering within the window, in order, and the indexes of their answering
    observations (guarantees 1 to 3); None: answered as without a window."""
    from ..index import ranking
    from ..model import indexes
    from . import query as retrieval

    if not explicit and retrieval.contains_query(graph, query) is not None:
        return None
    candidates: list[Node]
    primary: dict[str, Any] = {}
    holds: Callable[[str], bool] = lambda text: True  # noqa: E731  (no words: every observation answers)
    if not content_terms(words):
        candidates = list(graph.entities.values())
    elif (contained := retrieval.contains_query(graph, words)) is not None:
        needle = words.lower()
        key = retrieval.relevance(needle)
        candidates = contained
        primary = {node.record.name: key(node.record.name, node.record.entityType, node.text, node.seq)[:3]
                   for node in contained}
        holds = lambda text: needle in text.lower()  # noqa: E731
    else:
        terms = graph.terms if graph.terms is not None else indexes.with_term_index(graph).terms
        assert terms is not None
        entities = graph.entities
        scores = ranking.rank(terms, words, ranking.DEFAULT, lambda name: entities[name].text)
        candidates = [entities[name] for name in scores]
        primary = {name: -score for name, score in scores.items()}
        wanted = set(ranking.query_terms(words))
        holds = lambda text: not wanted.isdisjoint(ranking.terms(text))  # noqa: E731
    within: dict[str, list[int]] = {}
    for node in candidates:
        record = node.record
        inside = dates.in_window(record, window)
        answering = [index for index in inside if holds(record.observations[index])]
        # An entity found by its name or type shows all it holds within the window; one found by
        # its observations, those of them within it (none: it is not an answer within the window).
        within[record.name] = answering or (inside if holds(f"{record.name}\n{record.entityType}") else [])
    kept = [node for node in candidates if within[node.record.name]]
    recency = {node.record.name: dates.latest(node.record, within[node.record.name]) for node in kept}
    kept.sort(key=lambda node: node.seq)
    kept.sort(key=lambda node: recency[node.record.name], reverse=True)  # stable: graph order in ties
    if primary:
        kept.sort(key=lambda node: primary[node.record.name])
    else:
        # Nothing asked but a time: whom the question names (or the user, for "What did I do in
        # 2025?") first, then the others, each most recent first.
        first = set(_named(query, kept))
        kept.sort(key=lambda node: node.record.name not in first)
    if limit is not None:
        kept = kept[:limit]
    return kept, within


def nothing_within(window: Span) -> str:
    """The note of an answer whose query named a time in which nothing answers (guarantee 4)."""
    start, end = (moment.strftime("%Y-%m-%d %H:%M") for moment in window)
    return (f"Nothing was recorded, or told to have happened, from {start} to {end} UTC (the time this query "
            "names), so these facts answer its words at any time: each shows its dates where known.")


def nothing_answers_within(window: Span) -> str:
    """The note of an answer whose query named a time in which no fact answering its words falls."""
    start, end = (moment.strftime("%Y-%m-%d") for moment in window)
    return (f"No fact answering these words is dated from {start} to {end} (UTC; the time this query names), so "
            "these facts answer its words at any time: each shows its dates where known.")


def shown_within(node: Node, indexes: Sequence[int]) -> dict[str, Any]:
    """The entity as a windowed answer shows it: its observations within the window, most recent first."""
    record = node.record
    order = _newest_first(node, indexes)
    shown: dict[str, Any] = {"name": record.name, "entityType": record.entityType,
                             "observations": [record.observations[index] for index in order],
                             **dates.answer_dates(record, order), **authors.answer_authors(record, order)}
    if len(order) < len(record.observations):
        shown["partial"] = f"{len(order):,} of {len(record.observations):,} observations shown; open_nodes gives all"
    return shown
