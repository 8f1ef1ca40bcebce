"""Matching what a server says against what a transcript expects, without any I/O.

Each expected server line belongs to a stream, and only order within a stream matters:

- everything about one request id: its response, and for a modern ``subscriptions/listen``
  every notification tagged with that id as ``io.modelcontextprotocol/subscriptionId``
  (the acknowledgement first, the graceful-closure response last), and a
  ``notifications/cancelled`` naming it;
- ``notifications/progress`` per progress token;
- all other notifications, in order among themselves (the legacy era's shared stream);
- requests the server sends to the client, in order;
- anything else (raw lines, JSON that is not a message), in order.

An expected line is *released* once every client action before it in the transcript has
been performed: the recording clients wait for answers, so that is what the transcript says
happened. A server line matches the first unmatched expectation of its stream, and only a
released one: a line that would match an expectation still held back is *early* (it ran
ahead of the client line the transcript has before it) and fails. Within what is released,
timing is not conformance: concurrent answers may come in any order. A message about a
request id also cannot come before the transcript's first client message carrying that id
has been sent. (Ids only raw client lines carry are not tracked, and ``id: null`` answers an
unreadable line.) The next client action waits until every released line has arrived.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from conformance.dated import undated
from conformance.diff import Difference, diff
from conformance.paths import Pattern, parse_pattern
from conformance.report import Failure, ServerLine
from conformance.transcript import DEFAULT_VOLATILE, Expect, Send, Step
from conformance.wire import JsonLine, RawLine, WireLine, dumps

SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
StreamKey: TypeAlias = tuple[str, str]
_OTHER: Final = ("other", "")


def stream_of(wire: WireLine) -> StreamKey:
    if not isinstance(wire, JsonLine) or not isinstance(wire.value, dict):
        return _OTHER
    message = wire.value
    if "method" in message:
        if "id" in message:
            return ("server-request", "")
        return _notification_stream(message)
    if "id" in message:
        return ("id", dumps(message["id"]))
    return _OTHER


def _notification_stream(message: dict[str, Any]) -> StreamKey:
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    if isinstance(meta, dict) and SUBSCRIPTION_ID in meta:
        return ("id", dumps(meta[SUBSCRIPTION_ID]))
    method = message["method"]
    if method == "notifications/cancelled" and "requestId" in params:
        return ("id", dumps(params["requestId"]))
    if method == "notifications/progress" and "progressToken" in params:
        return ("progress", dumps(params["progressToken"]))
    return ("notification", "")


def compare(expected: Expect, actual: ServerLine, volatile: Sequence[Pattern], dates_by_shape: bool = True) -> list[Difference]:
    if isinstance(expected.wire, JsonLine) and isinstance(actual.wire, JsonLine):
        if dates_by_shape:
            return diff(*undated(expected.wire.value, actual.wire.value), volatile)
        return diff(expected.wire.value, actual.wire.value, volatile)
    if expected.wire == actual.wire:
        return []
    return [Difference((), _as_shown(expected.wire), _as_shown(actual.wire))]


def _as_shown(wire: WireLine) -> Any:
    match wire:
        case JsonLine(value):
            return value
        case RawLine(data):
            return data.decode("utf-8", errors="backslashreplace")
    raise TypeError(wire)


def _client_id(step: Step) -> str | None:
    """The id a client JSON message carries, as a stream identity."""
    if isinstance(step, Send) and isinstance(step.payload, JsonLine) and isinstance(step.payload.value, dict):
        return dumps(step.payload.value["id"]) if "id" in step.payload.value else None
    return None


def volatile_paths(*additions: Sequence[Pattern]) -> tuple[Pattern, ...]:
    """The default volatile paths, then a header's and the command line's."""
    added = (pattern for patterns in additions for pattern in patterns)
    return (*map(parse_pattern, DEFAULT_VOLATILE), *added)


@dataclass
class _Expectation:
    position: int
    step: Expect
    matched: bool = False


class Matcher:
    """Tracks which expected lines have arrived as the client side of a transcript is played."""

    def __init__(self, steps: Sequence[Step], volatile: Sequence[Pattern], dates_by_shape: bool = True) -> None:
        self._steps = tuple(steps)
        self._volatile = tuple(volatile)
        self._dates_by_shape = dates_by_shape
        self._streams: dict[StreamKey, list[_Expectation]] = {}
        for position, step in enumerate(self._steps):
            if isinstance(step, Expect):
                self._streams.setdefault(stream_of(step.wire), []).append(_Expectation(position, step))
        self._horizon = self._next_barrier(0)
        self._last_line = 0
        # id null is what a server answers an unreadable line with, so it is never held back.
        self._unsent_ids = {_client_id(step) for step in self._steps} - {None, "null"}

    def barriers(self) -> list[int]:
        """Positions of the steps that are not expected server lines, in order."""
        return [position for position, step in enumerate(self._steps) if not isinstance(step, Expect)]

    def performed(self, position: int) -> None:
        """The step at ``position`` (a client action or an exit check) is done: release what follows it."""
        step = self._steps[position]
        self._unsent_ids.discard(_client_id(step))
        self._last_line = step.line
        self._horizon = self._next_barrier(position + 1)

    def _next_barrier(self, start: int) -> int:
        later = (p for p in range(start, len(self._steps)) if not isinstance(self._steps[p], Expect))
        return next(later, len(self._steps))

    def outstanding(self) -> list[Expect]:
        """Released expected lines that have not arrived yet, in transcript order."""
        pending = [
            expectation
            for queue in self._streams.values()
            for expectation in queue
            if not expectation.matched and expectation.position < self._horizon
        ]
        return [expectation.step for expectation in sorted(pending, key=lambda e: e.position)]

    def accept(self, actual: ServerLine) -> Failure | None:
        key = stream_of(actual.wire)
        kind, identity = key
        if kind == "id" and identity in self._unsent_ids:
            reason = f"a message for request id {identity}, which the client has not sent yet"
            return self._unexpected(actual, reason)
        head = next((e for e in self._streams.get(key, []) if not e.matched), None)
        if head is None:
            return self._unexpected(actual, self._why_unexpected(key))
        expected = head.step
        differences = compare(expected, actual, self._volatile, self._dates_by_shape)
        if head.position >= self._horizon:
            return self._early(head, actual, differences)
        if differences:
            summary = "the server's message differs from the transcript"
            return Failure(expected.line, summary, expected.wire, expected.line, actual, tuple(differences))
        if expected.newline != actual.newline:
            ended = "ended" if actual.newline else "did not end"
            summary = f"the server {ended} this line with a newline, unlike the transcript"
            return Failure(expected.line, summary, expected.wire, expected.line, actual)
        head.matched = True
        return None

    def _early(self, head: _Expectation, actual: ServerLine, differences: list[Difference]) -> Failure:
        """A line for an expectation the client has not reached yet: early if it is that line, else unexpected."""
        ahead_of = self._steps[self._horizon]
        action = "client line" if isinstance(ahead_of, Send) else "client action"
        where = f"after line {self._last_line}" if self._last_line else "before the client sent anything"
        if not differences:
            summary = (
                f"early server message {where}: the transcript has it at line {head.step.line}, "
                f"after {action} {ahead_of.line}, which had not been sent yet"
            )
            return Failure(head.step.line, summary, head.step.wire, head.step.line, actual)
        summary = (
            f"unexpected server message {where}: the next message of its kind comes at line {head.step.line}, "
            f"after {action} {ahead_of.line}, which had not been sent yet"
        )
        return Failure(self._last_line, summary, head.step.wire, head.step.line, actual, tuple(differences))

    def _why_unexpected(self, key: StreamKey) -> str:
        kind, identity = key
        if kind == "id" and identity == "null":
            return "a message with id null (the answer to an unreadable line) the transcript does not expect"
        if kind == "id" and self._client_ids_known(identity):
            return f"one message too many for request id {identity}"
        if kind == "id":
            return f"a message for request id {identity}, which no client message carries"
        if kind == "notification":
            return "a notification beyond those the transcript expects"
        if kind == "progress":
            return f"a progress notification for token {identity} beyond those the transcript expects"
        if kind == "server-request":
            return "a request to the client beyond those the transcript expects"
        return "a server line beyond those the transcript expects"

    def _client_ids_known(self, identity: str) -> bool:
        return any(_client_id(step) == identity for step in self._steps)

    def _unexpected(self, actual: ServerLine, reason: str) -> Failure:
        where = f"after line {self._last_line}" if self._last_line else "before the client sent anything"
        closest = self._closest(actual)
        summary = f"unexpected server message {where}: {reason}"
        if closest is None:
            return Failure(self._last_line, summary, actual=actual)
        step, differences = closest
        summary += "; the closest outstanding expectation is shown"
        return Failure(self._last_line, summary, step.wire, step.line, actual, tuple(differences))

    def _closest(self, actual: ServerLine) -> tuple[Expect, list[Difference]] | None:
        candidates = [(step, compare(step, actual, self._volatile, self._dates_by_shape)) for step in self.outstanding()]
        return min(candidates, key=lambda candidate: len(candidate[1]), default=None)
