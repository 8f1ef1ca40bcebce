"""``<memory file>.index``: a SQLite copy of the graph and its ranking index, for the first answers.

A new server process (clients start one per chat) would otherwise parse the whole memory file
before its first answer. With a cache that matches the file, ``search_nodes``, ``open_nodes`` and
``read_graph`` are answered from it while the file is parsed off the request path.

The cache is never the source of truth:

- it matches a file by content: it records a BLAKE2 digest of the exact bytes it was made from,
  and is used only when the file's bytes have that digest;
- it is made in a temporary file and renamed over the old one, never changed in place, so a
  reader (in any process) sees a whole cache or none; readers open it read-only;
- anything wrong with it (missing, truncated, corrupted, another version, stale) makes it
  unused, and the next build replaces it; deleting it loses nothing;
- the memory file's format does not change.

Answers from the cache equal the answers from the graph in memory: the same functions rank,
over the same postings.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sqlite3
import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, closing, nullcontext, suppress
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec

from ..index.search import FIELD_SEPARATOR
from ..model import graph as rules
from ..model.graph import Graph
from ..retrieval.paging import Listing, cut_summary

FORMAT: Final = "3"
"""Caches of another format are made again: 3 ranks entity types of equal count by name."""
WORTH_CACHING: Final = 1 << 20
"""Bytes of memory file below which no cache is made: such a file loads in a few tens of ms."""
REFRESH_DELAY: Final = 2.0
"""Seconds without a call before the cache is rebuilt (and the ranking's index made), so that
the work never competes with answers."""
WARM_UP_DELAY: Final = 0.2
"""Seconds between the first answer from the cache and the start of loading the file: parsing
holds the interpreter for long stretches, and the answer has yet to be encoded and sent."""
_PRIVATE: Final = 0o600

_SCHEMA: Final = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entities (seq INTEGER PRIMARY KEY, name TEXT NOT NULL, view BLOB NOT NULL,
                       length INTEGER NOT NULL, start INTEGER NOT NULL);
CREATE TABLE haystack (texts TEXT NOT NULL, starts BLOB NOT NULL, seqs BLOB NOT NULL);
CREATE TABLE relations (seq INTEGER PRIMARY KEY, source TEXT NOT NULL, target TEXT NOT NULL, view BLOB NOT NULL);
CREATE TABLE terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL);
CREATE TABLE postings (term INTEGER NOT NULL, seq INTEGER NOT NULL, tf INTEGER NOT NULL,
                       PRIMARY KEY (term, seq)) WITHOUT ROWID;
"""
_INDEXES: Final = """
CREATE UNIQUE INDEX entities_by_name ON entities (name);
CREATE INDEX relations_by_source ON relations (source);
CREATE INDEX relations_by_target ON relations (target);
CREATE UNIQUE INDEX terms_by_term ON terms (term);
"""


def worth_caching(signature: tuple[int, int, int, int] | None) -> bool:
    """Whether the memory file with this stat signature is large enough to be worth a cache."""
    return signature is not None and signature[1] >= WORTH_CACHING


class CacheState:
    """What a store knows of its cache: the cold index used before its first load, and refreshes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tried = False
        self.done = False
        """True once the graph answers (or the cache could not)."""
        self.cold: ColdIndex | None = None
        self.signature: tuple[int, int, int, int] | None = None
        """The memory file's stat signature when the cold index was checked against its bytes."""
        self.refresh_pending = False
        self.last_activity = 0.0
        """When the store last answered a call (time.monotonic)."""
        self.answered = 0
        """How many answers the cache gave."""
        self.ahead: Any = None
        """The store's look ahead at the cache and the file, until the first read takes it."""


_BETWEEN: Final = "\n"  # any character: a hit is checked to lie within one text


def cache_path(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.name + ".index")


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


# --------------------------------------------------------------------------------------------
# Making the cache
# --------------------------------------------------------------------------------------------


def build(memory_file: Path, graph: Graph, digest: str,
          guard: Callable[[], AbstractContextManager[bool]] = partial(nullcontext, True)) -> bool:
    """Writes the cache of `graph`, the graph of the memory file bytes with `digest`; True when it
    was put in place. `guard()` is held while the temporary file is made and while it is renamed
    into place, and says whether the cache is still wanted: a write that removed something takes
    the same guard to remove the cache and its temporaries (see :func:`remove`), so that a build of
    the graph before the write never lands after it. OSError or sqlite3.Error when it cannot; the
    old cache (if any) then stays as it was."""
    target = cache_path(memory_file)
    with guard() as wanted:
        if not wanted:
            return False
        for stray in _stray_temporaries(target):
            with suppress(OSError):
                stray.unlink()
        temporary = target.with_name(f"{target.name}.{secrets.token_hex(8)}.tmp")
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), _PRIVATE))
        db = sqlite3.connect(temporary, isolation_level=None)
    try:
        with closing(db):
            # A cache is rebuilt rather than recovered: no journal, no waiting on the disk; no
            # temporary files (sorting for the indexes stays in memory); freed pages zeroed.
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute("PRAGMA temp_store = MEMORY")
            db.execute("PRAGMA secure_delete = ON")
            db.execute("BEGIN")
            for statement in _statements(_SCHEMA):
                db.execute(statement)
            _fill(db, rules.with_term_index(graph), digest)
            for statement in _statements(_INDEXES):
                db.execute(statement)
            db.execute("COMMIT")
        with guard() as wanted:
            if wanted:
                os.replace(temporary, target)
                return True
            return False
    finally:
        with suppress(FileNotFoundError):
            os.unlink(temporary)


def remove(memory_file: Path) -> None:
    """The cache of `memory_file` gone, with every temporary or journal file of it (a build in
    another thread writes on into a file no longer in the directory, and its rename fails)."""
    target = cache_path(memory_file)
    for path in (target, target.with_name(target.name + "-journal"), target.with_name(target.name + "-wal"),
                 target.with_name(target.name + "-shm"), *_stray_temporaries(target)):
        with suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(path)


def _statements(script: str) -> list[str]:
    return [statement for statement in script.split(";") if statement.strip()]


def _fill(db: sqlite3.Connection, graph: Graph, digest: str) -> None:
    terms = graph.terms
    assert terms is not None
    encode = msgspec.json.encode
    seq_of = {name: node.seq for name, node in graph.entities.items()}
    # Every entity's search text in one string, searched with str.find as the graph searches
    # node.text; where each text starts tells whose a hit is.
    starts = array("q")
    at = 0
    for node in graph.entities.values():
        starts.append(at)
        at += len(node.text) + 1
    db.execute("INSERT INTO haystack VALUES (?, ?, ?)", (
        _BETWEEN.join(node.text for node in graph.entities.values()), starts.tobytes(),
        array("q", seq_of.values()).tobytes()))
    db.executemany("INSERT INTO entities VALUES (?, ?, ?, ?, ?)",
                   ((node.seq, name, encode(node.view), terms.lengths[name], start)
                    for (name, node), start in zip(graph.entities.items(), starts, strict=True)))
    db.executemany("INSERT INTO relations VALUES (?, ?, ?, ?)",
                   ((edge.seq, source, target, encode(edge.view))
                    for (source, target, _), edge in graph.relations.items()))
    db.executemany("INSERT INTO terms VALUES (?, ?)", enumerate(terms.postings))
    db.executemany("INSERT INTO postings VALUES (?, ?, ?)",
                   ((number, seq_of[name], tf)
                    for number, holders in enumerate(terms.postings.values()) for name, tf in holders.items()))
    # Counted here once, so that the first page of a read_graph from the cache need not read
    # every object to head it.
    types, connected = rules.summary_counts(graph)
    summary = {"entities": len(graph.entities), "relations": len(graph.relations), "types": types,
               "connected": connected}
    db.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("format", FORMAT), ("digest", digest), ("count", str(len(terms.lengths))), ("total", str(terms.total)),
        ("weights", ",".join(map(str, terms.weights))), ("summary", encode(summary).decode())])


def _stray_temporaries(target: Path) -> list[Path]:
    """Temporary caches a killed builder left behind."""
    pattern = re.compile(re.escape(target.name) + r"\.[0-9a-f]{16}\.tmp")
    with suppress(OSError), os.scandir(target.parent) as entries:
        return [target.parent / entry.name for entry in entries if pattern.fullmatch(entry.name)]
    return []


# --------------------------------------------------------------------------------------------
# Answering from the cache
# --------------------------------------------------------------------------------------------


class ColdIndex:
    """A cache that matched the memory file's bytes when opened; answers as the graph would."""

    def __init__(self, db: sqlite3.Connection, count: int, total: int, digest: str, summary: str) -> None:
        self._db = db
        self._summary = summary
        self.digest = digest
        """The digest of the memory file bytes this cache was made of."""
        self._count = count
        self._total = total
        self._decode = msgspec.json.Decoder().decode
        self._texts: str | None = None
        self._starts = array("q")
        self._seqs = array("q")

    def _haystack(self) -> str:
        if self._texts is None:
            texts, starts, seqs = self._db.execute("SELECT texts, starts, seqs FROM haystack").fetchone()
            self._starts.frombytes(starts)
            self._seqs.frombytes(seqs)
            self._texts = texts
        return texts if (texts := self._texts) is not None else ""

    def text_at(self, position: int) -> str:
        """The search text of the `position`-th entity in graph order."""
        texts = self._haystack()
        start = self._starts[position]
        end = self._starts[position + 1] - 1 if position + 1 < len(self._starts) else len(texts)
        return texts[start:end]

    def _containing(self, needle: str) -> list[int]:
        """Positions (in graph order) of the entities whose search text contains `needle`."""
        texts = self._haystack()
        starts = self._starts
        found: list[int] = []
        if not starts:
            return found
        at = texts.find(needle)
        while at >= 0:
            position = bisect_right(starts, at) - 1
            end = starts[position + 1] - 1 if position + 1 < len(starts) else len(texts)
            if at + len(needle) <= end:
                found.append(position)
                at = texts.find(needle, end + 1)  # the next entity's text
            else:
                at = texts.find(needle, at + 1)
        return found

    @classmethod
    def open(cls, memory_file: Path, digest: str | None) -> ColdIndex | None:
        """The cache of the memory file whose bytes have `digest`, or None when there is no such
        cache. With `digest` None, whatever usable cache there is: then its :attr:`digest` must be
        checked against the file before its answers are used."""
        path = cache_path(memory_file)
        if not path.exists():
            return None
        db = None
        try:
            # Never changed in place (see build), so read without locks or a journal.
            db = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            from ..index.ranking import FIELD_WEIGHTS

            if (meta.get("format") != FORMAT or digest not in (None, meta.get("digest"))
                    or meta.get("weights") != ",".join(map(str, FIELD_WEIGHTS))):
                db.close()
                return None
            return cls(db, int(meta["count"]), int(meta["total"]), str(meta["digest"]), str(meta["summary"]))
        except (sqlite3.Error, KeyError, ValueError, OSError):
            if db is not None:
                db.close()
            return None

    def close(self) -> None:
        self._db.close()

    def read_graph(self) -> dict[str, Any]:
        # Each table's objects as one JSON array, decoded in one call rather than one per row.
        return {"entities": self._array("SELECT view FROM entities ORDER BY seq"),
                "relations": self._array("SELECT view FROM relations ORDER BY seq")}

    def graph_units(self) -> dict[str, Any]:
        """read_graph for the pager: each entity and relation as its JSON (msgspec.Raw), unparsed,
        the entities a Listing that summarises the graph from the counts made with the cache. A
        page takes only what it shows, so the first page of a large graph costs reading the rows,
        not decoding them all."""
        raw = msgspec.Raw
        counts = self._decode(self._summary)
        types = [(kind, count) for kind, count in counts["types"]]
        connected = [(name, count) for name, count in counts["connected"]]
        return {"entities": Listing((raw(view) for (view,) in self._db.execute("SELECT view FROM entities ORDER BY seq")),
                                    partial(cut_summary, counts["entities"], counts["relations"], types, connected)),
                "relations": [raw(view) for (view,) in self._db.execute("SELECT view FROM relations ORDER BY seq")]}

    def _array(self, sql: str) -> list[Any]:
        views = [view for (view,) in self._db.execute(sql)]
        decoded: list[Any] = self._decode(b"[" + b",".join(views) + b"]")
        return decoded

    def open_nodes(self, names: list[str]) -> dict[str, Any]:
        wanted = list(dict.fromkeys(names))
        rows = self._rows("SELECT name, view FROM entities WHERE name IN ({}) ORDER BY seq", wanted)
        found = [name for name, _ in rows]
        return {"entities": [self._decode(view) for _, view in rows], "relations": self._relations_touching(found)}

    def search_nodes(self, query: str, limit: int | None = None) -> dict[str, Any] | None:
        """The answer of :func:`rules.search_nodes`, or None for a query only the graph answers."""
        needle = query.lower()
        if FIELD_SEPARATOR in needle:
            return None  # a match must not span fields: checked per field, on the graph
        positions = self._containing(needle)
        if positions:
            seqs = self._seqs
            rows = self._rows("SELECT seq, name, view, start FROM entities WHERE seq IN ({})",
                              [seqs[position] for position in positions])
            rows.sort(key=lambda row: row[0])
            if needle.strip():
                key = rules.relevance(needle)
                by_seq = dict(zip((seqs[position] for position in positions), positions, strict=True))
                rows.sort(key=lambda row: key(row[1], self._decode(row[2])["entityType"],
                                              self.text_at(by_seq[row[0]]), row[0]))
            chosen = [(name, view) for _, name, view, _ in rows]
        else:
            chosen = self._ranked_by_words(query)
        if limit is not None:
            chosen = chosen[:limit]
        return {"entities": [self._decode(view) for _, view in chosen],
                "relations": self._relations_touching([name for name, _ in chosen])}

    def _ranked_by_words(self, query: str) -> list[tuple[str, bytes]]:
        from ..index import ranking

        terms = _CachedTerms(self._db, self._count, self._total, self)
        scores = ranking.rank(terms, query, ranking.DEFAULT, terms.text_of)
        rows = self._rows("SELECT seq, name, view FROM entities WHERE name IN ({})", list(scores))
        rows.sort(key=lambda row: (-scores[row[1]], row[0]))
        return [(name, view) for _, name, view in rows]

    def _relations_touching(self, names: list[str]) -> list[dict[str, Any]]:
        if not names:
            return []
        self._db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (name TEXT PRIMARY KEY)")
        self._db.execute("DELETE FROM wanted")
        self._db.executemany("INSERT OR IGNORE INTO wanted VALUES (?)", ((name,) for name in names))
        # Two lookups through the endpoint indexes; an OR of both would scan every relation.
        rows = self._db.execute(
            "SELECT seq, view FROM relations WHERE source IN (SELECT name FROM wanted) "
            "UNION SELECT seq, view FROM relations WHERE target IN (SELECT name FROM wanted) ORDER BY seq").fetchall()
        return [self._decode(view) for _, view in rows]

    def _rows(self, sql: str, names: list[Any]) -> list[Any]:
        rows: list[Any] = []
        for start in range(0, len(names), 500):  # below SQLite's limit on parameters
            chunk = names[start:start + 500]
            rows += self._db.execute(sql.format(", ".join("?" * len(chunk))), chunk).fetchall()
        return rows


class _CachedTerms:
    """The ranking's index, read from the cache term by term."""

    def __init__(self, db: sqlite3.Connection, count: int, total: int, cold: ColdIndex) -> None:
        self._db = db
        self._cold = cold
        self.total = total
        self.lengths = _Lengths(count)
        self.postings = _Postings(self)
        self._positions: dict[str, int] = {}

    def holders(self, term: str) -> dict[str, int]:
        found = {}
        for name, tf, length in self._db.execute(
                "SELECT e.name, p.tf, e.length FROM terms t JOIN postings p ON p.term = t.id "
                "JOIN entities e ON e.seq = p.seq WHERE t.term = ?", (term,)):
            found[name] = tf
            self.lengths.known[name] = length
        return found

    def text_of(self, name: str) -> str:
        row = self._db.execute("SELECT start FROM entities WHERE name = ?", (name,)).fetchone()
        if row is None:
            return ""
        self._cold._haystack()
        return self._cold.text_at(bisect_right(self._cold._starts, row[0]) - 1)


class _Lengths(Mapping[str, int]):
    """Entity lengths: as many as the cache holds, those of the entities read so far known."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.known: dict[str, int] = {}

    def __getitem__(self, name: str) -> int:
        return self.known[name]

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[str]:
        return iter(self.known)


class _Postings(Mapping[str, Mapping[str, int]]):
    def __init__(self, terms: _CachedTerms) -> None:
        self._terms = terms

    def __getitem__(self, term: str) -> Mapping[str, int]:
        found = self._terms.holders(term)
        if not found:
            raise KeyError(term)
        return found

    def __len__(self) -> int:
        raise TypeError("the cache's postings are read term by term")

    def __iter__(self) -> Iterator[str]:
        raise TypeError("the cache's postings are read term by term")
