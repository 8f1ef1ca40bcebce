"""What a memory file holds and what is wrong with it, for `mcp-server-memory stats` and `check`.

Pure: bytes in, findings and figures out. The file is read exactly as the server reads it
(records.decode_line per line, graph.graph_from_lines for the graph), so `check` reports what
the server would leave out, and `stats` counts what the server would show.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..model import dates
from ..model.graph import Graph
from ..model.records import (
    BOM,
    EntityRecord,
    Extended,
    Line,
    Opaque,
    Rejected,
    RelationRecord,
    decode_line,
)

MOST_CONNECTED: Final = 10
TYPES_LISTED: Final = 25
"""Entity or relation types that stats lists, the most common first; the rest are summed up."""


def numbered_lines(data: bytes) -> list[tuple[int, Line]]:
    """Every non-blank line of a memory file with its line number (1-based), classified as the server does."""
    data = data.removeprefix(BOM)
    return [(number, decode_line(line, number)) for number, line in enumerate(data.split(b"\n"), 1) if line.strip()]



# --------------------------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    line: int
    kind: str
    """unreadable, unusable, repeat, missing entity"""
    message: str


def check(lines: Sequence[tuple[int, Line]]) -> list[Finding]:
    """Every line the server cannot use or uses only in part, in file order."""
    findings: list[Finding] = []
    entity_lines: dict[str, int] = {}
    relation_lines: dict[tuple[str, str, str], int] = {}
    relations: list[tuple[int, RelationRecord]] = []
    for number, item in lines:
        record = item.record if isinstance(item, Extended) else item
        if isinstance(record, Rejected):
            findings.append(Finding(number, "unreadable", f"{record.reason}; the server leaves it out of the graph "
                                    "and its next write moves the line to the .rejected side file"))
        elif isinstance(record, Opaque):
            findings.append(Finding(number, "unusable", f"{why_unusable(record.line)}; the server keeps the line "
                                    "in the file as it is, but it is not part of the graph"))
        elif isinstance(record, EntityRecord):
            if (first := entity_lines.setdefault(record.name, number)) != number:
                findings.append(Finding(number, "repeat", f"repeats the entity {record.name!r} of line {first}; "
                                        "the server uses the first one only"))
                continue
            for observation, count in Counter(record.observations).items():
                if count > 1:
                    findings.append(Finding(number, "repeat", f"the entity {record.name!r} holds the observation "
                                            f"{_short(observation)!r} {count} times"))
        elif isinstance(record, RelationRecord):
            triple = (record.source, record.target, record.relationType)
            if (first := relation_lines.setdefault(triple, number)) != number:
                findings.append(Finding(number, "repeat", f"repeats the relation {_arrow(record)} of line {first}; "
                                        "the server uses the first one only"))
                continue
            relations.append((number, record))
    for number, record in relations:
        missing = [name for name in dict.fromkeys((record.source, record.target)) if name not in entity_lines]
        if missing:
            names = " and ".join(repr(name) for name in missing)
            findings.append(Finding(number, "missing entity", f"the relation {_arrow(record)} names "
                                    f"{'an entity that does' if len(missing) == 1 else 'entities that do'} not exist: {names}"))
    findings.sort(key=lambda finding: finding.line)
    return findings


def why_unusable(content: bytes) -> str:
    """Why a line of valid JSON is not an entity or relation the server can use."""
    try:
        value = json.loads(content)
    except ValueError:  # accepted by msgspec only; too unusual to describe further
        return "JSON this server does not read as a record"
    if not isinstance(value, dict):
        return f"a JSON {_json_kind(value)}, not an object"
    kind = value.get("type")
    if kind not in ("entity", "relation"):
        if "type" not in value:
            return 'a JSON object without a "type"'
        return f"a record of unknown type {json.dumps(kind, ensure_ascii=False)}"
    fields: dict[str, type] = ({"name": str, "entityType": str, "observations": list} if kind == "entity"
                               else {"from": str, "to": str, "relationType": str})
    problems = []
    for name, expected in fields.items():
        if name not in value:
            problems.append(f'"{name}" is missing')
        elif not isinstance(value[name], expected) or (
                name == "observations" and not all(isinstance(item, str) for item in value[name])):
            problems.append(f'"{name}" is not {"a list of strings" if expected is list else "a string"}')
    return f"an {kind} record whose {', '.join(problems) or 'fields are unusable'}"


def _json_kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _arrow(record: RelationRecord) -> str:
    return f"{record.source!r} -{record.relationType}-> {record.target!r}"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


# --------------------------------------------------------------------------------------------
# stats
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    entities: int
    relations: int
    observations: int
    entity_types: list[tuple[str, int]]
    relation_types: list[tuple[str, int]]
    most_connected: list[tuple[str, str, int]]
    """(name, entity type, relations touching it)"""
    unknown_records: int
    repeats: int
    unreadable_lines: int
    extended_records: int
    missing_ends: int
    notes: list[str] = field(default_factory=list)
    dated_observations: int = 0
    """Observations whose recording time is known (see model/dates.py)."""
    happened_observations: int = 0
    """Observations told to have happened on a given date."""
    recorded_span: tuple[str, str] | None = None
    """The first and the last day an observation was recorded, when any was."""


def stats(graph: Graph, *, extended_records: int = 0, top: int = MOST_CONNECTED) -> Stats:
    entity_types = Counter(node.record.entityType for node in graph.entities.values())
    relation_types = Counter(edge.record.relationType for edge in graph.relations.values())
    degree = sorted(((len(triples), name) for name, triples in graph.links.items() if name in graph.entities),
                    key=lambda pair: (-pair[0], pair[1]))[:top]
    repeats = sum(1 for kept in graph.kept if kept.entity is not None or kept.relation is not None)
    missing_ends = sum(1 for source, target, _ in graph.relations
                       if source not in graph.entities or target not in graph.entities)
    return Stats(
        entities=len(graph.entities),
        relations=len(graph.relations),
        observations=sum(len(node.record.observations) for node in graph.entities.values()),
        entity_types=_ranked(entity_types),
        relation_types=_ranked(relation_types),
        most_connected=[(name, graph.entities[name].record.entityType, count) for count, name in degree],
        unknown_records=len(graph.kept) - repeats,
        repeats=repeats,
        unreadable_lines=len(graph.rejected),
        extended_records=extended_records,
        missing_ends=missing_ends,
        **_date_figures(graph),
    )


def _date_figures(graph: Graph) -> dict[str, Any]:
    recorded: list[str] = []
    happened = 0
    for node in graph.entities.values():
        if not dates.is_dated(node.record):
            continue
        recorded += [day for stamp in dates.recorded_dates(node.record) if (day := dates.compact_day(stamp))]
        happened += sum(1 for when in dates.happened_dates(node.record) if dates.compact_day(when))
    return {"dated_observations": len(recorded), "happened_observations": happened,
            "recorded_span": (min(recorded), max(recorded)) if recorded else None}


def count_extended(lines: Iterable[tuple[int, Line]]) -> int:
    return sum(1 for _, line in lines if isinstance(line, Extended))


def _ranked(counter: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda pair: (-pair[1], pair[0]))


@dataclass(frozen=True)
class FilePlace:
    """What stats says about the file itself, gathered by the caller."""

    path: Path
    size: str
    changed: str
    side_file: Path
    set_aside: int | None
    """Lines in the side file; None when it could not be read."""
    warning: str | None
    """The fragile-location warning, when the file lives inside the installation."""


def describe_figures(figures: Stats, *, top: int) -> list[str]:
    """What the memory holds, one line per item: the part of stats' report that is the same for a
    file and a database."""
    out = [
        f"Entities        {figures.entities:,}",
        f"Relations       {figures.relations:,}",
        f"Observations    {figures.observations:,}",
    ]
    if figures.dated_observations or figures.happened_observations:
        # (a memory written before dates were kept reports as it did)
        out.append(f"  dated         {figures.dated_observations:,} with the day they were recorded"
                   + (f" ({figures.recorded_span[0]} to {figures.recorded_span[1]})" if figures.recorded_span else "")
                   + (f", {figures.happened_observations:,} with the day they happened"
                      if figures.happened_observations else ""))
    for title, rows in (("Entity types", figures.entity_types), ("Relation types", figures.relation_types)):
        out += ["", f"{title} ({len(rows):,})"]
        out += [f"  {count:>8,}  {name}" for name, count in rows[:TYPES_LISTED]] or ["  none"]
        if len(rows) > TYPES_LISTED:
            rest = rows[TYPES_LISTED:]
            out.append(f"  {sum(count for _, count in rest):>8,}  in {len(rest):,} more types")
    out += ["", f"Most connected (top {top})"]
    out += [f"  {count:>8,}  {name} ({kind})" for name, kind, count in figures.most_connected] or ["  none"]
    return out


def describe_stats(figures: Stats, place: FilePlace, *, top: int, check_command: str) -> list[str]:
    """The stats command's report, one line per item."""
    out = [
        f"Memory file     {place.path}",
        f"Size            {place.size}",
        f"Last change     {place.changed}",
        *describe_figures(figures, top=top),
    ]
    set_aside = f"{place.set_aside:>8,}" if place.set_aside is not None else f"{'?':>8}"
    out += [
        "",
        "Kept aside",
        f"  {figures.unknown_records:>8,}  unknown records (JSON, but no entity or relation this server can use; "
        "kept in the file)",
        f"  {figures.repeats:>8,}  repeated entities or relations (the first one is used; kept in the file)",
        f"  {figures.unreadable_lines:>8,}  unreadable lines (the next write moves them to {place.side_file.name})",
        f"  {set_aside}  rejected lines kept in {place.side_file}",
        f"  {figures.missing_ends:>8,}  relations naming a missing entity",
        f"  {figures.extended_records:>8,}  records with extra fields (kept with their record)",
    ]
    if any((figures.unknown_records, figures.repeats, figures.unreadable_lines, figures.missing_ends)):
        out.append(f"Run `{check_command}` for the line numbers.")
    if place.warning:
        out += ["", place.warning]
    return out
