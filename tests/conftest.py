"""Shared test helpers: a server subprocess over real pipes, an in-process session, JSON-RPC and MCP schema checks.

The memory-server tests reuse these, so nothing here knows about the example server
except the `example_server` fixture at the bottom.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import hypothesis
import pytest
from anyio.abc import ObjectReceiveStream
from jsonschema import Draft202012Validator

from protocol import RequestContext, Server, Session

REPO = Path(__file__).resolve().parents[1]
# Each era's schema.json and the spec pages the conformance check cites, copied unchanged from the
# specification repository into tests/spec/ (see its README.md), so a plain clone runs every test;
# MCP_SPEC_DIR names another directory laid out the same way.
SPEC = Path(os.environ.get("MCP_SPEC_DIR") or REPO / "tests" / "spec")
LEGACY_SPEC = "2025-11-25"
MODERN_SPEC = "2026-07-28"
MODERN_VERSION = "2026-07-28"

PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

WAIT_SECONDS = 15.0
"""Generous bound on any single wait: a test that hits it has failed, a passing test never comes close."""

# No example has a deadline: how fast a test runs is the benchmarks' business (a loaded machine is
# slow), never a test's verdict. Every @settings in the suite starts from this profile.
hypothesis.settings.register_profile("suite", deadline=None)
hypothesis.settings.load_profile("suite")


# --- messages a client sends -------------------------------------------------------------------------

def request(request_id: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def modern_meta(version: Any = MODERN_VERSION) -> dict[str, Any]:
    """The _meta every modern request carries: its protocol version and (here: no) client capabilities."""
    return {PROTOCOL_VERSION: version, CLIENT_CAPABILITIES: {}}


def modern_request(request_id: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A 2026-07-28 request: the protocol version and client capabilities ride in every request's _meta."""
    return request(request_id, method, {**(params or {}), "_meta": modern_meta()})


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize(request_id: int | str = 0, version: str = LEGACY_SPEC) -> dict[str, Any]:
    return request(request_id, "initialize", {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}})


def cancel(request_id: Any) -> dict[str, Any]:
    return notification("notifications/cancelled", {"requestId": request_id, "reason": "test"})


def encode(message: dict[str, Any] | bytes) -> bytes:
    """Bytes go on the wire as given; a dict becomes one compact JSON line."""
    if isinstance(message, bytes):
        return message
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


# --- what a server may send ------------------------------------------------------------------------

def _usable_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def server_message_problem(message: Any) -> str | None:
    """Why `message` is not something a server may write to stdout, or None when it is fine.

    A server sends responses (an error may carry id null when the request's id was unusable)
    and notifications; it never sends a request.
    """
    if not isinstance(message, dict):
        return f"not a JSON object: {message!r}"
    if message.get("jsonrpc") != "2.0":
        return 'missing "jsonrpc": "2.0"'
    if "method" in message:
        if "id" in message:
            return "the server sent a request"
        if not isinstance(message["method"], str):
            return "notification method is not a string"
        if "params" in message and not isinstance(message["params"], dict):
            return "notification params is not an object"
        return None
    if ("result" in message) == ("error" in message):
        return "a response needs exactly one of result and error"
    if "result" in message:
        if not _usable_id(message.get("id")):
            return f"result with unusable id {message.get('id')!r}"
        return None if isinstance(message["result"], dict) else "result is not an object"
    if "id" not in message or not (message["id"] is None or _usable_id(message["id"])):
        return f"error with unusable id {message.get('id')!r}"
    error = message["error"]
    if not (isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)):
        return f"malformed error object {error!r}"
    return None


def parse_server_line(line: bytes) -> dict[str, Any]:
    """One stdout line as the message it must be; fails the test otherwise."""
    assert line.endswith(b"\n"), f"stdout line not newline-terminated: {line[:200]!r}"
    body = line[:-1]
    assert b"\n" not in body and b"\r" not in body, f"embedded line break: {body[:200]!r}"
    try:
        message = json.loads(body)
    except ValueError as error:
        raise AssertionError(f"stdout carries something that is not JSON: {body[:500]!r}") from error
    problem = server_message_problem(message)
    assert problem is None, f"{problem}: {body[:500]!r}"
    return message


def is_response_to(message: dict[str, Any], request_id: Any) -> bool:
    """Ids compare by type too: 1 and "1" are different requests."""
    return "method" not in message and type(message.get("id")) is type(request_id) and message.get("id") == request_id


def error_code(message: dict[str, Any]) -> int:
    assert "error" in message, f"expected an error response, got {message}"
    return message["error"]["code"]


# --- MCP schemas ---------------------------------------------------------------------------------------

@cache
def _spec_schema(spec_version: str) -> dict[str, Any]:
    return json.loads((SPEC / spec_version / "schema.json").read_text())


@cache
def _validator(spec_version: str, definition: str) -> Draft202012Validator:
    schema = _spec_schema(spec_version)
    assert definition in schema["$defs"], f"{definition} is not defined in the {spec_version} schema"
    return Draft202012Validator({**schema, "$ref": f"#/$defs/{definition}"})


def assert_schema(spec_version: str, definition: str, instance: Any) -> None:
    """`instance` conforms to `definition` of that era's schema.json; the failure lists every violation."""
    errors = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
              for e in _validator(spec_version, definition).iter_errors(instance)]
    assert not errors, f"not a valid {spec_version} {definition}: {errors} in {instance}"


LEGACY_FORBIDDEN_KEYS = ("resultType", "ttlMs", "cacheScope")


def assert_legacy_result(definition: str, result: dict[str, Any]) -> None:
    """A legacy result: valid for 2025-11-25 and bare of every modern addition."""
    assert_schema(LEGACY_SPEC, definition, result)
    for key in LEGACY_FORBIDDEN_KEYS:
        assert key not in result, f"legacy result carries modern {key}: {result}"
    assert SERVER_INFO not in result.get("_meta", {}), f"legacy result carries modern serverInfo: {result}"


def assert_modern_result(definition: str, result: dict[str, Any], *, cached: bool) -> None:
    """A modern result: valid for 2026-07-28, complete, signed with serverInfo, with cache hints when cacheable."""
    assert_schema(MODERN_SPEC, definition, result)
    assert result["resultType"] == "complete", result
    assert_schema(MODERN_SPEC, "Implementation", result["_meta"][SERVER_INFO])
    if cached:
        assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0, result
        assert result["cacheScope"] in ("public", "private"), result


# --- a server subprocess over real pipes ---------------------------------------------------------------

class StdioProcess:
    """A server subprocess on real pipes: write lines to its stdin, read its stdout lines with a timeout.

    Every stdout line is checked to be one JSON-RPC message a server may send as it is
    read; stderr is collected whole for assertions on logs.
    """

    def __init__(self, argv: list[str], *, cwd: Path = REPO, env: dict[str, str] | None = None) -> None:
        self._process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[bytes] = []  # every stdout line, in order, as read
        self._stdout: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self._process.pid

    def send(self, message: dict[str, Any] | bytes) -> None:
        """Write one message (a dict becomes a JSON line) or raw bytes exactly as given."""
        assert self._process.stdin is not None
        self._process.stdin.write(encode(message))
        self._process.stdin.flush()

    def recv(self, timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        """The next stdout message; fails the test on timeout or end of output."""
        try:
            line = self._stdout.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message from the server within {timeout} s; stderr:\n{self.stderr}") from None
        if line is None:
            self._stdout.put(None)  # keep end of output visible to later calls
            raise AssertionError(f"the server closed stdout (exit {self._process.poll()}); stderr:\n{self.stderr}")
        return parse_server_line(line)

    def call(self, message: dict[str, Any], timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        """Send a request and return its response, which must be the very next message."""
        self.send(message)
        response = self.recv(timeout)
        assert is_response_to(response, message["id"]), f"expected the response to {message}, got {response}"
        return response

    def close_stdin(self) -> None:
        assert self._process.stdin is not None
        if not self._process.stdin.closed:
            self._process.stdin.close()

    def signal(self, signum: int) -> None:
        self._process.send_signal(signum)

    def wait(self, timeout: float = WAIT_SECONDS) -> int:
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the server did not exit within {timeout} s; stderr:\n{self.stderr}") from None

    def rest(self, timeout: float = WAIT_SECONDS) -> list[dict[str, Any]]:
        """Every message still to come, up to end of output (which must come within `timeout`)."""
        messages: list[dict[str, Any]] = []
        deadline = Deadline(timeout)
        while True:
            try:
                line = self._stdout.get(timeout=deadline.remaining())
            except queue.Empty:
                raise AssertionError(f"stdout still open after {timeout} s; stderr:\n{self.stderr}") from None
            if line is None:
                self._stdout.put(None)
                return messages
            messages.append(parse_server_line(line))

    def finish(self, timeout: float = WAIT_SECONDS) -> list[dict[str, Any]]:
        """Close stdin, expect exit status 0, and return the messages written after the last one read."""
        self.close_stdin()
        remaining = self.rest(timeout)
        status = self.wait(timeout)
        assert status == 0, f"exit status {status}; stderr:\n{self.stderr}"
        return remaining

    @property
    def stderr(self) -> str:
        """What the server wrote to stderr so far (all of it once the process has exited)."""
        if self._process.poll() is not None:
            self._readers[1].join(WAIT_SECONDS)
        return b"".join(self._stderr).decode(errors="replace")

    def kill(self) -> None:
        """Stop the process if it still runs, and let the readers take in everything it wrote."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(WAIT_SECONDS)
        for reader in self._readers:
            reader.join(WAIT_SECONDS)
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None and not stream.closed:
                try:
                    stream.close()
                except BrokenPipeError:  # stdin still held unflushed bytes for a process that is gone
                    pass

    def _read_stdout(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        for line in iter(stdout.readline, b""):
            self.lines.append(line)
            self._stdout.put(line)
        self._stdout.put(None)

    def _read_stderr(self) -> None:
        stderr = self._process.stderr
        assert stderr is not None
        for chunk in iter(lambda: stderr.read1(65536), b""):
            self._stderr.append(chunk)


class Deadline:
    """A wall-clock budget shared by several blocking waits; `remaining()` fails the test once it is spent."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        left = self._end - time.monotonic()
        assert left > 0, f"gave up waiting after {self.seconds} s"
        return left


def python_server(script: Path | str, *, env: dict[str, str] | None = None) -> StdioProcess:
    """Start a Python server script from the repository with the repository importable."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return StdioProcess([sys.executable, str(script)], cwd=REPO, env=environment)


@pytest.fixture
def stdio_process() -> Iterator[Any]:
    """Factory for server subprocesses; each is killed at teardown and its whole stdout checked line by line."""
    started: list[StdioProcess] = []

    def start(script: Path | str, *, env: dict[str, str] | None = None) -> StdioProcess:
        process = python_server(script, env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        for line in list(process.lines):
            parse_server_line(line)


# --- an in-process session -----------------------------------------------------------------------------

class SessionHarness:
    """A `Session` fed bytes directly; everything it sends is kept in order and can be awaited."""

    def __init__(self, session: Session, lines: list[bytes],
                 arrivals: ObjectReceiveStream[bytes]) -> None:
        self.session = session
        self.lines = lines
        self._arrivals = arrivals

    def send(self, message: dict[str, Any] | bytes) -> None:
        self.session.feed(encode(message))

    async def recv(self, timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return parse_server_line(await self._arrivals.receive())

    async def call(self, message: dict[str, Any], timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        self.send(message)
        response = await self.recv(timeout)
        assert is_response_to(response, message["id"]), f"expected the response to {message}, got {response}"
        return response

    def pending(self) -> list[dict[str, Any]]:
        """Messages already sent but not yet received, without waiting."""
        messages = []
        while True:
            try:
                messages.append(parse_server_line(self._arrivals.receive_nowait()))
            except anyio.WouldBlock:
                return messages

    async def finish(self) -> list[dict[str, Any]]:
        """End of input and close, as the stdio runner does; return what was sent meanwhile."""
        self.session.feed_eof()
        await self.session.close()
        return self.pending()


@asynccontextmanager
async def open_session(server: Server, **options: Any) -> AsyncIterator[SessionHarness]:
    lines: list[bytes] = []
    outbox, arrivals = anyio.create_memory_object_stream[bytes](math.inf)

    def send(line: bytes) -> None:
        lines.append(line)
        outbox.send_nowait(line)

    async with Session(server, send, **options) as session:
        harness = SessionHarness(session, lines, arrivals)
        try:
            yield harness
        finally:
            await session.close(grace=0)  # requests a test left in flight are cancelled, not awaited
    outbox.close()
    arrivals.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- work shared by the processes of one run ----------------------------------------------------------------

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers `-n auto` (pyproject's addopts) starts: two per CPU this process may use. A
    test spends most of its time waiting on the servers it starts (their start-up, pipes, sockets and
    timers), so one worker per CPU leaves the CPUs half idle. At most 16: each worker's servers load
    the model (some 150 MB each)."""
    return min(2 * len(os.sched_getaffinity(0)), 16)


@contextmanager
def one_at_a_time(name: str, where: Path | None = None) -> Iterator[None]:
    """Held by one process at a time: the run's xdist workers, and any other run on this machine (or,
    given `where`, any process using that folder). For work two processes must never do at once (an
    npm install into one folder, apt-get) or that one does for all."""
    with open((where or Path(tempfile.gettempdir())) / f"kg-memory-tests-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # let go when the file closes, also if the process dies
        yield


def apt_installed(package: str, *programs: str) -> str | None:
    """The first of `programs` on PATH, Debian's `package` installed with apt-get first when none is
    and this process may (root, apt present); else None. One process at a time (dpkg's lock)."""
    def found() -> str | None:
        return next((path for program in programs if (path := shutil.which(program))), None)

    with one_at_a_time("apt-get"):
        if found() is None and os.geteuid() == 0 and shutil.which("apt-get"):
            environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", package]):
                if subprocess.run(command, env=environment, capture_output=True, timeout=900).returncode != 0:
                    break
        return found()


def shared_directory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str, *,
                     across_runs: bool) -> Path:
    """A folder every xdist worker of this run sees, for something costly made once (under
    `one_at_a_time`): in pytest's cache, kept for later runs, when `across_runs` and there is a cache
    (something from outside, such as an npm package); else in the run's temporary root (something
    made from this checkout)."""
    cache = getattr(request.config, "cache", None)
    if across_runs and cache is not None:
        return Path(cache.mkdir(name))
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # each worker's base is a folder of the run's
    folder = root / name
    folder.mkdir(exist_ok=True)
    return folder


# --- what the servers a test starts run with ------------------------------------------------------------

SHIPPED_SWITCHES = ("MEMORY_DATES", "MEMORY_SEMANTIC")
"""Settings whose default is what the README installs (dates on, the model on): a value left in the
shell that runs the suite must not change what the tests hold the server to."""


@pytest.fixture(autouse=True)
def shipped_configuration(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every server a test starts (servers inherit the test's environment) runs as shipped: dates
    and the model on. A test marked `reference_exact` compares byte for byte with the reference's
    answers or lines, which carry no dates: its servers run with MEMORY_DATES=off. A test that
    sets either switch itself (env=, monkeypatch) still does so after this."""
    for name in SHIPPED_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    if request.node.get_closest_marker("reference_exact") is not None:
        monkeypatch.setenv("MEMORY_DATES", "off")


# --- the example server ---------------------------------------------------------------------------------

EXAMPLE_SERVER = REPO / "tests" / "example_server.py"


@pytest.fixture
def example_server(stdio_process: Any) -> StdioProcess:
    return stdio_process(EXAMPLE_SERVER)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts (append them): killed if still running, and reaped, at its end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(60)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def python(code: str, *args: str) -> subprocess.Popen[str]:
    """A Python process running `code` with this checkout importable, speaking over pipes."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def expect_line(process: subprocess.Popen[str], expected: str) -> None:
    """The next line `process` prints is `expected`; otherwise it is killed and its stderr shown."""
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if line != expected:
        process.kill()
        raise AssertionError(f"expected {expected!r}, got {line!r}; stderr: {process.communicate()[1]}")


def add_waiting_tool(server: Server, seen: list[RequestContext]) -> None:
    """A tool "wait" that notes its request context and waits in a worker thread until the request
    is cancelled (the handler watches `context.cancelled`, as a long-running tool would)."""

    @server.tool("wait", description="Waits in a worker thread until cancelled.", input_schema={"type": "object"})
    async def wait(arguments: dict[str, Any], context: RequestContext) -> str:
        seen.append(context)

        def until_cancelled() -> None:
            while not context.cancelled:
                time.sleep(0.01)

        await anyio.to_thread.run_sync(until_cancelled, abandon_on_cancel=True)
        return "never"
