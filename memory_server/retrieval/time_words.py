"""The words that name a time: months, days, seasons and units, read by the time phrases of a
query (:mod:`.when`) and by the answer, for which such a word is a question's when, which dates
answer, not a word of what is asked (:mod:`.answer`, guarantee 7). A leaf: it imports nothing of
the package, so that both can read it."""

from __future__ import annotations

import calendar
from typing import Final

MONTHS: Final = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): number for number, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
DAYS: Final = {name.lower(): number for number, name in enumerate(calendar.day_name)}
UNITS: Final = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month",
                "months": "month", "year": "year", "years": "year"}
SEASONS: Final = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
"""The month each season starts with in the north; in the south six months later."""
TIME_WORDS: Final = frozenset({*MONTHS, *DAYS, *SEASONS, *UNITS, "today", "tonight", "yesterday", "tomorrow",
                               "ago", "weekend", "weekends", "morning", "evening", "night"})
"""Words that name a time: a question's when, which dates answer, not words."""
