"""A client that writes hand-written lines through `python -m conformance record` and checks
each answer against what the protocol demands before the transcript is kept.

A script is a list of `Say` steps, each one client line and the answers it must draw
before the next line goes out, ending with how the session ends (`CloseStdin` or
`Signal`) and the answers that brings. Answers are checked as a set: a response and a
notification caused by one line may come in either order. A wrong, missing or extra
answer stops the recording with a report, so a maintainer who re-records after a change
in the server cannot turn a regression into the expected behaviour by accident.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from corpus_tools import CORPUS, REPO, check_replays, interpreter_env, record_command

from conformance.paths import parse_pattern
from conformance.transcript import (
    RepeatLine,
    Send,
    Transcript,
    parse_header,
    parse_step,
    payload_chunks,
    render_header,
    render_step,
)

WAIT_SECONDS: Final = 30.0
PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
LEGACY_VERSION: Final = "2025-11-25"
MODERN_VERSION: Final = "2026-07-28"
GRAPH: Final = "memory://knowledge-graph"
CLIENT: Final = {"name": "conformance-corpus", "version": "1"}
MODERN_META: Final = {PROTOCOL_VERSION: MODERN_VERSION, CLIENT_INFO: CLIENT, CLIENT_CAPABILITIES: {}}


# --- client messages ---------------------------------------------------------------------------


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    return message | ({"params": params} if params is not None else {})


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return request(request_id, method, {**(params or {}), "_meta": MODERN_META})


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    return message | ({"params": params} if params is not None else {})


def initialize(request_id: Any, version: str = LEGACY_VERSION) -> dict[str, Any]:
    return request(request_id, "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT})


def tool(name: str, arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def cancel(request_id: Any) -> dict[str, Any]:
    return notification("notifications/cancelled", {"requestId": request_id, "reason": "the user moved on"})


# --- what an answer must be ----------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One expected server message: a description for reports and the test it must pass."""

    what: str
    test: Callable[[dict[str, Any]], bool]

    def __repr__(self) -> str:
        return self.what


def _same_id(message: dict[str, Any], request_id: Any) -> bool:
    # 1 and "1" are different requests, and true is not 1.
    return (
        "method" not in message and "id" in message
        and type(message["id"]) is type(request_id) and message["id"] == request_id
    )


def _has(container: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(key in container and container[key] == value for key, value in expected.items())


def result(request_id: Any, exactly: dict[str, Any] | None = None, lacks: Sequence[str] = (), **fields: Any) -> Answer:
    """A successful response: `exactly` the whole result, `fields` some of its keys, `lacks` keys it must not have."""

    def test(message: dict[str, Any]) -> bool:
        body = message.get("result")
        if not _same_id(message, request_id) or not isinstance(body, dict) or body.get("isError"):
            return False
        if exactly is not None and body != exactly:
            return False
        return _has(body, fields) and not any(key in body for key in lacks)

    shown = f"exactly {exactly}" if exactly is not None else ", ".join(f"{k}={v!r}" for k, v in fields.items())
    return Answer(f"result for id {request_id!r} ({shown})", test)


def structured(request_id: Any, **fields: Any) -> Answer:
    """A successful tool result whose structuredContent has these fields (and maybe more)."""

    def test(message: dict[str, Any]) -> bool:
        body = message.get("result")
        return (_same_id(message, request_id) and isinstance(body, dict) and not body.get("isError")
                and isinstance(body.get("structuredContent"), dict) and _has(body["structuredContent"], fields))

    return Answer(f"tool result for id {request_id!r} with {fields}", test)


def error(request_id: Any, code: int, data: Any = None, says: Sequence[str] = ()) -> Answer:
    """An error response with this id and code, this data (when given) and a message containing `says`."""

    def test(message: dict[str, Any]) -> bool:
        body = message.get("error")
        if not _same_id(message, request_id) or not isinstance(body, dict):
            return False
        if body.get("code") != code or not isinstance(body.get("message"), str):
            return False
        if data is not None and body.get("data") != data:
            return False
        return all(fragment in body["message"] for fragment in says)

    return Answer(f"error {code} for id {request_id!r}" + (f" with data {data}" if data is not None else ""), test)


def tool_error(request_id: Any, *says: str) -> Answer:
    """A tool result with isError: true whose text contains every fragment of `says`."""

    def test(message: dict[str, Any]) -> bool:
        body = message.get("result")
        if not _same_id(message, request_id) or not isinstance(body, dict) or body.get("isError") is not True:
            return False
        text = " ".join(item.get("text", "") for item in body.get("content", []))
        return all(fragment in text for fragment in says)

    return Answer(f"tool error for id {request_id!r} saying {list(says)}", test)


def updated(subscription: Any = None) -> Answer:
    """notifications/resources/updated for the graph: legacy (untagged) or on the listen `subscription`."""

    def test(message: dict[str, Any]) -> bool:
        params = message.get("params", {})
        if message.get("method") != "notifications/resources/updated" or "id" in message or params.get("uri") != GRAPH:
            return False
        tag = params.get("_meta", {}).get(SUBSCRIPTION_ID, None)
        return tag == subscription and type(tag) is type(subscription)

    return Answer(f"resources/updated for the graph (subscription {subscription!r})", test)


def acknowledged(subscription: Any, honoured: dict[str, Any]) -> Answer:
    def test(message: dict[str, Any]) -> bool:
        params = message.get("params", {})
        tag = params.get("_meta", {}).get(SUBSCRIPTION_ID)
        return (message.get("method") == "notifications/subscriptions/acknowledged" and "id" not in message
                and tag == subscription and type(tag) is type(subscription)
                and params.get("notifications") == honoured)

    return Answer(f"acknowledgement of listen {subscription!r} honouring {honoured}", test)


def closed(subscription: Any) -> Answer:
    """A listen's graceful closure: its response, a complete result carrying its id as subscription id."""

    def test(message: dict[str, Any]) -> bool:
        body = message.get("result")
        return (_same_id(message, subscription) and isinstance(body, dict) and body.get("resultType") == "complete"
                and body.get("_meta", {}).get(SUBSCRIPTION_ID) == subscription)

    return Answer(f"graceful closure of listen {subscription!r}", test)


# --- a script ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Say:
    line: dict[str, Any] | bytes | RepeatLine
    answers: tuple[Answer, ...] = ()
    note: str = ""
    newline: bool = True

    def data(self) -> bytes:
        match self.line:
            case dict():
                body = json.dumps(self.line, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            case RepeatLine():
                body = b"".join(payload_chunks(self.line, newline=False))
            case bytes():
                body = self.line
        if b"\n" in body:
            raise ValueError(f"one Say is one line: {body[:80]!r}")
        return body + (b"\n" if self.newline else b"")


def say(line: dict[str, Any] | bytes | RepeatLine, *answers: Answer, note: str = "", newline: bool = True) -> Say:
    return Say(line, answers, note, newline)


@dataclass(frozen=True)
class CloseStdin:
    answers: tuple[Answer, ...] = ()


@dataclass(frozen=True)
class Signal:
    name: str
    answers: tuple[Answer, ...] = ()


@dataclass(frozen=True)
class Script:
    file: str
    description: str
    steps: tuple[Say, ...]
    end: CloseStdin | Signal = field(default_factory=CloseStdin)
    volatile: tuple[str, ...] = ()


class ScriptFailed(SystemExit):
    pass


def play(script: Script, out: Path, server: Sequence[str]) -> None:
    """Record `script` against `server` into `out`, checking every answer on the way."""
    proxy = subprocess.Popen(
        record_command(out, script.description, server), cwd=REPO, env={**os.environ, **interpreter_env()},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert proxy.stdin is not None and proxy.stdout is not None
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=_pump, args=(proxy.stdout, lines), daemon=True).start()
    try:
        for step in script.steps:
            proxy.stdin.write(step.data())
            proxy.stdin.flush()
            after = step.note or repr(step.line)[:120]
            _check(script, after, step.answers, [_next(script, after, lines) for _ in step.answers])
        if isinstance(script.end, Signal):
            proxy.send_signal(signal.Signals[script.end.name])
        else:
            proxy.stdin.close()
        rest = list(iter(lambda: _next(script, "the end of the session", lines), b""))
        _check(script, "the end of the session", script.end.answers, rest)
        status = proxy.wait(timeout=WAIT_SECONDS)
        if status != 0:
            raise ScriptFailed(f"{script.file}: the server exited with status {status}, expected 0")
    finally:
        _stop(proxy)


def _stop(proxy: subprocess.Popen[bytes]) -> None:
    """End of input first, which the proxy passes on to the server; a kill only if that is not enough."""
    assert proxy.stdin is not None
    with suppress(OSError):
        proxy.stdin.close()
    try:
        proxy.wait(timeout=WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        proxy.kill()
        proxy.wait()


def _pump(stream: Any, lines: queue.Queue[bytes]) -> None:
    for line in iter(stream.readline, b""):
        lines.put(line)
    lines.put(b"")


def _next(script: Script, after: str, lines: queue.Queue[bytes]) -> bytes:
    try:
        return lines.get(timeout=WAIT_SECONDS)
    except queue.Empty:
        raise ScriptFailed(f"{script.file}: after {after}: no server line within {WAIT_SECONDS:g} s") from None


def _check(script: Script, after: str, answers: Sequence[Answer], received: list[bytes]) -> None:
    messages = []
    for line in received:
        if line == b"":
            raise ScriptFailed(f"{script.file}: after {after}: the server ended its output; still expected {answers}")
        try:
            messages.append(json.loads(line))
        except ValueError:
            raise ScriptFailed(f"{script.file}: after {after}: the server wrote a non-JSON line: {line!r}") from None
    unmatched = list(messages)
    for answer in answers:
        found = next((message for message in unmatched if answer.test(message)), None)
        if found is None:
            raise ScriptFailed(f"{script.file}: after {after}: expected {answer}, got {unmatched}")
        unmatched.remove(found)
    if unmatched:
        raise ScriptFailed(f"{script.file}: after {after}: unexpected {unmatched}")


def finish_transcript(script: Script, out: Path) -> None:
    """Add each line's note and the header's volatile paths; turn generated lines back into their short form."""
    first, *rest = out.read_text(encoding="utf-8").splitlines()
    header = parse_header(1, json.loads(first))
    header = replace(header, volatile=tuple(parse_pattern(path) for path in script.volatile))
    said = iter(script.steps)
    written = [render_header(header)]
    for text in rest:
        line = json.loads(text)
        if any(kind.startswith("c2s") for kind in line):
            line = _annotated(line, next(said))
        written.append(json.dumps(line, ensure_ascii=False))
    out.write_text("\n".join(written) + "\n", encoding="utf-8")


def _annotated(line: dict[str, Any], step: Say) -> dict[str, Any]:
    recorded = parse_step(0, line)
    assert isinstance(recorded, Send)
    sent = b"".join(payload_chunks(recorded.payload, newline=False))
    if isinstance(step.line, RepeatLine) and sent == step.data().rstrip(b"\n"):
        line = json.loads(render_step(Send(step.line, recorded.newline)))
    return {**line, "note": step.note} if step.note else line


def record(script: Script, server: Sequence[str]) -> tuple[Path, Transcript]:
    """Plays ``script`` against ``server`` into its corpus file, then proves the result replays."""
    out = CORPUS / script.file
    out.parent.mkdir(parents=True, exist_ok=True)
    play(script, out, server)
    finish_transcript(script, out)
    return out, check_replays(out, server)
