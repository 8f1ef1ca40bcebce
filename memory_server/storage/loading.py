"""Reading the memory file's bytes into a graph, and what a person editing it by hand should know.

Guarantees (tests/test_loading.py, tests/test_coldstart.py):

L1. The graph of the bytes is the one model/graph.graph_from_lines makes of model/records.decode_file
    (the pieces below give the same graph, line numbers included).
L2. With `pieces`, the interpreter is let go between pieces of about PIECE bytes: a load in the
    background never holds up an answer being encoded or sent for longer than one piece takes.
    (Without, one call decodes the whole file: about 40% faster, for a caller that waits for it.)
L3. A load runs with the cyclic collector paused, by the process's one policy (storage/collector.py
    G1 to G3): what it made goes to the collector's oldest generation at once when the last pause
    ends, so the next young collection does not go over the millions a load makes (a quarter of a
    second at 100,000 entities, on the request path), and a full collection still frees any cycle.
L4. :func:`decode` and :func:`graph_of` split :func:`parse` in two, for a caller that answers from
    the records before the graph is made (coldstart S4): the same graph, decoded once.
L5. A file that holds one JSON document (an export, `export --format json`, pretty-printed or on
    one line) where the memory's JSON Lines were expected is no memory file: :func:`json_document`
    says so, the store neither answers from it nor writes over it, and the message says to import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import msgspec

from ..model import graph as rules
from ..model.graph import Graph
from ..model.records import BOM, Line, Opaque, Rejected, decode_file
from . import collector
from .files import rejected_path_for

PIECE: Final = 1 << 21
"""Bytes decoded in one call (L2): a few ms."""




def _lines(data: bytes) -> list[Line]:
    """decode_file(data), a piece at a time (L1, L2)."""
    if len(data) <= PIECE:
        return decode_file(data)
    lines: list[Line] = []
    start = 0
    while start < len(data):
        end = data.find(b"\n", min(start + PIECE, len(data)))
        end = len(data) if end < 0 else end + 1
        piece = data[start:end]
        if start and piece.startswith(BOM):
            return decode_file(data)  # a mark that only the first piece may drop
        decoded = decode_file(piece)
        if any(type(line) is Rejected for line in decoded):
            return decode_file(data)  # numbered from the file's first line, not the piece's
        lines += decoded
        start = end
    return lines


def decode(data: bytes, *, pieces: bool = False) -> list[Line]:
    """The file's records, classified (L1, L2)."""
    with collector.paused():
        return _lines(data) if pieces else decode_file(data)


def graph_of(lines: list[Line], views: rules.Views | None = None) -> Graph:
    """The graph of records :func:`decode` gave (L1); `views`: see graph_from_lines."""
    with collector.paused():
        return rules.graph_from_lines(lines, views)


def parse(data: bytes, *, pieces: bool = False) -> Graph:
    with collector.paused():
        return graph_of(decode(data, pieces=pieces))


def json_document(file: Path, data: bytes, lines: list[Line]) -> str | None:
    """Why `data` (with its records `lines`) is no memory file but one JSON document (L5), or None.

    Recognised: a first line that is only `{` or `[` (an indented document: no memory file has
    such a line), or a whole file that is one object with "entities" or "relations" (an export
    written on one line). Only a file with a line that is no record is looked at twice."""
    if not lines or not (type(lines[0]) is Rejected or (len(lines) == 1 and type(lines[0]) is Opaque)):
        return None
    first = data.removeprefix(BOM).lstrip().split(b"\n", 1)[0].strip()
    spread = first in (b"{", b"[")
    if not spread:
        try:
            whole: Any = msgspec.json.decode(data.removeprefix(BOM))
        except msgspec.DecodeError:
            return None
        if not (isinstance(whole, dict) and "type" not in whole and ("entities" in whole or "relations" in whole)):
            return None
    aside = file.with_name(file.name + ".export.json")
    return (f"The memory file {file} holds one JSON document (as `mcp-server-memory export --format json` writes "
            "it), not JSON Lines (one entity or relation a line), so this server neither reads nor writes it; "
            f"nothing was changed. To make it the memory, move it aside (mv {file} {aside}) and import it: "
            f"mcp-server-memory import {aside} (with MEMORY_FILE_PATH set as for the server).")


def describe_load(file: Path, graph: Graph) -> list[str]:
    """What a person editing the file by hand should know about what was just loaded."""
    messages = []
    if graph.rejected:
        numbers = ", ".join(str(line.number) for line in graph.rejected[:10])
        more = ", ..." if len(graph.rejected) > 10 else ""
        messages.append(
            f"{file}: {rules.plural(len(graph.rejected), 'line is', 'lines are')} not valid JSON "
            f"(line {numbers}{more}), so not part of the graph; the next write moves "
            f"{'it' if len(graph.rejected) == 1 else 'them'} to {rejected_path_for(file)}")
    repeats = sum(1 for kept in graph.kept if kept.entity is not None or kept.relation is not None)
    if repeats:
        messages.append(
            f"{file}: {rules.plural(repeats, 'line repeats', 'lines repeat')} an entity name or relation "
            "defined earlier; the first one is used, the repeats stay in the file")
    if unknown := len(graph.kept) - repeats:
        messages.append(
            f"{file}: {rules.plural(unknown, 'line is', 'lines are')} JSON but not an entity or relation "
            f"this server can use; kept in the file as {'it is' if unknown == 1 else 'they are'}")
    return messages
