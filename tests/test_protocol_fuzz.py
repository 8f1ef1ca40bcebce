"""Generated input against a `Session` driven in-process: it never crashes, and owes exactly one answer per request."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import anyio
import example_server
from conftest import initialize, modern_meta, notification, open_session, parse_server_line, request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID_LINES = [
    json.dumps(message).encode() + b"\n" for message in (
        initialize(1),
        request("a", "ping"),
        request(2, "tools/list", {"_meta": modern_meta()}),
        request("b", "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": modern_meta()}),
        request(3, "resources/read", {"uri": example_server.COUNTER_URI}),
        request(4, "subscriptions/listen", {"notifications": {"resourceSubscriptions": [example_server.COUNTER_URI]},
                                            "_meta": modern_meta()}),
        request(5, "resources/subscribe", {"uri": example_server.COUNTER_URI}),
        notification("notifications/cancelled", {"requestId": 4}),
        notification("notifications/initialized"),
    )
]
FRAGMENTS = [
    b"\n", b"\r\n", b" ", b"{", b"}", b"[", b"]", b'"', b",", b":", b"null", b"true", b"1e400", b"-0", b"\xff", b"\\u",
    b'"jsonrpc":"2.0"', b'"id":1', b'"id":"1"', b'"id":null', b'"method":"ping"', b'"method":"tools/call"',
    b'"params":{}', b'"params":[]', b'"result":{}', b'"_meta":{}', *VALID_LINES,
    b"[" * 1200, b"{\"a\":" * 1200,  # nesting deeper than a recursive decoder can follow
]

byte_soup = st.lists(st.one_of(st.binary(max_size=40), st.sampled_from(FRAGMENTS)), max_size=30).map(b"".join)


def chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    """`stream` cut at the given positions (any order, repeats allowed)."""
    edges = [0, *sorted(cut % (len(stream) + 1) for cut in cuts), len(stream)]
    return [stream[start:end] for start, end in zip(edges, edges[1:])]


def serve(chunks: list[bytes], max_line_bytes: int) -> list[bytes]:
    """Feed `chunks` to a fresh session, then end of input; every line the session sent."""
    async def drive() -> list[bytes]:
        async with open_session(example_server.server, max_line_bytes=max_line_bytes) as peer:
            for chunk in chunks:
                peer.session.feed(chunk)
            await peer.finish()
            return list(peer.lines)

    return anyio.run(drive)


@FUZZ
@given(stream=byte_soup, cuts=st.lists(st.integers(min_value=0), max_size=8))
def test_any_byte_stream_at_any_chunking_gets_only_well_formed_messages_back(stream: bytes, cuts: list[int]) -> None:
    for line in serve(chunked(stream, cuts), max_line_bytes=16384):
        parse_server_line(line)


# --- exactly one response per request ---------------------------------------------------------------------

request_ids = st.one_of(st.integers(min_value=-3, max_value=30), st.text(max_size=3))


def well_formed_request(request_id: Any, kind: int) -> dict[str, Any]:
    """A request the server must answer, with a result or an error, whatever era the connection is in."""
    modern = {"_meta": modern_meta()}
    return [
        request(request_id, "ping"),
        initialize(request_id),
        request(request_id, "tools/list"),
        request(request_id, "tools/list", modern),
        request(request_id, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 2}, **modern}),
        request(request_id, "tools/call", {"name": "add", "arguments": {"a": "x"}}),
        request(request_id, "resources/read", {"uri": "example://missing", **modern}),
        request(request_id, "no/such/method"),
        request(request_id, "server/discover", {"_meta": modern_meta(version="1999-01-01")}),
    ][kind]


INVALID_LINES = [
    # (line, id its error carries): string ids outside the generated ones, so they cannot collide
    (b"{oops\n", None),
    (b"[1,2]\n", None),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n', None),
    (b'{"jsonrpc":"2.0","id":"bad-params","method":"ping","params":[]}\n', "bad-params"),
    (b'{"id":"bad-version","method":"ping"}\n', "bad-version"),
    (b"x" * 600 + b"\n", None),  # over the 512-byte test limit
]
SILENT_LINES = [
    b"\n", b"   \n",
    json.dumps(notification("notifications/initialized")).encode() + b"\n",
    json.dumps(notification("notifications/cancelled", {"requestId": "nobody-has-this-id"})).encode() + b"\n",
    b'{"jsonrpc":"2.0","id":"not-ours","result":{}}\n',
]

conversations = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.tuples(request_ids, st.integers(min_value=0, max_value=8))),
        st.tuples(st.just("invalid"), st.sampled_from(INVALID_LINES)),
        st.tuples(st.just("silent"), st.sampled_from(SILENT_LINES)),
    ),
    max_size=25,
)


def key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)


@FUZZ
@given(conversation=conversations, cuts=st.lists(st.integers(min_value=0), max_size=8), final_newline=st.booleans())
def test_every_well_formed_request_gets_exactly_one_response(
        conversation: list[tuple[str, Any]], cuts: list[int], final_newline: bool) -> None:
    lines: list[bytes] = []
    owed: Counter[tuple[str, Any]] = Counter()
    seen_ids: set[tuple[str, Any]] = set()
    for kind, what in conversation:
        if kind == "request":
            request_id, method_kind = what
            if key(request_id) in seen_ids:
                continue  # a reused id in flight is a different case; each id here names one request
            seen_ids.add(key(request_id))
            lines.append(json.dumps(well_formed_request(request_id, method_kind)).encode() + b"\n")
            owed[key(request_id)] += 1
        elif kind == "invalid":
            line, echo = what
            lines.append(line)
            owed[key(echo)] += 1
        else:
            lines.append(what)
    stream = b"".join(lines)
    if not final_newline and stream.endswith(b"\n"):
        stream = stream[:-1]  # the last message ends with end of input instead

    answered: Counter[tuple[str, Any]] = Counter()
    for line in serve(chunked(stream, cuts), max_line_bytes=512):
        message = parse_server_line(line)
        assert "method" not in message, f"no notification was asked for: {message}"
        answered[key(message["id"])] += 1
    assert answered == owed
