"""The transcript file: a header line, then one line per wire line or action, in wire order.

Parsing and rendering are pure; ``load_transcript`` is the only function touching disk.
The format is documented in docs/conformance.md (Transcript format); in short::

    {"transcript": 1, "era": "legacy", "description": "...", "recorded": {...},
     "volatile": ["result.content.*.text"], "env": {"MEMORY_FILE_PATH": "{tmp}/memory.jsonl"}}
    {"c2s": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {...}}}
    {"s2c": {"jsonrpc": "2.0", "id": 1, "result": {...}}}
    {"c2s_raw": "not json"}            {"c2s_raw_b64": "/w=="}
    {"c2s_raw_repeat": {"text": "x", "count": 17000000}}
    {"close_stdin": true}   {"signal": "SIGTERM"}   {"exit": 0}

Message values keep the key order they had on the wire.
"""

from __future__ import annotations

import base64
import binascii
import json
import signal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any, Final, TypeAlias

from conformance.paths import PathSyntaxError, Pattern, parse_pattern
from conformance.wire import JsonLine, RawLine, WireLine, dumps, loads_strict

FORMAT_VERSION: Final = 1
ERAS: Final = ("legacy", "modern", "mixed", "none")
DEFAULT_VOLATILE: Final = (
    "result.serverInfo.version",
    'result._meta["io.modelcontextprotocol/serverInfo"].version',
    # The tools' optional date and author fields (issue 19, issue 32), absent on the reference's side;
    # in answers they match by their shape (conformance/dated.py).
    *(f"result.tools.*.inputSchema.properties.{list_name}.items.properties.happenedOn?"
      for list_name in ("entities", "observations")),
    *(f"result.tools.*.outputSchema.properties.entities.items.properties.{key}?"
      for key in ("createdAt", "updatedAt", "observationDates", "observationAuthors", "partial")),
    *(f"result.tools.*.inputSchema.properties.{key}?" for key in ("since", "until")),
)
# Replaced in header env values by a fresh temporary directory per transcript.
TMP_PLACEHOLDER: Final = "{tmp}"
# A generated line is streamed, but a typo in its count should not fill a disk or a pipe for hours.
MAX_REPEAT_BYTES: Final = 1 << 30
_CHUNK: Final = 1 << 20


class TranscriptError(ValueError):
    def __init__(self, line: int, message: str, source: str = "") -> None:
        super().__init__(f"{source}:{line}: {message}" if source else f"line {line}: {message}")
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Header:
    era: str
    description: str = ""
    recorded: Mapping[str, Any] = field(default_factory=dict)
    volatile: tuple[Pattern, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RepeatLine:
    """A generated line: prefix, then text repeated count times, then suffix."""

    text: str
    count: int
    prefix: str = ""
    suffix: str = ""


Payload: TypeAlias = JsonLine | RawLine | RepeatLine


@dataclass(frozen=True)
class Send:
    payload: Payload
    newline: bool = True
    line: int = 0


@dataclass(frozen=True)
class Expect:
    wire: WireLine
    newline: bool = True
    line: int = 0


@dataclass(frozen=True)
class CloseStdin:
    line: int = 0


@dataclass(frozen=True)
class SendSignal:
    name: str
    line: int = 0


@dataclass(frozen=True)
class ExpectExit:
    """An exit code, or the name of the signal that ended the process."""

    status: int | str
    line: int = 0


Step: TypeAlias = Send | Expect | CloseStdin | SendSignal | ExpectExit


@dataclass(frozen=True)
class Transcript:
    source: str
    header: Header
    steps: tuple[Step, ...]


# --- reading ------------------------------------------------------------------------------

_SEND_KINDS: Final = ("c2s", "c2s_raw", "c2s_raw_b64", "c2s_raw_repeat")
_EXPECT_KINDS: Final = ("s2c", "s2c_raw", "s2c_raw_b64")
_ACTION_KINDS: Final = ("close_stdin", "signal", "exit")
_HEADER_KEYS: Final = ("transcript", "era", "description", "recorded", "volatile", "env")


def load_transcript(path: str | FilePath) -> Transcript:
    return parse_transcript(str(path), FilePath(path).read_bytes())


def parse_transcript(source: str, data: bytes) -> Transcript:
    try:
        header, steps = _parse_lines(data)
    except TranscriptError as error:
        raise TranscriptError(error.line, error.message, source) from None
    return Transcript(source, header, steps)


def _parse_lines(data: bytes) -> tuple[Header, tuple[Step, ...]]:
    header: Header | None = None
    steps: list[Step] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        record = _parse_record(number, raw)
        if header is None:
            header = parse_header(number, record)
        else:
            steps.append(parse_step(number, record))
    if header is None:
        raise TranscriptError(1, 'no header line; a transcript starts with {"transcript": 1, "era": ...}')
    check_order(steps)
    return header, tuple(steps)


def _parse_record(number: int, raw: bytes) -> dict[str, Any]:
    try:
        record = loads_strict(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TranscriptError(number, "not UTF-8; write non-UTF-8 bytes with c2s_raw_b64") from None
    except (ValueError, RecursionError) as error:
        raise TranscriptError(
            number, f"not a strict JSON line ({error}); send such bytes with c2s_raw or c2s_raw_b64"
        ) from None
    if not isinstance(record, dict):
        raise TranscriptError(number, "each line must be a JSON object")
    return record


def parse_header(number: int, record: dict[str, Any]) -> Header:
    if record.get("transcript") != FORMAT_VERSION or isinstance(record.get("transcript"), bool):
        raise TranscriptError(
            number, f'the first line must be a header with "transcript": {FORMAT_VERSION}'
        )
    _reject_unknown(number, record, _HEADER_KEYS)
    era = record.get("era")
    if era not in ERAS:
        raise TranscriptError(number, f"era must be one of {', '.join(ERAS)}, not {era!r}")
    description = record.get("description", "")
    if not isinstance(description, str):
        raise TranscriptError(number, "description must be a string")
    recorded = record.get("recorded", {})
    if not isinstance(recorded, dict):
        raise TranscriptError(number, "recorded must be an object")
    return Header(era, description, recorded, _parse_volatile(number, record), _parse_env(number, record))


def _parse_volatile(number: int, record: dict[str, Any]) -> tuple[Pattern, ...]:
    sources = record.get("volatile", [])
    if not isinstance(sources, list) or not all(isinstance(item, str) for item in sources):
        raise TranscriptError(number, "volatile must be a list of path strings")
    try:
        return tuple(parse_pattern(item) for item in sources)
    except PathSyntaxError as error:
        raise TranscriptError(number, f"volatile: {error}") from None


def _parse_env(number: int, record: dict[str, Any]) -> dict[str, str]:
    env = record.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(value, str) for value in env.values()):
        raise TranscriptError(number, "env must be an object of string values")
    if any(not name or "=" in name for name in env):
        raise TranscriptError(number, "env names must be non-empty and contain no '='")
    return env


def parse_step(number: int, record: dict[str, Any]) -> Step:
    kinds = [key for key in record if key in (*_SEND_KINDS, *_EXPECT_KINDS, *_ACTION_KINDS)]
    if len(kinds) != 1:
        found = ", ".join(kinds) or "none"
        raise TranscriptError(number, f"a line needs exactly one of {_all_kinds()}; found {found}")
    kind = kinds[0]
    allowed = (kind, "note", "newline") if kind in (*_SEND_KINDS, *_EXPECT_KINDS) else (kind, "note")
    _reject_unknown(number, record, allowed)
    if not isinstance(record.get("note", ""), str):
        raise TranscriptError(number, "note must be a string")
    newline = record.get("newline", True)
    if not isinstance(newline, bool):
        raise TranscriptError(number, "newline must be true or false")
    value = record[kind]
    if kind == "c2s_raw_repeat":
        return Send(_parse_repeat(number, value), newline, number)
    if kind in _SEND_KINDS:
        return Send(_parse_wire(number, kind, value), newline, number)
    if kind in _EXPECT_KINDS:
        return Expect(_parse_wire(number, kind, value), newline, number)
    if kind == "close_stdin":
        if value is not True:
            raise TranscriptError(number, "close_stdin takes the value true")
        return CloseStdin(number)
    if kind == "signal":
        return SendSignal(_signal_name(number, value), number)
    return ExpectExit(_parse_exit(number, value), number)


def _all_kinds() -> str:
    return ", ".join((*_SEND_KINDS, *_EXPECT_KINDS, *_ACTION_KINDS))


def _reject_unknown(number: int, record: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = [key for key in record if key not in allowed]
    if unknown:
        raise TranscriptError(number, f"unknown key {unknown[0]!r} (allowed here: {', '.join(allowed)})")


def _parse_wire(number: int, kind: str, value: Any) -> WireLine:
    if kind in ("c2s", "s2c"):
        return JsonLine(value)
    if not isinstance(value, str):
        raise TranscriptError(number, f"{kind} takes a string")
    if kind.endswith("_raw"):
        return RawLine(_one_line(number, value.encode("utf-8")))
    try:
        return RawLine(_one_line(number, base64.b64decode(value, validate=True)))
    except binascii.Error as error:
        raise TranscriptError(number, f"{kind}: bad base64 ({error})") from None


def _one_line(number: int, data: bytes) -> bytes:
    if b"\n" in data:
        raise TranscriptError(number, "a raw line cannot hold a newline; use one transcript line per wire line")
    return data


def _parse_repeat(number: int, value: Any) -> RepeatLine:
    if not isinstance(value, dict):
        raise TranscriptError(number, 'c2s_raw_repeat takes {"text": ..., "count": ...}')
    _reject_unknown(number, value, ("text", "count", "prefix", "suffix"))
    parts = {key: value.get(key, "") for key in ("text", "prefix", "suffix")}
    if not all(isinstance(part, str) for part in parts.values()) or not parts["text"]:
        raise TranscriptError(number, "c2s_raw_repeat: text must be a non-empty string, prefix and suffix strings")
    count = value.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TranscriptError(number, "c2s_raw_repeat: count must be a whole number >= 0")
    line = RepeatLine(parts["text"], count, parts["prefix"], parts["suffix"])
    if any("\n" in part for part in parts.values()):
        raise TranscriptError(number, "c2s_raw_repeat: a generated line cannot hold a newline")
    if repeat_size(line) > MAX_REPEAT_BYTES:
        raise TranscriptError(number, f"c2s_raw_repeat: the line would exceed {MAX_REPEAT_BYTES} bytes")
    return line


def _signal_name(number: int, value: Any) -> str:
    if not isinstance(value, str) or not value.startswith("SIG") or value not in signal.Signals.__members__:
        raise TranscriptError(number, f"signal must be a signal name such as SIGTERM, not {value!r}")
    return value


def _parse_exit(number: int, value: Any) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255:
        return value
    if isinstance(value, str) and value.startswith("SIG") and value in signal.Signals.__members__:
        return value
    raise TranscriptError(number, f"exit must be a status 0-255 or a signal name, not {value!r}")


def check_order(steps: list[Step]) -> None:
    """Actions that cannot happen in that order on a real pipe are transcript errors."""
    closed_at: int | None = None
    for position, step in enumerate(steps):
        if isinstance(step, ExpectExit) and position != len(steps) - 1:
            raise TranscriptError(step.line, "exit must be the last line: nothing can follow the process's end")
        if isinstance(step, Send) and closed_at is not None:
            raise TranscriptError(step.line, f"the client closed stdin at line {closed_at}; nothing can follow")
        if isinstance(step, CloseStdin):
            if closed_at is not None:
                raise TranscriptError(step.line, f"stdin was already closed at line {closed_at}")
            closed_at = step.line


# --- writing ------------------------------------------------------------------------------


def render_header(header: Header) -> str:
    record: dict[str, Any] = {
        "transcript": FORMAT_VERSION,
        "era": header.era,
        "description": header.description,
        "recorded": dict(header.recorded),
    }
    if header.volatile:
        record["volatile"] = [pattern.source for pattern in header.volatile]
    if header.env:
        record["env"] = dict(header.env)
    return json.dumps(record, ensure_ascii=False)


def render_step(step: Step) -> str:
    record: dict[str, Any]
    match step:
        case Send(payload, newline):
            record = {**_render_payload("c2s", payload), **({} if newline else {"newline": False})}
        case Expect(wire, newline):
            record = {**_render_payload("s2c", wire), **({} if newline else {"newline": False})}
        case CloseStdin():
            record = {"close_stdin": True}
        case SendSignal(name):
            record = {"signal": name}
        case ExpectExit(status):
            record = {"exit": status}
    return json.dumps(record, ensure_ascii=False)


def _render_payload(direction: str, payload: Payload) -> dict[str, Any]:
    match payload:
        case JsonLine(value):
            return {direction: value}
        case RawLine(data):
            try:
                return {f"{direction}_raw": data.decode("utf-8")}
            except UnicodeDecodeError:
                return {f"{direction}_raw_b64": base64.b64encode(data).decode("ascii")}
        case RepeatLine(text, count, prefix, suffix):
            spec: dict[str, Any] = {"text": text, "count": count}
            spec |= {"prefix": prefix} if prefix else {}
            spec |= {"suffix": suffix} if suffix else {}
            return {f"{direction}_raw_repeat": spec}
    raise TypeError(payload)


# --- what a Send puts on the wire ---------------------------------------------------------


def repeat_size(line: RepeatLine) -> int:
    return len((line.prefix + line.suffix).encode("utf-8")) + len(line.text.encode("utf-8")) * line.count


def payload_chunks(payload: Payload, newline: bool) -> Iterator[bytes]:
    """The bytes of one client line, in bounded chunks so a huge generated line never sits in memory."""
    match payload:
        case JsonLine(value):
            yield dumps(value).encode("utf-8")
        case RawLine(data):
            yield data
        case RepeatLine(text, count, prefix, suffix):
            yield prefix.encode("utf-8")
            unit = text.encode("utf-8")
            per_chunk = max(1, _CHUNK // len(unit))
            for start in range(0, count, per_chunk):
                yield unit * min(per_chunk, count - start)
            yield suffix.encode("utf-8")
    if newline:
        yield b"\n"


# --- the server process -------------------------------------------------------------------


def server_environment(base: Mapping[str, str], templates: Mapping[str, str], tmp: str) -> dict[str, str]:
    return {**base, **{name: value.replace(TMP_PLACEHOLDER, tmp) for name, value in templates.items()}}


def exit_status(returncode: int) -> int | str:
    """A process's end as a transcript writes it: an exit code, or the signal's name."""
    if returncode >= 0:
        return returncode
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return 128 - returncode
