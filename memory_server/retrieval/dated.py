"""When a fact happened, as an answer shows it, and whether it falls within a window (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model.dates import Span


def fact_date(entity: Mapping[str, Any], index: int) -> str:
    """When a fact happened (its happenedOn), else when it was recorded, as an answer shows it
    (``2026-05-15``, ``2026-05``); empty when unknown."""
    every = entity.get("observationDates")
    if not every or not 0 <= index < len(every) or every[index] is None:
        return ""
    shown: str = every[index]
    if shown.startswith("happened "):
        return shown[len("happened "):].split(",", 1)[0]
    return shown


def within(entity: Mapping[str, Any], index: int, window: Span) -> bool:
    from ..model import dates

    date = fact_date(entity, index)
    return bool(date) and dates.overlaps(date, window)
