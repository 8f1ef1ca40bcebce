"""What semantic search costs: model load, memory, embeddings per second, time per query.

    python benchmarks/bench_semantic.py [--entities 10000] [--observations 3]
    python benchmarks/bench_semantic.py --scan 50000 500000 1000000
    python benchmarks/bench_semantic.py --fresh [--entities 10000] [--observations 5] [--words-only]
    python benchmarks/bench_semantic.py --exits 20

--exits: issue 28's clean exits, each kind that many times, each a real server over pipes on a
memory of 1,200 observations (long ones, for the kinds that end it while it embeds): end of input
after one write and one search; end of input, SIGTERM and SIGINT while the model loads (the signal
sent with the first search, before its answer); SIGTERM and SIGINT while the memory is embedded.
A run is clean when the process exits 0 (or by that signal) and stderr holds only the server's
own lines (tests/test_semantic_process.py's rule).

--scan: a search of a table of that many int8 vectors (random ones: the cost does not depend on
what they mean), exactly and by the sign-bit shortlist, median of 20 queries, and the resident
memory the table adds.
--recall MEMORY: recall@10 of the shortlist against the exact scan on the real vectors of a
memory a --fresh run embedded (its side file), at the share of the table a shortlist takes.
--fresh: a memory file of that size is embedded once by a real server (until its side file of
vectors is written), then each of five fresh servers is timed from spawn to its first answer by
meaning, and its resident memory then, after 20 more searches, and after one write of an
observation and the 20 asked again (each server on a copy of the folder's files); with --words-only, the five
servers run with MEMORY_SEMANTIC=off (what the words' side holds alone).

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

import msgspec

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


def process_rss(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


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
    parser.add_argument("--scan", type=int, nargs="*")
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--exits", type=int, metavar="RUNS")
    parser.add_argument("--recall", type=Path, metavar="MEMORY", help="a memory a --fresh run embedded")
    parser.add_argument("--synthetic-vectors", action="store_true",
                        help="with --fresh: the side file is written with random vectors (the person's fact with its "
                             "own), instead of a first server embedding the memory (hours at 500,000)")
    parser.add_argument("--busy", action="store_true",
                        help="with --fresh: another server embeds 3,000 long notes meanwhile (the other process that embeds)")
    parser.add_argument("--during", type=int, metavar="RUNS",
                        help="a search and a ping during the embedding of 500 long new observations, that many times")
    parser.add_argument("--reuse", type=Path, help="with --fresh: a folder a former --fresh run left (skips the embedding)")
    parser.add_argument("--words-only", action="store_true",
                        help="with --fresh: the five servers run with MEMORY_SEMANTIC=off (the words' side alone): "
                             "their RSS once the graph is loaded and indexed, and after the 20 searches")
    arguments = parser.parse_args()
    if arguments.scan:
        return scan(arguments.scan)
    if arguments.recall:
        return recall(arguments.recall)
    if arguments.during:
        return during(arguments.during)
    if arguments.exits:
        return exits(arguments.exits)
    if arguments.fresh:
        if not arguments.busy:
            return fresh(arguments.entities, arguments.observations, arguments.reuse, arguments.synthetic_vectors,
                         words_only=arguments.words_only)
        return while_another_embeds(lambda: fresh(arguments.entities, arguments.observations, arguments.reuse,
                                                  arguments.synthetic_vectors))

    start_rss = rss_mb()
    started = time.perf_counter()
    from test_semantic import ANSWERS, MORE, profile_graph

    from memory_server.model import graph as rules
    from memory_server.model import writes
    from memory_server.model.items import Entity, ObservationsToAdd
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
    made = msgspec.convert(synthetic(arguments.entities, arguments.observations), list[Entity])
    big = writes.create_entities(rules.EMPTY, made).graph
    total = arguments.entities * arguments.observations
    print(f"memory of {arguments.entities} entities x {arguments.observations} observations made, "
          f"RSS +{rss_mb() - before:.0f} MB")
    before = rss_mb()
    started = time.perf_counter()
    first = semantic.nearest(big, "dog", 40)
    print(f"  first query: {1000 * (time.perf_counter() - started):.0f} ms, {len(first or [])} candidates "
          "(answered from what is embedded so far; the rest goes to the background)")
    semantic.ready(big, 24 * 3600)
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
    later = writes.add_observations(big, [ObservationsToAdd("entity-7", ["Adopted a greyhound"])]).graph
    started = time.perf_counter()
    semantic.nearest(later, "dog", 40)
    print(f"  first query after a write (one new observation): {1000 * (time.perf_counter() - started):.1f} ms")
    return 0


def scan(sizes: list[int]) -> int:
    import numpy as np

    from memory_server.retrieval import semantic
    engine = semantic._engine({})
    if engine is None:
        print("no model:", semantic.status())
        return 1
    rng = np.random.default_rng(7)
    queries = engine.encode([f"question number {number}" for number in range(20)])
    for size in sizes:
        before = rss_mb()
        matrix = np.empty((size, semantic.DIMENSIONS), dtype=np.int8)
        scales = np.empty(size, dtype=np.float32)
        for start in range(0, size, 100_000):  # (in parts: a float32 table of a million is 1.5 GB)
            vectors = rng.standard_normal((min(100_000, size - start), semantic.DIMENSIONS), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            matrix[start:start + len(vectors)], scales[start:start + len(vectors)] = engine.quantize(vectors)
        del vectors
        codes = semantic.sign_codes(np, matrix)
        table_mb = rss_mb() - before
        for name, exact_up_to in (("exact scan", size), ("sign-bit shortlist, int8 re-score", 0)):
            engine.exact_up_to = exact_up_to
            times = []
            for query in queries:
                started = time.perf_counter()
                scores = engine.table_scores(matrix, scales, codes, size, query, 40)
                np.argpartition(-scores, 39)[:40]
                times.append(time.perf_counter() - started)
            print(f"{name} of {size} int8 vectors: median {1000 * statistics.median(times):.1f} ms, "
                  f"min {1000 * min(times):.1f} ms", flush=True)
        engine.exact_up_to = semantic.EXACT_UP_TO
        print(f"  the table {matrix.nbytes + scales.nbytes + codes.nbytes} bytes "
              f"({(matrix.nbytes + scales.nbytes + codes.nbytes) / size:.0f} per vector), RSS +{table_mb:.0f} MB; "
              f"shortlist {semantic.shortlist_size(size, 40)} rows")
        del matrix, scales, codes
    return 0


def recall(memory: Path) -> int:
    """recall@10 of the shortlist against the exact scan, on the real vectors of a --fresh memory."""
    import numpy as np

    from memory_server.retrieval import semantic
    from memory_server.retrieval.vectors import VectorFile, vectors_path
    engine = semantic._engine({})
    if engine is None:
        print("no model:", semantic.status())
        return 1
    held = VectorFile(vectors_path(memory), memory.name).read(engine.digest)
    if held is None:
        print("no side file of this model beside", memory)
        return 1
    _, matrix, scales = held
    count = len(matrix)
    codes = semantic.sign_codes(np, matrix)
    queries = (THINGS + [f"who {verb} {thing}" for verb in VERBS[:5] for thing in THINGS[:6]]
               + ["pets", "music", "food", "money", "travel abroad", "dog", "a greyhound", "computers", "taxes", "Japan"])
    vectors = engine.encode(queries)
    for share in (semantic.SHORTLIST_SHARE // 2, semantic.SHORTLIST_SHARE, 2 * semantic.SHORTLIST_SHARE):
        size = count // share
        kept = first = 0
        for vector in vectors:
            exact = engine.scores(matrix, scales, count, vector)
            (query,), _ = engine.quantize(vector[None, :])
            rows = semantic.shortlist(np, codes, count, semantic.sign_codes(np, query[None, :])[:, 0], size)
            best = exact.argsort(kind="stable")[::-1][:10]
            found = rows[np.argsort(-engine.scores_of(matrix, scales, rows, vector), kind="stable")[:10]]
            kept += len(set(best.tolist()) & set(found.tolist()))
            first += bool(exact[found[0]] >= exact[best[0]])  # (ties: any row of the best score)
        print(f"{count} real MiniLM vectors, shortlist of {size} rows (1 in {share}): recall@10 "
              f"{kept / (10 * len(vectors)):.3f}, a best row first {first}/{len(vectors)}, over {len(vectors)} queries")
    return 0


def fresh(entities: int, observations: int, reuse: Path | None = None, synthetic_vectors: bool = False, *,
          words_only: bool = False) -> int:
    import json
    import os
    import select
    import subprocess
    import tempfile

    from memory_server.retrieval.vectors import vectors_path
    from memory_server.storage.index_cache import cache_path as cache_of
    made = synthetic(entities, observations)
    made.append({"name": "Ann", "entityType": "person", "observations": ["Has a border collie named Biscuit"]})
    folder = reuse or Path(tempfile.mkdtemp(prefix="bench-semantic-"))
    memory = folder / "memory.jsonl"
    if reuse is None:
        with memory.open("w", encoding="utf-8") as file:
            for item in made:
                file.write(json.dumps({"type": "entity", **item}) + "\n")
    environment = {**os.environ, "MEMORY_FILE_PATH": str(memory), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    served = environment
    if words_only:
        served = {**environment, "MEMORY_SEMANTIC": "off"}
    hello = (json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}) + "\n"
        + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
        + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "search_nodes", "arguments": {"query": "dog"}}}) + "\n").encode()

    if synthetic_vectors and reuse is None:
        started = time.perf_counter()
        write_synthetic_vectors(memory, made)
        print(f"side file of random vectors written in {time.perf_counter() - started:.0f} s "
              f"({vectors_path(memory).stat().st_size} bytes)")

    def serve(until_saved: bool) -> tuple[float, tuple[float, float, float], bool]:
        import shutil

        # A timed server writes one observation (the step after the write): it runs on a copy of
        # the folder's files, so that every server, and the next run with --reuse, finds the same memory.
        own = None if until_saved else Path(tempfile.mkdtemp(prefix="bench-semantic-run-"))
        for side in ([] if own is None else [memory, cache_of(memory), vectors_path(memory)]):
            if side.exists():
                shutil.copy2(side, own / side.name)  # type: ignore[operator]
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "memory_server"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   env=environment if own is None else {**served, "MEMORY_FILE_PATH": str(own / memory.name)})
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(hello)
        process.stdin.flush()
        searches, found, first = 0, False, 0.0
        # Until an answer by meaning (the first ones may come from the index cache, by words alone).
        while not found and searches < 200:
            searches += 1
            if searches > 1:
                process.stdin.write((json.dumps({"jsonrpc": "2.0", "id": searches, "method": "tools/call", "params": {
                    "name": "search_nodes", "arguments": {"query": "dog"}}}) + "\n").encode())
                process.stdin.flush()
            while True:
                answer = json.loads(process.stdout.readline())
                if answer.get("id") == searches:
                    break
            if searches == 1:
                first = time.perf_counter() - started
            found = "border collie" in json.dumps(answer)
            if words_only and not until_saved:
                # No answer by meaning will come: once the first answer has started the graph's load,
                # until the process's memory has stopped growing for 3 s (the graph loaded and indexed).
                settled(process.pid)
                break
        took = time.perf_counter() - started
        at_meaning = process_rss(process.pid)
        warm = []
        for number, query in enumerate(WARM_QUERIES):
            if until_saved:
                break
            begun = time.perf_counter()
            process.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 10_000 + number, "method": "tools/call", "params": {
                "name": "search_nodes", "arguments": {"query": query}}}) + "\n").encode())
            process.stdin.flush()
            while json.loads(process.stdout.readline()).get("id") != 10_000 + number:
                pass
            warm.append(time.perf_counter() - begun)
        rss = process_rss(process.pid)
        # After a write: one observation added (the cache is removed, so the graph's own ranking
        # index is made), then the same 20 questions in other capitals (the same words; the
        # query's vector not kept from before).
        after_write, written = [], 0.0
        if not until_saved:
            begun = time.perf_counter()
            process.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 20_000, "method": "tools/call", "params": {
                "name": "add_observations", "arguments": {"observations": [
                    {"entityName": "Ann", "contents": ["Walks Biscuit by the river every morning"]}]}}}) + "\n").encode())
            process.stdin.flush()
            while json.loads(process.stdout.readline()).get("id") != 20_000:
                pass
            written = time.perf_counter() - begun
            for number, query in enumerate(WARM_QUERIES):
                begun = time.perf_counter()
                process.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 30_000 + number, "method": "tools/call",
                                                 "params": {"name": "search_nodes", "arguments": {"query": query.title()}}})
                                     + "\n").encode())
                process.stdin.flush()
                while json.loads(process.stdout.readline()).get("id") != 30_000 + number:
                    pass
                after_write.append(time.perf_counter() - begun)
        rss_written = process_rss(process.pid) if after_write else 0.0
        while until_saved and saved_count() < sum(len(item["observations"]) for item in made):  # type: ignore[arg-type, misc]
            select.select([], [], [], 0.5)
        process.stdin.close()
        process.wait()
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)
        print(f"  spawn to first answer {first:.2f} s; to the first by meaning {took:.2f} s "
              f"({searches} searches); then search_nodes (words and meaning), median of {len(warm)} new queries "
              f"{1000 * statistics.median(warm):.0f} ms; after a write ({1000 * written:.0f} ms), median of "
              f"{len(after_write)} {1000 * statistics.median(after_write):.0f} ms (max {1000 * max(after_write):.0f})"
              if not until_saved else "", end="")
        return took, (at_meaning, rss, rss_written), found

    def settled(pid: int) -> None:
        last, still = process_rss(pid), 0
        while still < 6:
            select.select([], [], [], 0.5)
            now = process_rss(pid)
            still = still + 1 if abs(now - last) < 1 else 0
            last = now

    def saved_count() -> int:
        try:
            with vectors_path(memory).open("rb") as file:
                file.readline()
                return int(json.loads(file.readline())["count"])
        except (OSError, ValueError, KeyError):
            return 0

    started = time.perf_counter()
    serve(until_saved=True)
    if reuse is None:
        print(f"{entities} entities x {observations} observations: embedded by a first server and saved in "
              f"{time.perf_counter() - started:.0f} s; side file {vectors_path(memory).stat().st_size} bytes")
    for _ in range(5):
        took, (at_meaning, rss, rss_written), found = serve(until_saved=False)
        print(f", by meaning: {found}, RSS {at_meaning:.0f} MB at the first answer by meaning"
              f"{' (words only: once the graph is loaded and indexed)' if words_only else ''}, "
              f"{rss:.0f} MB after the {len(WARM_QUERIES)} searches, {rss_written:.0f} MB after the write and "
              f"{len(WARM_QUERIES)} more", flush=True)
    return 0 if words_only else warm_in_process(memory, made)


WARM_QUERIES = ["pets at home", "a cello concert", "tax paperwork", "music", "bread", "a trip to Japan", "gardening",
                "board games", "solar energy", "a lighthouse visit", "fixing a bike", "dogs", "learning languages",
                "medical tests", "cooking seafood", "office move", "ceramics", "school theatre", "cloud servers",
                "old records"]


def warm_in_process(memory: Path, made: list[dict[str, object]]) -> int:
    """semantic.nearest alone on the same memory and side file, in this process: the warm search by meaning."""
    import gc
    import json
    import os

    from memory_server.model import writes
    from memory_server.model.graph import EMPTY
    from memory_server.model.items import Entity
    from memory_server.retrieval import semantic
    from memory_server.retrieval.vectors import vectors_path

    del made  # (the memory as its file holds it, not as this run would make it)
    with memory.open(encoding="utf-8") as file:
        records = [json.loads(line) for line in file]
    graph = writes.create_entities(EMPTY, msgspec.convert([record for record in records if record.get("type") == "entity"],
                                                          list[Entity])).graph
    semantic.keep_vectors_at(vectors_path(memory), memory.name)
    loaded = semantic._engine(os.environ, wait=0.0)
    if loaded is not None:
        # This process loaded the model before (--synthetic-vectors wrote the side file with it),
        # so that load did not read the side file: it reads it now, or it would embed everything.
        loaded.open_vectors(vectors_path(memory), memory.name)
    if not semantic.ready(graph, 600):
        print("not ready:", semantic.status())
        return 1
    semantic.nearest(graph, "warm up", 40)
    gc.collect()
    times = []
    for query in WARM_QUERIES:
        started = time.perf_counter()
        semantic.nearest(graph, query + " now", 40)
        times.append(time.perf_counter() - started)
    print(f"in this process, semantic.nearest (the query's vector and the scan) on {semantic.status()}: "
          f"median of {len(times)} new queries {1000 * statistics.median(times):.1f} ms, max {1000 * max(times):.1f} ms")
    return 0


def write_synthetic_vectors(memory: Path, made: list[dict[str, object]]) -> None:
    import numpy as np

    from memory_server.retrieval import semantic
    from memory_server.retrieval.vectors import VectorFile, vectors_path
    engine = semantic._engine({})
    assert engine is not None, semantic.status()
    texts = list(dict.fromkeys(text for item in made for text in item["observations"]))  # type: ignore[attr-defined]
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((len(texts), semantic.DIMENSIONS), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    real = engine.encode(texts[-1:])  # the person's fact, last, with its own vector
    vectors[-1:] = real
    quantized, scales = engine.quantize(vectors)
    del vectors
    assert VectorFile(vectors_path(memory), memory.name).write(engine.digest, [semantic.text_key(t) for t in texts],
                                                                quantized, scales)


def while_another_embeds(run):  # type: ignore[no-untyped-def]
    import tempfile

    from test_semantic_process import Server, memory_of

    from memory_server.retrieval.vectors import vectors_path
    folder = Path(tempfile.mkdtemp(prefix="bench-busy-"))
    memory_of(folder / "memory.jsonl", 3000, long=True)
    busy = Server(folder / "memory.jsonl")
    try:
        busy.answer(busy.call("search_nodes", query="dog"))  # its embedding of the 3,000 starts
        print("another server embeds 3,000 long notes meanwhile", flush=True)
        outcome = run()
        print(f"  ... and it was still embedding at the end: {not vectors_path(folder / 'memory.jsonl').exists()}")
        return outcome
    finally:
        busy.end()


def during(runs: int) -> int:
    """Issue 28: a search and a ping while 500 long new observations are embedded (each a real server)."""
    import tempfile

    from test_semantic_process import Server, found_dog, memory_of

    from memory_server.retrieval.vectors import vectors_path
    searches, pings, embedding = [], [], 0
    notes = [f"Long note {number}: " + "the quarterly figures were discussed at length and " * 40 for number in range(500)]
    for _ in range(runs):
        folder = Path(tempfile.mkdtemp(prefix="bench-during-"))
        memory_of(folder / "memory.jsonl", 0)
        server = Server(folder / "memory.jsonl")
        try:
            assert found_dog(server.answer(server.call("search_nodes", query="dog")))  # the model is loaded
            server.answer(server.call("create_entities", entities=[
                {"name": f"note-{start}", "entityType": "log", "observations": notes[start:start + 5]}
                for start in range(0, 500, 5)]))
            started = time.perf_counter()
            assert found_dog(server.answer(server.call("search_nodes", query="dog")))
            searches.append(time.perf_counter() - started)
            started = time.perf_counter()
            server.answer(server.send("ping"))
            pings.append(time.perf_counter() - started)
            embedding += not vectors_path(folder / "memory.jsonl").exists()
        finally:
            server.end()
    print(f"during the embedding of 500 long new observations ({embedding} of {runs} runs still embedding after "
          f"both answers): search_nodes median {1000 * statistics.median(searches):.0f} ms, max "
          f"{1000 * max(searches):.0f} ms; ping median {1000 * statistics.median(pings):.1f} ms, max "
          f"{1000 * max(pings):.1f} ms")
    return 0


EXIT_KINDS = ("end of input after a write and a search", "end of input while loading", "SIGTERM while loading",
              "SIGINT while loading", "SIGTERM while embedding", "SIGINT while embedding")


def exits(runs: int) -> int:
    import signal
    import tempfile

    from test_semantic_process import NATIVE_NOISE, Server, memory_of

    from memory_server.retrieval.vectors import vectors_path

    def clean(status: int, errors: str, signal_number: int | None) -> bool:
        own = ("Knowledge Graph MCP Server", "mcp-server-memory:", "protocol", "memory_server")
        return (status in (0, -(signal_number or 0))
                and not any(noise in errors for noise in NATIVE_NOISE)
                and all(line.startswith(own) for line in errors.splitlines()))

    failed = 0
    for kind in EXIT_KINDS:
        good, seconds, still_embedding = 0, [], 0
        for _ in range(runs):
            folder = Path(tempfile.mkdtemp(prefix="bench-exits-"))
            memory = folder / "memory.jsonl"
            memory_of(memory, 1200, long="embedding" in kind)
            signal_number = (signal.SIGTERM if "SIGTERM" in kind else signal.SIGINT if "SIGINT" in kind else None)
            started = time.perf_counter()
            server = Server(memory)
            try:
                if kind.startswith("end of input after"):
                    server.answer(server.call("add_observations", observations=[
                        {"entityName": "Ann", "contents": ["Drinks tea every afternoon"]}]))
                    server.answer(server.call("search_nodes", query="dog"))
                elif "loading" in kind:
                    server.call("search_nodes", query="dog")
                else:
                    server.answer(server.call("search_nodes", query="dog"))
                    still_embedding += not vectors_path(memory).exists()
                status, errors = server.end(signal_number=signal_number)
            finally:
                if server.process.poll() is None:
                    server.process.kill()
                    server.process.wait()
            seconds.append(time.perf_counter() - started)
            if clean(status, errors, signal_number):
                good += 1
            else:
                print(f"  not clean ({kind}): status {status}, stderr {errors[-400:]!r}")
            for item in folder.iterdir():
                item.unlink()
            folder.rmdir()
        failed += runs - good
        print(f"{kind}: {good} of {runs} clean; spawn to exit median {statistics.median(seconds):.2f} s"
              + (f"; still embedding when the signal came in {still_embedding} of {runs}" if "embedding" in kind else ""),
              flush=True)
    return 1 if failed else 0


def timed(function, *arguments) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    function(*arguments)
    return time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
