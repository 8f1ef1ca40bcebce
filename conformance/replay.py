"""Playing a transcript's client side against a fresh server process and judging its answers.

Every wait is bounded by the timeout; whatever happens, the server's process group is
killed when the transcript is done, so a hung server fails a transcript but never hangs
the harness.

Where the server's data goes is decided by the person running the replay, never by the
transcript (whoever wrote it, it may end with `delete_entities`):

1. A server is started only when the settings name its environment (``env``, from ``--env``)
   or say that its defaults are meant (``default_data``, from ``--default-data``); otherwise
   :class:`DataNotNamed`, before any process starts.
2. Of the header's ``env``, only entries whose value lies inside the fresh temporary directory
   (``{tmp}/...``, without ``..``) are applied: throwaway by construction. Any other entry (a
   path of the user's, a relative path, or a plain value such as ``LANG=C.UTF-8``) is left out
   and reported in :attr:`Verdict.ignored_env`; ``--env`` can give it, knowingly.
3. ``env`` entries are applied over the header's, and over the environment of the harness.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from conformance.matcher import Matcher, volatile_paths
from conformance.paths import Pattern
from conformance.report import Failure, ServerLine, describe_status
from conformance.transcript import (
    TMP_PLACEHOLDER,
    CloseStdin,
    ExpectExit,
    Send,
    SendSignal,
    Step,
    Transcript,
    exit_status,
    payload_chunks,
    server_environment,
)
from conformance.wire import LineSplitter, parse_wire_line

_STDERR_KEPT: Final = 4096
_STDERR_LINES: Final = 20


class _EndOfOutput:
    pass


_EOF: Final = _EndOfOutput()


class ServerStartError(Exception):
    pass


class DataNotNamed(ServerStartError):
    """Neither an environment nor --default-data was given: no server is started (see 1. above)."""


def header_environment(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The header entries that are applied (see 2. above), and the names of those left out."""
    applied, ignored = {}, []
    for name, value in env.items():
        rest = value.removeprefix(TMP_PLACEHOLDER)
        inside = rest != value and (rest == "" or rest.startswith("/")) and TMP_PLACEHOLDER not in rest
        if inside and ".." not in rest.split("/"):
            applied[name] = value
        else:
            ignored.append(name)
    return applied, ignored


@dataclass(frozen=True)
class ReplaySettings:
    command: tuple[str, ...]
    env: Mapping[str, str]
    volatile: tuple[Pattern, ...] = ()
    timeout: float = 10.0
    quiet_period: float = 0.3
    default_data: bool = False
    """Run the server on whatever data its defaults (and the harness's environment) name."""
    dates_by_shape: bool = True
    """Dated fields match by their shape (conformance/dated.py); False: exactly, as every other value."""


@dataclass(frozen=True)
class Verdict:
    transcript: Transcript
    failure: Failure | None
    stderr_tail: str = ""
    ignored_env: tuple[str, ...] = ()
    """Names in the header's env that were not applied (see 2. above)."""


async def replay(transcript: Transcript, settings: ReplaySettings) -> Verdict:
    if not settings.env and not settings.default_data:
        raise DataNotNamed(
            f"{transcript.source}: not started: the data the server runs on is named by the person running the "
            "replay, never by the transcript. Point it at throwaway data with --env, e.g. --env "
            "'MEMORY_FILE_PATH={tmp}/memory.jsonl' ({tmp} is a fresh directory per transcript), or pass "
            "--default-data to run it on its defaults knowingly."
        )
    matcher = Matcher(transcript.steps, volatile_paths(transcript.header.volatile, settings.volatile),
                      settings.dates_by_shape)
    from_header, ignored = header_environment(transcript.header.env)
    ignored = [name for name in ignored if name not in settings.env]
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        templates = {**from_header, **settings.env}
        env = server_environment(os.environ, templates, tmp)
        try:
            process = await anyio.open_process(settings.command, env=env, start_new_session=True)
        except OSError as error:
            raise ServerStartError(f"cannot start {settings.command[0]!r}: {error.strerror or error}") from None
        session = _Session(process, matcher, settings)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(session.read_stdout)
                tasks.start_soon(session.read_stderr)
                failure = await session.play(transcript.steps)
                tasks.cancel_scope.cancel()
        finally:
            await _kill_group(process)
    return Verdict(transcript, failure, session.stderr_tail(), tuple(ignored))


async def _kill_group(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        # Closing a pipe the dead server left with unread bytes reports the broken pipe; nothing to do.
        with anyio.move_on_after(5), contextlib.suppress(OSError, anyio.BrokenResourceError):
            await process.aclose()


class _Session:
    def __init__(self, process: Process, matcher: Matcher, settings: ReplaySettings) -> None:
        self._process = process
        self._matcher = matcher
        self._timeout = settings.timeout
        self._quiet_period = settings.quiet_period
        sender, receiver = anyio.create_memory_object_stream[ServerLine | _EndOfOutput](math.inf)
        self._sender: MemoryObjectSendStream[ServerLine | _EndOfOutput] = sender
        self._lines: MemoryObjectReceiveStream[ServerLine | _EndOfOutput] = receiver
        self._output_ended = False
        self._stdin_open = True
        self._stderr = bytearray()

    # --- the edges: the server's output streams ------------------------------------------

    async def read_stdout(self) -> None:
        assert self._process.stdout is not None
        splitter = LineSplitter()
        async for chunk in self._process.stdout:
            for line in splitter.feed(chunk):
                self._sender.send_nowait(ServerLine(parse_wire_line(line)))
        tail = splitter.take_tail()
        if tail is not None:
            self._sender.send_nowait(ServerLine(parse_wire_line(tail), newline=False))
        self._sender.send_nowait(_EOF)

    async def read_stderr(self) -> None:
        assert self._process.stderr is not None
        async for chunk in self._process.stderr:
            self._stderr += chunk
            del self._stderr[:-_STDERR_KEPT]

    def stderr_tail(self) -> str:
        lines = self._stderr.decode("utf-8", errors="replace").splitlines()
        return "\n".join(lines[-_STDERR_LINES:])

    # --- playing the transcript ----------------------------------------------------------

    async def play(self, steps: Sequence[Step]) -> Failure | None:
        for position in self._matcher.barriers():
            step = steps[position]
            failure = await self._settle() or await self._perform(step)
            if failure is not None:
                return failure
            self._matcher.performed(position)
        return await self._settle() or await self._stay_quiet()

    async def _next_line(self) -> ServerLine | None:
        """The next server line; None once the server's output has ended."""
        if self._output_ended:
            return None
        item = await self._lines.receive()
        if isinstance(item, _EndOfOutput):
            self._output_ended = True
            return None
        return item

    async def _settle(self) -> Failure | None:
        """Wait until every released expectation has arrived, failing on anything wrong."""
        with anyio.move_on_after(self._timeout):
            while self._matcher.outstanding() and (line := await self._next_line()) is not None:
                failure = self._matcher.accept(line)
                if failure is not None:
                    return failure
        if not self._matcher.outstanding():
            return self._accept_ready()
        if self._output_ended:
            status = await self._status()
            return self._missing(f"the server ended its output ({status}) before this message came")
        return self._missing(f"no such server message came within {self._timeout:g} s")

    def _accept_ready(self) -> Failure | None:
        """Judge lines that already came, so a wrong one is reported before the client acts again."""
        while not self._output_ended:
            try:
                item = self._lines.receive_nowait()
            except anyio.WouldBlock:
                return None
            if isinstance(item, _EndOfOutput):
                self._output_ended = True
                return None
            failure = self._matcher.accept(item)
            if failure is not None:
                return failure
        return None

    def _missing(self, summary: str) -> Failure:
        outstanding = self._matcher.outstanding()
        first = outstanding[0]
        more = f" ({len(outstanding) - 1} more outstanding)" if len(outstanding) > 1 else ""
        return Failure(first.line, summary + more, first.wire, first.line)

    async def _status(self) -> str:
        with anyio.move_on_after(min(self._timeout, 2.0)):
            return f"it exited with {describe_status(exit_status(await self._process.wait()))}"
        return "it is still running"

    async def _perform(self, step: Step) -> Failure | None:
        match step:
            case Send():
                return await self._send(step)
            case CloseStdin():
                await self._close_stdin()
            case SendSignal(name):
                with contextlib.suppress(ProcessLookupError):
                    self._process.send_signal(signal.Signals[name])
            case ExpectExit():
                return await self._check_exit(step)
        return None

    async def _send(self, step: Send) -> Failure | None:
        # A server that stopped reading is judged by the messages that then never come,
        # not by the race between its exit and this write.
        if not self._stdin_open:
            return None
        assert self._process.stdin is not None
        try:
            with anyio.fail_after(self._timeout):
                for chunk in payload_chunks(step.payload, step.newline):
                    if chunk:
                        await self._process.stdin.send(chunk)
        except TimeoutError:
            return Failure(step.line, f"the server did not read this client line within {self._timeout:g} s")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._stdin_open = False
        return None

    async def _close_stdin(self) -> None:
        assert self._process.stdin is not None
        self._stdin_open = False
        with contextlib.suppress(anyio.BrokenResourceError, OSError):
            await self._process.stdin.aclose()

    async def _check_exit(self, step: ExpectExit) -> Failure | None:
        expected = f"expected the server to exit with {describe_status(step.status)}"
        with anyio.move_on_after(self._timeout):
            while (line := await self._next_line()) is not None:
                failure = self._matcher.accept(line)
                if failure is not None:
                    return failure
            status = exit_status(await self._process.wait())
            if status == step.status:
                return None
            return Failure(step.line, f"{expected}; it exited with {describe_status(status)}")
        return Failure(step.line, f"{expected}; it had not exited after {self._timeout:g} s")

    async def _stay_quiet(self) -> Failure | None:
        """After the last line, a short wait catches messages the transcript does not have."""
        with anyio.move_on_after(self._quiet_period):
            while (line := await self._next_line()) is not None:
                failure = self._matcher.accept(line)
                if failure is not None:
                    return failure
        return None

