"""Benchmark: what OAuth costs a request, against the shared token.

Run from the repository root (the test extra installs what it needs):

    .venv/bin/python benchmarks/bench_oauth.py                  # 1,000 entities, 1 and 8 clients
    .venv/bin/python benchmarks/bench_oauth.py --size 10000 --calls 100 --json bench-oauth.json

1. Validation alone: `ProtectedResource.authenticate`, as the endpoint calls it for every request,
   the issuer's key already cached (RS256 and ES256): a token seen for the first time (PyJWT checks
   its signature and claims; 500 distinct tokens), and a token sent again (remembered: statement 8
   of protocol/http/oauth.py); beside them the shared token's constant-time comparison.
   Microseconds per call, the median of `--rounds` rounds.
2. Throughput: `mcp-server-memory --http` on a copy of the same seed file, once with
   MCP_MEMORY_HTTP_TOKEN and once with OAuth (an identity provider made here, on loopback, as in
   tests/oauth_helpers.py), twice each (A B B A), driven by benchmarks/bench_http.py's client and
   cycle of calls (open_nodes, search_nodes, add_observations), each client with its own token.
   Calls per second of wall time across all clients, pooled over both runs.

The exit code is 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
from bench_http import OPERATIONS, Caller, free_port, workload  # noqa: E402
from bench_memory import seed_bytes  # noqa: E402
from oauth_helpers import TestIdP  # noqa: E402

from protocol.http.oauth import Grant, ProtectedResource  # noqa: E402
from protocol.http.security import token_matches  # noqa: E402

SHARED, OAUTH = "token", "oauth"
SHARED_TOKEN = "bench-shared-token-" + "x" * 40


def validation(idp: TestIdP, rounds: int) -> dict[str, float]:
    """Microseconds per check, cached key (statement 1 of the module docstring)."""
    resource_url = "http://127.0.0.1:1/mcp"
    resource = ProtectedResource(issuer=idp.issuer, resource=resource_url, scopes_supported=["memory:read"],
                                 jwks_url=idp.jwks_url)
    figures: dict[str, float] = {}
    for name, key in (("RS256", idp.rsa), ("ES256", idp.ec)):
        header = f"Bearer {idp.mint(resource_url, key=key)}"
        fresh = [[f"Bearer {idp.mint(resource_url, key=key)}" for _ in range(100)] for _ in range(5)]

        async def check(header: str = header, fresh: list[list[str]] = fresh) -> tuple[list[float], list[float]]:
            assert isinstance(await resource.authenticate(header), Grant)  # fetches the keys once
            first = []
            for batch in fresh:
                began = time.perf_counter()
                for each in batch:
                    await resource.authenticate(each)
                first.append((time.perf_counter() - began) / len(batch) * 1e6)
            again = []
            for _ in range(rounds):
                began = time.perf_counter()
                for _ in range(1000):
                    await resource.authenticate(header)
                again.append((time.perf_counter() - began) / 1000 * 1e6)
            return first, again
        first, again = anyio.run(check)
        figures[f"{name}, first sight"] = statistics.median(first)
        figures[f"{name}, sent again"] = statistics.median(again)
    shared = SHARED_TOKEN.encode()
    per_round = []
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(1000):
            token_matches(f"Bearer {SHARED_TOKEN}", shared)
        per_round.append((time.perf_counter() - began) / 1000 * 1e6)
    figures["shared token"] = statistics.median(per_round)
    return figures


def start(kind: str, memory_file: Path, idp: TestIdP) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCP_MEMORY_")}
    env.update({"PYTHONPATH": str(REPO), "MEMORY_FILE_PATH": str(memory_file)})
    if kind == SHARED:
        env["MCP_MEMORY_HTTP_TOKEN"] = SHARED_TOKEN
    else:
        env.update({"MCP_MEMORY_OAUTH_ISSUER": idp.issuer, "MCP_MEMORY_OAUTH_JWKS_URL": idp.jwks_url,
                    "MCP_MEMORY_PUBLIC_URL": f"http://127.0.0.1:{port}"})
    process = subprocess.Popen([sys.executable, "-m", "memory_server", "--http", f"127.0.0.1:{port}"], env=env,
                               cwd=memory_file.parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    import socket
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


async def measure(url: str, authorization: list[str], size: int, calls: int) -> float:
    """Calls per second of `len(authorization)` clients, each sending its own Authorization."""
    callers = []
    for number, header in enumerate(authorization):
        caller = Caller(url, number)
        caller.headers["authorization"] = header
        await caller.open()
        callers.append(caller)

    async def run(caller: Caller) -> None:
        for step in range(calls):
            await caller.call(*workload(size, caller.number, step, OPERATIONS))

    began = time.perf_counter()
    async with anyio.create_task_group() as tasks:
        for caller in callers:
            tasks.start_soon(run, caller)
    wall = time.perf_counter() - began
    for caller in callers:
        await caller.close()
    return len(callers) * calls / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--calls", type=int, default=60, help="calls per client")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of 1,000 validations")
    parser.add_argument("--json")
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    idp = TestIdP()
    report: dict[str, Any] = {}
    print(f"{platform.python_version()} on {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    try:
        report["validation_us"] = validation(idp, args.rounds)
        print("\n| check | µs per request (median) |\n|---|---:|")
        for name, micros in report["validation_us"].items():
            print(f"| {name} | {micros:.1f} |")
        workdir = Path(tempfile.mkdtemp(prefix="bench-oauth-"))
        seed = seed_bytes(args.size)
        rates: dict[tuple[str, int], list[float]] = {}
        try:
            for round_number, kind in enumerate((SHARED, OAUTH, OAUTH, SHARED)):
                memory_file = workdir / f"{round_number}-{kind}" / "memory.jsonl"
                memory_file.parent.mkdir()
                memory_file.write_bytes(seed)
                process, url = start(kind, memory_file, idp)
                resource = url
                try:
                    def headers(count: int, kind: str = kind, resource: str = resource) -> list[str]:
                        if kind == SHARED:
                            return [f"Bearer {SHARED_TOKEN}"] * count
                        return [f"Bearer {idp.mint(resource, sub=f'bench-{n}', exp=int(time.time()) + 3600)}"
                                for n in range(count)]
                    anyio.run(measure, url, headers(1), args.size, 3)  # warm-up, untimed
                    for level in levels:
                        rates.setdefault((kind, level), []).append(
                            anyio.run(measure, url, headers(level), args.size, args.calls))
                finally:
                    process.terminate()
                    process.wait(30)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"\n{args.size} entities, {args.calls} calls per client\n\n| clients | shared token calls/s | "
              "OAuth calls/s | OAuth / token |\n|---:|---:|---:|---:|")
        for level in levels:
            shared, oauth = statistics.mean(rates[(SHARED, level)]), statistics.mean(rates[(OAUTH, level)])
            report[f"throughput-{level}"] = {"token": shared, "oauth": oauth, "ratio": oauth / shared}
            print(f"| {level} | {shared:.0f} | {oauth:.0f} | {oauth / shared:.3f} |")
    finally:
        idp.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
