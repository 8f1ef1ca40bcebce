"""``<memory file>.index``: where each entity and relation lies in the memory file, its search
text and the ranking's index, so that a new process answers its first calls without parsing the
whole file.

A new server process (clients start one per chat) would otherwise parse the whole memory file
before its first answer. With a cache that matches the file, ``search_nodes``, ``open_nodes`` and
``read_graph`` are answered from the file's bytes at the places the cache names, while the file
is parsed off the request path.

The cache is never the source of truth. Numbered, as tests/test_index_cache.py checks them:

C1. A cache is used only for the file bytes it was made of: it records their BLAKE2 digest, and
    it is opened only with the digest of the bytes just read from the file.
C2. Everything it holds is covered by keyed BLAKE2 digests whose key is the file's digest: one
    per part, checked when the part is first read, and one over the meta table that lists them,
    checked when the cache is opened. A changed row, a changed byte, a part of another cache or of
    another file fails its check, and the cache is not used (and is made again: the next build's
    look reads every part, see :func:`is_current`).
C3. It holds no copy of an entity or relation: only where its line lies in the file. Every
    entity and relation answered is decoded from the file's own bytes there, and checked to be
    the one the cache says (its name, its endpoints); a mismatch is C2's failure. What goes to
    the client is encoded from what was decoded, never bytes of the cache. (Once the store has
    made the graph of the same bytes, an entity is taken from that graph instead, checked to be
    at the place the cache says: storage/candidates.py F5.)
C4. It is made in a private temporary file (0600 from its first byte, no journal, temporary
    tables in memory) and renamed over the old one, never changed in place: a reader in any
    process sees a whole cache or none; readers open it read-only.
C5. It is removed, with every temporary and journal file of it, before a save of the memory file
    is acknowledged (see cache_build.remove); a build of an older graph never lands after that save
    (cache_build.build holds the caller's guard while it creates and while it renames its file). So
    text a write removed is in no file of the cache once the write is answered, and a memory
    that went below :data:`WORTH_CACHING` has none.
C6. Deleting it loses nothing; the memory file's format does not change.
C7. The graph made of the same bytes takes its ranking index from the cache's postings (the
    store's first index, which writes then keep up to date, and which the next cache is made of):
    only from a cache made under this version's term rules (ranking.rules_digest, in the meta
    table: a cache of other rules is not used at all), only for a graph whose entities are the
    cache's, name for name in order, and only from postings that fit them (each term's holders
    ascending and within the entities, no count of 0, lengths summing to the total); else
    CacheMismatch, and the graph's index is made from its texts.

Answers from the cache equal the answers from the graph in memory: the cache gives parts of the
graph (the entities a search may match, with the ranking's postings of the whole memory), and
retrieval/search.py runs the same rules on them as on the graph.
"""

from __future__ import annotations

import hashlib
import hmac
import operator
import sqlite3
import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..index.search import FIELD_SEPARATOR
from ..model import graph as rules
from ..model.census import Listing, cut_summary
from ..model.graph import EMPTY, Edge, Graph, Node
from ..model.records import EntityRecord, Extended, RelationRecord, decode_line
from ..osio import NotARegularFile, refuse_unless_regular

if TYPE_CHECKING:  # (ranking is imported with the first search by words)
    from ..index import ranking

FORMAT: Final = "4"
"""Caches of another format are made again: 4 holds places in the file, not copies."""
WORTH_CACHING: Final = 1 << 20
"""Bytes of memory file below which no cache is made: such a file loads in a few tens of ms."""
_PRIVATE: Final = 0o600
_BETWEEN: Final = b"\n"  # any byte: a hit is checked to lie within one text

PARTS: Final = ("entities", "relations", "names", "plain", "texts", "starts", "links_at", "links",
                "lengths", "terms", "postings_at", "postings", "tfs")
"""What a cache holds, each a blob, in the order its keyed digest covers them:
entities, relations: (offset, size) of each one's line in the file, in graph order (array q);
names: the entities' names (JSON); plain: 1 for a line that is exactly the record's own encoding
(its answer object is the line without its type tag), else 0; texts, starts: every entity's
search text (UTF-8, lower case) and where each starts; links_at, links: the relations touching
each entity (CSR); lengths: each entity's weighted length; terms (JSON), postings_at, postings,
tfs: the ranking's postings (CSR, by entity place)."""

_SCHEMA: Final = ("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                  "CREATE TABLE parts (name TEXT PRIMARY KEY, data BLOB NOT NULL)")


class CacheMismatch(Exception):
    """The cache does not say what the file holds (C2, C3): it is not used again."""


def worth_caching(signature: tuple[int, int, int, int] | None) -> bool:
    """Whether the memory file with this stat signature is large enough to be worth a cache."""
    return signature is not None and signature[1] >= WORTH_CACHING


def _dated(line: bytes) -> bool:
    """Whether a line in the record's own encoding holds dates (createdAt, updatedAt, recordedAt,
    happenedOn), which its answer object shows compacted (model.dates.answer_dates), not as stored.
    In that encoding `At":` and `On":` end only those keys: inside a string a quote is escaped, and a
    string value is never followed by a colon."""
    return b'At":' in line or b'On":' in line


def cache_path(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.name + ".index")


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def _pack(values: Sequence[int]) -> bytes:
    """`values` as an array of the narrowest unsigned type that holds them, its type code first."""
    top = max(values, default=0)
    code = next(code for code in "BHIQ" if top < 1 << (8 * array(code).itemsize))
    return code.encode() + array(code, values).tobytes()


def _unpack(blob: bytes) -> array[int]:
    if blob[:1] not in (b"B", b"H", b"I", b"Q"):
        raise CacheMismatch("not a packed array")
    return array(blob[:1].decode(), blob[1:])


def _mac(digest: str) -> Any:
    return hashlib.blake2b(key=bytes.fromhex(digest), digest_size=32, person=b"memory.index")


def _part_digest(digest: str, name: str, blob: bytes) -> str:
    """The keyed digest of one part (C2), checked when the part is first read."""
    mac = _mac(digest)
    for item in (name.encode(), blob):
        mac.update(len(item).to_bytes(8, "little"))
        mac.update(item)
    return str(mac.hexdigest())


def _keyed_digest(digest: str, meta: Mapping[str, str]) -> str:
    """The keyed digest of the meta table, which holds every part's own (C2)."""
    mac = _mac(digest)
    for key in sorted(meta):
        if key != "mac":
            for item in (key.encode(), meta[key].encode()):
                mac.update(len(item).to_bytes(8, "little"))
                mac.update(item)
    return str(mac.hexdigest())


def is_current(memory_file: Path, data: bytes, digest: str) -> bool:
    """Whether the cache beside `memory_file` is a whole, unchanged cache of `data` (C1, C2):
    every part read and checked."""
    cold = ColdIndex.open(memory_file, data, digest)
    if cold is None:
        return False
    try:
        for name in PARTS:
            cold.part(name)
    except (CacheMismatch, sqlite3.Error):
        return False
    finally:
        cold.close()
    return True


# --------------------------------------------------------------------------------------------
# Answering from the cache
# --------------------------------------------------------------------------------------------


_views: Final = msgspec.json.Decoder(list[msgspec.Raw])


class ColdIndex:
    """A cache that matched the memory file's bytes when opened (C1, C2); answers as the graph
    would, from the file's bytes (C3)."""

    def __init__(self, data: bytes, meta: Mapping[str, str], db: sqlite3.Connection) -> None:
        self.data = data
        """The memory file's bytes this cache was checked against."""
        self.digest = meta["digest"]
        self._meta = meta
        self._summary = meta["summary"]
        self._total = int(meta["total"])
        self._db = db
        self._reading = threading.Lock()
        self._loaded: dict[str, Any] = {}
        self._place: dict[str, int] | None = None
        self._terms: dict[str, int] | None = None
        self._placed: Mapping[str, Node] | None = None
        """The entities of the graph whose places were checked whole (:meth:`_check_places`)."""
        self._escaped: bool | None = None
        """Whether the file spells any character as a \\u escape (then a name may hide in it)."""

    @classmethod
    def open(cls, memory_file: Path, data: bytes, digest: str) -> ColdIndex | None:
        """The cache of the memory file bytes `data`, whose digest is `digest`, or None when there
        is no such cache, or its meta table fails its keyed digest (C1, C2). Each part is read, and
        checked against its own keyed digest, when an answer first needs it: an answer that meets a
        changed part fails (CacheMismatch), and the cache is not used again."""
        path = cache_path(memory_file)
        try:
            # SQLite cannot be told not to wait: a FIFO at the name would block its open for ever.
            refuse_unless_regular(path)
        except NotARegularFile:
            return None
        if not path.exists():
            return None
        db = None
        try:
            # Never changed in place (C4), so read without locks or a journal.
            db = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            meta = {str(key): str(value) for key, value in db.execute("SELECT key, value FROM meta")}
            from ..index.ranking import FIELD_WEIGHTS, rules_digest

            if (meta.get("format") == FORMAT and meta.get("digest") == digest
                    and meta.get("weights") == ",".join(map(str, FIELD_WEIGHTS))
                    and meta.get("term_rules") == rules_digest()
                    and hmac.compare_digest(_keyed_digest(digest, meta), meta.get("mac", ""))):
                cold, db = cls(data, meta, db), None
                return cold
            return None
        except (sqlite3.Error, KeyError, ValueError, TypeError, OSError):
            return None
        finally:
            if db is not None:
                db.close()

    def close(self) -> None:
        with self._reading:
            self._db.close()
        self._placed = None  # (no graph kept alive by a cache let go)

    def part(self, name: str) -> bytes:
        """One part of the cache, checked against its keyed digest (C2)."""
        with self._reading:
            row = self._db.execute("SELECT data FROM parts WHERE name = ?", (name,)).fetchone()
        blob = bytes(row[0]) if row is not None else b""
        if row is None or not hmac.compare_digest(_part_digest(self.digest, name, blob),
                                                  self._meta.get(f"mac:{name}", "")):
            raise CacheMismatch(f"the cache's {name} fails its check")
        return blob

    def _lazy(self, name: str, convert: Callable[[bytes], Any]) -> Any:
        if (value := self._loaded.get(name)) is None:
            value = self._loaded[name] = convert(self.part(name))
        return value

    @property
    def names(self) -> list[str]:
        names: list[str] = self._lazy("names", partial(msgspec.json.decode, type=list[str]))
        return names

    @property
    def _entities(self) -> array[int]:
        return self._lazy("entities", _unpack)

    @property
    def _relations(self) -> array[int]:
        return self._lazy("relations", _unpack)

    @property
    def _plain(self) -> bytes:
        return self._lazy("plain", bytes)

    @property
    def _texts(self) -> bytes:
        return self._lazy("texts", bytes)

    @property
    def _starts(self) -> array[int]:
        return self._lazy("starts", _unpack)

    @property
    def _links_at(self) -> array[int]:
        return self._lazy("links_at", _unpack)

    @property
    def _links(self) -> array[int]:
        return self._lazy("links", _unpack)

    @property
    def _lengths(self) -> array[int]:
        return self._lazy("lengths", _unpack)

    @property
    def _terms_list(self) -> bytes:
        return self._lazy("terms", bytes)

    @property
    def _postings_at(self) -> array[int]:
        return self._lazy("postings_at", _unpack)

    @property
    def _postings(self) -> array[int]:
        return self._lazy("postings", _unpack)

    @property
    def _tfs(self) -> array[int]:
        return self._lazy("tfs", _unpack)

    # -- the file's bytes, checked -------------------------------------------------------------

    def _line(self, spans: array[int], number: int) -> bytes:
        start = spans[2 * number]
        return self.data[start:start + spans[2 * number + 1]]

    def entity(self, number: int) -> EntityRecord:
        """The `number`-th entity, decoded from the file (C3)."""
        item: Any = decode_line(self._line(self._entities, number), 0)
        record = item.record if type(item) is Extended else item
        if type(record) is not EntityRecord or record.name != self.names[number]:
            raise CacheMismatch(f"entity {number} is not where the cache says")
        return record

    def relation(self, number: int) -> RelationRecord:
        item: Any = decode_line(self._line(self._relations, number), 0)
        record = item.record if type(item) is Extended else item
        if type(record) is not RelationRecord:
            raise CacheMismatch(f"relation {number} is not where the cache says")
        return record

    @staticmethod
    def entity_view(record: EntityRecord) -> dict[str, Any]:
        # The graph's own answer object, dates shown as the graph shows them: the cache answers as the graph does.
        return rules.node_view(record)

    @staticmethod
    def relation_view(record: RelationRecord) -> dict[str, Any]:
        return {"from": record.source, "to": record.target, "relationType": record.relationType}

    def _raw(self, spans: array[int], number: int, plain: int, tag: bytes,
             decoded: Callable[[int], dict[str, Any]]) -> msgspec.Raw:
        line = self._line(spans, number)
        if self._plain[plain] and line.startswith(tag) and not _dated(line):
            # The record's own encoding: its answer object is the line without the type tag.
            return msgspec.Raw(b"{" + line[len(tag):])
        return msgspec.Raw(msgspec.json.encode(decoded(number)))

    # -- reads -----------------------------------------------------------------------------------

    def read_graph(self) -> dict[str, Any]:
        return {"entities": [self.entity_view(self.entity(n)) for n in range(len(self.names))],
                "relations": [self.relation_view(self.relation(n)) for n in range(len(self._relations) // 2)]}

    def graph_units(self) -> dict[str, Any]:
        """read_graph for the pager: each entity and relation as its JSON (msgspec.Raw), the
        entities a Listing that summarises the graph from the counts made with the cache. The
        objects of plain lines are checked in one decode of them all (valid JSON, one object
        each); the first entity's name is checked against the cache (C3)."""
        counts = msgspec.json.decode(self._summary)
        types = [(kind, count) for kind, count in counts["types"]]
        connected = [(name, count) for name, count in counts["connected"]]
        entity_count = len(self.names)
        entities = [self._raw(self._entities, n, n, b'{"type":"entity",',
                              lambda n: self.entity_view(self.entity(n))) for n in range(entity_count)]
        relations = [self._raw(self._relations, n, entity_count + n, b'{"type":"relation",',
                               lambda n: self.relation_view(self.relation(n)))
                     for n in range(len(self._relations) // 2)]
        units = _views.decode(b"[" + b",".join(entities + relations) + b"]") if entities or relations else []
        if any(not bytes(unit).startswith(b"{") for unit in units) or len(units) != len(entities) + len(relations):
            raise CacheMismatch("an object of the file is not one JSON object")
        for n in {0, entity_count - 1} if entity_count else ():
            self.entity(n)
        return {"entities": Listing(units[:entity_count],
                                    partial(cut_summary, counts["entities"], counts["relations"], types, connected)),
                "relations": units[entity_count:]}

    def open_nodes(self, names: list[str]) -> dict[str, Any] | None:
        """None when a name the cache does not know may be in the file after all (C3): the graph answers."""
        place = self._places()
        wanted = sorted({place[name] for name in names if name in place})
        for name in set(names) - set(place):
            if self._escaped is None:
                self._escaped = b"\\u" in self.data
            if self._escaped or msgspec.json.encode(name) in self.data:
                return None
        return self.found(wanted)

    def found(self, numbers: Sequence[int], limit: int | None = None) -> dict[str, Any]:
        """A search's (or open_nodes') answer: these entities, and the relations touching them."""
        if limit is not None:
            numbers = numbers[:limit]
        links_at, links = self._links_at, self._links
        touching = sorted({r for n in numbers for r in links[links_at[n]:links_at[n + 1]]})
        chosen = set(numbers)
        place = self._places()
        relations = []
        for number in touching:
            record = self.relation(number)
            if place.get(record.source) not in chosen and place.get(record.target) not in chosen:
                raise CacheMismatch(f"relation {number} touches none of the entities it is listed for")
            relations.append(self.relation_view(record))
        return {"entities": [self.entity_view(self.entity(n)) for n in numbers], "relations": relations}

    def _places(self) -> dict[str, int]:
        if self._place is None:
            self._place = {name: number for number, name in enumerate(self.names)}
        return self._place

    # -- search candidates (retrieval/search.py's CandidateSource; its rules run on them) ----------

    def text_at(self, number: int) -> str:
        """The search text of the `number`-th entity in graph order."""
        starts = self._starts
        end = starts[number + 1] - 1 if number + 1 < len(starts) else len(self._texts)
        return self._texts[starts[number]:end].decode()

    def containing(self, query: str, loaded: Graph | None = None) -> Graph | None:
        """The part of the graph whose entities contain the whole query, each checked against its
        line in the file (C3); None for a query only the graph answers (a match that could span fields).
        `loaded`: see :meth:`subgraph`."""
        needle = query.lower()
        if FIELD_SEPARATOR in needle:
            return None
        texts, starts = self._texts, self._starts
        target = needle.encode()
        found: list[int] = []
        at = texts.find(target) if starts else -1
        while at >= 0:
            number = bisect_right(starts, at) - 1
            end = starts[number + 1] - 1 if number + 1 < len(starts) else len(texts)
            if at + len(target) <= end:
                found.append(number)
                at = texts.find(target, end + 1)  # the next entity's text
            else:
                at = texts.find(target, at + 1)
        return self.subgraph(found, loaded)

    def holding(self, words: str, loaded: Graph | None = None) -> Graph:
        """The part of the graph whose entities hold a term of `words`, with the ranking's index
        as the cache holds it (the whole memory's counts). `loaded`: see :meth:`subgraph`."""
        from ..index import ranking

        terms = _CachedTerms(self)
        wanted = ranking.query_terms(words, question_words=ranking.DEFAULT.question_words)
        if loaded is not None:
            # The loaded graph itself holds every candidate (guarantee 3 of retrieval/search.py: a
            # superset): no part of tens of thousands of entities is made for a common word. Every
            # entity is checked to be where the cache says (C3, once per graph), and the postings
            # read here, each holder within the cache's entities, are the ones the ranking reads
            # (worked out once, so that a part failing its check fails here).
            self._check_places(loaded)
            for term in wanted:
                terms.column(term)
            return replace(loaded, terms=terms)  # type: ignore[arg-type]
        place = self._places()
        numbers = {place[name] for term in wanted for name in self.holders(term) or ()}
        return replace(self.subgraph(sorted(numbers)), terms=terms)  # type: ignore[arg-type]

    def _check_places(self, loaded: Graph) -> None:
        """That every entity of the cache is in `loaded` at the place the cache says (C3); checked
        once per graph (a search's holders are then checked by their bounds alone, see :meth:`column`)."""
        nodes = loaded.entities
        if self._placed is nodes:
            return
        try:
            places = list(map(_seq, map(nodes.__getitem__, self.names)))
        except KeyError as missing:
            raise CacheMismatch(f"entity {missing} is not in the graph the cache is of") from None
        if places != list(range(len(places))):
            raise CacheMismatch("the graph's entities are not where the cache says")
        self._placed = nodes

    def subgraph(self, numbers: Sequence[int], loaded: Graph | None = None) -> Graph:
        """These entities (in graph order) and every relation touching one, as the graph holds them.

        `loaded`: the graph of the same file bytes, once the store has made it: its own nodes and
        edges are taken rather than decoded again, so that an answer kept for its cursors refers to
        the graph's objects instead of holding copies of them (each entity is checked to be the
        one the cache says, by its place)."""
        if not numbers:
            return EMPTY
        if loaded is not None:
            return self._part_of(loaded, numbers)
        entities: dict[str, Node] = {}
        for number in numbers:
            record = self.entity(number)
            entities[record.name] = Node(record, self.entity_view(record), self.text_at(number), number, None,
                                         self._line(self._entities, number))
        links_at, links = self._links_at, self._links
        relations: dict[rules.Triple, Edge] = {}
        touching: dict[str, set[rules.Triple]] = {}
        for number in sorted({r for n in numbers for r in links[links_at[n]:links_at[n + 1]]}):
            relation = self.relation(number)
            triple = (relation.source, relation.target, relation.relationType)
            if relation.source not in entities and relation.target not in entities:
                raise CacheMismatch(f"relation {number} touches none of the entities it is listed for")
            relations[triple] = Edge(relation, self.relation_view(relation), number, self._line(self._relations, number))
            touching.setdefault(relation.source, set()).add(triple)
            touching.setdefault(relation.target, set()).add(triple)
        return Graph(entities, relations, touching)

    def _part_of(self, graph: Graph, numbers: Sequence[int]) -> Graph:
        """subgraph(numbers) of the graph's own nodes and edges: the cache's places, the graph's objects."""
        names, nodes = self.names, graph.entities
        for number in numbers:
            node = nodes.get(names[number])
            if node is None or node.seq != number:
                raise CacheMismatch(f"entity {number} is not where the cache says")
        return rules.part_of_graph(graph, [names[number] for number in numbers])

    def column(self, term: str) -> tuple[array[int], array[int]] | None:
        """The places of the entities holding `term` and their counts (None: none holds it)."""
        if self._terms is None:
            self._terms = {term: number for number, term in
                           enumerate(msgspec.json.decode(self._terms_list, type=list[str]))}
        number = self._terms.get(term)
        if number is None:
            return None
        start, end = self._postings_at[number], self._postings_at[number + 1]
        holders, counts = self._postings[start:end], self._tfs[start:end]
        if len(holders) != len(counts) or (holders and max(holders) >= len(self.names)):
            raise CacheMismatch(f"the postings of {term!r} do not fit the cache's entities")
        return holders, counts

    def term_index(self, loaded: Graph) -> ranking.TermIndex:
        """The ranking's index of `loaded`, the graph made of the bytes this cache was checked
        against, from the cache's postings (C7): what TermIndex.build makes of its texts."""
        from ..index import ranking

        names = list(loaded.entities)  # (the graph's own strings, not the cache's copies)
        if names != self.names:
            raise CacheMismatch("the graph's entities are not the cache's")
        try:
            return ranking.TermIndex.of_postings(
                names, self._lengths, self._total, msgspec.json.decode(self._terms_list, type=list[str]),
                self._postings_at, self._postings, self._tfs)
        except ValueError as error:
            raise CacheMismatch(f"the cache's postings: {error}") from None

    def holders(self, term: str) -> dict[str, int] | None:
        found = self.column(term)
        if found is None:
            return None
        return dict(zip(map(self.names.__getitem__, found[0]), found[1], strict=True))


_seq: Final = operator.attrgetter("seq")


class _CachedTerms:
    """The ranking's index as the cache holds it (ranking.Terms): an entity's ordinal is its place
    in the graph, and a term's column its slice of the postings and counts."""

    def __init__(self, cold: ColdIndex) -> None:
        self.total = cold._total
        self.names = cold.names
        self.spans = cold._lengths
        self.entities = len(self.names)
        self._cold = cold
        self._columns: dict[str, tuple[array[int], array[int]] | None] = {}

    def column(self, term: str) -> tuple[array[int], array[int]] | None:
        """The term's holders (places) and counts, each term's read once for the one search these
        terms are made for."""
        if term in self._columns:
            return self._columns[term]
        found = self._columns[term] = self._cold.column(term)
        return found
