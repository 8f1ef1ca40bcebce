"""Benchmark: tools/call over Streamable HTTP, this server against one built on the official Python SDK.

Run from the repository root (the test extra installs both the SDK and uvicorn):

    .venv/bin/python benchmarks/bench_http.py                    # 10,000 entities, 1 and 32 clients
    .venv/bin/python benchmarks/bench_http.py --size 1000 --calls 100 --json bench-http.json

The peer is built here, from the SDK's own server API (`MCPServer` and its `streamable_http_app`,
served by the same uvicorn): the same nine tools, each a thin function calling this project's
`GraphStore` in a worker thread, on its own copy of the same seed file (the seed of
benchmarks/bench_memory.py). So both sides share the graph code and differ only in the protocol layer
and the HTTP transport.

Both servers are driven by one lean client (plain HTTP/1.1 on asyncio streams, one keep-alive
connection and one legacy session per client: the era both servers speak). Each client makes `--calls` calls in a fixed cycle of
open_nodes (10 names), search_nodes (1 % of the entities) and add_observations (a fresh fact each
time, so every write saves the file). Latency is from sending a request to having its whole answer;
throughput is calls per second of wall time across all clients. Each server first answers one
untimed call of each kind (first-call imports and caches). The servers run one after the other,
twice each (A B B A), and the figures pool both runs. The exit code is 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
from bench_memory import OPEN_NODES_COUNT, SEARCH_EVERY, SEARCH_QUERY, entity_name, seed_bytes  # noqa: E402

LEGACY = "2025-11-25"
OURS, PEER = "ours", "sdk"
ACCEPT = "application/json, text/event-stream"


# --- the peer: the nine tools on the SDK's server ------------------------------------------------------------

def run_peer(port: int, memory_file: str) -> None:
    import anyio.to_thread
    import msgspec
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    from memory_server.model.items import Entity, ObservationsToAdd, ObservationsToDelete, Relation
    from memory_server.retrieval import search
    from memory_server.storage.store import GraphStore

    store = GraphStore(Path(memory_file))
    server = MCPServer("memory-sdk")

    def in_thread(function: Any) -> Any:
        async def call(*arguments: Any) -> Any:
            return await anyio.to_thread.run_sync(function, *arguments)
        return call

    @server.tool()
    async def create_entities(entities: list[dict[str, Any]]) -> dict[str, Any]:
        return (await in_thread(store.create_entities)(msgspec.convert(entities, list[Entity]))).value

    @server.tool()
    async def create_relations(relations: list[dict[str, Any]]) -> dict[str, Any]:
        return (await in_thread(store.create_relations)(msgspec.convert(relations, list[Relation]))).value

    @server.tool()
    async def add_observations(observations: list[dict[str, Any]]) -> dict[str, Any]:
        return (await in_thread(store.add_observations)(msgspec.convert(observations, list[ObservationsToAdd]))).value

    @server.tool()
    async def delete_entities(entityNames: list[str]) -> dict[str, Any]:
        return (await in_thread(store.delete_entities)(entityNames)).value

    @server.tool()
    async def delete_observations(deletions: list[dict[str, Any]]) -> dict[str, Any]:
        return (await in_thread(store.delete_observations)(msgspec.convert(deletions, list[ObservationsToDelete]))).value

    @server.tool()
    async def delete_relations(relations: list[dict[str, Any]]) -> dict[str, Any]:
        return (await in_thread(store.delete_relations)(msgspec.convert(relations, list[Relation]))).value

    @server.tool()
    async def read_graph() -> dict[str, Any]:
        return await in_thread(store.read_graph)()

    @server.tool()
    async def search_nodes(query: str) -> dict[str, Any]:
        return await in_thread(search.search_nodes)(store, query)

    @server.tool()
    async def open_nodes(names: list[str]) -> dict[str, Any]:
        return await in_thread(store.open_nodes)(names)

    app = server.streamable_http_app(json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# --- driving a server -------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(kind: str, memory_file: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMORY_FILE_PATH": str(memory_file)}
    env.pop("MCP_MEMORY_HTTP_TOKEN", None)
    if kind == OURS:
        argv = [sys.executable, "-m", "memory_server", "--http", f"127.0.0.1:{port}"]
    else:
        argv = [sys.executable, __file__, "--peer", str(port), str(memory_file)]
    process = subprocess.Popen(argv, env=env, cwd=memory_file.parent, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise SystemExit(f"the {kind} server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"the {kind} server did not listen within 60 s") from None
            time.sleep(0.05)


class Caller:
    """One client: its own keep-alive connection and legacy session, spoken in plain HTTP/1.1 over
    asyncio streams so that the client's own cost stays small next to the servers'."""

    def __init__(self, url: str, number: int) -> None:
        self.port = int(url.split(":")[2].split("/")[0])
        self.number = number
        self.headers = {"accept": ACCEPT, "content-type": "application/json"}
        self.ids = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _post(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self._reader is not None
        data = json.dumps(body).encode()
        head = "".join(f"{name}: {value}\r\n" for name, value in self.headers.items())
        request_line = f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\n"
        self._writer.write(f"{request_line}{head}content-length: {len(data)}\r\n\r\n".encode() + data)
        status_line = await self._reader.readline()
        headers: dict[str, str] = {}
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            payload = await self._reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            pieces = []
            while (size := int((await self._reader.readline()).strip(), 16)) != 0:
                pieces.append(await self._reader.readexactly(size))
                await self._reader.readline()
            await self._reader.readline()
            payload = b"".join(pieces)
        else:
            payload = b""
        return int(status_line.split()[1]), headers, payload

    async def open(self) -> None:
        status, headers, _ = await self._post({
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
        if status != 200:
            raise SystemExit(f"initialize answered {status}")
        self.headers = {**self.headers, "mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        _, headers, payload = await self._post({
            "jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        if headers.get("content-type", "").startswith("text/event-stream"):
            payload = [line[5:] for line in payload.splitlines() if line.startswith(b"data:")][-1]
        message = json.loads(payload)
        if "error" in message or message["result"].get("isError"):
            raise SystemExit(f"{name} failed: {message}")
        return message["result"]

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


OPERATIONS = ("open_nodes", "search_nodes", "add_observations")


def workload(size: int, client: int, step: int, operations: tuple[str, ...] = OPERATIONS) -> tuple[str, dict[str, Any]]:
    kind = OPERATIONS.index(operations[step % len(operations)])
    if kind == 0:
        start_at = (client * 997 + step * 31) % max(1, size - OPEN_NODES_COUNT)
        return "open_nodes", {"names": [entity_name(start_at + k) for k in range(OPEN_NODES_COUNT)]}
    if kind == 1:
        return "search_nodes", {"query": SEARCH_QUERY}
    return "add_observations", {"observations": [{"entityName": entity_name(client % size),
                                                  "contents": [f"bench fact {client}-{step}-{time.time_ns()}"]}]}


async def measure(url: str, size: int, clients: int, calls: int,
                  operations: tuple[str, ...] = OPERATIONS) -> tuple[list[tuple[str, float]], float]:
    callers = [Caller(url, number) for number in range(clients)]
    for caller in callers:
        await caller.open()
    latencies: list[tuple[str, float]] = []

    async def run(caller: Caller) -> None:
        for step in range(calls):
            name, arguments = workload(size, caller.number, step, operations)
            began = time.perf_counter()
            result = await caller.call(name, arguments)
            latencies.append((name, time.perf_counter() - began))
            if name == "search_nodes" and "structuredContent" in result:
                found = result["structuredContent"]
                found = found.get("result", found)  # the SDK wraps a dict result when its schema is generic
                # A glance of the size // SEARCH_EVERY matches: a page of them, each holding the query.
                shown = found["entities"]
                if not shown or len(shown) > size // SEARCH_EVERY or not all(
                        SEARCH_QUERY in json.dumps(entity).lower() for entity in shown):
                    raise SystemExit(f"search_nodes showed {len(shown)} entities, not a page of the "
                                     f"{size // SEARCH_EVERY} that hold {SEARCH_QUERY!r}")

    began = time.perf_counter()
    async with anyio.create_task_group() as tasks:
        for caller in callers:
            tasks.start_soon(run, caller)
    wall = time.perf_counter() - began
    for caller in callers:
        await caller.close()
    return latencies, clients * calls / wall


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--calls", type=int, default=60, help="calls per client")
    parser.add_argument("--operations", default=",".join(OPERATIONS),
                        help="the cycle of calls each client makes (default: %(default)s)")
    parser.add_argument("--json")
    parser.add_argument("--peer", nargs=2, metavar=("PORT", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        run_peer(int(args.peer[0]), args.peer[1])
        return

    levels = [int(level) for level in args.concurrency.split(",")]
    operations = tuple(args.operations.split(","))
    if not operations or set(operations) - set(OPERATIONS):
        raise SystemExit(f"--operations takes some of {', '.join(OPERATIONS)}")
    workdir = Path(tempfile.mkdtemp(prefix="bench-http-"))
    seed = seed_bytes(args.size)
    samples: dict[tuple[str, int], list[tuple[str, float]]] = {}
    throughputs: dict[tuple[str, int], list[float]] = {}
    print(f"{platform.python_version()} on {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
          f"{args.size} entities, {args.calls} calls per client, cycle {', '.join(operations)}")
    try:
        for round_number, kind in enumerate((OURS, PEER, PEER, OURS)):
            memory_file = workdir / f"{round_number}-{kind}" / "memory.jsonl"
            memory_file.parent.mkdir()
            memory_file.write_bytes(seed)
            process, url = start(kind, memory_file)
            try:
                anyio.run(measure, url, args.size, 1, 3)  # warm-up, untimed: first-call imports and caches
                for level in levels:
                    latencies, rate = anyio.run(measure, url, args.size, level, args.calls, operations)
                    samples.setdefault((kind, level), []).extend(latencies)
                    throughputs.setdefault((kind, level), []).append(rate)
            finally:
                process.terminate()
                process.wait(30)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print("\n| clients | server | median ms | p95 ms | calls/s |")
    print("|---:|---|---:|---:|---:|")
    report: dict[str, Any] = {}
    for level in levels:
        for kind in (OURS, PEER):
            lat = [seconds for _, seconds in samples[(kind, level)]]
            rate = statistics.mean(throughputs[(kind, level)])
            report[f"{kind}-{level}"] = {"median_ms": statistics.median(lat) * 1000,
                                         "p95_ms": percentile(lat, 0.95) * 1000, "calls_per_s": rate}
            print(f"| {level} | {kind} | {statistics.median(lat) * 1000:.1f} | {percentile(lat, 0.95) * 1000:.1f} "
                  f"| {rate:.0f} |")
    print("\n| clients | operation | ours median ms | sdk median ms | ratio |")
    print("|---:|---|---:|---:|---:|")
    for level in levels:
        for operation in operations:
            medians = [statistics.median([t for name, t in samples[(kind, level)] if name == operation]) * 1000
                       for kind in (OURS, PEER)]
            report[f"{operation}-{level}"] = {"ours_median_ms": medians[0], "sdk_median_ms": medians[1]}
            print(f"| {level} | {operation} | {medians[0]:.1f} | {medians[1]:.1f} | {medians[0] / medians[1]:.3f} |")
    print()
    for level in levels:
        ours, peer = report[f"{OURS}-{level}"], report[f"{PEER}-{level}"]
        latency_ratio = ours["median_ms"] / peer["median_ms"]
        throughput_ratio = ours["calls_per_s"] / peer["calls_per_s"]
        print(f"{level} client(s): median latency ours/sdk {latency_ratio:.3f}, throughput ours/sdk {throughput_ratio:.2f}x")
        report[f"ratios-{level}"] = {"latency": latency_ratio, "throughput": throughput_ratio}
    top = max(levels)
    print(f"targets at {top} clients: latency <= 0.5: {'PASS' if report[f'ratios-{top}']['latency'] <= 0.5 else 'FAIL'}; "
          f"throughput >= 2x: {'PASS' if report[f'ratios-{top}']['throughput'] >= 2 else 'FAIL'}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
