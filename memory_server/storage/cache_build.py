"""Making and removing ``<memory file>.index`` (index_cache.py's C4 and C5): the places of the
file's lines, the search texts and the ranking's postings, written to a private file renamed into
place, and every file of it removed before a save is acknowledged."""

from __future__ import annotations

import os
import re
import secrets
import sqlite3
from array import array
from collections.abc import Callable
from contextlib import AbstractContextManager, closing, nullcontext, suppress
from pathlib import Path
from typing import Any

import msgspec

from ..model import census, indexes
from ..model import graph as rules
from ..model.graph import Graph
from ..model.records import EntityRecord, Extended, RelationRecord, decode_line
from ..osio import NotARegularFile, refuse_unless_regular
from .index_cache import _BETWEEN, _PRIVATE, _SCHEMA, FORMAT, PARTS, _keyed_digest, _pack, _part_digest, cache_path


def build(memory_file: Path, graph: Graph, data: bytes, digest: str,
          guard: Callable[[], AbstractContextManager[bool]] | None = None) -> bool:
    """Writes the cache of `graph`, the graph of the memory file bytes `data` with `digest`; True
    when it was put in place. `guard()` is held while the temporary file is made and while it is
    renamed into place, and says whether the cache is still wanted (C5). False too when the lines
    of `data` cannot be matched with the graph (then no cache helps). OSError or sqlite3.Error
    when it cannot; the old cache (if any) then stays as it was."""
    parts, meta = _contents(graph, data, digest)
    if parts is None:
        return False
    wanted_by: Callable[[], AbstractContextManager[bool]] = guard or _always_wanted
    target = cache_path(memory_file)
    with wanted_by() as wanted:
        if not wanted:
            return False
        for stray in _stray_temporaries(target):
            with suppress(OSError):
                stray.unlink()
        temporary = target.with_name(f"{target.name}.{secrets.token_hex(8)}.tmp")
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), _PRIVATE))
        # Opened under the guard: a remove() after it unlinks this very file.
        db = sqlite3.connect(temporary, isolation_level=None)
    try:
        with closing(db):
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute("PRAGMA temp_store = MEMORY")
            db.execute("PRAGMA secure_delete = ON")
            db.execute("BEGIN")
            for statement in _SCHEMA:
                db.execute(statement)
            db.executemany("INSERT INTO parts VALUES (?, ?)", parts.items())
            db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
            db.execute("COMMIT")
        with wanted_by() as wanted:
            if not wanted:
                return False
            try:
                refuse_unless_regular(target)  # never over something that is not a cache of ours
                os.replace(temporary, target)
            except NotARegularFile:
                return False
            except FileNotFoundError:
                return False  # removed by a save meanwhile (C5)
            return True
    finally:
        with suppress(FileNotFoundError):
            os.unlink(temporary)


def _always_wanted() -> AbstractContextManager[bool]:
    return nullcontext(True)


def remove(memory_file: Path) -> None:
    """The cache of `memory_file` gone, with every temporary or journal file of it (a build in
    another thread writes on into a file no longer in the directory, and its rename fails)."""
    target = cache_path(memory_file)
    for path in (target, target.with_name(target.name + "-journal"), target.with_name(target.name + "-wal"),
                 target.with_name(target.name + "-shm"), *_stray_temporaries(target)):
        with suppress(FileNotFoundError, NotADirectoryError, NotARegularFile):
            refuse_unless_regular(path)  # a FIFO or a directory under the name is not ours to remove
            os.unlink(path)


def _line_spans(graph: Graph, data: bytes) -> tuple[array[int], array[int], list[bool]] | None:
    """Where each entity's and relation's line lies in `data`, and whether it is exactly the
    record's own encoding; None when the file's lines do not give this graph."""
    entities, relations = array("q"), array("q")
    plain: list[bool] = []
    # A file this program saved: its lines in graph order, joined by newlines.
    at = 0
    for spans, items in ((entities, graph.entities.values()), (relations, graph.relations.values())):
        for item in items:
            line = item.line
            end = at + len(line)
            if data[at:end] != line or data[end:end + 1] not in (b"\n", b""):
                return _spans_by_reading(graph, data)
            spans.extend((at, len(line)))
            plain.append(getattr(item, "extra", None) is None)
            at = end + 1
    return entities, relations, plain


def _spans_by_reading(graph: Graph, data: bytes) -> tuple[array[int], array[int], list[bool]] | None:
    """_line_spans for any other file: every line decoded again, the first of each name or
    relation taken, as the graph was made."""
    entity_at: dict[str, tuple[int, int, bool]] = {}
    relation_at: dict[rules.Triple, tuple[int, int, bool]] = {}
    at = 0
    for line in data.split(b"\n"):
        start, at = at, at + len(line) + 1
        if not line.strip():
            continue
        item: Any = decode_line(line, 0)
        plain = type(item) is not Extended
        record = item.record if type(item) is Extended else item
        if type(record) is EntityRecord:
            entity_at.setdefault(record.name, (start, len(line), plain))
        elif type(record) is RelationRecord:
            relation_at.setdefault((record.source, record.target, record.relationType), (start, len(line), plain))
    if len(entity_at) != len(graph.entities) or len(relation_at) != len(graph.relations):
        return None
    entities, relations = array("q"), array("q")
    flags: list[bool] = []
    try:
        for spans, items, where in ((entities, graph.entities, entity_at), (relations, graph.relations, relation_at)):
            for key, item in items.items():
                start, size, plain = where[key]  # type: ignore[index]
                spans.extend((start, size))
                flags.append(plain and data[start:start + size] == item.line)
    except KeyError:
        return None
    return entities, relations, flags


def _contents(graph: Graph, data: bytes, digest: str) -> tuple[dict[str, bytes] | None, dict[str, str]]:
    # A file that starts with a byte order mark (an editor's) is left to the graph: it is rare.
    spans = None if data.startswith(b"\xef\xbb\xbf") else _line_spans(graph, data)
    if spans is None:
        return None, {}
    entity_spans, relation_spans, plain = spans
    graph = indexes.with_term_index(graph)
    terms = graph.terms
    assert terms is not None
    encode = msgspec.json.encode
    names = list(graph.entities)
    place = {name: number for number, name in enumerate(names)}
    texts = [node.text.encode() for node in graph.entities.values()]
    starts = array("q")
    at = 0
    for text in texts:
        starts.append(at)
        at += len(text) + 1
    links_at, links = array("q", [0]), array("I")
    relation_place = {triple: number for number, triple in enumerate(graph.relations)}
    for name in names:
        links.extend(sorted(relation_place[triple] for triple in graph.links.get(name, ())))
        links_at.append(len(links))
    postings_at, postings, tfs = array("q", [0]), array("I"), array("I")
    # (an ordinal of the index is not always the entity's place: writes add entities at the end)
    to_place = array("I", [place.get(name, 0) for name in terms.names])
    for term in terms.columns:
        found = terms.column(term)
        assert found is not None
        postings.extend(map(to_place.__getitem__, found[0]))
        tfs.extend(found[1])
        postings_at.append(len(postings))
    from ..index.ranking import FIELD_WEIGHTS, rules_digest

    types, connected = census.summary_counts(graph)
    summary = {"entities": len(graph.entities), "relations": len(graph.relations), "types": types,
               "connected": connected}
    parts = {
        "entities": _pack(entity_spans), "relations": _pack(relation_spans), "names": encode(names),
        "plain": bytes(plain), "texts": _BETWEEN.join(texts), "starts": _pack(starts),
        "links_at": _pack(links_at), "links": _pack(links),
        "lengths": _pack([terms.spans[terms.ordinals[name]] for name in names]),
        "terms": encode(list(terms.columns)), "postings_at": _pack(postings_at),
        "postings": _pack(postings), "tfs": _pack(tfs),
    }
    meta = {"format": FORMAT, "digest": digest, "size": str(len(data)), "total": str(terms.total),
            "weights": ",".join(map(str, FIELD_WEIGHTS)), "term_rules": rules_digest(),
            "summary": encode(summary).decode()}
    meta.update((f"mac:{name}", _part_digest(digest, name, parts[name])) for name in PARTS)
    meta["mac"] = _keyed_digest(digest, meta)
    return parts, meta


def _stray_temporaries(target: Path) -> list[Path]:
    """Temporary caches a killed builder left behind (or one a build is writing)."""
    pattern = re.compile(re.escape(target.name) + r"\.[0-9a-f]{16}\.tmp")
    with suppress(OSError), os.scandir(target.parent) as entries:
        return [target.parent / entry.name for entry in entries if pattern.fullmatch(entry.name)]
    return []


