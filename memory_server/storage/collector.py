"""The process's one policy for the cyclic garbage collector around work that makes many objects.

A load of a large file, or a read of a large memory from PostgreSQL, makes hundreds of thousands
to millions of containers (records, nodes, rows), none in a cycle: reference counting frees them.
Each collection they would set off walks all of them again, so such work runs with the collector
paused:

G1. :func:`paused` is counted across threads: collection resumes when the last pause ends, and
    only when it was enabled as the first began (a pause someone else made is theirs to end).
G2. When it resumes, every object there is goes to the collector's oldest generation at once
    (gc.freeze then gc.unfreeze, constant time): the next young collection does not walk what
    the work made, nor whatever else was young (the lists of a read_graph answer just made).
G3. Every :data:`PROMOTIONS_PER_COLLECTION`-th resume makes a full collection instead of G2. G2
    also sets the collector's counts back to nought, so a process answering only reads would never
    come to a full collection, the only one that frees a cycle among those objects; this is the one
    the young collections G2 stood in for would have led to.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

PROMOTIONS_PER_COLLECTION: Final = 100
"""Resumes whose objects go straight to the oldest generation between two full collections (G3)."""

_lock: Final = threading.Lock()
_pausers = 0  # pauses now running (under the lock)
_resume = False  # whether the collector was enabled when the first of them began (under the lock)
_promotions = 0  # resumes since the last full collection (under the lock)


@contextmanager
def paused() -> Iterator[None]:
    """The collector paused for the work inside (G1 to G3)."""
    global _pausers, _resume, _promotions
    with _lock:
        if _pausers == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _lock:
            _pausers -= 1
            if _pausers == 0 and _resume:
                _promotions += 1
                if _promotions >= PROMOTIONS_PER_COLLECTION:
                    _promotions = 0
                    gc.collect()
                else:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()
