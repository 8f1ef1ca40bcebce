"""The time phrases of a query and the since/until arguments (retrieval/when.py), and the dates of
records (model/dates.py): pure functions, given the time now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_server.model import dates
from memory_server.model.records import EntityRecord
from memory_server.retrieval import when
from memory_server.retrieval.when import both, parse_query, window_of

NOW = datetime(2026, 12, 1, 12, 30, tzinfo=UTC)  # a Tuesday
END_OF_TIME = datetime.max.replace(tzinfo=UTC)
START_OF_TIME = datetime.min.replace(tzinfo=UTC)


def day(year: int, month: int, date: int) -> datetime:
    return datetime(year, month, date, tzinfo=UTC)


def whole_day(year: int, month: int, date: int) -> tuple[datetime, datetime]:
    return day(year, month, date), day(year, month, date) + timedelta(days=1)


@pytest.mark.parametrize(("query", "words", "window"), [
    ("What did I tell you last week?", "What did I tell you?", (day(2026, 11, 23), NOW + timedelta(seconds=1))),
    ("yesterday", "", whole_day(2026, 11, 30)),
    ("what did we discuss yesterday", "what did we discuss", whole_day(2026, 11, 30)),
    ("the day before yesterday", "", whole_day(2026, 11, 29)),
    ("Today", "", whole_day(2026, 12, 1)),
    ("this morning's run", "run", whole_day(2026, 12, 1)),
    ("meetings in May 2023", "meetings", (day(2023, 5, 1), day(2023, 6, 1))),
    ("MAY 2023", "", (day(2023, 5, 1), day(2023, 6, 1))),
    ("trip in may", "trip", (day(2026, 5, 1), day(2026, 6, 1))),
    ("party in December", "party", (day(2026, 12, 1), day(2027, 1, 1))),
    ("what happened on 2023-05-07", "what happened", whole_day(2023, 5, 7)),
    ("2023-05", "", (day(2023, 5, 1), day(2023, 6, 1))),
    ("dinner 3 days ago", "dinner", (day(2026, 11, 27), day(2026, 11, 30))),  # 4 to 2 days back
    ("a week ago", "", (day(2026, 11, 16), NOW + timedelta(seconds=1))),  # the week before to now
    ("two months ago", "", (day(2026, 9, 1), day(2026, 12, 1))),
    ("a couple of weeks ago", "", (day(2026, 11, 9), day(2026, 11, 30))),
    ("books in the past 2 weeks", "books", (NOW - timedelta(weeks=2), NOW + timedelta(seconds=1))),
    ("over the last 10 days", "", (NOW - timedelta(days=10), NOW + timedelta(seconds=1))),
    ("calls since March 2024", "calls", (day(2024, 3, 1), END_OF_TIME)),
    ("notes before 2020-01", "notes", (START_OF_TIME, day(2020, 1, 1))),
    ("notes until 2020-01", "notes", (START_OF_TIME, day(2020, 2, 1))),
    ("last monday lunch", "lunch", whole_day(2026, 11, 30)),
    ("on Tuesday", "", whole_day(2026, 11, 24)),
    ("7 May 2023 party", "party", whole_day(2023, 5, 7)),
    ("the 7th of May, 2023", "", whole_day(2023, 5, 7)),
    ("May 7, 2023", "", whole_day(2023, 5, 7)),
    ("on Dec 25", "", whole_day(2025, 12, 25)),
    ("this month", "", (day(2026, 12, 1), day(2027, 1, 1))),
    ("this week", "", (day(2026, 11, 30), day(2026, 12, 7))),
    ("in 2023", "", (day(2023, 1, 1), day(2024, 1, 1))),
    ("last year", "", (day(2025, 1, 1), NOW + timedelta(seconds=1))),
    ("last month", "", (day(2026, 11, 1), NOW + timedelta(seconds=1))),
    # seasons, northern by default (NOW is in December: winter has begun less than a month ago)
    ("What did I do last spring?", "What did I do?", (day(2026, 3, 1), day(2026, 6, 1))),
    ("this summer trip", "trip", (day(2026, 6, 1), day(2026, 9, 1))),
    ("Where did we go over the winter?", "Where did we go?", (day(2025, 12, 1), day(2026, 3, 1))),
    ("hikes in the fall", "hikes", (day(2026, 9, 1), day(2026, 12, 1))),
    ("in spring 2025", "", (day(2025, 3, 1), day(2025, 6, 1))),
    ("the winter of 2025", "", (day(2024, 12, 1), day(2025, 3, 1))),
    ("since last summer", "", (day(2026, 6, 1), END_OF_TIME)),
])
def test_a_time_phrase_becomes_a_window_and_leaves_the_query(query: str, words: str,
                                                              window: tuple[datetime, datetime]) -> None:
    assert parse_query(query, NOW) == (words, window)


@pytest.mark.parametrize("query", [
    "May I ask about cats", "Monday meetings", "Caroline support group", "march of the penguins",
    "room 2023", "a 5 day trip", "the last of us", "dog", "", "   ", "2023-13-45", "February 30",
    "spring rolls recipe", "summer", "since", "since we moved",
])
def test_words_that_name_no_time_leave_the_query_alone(query: str) -> None:
    assert parse_query(query, NOW) == (query, None)


def test_a_month_without_a_year_is_its_latest_one_not_after_now() -> None:
    assert parse_query("in january", NOW)[1] == (day(2026, 1, 1), day(2026, 2, 1))
    assert parse_query("in january", day(2026, 1, 5))[1] == (day(2026, 1, 1), day(2026, 2, 1))
    assert parse_query("on Dec 2", NOW)[1] == whole_day(2025, 12, 2)
    assert parse_query("on Dec 1", NOW)[1] == whole_day(2026, 12, 1)


def test_seasons_follow_the_hemisphere() -> None:
    march = day(2026, 3, 20)
    assert parse_query("over the winter", march)[1] == (day(2025, 12, 1), day(2026, 3, 1))
    assert parse_query("over the winter", march, hemisphere="south")[1] == (day(2025, 6, 1), day(2025, 9, 1))
    assert parse_query("last summer", march, hemisphere="south")[1] == (day(2025, 12, 1), day(2026, 3, 1))
    # under way for more than a month: "this winter" is the current one
    assert parse_query("this winter", day(2026, 2, 10))[1] == (day(2025, 12, 1), day(2026, 3, 1))
    assert parse_query("last winter", day(2026, 2, 10))[1] == (day(2024, 12, 1), day(2025, 3, 1))


def test_the_hemisphere_setting_takes_north_or_south() -> None:
    assert when.hemisphere_from({}) == "north"
    assert when.hemisphere_from({"MEMORY_HEMISPHERE": " South "}) == "south"
    with pytest.raises(ValueError, match="MEMORY_HEMISPHERE must be north or south"):
        when.hemisphere_from({"MEMORY_HEMISPHERE": "east"})


def test_since_an_event_starts_at_the_date_of_the_fact_that_tells_it() -> None:
    asked: list[str] = []

    def events(words: str) -> datetime | None:
        asked.append(words)
        return day(2025, 8, 14) if "moved" in words else None

    assert parse_query("What did I buy since we moved?", NOW, events=events) == (
        "What did I buy?", (day(2025, 8, 14), END_OF_TIME))
    assert asked == ["we moved"]
    # an event no dated fact tells names no window: the query stays whole
    assert parse_query("Who did I meet since I quit smoking?", NOW, events=events) == (
        "Who did I meet since I quit smoking?", None)


def test_after_an_event_starts_at_its_date_and_the_every_day_names_none() -> None:
    asked: list[str] = []

    def events(words: str) -> datetime | None:
        asked.append(words)
        return day(2025, 7, 11)

    assert parse_query("What did I join after moving in with Liv?", NOW, events=events) == (
        "What did I join?", (day(2025, 7, 11), END_OF_TIME))
    assert parse_query("What did I buy after the move?", NOW, events=events)[1] == (day(2025, 7, 11), END_OF_TIME)
    # a time of day, a meal, a routine: no event to count from
    for every_day in ("What do I drink after waking up?", "What do I eat after dinner?", "Where do I go after work?"):
        assert parse_query(every_day, NOW, events=events) == (every_day, None)
    assert asked == ["moving in with Liv", "the move"]


def test_months_back_keep_to_the_calendar() -> None:
    march_31 = datetime(2026, 3, 31, 10, tzinfo=UTC)
    assert parse_query("a month ago", march_31)[1] == (day(2026, 1, 1), march_31 + timedelta(seconds=1))
    assert parse_query("past 1 month", march_31)[1] == (datetime(2026, 2, 28, 10, tzinfo=UTC),
                                                        march_31 + timedelta(seconds=1))
    assert parse_query("last month", day(2026, 1, 15))[1] == (day(2025, 12, 1), day(2026, 1, 15) + timedelta(seconds=1))


@pytest.mark.parametrize(("since", "until", "window"), [
    ("2023-05-01", None, (day(2023, 5, 1), END_OF_TIME)),
    (None, "2023-05-07", (START_OF_TIME, day(2023, 5, 8))),
    ("2023", "2023", (day(2023, 1, 1), day(2024, 1, 1))),
    ("2023-05", "2023-05", (day(2023, 5, 1), day(2023, 6, 1))),
    ("2023-05-07T14:30:00Z", None, (datetime(2023, 5, 7, 14, 30, tzinfo=UTC), END_OF_TIME)),
    ("2023-05-07T16:30:00+02:00", None, (datetime(2023, 5, 7, 14, 30, tzinfo=UTC), END_OF_TIME)),
    ("2023-05-07 14:30", None, (datetime(2023, 5, 7, 14, 30, tzinfo=UTC), END_OF_TIME)),
    (None, "2023-05-07T14:30:00.250Z", (START_OF_TIME, datetime(2023, 5, 7, 14, 30, 1, tzinfo=UTC))),
])
def test_since_and_until_take_iso_dates_and_date_times(since: str | None, until: str | None,
                                                        window: tuple[datetime, datetime]) -> None:
    assert window_of(since, until) == window


def test_no_since_and_no_until_is_no_window() -> None:
    assert window_of(None, None) is None


@pytest.mark.parametrize(("since", "until", "named"), [
    ("yesterday", None, "since"), ("2023-5-7", None, "since"), ("2023-02-30", None, "since"),
    (None, "07/05/2023", "until"), (None, "", "until"), ("2023-05-07T25:00", None, "since"),
    ("2024-01-01", "2023-01-01", "before until"), (5, None, "since"),
])
def test_a_malformed_date_says_what_is_accepted(since: object, until: object, named: str) -> None:
    with pytest.raises(ValueError) as caught:
        window_of(since, until)  # type: ignore[arg-type]
    message = str(caught.value)
    assert named in message
    if named != "before until":
        assert "2023-05-07T14:30:00Z" in message, message


def test_the_overlap_of_two_windows() -> None:
    first, second = (day(2023, 1, 1), day(2023, 6, 1)), (day(2023, 5, 1), day(2024, 1, 1))
    assert both(first, second) == (day(2023, 5, 1), day(2023, 6, 1))
    assert both(None, second) == second
    assert both(first, None) == first
    apart = both((day(2020, 1, 1), day(2020, 2, 1)), (day(2023, 1, 1), day(2023, 2, 1)))
    assert apart is not None and apart[0] >= apart[1]


# --- the dates of records ----------------------------------------------------------------------------


def test_dates_given_are_stored_as_given_or_as_a_utc_stamp() -> None:
    assert dates.parse_when("2023")[1] == "2023"
    assert dates.parse_when(" 2023-05-07 ")[1] == "2023-05-07"
    assert dates.parse_when("2023-05-07T16:30:00+02:00")[1] == "2023-05-07T14:30:00Z"
    assert dates.parse_when("2023-05-07t14:30z".replace("t", "T"))[1] == "2023-05-07T14:30:00Z"


def test_an_answer_shows_dates_compactly_and_only_what_is_known() -> None:
    stamp = "2026-12-01T12:30:00Z"
    record = EntityRecord("Ann", "person", ["a", "b", "c"], stamp, "2026-12-02T08:00:00Z",
                          [stamp, None, stamp], [None, None, "2023-05-07"])
    assert dates.answer_dates(record) == {
        "createdAt": "2026-12-01", "updatedAt": "2026-12-02",
        "observationDates": ["2026-12-01", None, "happened 2023-05-07, recorded 2026-12-01"]}
    assert dates.answer_dates(record, [2, 0]) == {
        "createdAt": "2026-12-01", "updatedAt": "2026-12-02",
        "observationDates": ["happened 2023-05-07, recorded 2026-12-01", "2026-12-01"]}
    assert dates.answer_dates(EntityRecord("Bo", "person", ["x"])) == {}
    assert dates.compact(None, "2023-05") == "happened 2023-05"


def test_a_date_list_out_of_step_with_the_observations_dates_none_of_them() -> None:
    record = EntityRecord("Ann", "person", ["a", "b"], None, None, ["2026-12-01T12:30:00Z"])
    assert dates.recorded_dates(record) == [None, None]
    assert dates.answer_dates(record) == {}
    grown = dates.with_added(record, [("c", "2026-12-03T00:00:00Z", None)], "2026-12-03T00:00:00Z")
    assert grown.recordedAt == [None, None, "2026-12-03T00:00:00Z"]


def test_a_stamp_that_does_not_parse_is_an_unknown_date() -> None:
    record = EntityRecord("Ann", "person", ["a"], "not a date", None, ["soon"])
    assert dates.answer_dates(record) == {}
    assert dates.in_window(record, (START_OF_TIME, END_OF_TIME)) == []


def test_deleting_observations_takes_their_dates_with_them() -> None:
    record = EntityRecord("Ann", "person", ["a", "b", "c"], "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z",
                          ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"],
                          [None, "2020", None])
    kept = dates.with_kept(record, [True, False, True], "2026-02-01T00:00:00Z")
    assert kept.observations == ["a", "c"]
    assert kept.recordedAt == ["2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"]
    assert kept.happenedOn is None
    assert kept.updatedAt == "2026-02-01T00:00:00Z" and kept.createdAt == "2026-01-01T00:00:00Z"


def test_without_a_clock_a_write_records_no_date() -> None:
    assert dates.created("Ann", "person", ["a"], None) == EntityRecord("Ann", "person", ["a"])
    assert dates.with_added(EntityRecord("Ann", "person", []), [("a", None, None)], None) == \
        EntityRecord("Ann", "person", ["a"])


def test_the_window_holds_what_was_recorded_or_happened_within_it() -> None:
    record = EntityRecord("Ann", "person", ["a", "b", "c", "d"], None, None,
                          ["2026-11-30T10:00:00Z", "2026-10-01T00:00:00Z", None, "2026-01-01T00:00:00Z"],
                          [None, None, "2026-11", "2026-11-30"])
    assert dates.in_window(record, whole_day(2026, 11, 30)) == [0, 2, 3]
    assert dates.in_window(record, whole_day(2026, 10, 1)) == [1]
    assert dates.latest(record, [0, 2]) == "2026-11-30T10:00:00Z"
    assert dates.latest(record, [1]) == "2026-10-01T00:00:00Z"
    assert dates.latest(EntityRecord("Bo", "person", ["x"])) == ""


def test_the_clock_follows_memory_dates() -> None:
    assert dates.clock_from({}) is dates.now_stamp
    assert dates.clock_from({"MEMORY_DATES": "on"}) is dates.now_stamp
    for off in ("off", "OFF", " 0 ", "false", "no"):
        assert dates.clock_from({"MEMORY_DATES": off}) is None
    stamp = dates.now_stamp()
    assert dates.parse_when(stamp)[1] == stamp and stamp.endswith("Z")


def test_an_answer_that_picks_observations_shows_their_dates() -> None:
    record = EntityRecord("Ann", "person", ["a", "b", "c"], "2026-12-01T12:30:00Z", "2026-12-02T08:00:00Z",
                          ["2026-12-01T12:30:00Z", None, "2026-12-02T08:00:00Z"])
    view = {"name": "Ann", "entityType": "person", "observations": record.observations, **dates.answer_dates(record)}
    assert dates.shown_dates(view, [2, 0]) == {"createdAt": "2026-12-01", "updatedAt": "2026-12-02",
                                               "observationDates": ["2026-12-02", "2026-12-01"]}
    assert dates.shown_dates(view, [1]) == {"createdAt": "2026-12-01", "updatedAt": "2026-12-02"}
    assert dates.shown_dates({"name": "Bo", "entityType": "x", "observations": ["y"]}, [0]) == {}


def test_a_long_pasted_text_names_no_time() -> None:
    text = "notes from yesterday " + "x " * 400
    assert parse_query(text, NOW) == (text, None)


# -- the trigger: a query no pattern can match is left whole before any pattern is compiled ----

# Phrases each pattern matches (spelled in every case the engine folds alike: a dotless i, a long
# s, a Kelvin sign), among words that are not times, joined in every way.
_PHRASES = ["2024-06", "on 2024-06-03", "3rd of June", "the 3 may, 2024", "June 3", "sept. 4 2025", "May 2024",
            "in May", "since june", "in the year 2023", "before 2024", "today", "until tonight",
            "this morning", "the day before yesterday", "two years ago", "a couple of weeks ago", "3 days ago",
            "in the past 2 weeks", "over the last few months", "last friday", "on Fr\u0131day", "since monday",
            "this week", "from this year", "the previous month", "ye\u017fterday", "\u212aelvin", "\u0663 days ago",
            "TODAY", "Last Week"]
_NOISE = ["tea", "zephyr", "maybe", "lastly", "agog", "pasta", "thistle", "mayor", "todays", "x", "\u00e9", "in",
          "on", "the", "of", "a", "few", "week", "ago", "this", "-", ",", "?", "_"]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_PHRASES + _NOISE), max_size=6),
       st.lists(st.sampled_from(["", " ", "  ", "-", "_", ". ", "\n"]), min_size=6, max_size=6))
def test_every_query_a_time_pattern_matches_sets_off_the_trigger(pieces: list[str], gaps: list[str]) -> None:
    query = "".join(piece + gap for piece, gap in zip(pieces, gaps, strict=False))
    if any(pattern.search(query) for _, pattern in when._patterns()):
        assert when._TRIGGER.search(query), query


@pytest.mark.parametrize("phrase", _PHRASES)
def test_each_time_phrase_sets_off_the_trigger(phrase: str) -> None:
    assert any(pattern.search(phrase) for _, pattern in when._patterns()) == (phrase != "\u212aelvin")
    if phrase != "\u212aelvin":
        assert when._TRIGGER.search(phrase)


def test_a_query_without_a_digit_or_a_time_word_is_left_whole() -> None:
    assert parse_query("Who enjoys astronomy on weekends?", NOW) == ("Who enjoys astronomy on weekends?", None)
    assert parse_query("what did we plan on friday", NOW)[1] is not None
