"""In-process search figures: what one warm search_nodes call costs at a size, without a server.

Run from the repository root (optionally with PYTHONPATH pointing at another checkout, to
compare two versions of the code on the same machine one after the other):

    MEMORY_SEMANTIC=off .venv/bin/python benchmarks/bench_search.py --size 100000

The memory is bench_memory.py's seed. The store loads it with its word and ranking indexes made,
then each query is answered as the search_nodes tool answers it (retrieval.search.search_nodes on
the store, with the default page size, and the first page of the answer); the figures are medians of wall and CPU
time (of the calling thread) per call. A last figure times `zephyr` in a new process's WARM state
(the graph loaded beside a matching cache, no ranking index yet). Pure timing: nothing is
asserted, the exit code is 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_memory  # (the seed)

import memory_server
from memory_server.retrieval.answer import DEFAULT_CHARACTERS
from memory_server.retrieval.paging.pager import Pager
from memory_server.retrieval.paging.pages import Facts
from memory_server.retrieval.search import search_nodes
from memory_server.storage.store import GraphStore, State

QUERIES = (
    ("zephyr", "the whole query, 1 entity in 100"),
    ("zephyrs", "a rare word, by its stem"),
    ("weekly reviews", "words, 1 entity in 100"),
    ("astronomy", "the whole query, most entities"),
    ("Who enjoys astronomy on weekends?", "words every entity shares"),
)
WAIT = 120.0


def timed(call: Callable[[], object], count: int) -> tuple[float, float]:
    """Median wall and thread CPU milliseconds of `count` calls."""
    walls, cpus = [], []
    for _ in range(count):
        wall, cpu = time.perf_counter(), time.thread_time()
        call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.thread_time() - cpu)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="entities (default 100,000)")
    parser.add_argument("--calls", type=int, default=20, help="calls per query (a quarter for long ones)")
    options = parser.parse_args()
    print(f"code: {Path(memory_server.__file__).parent}; {options.size:,} entities")
    with tempfile.TemporaryDirectory() as directory:
        memory = Path(directory) / "memory.jsonl"
        memory.write_bytes(bench_memory.seed_bytes(options.size))
        pager = Pager()
        with GraphStore(memory, cache=False) as store:
            search_nodes(store, "zephyr", characters=DEFAULT_CHARACTERS)
            wait_for(lambda: (graph := store.graph_in_memory) is not None and graph.words is not None,
                     "the word index")
            search_nodes(store, "a question by words", characters=DEFAULT_CHARACTERS)  # the ranking index
            for query, what in QUERIES:
                def call(query: str = query) -> None:
                    answer = search_nodes(store, query, characters=DEFAULT_CHARACTERS)
                    assert isinstance(answer, Facts)
                    pager.first_facts("search_nodes", b"x", answer)

                count = options.calls if len(query) < 20 else max(options.calls // 4, 3)
                wall, cpu = timed(call, count)
                print(f"  {query!r:38} ({what}): wall {wall:7.1f} ms, CPU {cpu:7.1f} ms")
        with GraphStore(memory) as store:  # leaves its cache (made when it closes)
            search_nodes(store, "zephyr", characters=DEFAULT_CHARACTERS)
        with GraphStore(memory) as store:
            search_nodes(store, "zephyr", characters=DEFAULT_CHARACTERS)  # COLD: the cache answers
            wait_for(lambda: store.cold_state is not State.COLD, "the graph's load")
            wall, _ = timed(lambda: search_nodes(store, "zephyr", characters=DEFAULT_CHARACTERS), options.calls)
            print(f"  'zephyr' in a new process, {store.cold_state.value}: wall {wall:.1f} ms "
                  f"(the cache gave {store.cache_answers} of {options.calls + 1} answers)")


if __name__ == "__main__":
    main()
