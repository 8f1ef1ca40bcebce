"""The conformance harness itself: transcript format, matcher, and record/replay as real processes."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.diff import ABSENT, Difference, diff
from conformance.matcher import Matcher, volatile_paths
from conformance.paths import PathSyntaxError, format_path, matches, parse_pattern
from conformance.record import client_payload, proxy_exit_code
from conformance.report import Failure, ServerLine
from conformance.session import SessionFacts, era_of, observe_client, observe_server
from conformance.transcript import (
    MAX_REPEAT_BYTES,
    CloseStdin,
    Expect,
    ExpectExit,
    RepeatLine,
    Send,
    SendSignal,
    TranscriptError,
    exit_status,
    parse_step,
    parse_transcript,
    payload_chunks,
    render_step,
    server_environment,
)
from conformance.wire import JsonLine, LineSplitter, RawLine, dumps, parse_wire_line

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "conformance_fixtures"
ECHO_SERVER = [sys.executable, str(FIXTURES / "echo_server.py")]
RECORD = [sys.executable, "-m", "conformance", "record"]
HEADER = {"transcript": 1, "era": "legacy", "description": "test"}
WAIT = 30  # seconds; generous bounds on real processes, never expected to be reached

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def lines(*records: object, header: dict | None = None) -> bytes:
    return "\n".join(json.dumps(record) for record in (header or HEADER, *records)).encode() + b"\n"


def request(id_: object, method: str, **params: object) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params else {})}


def response(id_: object, **result: object) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def notification(method: str, **params: object) -> dict:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def listen_notification(subscription: int, method: str, **params: object) -> dict:
    return notification(method, _meta={"io.modelcontextprotocol/subscriptionId": subscription}, **params)


def arrived(message: object) -> ServerLine:
    return ServerLine(JsonLine(message))


# --- paths ----------------------------------------------------------------------------------


def test_patterns_name_keys_bare_quoted_or_wildcarded() -> None:
    meta = parse_pattern('result._meta["io.modelcontextprotocol/serverInfo"].version')
    assert matches(meta, ("result", "_meta", "io.modelcontextprotocol/serverInfo", "version"))
    assert not matches(meta, ("result", "_meta", "io", "version"))
    texts = parse_pattern("result.content.*.text")
    assert matches(texts, ("result", "content", 3, "text"))
    assert matches(texts, ("result", "content", "any", "text"))
    assert not matches(texts, ("result", "content", 3, "type"))
    assert not matches(texts, ("result", "content", 3, "text", "more"))
    assert matches(parse_pattern("content[*].text"), ("content", 0, "text"))


def test_bare_digits_match_index_or_key_but_brackets_are_specific() -> None:
    assert matches(parse_pattern("content.0"), ("content", 0))
    assert matches(parse_pattern("content.0"), ("content", "0"))
    assert not matches(parse_pattern("content[0]"), ("content", "0"))
    assert not matches(parse_pattern('content["0"]'), ("content", 0))


@pytest.mark.parametrize("source", ["", "a..b", "a.", ".a", "a[", "a[x]", 'a["x"', "a b", "[*", "a[0]b", 'a["\\q"]'])
def test_malformed_patterns_are_refused(source: str) -> None:
    with pytest.raises(PathSyntaxError):
        parse_pattern(source)


@given(st.lists(st.text(max_size=6) | st.integers(min_value=0, max_value=99), min_size=1, max_size=5))
def test_every_printed_path_reads_back_as_a_pattern_matching_it(path: list) -> None:
    assert matches(parse_pattern(format_path(tuple(path))), tuple(path))


# --- diff -----------------------------------------------------------------------------------


def test_diff_names_the_path_of_each_difference() -> None:
    expected = {"result": {"tools": [{"name": "echo"}, {"name": "add"}]}}
    actual = {"result": {"tools": [{"name": "echo"}, {"name": "sum"}]}}
    assert diff(expected, actual) == [Difference(("result", "tools", 1, "name"), "add", "sum")]
    assert format_path(("result", "tools", 1, "name")) == "result.tools[1].name"


def test_diff_reports_absent_keys_and_items_on_either_side() -> None:
    assert diff({"a": 1, "b": [1, 2]}, {"b": [1], "c": None}) == [
        Difference(("a",), 1, ABSENT),
        Difference(("b", 1), 2, ABSENT),
        Difference(("c",), ABSENT, None),
    ]


def test_diff_follows_json_semantics_not_pythons() -> None:
    assert diff({"n": 1, "m": {"x": 1, "y": 2}}, {"m": {"y": 2, "x": 1}, "n": 1.0}) == []
    assert diff(True, 1) == [Difference((), True, 1)]
    assert diff(0, False) == [Difference((), 0, False)]
    assert diff(None, False) == [Difference((), None, False)]
    assert diff("1", 1) == [Difference((), "1", 1)]
    assert diff([], {}) == [Difference((), [], {})]


def test_volatile_paths_ignore_a_value_but_not_its_absence() -> None:
    version = [parse_pattern("result.serverInfo.version")]
    expected = response(1, serverInfo={"name": "s", "version": "1.0"})
    assert diff(expected, response(1, serverInfo={"name": "s", "version": "2.7"}), version) == []
    assert diff(expected, response(1, serverInfo={"name": "s"}), version) == [
        Difference(("result", "serverInfo", "version"), "1.0", ABSENT)
    ]
    assert diff(expected, response(1, serverInfo={"name": "t", "version": "2"}), version) == [
        Difference(("result", "serverInfo", "name"), "s", "t")
    ]


@given(json_values)
def test_a_value_never_differs_from_a_copy_of_itself(value: object) -> None:
    assert diff(value, json.loads(json.dumps(value))) == []


# --- wire lines -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b" {}",
        b"{}\r",
        b"not json",
        b"\xff\xfe",
        b'{"a":1,"a":2}',
        b"NaN",
        b"[1e400]",
        b'"\\ud800"',
        b"[" * 100_000,
    ],
)
def test_lines_a_json_value_cannot_reproduce_stay_raw(data: bytes) -> None:
    assert parse_wire_line(data) == RawLine(data)


@given(json_values)
def test_any_json_value_survives_the_wire_as_json(value: object) -> None:
    assert parse_wire_line(dumps(value).encode()) == JsonLine(value)


def test_line_splitter_cuts_at_newlines_across_chunks_and_keeps_the_unterminated_tail() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a"') == []
    assert splitter.feed(b":1}\n\nx") == [b'{"a":1}', b""]
    assert splitter.feed(b"yz") == []
    assert splitter.take_tail() == b"xyz"
    assert splitter.take_tail() is None


# --- transcript format ----------------------------------------------------------------------


def test_every_line_form_parses_to_its_step() -> None:
    transcript = parse_transcript(
        "t.jsonl",
        lines(
            {"c2s": request(1, "initialize")},
            {"s2c": response(1), "note": "why this line matters"},
            {"c2s_raw": "not json"},
            {"c2s_raw_b64": "/w=="},
            {"c2s_raw": ""},
            {"c2s_raw_repeat": {"prefix": "[", "text": "1,", "count": 3, "suffix": "1]"}, "newline": False},
            {"s2c_raw": "log line", "newline": False},
            {"s2c_raw_b64": "gA=="},
            {"close_stdin": True},
            {"signal": "SIGTERM"},
            {"exit": 0},
            header={**HEADER, "volatile": ["result.content.*.text"], "env": {"F": "{tmp}/f"}},
        ),
    )
    assert transcript.header.era == "legacy"
    assert [pattern.source for pattern in transcript.header.volatile] == ["result.content.*.text"]
    assert transcript.header.env == {"F": "{tmp}/f"}
    assert transcript.steps == (
        Send(JsonLine(request(1, "initialize")), True, 2),
        Expect(JsonLine(response(1)), True, 3),
        Send(RawLine(b"not json"), True, 4),
        Send(RawLine(b"\xff"), True, 5),
        Send(RawLine(b""), True, 6),
        Send(RepeatLine("1,", 3, "[", "1]"), False, 7),
        Expect(RawLine(b"log line"), False, 8),
        Expect(RawLine(b"\x80"), True, 9),
        CloseStdin(10),
        SendSignal("SIGTERM", 11),
        ExpectExit(0, 12),
    )


def test_blank_lines_are_skipped_but_counted() -> None:
    transcript = parse_transcript("t", lines() + b"\n  \n" + json.dumps({"exit": "SIGKILL"}).encode())
    assert transcript.steps == (ExpectExit("SIGKILL", 4),)


@pytest.mark.parametrize(
    "step",
    [
        Send(JsonLine({"jsonrpc": "2.0", "id": "é", "method": "x", "params": {"n": 1.5, "b": None}})),
        Send(RawLine(b"\xff\x00 bytes"), newline=False),
        Send(RawLine(b"text \x1b")),
        Send(RepeatLine("ab", 10, suffix="}")),
        Expect(JsonLine([1, 2])),
        Expect(RawLine(b"tail"), newline=False),
        CloseStdin(),
        SendSignal("SIGINT"),
        ExpectExit("SIGTERM"),
        ExpectExit(3),
    ],
)
def test_rendered_steps_parse_back_to_themselves(step: object) -> None:
    assert parse_step(7, json.loads(render_step(step))) == dataclasses.replace(step, line=7)  # type: ignore[arg-type, type-var]


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        (b"", 1, "no header"),
        (lines(header={"transcript": 2, "era": "legacy"}), 1, '"transcript": 1'),
        (lines(header={"transcript": True, "era": "legacy"}), 1, '"transcript": 1'),
        (lines(header={"transcript": 1, "era": "future"}), 1, "era must be one of"),
        (lines(header={**HEADER, "volatiles": []}), 1, "unknown key 'volatiles'"),
        (lines(header={**HEADER, "volatile": ["a..b"]}), 1, "volatile:"),
        (lines(header={**HEADER, "volatile": "a.b"}), 1, "list of path strings"),
        (lines(header={**HEADER, "env": {"A": 1}}), 1, "string values"),
        (lines(header={**HEADER, "env": {"A=B": "x"}}), 1, "no '='"),
        (lines(header={**HEADER, "description": 7}), 1, "description"),
        (lines() + b"{not json\n", 2, "not a strict JSON line"),
        (lines() + b'{"c2s": 1, "c2s": 2}\n', 2, "not a strict JSON line"),
        (lines() + b'{"c2s_raw": "\xff"}\n', 2, "not UTF-8"),
        (lines() + b"[1]\n", 2, "JSON object"),
        (lines({"c2s": {}, "s2c": {}}), 2, "exactly one of"),
        (lines({"c2x": {}}), 2, "exactly one of"),
        (lines({"c2s": {}, "extra": 1}), 2, "unknown key 'extra'"),
        (lines({"exit": 0, "newline": False}), 2, "unknown key 'newline'"),
        (lines({"c2s": {}, "newline": "no"}), 2, "newline must be"),
        (lines({"c2s": {}, "note": 5}), 2, "note must be"),
        (lines({"c2s_raw": 5}), 2, "takes a string"),
        (lines({"c2s_raw": "a\nb"}), 2, "cannot hold a newline"),
        (lines({"s2c_raw_b64": "%%%"}), 2, "bad base64"),
        (lines({"c2s_raw_b64": "Cg=="}), 2, "cannot hold a newline"),
        (lines({"c2s_raw_repeat": "x"}), 2, "takes {"),
        (lines({"c2s_raw_repeat": {"text": "", "count": 1}}), 2, "non-empty"),
        (lines({"c2s_raw_repeat": {"text": "x", "count": -1}}), 2, "count"),
        (lines({"c2s_raw_repeat": {"text": "x", "count": True}}), 2, "count"),
        (lines({"c2s_raw_repeat": {"text": "x", "count": MAX_REPEAT_BYTES + 1}}), 2, "exceed"),
        (lines({"c2s_raw_repeat": {"text": "x", "count": 1, "size": 2}}), 2, "unknown key 'size'"),
        (lines({"c2s_raw_repeat": {"text": "x\n", "count": 1}}), 2, "newline"),
        (lines({"close_stdin": False}), 2, "true"),
        (lines({"signal": "SIGNOPE"}), 2, "signal name"),
        (lines({"signal": "SIG_IGN"}), 2, "signal name"),
        (lines({"exit": 256}), 2, "status 0-255"),
        (lines({"exit": "SIGNOPE"}), 2, "status 0-255 or a signal name"),
        (lines({"exit": False}), 2, "status 0-255"),
        (lines({"exit": 0}, {"c2s": {}}), 2, "must be the last line"),
        (lines({"close_stdin": True}, {"c2s": {}}), 3, "closed stdin at line 2"),
        (lines({"close_stdin": True}, {"close_stdin": True}), 3, "already closed"),
    ],
)
def test_malformed_transcripts_are_refused_with_file_and_line(content: bytes, line: int, fragment: str) -> None:
    with pytest.raises(TranscriptError) as caught:
        parse_transcript("bad.jsonl", content)
    assert caught.value.line == line
    assert fragment in caught.value.message
    assert str(caught.value).startswith(f"bad.jsonl:{line}: ")


def test_a_client_line_goes_on_the_wire_compact_and_in_bounded_chunks() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"text": "é"}}
    assert b"".join(payload_chunks(JsonLine(message), True)) == dumps(message).encode() + b"\n"
    assert b"".join(payload_chunks(RawLine(b"\xffraw"), False)) == b"\xffraw"
    repeat = RepeatLine("ab", 1_500_000, prefix="<", suffix=">")
    chunks = list(payload_chunks(repeat, True))
    assert b"".join(chunks) == b"<" + b"ab" * 1_500_000 + b">\n"
    assert max(map(len, chunks)) <= 1 << 20


def test_a_long_run_of_one_character_is_recorded_as_a_generated_line() -> None:
    assert client_payload(b"x" * 5000) == RepeatLine("x", 5000)
    assert client_payload(b"x" * 10) == RawLine(b"x" * 10)
    assert client_payload(b"x" * 4999 + b"y") == RawLine(b"x" * 4999 + b"y")
    assert client_payload(b"\xff" * 5000) == RawLine(b"\xff" * 5000)
    assert client_payload(b'{"id":1}') == JsonLine({"id": 1})


def test_server_environment_expands_the_tmp_placeholder_over_the_base() -> None:
    env = server_environment({"PATH": "/bin", "KEEP": "1"}, {"MEMORY_FILE_PATH": "{tmp}/memory.jsonl", "KEEP": "2"}, "/t/x")
    assert env == {"PATH": "/bin", "KEEP": "2", "MEMORY_FILE_PATH": "/t/x/memory.jsonl"}


def test_exit_status_names_the_signal_that_ended_a_process() -> None:
    assert exit_status(0) == 0
    assert exit_status(3) == 3
    assert exit_status(-signal.SIGTERM) == "SIGTERM"
    # The proxy itself exits as a shell reports such a child.
    assert (proxy_exit_code(0), proxy_exit_code(4), proxy_exit_code(-signal.SIGTERM)) == (0, 4, 143)


# --- era and identity -----------------------------------------------------------------------


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "2"},
}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def era_after(*client_messages: dict) -> str:
    facts = SessionFacts()
    for message in client_messages:
        facts = observe_client(facts, JsonLine(message))
    return era_of(facts)


def test_era_is_read_from_the_whole_session() -> None:
    initialize = request(1, "initialize", clientInfo={"name": "c", "version": "1"})
    modern = request(2, "tools/list", _meta=MODERN_META)
    assert era_after(initialize, request(2, "tools/list")) == "legacy"
    assert era_after(modern) == "modern"
    assert era_after(request(0, "server/discover", _meta=MODERN_META), initialize) == "legacy"
    assert era_after(initialize, modern) == "mixed"
    assert era_after(request(1, "tools/list"), notification("notifications/initialized")) == "none"
    assert era_after() == "none"


def test_client_and_server_identity_come_from_either_era() -> None:
    facts = observe_client(SessionFacts(), JsonLine(request(0, "server/discover", _meta=MODERN_META)))
    identified = response(0, _meta={SERVER_INFO: {"name": "s", "version": "9", "title": "S"}})
    facts = observe_server(facts, JsonLine(identified))
    facts = observe_server(facts, JsonLine(response(1, serverInfo={"name": "other"})))
    assert (facts.client, facts.server) == ({"name": "c", "version": "2"}, {"name": "s", "version": "9"})


# --- matcher --------------------------------------------------------------------------------


def matcher_for(*records: dict, volatile: tuple[str, ...] = (), header: dict | None = None) -> Matcher:
    transcript = parse_transcript("t.jsonl", lines(*records, header=header))
    return Matcher(transcript.steps, volatile_paths(transcript.header.volatile, [parse_pattern(path) for path in volatile]))


def play_all(matcher: Matcher) -> None:
    for position in matcher.barriers():
        matcher.performed(position)


def test_concurrent_responses_may_arrive_in_any_order() -> None:
    matcher = matcher_for(
        {"c2s": request(1, "a")}, {"c2s": request(2, "b")}, {"c2s": request(3, "c")},
        {"s2c": response(1)}, {"s2c": response(2)}, {"s2c": response(3)},
    )
    play_all(matcher)
    assert [step.line for step in matcher.outstanding()] == [5, 6, 7]
    for id_ in (3, 1, 2):
        assert matcher.accept(arrived(response(id_))) is None
    assert matcher.outstanding() == []


def test_only_lines_before_the_next_client_action_are_awaited() -> None:
    matcher = matcher_for({"s2c": notification("hello")}, {"c2s": request(1, "a")}, {"s2c": response(1)}, {"close_stdin": True})
    assert matcher.barriers() == [1, 3]
    assert [step.line for step in matcher.outstanding()] == [2]
    assert matcher.accept(arrived(notification("hello"))) is None
    matcher.performed(1)
    assert [step.line for step in matcher.outstanding()] == [4]


def test_a_wrong_value_fails_with_a_diff_naming_the_path() -> None:
    matcher = matcher_for({"c2s": request(1, "tools/list")}, {"s2c": response(1, tools=[{"name": "echo"}])})
    play_all(matcher)
    failure = matcher.accept(arrived(response(1, tools=[{"name": "echo2"}])))
    assert failure == Failure(
        3,
        "the server's message differs from the transcript",
        JsonLine(response(1, tools=[{"name": "echo"}])),
        3,
        arrived(response(1, tools=[{"name": "echo2"}])),
        (Difference(("result", "tools", 0, "name"), "echo", "echo2"),),
    )
    assert [step.line for step in matcher.outstanding()] == [3]


def test_default_header_and_command_line_volatile_paths_are_ignored() -> None:
    records = (
        {"c2s": request(1, "initialize")},
        {"s2c": response(1, serverInfo={"name": "s", "version": "1.0"})},
        {"c2s": request(2, "tools/call")},
        {"s2c": response(2, content=[{"type": "text", "text": "rendered one way"}])},
        {"c2s": request(3, "server/discover")},
        {"s2c": response(3, _meta={SERVER_INFO: {"name": "s", "version": "1.0"}}, stamp=1)},
    )
    header = {**HEADER, "volatile": ["result.content.*.text"]}
    matcher = matcher_for(*records, volatile=("result.stamp",), header=header)
    play_all(matcher)
    assert matcher.accept(arrived(response(1, serverInfo={"name": "s", "version": "7.7.7"}))) is None
    assert matcher.accept(arrived(response(2, content=[{"type": "text", "text": "rendered another"}]))) is None
    assert matcher.accept(arrived(response(3, _meta={SERVER_INFO: {"name": "s", "version": "8"}}, stamp=2))) is None


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (response(9), "request id 9, which no client message carries"),
        (response(1), "one message too many for request id 1"),
        (notification("notifications/tools/list_changed"), "a notification beyond"),
        (request(0, "roots/list"), "a request to the client beyond"),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, "id null"),
    ],
)
def test_an_extra_server_message_fails(message: dict, reason: str) -> None:
    matcher = matcher_for({"c2s": request(1, "ping")}, {"s2c": response(1)})
    play_all(matcher)
    assert matcher.accept(arrived(response(1))) is None
    failure = matcher.accept(arrived(message))
    assert failure is not None and reason in failure.summary and failure.line == 2
    assert failure.actual == arrived(message)


def test_a_response_cannot_come_before_its_request_is_sent() -> None:
    matcher = matcher_for({"c2s": request(1, "a")}, {"s2c": response(1)}, {"c2s": request(2, "b")}, {"s2c": response(2)})
    matcher.performed(0)
    failure = matcher.accept(arrived(response(2)))
    assert failure is not None and "request id 2, which the client has not sent yet" in failure.summary


def test_an_id_only_a_raw_client_line_carries_is_not_held_back() -> None:
    generated = {"prefix": '{"id":5,"x":"', "text": "y", "count": 9, "suffix": '"}'}
    matcher = matcher_for({"c2s_raw_repeat": generated}, {"s2c": response(5)})
    matcher.performed(0)
    assert matcher.accept(arrived(response(5))) is None


UPDATED = notification("notifications/resources/updated", uri="memory://knowledge-graph")


def test_a_message_the_transcript_has_after_an_unsent_client_line_is_early() -> None:
    matcher = matcher_for(
        {"c2s": request(1, "resources/subscribe")}, {"s2c": response(1)},
        {"c2s": request(2, "tools/call")}, {"s2c": UPDATED}, {"s2c": response(2)},
    )
    matcher.performed(0)
    assert matcher.accept(arrived(response(1))) is None
    failure = matcher.accept(arrived(UPDATED))
    assert failure is not None
    assert failure.summary == (
        "early server message after line 2: the transcript has it at line 5, after client line 4, which had not been sent yet"
    )
    assert (failure.line, failure.expected_line, failure.actual) == (5, 5, arrived(UPDATED))
    # Once the write is sent, the same message is on time.
    matcher.performed(2)
    assert matcher.accept(arrived(UPDATED)) is None


def test_an_update_on_a_listen_stream_before_the_write_that_causes_it_is_early() -> None:
    tagged = listen_notification(1, "notifications/resources/updated", uri="memory://knowledge-graph")
    matcher = matcher_for(
        {"c2s": request(1, "subscriptions/listen")},
        {"s2c": listen_notification(1, "notifications/subscriptions/acknowledged")},
        {"c2s": request(2, "tools/call")}, {"s2c": tagged}, {"s2c": response(2)},
    )
    matcher.performed(0)
    assert matcher.accept(arrived(listen_notification(1, "notifications/subscriptions/acknowledged"))) is None
    failure = matcher.accept(arrived(tagged))
    assert failure is not None and failure.summary.startswith("early server message after line 2")
    assert "after client line 4, which had not been sent yet" in failure.summary


def test_a_different_message_ahead_of_its_stream_is_unexpected_and_shown_against_the_held_back_one() -> None:
    matcher = matcher_for({"c2s": request(1, "a")}, {"s2c": response(1)}, {"close_stdin": True}, {"s2c": UPDATED})
    matcher.performed(0)
    other = notification("notifications/resources/updated", uri="other://x")
    failure = matcher.accept(arrived(other))
    assert failure is not None and failure.summary.startswith("unexpected server message after line 2: the next message")
    assert "after client action 4, which had not been sent yet" in failure.summary
    assert failure.differences == (Difference(("params", "uri"), "memory://knowledge-graph", "other://x"),)


def test_concurrency_the_transcript_shows_still_passes_in_any_order() -> None:
    matcher = matcher_for(
        {"c2s": request(1, "slow")}, {"c2s": request(2, "fast")},
        {"s2c": response(2)}, {"s2c": UPDATED}, {"s2c": response(1)}, {"c2s": request(3, "next")}, {"s2c": response(3)},
    )
    matcher.performed(0)
    matcher.performed(1)
    for message in (response(1), UPDATED, response(2)):
        assert matcher.accept(arrived(message)) is None
    matcher.performed(5)
    assert matcher.accept(arrived(response(3))) is None


def test_an_unexpected_message_is_shown_against_the_closest_outstanding_one() -> None:
    matcher = matcher_for(
        {"c2s": request(1, "listen")},
        {"s2c": listen_notification(1, "notifications/subscriptions/acknowledged", notifications={"toolsListChanged": True})},
        {"s2c": notification("notifications/message", level="info")},
    )
    play_all(matcher)
    wrong_subscription = listen_notification(
        2, "notifications/subscriptions/acknowledged", notifications={"toolsListChanged": True}
    )
    failure = matcher.accept(arrived(wrong_subscription))
    assert failure is not None and "request id 2, which no client message carries" in failure.summary
    assert failure.expected_line == 3
    assert failure.differences == (Difference(("params", "_meta", "io.modelcontextprotocol/subscriptionId"), 1, 2),)


def test_a_missing_message_stays_outstanding() -> None:
    matcher = matcher_for({"c2s": request(1, "a")}, {"s2c": notification("progress-ish")}, {"s2c": response(1)})
    play_all(matcher)
    assert matcher.accept(arrived(response(1))) is None
    assert [step.line for step in matcher.outstanding()] == [3]


def test_subscription_streams_are_independent_but_each_keeps_its_order() -> None:
    records = (
        {"c2s": request(1, "subscriptions/listen")},
        {"c2s": request(2, "subscriptions/listen")},
        {"s2c": listen_notification(1, "notifications/subscriptions/acknowledged")},
        {"s2c": listen_notification(2, "notifications/subscriptions/acknowledged")},
        {"s2c": listen_notification(1, "notifications/resources/updated", uri="memory://knowledge-graph")},
        {"s2c": response(1, resultType="complete", _meta={"io.modelcontextprotocol/subscriptionId": 1})},
    )
    in_order = matcher_for(*records)
    play_all(in_order)
    for record in (records[3], records[2], records[4], records[5]):
        assert in_order.accept(arrived(record["s2c"])) is None
    assert in_order.outstanding() == []

    closed_early = matcher_for(*records)
    play_all(closed_early)
    assert closed_early.accept(arrived(records[2]["s2c"])) is None
    failure = closed_early.accept(arrived(records[5]["s2c"]))
    assert failure is not None and failure.expected_line == 6
    assert failure.differences[0].path == ("method",)


def test_legacy_notifications_keep_their_order_among_themselves() -> None:
    first = notification("notifications/resources/updated", uri="a")
    second = notification("notifications/resources/updated", uri="b")
    matcher = matcher_for({"c2s": request(1, "call")}, {"s2c": first}, {"s2c": second}, {"s2c": response(1)})
    play_all(matcher)
    assert matcher.accept(arrived(response(1))) is None
    failure = matcher.accept(arrived(second))
    assert failure is not None and failure.differences == (Difference(("params", "uri"), "a", "b"),)


def test_progress_notifications_are_ordered_per_token() -> None:
    progress = [
        notification("notifications/progress", progressToken=token, progress=step)
        for token in ("a", "b")
        for step in (1, 2)
    ]
    matcher = matcher_for({"c2s": request(1, "x")}, *({"s2c": message} for message in progress))
    play_all(matcher)
    for message in (progress[2], progress[0], progress[3], progress[1]):
        assert matcher.accept(arrived(message)) is None


def test_raw_lines_must_match_byte_for_byte_including_their_end() -> None:
    matcher = matcher_for({"c2s_raw": "{"}, {"s2c_raw": "oops"}, {"s2c_raw": "end", "newline": False})
    play_all(matcher)
    failure = matcher.accept(ServerLine(RawLine(b"oops!")))
    assert failure is not None and failure.differences == (Difference((), "oops", "oops!"),)
    assert matcher.accept(ServerLine(RawLine(b"oops"))) is None
    failure = matcher.accept(ServerLine(RawLine(b"end")))
    assert failure is not None and "ended this line with a newline" in failure.summary
    assert matcher.accept(ServerLine(RawLine(b"end"), newline=False)) is None


def test_an_answer_to_an_unreadable_line_needs_no_request_id() -> None:
    parse_error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    matcher = matcher_for({"c2s_raw_b64": "/w=="}, {"s2c": parse_error})
    play_all(matcher)
    assert matcher.accept(arrived(parse_error)) is None


# --- real processes ---------------------------------------------------------------------------


class Peer:
    """A real process on real pipes, whose stdout lines are read with a bounded wait."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            self._lines.put(line)
        self._lines.put(b"")

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def receive(self) -> bytes:
        return self._lines.get(timeout=WAIT)

    def receive_all(self) -> bytes:
        return b"".join(iter(self.receive, b""))

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=WAIT)


def conformance(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conformance", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def converse(command: list[str]) -> tuple[bytes, int]:
    """A legacy session with bad input in it; returns every byte the client got, and the exit status."""
    peer = Peer(command)
    client_info = {"name": "test-client", "version": "0.1"}
    initialize = request(1, "initialize", protocolVersion="2025-11-25", capabilities={}, clientInfo=client_info)
    peer.send(json.dumps(initialize).encode() + b"\n")
    received = [peer.receive()]
    peer.send(json.dumps(notification("notifications/initialized")).encode() + b"\n")
    peer.send(json.dumps(request(2, "tools/list")).encode() + b"\n")
    received.append(peer.receive())
    peer.send(json.dumps(request(3, "tools/call", name="echo", arguments={"text": "héllo"})).encode() + b"\n")
    received += [peer.receive(), peer.receive()]
    peer.send(b"\xff\xfe not utf-8\n")
    received.append(peer.receive())
    peer.send(b"x" * 100_000 + b"\n")
    received.append(peer.receive())
    peer.send(json.dumps(request(4, "say_raw")).encode())
    assert peer.process.stdin is not None
    peer.process.stdin.close()
    received.append(peer.receive_all())
    return b"".join(received), peer.process.wait(timeout=WAIT)


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, int]:
    out = tmp_path_factory.mktemp("recorded") / "session.jsonl"
    received, status = converse([*RECORD, "--out", str(out), "--", *ECHO_SERVER])
    return out, received, status


def test_record_forwards_every_byte_unchanged_and_exits_with_the_servers_status(recorded: tuple[Path, bytes, int]) -> None:
    _, through_proxy, status = recorded
    direct, direct_status = converse(ECHO_SERVER)
    assert through_proxy == direct
    assert b"this line is not JSON\n" in through_proxy
    assert status == direct_status == 0


def test_record_writes_the_session_in_wire_order(recorded: tuple[Path, bytes, int]) -> None:
    out, _, _ = recorded
    header, *steps = read_records(out)
    assert header["transcript"] == 1 and header["era"] == "legacy"
    assert header["recorded"]["client"] == {"name": "test-client", "version": "0.1"}
    assert header["recorded"]["server"] == {"name": "echo-fixture", "version": "1.0.0"}
    assert header["recorded"]["command"] == ECHO_SERVER
    assert header["description"] == "legacy-era session of test-client with echo-fixture"
    kinds = [next(iter(step)) for step in steps]
    assert kinds == [
        "c2s", "s2c", "c2s", "c2s", "s2c", "c2s", "s2c", "s2c", "c2s_raw_b64", "s2c", "c2s_raw_repeat", "s2c",
        "c2s", "close_stdin", "s2c_raw", "s2c", "exit",
    ]
    assert steps[0]["c2s"]["method"] == "initialize"
    assert list(steps[0]["c2s"]) == ["jsonrpc", "id", "method", "params"]
    assert steps[7]["s2c"]["result"]["content"][0]["text"] == "héllo"
    assert steps[8] == {"c2s_raw_b64": "//4gbm90IHV0Zi04"}
    assert steps[10] == {"c2s_raw_repeat": {"text": "x", "count": 100_000}}
    assert steps[12] == {"c2s": request(4, "say_raw"), "newline": False}
    assert steps[14] == {"s2c_raw": "this line is not JSON"}
    assert steps[-1] == {"exit": 0}
    probe = out.parent / "same-umask"
    probe.touch()
    assert out.stat().st_mode == probe.stat().st_mode


def test_a_recording_replays_against_its_server(recorded: tuple[Path, bytes, int]) -> None:
    out, _, _ = recorded
    result = conformance("replay", str(out), "--env", "FIXTURE_VERSION=2.0.0", "--", *ECHO_SERVER)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == f"PASS {out}\n1 passed, 0 failed\n"


def test_a_recording_fails_against_a_server_that_answers_wrongly(recorded: tuple[Path, bytes, int]) -> None:
    out, _, _ = recorded
    result = conformance("replay", "--default-data", str(out), "--", *ECHO_SERVER, "--wrong")
    assert result.returncode == 1
    assert f"FAIL {out}\n  {out}:6: the server's message differs from the transcript" in result.stdout
    assert 'result.tools[0].name: expected "echo", got "echo2"' in result.stdout
    assert result.stdout.endswith("0 passed, 1 failed\n")


KEEP = {"keep": "the original line"}


def tamper(source: Path, target: Path, line: int, replacement: list[dict]) -> Path:
    text = source.read_text(encoding="utf-8").splitlines()
    original = text[line - 1]
    text[line - 1 : line] = [original if record is KEEP else json.dumps(record, ensure_ascii=False) for record in replacement]
    target.write_text("\n".join(text) + "\n", encoding="utf-8")
    return target


@pytest.mark.parametrize(
    ("line", "replacement", "expected"),
    [
        (
            9,
            [{"s2c": response(3, content=[{"type": "text", "text": "hello"}])}],
            [":9: the server's message differs", 'result.content[0].text: expected "hello", got "héllo"'],
        ),
        (
            8,
            [],
            [
                ":7: unexpected server message after line 7: a notification beyond those the transcript expects",
                '"method":"notifications/message"',
            ],
        ),
        (
            12,
            [{"s2c": notification("notifications/never")}, KEEP],
            [":12: no such server message came within 1 s", '"method":"notifications/never"'],
        ),
        (18, [{"exit": 1}], [":18: expected the server to exit with status 1; it exited with status 0"]),
        (
            16,
            [{"s2c_raw": "this line is JSON"}],
            [":16: the server's message differs", '(whole message): expected "this line is JSON", got "this line is not JSON"'],
        ),
    ],
    ids=["changed value", "deleted line", "added line", "exit status", "raw line"],
)
def test_a_tampered_recording_fails_naming_the_line(
    recorded: tuple[Path, bytes, int], tmp_path: Path, line: int, replacement: list[dict], expected: list[str]
) -> None:
    target = tamper(recorded[0], tmp_path / "tampered.jsonl", line, replacement)
    result = conformance("replay", "--default-data", str(target), "--timeout", "1", "--", *ECHO_SERVER)
    assert result.returncode == 1
    for fragment in expected:
        assert fragment in result.stdout, result.stdout


def test_a_reader_that_goes_away_does_not_change_the_verdict(recorded: tuple[Path, bytes, int], tmp_path: Path) -> None:
    broken = tamper(recorded[0], tmp_path / "broken.jsonl", 18, [{"exit": 2}])
    replaying = subprocess.Popen(
        [sys.executable, "-m", "conformance", "replay", "--default-data", str(recorded[0]), str(broken), "--", *ECHO_SERVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert replaying.stdout is not None and replaying.stderr is not None
    replaying.stdout.close()
    assert replaying.wait(timeout=WAIT) == 1
    assert replaying.stderr.read() == b""


def test_every_transcript_gets_a_verdict(recorded: tuple[Path, bytes, int], tmp_path: Path) -> None:
    broken = tamper(recorded[0], tmp_path / "broken.jsonl", 18, [{"exit": 2}])
    result = conformance("replay", "--default-data", str(broken), str(recorded[0]), "--", *ECHO_SERVER)
    assert result.returncode == 1
    assert f"FAIL {broken}" in result.stdout and f"PASS {recorded[0]}" in result.stdout
    assert result.stdout.endswith("1 passed, 1 failed\n")


def test_signals_are_recorded_forwarded_and_replayed(tmp_path: Path) -> None:
    out = tmp_path / "listen.jsonl"
    proxy = Peer([*RECORD, "--out", str(out), "--description", "closure on SIGTERM", "--", *ECHO_SERVER])
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    listen = request(7, "subscriptions/listen", _meta=meta, notifications={"toolsListChanged": True})
    proxy.send(json.dumps(listen).encode() + b"\n")
    acknowledged = json.loads(proxy.receive())
    assert acknowledged["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 7}
    proxy.process.send_signal(signal.SIGTERM)
    assert json.loads(proxy.receive()) == response(7, resultType="complete", _meta={"io.modelcontextprotocol/subscriptionId": 7})
    assert proxy.receive() == b""
    assert proxy.process.wait(timeout=WAIT) == 0

    header, *steps = read_records(out)
    assert (header["era"], header["description"]) == ("modern", "closure on SIGTERM")
    assert [next(iter(step)) for step in steps] == ["c2s", "s2c", "signal", "s2c", "exit"]
    assert steps[2] == {"signal": "SIGTERM"} and steps[4] == {"exit": 0}

    assert conformance("replay", "--default-data", str(out), "--", *ECHO_SERVER).returncode == 0
    wrong = conformance("replay", "--default-data", str(out), "--", *ECHO_SERVER, "--wrong")
    assert wrong.returncode == 1
    assert f"{out}:5: the server ended its output (it exited with status 3) before this message came" in wrong.stdout


def test_record_exits_with_the_server_keeping_the_line_the_client_was_writing(tmp_path: Path) -> None:
    out = tmp_path / "quit.jsonl"
    proxy = Peer([*RECORD, "--out", str(out), "--", *ECHO_SERVER])
    proxy.send(json.dumps(request(1, "quit")).encode() + b"\n" + b'{"jsonrpc": "2.0", "id": 2, "met')
    assert proxy.receive() == b""
    assert proxy.process.wait(timeout=WAIT) == 4
    assert read_records(out)[1:] == [
        {"c2s": request(1, "quit")},
        {"c2s_raw": '{"jsonrpc": "2.0", "id": 2, "met', "newline": False},
        {"exit": 4},
    ]
    assert conformance("replay", "--default-data", str(out), "--", *ECHO_SERVER).returncode == 0


def test_a_killed_recording_is_still_a_readable_transcript(tmp_path: Path) -> None:
    out, pidfile = tmp_path / "killed.jsonl", tmp_path / "server.pid"
    proxy = Peer([*RECORD, "--out", str(out), "--", *ECHO_SERVER], env={**os.environ, "FIXTURE_PIDFILE": str(pidfile)})
    proxy.send(json.dumps(request(1, "initialize")).encode() + b"\n")
    proxy.receive()
    proxy.process.kill()
    proxy.process.wait(timeout=WAIT)
    try:
        transcript = parse_transcript(str(out), out.read_bytes())
        assert [type(step) for step in transcript.steps] == [Send, Expect]
        assert transcript.header.era == "none"
    finally:
        # The orphaned server sees its input end and exits by itself; this only makes sure.
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def write_transcript(path: Path, *records: dict, header: dict | None = None) -> Path:
    path.write_bytes(lines(*records, header=header))
    return path


PARSE_ERROR = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
LONG_CALL_PREFIX = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{"text":"'
PING_ERROR = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no method ping"}}


def test_hand_written_bad_input_reaches_the_server_as_written(tmp_path: Path) -> None:
    transcript = write_transcript(
        tmp_path / "bad-input.jsonl",
        {"c2s_raw": "{\"jsonrpc\": \"2.0\", \"id\": 1, "},
        {"s2c": PARSE_ERROR},
        {"c2s_raw_b64": "gICA"},
        {"s2c": PARSE_ERROR},
        {"c2s_raw": ""},
        {"c2s_raw_repeat": {"text": "x", "count": 3_000_000}},
        {"s2c": PARSE_ERROR},
        {"c2s_raw_repeat": {"prefix": LONG_CALL_PREFIX, "text": "ab", "count": 1_000_000, "suffix": '"}}}'}},
        {"s2c": notification("notifications/message", level="info", data="echoing")},
        {"s2c": response(2, content=[{"type": "text", "text": "ab" * 1_000_000}])},
        {"c2s": request(3, "hold")},
        {"c2s": request(4, "hold")},
        {"c2s": request(5, "release")},
        {"s2c": response(3, held=True)},
        {"s2c": response(4, held=True)},
        {"s2c": response(5, released=2)},
        {"c2s": request(6, "say_raw"), "newline": False},
        {"close_stdin": True},
        {"s2c_raw": "this line is not JSON"},
        {"s2c": response(6)},
        {"exit": 0},
    )
    result = conformance("replay", "--default-data", str(transcript), "--", *ECHO_SERVER)
    assert result.returncode == 0, result.stdout


def test_a_hung_server_fails_the_transcript_and_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    transcript = write_transcript(
        tmp_path / "hang.jsonl",
        {"c2s": request(1, "hold")},
        {"s2c": response(1)},
        header={**HEADER, "env": {"FIXTURE_PIDFILE": str(pidfile)}},
    )
    result = conformance("replay", "--default-data", str(transcript), "--timeout", "0.5", "--", *ECHO_SERVER, "--stubborn")
    assert result.returncode == 1
    assert f"{transcript}:3: no such server message came within 0.5 s" in result.stdout
    assert_gone(int(pidfile.read_text()))


def test_a_server_that_will_not_exit_fails_the_exit_check_and_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    # The signal follows an answer, so the server is up and has set its handlers when it comes.
    transcript = write_transcript(
        tmp_path / "stubborn.jsonl",
        {"c2s": request(1, "ping")},
        {"s2c": PING_ERROR},
        {"signal": "SIGTERM"},
        {"close_stdin": True},
        {"exit": 0},
    )
    result = conformance(
        "replay", str(transcript), "--timeout", "1", "--env", f"FIXTURE_PIDFILE={pidfile}", "--", *ECHO_SERVER, "--stubborn"
    )
    assert result.returncode == 1
    assert f"{transcript}:6: expected the server to exit with status 0; it had not exited after 1 s" in result.stdout
    assert_gone(int(pidfile.read_text()))


def assert_gone(pid: int) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"process {pid} outlived the replay")


def test_each_transcript_gets_a_fresh_temporary_directory_removed_afterwards(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    transcript = write_transcript(
        tmp_path / "tmp.jsonl",
        {"c2s": request(1, "ping")},
        {"s2c": PING_ERROR},
        header={**HEADER, "env": {"FIXTURE_PIDFILE": "{tmp}/server.pid"}},
    )
    env = {**os.environ, "TMPDIR": str(scratch)}
    result = conformance("replay", "--default-data", str(transcript), str(transcript), "--", *ECHO_SERVER, env=env)
    assert result.returncode == 0, result.stdout
    assert list(scratch.iterdir()) == []


def test_record_keeps_its_env_in_the_header_for_replay(tmp_path: Path) -> None:
    out = tmp_path / "env.jsonl"
    proxy = Peer([*RECORD, "--out", str(out), "--env", "FIXTURE_PIDFILE={tmp}/pid", "--", *ECHO_SERVER])
    proxy.send(json.dumps(request(1, "initialize")).encode() + b"\n")
    proxy.receive()
    assert proxy.close() == 0
    header = read_records(out)[0]
    assert header["env"] == {"FIXTURE_PIDFILE": "{tmp}/pid"}
    assert conformance("replay", "--default-data", str(out), "--", *ECHO_SERVER).returncode == 0


# --- usage errors -----------------------------------------------------------------------------


def test_help_describes_every_command() -> None:
    for command in ("record", "replay", "check"):
        result = conformance(command, "--help")
        assert result.returncode == 0 and "SERVER COMMAND" in result.stdout


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["replay", "t.jsonl"], "give the server command after --"),
        (["replay", "--", "server"], "required: FILE"),
        (["replay", "t.jsonl", "--env", "NOEQUALS", "--", "server"], "expected KEY=VALUE"),
        (["replay", "t.jsonl", "--timeout", "0", "--", "server"], "out of range"),
        (["replay", "t.jsonl", "--timeout", "soon", "--", "server"], "not a number"),
        (["replay", "t.jsonl", "--quiet-period", "-1", "--", "server"], "out of range"),
        (["replay", "t.jsonl", "--volatile", "a..b", "--", "server"], "expected a key"),
        (["record", "--", "server"], "--out"),
        (["record", "--out", "x.jsonl"], "give the server command after --"),
        (["launch"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2_with_a_reason(arguments: list[str], fragment: str) -> None:
    result = conformance(*arguments)
    assert result.returncode == 2
    assert fragment in result.stderr


def test_replay_refuses_a_malformed_or_missing_transcript_before_running_anything(tmp_path: Path) -> None:
    good = write_transcript(tmp_path / "good.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(lines({"c2s": {}}) + b'{"exit": "later"}\n')
    result = conformance("replay", "--default-data", str(good), str(bad), "--", *ECHO_SERVER)
    assert (result.returncode, result.stdout) == (2, "")
    assert f"{bad}:3: exit must be a status 0-255 or a signal name" in result.stderr
    missing = conformance("replay", "--default-data", str(tmp_path / "absent.jsonl"), "--", *ECHO_SERVER)
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_a_server_that_cannot_start_is_a_usage_error(tmp_path: Path) -> None:
    transcript = write_transcript(tmp_path / "t.jsonl")
    result = conformance("replay", "--default-data", str(transcript), "--", str(tmp_path / "no-such-server"))
    assert result.returncode == 2 and "cannot start" in result.stderr
    out = tmp_path / "never.jsonl"
    record = conformance("record", "--out", str(out), "--", str(tmp_path / "no-such-server"))
    assert record.returncode == 2 and "cannot start" in record.stderr
    assert not out.exists()


def test_record_refuses_an_unwritable_transcript_path(tmp_path: Path) -> None:
    result = conformance("record", "--out", str(tmp_path / "no" / "dir" / "t.jsonl"), "--", *ECHO_SERVER)
    assert result.returncode == 2 and "No such file or directory" in result.stderr


# --- early messages from a real server ---------------------------------------------------------


SUBSCRIBE_UPDATES = REPO / "conformance" / "corpus" / "parity" / "legacy-subscribe-updates.jsonl"
MEMORY_SERVER = [sys.executable, "-m", "memory_server"]


@pytest.mark.parametrize("mode", ["--early", "--spurious"])
def test_an_update_sent_before_the_write_it_announces_fails_as_early(mode: str) -> None:
    meddler = [sys.executable, str(FIXTURES / "early_updates.py"), mode, "--", *MEMORY_SERVER]
    result = conformance("replay", str(SUBSCRIBE_UPDATES), "--", *meddler)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (f"{SUBSCRIBE_UPDATES}:8: early server message after line 5: the transcript has it at line 8, "
            "after client line 7, which had not been sent yet") in result.stdout
    # The server behind the proxy passes on its own: the verdict is about the early update alone.
    assert conformance("replay", str(SUBSCRIBE_UPDATES), "--", *MEMORY_SERVER).returncode == 0


# --- replay never runs a server on its default data silently ----------------------------------


@pytest.fixture
def installed_elsewhere(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of this project's server whose default memory file (beside its package) holds a user's memory."""
    app = tmp_path / "app"
    for package in ("memory_server", "protocol"):
        shutil.copytree(REPO / package, app / package, ignore=shutil.ignore_patterns("__pycache__", "memory.json*"))
    memory = app / "memory_server" / "memory.jsonl"
    memory.write_text('{"type":"entity","name":"My_Dentist","entityType":"person","observations":["Tuesday 9:00"]}\n')
    return app, memory


def replay_in(app: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Replay from `app`, so that `python -m memory_server` is the copy there (the current directory comes first)."""
    return subprocess.run([sys.executable, "-m", "conformance", "replay", *arguments, "--", *MEMORY_SERVER],
                          cwd=app, capture_output=True, text=True, timeout=120)


def without_env(source: Path, target: Path) -> Path:
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    del records[0]["env"]
    target.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return target


def test_a_transcript_without_env_is_refused_rather_than_run_on_the_users_memory(
    installed_elsewhere: tuple[Path, Path], tmp_path: Path
) -> None:
    app, memory = installed_elsewhere
    users_memory = memory.read_bytes()
    transcript = without_env(REPO / "conformance" / "corpus" / "parity" / "legacy-build-and-query.jsonl", tmp_path / "t.jsonl")
    refused = replay_in(app, str(transcript))
    assert (refused.returncode, refused.stdout) == (2, "")
    assert f"{transcript}: no env in the header, so the server would run on its default data" in refused.stderr
    assert "--env 'MEMORY_FILE_PATH={tmp}/memory.jsonl'" in refused.stderr and "--default-data" in refused.stderr
    assert memory.read_bytes() == users_memory

    # Pointed at throwaway data, it replays green and the user's memory is untouched.
    throwaway = replay_in(app, str(transcript), "--env", "MEMORY_FILE_PATH={tmp}/memory.jsonl")
    assert throwaway.returncode == 0, throwaway.stdout
    assert memory.read_bytes() == users_memory

    # Asked for knowingly, the server runs on its default data: the very file the refusal protected.
    knowingly = replay_in(app, str(transcript), "--default-data")
    assert knowingly.returncode == 1, knowingly.stdout  # the user's entity shows up in the answers
    assert memory.read_bytes() != users_memory and b"My_Dentist" in memory.read_bytes()


def test_a_transcript_that_sets_the_servers_environment_needs_no_flag(installed_elsewhere: tuple[Path, Path]) -> None:
    app, memory = installed_elsewhere
    users_memory = memory.read_bytes()
    result = replay_in(app, str(REPO / "conformance" / "corpus" / "parity" / "legacy-build-and-query.jsonl"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert memory.read_bytes() == users_memory


# --- options as the usage line writes them ------------------------------------------------------


def test_volatile_takes_several_paths_after_one_flag_or_one_per_flag(tmp_path: Path) -> None:
    transcript = write_transcript(
        tmp_path / "two-paths.jsonl",
        {"c2s": request(1, "initialize")},
        {"s2c": response(1, protocolVersion="2025-11-25", capabilities={"tools": {}},
                         serverInfo={"name": "another-name", "version": "1.0.0"})},
        {"c2s": request(2, "tools/call", name="echo", arguments={"text": "hi"})},
        {"s2c": notification("notifications/message", level="info", data="echoing")},
        {"s2c": response(2, content=[{"type": "text", "text": "another text"}])},
    )
    usage = conformance("replay", "--help").stdout
    assert "[--volatile PATH ...]" in usage
    paths = ("result.serverInfo.name", "result.content.*.text")
    for arguments in (["--volatile", *paths], ["--volatile", paths[0], "--volatile", paths[1]]):
        result = conformance("replay", str(transcript), "--default-data", *arguments, "--", *ECHO_SERVER)
        assert (result.returncode, result.stderr) == (0, ""), result.stdout + result.stderr
    only_one = conformance("replay", str(transcript), "--default-data", "--volatile", paths[0], "--", *ECHO_SERVER)
    assert only_one.returncode == 1 and 'result.content[0].text: expected "another text", got "hi"' in only_one.stdout


# --- the console script, with absolute paths, from anywhere --------------------------------------


BIN = Path(sys.executable).parent
HARNESS_MANUAL = REPO / "docs" / "conformance.md"


def bare_environment() -> dict[str, str]:
    """A client's environment: no virtual environment active, nothing of it on PATH."""
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep) if Path(part) != BIN) or "/usr/bin"
    return env


def test_the_console_script_records_and_replays_from_anywhere(tmp_path: Path) -> None:
    script = BIN / "mcp-conformance"
    out = tmp_path / "session.jsonl"
    env = bare_environment()
    server = [str(BIN / "mcp-server-memory")]
    proxy = subprocess.Popen([str(script), "record", "--out", str(out), "--env", "MEMORY_FILE_PATH={tmp}/memory.jsonl",
                              "--", *server], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path, env=env)
    client_info = {"name": "test-client", "version": "0.1"}
    lines_in = [request(1, "initialize", protocolVersion="2025-11-25", capabilities={}, clientInfo=client_info),
                notification("notifications/initialized"), request(2, "tools/list")]
    stdout, _ = proxy.communicate(b"".join(json.dumps(line).encode() + b"\n" for line in lines_in), timeout=WAIT)
    assert proxy.returncode == 0 and len(stdout.splitlines()) == 2
    header = read_records(out)[0]
    assert header["recorded"]["with"] == "mcp-conformance record" and header["era"] == "legacy"
    replayed = subprocess.run([str(script), "replay", str(out), "--", *server], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    assert (replayed.returncode, replayed.stdout) == (0, f"PASS {out}\n1 passed, 0 failed\n"), replayed.stderr


def manual_recording_configurations() -> list[dict]:
    """The client configurations of the harness manual's section on recording, as JSON."""
    section = HARNESS_MANUAL.read_text(encoding="utf-8").split("\n## Recording\n", 1)[1].split("\n## ", 1)[0]
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, flags=re.DOTALL)]
    return [server for block in blocks for server in (block.get("mcpServers") or block.get("servers") or {}).values()]


def test_the_manuals_recording_configurations_work_verbatim_once_the_path_is_filled_in(tmp_path: Path) -> None:
    configurations = manual_recording_configurations()
    assert len(configurations) == 2
    for number, configuration in enumerate(configurations):
        words = [configuration["command"], *configuration["args"]]
        assert all(not word.startswith("/path/to") or word.startswith("/path/to/mcp-server-memory/.venv/bin/") for word in words)
        assert configuration["command"].endswith("/.venv/bin/mcp-conformance")
        out = tmp_path / f"session-{number}.jsonl"
        filled = [word.replace("/path/to/mcp-server-memory/.venv/bin", str(BIN)) for word in words]
        filled[filled.index("--out") + 1] = str(out)
        client = subprocess.Popen(filled, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path,
                                  env={**bare_environment(), "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")})
        ping = json.dumps(request(1, "ping")).encode() + b"\n"
        stdout, _ = client.communicate(ping, timeout=WAIT)
        assert client.returncode == 0 and json.loads(stdout) == response(1)
        # The client closes its end at once, so the answer may be recorded before or after the close.
        kinds = [next(iter(record)) for record in read_records(out)[1:]]
        assert sorted(kinds) == ["c2s", "close_stdin", "exit", "s2c"] and kinds[0] == "c2s" and kinds[-1] == "exit"
