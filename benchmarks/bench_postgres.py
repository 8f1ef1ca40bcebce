"""Benchmark: this server with its memory in PostgreSQL against the reference npm server on a file.

Run from the repository root (PostgreSQL's initdb/pg_ctl on the machine, or --database-url):

    .venv/bin/python benchmarks/bench_postgres.py                          # 10,000 entities
    .venv/bin/python benchmarks/bench_postgres.py --sizes 10000 --writers-size 100000
    .venv/bin/python benchmarks/bench_postgres.py --sizes 10000 --writers-size 0 --million 1000000
    .venv/bin/python benchmarks/bench_postgres.py --database-url URL --sizes 10000 --writers-size 0 \
        --million 1000000 --reuse-million   # part 3 again on the memory an earlier run imported there

Part 1, the ratio: the same seed (bench_memory.py's: N entities with 5 observations each, 2N
relations) is imported into a fresh memory of a throwaway database for each process of ours, and
copied to a fresh file for each process of the reference; processes run interleaved (A B B A), and
every tool call is timed from the request written to its response read (bench_memory's harness).
Part 2, a team at work: four servers on one memory of `--writers-size` entities, each writing
create_entities calls at the same time, then warm searches; medians of both.
Part 3 (`--million 1000000`): the seed imported into a memory (timed, with the database's size), then
a fresh server: spawn to its first search_nodes (the bench query, then a question in words) and
first open_nodes, its peak RSS (VmHWM from /proc), and the medians of a few reads and writes.
The exit code is 0 whatever the figures are; it is non-zero only when something crashed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import bench_memory as bench  # noqa: E402  (beside this file)
from postgres_helpers import PostgresCluster  # noqa: E402  (the tests' throwaway cluster)

COMPARED = ("search_nodes", "open_nodes", "create_entities")


def database_command(url: str, memory: str) -> list[str]:
    # bench_memory names a memory file for every server; ours must see the database instead.
    return ["env", "-u", "MEMORY_FILE_PATH", f"MEMORY_DATABASE_URL={url}", f"MEMORY_NAME={memory}",
            *bench.our_command()]


def import_seed(url: str, memory: str, seed_file: Path, timeout: float) -> float:
    started = time.perf_counter()
    subprocess.run(["env", "-u", "MEMORY_FILE_PATH", f"MEMORY_DATABASE_URL={url}", f"MEMORY_NAME={memory}",
                    *bench.our_command(), "import", str(seed_file)], check=True, timeout=timeout,
                   stdout=subprocess.DEVNULL, cwd=bench.REPO_ROOT)
    return time.perf_counter() - started


def ratio_run(url: str, size: int, rounds: int, calls: int, timeout: float, scratch: Path) -> dict[str, Any]:
    seed_file = scratch / f"seed-{size}.jsonl"
    seed_file.write_bytes(bench.seed_bytes(size))
    reference, version = bench.install_reference(scratch / "npm", bench.REFERENCE_PACKAGE, timeout)
    runs: dict[str, list[bench.ProcessRun]] = {"ours": [], "reference": []}
    stamp = f"{datetime.datetime.now(datetime.UTC):%Y%m%d%H%M%S}"
    imports = []
    for number, server in enumerate(bench.interleaved_schedule(["ours", "reference"], rounds), start=1):
        workdir = scratch / f"{size}-{number}"
        workdir.mkdir()
        if server == "ours":
            # (Named for the run: a database of --database-url may hold an earlier run's memories.)
            memory = f"bench-{size}-{number}-{stamp}"
            imports.append(import_seed(url, memory, seed_file, timeout))
            command = database_command(url, memory)
        else:
            command = reference
        print(f"  {size:,} entities: process {number} ({server})", file=sys.stderr, flush=True)
        runs[server].append(bench.run_one_process(server, command, seed_file, size, calls, timeout, workdir))
        shutil.rmtree(workdir)
    medians = {server: {operation: statistics.median(sample.wall_ms for run in server_runs
                                                     for sample in run.calls[operation])
                        for operation in COMPARED} for server, server_runs in runs.items()}
    return {"size": size, "reference_version": version, "import_seconds": statistics.median(imports),
            "median_ms": medians,
            "ratio": {operation: medians["ours"][operation] / medians["reference"][operation] for operation in COMPARED},
            "peak_rss_mib": {server: bench.peak_rss_mib(server_runs) for server, server_runs in runs.items()}}


def writers_run(url: str, size: int, writers: int, calls: int, timeout: float, scratch: Path) -> dict[str, Any]:
    seed_file = scratch / f"seed-{size}.jsonl"
    seed_file.write_bytes(bench.seed_bytes(size))
    memory = f"bench-writers-{size}"
    import_seconds = import_seed(url, memory, seed_file, timeout)
    clients = [bench.StdioServer(database_command(url, memory), scratch / "unused.jsonl",
                                 scratch / f"writer-{index}.log") for index in range(writers)]
    latencies: list[list[float]] = [[] for _ in clients]
    searches: list[float] = []
    try:
        for client in clients:
            client.send(bench.initialize_request(0))
            client.await_response(0, time.perf_counter() + timeout)
            client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # One warm-up read each: the replica is loaded before the clock starts.
        for client in clients:
            client.send(bench.tool_call_request(1, "open_nodes", {"names": [bench.entity_name(0)]}))
            client.await_response(1, time.perf_counter() + timeout)
        start = threading.Barrier(len(clients))

        def write(index: int) -> None:
            client = clients[index]
            start.wait()
            for call in range(calls):
                request_id = 100 + call
                entities = [{"name": f"writer-{index}-{call}", "entityType": "bench", "observations": ["written at once"]}]
                sent = time.perf_counter()
                client.send(bench.tool_call_request(request_id, "create_entities", {"entities": entities}))
                client.await_response(request_id, sent + timeout)
                latencies[index].append((time.perf_counter() - sent) * 1000)

        threads = [threading.Thread(target=write, args=(index,)) for index in range(len(clients))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        client = clients[0]
        for call in range(calls):
            request_id = 10_000 + call
            sent = time.perf_counter()
            client.send(bench.tool_call_request(request_id, "search_nodes", bench.tool_arguments("search_nodes", size, call)))
            client.await_response(request_id, sent + timeout)
            searches.append((time.perf_counter() - sent) * 1000)
        rss = [bench.peak_rss_kib(client.process.pid) / 1024 for client in clients]
    finally:
        for client in clients:
            client.close(timeout=30)
    return {"size": size, "writers": writers, "calls_each": calls, "import_seconds": import_seconds,
            "write_median_ms": statistics.median(value for each in latencies for value in each),
            "search_median_ms": statistics.median(searches), "peak_rss_mib": max(rss)}


NATURAL_QUERY = "Who mentioned the Zephyr initiative in a review?"
"""A question in words (no entity holds it whole): answered by the word ranking over the facts
of the entities holding its terms (1 in 100 of the seed's)."""


def database_size(url: str) -> dict[str, float]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        database = connection.execute("SELECT pg_database_size(current_database())").fetchone()
        tables = connection.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relname IN "
            "('kg_entities', 'kg_relations') AND relkind = 'r'").fetchall()
    mib = 1024 * 1024
    assert database is not None
    return {"database_mib": round(database[0] / mib), **{f"{name}_mib": round(size / mib) for name, size in tables}}


REUSED_SLACK = 1_000
"""Entities beyond the seed's that a reused memory may hold: those earlier runs of part 3 made
(20 a run, none of which holds the bench query or the question's words)."""


def reusable_import(url: str, memory: str, size: int) -> bool:
    """Whether `memory` holds the seed of `size` entities as its import left it, or with only what
    earlier runs of part 3 wrote to it (a few entities and observations each)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        if not connection.execute("SELECT to_regclass('kg_memories') IS NOT NULL").fetchone()[0]:  # type: ignore[index]
            return False
        row = connection.execute("SELECT revision, entities FROM kg_memories WHERE name = %s", (memory,)).fetchone()
    return row is not None and row[0] >= 1 and size <= row[1] <= size + REUSED_SLACK


def million_run(url: str, size: int, calls: int, timeout: float, scratch: Path, *, reuse: bool = False) -> dict[str, Any]:
    """A fresh server on a memory of `size` entities: spawn to its first answers, its peak memory,
    and the median of a few writes (issue 23: within a second, well under 1 GB, writes as at 10,000).
    `reuse`: a memory of the seed that only its import and earlier runs of this part wrote (an
    earlier run's, on --database-url) is used as it is, without importing again (import_seconds None)."""
    memory = f"bench-million-{size}"
    import_seconds: float | None = None
    if not (reuse and reusable_import(url, memory, size)):
        if reuse:  # not the seed, or not there: a memory of its own for this run
            memory = f"{memory}-{datetime.datetime.now(datetime.UTC):%Y%m%d%H%M%S}"
        seed_file = scratch / f"seed-{size}.jsonl"
        seed_file.write_bytes(bench.seed_bytes(size))
        print(f"  {size:,} entities: importing", file=sys.stderr, flush=True)
        import_seconds = import_seed(url, memory, seed_file, timeout)
        seed_file.unlink()
    sizes = database_size(url)
    command = database_command(url, memory)
    firsts: dict[str, float] = {}
    spawned = time.perf_counter()
    client = bench.StdioServer(command, scratch / "unused.jsonl", scratch / "million.log")
    try:
        client.send(bench.initialize_request(0))
        client.await_response(0, spawned + timeout)
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        firsts["initialize_ms"] = (time.perf_counter() - spawned) * 1000
        steps = [("search_nodes", {"query": bench.SEARCH_QUERY}), ("search_nodes_words", {"query": NATURAL_QUERY}),
                 ("open_nodes", bench.tool_arguments("open_nodes", size, 0))]
        for request_id, (label, arguments) in enumerate(steps, start=1):
            sent = time.perf_counter()
            client.send(bench.tool_call_request(request_id, label.removesuffix("_words"), arguments))
            client.await_response(request_id, sent + timeout)
            firsts[f"first_{label}_ms"] = (time.perf_counter() - sent) * 1000
            firsts[f"spawn_to_{label}_ms"] = (time.perf_counter() - spawned) * 1000
        medians: dict[str, float] = {}
        for label, operation in (("search_nodes", "search_nodes"), ("open_nodes", "open_nodes"),
                                 ("create_entities", "create_entities"), ("add_observations", "add_observations")):
            times = []
            for call in range(calls):
                request_id = 1_000 + len(medians) * calls + call
                sent = time.perf_counter()
                client.send(bench.tool_call_request(request_id, operation, bench.tool_arguments(operation, size, call)))
                client.await_response(request_id, sent + timeout)
                times.append((time.perf_counter() - sent) * 1000)
            medians[f"{label}_median_ms"] = statistics.median(times)
        rss = bench.peak_rss_kib(client.process.pid) / 1024
    finally:
        client.close(timeout=30)
    return {"size": size, "import_seconds": import_seconds, **sizes, **firsts, **medians, "peak_rss_mib": rss,
            "load_average": list(os.getloadavg())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=bench.parse_sizes, default=[10_000])
    parser.add_argument("--writers-size", type=int, default=100_000, help="0 skips part 2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--million", type=int, default=0, metavar="N",
                        help="part 3: a fresh server on a memory of N entities (1000000 for issue 23's figures); 0 skips it")
    parser.add_argument("--shared-buffers", default="1GB", help="the throwaway cluster's shared_buffers (default 1GB)")
    parser.add_argument("--database-url", help="a database to use (default: a throwaway cluster of its own)")
    parser.add_argument("--reuse-million", action="store_true",
                        help="part 3 on --database-url: use the memory an earlier run imported, when only the import "
                             "and earlier runs of part 3 wrote to it (saves the import: minutes at a million)")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args(argv)
    cluster = None
    url = options.database_url
    if url is None:
        # A server tuned as a team's would be: the default shared_buffers (128 MB) holds less than
        # the indexes of a million entities.
        cluster = PostgresCluster(settings=(f"shared_buffers={options.shared_buffers}",))
        cluster.start()
        url = cluster.url
    report: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                              "machine": bench.machine_description(), "load_average_at_start": list(os.getloadavg()),
                              "ratios": [], "writers": None}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-postgres-") as scratch:
            for size in options.sizes:
                result = ratio_run(url, size, options.rounds, options.calls, options.timeout, Path(scratch))
                report["ratios"].append(result)
                print(json.dumps(result, indent=2), flush=True)
            if options.writers_size:
                report["writers"] = writers_run(url, options.writers_size, 4, options.calls, options.timeout,
                                                Path(scratch))
                print(json.dumps(report["writers"], indent=2), flush=True)
            if options.million:
                report["million"] = million_run(url, options.million, options.calls, options.timeout, Path(scratch),
                                                reuse=options.reuse_million)
                print(json.dumps(report["million"], indent=2), flush=True)
    finally:
        if cluster is not None:
            cluster.remove()
    if options.json:
        options.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
