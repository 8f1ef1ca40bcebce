"""The memory server's dated fields in answers, matched by their shape instead of their value.

A transcript is recorded once, on one day, and often against a server that keeps no dates (the
reference, or this server with ``MEMORY_DATES=off``); a server that keeps them answers with the day
it is replayed on, and with the client that wrote each observation. So on an entity of an answer
(an object with a string ``name`` and a list of ``observations``: docs/dates.md "In answers",
docs/oauth.md "Authors"):

1. ``createdAt`` and ``updatedAt`` match when each is an ISO 8601 date: a year, a year and month,
   or a day (``2026``, ``2026-12``, ``2026-12-01``), years 0001 to 9999 written with four digits.
2. ``observationDates`` matches when it is a list parallel to ``observations`` (as long) whose
   items are each ``null``, a date (1.), ``happened <date>`` or ``happened <date>, recorded <date>``.
3. ``observationAuthors`` matches when it is a list parallel to ``observations`` whose items are
   each ``null`` or a non-empty string.
4. A dated field that matches is left out of the comparison, on either side; one that does not
   stays, so the difference names it. Nothing else of the entity is touched.
5. A text that is JSON (a tool result's ``content[].text``, a resource's ``contents[].text``) and
   differs from the expected text matches when, both read as JSON, they are the same once 4. is
   applied to each; otherwise it is compared as text, as before.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from conformance.diff import diff

DATED_KEYS: Final = ("createdAt", "updatedAt", "observationDates", "observationAuthors")
_DATE: Final = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")
_DAYS_IN_MONTH: Final = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_date(value: Any) -> bool:
    """1.: a year, month or day in ISO 8601, as an answer shows a stored date."""
    if not isinstance(value, str) or (shape := _DATE.fullmatch(value)) is None:
        return False
    year, month, day = (int(part) if part else None for part in shape.groups())
    if not year or (month is not None and not 1 <= month <= 12):
        return False
    if day is None or month is None:
        return True
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= day <= (_DAYS_IN_MONTH[month - 1] if month != 2 or leap else 28)


def is_observation_date(value: Any) -> bool:
    """2.: one item of ``observationDates``."""
    if value is None or is_date(value):
        return True
    if not isinstance(value, str) or not value.startswith("happened "):
        return False
    happened, comma, recorded = value.removeprefix("happened ").partition(", recorded ")
    return is_date(happened) and (not comma or is_date(recorded))


def _is_author(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value != "")


def _is_entity(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("observations"), list)


def has_its_shape(entity: dict[str, Any], key: str) -> bool:
    """Whether the dated field `key` of an answer's `entity` (present) has the documented shape."""
    value = entity[key]
    if key in ("createdAt", "updatedAt"):
        return is_date(value)
    if not isinstance(value, list) or len(value) != len(entity["observations"]):
        return False
    item_fits = is_observation_date if key == "observationDates" else _is_author
    return all(item_fits(item) for item in value)


def without_dates(value: Any) -> Any:
    """`value` with every dated field that has its shape left out of its entities (4.), at any depth."""
    if isinstance(value, list):
        return [without_dates(item) for item in value]
    if not isinstance(value, dict):
        return value
    entity = _is_entity(value)
    return {key: without_dates(item) for key, item in value.items()
            if not (entity and key in DATED_KEYS and has_its_shape(value, key))}


def undated(expected: Any, actual: Any) -> tuple[Any, Any]:
    """The two messages as compared: dated fields with their shape left out (4.), a JSON text that
    differs only by them taken as the expected text (5.)."""
    expected, actual = without_dates(expected), without_dates(actual)
    return expected, _texts_matched(expected, actual)


def _texts_matched(expected: Any, actual: Any) -> Any:
    if isinstance(expected, dict) and isinstance(actual, dict):
        return {key: _texts_matched(expected[key], item) if key in expected else item for key, item in actual.items()}
    if isinstance(expected, list) and isinstance(actual, list):
        return [_texts_matched(expected[index], item) if index < len(expected) else item
                for index, item in enumerate(actual)]
    if isinstance(expected, str) and isinstance(actual, str) and expected != actual:
        read_expected, read_actual = _json_text(expected), _json_text(actual)
        if read_expected is not None and read_actual is not None and not diff(*undated(read_expected, read_actual)):
            return expected
    return actual


def _json_text(text: str) -> Any:
    """A text's JSON object or array, or None when it is not one (a plain text is compared as text)."""
    if not text.startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
