"""What the tools, the resource and the command line need of a store: the interface that the
memory file's store (store.GraphStore) and the database's (postgres.PostgresStore) both offer.

A store's background work (the first start, the indexes, the cache, the group commit, the
embedder) brings about the conditions of :class:`Until` and :class:`Queued`; whoever needs one
waits on it with ``wait_until`` (as an event, settling.py E1-E3), never by looking again and again."""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from ..model.items import Entity, ObservationsToAdd, ObservationsToDelete, Relation
    from ..model.writes import IncomingEntity, IncomingRelation
    from .store import WriteResult


class MeaningModel(Protocol):
    """What the database's store needs of the model of meaning (postgres/vectors.py M4, M5): it
    embeds texts and queries, and searches the vectors it keeps as a file's table is searched.
    Given to the store by the adapter that builds it (storage does not import retrieval, whose
    retrieval/meaning.py is the one implementation); a store given none answers by words alone.
    Vectors and tables are numpy arrays (Any here: numpy is an extra)."""

    def identity(self) -> str | None:
        """Which model embeds (vectors of another are not compared); None: no model can be used.
        May wait for the model to load: call it off the request path."""
    def embed(self, texts: Sequence[str]) -> Any | None:
        """The unit float32 vectors of `texts`, in order; None when no model can be used."""
    def query_vector(self, query: str) -> Any | None:
        """A query's unit vector; None when no model can be used."""
    @property
    def min_similarity(self) -> float:
        """The least similarity of an answer."""
    @property
    def exact_up_to(self) -> int:
        """Rows up to which a table's search scores every row."""
    @property
    def shortlist_least(self) -> int:
        """Rows a shortlist by sign bits holds at least, above exact_up_to."""
    @property
    def sign_words(self) -> int:
        """64-bit words of a vector's sign bits."""
    @property
    def chunk(self) -> int:
        """Rows quantized at a time (the float32 copy of a part is what costs memory)."""
    def quantize(self, vectors: Any) -> tuple[Any, Any]:
        """The int8 rows of float32 `vectors`, and each row's scale."""
    def sign_codes(self, rows: Any) -> Any:
        """The sign bits of int8 `rows`, as (sign_words, len(rows)) uint64."""
    def table_scores(self, matrix: Any, scales: Any, codes: Any, count: int, vector: Any, k: int, *,
                     exact_up_to: int, least: int) -> Any:
        """Each of the first `count` rows' similarity to `vector`, for the best `k` (exact, or
        -1 for the rows a shortlist leaves out)."""


class StoreChoiceError(Exception):
    """The environment names no usable memory; the message says what to change."""


class Until(enum.Enum):
    """Conditions a store's background work brings about (``wait_until``)."""

    WARM = "warm"
    """File: the first start's graph is made (coldstart WARM or HOT)."""
    HOT = "hot"
    """File: the first start is over, the graph answers everything (coldstart HOT)."""
    INDEXED = "indexed"
    """File: the graph in memory is the file's as it is now, with its word index: reads asked
    to use only the memory answer (but for a graph above INLINE_ITEMS)."""
    RANKED = "ranked"
    """File: INDEXED, and the ranking's index is made too."""
    CACHED = "cached"
    """File: the cache beside the file matches the file as it is now (coldstart K1, K2)."""
    EMBEDDED = "embedded"
    """Database: every text the memory held when the wait began has its vector (vectors.py M4)."""


class Queued(NamedTuple):
    """File: exactly `writes` writes of this store wait for their turn or the file lock (commit.py)."""

    writes: int


class MemoryStore(Protocol):
    """Reads answer from a consistent version of the graph; each write is atomic, takes the tools'
    items as decoded (model/items.py) and returns what the tool answers. `in_memory` reads raise
    store.NotInMemory when they would need I/O (the caller then reads from a worker thread)."""

    def look_ahead(self) -> object: ...
    def close(self) -> None: ...
    def __enter__(self) -> MemoryStore: ...
    def __exit__(self, *exc_info: object) -> None: ...
    def read_graph(self) -> dict[str, Any]: ...
    def read_graph_for_pages(self, *, in_memory: bool = False) -> dict[str, Any]: ...
    def sources(self, *, in_memory: bool = False) -> AbstractContextManager[Sequence[Any]]:
        """A search's candidate sources, in turn (each a retrieval.search.CandidateSource, met
        structurally); `in_memory`: only those that answer without I/O, maybe none."""
    def open_nodes(self, names: list[str], *, in_memory: bool = False) -> dict[str, Any]: ...
    def poll_external_change(self) -> bool: ...
    def wait_until(self, condition: Until | Queued, timeout: float) -> bool:
        """True once `condition` holds, False when `timeout` seconds pass first; ValueError for a
        condition of the other kind of store."""

    def create_entities(self, entities: Sequence[Entity], *, author: str | None = None,
                        abandon: threading.Event | None = None) -> WriteResult:
        """`author`: who writes (model/authors.py), recorded on the observations it adds."""
    def create_relations(self, relations: Sequence[Relation], *,
                         abandon: threading.Event | None = None) -> WriteResult: ...
    def add_observations(self, observations: Sequence[ObservationsToAdd], *, author: str | None = None,
                         abandon: threading.Event | None = None) -> WriteResult: ...
    def delete_entities(self, entity_names: Sequence[str], *,
                        abandon: threading.Event | None = None) -> WriteResult: ...
    def delete_observations(self, deletions: Sequence[ObservationsToDelete], *,
                            abandon: threading.Event | None = None) -> WriteResult: ...
    def delete_relations(self, relations: Sequence[Relation], *,
                         abandon: threading.Event | None = None) -> WriteResult: ...
    def merge(self, entities: list[IncomingEntity], relations: list[IncomingRelation]) -> WriteResult: ...
