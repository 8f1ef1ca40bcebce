"""What semantic search costs: model load, memory, embeddings per second, time per query.

    python benchmarks/bench_semantic.py [--entities 10000] [--observations 3]

Runs in one process, in this order: import of the module, first load of the model, the
profile of tests/test_semantic.py (about 300 facts on default_user) embedded and asked the five
keyword queries, then a memory of `--entities` entities with `--observations` distinct facts each,
embedded in the background as the server would, and queries on it. Resident memory is read from
/proc/self/status. Not a test: the figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the profile of test_semantic.py


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


SUBJECTS = ["Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Karl", "Lena"]
VERBS = ["visited", "bought", "read about", "talked about", "wants to learn", "dislikes", "cooked", "repaired",
         "photographed", "wrote a note on", "asked about", "recommended"]
THINGS = ["a lighthouse", "sourdough bread", "the quarterly budget", "a vintage bicycle", "Kubernetes upgrades",
          "a jazz record", "the garden fence", "a trip to Kyoto", "tax forms", "a chess opening", "the new office",
          "a border collie", "thyroid tests", "Portuguese grammar", "a cello concert", "shellfish recipes",
          "a mountain hut", "the school play", "solar panels", "a pottery class"]
WHEN = ["on Monday", "last spring", "in 2021", "yesterday", "during the holidays", "at the weekend", "in March",
        "after work", "before lunch", "last year"]


def synthetic(entities: int, observations: int, seed: int = 11) -> list[dict[str, object]]:
    rng = random.Random(seed)
    made = []
    for number in range(entities):
        facts = [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(WHEN)} (note {number}.{i})"
                 for i in range(observations)]
        made.append({"name": f"entity-{number}", "entityType": "note", "observations": facts})
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument("--observations", type=int, default=3)
    arguments = parser.parse_args()

    start_rss = rss_mb()
    started = time.perf_counter()
    from test_semantic import ANSWERS, MORE, profile_graph

    from memory_server.model import graph as rules
    from memory_server.retrieval import semantic
    print(f"import of the server's graph and semantic modules: {1000 * (time.perf_counter() - started):.0f} ms, "
          f"RSS {rss_mb():.0f} MB (was {start_rss:.0f} MB)")

    before = rss_mb()
    started = time.perf_counter()
    engine = semantic._engine({})
    if engine is None:
        print("no model:", semantic.status())
        return 1
    print(f"model load (numpy, onnxruntime, the 23 MB model checked by its sha256, the vocabulary): "
          f"{1000 * (time.perf_counter() - started):.0f} ms, RSS +{rss_mb() - before:.0f} MB -> {rss_mb():.0f} MB")

    graph = profile_graph()
    facts = sum(len(node.record.observations) for node in graph.entities.values())
    started = time.perf_counter()
    semantic.nearest(graph, "warm up", 1)
    took = time.perf_counter() - started
    print(f"profile: {facts} facts embedded within the first call in {took:.2f} s ({facts / took:.0f} facts/s)")
    for query, answer in ANSWERS.items():
        found = semantic.nearest(graph, query, 40) or []
        texts = [graph.entities[name].record.observations[index] for name, index, _ in found]
        rank = texts.index(answer) + 1 if answer in texts else None
        print(f"  {query!r}: answering fact at rank {rank} of {len(found)} candidates")
    ranks = []
    for query, answer in {**ANSWERS, **MORE}.items():
        found = semantic.nearest(graph, query, 40) or []
        texts = [graph.entities[name].record.observations[index] for name, index, _ in found]
        ranks.append(texts.index(answer) + 1 if answer in texts else 99)
    print(f"  {len(ranks)} keyword and plain queries: {ranks.count(1)} at rank 1, "
          f"{sum(rank <= 5 for rank in ranks)} within 5, {sum(rank == 99 for rank in ranks)} not among the candidates")
    queries = [f"{thing} {when}" for thing in THINGS[:10] for when in WHEN[:3]]
    times = []
    for query in queries:
        started = time.perf_counter()
        semantic.nearest(graph, query, 40)
        times.append(time.perf_counter() - started)
    print(f"  query (not seen before), median of {len(times)}: {1000 * statistics.median(times):.1f} ms; "
          f"the same query again: {1000 * min(timed(semantic.nearest, graph, queries[0], 40) for _ in range(5)):.2f} ms")

    before = rss_mb()
    big = rules.create_entities(rules.EMPTY, synthetic(arguments.entities, arguments.observations)).graph
    total = arguments.entities * arguments.observations
    print(f"memory of {arguments.entities} entities x {arguments.observations} observations made, "
          f"RSS +{rss_mb() - before:.0f} MB")
    before = rss_mb()
    started = time.perf_counter()
    first = semantic.nearest(big, "dog", 40)
    print(f"  first query: {1000 * (time.perf_counter() - started):.0f} ms, {len(first or [])} candidates "
          "(answered from what is embedded so far; the rest goes to the background)")
    worker = engine.worker
    if worker is not None:
        worker.join()
    took = time.perf_counter() - started
    print(f"  all {total} observations embedded in the background in {took:.1f} s ({total / took:.0f}/s), "
          f"RSS +{rss_mb() - before:.0f} MB -> {rss_mb():.0f} MB; {semantic.status()}")
    times = []
    for query in queries:
        started = time.perf_counter()
        semantic.nearest(big, query + " again", 40)
        times.append(time.perf_counter() - started)
    print(f"  query (not seen before), median of {len(times)}: {1000 * statistics.median(times):.1f} ms; "
          f"the same query again: {1000 * min(timed(semantic.nearest, big, queries[0] + ' again', 40) for _ in range(5)):.2f} ms")
    later = rules.add_observations(big, [{"entityName": "entity-7", "contents": ["Adopted a greyhound"]}]).graph
    started = time.perf_counter()
    semantic.nearest(later, "dog", 40)
    print(f"  first query after a write (one new observation): {1000 * (time.perf_counter() - started):.1f} ms")
    return 0


def timed(function, *arguments) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    function(*arguments)
    return time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
