"""The memory file's records: JSON Lines in, typed records out, and back.

The file holds one JSON object per line, exactly the reference server's records:
``{"type":"entity","name":...,"entityType":...,"observations":[...]}`` and
``{"type":"relation","from":...,"to":...,"relationType":...}``. Everything else a line can
hold is classified here so that nothing is ever silently lost:

- an entity line may also carry its dates (``createdAt``, ``updatedAt``, and ``recordedAt`` /
  ``happenedOn``, lists parallel to ``observations``; see :mod:`.dates`): optional fields of
  :class:`EntityRecord`, omitted when unknown, so an undated record encodes exactly as the
  reference writes it, and the reference, which reads only the keys it knows, ignores them;
- a date field of the wrong JSON type is no date: it stays on the line as an extra field;
- and the authors of its observations (``recordedBy``, parallel to ``observations``; see
  :mod:`.authors`), optional in the same way;

- a known record with extra fields -> :class:`Extended` (the extra fields are written back);
- valid JSON that is not a usable record (unknown ``type``, wrong field types, not an
  object) -> :class:`Opaque`, written back verbatim;
- a line that is not JSON, or not UTF-8, or JSON nested too deeply to read (a thousand arrays
  one inside the other) -> :class:`Rejected`, moved to the side file. Decoding never raises: the
  decoder's RecursionError on deep nesting is one more unreadable line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, NamedTuple, TypeAlias

import msgspec


class EntityRecord(msgspec.Struct, tag_field="type", tag="entity", forbid_unknown_fields=True, frozen=True,
                   omit_defaults=True):
    """An entity line. Field order is the file's key order (the tag comes first); the dates,
    when known, come after the reference's keys (see :mod:`.dates` for what they mean)."""

    name: str
    entityType: str
    observations: list[str]
    createdAt: str | None = None
    updatedAt: str | None = None
    recordedAt: list[str | None] | None = None
    happenedOn: list[str | None] | None = None
    recordedBy: list[str | None] | None = None


class RelationRecord(msgspec.Struct, tag_field="type", tag="relation", forbid_unknown_fields=True, frozen=True):
    """A relation line; ``from`` is a Python keyword, hence the renamed attributes."""

    source: str = msgspec.field(name="from")
    target: str = msgspec.field(name="to")
    relationType: str


class _AnyEntity(msgspec.Struct, tag_field="type", tag="entity"):
    name: str
    entityType: str
    observations: list[str]


class _AnyRelation(msgspec.Struct, tag_field="type", tag="relation"):
    source: str = msgspec.field(name="from")
    target: str = msgspec.field(name="to")
    relationType: str


Record: TypeAlias = EntityRecord | RelationRecord


class Extended(msgspec.Struct, frozen=True):
    """A known record whose line carried fields this program does not know."""

    record: Record
    extra: dict[str, msgspec.Raw]


class Opaque(msgspec.Struct, frozen=True):
    """A line of valid JSON that is not a usable record; written back byte for byte."""

    line: bytes


class Rejected(msgspec.Struct, frozen=True):
    """A line that is not valid JSON (or not UTF-8); it leaves the memory file for the side file."""

    line: bytes
    number: int
    reason: str


Line: TypeAlias = Record | Extended | Opaque | Rejected

ENTITY_KEYS: Final = frozenset({"type", "name", "entityType", "observations"})
DATE_KEYS: Final = ("createdAt", "updatedAt", "recordedAt", "happenedOn")
"""The entity line's optional date fields, in the file's key order."""
OPTIONAL_KEYS: Final = (*DATE_KEYS, "recordedBy")
"""Every optional field of an entity line (the dates, then the authors), in the file's key order."""
RELATION_KEYS: Final = frozenset({"type", "from", "to", "relationType"})
BOM: Final = b"\xef\xbb\xbf"
"""The byte order mark editors on Windows like to start a file with; it is part of no record."""
TOO_DEEP: Final = "JSON nested too deeply to read (arrays or objects about a thousand levels deep)"

_strict = msgspec.json.Decoder(EntityRecord | RelationRecord)
_lenient = msgspec.json.Decoder(_AnyEntity | _AnyRelation)
_fields = msgspec.json.Decoder(dict[str, msgspec.Raw])
_text = msgspec.json.Decoder(str)
_date_decoders: Final[dict[str, msgspec.json.Decoder[Any]]] = {"createdAt": _text, "updatedAt": _text,
                         "recordedAt": msgspec.json.Decoder(list[str | None]),
                         "happenedOn": msgspec.json.Decoder(list[str | None]),
                         "recordedBy": msgspec.json.Decoder(list[str | None])}
_encoder = msgspec.json.Encoder()


def decode_file(data: bytes) -> list[Line]:
    """Every line of a memory file, classified, in file order. Blank lines carry nothing and are skipped."""
    # Editors on Windows like to start a file with a byte order mark; it is not part of any record.
    data = data.removeprefix(BOM)
    try:
        # A file this program or the reference wrote decodes in one call.
        return list(_strict.decode_lines(data))
    except (msgspec.MsgspecError, RecursionError):
        return [decode_line(line, number) for number, line in enumerate(data.split(b"\n"), 1) if line.strip()]


def decode_line(line: bytes, number: int) -> Line:
    """One non-blank line of the file (without its newline)."""
    try:
        return _strict.decode(line)
    except msgspec.MsgspecError:
        pass
    except RecursionError:
        return Rejected(line, number, TOO_DEEP)
    return _classify(line.removesuffix(b"\r"), line, number)


def _classify(content: bytes, line: bytes, number: int) -> Line:
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return Rejected(line, number, "not valid UTF-8")
    try:
        fields = _fields.decode(content)
    except msgspec.MsgspecError:
        try:
            return Opaque(content) if is_json(content) else Rejected(line, number, "not valid JSON")
        except RecursionError:
            return Rejected(line, number, TOO_DEEP)
    except RecursionError:
        return Rejected(line, number, TOO_DEEP)
    known = {"entity": ENTITY_KEYS, "relation": RELATION_KEYS}.get(_tag(fields.get("type")) or "")
    if known is None:
        return Opaque(content)
    try:
        loose = _lenient.decode(content)
    except msgspec.MsgspecError:
        # A known type with missing fields or wrong field types: shown nowhere, kept as written.
        return Opaque(content)
    except RecursionError:
        return Rejected(line, number, TOO_DEEP)
    extra = {key: value for key, value in fields.items() if key not in known}
    record = _tighten(loose)
    if isinstance(record, EntityRecord):
        record, extra = _with_dates(record, extra)
    return Extended(record, extra) if extra else record


def _with_dates(record: EntityRecord, extra: dict[str, msgspec.Raw]) -> tuple[EntityRecord, dict[str, msgspec.Raw]]:
    """The record with the date fields that have their JSON type; the others stay extra fields."""
    dates: dict[str, Any] = {}
    for key in OPTIONAL_KEYS:
        if (raw := extra.get(key)) is None:
            continue
        try:
            dates[key] = _date_decoders[key].decode(raw)
        except msgspec.MsgspecError:
            continue  # kept as written, among the extra fields: no date, nothing lost
        del extra[key]
    return (msgspec.structs.replace(record, **dates) if dates else record), extra


def _tag(raw: msgspec.Raw | None) -> str | None:
    if raw is None:
        return None
    try:
        return _text.decode(raw)
    except (msgspec.MsgspecError, RecursionError):
        return None


def _tighten(loose: _AnyEntity | _AnyRelation) -> Record:
    if isinstance(loose, _AnyEntity):
        return EntityRecord(loose.name, loose.entityType, loose.observations)
    return RelationRecord(loose.source, loose.target, loose.relationType)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def is_json(content: bytes) -> bool:
    """Whether a line is JSON as the reference's JSON.parse accepts it.

    msgspec refuses some valid JSON (unpaired surrogate escapes, numbers beyond a double), so
    this slower check decides whether a line msgspec could not read is still a record to keep.
    RecursionError when the nesting is too deep to tell (the caller moves such a line aside: in
    the side file, nothing is lost).
    """
    try:
        json.loads(content, parse_constant=_reject_constant)
    except ValueError:
        return False
    return True


def entity_with_extra(record: EntityRecord, extra: dict[str, msgspec.Raw]) -> dict[str, Any]:
    """What an entity line with extra fields encodes from: the known keys first, then the dates
    the record has, then the rest (an extra field a date of the record now stands for is dropped:
    it held no date of the right type, and the record's own date replaces it)."""
    line: dict[str, Any] = {"type": "entity", "name": record.name, "entityType": record.entityType,
                            "observations": record.observations}
    for key in OPTIONAL_KEYS:
        if (value := getattr(record, key)) is not None:
            line[key] = value
    line.update((key, value) for key, value in extra.items() if key not in line)
    return line


def relation_with_extra(record: RelationRecord, extra: dict[str, msgspec.Raw]) -> dict[str, Any]:
    return {"type": "relation", "from": record.source, "to": record.target,
            "relationType": record.relationType, **extra}


# The encoder's own method, not a wrapper: loading a file encodes every record one by one
# (the graph keeps each record's line), and a wrapper's extra call per record shows in the load time.
encode_line: Final[Callable[[Record | dict[str, Any] | msgspec.Raw], bytes]] = _encoder.encode
"""One record as it appears in the file (without the newline)."""


def encode_file(items: Iterable[Record | dict[str, Any] | msgspec.Raw]) -> bytes:
    """The whole memory file in one call: one line per item, each ending in a newline.

    Raises UnicodeEncodeError when a string holds an unpaired surrogate (it has no UTF-8 form).
    """
    return _encoder.encode_lines(list(items))


LINES_PER_PIECE: Final = 512
"""Lines per piece of a saved file (about 100 KB). A buffer the size of the file, made fresh after
a large answer has been freed, would cost a page fault per 4 KiB, more than the copy; pieces this
small reuse freed memory, and a save joins again only the pieces a write changed."""


class Run(NamedTuple):
    """Lines next to each other in one part of the file, and the piece of the file they make."""

    lines: list[bytes]
    piece: bytes


Layout: TypeAlias = tuple[tuple[Run, ...], ...]
"""The memory file as pieces: for each part of it (entities, relations, kept lines), its lines in
runs of LINES_PER_PIECE (or `run_lines`) counted from the part's start."""


def file_layout(parts: Iterable[Sequence[bytes]], before: Layout = (), *, run_lines: int = LINES_PER_PIECE) -> Layout:
    """The file made of `parts`, each a sequence of lines without their newlines.

    A run holding the very lines of `before`'s run at the same place keeps that run's piece
    instead of joining its lines again. A graph after a small write holds the same line objects
    but for what the write changed, and runs are counted from the start of each part, so that
    a new entity (or relation) at the end of its part changes only the last run of that part: a
    save then joins one or two runs rather than the whole file (figures: docs/benchmarks.md,
    "Figures behind the code")."""
    layout = []
    for number, lines in enumerate(parts):
        old = before[number] if number < len(before) else ()
        runs = []
        for index, start in enumerate(range(0, len(lines), run_lines)):
            run = list(lines[start:start + run_lines])
            # List equality tries identity first, item by item, in C: the same objects cost no comparison.
            if index < len(old) and old[index].lines == run:
                runs.append(old[index])
                continue
            run.append(b"")  # the empty last line gives the piece its final newline
            piece = b"\n".join(run)
            run.pop()
            runs.append(Run(run, piece))
        layout.append(tuple(runs))
    return tuple(layout)


def layout_pieces(layout: Layout) -> list[bytes]:
    """The layout's pieces in file order: joined, the whole file."""
    return [run.piece for part in layout for run in part]


def join_lines(lines: Iterable[bytes]) -> bytes:
    """The whole memory file from its lines, each given without and written with its newline."""
    return b"".join(layout_pieces(file_layout([list(lines)])))
