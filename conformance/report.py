"""How a failed replay is told to a person: where in the transcript, what, and the diff."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from conformance.diff import ABSENT, Difference
from conformance.paths import format_path
from conformance.wire import WireLine, wire_text

# Reports stay readable even when a transcript line is megabytes long.
_MAX_SHOWN: Final = 600
_MAX_DIFFERENCES: Final = 20


@dataclass(frozen=True)
class ServerLine:
    """One line the server wrote; ``newline`` is false for bytes cut off by end of output."""

    wire: WireLine
    newline: bool = True


@dataclass(frozen=True)
class Failure:
    line: int
    summary: str
    expected: WireLine | None = None
    expected_line: int | None = None
    actual: ServerLine | None = None
    differences: tuple[Difference, ...] = ()


def describe_status(status: int | str) -> str:
    return f"signal {status}" if isinstance(status, str) else f"status {status}"


def format_failure(source: str, failure: Failure, stderr_tail: str = "") -> str:
    where = f"{source}:{failure.line}" if failure.line else source
    lines = [f"  {where}: {failure.summary}"]
    if failure.expected is not None:
        label = f"expected ({source}:{failure.expected_line})" if failure.expected_line else "expected"
        lines.append(f"    {label}: {shorten(wire_text(failure.expected))}")
    if failure.actual is not None:
        lines.append(f"    actual: {shorten(wire_text(failure.actual.wire))}")
    if failure.differences:
        lines.append("    diff:")
        lines.extend(f"      {entry}" for entry in format_differences(failure.differences))
    if stderr_tail.strip():
        lines.append("    server stderr (last lines):")
        lines.extend(f"      | {text}" for text in stderr_tail.rstrip("\n").split("\n"))
    return "\n".join(lines)


def format_differences(differences: Sequence[Difference]) -> list[str]:
    shown = [
        f"{format_path(entry.path)}: expected {_value(entry.expected)}, got {_value(entry.actual)}"
        for entry in differences[:_MAX_DIFFERENCES]
    ]
    if len(differences) > _MAX_DIFFERENCES:
        shown.append(f"... and {len(differences) - _MAX_DIFFERENCES} more")
    return shown


def _value(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    return shorten(json.dumps(value, ensure_ascii=False), 120)


def shorten(text: str, limit: int = _MAX_SHOWN) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"
