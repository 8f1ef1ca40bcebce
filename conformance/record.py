"""The recording proxy: a client launches it in place of a stdio server.

Bytes are forwarded both ways as soon as they are read and unchanged; the server's stderr
is the proxy's own (inherited, never touched). Each complete line is written to the
transcript before it is forwarded, so a reply can never precede its cause in the file,
and every transcript line is flushed at once, so a killed recording is still readable.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import Process
from anyio.lowlevel import EventLoopToken
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from conformance.session import SessionFacts, era_of, observe_client, observe_server
from conformance.transcript import (
    CloseStdin,
    Expect,
    ExpectExit,
    Header,
    Payload,
    RepeatLine,
    Send,
    SendSignal,
    Step,
    exit_status,
    render_header,
    render_step,
    server_environment,
)
from conformance.wire import LineSplitter, parse_wire_line

# The signals a client uses to stop a server; each is recorded, then passed on.
FORWARDED_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_READ_SIZE: Final = 1 << 16
# Chunks buffered between the proxy and its client threads: enough to keep bytes moving,
# few enough that a slow side still holds the other back, as a direct pipe would.
_CHUNKS_IN_FLIGHT: Final = 16
_RUN_WORTH_COMPACTING: Final = 1 << 12


class RecordStartError(Exception):
    pass


class TranscriptWriter:
    def __init__(self, file: TextIO, header: Header) -> None:
        self._file = file
        self.header = header
        self.facts = SessionFacts()
        self._line(render_header(header))

    def client_line(self, data: bytes, newline: bool = True) -> None:
        payload = client_payload(data)
        if not isinstance(payload, RepeatLine):
            self.facts = observe_client(self.facts, payload)
        self.step(Send(payload, newline))

    def server_line(self, data: bytes, newline: bool = True) -> None:
        wire = parse_wire_line(data)
        self.facts = observe_server(self.facts, wire)
        self.step(Expect(wire, newline))

    def step(self, step: Step) -> None:
        self._line(render_step(step))

    def _line(self, text: str) -> None:
        self._file.write(text + "\n")
        self._file.flush()


def client_payload(data: bytes) -> Payload:
    """A long run of one character, a client's over-long-line probe, is kept as a generated line."""
    if len(data) >= _RUN_WORTH_COMPACTING and data[:1].isascii() and data.count(data[:1]) == len(data):
        return RepeatLine(data[:1].decode("ascii"), len(data))
    return parse_wire_line(data)


def final_header(header: Header, facts: SessionFacts) -> Header:
    """The header as it can only be written once the session is over."""
    recorded = dict(header.recorded)
    recorded |= {"client": dict(facts.client)} if facts.client else {}
    recorded |= {"server": dict(facts.server)} if facts.server else {}
    description = header.description or _default_description(facts)
    return replace(header, era=era_of(facts), description=description, recorded=recorded)


def _default_description(facts: SessionFacts) -> str:
    client = (facts.client or {}).get("name", "an unnamed client")
    server = (facts.server or {}).get("name", "an unnamed server")
    return f"{era_of(facts)}-era session of {client} with {server}"


def rewrite_header(path: Path, header: Header) -> None:
    """Replace the first line, copying the rest to a sibling file that then takes its place."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with open(path, "rb") as old, os.fdopen(fd, "wb") as new:
            shutil.copymode(path, temporary)
            old.readline()
            new.write(render_header(header).encode("utf-8") + b"\n")
            while chunk := old.read(_READ_SIZE):
                new.write(chunk)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def proxy_exit_code(returncode: int) -> int:
    """The shell's convention for a child ended by a signal."""
    return returncode if returncode >= 0 else 128 - returncode


def _read_client(fd: int, token: EventLoopToken, chunks: MemoryObjectSendStream[bytes]) -> None:
    """Blocking reads of the client's stdin, on a daemon thread so that a client which never
    closes it cannot keep the proxy alive once the server has gone, and no flag of a file
    description the proxy shares with others (a terminal, say) is ever changed."""
    try:
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, _READ_SIZE):
                anyio.from_thread.run(chunks.send, chunk, token=token)
        anyio.from_thread.run_sync(chunks.close, token=token)
    except (anyio.RunFinishedError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the proxy is done with the client


def _write_client(fd: int, token: EventLoopToken, chunks: MemoryObjectReceiveStream[bytes]) -> None:
    """Blocking writes to the client's stdout, on a daemon thread for the same reasons."""
    try:
        with contextlib.suppress(OSError):
            while True:
                try:
                    chunk = anyio.from_thread.run(chunks.receive, token=token)
                except anyio.EndOfStream:
                    return
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
        # The client stopped reading: refuse further output, so the proxy stops offering it.
        anyio.from_thread.run_sync(chunks.close, token=token)
    except anyio.RunFinishedError:
        pass


async def record(out: Path, description: str, command: Sequence[str], env_templates: Mapping[str, str]) -> int:
    header = Header(
        era="none",
        description=description,
        recorded={
            "with": "mcp-conformance record",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": list(command),
        },
        env=dict(env_templates),
    )
    with tempfile.TemporaryDirectory(prefix="conformance-record-") as tmp:
        with open(out, "w", encoding="utf-8") as file:
            transcript = TranscriptWriter(file, header)
            try:
                process = await anyio.open_process(
                    command,
                    stderr=None,
                    env=server_environment(os.environ, env_templates, tmp),
                    start_new_session=True,
                )
            except OSError as error:
                file.close()
                out.unlink()
                raise RecordStartError(f"cannot start {command[0]!r}: {error.strerror or error}") from None
            async with process:
                returncode = await _proxy(process, transcript)
        rewrite_header(out, final_header(transcript.header, transcript.facts))
    return proxy_exit_code(returncode)


async def _proxy(process: Process, transcript: TranscriptWriter) -> int:
    token = anyio.lowlevel.current_token()
    from_client, client_chunks = anyio.create_memory_object_stream[bytes](_CHUNKS_IN_FLIGHT)
    to_client, server_chunks = anyio.create_memory_object_stream[bytes](_CHUNKS_IN_FLIGHT)
    client_reader = threading.Thread(target=_read_client, args=(sys.stdin.fileno(), token, from_client))
    client_writer = threading.Thread(target=_write_client, args=(sys.stdout.fileno(), token, server_chunks))
    client_reader.daemon = client_writer.daemon = True
    with anyio.open_signal_receiver(*FORWARDED_SIGNALS) as signals:
        async with anyio.create_task_group() as tasks:
            client_reader.start()
            client_writer.start()
            client_lines = _ClientLines(transcript)
            tasks.start_soon(_client_to_server, client_chunks, process, client_lines)
            tasks.start_soon(_forward_signals, signals, process, transcript)
            await _server_to_client(process, to_client, transcript)
            returncode = await process.wait()
            # A line the client was still writing when the server ended was (partly) sent to it.
            client_lines.end()
            transcript.step(ExpectExit(exit_status(returncode)))
            # Everything the server said reaches the client before the proxy exits.
            await anyio.to_thread.run_sync(client_writer.join)
            tasks.cancel_scope.cancel()
    return returncode


class _ClientLines:
    """The client's bytes as transcript lines; an unterminated last line is written at the end."""

    def __init__(self, transcript: TranscriptWriter) -> None:
        self._transcript = transcript
        self._splitter = LineSplitter()

    def feed(self, chunk: bytes) -> None:
        for line in self._splitter.feed(chunk):
            self._transcript.client_line(line)

    def end(self) -> None:
        tail = self._splitter.take_tail()
        if tail is not None:
            self._transcript.client_line(tail, newline=False)

    def closed(self) -> None:
        self.end()
        self._transcript.step(CloseStdin())


async def _client_to_server(
    chunks: MemoryObjectReceiveStream[bytes], process: Process, client_lines: _ClientLines
) -> None:
    assert process.stdin is not None
    server_reading = True
    async for chunk in chunks:
        client_lines.feed(chunk)
        if server_reading:
            try:
                await process.stdin.send(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                server_reading = False
    client_lines.closed()
    with contextlib.suppress(anyio.BrokenResourceError, OSError):
        await process.stdin.aclose()


async def _server_to_client(
    process: Process, to_client: MemoryObjectSendStream[bytes], transcript: TranscriptWriter
) -> None:
    assert process.stdout is not None
    splitter = LineSplitter()
    async with to_client:
        async for chunk in process.stdout:
            for line in splitter.feed(chunk):
                transcript.server_line(line)
            with contextlib.suppress(anyio.BrokenResourceError):
                await to_client.send(chunk)
        tail = splitter.take_tail()
        if tail is not None:
            transcript.server_line(tail, newline=False)


async def _forward_signals(
    signals: AsyncIterator[int], process: Process, transcript: TranscriptWriter
) -> None:
    async for signum in signals:
        transcript.step(SendSignal(signal.Signals(signum).name))
        try:
            process.send_signal(signal.Signals(signum))
        except ProcessLookupError:
            pass
