"""The answer budget, and the sizes that decide what fits a page.

The budget counts UTF-8 bytes of all text a page gives the model (its JSON and its notes). A
character is at least one byte, so no page holds more characters than the budget either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from .cursors import CURSOR_LENGTH

BUDGET_VARIABLE: Final = "MEMORY_ANSWER_BUDGET"
DEFAULT_BUDGET: Final = 80_000
"""About 20,000 tokens: well under the 25,000 tokens at which common clients cut a tool answer."""
MINIMUM_BUDGET: Final = 5_000
"""Room for the notes and the summary of a page, and for some entities besides."""

# The smallest JSON an entity or a relation can have: a cheap proof that an answer cannot fit.
_SMALLEST_ENTITY: Final = len(b'{"name":"","entityType":"","observations":[]},')
_SMALLEST_RELATION: Final = len(b'{"from":"","to":"","relationType":""},')
_NOTE_ROOM: Final = 2_500
"""Bytes kept free for a page's note; a page whose note runs longer gives up units instead."""
_NOTE_SLACK: Final = 64
"""Bytes a page's note may take beyond the longest note of its answer's counts."""

_encoder: Final = msgspec.json.Encoder()
_ENVELOPE: Final = len(b'{"entities":[],"relations":[],"nextCursor":""}') + CURSOR_LENGTH


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


def _without_last_comma(pieces: list[memoryview]) -> list[memoryview]:
    return [*pieces[:-1], pieces[-1][:-1]] if pieces else []

