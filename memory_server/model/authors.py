"""Who wrote each observation: its author, as the transport authenticated the writer.

Stored on the entity's line like the dates (see :mod:`.dates`), after them: ``recordedBy``, a
list parallel to ``observations``, each the author's name or null when unknown; absent while no
observation of the entity has a known author. The author is the token's ``sub`` over OAuth, the
client's ``clientInfo.name`` over stdio or the shared HTTP token, and nothing otherwise.

Guarantees:

1. A record without authors encodes exactly as before; the reference reads only its own keys,
   so it loads a file with authors whole.
2. A list whose length is not that of ``observations`` names no author; the next write of the
   entity replaces it with an aligned one (the old observations without author).
3. An observation keeps its first author: writing it again adds nothing, so changes nothing.
4. Deleting an observation deletes its author with it.
5. Authors are recorded with the dates: a write given no time (``now`` None, MEMORY_DATES off)
   records no author either, so such a store writes exactly the reference's lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from .records import EntityRecord


def authors_of(record: EntityRecord) -> list[str | None]:
    """The author of each observation (None: unknown), in observation order (statement 2)."""
    given = record.recordedBy
    if given is None or len(given) != len(record.observations):
        return [None] * len(record.observations)
    return given


def recorded_author(author: str | None, now: str | None) -> str | None:
    """Who a write records as the author of what it adds: `author`, when it records one (statement 5)."""
    return author if now is not None and author else None


def _known(authors: list[str | None]) -> list[str | None] | None:
    return authors if any(author is not None for author in authors) else None


def with_authors(record: EntityRecord, authors: list[str | None]) -> EntityRecord:
    """The record with `authors` (parallel to its observations), or none when no author is known."""
    known = _known(authors)
    if known is None and record.recordedBy is None:
        return record
    return msgspec.structs.replace(record, recordedBy=known)


def grown(before: EntityRecord, after: EntityRecord, added: Sequence[str | None]) -> EntityRecord:
    """`after` (`before` with observations appended) with the authors of both: `added` are the new ones'."""
    return with_authors(after, [*authors_of(before), *added])


def kept(before: EntityRecord, after: EntityRecord, keep: Sequence[bool]) -> EntityRecord:
    """`after` (`before` with only the observations whose `keep` is true) with their authors (statement 4)."""
    return with_authors(after, [author for author, wanted in zip(authors_of(before), keep, strict=True) if wanted])


def by_content(records: Iterable[EntityRecord]) -> dict[str, dict[str, str]]:
    """For an import: entity name -> observation -> its first known author among `records`."""
    found: dict[str, dict[str, str]] = {}
    for record in records:
        for content, author in zip(record.observations, authors_of(record), strict=True):
            if author is not None:
                found.setdefault(record.name, {}).setdefault(content, author)
    return found


def answer_authors(record: EntityRecord, order: Sequence[int] | None = None) -> dict[str, Any]:
    """What an answer's entity object shows: ``observationAuthors`` parallel to the observations
    shown (`order`: their indexes, default all), when one of them is known."""
    if record.recordedBy is None:
        return {}
    every = authors_of(record)
    shown = every if order is None else [every[index] for index in order]
    return {"observationAuthors": shown} if any(author is not None for author in shown) else {}
