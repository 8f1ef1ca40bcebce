"""Benchmark: this server against the reference npm server on the same memory file.

Run from the repository root:

    .venv/bin/python benchmarks/bench_memory.py                      # sizes 1000,10000, both servers
    .venv/bin/python benchmarks/bench_memory.py --sizes 1000,10000,100000 --json bench.json
    .venv/bin/python benchmarks/bench_memory.py --servers reference  # one side only

Each size gets one seed file of N entities (5 observations each) and 2N relations in the
reference's JSONL record format; every server process starts from its own copy of the same
bytes. Servers run interleaved (A B B A per round) so a noisy neighbour hurts both sides
alike. Every tool call is timed from the request being written to its response line being
read, beside the server's CPU time over the same window (/proc/PID/stat) and its peak RSS.
Reading the whole graph by pages is timed from the first request to the last page; the first
answer of a fresh process (spawn to the answer of its first read) is timed per read tool, twice
for this server: with the index cache it leaves beside a memory file it has served before (made
once per size by an untimed process, then copied beside each copy of the seed: the everyday
case), and without it (the first start on a file another program wrote). The reference keeps no
cache, so its two rows time the same case.
The exit code is 0 whatever the figures are; it is non-zero only when something crashed.
"""

from __future__ import annotations

import argparse
import atexit
import compileall
import datetime
import json
import math
import os
import platform
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory"
LEGACY_VERSION = "2025-11-25"

OURS = "ours"
REFERENCE = "reference"
SERVERS = (OURS, REFERENCE)

READS = ("read_graph", "search_nodes", "open_nodes")
WRITES = ("create_entities", "add_observations", "delete_observations", "create_relations")
# Every page of read_graph, cursor after cursor (the reference has no pages: its one answer).
READ_ALL = "read_graph, all pages"
# The reads come first in each pass so their expected entity count is simply N + pass number.
OPERATIONS = (READS[0], READ_ALL, *READS[1:], *WRITES)
STARTUP = "start-up"
# Spawn to the answer of the first call of a fresh process, one process per read tool.
# Row -> (read, whether our index cache lies beside the memory file).
FIRST_ANSWERS = {
    **{f"first {read}": (read, True) for read in ("search_nodes", "open_nodes", "read_graph")},
    **{f"first {read}, no cache": (read, False) for read in ("search_nodes", "open_nodes", "read_graph")},
}
ROWS = (STARTUP, *FIRST_ANSWERS, *OPERATIONS)

OBSERVATIONS_PER_ENTITY = 5
# One entity in SEARCH_EVERY carries the marker word, so the query matches about 1%.
SEARCH_EVERY = 100
SEARCH_QUERY = "zephyr"
OPEN_NODES_COUNT = 10
ENTITY_TYPES = ("person", "organization", "event", "place", "project")
TOPICS = ("tea", "chess", "hiking", "jazz", "gardening", "astronomy", "cycling", "poetry")

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
READ_CHUNK = 1 << 20


class BenchError(RuntimeError):
    """A server misbehaved or a step of the benchmark could not complete."""


# ---------------------------------------------------------------------------------------
# The seed graph and the workload (pure)
# ---------------------------------------------------------------------------------------


def entity_name(index: int) -> str:
    return f"entity_{index:06d}"


def seed_observation(index: int, slot: int) -> str:
    if slot == OBSERVATIONS_PER_ENTITY - 1 and index % SEARCH_EVERY == 0:
        return f"Mentioned the {SEARCH_QUERY.capitalize()} initiative during the weekly review"
    topic = TOPICS[(index + slot) % len(TOPICS)]
    return f"Observation {slot} about {entity_name(index)}: enjoys {topic} on weekends"


def seed_relation_pairs(size: int) -> Iterator[tuple[int, int, str]]:
    for index in range(size):
        yield index, (index + 1) % size, "knows"
        yield index, (index * 7 + 3) % size, "works_with"


def seed_records(size: int) -> Iterator[dict[str, Any]]:
    for index in range(size):
        yield {
            "type": "entity",
            "name": entity_name(index),
            "entityType": ENTITY_TYPES[index % len(ENTITY_TYPES)],
            "observations": [seed_observation(index, s) for s in range(OBSERVATIONS_PER_ENTITY)],
        }
    for source, target, relation_type in seed_relation_pairs(size):
        yield {
            "type": "relation",
            "from": entity_name(source),
            "to": entity_name(target),
            "relationType": relation_type,
        }


def seed_bytes(size: int) -> bytes:
    # Compact JSON lines joined by "\n" with no trailing newline: byte for byte what the
    # reference writes when it saves a graph, i.e. a file it has been growing for months.
    lines = (json.dumps(r, separators=(",", ":"), ensure_ascii=False) for r in seed_records(size))
    return "\n".join(lines).encode()


def expected_search_hits(size: int) -> int:
    return len(range(0, size, SEARCH_EVERY))


def spread_index(size: int, pass_number: int, salt: int) -> int:
    """An entity index that differs per pass and per operation, spread over the graph."""
    return (pass_number * 7919 + salt * 104729) % size


def tool_arguments(operation: str, size: int, pass_number: int) -> dict[str, Any]:
    """Arguments for one call; writes use fresh names per pass so each one changes the graph."""
    k = pass_number
    if operation == "read_graph":
        return {}
    if operation == "search_nodes":
        return {"query": SEARCH_QUERY}
    if operation == "open_nodes":
        step = max(size // OPEN_NODES_COUNT, 1)
        first = spread_index(size, k, 1)
        return {"names": [entity_name((first + j * step) % size) for j in range(OPEN_NODES_COUNT)]}
    if operation == "create_entities":
        return {
            "entities": [
                {
                    "name": f"bench_entity_{k}",
                    "entityType": "person",
                    "observations": [f"Created by benchmark pass {k}"],
                }
            ]
        }
    if operation == "add_observations":
        target = entity_name(spread_index(size, k, 2))
        return {"observations": [{"entityName": target, "contents": [f"Benchmark note {k}"]}]}
    if operation == "delete_observations":
        index = spread_index(size, k, 3)
        return {
            "deletions": [
                {"entityName": entity_name(index), "observations": [seed_observation(index, 0)]}
            ]
        }
    if operation == "create_relations":
        return {
            "relations": [
                {
                    "from": entity_name(spread_index(size, k, 4)),
                    "to": entity_name(spread_index(size, k, 5)),
                    "relationType": f"benchmarked_with_{k}",
                }
            ]
        }
    raise ValueError(f"unknown operation {operation!r}")


def jsonrpc_line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def initialize_request(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench_memory", "version": "1"},
        },
    }


def tool_call_request(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def next_cursor(line: bytes | bytearray) -> str | None:
    """The nextCursor of a raw tools/call response line, found without parsing the line.

    structuredContent comes last in the line, and inside the text item the key's quotes are
    escaped, so the last unescaped occurrence is the structured one."""
    at = line.rfind(b'"nextCursor":"')
    if at < 0:
        return None
    start = at + len(b'"nextCursor":"')
    return line[start:line.index(b'"', start)].decode()


def graph_in(result: dict[str, Any]) -> dict[str, Any]:
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        return structured
    return json.loads(result["content"][0]["text"])


def check_tool_result(
    operation: str, result: dict[str, Any], size: int, pass_number: int
) -> None:
    """Raise BenchError unless the result shows the call did what the workload intends."""
    if result.get("isError"):
        raise BenchError(f"{operation} returned a tool error: {result.get('content')!r}")
    if operation == "read_graph":
        graph = graph_in(result)
        want = (size + pass_number, 2 * size + pass_number)
        got = (len(graph["entities"]), len(graph["relations"]))
        if "nextCursor" in graph:  # the first page of a cut answer: its summary counts the whole
            got = (graph["summary"]["entities"], graph["summary"]["relations"])
        if got != want:
            raise BenchError(f"read_graph saw {got} entities/relations, expected {want}")
    elif operation == "search_nodes":
        graph = graph_in(result)
        hits = len(graph["entities"])
        # Above the answer budget (1,000 matches at 100,000 entities) ours answers a first page.
        cut = "nextCursor" in graph and 0 < hits < expected_search_hits(size)
        if hits != expected_search_hits(size) and not cut:
            raise BenchError(f"search_nodes matched {hits}, expected {expected_search_hits(size)}")
        if any(SEARCH_QUERY not in json.dumps(entity).lower() for entity in graph["entities"]):
            raise BenchError("search_nodes returned an entity without the query")
    elif operation == "open_nodes":
        found = len(graph_in(result)["entities"])
        if found != min(OPEN_NODES_COUNT, size):
            raise BenchError(f"open_nodes found {found} of {OPEN_NODES_COUNT} entities")


# ---------------------------------------------------------------------------------------
# Statistics (pure)
# ---------------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks; fraction in [0, 1]."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 0.5)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def ratio(ours: float, reference: float) -> float:
    if math.isnan(ours) or math.isnan(reference) or reference <= 0:
        return math.nan
    return ours / reference


def geometric_mean(values: Iterable[float]) -> float:
    usable = [v for v in values if not math.isnan(v) and v > 0]
    if not usable:
        return math.nan
    return math.exp(sum(math.log(v) for v in usable) / len(usable))


# ---------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------


@dataclass
class Sample:
    wall_ms: float
    cpu_ms: float


@dataclass
class ProcessRun:
    server: str
    startup: Sample
    peak_rss_kib: int
    # All CPU the process used up to the end of its last call, timed windows or not.
    total_cpu_ms: float
    calls: dict[str, list[Sample]] = field(default_factory=dict)

    def untimed_cpu_ms(self) -> float:
        """CPU spent outside every timed window: work a server defers past its response."""
        timed = self.startup.cpu_ms + sum(s.cpu_ms for c in self.calls.values() for s in c)
        return self.total_cpu_ms - timed


@dataclass
class OperationFigures:
    median_ms: float
    p95_ms: float
    cpu_mean_ms: float
    samples: int


def operation_figures(samples: Sequence[Sample]) -> OperationFigures:
    walls = [s.wall_ms for s in samples]
    return OperationFigures(
        median_ms=median(walls),
        p95_ms=percentile(walls, 0.95),
        # CPU time moves in whole clock ticks (10 ms), so a median would mostly read 0 or 10;
        # the mean over many calls is the honest per-call figure.
        cpu_mean_ms=mean([s.cpu_ms for s in samples]),
        samples=len(samples),
    )


def server_figures(runs: Sequence[ProcessRun]) -> dict[str, OperationFigures]:
    figures = {STARTUP: operation_figures([r.startup for r in runs])}
    for operation in OPERATIONS:
        figures[operation] = operation_figures([s for r in runs for s in r.calls[operation]])
    return figures


def peak_rss_mib(runs: Sequence[ProcessRun]) -> float:
    return median([r.peak_rss_kib / 1024 for r in runs]) if runs else math.nan


# ---------------------------------------------------------------------------------------
# /proc readers and the stdio client (I/O)
# ---------------------------------------------------------------------------------------


def cpu_ms(pid: int) -> float:
    """utime + stime of the whole process (all threads) from /proc/PID/stat, in ms.

    Whole clock ticks convert to exact multiples of 10 ms (at 100 ticks/s), so differences
    and sums of these figures carry no rounding error.
    """
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name may hold spaces and parentheses; the fields after its last ")" do not.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) * 1000 / CLOCK_TICKS


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise BenchError(f"no VmHWM in /proc/{pid}/status")


LIVE_PROCESSES: set[subprocess.Popen[bytes]] = set()


def kill_live_processes() -> None:
    for process in list(LIVE_PROCESSES):
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        LIVE_PROCESSES.discard(process)


class StdioServer:
    """One server process spoken to over its stdin/stdout pipes, one request at a time."""

    def __init__(self, command: Sequence[str], memory_file: Path, stderr_path: Path) -> None:
        env = dict(os.environ, MEMORY_FILE_PATH=str(memory_file))
        self._stderr = stderr_path.open("wb")
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=REPO_ROOT,
        )
        LIVE_PROCESSES.add(self.process)
        self.stderr_path = stderr_path
        self._buffer = bytearray()
        self._selector = selectors.DefaultSelector()
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self._selector.register(self.process.stdout, selectors.EVENT_READ)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(jsonrpc_line(message))
            self.process.stdin.flush()
        except BrokenPipeError as error:
            raise BenchError(self._died("closed its stdin")) from error

    def _died(self, what: str) -> str:
        tail = self.stderr_path.read_text(errors="replace")[-2000:]
        return f"server {what} (exit code {self.process.poll()}); stderr tail:\n{tail}"

    def _read_line(self, deadline: float) -> tuple[bytearray, float]:
        """The next line and the perf_counter instant its newline arrived.

        The instant is taken before the line is copied out of the buffer or parsed, so the
        client's own handling of a 100 MB graph is not charged to the server.
        """
        stdout = self.process.stdout
        assert stdout is not None
        searched = 0
        while True:
            newline = self._buffer.find(b"\n", searched)
            if newline >= 0:
                arrived = time.perf_counter()
                line = self._buffer[:newline]
                del self._buffer[: newline + 1]
                return line, arrived
            searched = len(self._buffer)
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise BenchError("timed out waiting for a response line")
            if not self._selector.select(remaining):
                continue
            chunk = os.read(stdout.fileno(), READ_CHUNK)
            if not chunk:
                raise BenchError(self._died("closed its stdout"))
            self._buffer += chunk

    def await_line(self, request_id: int, deadline: float) -> tuple[bytearray, float]:
        """The raw response line for request_id (notifications skipped), unparsed, and when it came."""
        marker = b'"id":%d,' % request_id
        while True:
            line, read_at = self._read_line(deadline)
            # Found without parsing a page of 100 KB: the id comes first (ours) or last (the reference).
            if marker in line[:64] or (marker[:-1] + b"}") in line[-32:]:
                return line, read_at
            if line.strip() and json.loads(line).get("id") == request_id:
                return line, read_at

    def await_response(self, request_id: int, deadline: float) -> tuple[dict[str, Any], float]:
        """The result for request_id and the instant its line was read; notifications skipped."""
        while True:
            line, read_at = self._read_line(deadline)
            if not line.strip():
                continue
            message = json.loads(line)
            if message.get("id") == request_id and ("result" in message or "error" in message):
                if "error" in message:
                    raise BenchError(f"request {request_id} failed: {message['error']!r}")
                return message["result"], read_at

    def close(self, timeout: float) -> None:
        try:
            if self.process.stdin is not None and not self.process.stdin.closed:
                try:
                    self.process.stdin.close()
                except BrokenPipeError:
                    pass
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=timeout)
        finally:
            self._selector.close()
            if self.process.stdout is not None:
                self.process.stdout.close()
            self._stderr.close()
            LIVE_PROCESSES.discard(self.process)


def run_one_process(
    server: str,
    command: Sequence[str],
    seed_file: Path,
    size: int,
    passes: int,
    timeout: float,
    workdir: Path,
) -> ProcessRun:
    memory_file = workdir / "memory.jsonl"
    shutil.copyfile(seed_file, memory_file)
    started = time.perf_counter()
    client = StdioServer(command, memory_file, workdir / "stderr.log")
    try:
        client.send(initialize_request(0))
        _, answered = client.await_response(0, started + timeout)
        startup = Sample(wall_ms=(answered - started) * 1000,
                         cpu_ms=cpu_ms(client.process.pid))
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        run = ProcessRun(server=server, startup=startup, peak_rss_kib=0, total_cpu_ms=0.0,
                         calls={operation: [] for operation in OPERATIONS})
        request_id = 0
        for pass_number in range(passes):
            for operation in OPERATIONS:
                if operation == READ_ALL:
                    sample, request_id = read_all_pages(client, request_id, size, pass_number, timeout)
                    run.calls[operation].append(sample)
                    continue
                request_id += 1
                request = tool_call_request(
                    request_id, operation, tool_arguments(operation, size, pass_number)
                )
                cpu_before = cpu_ms(client.process.pid)
                sent = time.perf_counter()
                client.send(request)
                result, answered = client.await_response(request_id, sent + timeout)
                cpu = cpu_ms(client.process.pid) - cpu_before
                check_tool_result(operation, result, size, pass_number)
                run.calls[operation].append(
                    Sample(wall_ms=(answered - sent) * 1000, cpu_ms=cpu))
        run.peak_rss_kib = peak_rss_kib(client.process.pid)
        run.total_cpu_ms = cpu_ms(client.process.pid)
        return run
    except BenchError as error:
        raise BenchError(f"{server} at {size} entities: {error}") from error
    finally:
        client.close(timeout=min(timeout, 30))


def read_all_pages(client: StdioServer, request_id: int, size: int, pass_number: int,
                   timeout: float) -> tuple[Sample, int]:
    """read_graph, then every page its cursors lead to, timed from the first request to the last
    page; the pages are parsed and checked after the clock stops. The reference has no pages: its
    first answer is the whole graph."""
    lines = []
    cursor: str | None = None
    cpu_before = cpu_ms(client.process.pid)
    sent = time.perf_counter()
    while True:
        request_id += 1
        client.send(tool_call_request(request_id, "read_graph", {} if cursor is None else {"cursor": cursor}))
        line, answered = client.await_line(request_id, sent + timeout)
        lines.append(line)
        if (cursor := next_cursor(line)) is None:
            break
        if len(lines) > 100 * size:
            raise BenchError("read_graph pages do not end")
    sample = Sample(wall_ms=(answered - sent) * 1000, cpu_ms=cpu_ms(client.process.pid) - cpu_before)
    entities = relations = 0
    for line in lines:
        message = json.loads(line)
        if "error" in message:
            raise BenchError(f"read_graph page failed: {message['error']!r}")
        if message["result"].get("isError"):
            raise BenchError(f"read_graph page returned a tool error: {message['result']['content']!r}")
        graph = graph_in(message["result"])
        entities += len(graph["entities"])
        relations += len(graph["relations"])
    want = (size + pass_number, 2 * size + pass_number)
    if (entities, relations) != want:
        raise BenchError(f"all pages of read_graph held {(entities, relations)} entities/relations, "
                         f"expected {want}")
    return sample, request_id


def cache_beside(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.name + ".index")


def make_cache(command: Sequence[str], seed_file: Path, size: int, timeout: float, workdir: Path) -> Path | None:
    """Our index cache for the seed, made as everyday use makes it: a server answers a read, then
    builds the cache once the memory has been quiet for a while. None when the server makes none
    (a memory file below the cache's size threshold). Untimed."""
    memory_file = workdir / "memory.jsonl"
    shutil.copyfile(seed_file, memory_file)
    client = StdioServer(command, memory_file, workdir / "stderr.log")
    deadline = time.perf_counter() + timeout
    try:
        client.send(initialize_request(0))
        client.await_response(0, deadline)
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        client.send(tool_call_request(1, "search_nodes", tool_arguments("search_nodes", size, 0)))
        client.await_line(1, deadline)
        # Made in a temporary file and renamed into place: once it exists, it is whole. A file
        # below the threshold gets none; the quiet time (2 s) plus the build bound the wait.
        wait_until = min(deadline, time.perf_counter() + 15 + size / 5_000)
        while not cache_beside(memory_file).exists() and time.perf_counter() < wait_until:
            if client.process.poll() is not None:
                raise BenchError(client._died("exited while making the index cache"))
            time.sleep(0.1)
    finally:
        client.close(timeout=min(timeout, 30))
    if not cache_beside(memory_file).exists():
        return None
    kept = cache_beside(seed_file)
    shutil.move(cache_beside(memory_file), kept)
    return kept


def run_first_answer(server: str, command: Sequence[str], seed_file: Path, size: int, row: str,
                     timeout: float, workdir: Path) -> Sample:
    """A fresh process on an existing memory file: spawn to the answer of its first call, as a
    client that starts a server per chat waits for it."""
    memory_file = workdir / "memory.jsonl"
    shutil.copyfile(seed_file, memory_file)
    operation, with_cache = FIRST_ANSWERS[row]
    if with_cache and cache_beside(seed_file).exists():
        shutil.copyfile(cache_beside(seed_file), cache_beside(memory_file))
    started = time.perf_counter()
    client = StdioServer(command, memory_file, workdir / "stderr.log")
    try:
        client.send(initialize_request(0))
        client.await_response(0, started + timeout)
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        client.send(tool_call_request(1, operation, tool_arguments(operation, size, 0)))
        line, answered = client.await_line(1, started + timeout)
        sample = Sample(wall_ms=(answered - started) * 1000, cpu_ms=cpu_ms(client.process.pid))
        message = json.loads(line)
        if "error" in message:
            raise BenchError(f"{operation} failed: {message['error']!r}")
        check_tool_result(operation, message["result"], size, 0)
        return sample
    except BenchError as error:
        raise BenchError(f"{server} at {size} entities, {row}: {error}") from error
    finally:
        client.close(timeout=min(timeout, 30))


def interleaved_schedule(servers: Sequence[str], rounds: int) -> list[str]:
    """A B B A per round, reduced to the servers selected."""
    order = [OURS, REFERENCE, REFERENCE, OURS]
    return [s for _ in range(rounds) for s in order if s in servers]


# ---------------------------------------------------------------------------------------
# Setting up the servers (I/O)
# ---------------------------------------------------------------------------------------


def install_reference(prefix: Path, package: str, timeout: float) -> tuple[list[str], str]:
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        raise BenchError("node and npm must be on PATH to run the reference server")
    print(f"installing {package} with npm into {prefix} ...", file=sys.stderr, flush=True)
    try:
        subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", package],
            check=True,
            timeout=timeout,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except subprocess.CalledProcessError as error:
        raise BenchError(f"npm install failed: {error.stderr.decode(errors='replace')}") from error
    except subprocess.TimeoutExpired as error:
        raise BenchError(f"npm install took longer than {timeout:.0f} s") from error
    package_dir = prefix / "node_modules" / "@modelcontextprotocol" / "server-memory"
    version = json.loads((package_dir / "package.json").read_text())["version"]
    return [node, str(package_dir / "dist" / "index.js")], version


def our_command() -> list[str]:
    # Byte-compiled first, as pip leaves an installed package: with PYTHONDONTWRITEBYTECODE set
    # (or an unwritable checkout) every start would otherwise compile the sources again, a cost no
    # installed server pays.
    checkout = Path(__file__).resolve().parent.parent
    for package in ("protocol", "memory_server"):
        compileall.compile_dir(checkout / package, quiet=1)
    return [sys.executable, "-m", "memory_server"]


def command_version(command: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() or "unknown"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_description() -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "node": command_version(["node", "--version"]),
        "platform": platform.platform(),
    }


# ---------------------------------------------------------------------------------------
# Report (pure formatting)
# ---------------------------------------------------------------------------------------


@dataclass
class FirstAnswer:
    server: str
    row: str
    sample: Sample


@dataclass
class SizeResult:
    size: int
    seed_bytes: int
    runs: list[ProcessRun]
    skipped: dict[str, str]
    first_answers: list[FirstAnswer] = field(default_factory=list)

    def runs_of(self, server: str) -> list[ProcessRun]:
        return [r for r in self.runs if r.server == server]

    def figures(self, server: str) -> dict[str, OperationFigures] | None:
        runs = self.runs_of(server)
        if not runs:
            return None
        figures = server_figures(runs)
        for row in FIRST_ANSWERS:
            samples = [a.sample for a in self.first_answers if a.server == server and a.row == row]
            if samples:
                figures[row] = operation_figures(samples)
        return figures


def fmt(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def operation_ratios(result: SizeResult) -> dict[str, float]:
    ours, reference = result.figures(OURS), result.figures(REFERENCE)
    if ours is None or reference is None:
        return {}
    return {op: ratio(ours[op].median_ms, reference[op].median_ms) for op in ours}


def memory_ratio(result: SizeResult) -> float:
    return ratio(peak_rss_mib(result.runs_of(OURS)), peak_rss_mib(result.runs_of(REFERENCE)))


def size_table(result: SizeResult) -> str:
    ours, reference = result.figures(OURS), result.figures(REFERENCE)
    ratios = operation_ratios(result)
    header = ("operation", "ours med ms", "ours p95 ms", "ref med ms", "ref p95 ms",
              "ratio", "ours CPU ms", "ref CPU ms")
    rows = [header]
    nothing = OperationFigures(math.nan, math.nan, math.nan, 0)
    for operation in ROWS:
        a = ours.get(operation, nothing) if ours else nothing
        b = reference.get(operation, nothing) if reference else nothing
        rows.append((operation, fmt(a.median_ms), fmt(a.p95_ms), fmt(b.median_ms),
                     fmt(b.p95_ms), fmt(ratios.get(operation, math.nan), 3),
                     fmt(a.cpu_mean_ms), fmt(b.cpu_mean_ms)))
    rows.append(("peak RSS MiB", fmt(peak_rss_mib(result.runs_of(OURS))), "",
                 fmt(peak_rss_mib(result.runs_of(REFERENCE))), "",
                 fmt(memory_ratio(result), 3), "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                  enumerate(zip(row, widths)))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def untimed_cpu_note(result: SizeResult) -> str:
    parts = [f"{server} {fmt(mean([r.untimed_cpu_ms() for r in result.runs_of(server)]))} ms"
             for server in SERVERS if result.runs_of(server)]
    return "CPU outside the timed windows, mean per process: " + ", ".join(parts)


def processes_note(result: SizeResult) -> str:
    parts = []
    for server in SERVERS:
        runs = result.runs_of(server)
        if runs:
            calls = len(runs[0].calls[OPERATIONS[0]])
            first = sum(1 for a in result.first_answers if a.server == server)
            parts.append(f"{server}: {len(runs)} processes x {calls} calls per operation, "
                         f"{first} more processes for the first answers")
        elif server in result.skipped:
            parts.append(f"{server}: SKIPPED ({result.skipped[server]})")
    return "; ".join(parts)


def summary_line(result: SizeResult) -> str:
    ratios = operation_ratios(result)
    if not ratios:
        return f"summary at {result.size:,}: no ratio (only one server ran)"
    return (f"summary at {result.size:,}: geometric mean of ours/reference median ratios "
            f"over {len(ratios)} rows (start-up, first answers, tool calls) = "
            f"{fmt(geometric_mean(ratios.values()), 3)}")


@dataclass
class Target:
    description: str
    size: int
    verdict: str  # PASS, FAIL, n/a, or info (a figure without a target)
    figure: str


RATIO_LIMITS_AT_10K = (
    ("search_nodes", 0.1), ("open_nodes", 0.05),
    *((op, 0.2) for op in WRITES),
    (READ_ALL, 0.25),
    (STARTUP, 1.0),
)
FIRST_ANSWER_LIMIT = 0.5
FIRST_ANSWER_SIZES = (10_000, 100_000)
PEAK_MEMORY_LIMIT = 0.4
ABSOLUTE_LIMITS_AT_100K = (*((op, 50.0) for op in READS), *((op, 500.0) for op in WRITES))


def verdict(value: float, limit: float, strict: bool) -> str:
    if math.isnan(value):
        return "n/a"
    return "PASS" if (value < limit if strict else value <= limit) else "FAIL"


def evaluate_targets(results: dict[int, SizeResult]) -> list[Target]:
    targets = []
    at_10k = results.get(10_000)
    ratios = operation_ratios(at_10k) if at_10k else {}
    for operation, limit in RATIO_LIMITS_AT_10K:
        value = ratios.get(operation, math.nan)
        targets.append(Target(f"{operation} ours/reference <= {limit}", 10_000,
                              verdict(value, limit, strict=False), fmt(value, 3)))
    mem = memory_ratio(at_10k) if at_10k else math.nan
    targets.append(Target(f"peak RSS ours/reference <= {PEAK_MEMORY_LIMIT}", 10_000,
                          verdict(mem, PEAK_MEMORY_LIMIT, strict=False), fmt(mem, 3)))
    for size in FIRST_ANSWER_SIZES:
        result = results.get(size)
        size_ratios = operation_ratios(result) if result else {}
        for row, (_, with_cache) in FIRST_ANSWERS.items():
            value = size_ratios.get(row, math.nan)
            if with_cache:
                targets.append(Target(f"{row} ours/reference <= {FIRST_ANSWER_LIMIT}", size,
                                      verdict(value, FIRST_ANSWER_LIMIT, strict=False), fmt(value, 3)))
            else:  # the first start after another program wrote the file: measured, not a target
                targets.append(Target(f"{row} ours/reference", size, "info", fmt(value, 3)))
    at_100k = results.get(100_000)
    ours_100k = at_100k.figures(OURS) if at_100k else None
    for operation, limit in ABSOLUTE_LIMITS_AT_100K:
        value = ours_100k[operation].median_ms if ours_100k else math.nan
        targets.append(Target(f"{operation} ours median < {limit:.0f} ms", 100_000,
                              verdict(value, limit, strict=True), fmt(value) + " ms"))
    return targets


def targets_report(targets: Sequence[Target]) -> str:
    lines = ["targets (informational; n/a = size or server not run; info = measured, no target):"]
    for t in targets:
        lines.append(f"  {t.verdict:<4}  at {t.size:>7,}: {t.description:<50} {t.figure}")
    return "\n".join(lines)


def json_report(
    machine: dict[str, Any], versions: dict[str, str], results: dict[int, SizeResult],
    targets: Sequence[Target],
) -> dict[str, Any]:
    sizes = {}
    for size, result in results.items():
        sizes[str(size)] = {
            "seed_bytes": result.seed_bytes,
            "skipped": result.skipped,
            "figures": {s: {op: asdict(f) for op, f in (result.figures(s) or {}).items()}
                        for s in SERVERS},
            "ratios": operation_ratios(result),
            "peak_rss_mib": {s: peak_rss_mib(result.runs_of(s)) for s in SERVERS},
            "geometric_mean_ratio": geometric_mean(operation_ratios(result).values()),
            "processes": [{**asdict(run), "untimed_cpu_ms": run.untimed_cpu_ms()}
                          for run in result.runs],
            "first_answers": [asdict(answer) for answer in result.first_answers],
        }
    return {"machine": machine, "versions": versions, "sizes": sizes,
            "targets": [asdict(t) for t in targets]}


def without_nan(value: Any) -> Any:
    """NaN (a figure that could not be computed) as null, since JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nan(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"sizes must be integers separated by commas: {text!r}") from error
    if not sizes or any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive integers: {text!r}")
    return sizes


def parse_servers(text: str) -> list[str]:
    servers = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [s for s in servers if s not in SERVERS]
    if unknown or not servers:
        raise argparse.ArgumentTypeError(f"servers must be among {', '.join(SERVERS)}: {text!r}")
    return servers


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=[1_000, 10_000],
                        help="entity counts, comma separated (default 1000,10000)")
    parser.add_argument("--servers", type=parse_servers, default=list(SERVERS),
                        help="ours, reference or both (default ours,reference)")
    parser.add_argument("--rounds", type=positive_int, default=2,
                        help="A B B A rounds per size: 2 per round per server (default 2)")
    parser.add_argument("--calls", type=positive_int, default=5,
                        help="calls per operation per process (default 5)")
    parser.add_argument("--reference-max-size", type=positive_int, default=100_000,
                        help="skip the reference above this size (default 100000)")
    parser.add_argument("--reference-package", default=REFERENCE_PACKAGE,
                        help="npm package spec of the reference (default the latest release)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for any one response or install (default 300)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the raw figures here")
    options = parser.parse_args(argv)
    # Checked now, not after a run of many minutes whose figures would then be lost.
    if options.json is not None and not os.access(options.json.parent.resolve(), os.W_OK):
        parser.error(f"--json: cannot write into {options.json.parent.resolve()}")
    if options.timeout <= 0:
        parser.error("--timeout must be positive")
    return options


def run_size(
    size: int, commands: dict[str, list[str]], options: argparse.Namespace, scratch: Path
) -> SizeResult:
    seed = seed_bytes(size)
    seed_file = scratch / f"seed-{size}.jsonl"
    seed_file.write_bytes(seed)
    skipped = {}
    servers = list(commands)
    if REFERENCE in servers and size > options.reference_max_size:
        servers.remove(REFERENCE)
        skipped[REFERENCE] = f"size above --reference-max-size {options.reference_max_size}"
    runs = []
    schedule = interleaved_schedule(servers, options.rounds)
    for number, server in enumerate(schedule, start=1):
        print(f"  {size:,} entities: process {number}/{len(schedule)} ({server})",
              file=sys.stderr, flush=True)
        workdir = scratch / f"{size}-{number}-{server}"
        workdir.mkdir()
        runs.append(run_one_process(server, commands[server], seed_file, size,
                                    options.calls, options.timeout, workdir))
        shutil.rmtree(workdir)
    first_answers = []
    if OURS in servers:
        workdir = scratch / f"{size}-cache"
        workdir.mkdir()
        make_cache(commands[OURS], seed_file, size, options.timeout, workdir)
        shutil.rmtree(workdir)
    for number, server in enumerate(schedule, start=1):
        print(f"  {size:,} entities: first answers {number}/{len(schedule)} ({server})",
              file=sys.stderr, flush=True)
        for row in FIRST_ANSWERS:
            workdir = scratch / f"{size}-first-{number}-{server}"
            workdir.mkdir()
            sample = run_first_answer(server, commands[server], seed_file, size, row,
                                      options.timeout, workdir)
            first_answers.append(FirstAnswer(server, row, sample))
            shutil.rmtree(workdir)
    seed_file.unlink()
    cache_beside(seed_file).unlink(missing_ok=True)
    return SizeResult(size=size, seed_bytes=len(seed), runs=runs, skipped=skipped,
                      first_answers=first_answers)


def raise_system_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    options = arguments(argv)
    # A SIGTERM must unwind through the finally blocks so no server outlives the script.
    signal.signal(signal.SIGTERM, raise_system_exit)
    atexit.register(kill_live_processes)
    machine = machine_description()
    print(f"machine: {machine['nproc']} CPUs, {machine['cpu']}; Python {machine['python']}, "
          f"Node {machine['node']}; {machine['date']}")
    results: dict[int, SizeResult] = {}
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as scratch_name:
        scratch = Path(scratch_name)
        commands: dict[str, list[str]] = {}
        versions: dict[str, str] = {}
        if OURS in options.servers:
            commands[OURS] = our_command()
            versions[OURS] = "memory_server (this checkout)"
        if REFERENCE in options.servers:
            commands[REFERENCE], version = install_reference(
                scratch / "npm", options.reference_package, options.timeout)
            versions[REFERENCE] = f"{REFERENCE_PACKAGE} {version}"
        print("servers: " + "; ".join(f"{k} = {v}" for k, v in versions.items()))
        for size in options.sizes:
            result = run_size(size, commands, options, scratch)
            results[size] = result
            print(f"\n== {size:,} entities, {2 * size:,} relations "
                  f"({result.seed_bytes / 1e6:.1f} MB seed) ==")
            print(processes_note(result))
            print(size_table(result))
            print(untimed_cpu_note(result))
            print(summary_line(result), flush=True)
    targets = evaluate_targets(results)
    print()
    print(targets_report(targets))
    if options.json:
        report = without_nan(json_report(machine, versions, results, targets))
        options.json.write_text(json.dumps(report, indent=2, allow_nan=False))
        print(f"raw figures written to {options.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        sys.exit(1)
