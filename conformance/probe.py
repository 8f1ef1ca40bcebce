"""One fresh server process for one protocol check: send lines, await answers, keep the exchange.

Every wait is bounded; the process group is killed when the check is done, whatever happened.
What the server writes is read line by line as it comes and kept, with what the client sent,
in wire order: that exchange is the evidence a check's verdict points to.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from conformance.transcript import server_environment
from conformance.wire import JsonLine, LineSplitter, WireLine, dumps, parse_wire_line

_STDERR_KEPT: Final = 4096
# A server's first answer also waits for it to start (an interpreter importing a large SDK on a busy machine).
STARTUP: Final = 15.0


class ServerStartError(Exception):
    pass


@dataclass(frozen=True)
class Line:
    """One line of an exchange: ``c2s`` from the check, ``s2c`` from the server, or ``note``."""

    direction: str
    wire: WireLine


def value_of(line: Line) -> Any:
    return line.wire.value if isinstance(line.wire, JsonLine) else None


def is_response(message: Any, request_id: Any = ...) -> bool:
    """A response (no method); when ``request_id`` is given, to that id (1 and "1" differ)."""
    if not isinstance(message, dict) or "method" in message or not ("result" in message or "error" in message):
        return False
    if request_id is ...:
        return True
    answered = message.get("id")
    return type(answered) is type(request_id) and answered == request_id


class Probe:
    """The check's side of a fresh server process."""

    def __init__(self, process: Process, timeout: float, tasks: TaskGroup) -> None:
        self._process = process
        self.timeout = timeout
        self.exchange: list[Line] = []
        sender, receiver = anyio.create_memory_object_stream[Line | None](math.inf)
        self._sender: MemoryObjectSendStream[Line | None] = sender
        self._arrivals: MemoryObjectReceiveStream[Line | None] = receiver
        self._ended = False
        self._started = False
        self._stdin_open = True
        self.stderr = bytearray()
        tasks.start_soon(self._read_stdout)
        tasks.start_soon(self._read_stderr)

    async def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        splitter = LineSplitter()
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for chunk in self._process.stdout:
                for data in splitter.feed(chunk):
                    self._sender.send_nowait(Line("s2c", parse_wire_line(data)))
            tail = splitter.take_tail()
            if tail is not None:
                self._sender.send_nowait(Line("s2c", parse_wire_line(tail)))
        self._sender.send_nowait(None)

    async def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for chunk in self._process.stderr:
                self.stderr += chunk
                del self.stderr[:-_STDERR_KEPT]

    # --- the client's side --------------------------------------------------------------

    async def send(self, line: dict[str, Any] | bytes) -> None:
        data = line if isinstance(line, bytes) else dumps(line).encode("utf-8")
        self.exchange.append(Line("c2s", parse_wire_line(data) if isinstance(line, bytes) else JsonLine(line)))
        if not self._stdin_open:
            return
        assert self._process.stdin is not None
        try:
            with anyio.fail_after(self.timeout):
                await self._process.stdin.send(data + b"\n")
        except (TimeoutError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._stdin_open = False

    async def close_stdin(self) -> None:
        assert self._process.stdin is not None
        self._stdin_open = False
        with contextlib.suppress(anyio.BrokenResourceError, OSError):
            await self._process.stdin.aclose()

    async def request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send a request and return its response; None if none came in time."""
        await self.send(message)
        return await self.response(message["id"])

    async def response(self, request_id: Any = ...) -> dict[str, Any] | None:
        """The next response (to ``request_id`` if given) within the timeout; other lines are kept."""
        with anyio.move_on_after(self._wait()):
            while (line := await self._next()) is not None:
                if is_response(value_of(line), request_id):
                    return value_of(line)
        return None

    async def line(self) -> Line | None:
        """The next server line within the timeout; None on timeout or once the output has ended."""
        with anyio.move_on_after(self._wait()):
            return await self._next()
        return None

    async def quiet(self, seconds: float) -> list[Line]:
        """Whatever the server writes within ``seconds``."""
        came: list[Line] = []
        with anyio.move_on_after(seconds):
            while (line := await self._next()) is not None:
                came.append(line)
        return came

    @property
    def output_ended(self) -> bool:
        return self._ended

    def _wait(self) -> float:
        return self.timeout if self._started else max(self.timeout, STARTUP)

    async def _next(self) -> Line | None:
        """The next server line, kept in the exchange; None once the server's output has ended."""
        if self._ended:
            return None
        line = await self._arrivals.receive()
        if line is None:
            self._ended = True
            return None
        self._started = True
        self.exchange.append(line)
        return line

    async def exit_status(self, seconds: float) -> int | None:
        """The process's exit status once its output has ended, or None if it still runs after ``seconds``."""
        with anyio.move_on_after(seconds):
            while await self._next() is not None:
                pass
            return await self._process.wait()
        return None

    def note(self, text: str) -> None:
        self.exchange.append(Line("note", JsonLine(text)))


@contextlib.asynccontextmanager
async def fresh_server(command: Sequence[str], env: Mapping[str, str], timeout: float) -> AsyncIterator[Probe]:
    """A new server process in its own process group, killed (with its group) on the way out."""
    with tempfile.TemporaryDirectory(prefix="conformance-check-") as tmp:
        try:
            process = await anyio.open_process(
                list(command), env=server_environment(os.environ, env, tmp), start_new_session=True
            )
        except OSError as error:
            raise ServerStartError(f"cannot start {command[0]!r}: {error.strerror or error}") from None
        try:
            async with anyio.create_task_group() as tasks:
                yield Probe(process, timeout, tasks)
                tasks.cancel_scope.cancel()
        finally:
            await _kill_group(process)


async def _kill_group(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.move_on_after(5), contextlib.suppress(OSError, anyio.BrokenResourceError):
            await process.aclose()
