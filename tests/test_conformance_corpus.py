"""The corpus of transcripts in conformance/corpus/: every one replays against the real memory
server, the harness catches a wrong answer from it, and the corpus holds what it claims to.

sdk/ was recorded from the official `mcp` SDK client, edge/ from hand-written client lines,
parity/ from the npm reference server; the scripts beside them re-record them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import REPO

from conformance.diff import ABSENT, Difference, diff
from conformance.paths import PathSyntaxError, parse_pattern
from conformance.replay import ReplaySettings, replay
from conformance.report import format_failure
from conformance.transcript import (
    Expect,
    ExpectExit,
    RepeatLine,
    Send,
    SendSignal,
    Transcript,
    load_transcript,
    parse_transcript,
    render_header,
    repeat_size,
)
from conformance.wire import JsonLine

CORPUS = REPO / "conformance" / "corpus"
TRANSCRIPTS = sorted(CORPUS.rglob("*.jsonl"))
MEMORY_SERVER = (sys.executable, "-m", "memory_server")
# Generous: a replay that reaches it has failed; a passing one never comes close.
TIMEOUT = 30.0
NINE_TOOLS = {"create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
              "delete_relations", "read_graph", "search_nodes", "open_nodes"}


def named(path: Path) -> str:
    return str(path.relative_to(CORPUS))


def corpus(folder: str) -> list[Transcript]:
    return [load_transcript(path) for path in TRANSCRIPTS if path.parent.name == folder]


def client_messages(transcript: Transcript) -> list[dict[str, Any]]:
    return [step.payload.value for step in transcript.steps
            if isinstance(step, Send) and isinstance(step.payload, JsonLine) and isinstance(step.payload.value, dict)]


def server_messages(transcript: Transcript) -> list[dict[str, Any]]:
    return [step.wire.value for step in transcript.steps
            if isinstance(step, Expect) and isinstance(step.wire, JsonLine)]


THROWAWAY = {"MEMORY_FILE_PATH": "{tmp}/memory.jsonl"}
"""Where the replayed servers keep their memory: a fresh directory per transcript. They keep their
dates, as shipped: the matcher takes a dated field by its shape (conformance/dated.py)."""


def replay_cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "conformance", "replay", *arguments, "--env",
                           f"MEMORY_FILE_PATH={THROWAWAY['MEMORY_FILE_PATH']}", "--", *MEMORY_SERVER],
                          cwd=REPO, capture_output=True, text=True, timeout=4 * TIMEOUT)


def rewrite(source: Path, target: Path, change: Any) -> Path:
    """A copy of a transcript with `change` applied to each parsed line (header included)."""
    lines = [json.loads(text) for text in source.read_text(encoding="utf-8").splitlines()]
    target.write_text("".join(json.dumps(change(line), ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return target


# --- the whole corpus against the real server ------------------------------------------------------


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=named)
def test_the_memory_server_answers_as_the_transcript_says(path: Path) -> None:
    transcript = load_transcript(path)
    verdict = anyio.run(replay, transcript, ReplaySettings(MEMORY_SERVER, THROWAWAY, timeout=TIMEOUT))
    assert verdict.failure is None, format_failure(named(path), verdict.failure, verdict.stderr_tail)


@pytest.mark.reference_exact
@pytest.mark.parametrize("path", TRANSCRIPTS, ids=named)
def test_without_dates_the_memory_server_answers_exactly_as_recorded(path: Path) -> None:
    """The corpus was recorded without dates (parity/ from the reference): with MEMORY_DATES=off every
    answer is the recorded one, dated fields compared as exactly as any other value."""
    transcript = load_transcript(path)
    settings = ReplaySettings(MEMORY_SERVER, THROWAWAY, timeout=TIMEOUT, dates_by_shape=False)
    verdict = anyio.run(replay, transcript, settings)
    assert verdict.failure is None, format_failure(named(path), verdict.failure, verdict.stderr_tail)


def test_a_dated_server_fails_a_transcript_compared_exactly_naming_the_dates() -> None:
    path = CORPUS / "sdk" / "legacy.jsonl"
    settings = ReplaySettings(MEMORY_SERVER, THROWAWAY, timeout=TIMEOUT, dates_by_shape=False)
    verdict = anyio.run(replay, load_transcript(path), settings)
    assert verdict.failure is not None
    shown = format_failure(named(path), verdict.failure, verdict.stderr_tail)
    assert "createdAt" in shown or "observationDates" in shown, shown


def test_a_changed_expected_value_fails_against_the_real_server_naming_its_path(tmp_path: Path) -> None:
    source = CORPUS / "sdk" / "legacy.jsonl"
    read_graph_ids = [message["id"] for message in client_messages(load_transcript(source))
                      if message.get("params", {}).get("name") == "read_graph"]

    def born_a_year_later(line: dict[str, Any]) -> dict[str, Any]:
        message = line.get("s2c", {})
        if message.get("id") == read_graph_ids[0]:
            message["result"]["structuredContent"]["entities"][0]["observations"][1] = "Born in 1816"
        return line

    tampered = rewrite(source, tmp_path / "legacy.jsonl", born_a_year_later)
    line = next(number for number, text in enumerate(tampered.read_text().splitlines(), start=1) if "1816" in text)
    outcome = replay_cli(str(tampered), "--timeout", str(TIMEOUT))
    assert outcome.returncode == 1, outcome.stdout + outcome.stderr
    assert f"FAIL {tampered}\n  {tampered}:{line}: the server's message differs from the transcript" in outcome.stdout
    assert ('result.structuredContent.entities[0].observations[1]: expected "Born in 1816", got "Born in 1815"'
            in outcome.stdout), outcome.stdout
    assert outcome.stdout.endswith("0 passed, 1 failed\n")


def test_without_its_volatile_paths_a_parity_transcript_fails_on_our_deliberate_differences(tmp_path: Path) -> None:
    def strict(line: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in line.items() if key != "volatile"}

    stripped = rewrite(CORPUS / "parity" / "legacy-handshake-and-resource.jsonl", tmp_path / "strict.jsonl", strict)
    outcome = replay_cli(str(stripped), "--timeout", str(TIMEOUT))
    assert outcome.returncode == 1
    assert f"{stripped}:3: the server's message differs from the transcript" in outcome.stdout
    for difference in ('result.serverInfo.title: expected (absent), got "Knowledge Graph Memory"',
                       "result.capabilities.tools.listChanged: expected true, got (absent)",
                       "result.instructions: expected (absent), got "):
        assert difference in outcome.stdout, outcome.stdout


# --- what the corpus holds ------------------------------------------------------------------------


def test_every_transcript_starts_from_an_empty_memory_and_ends_with_the_servers_exit_0() -> None:
    assert {path.parent.name for path in TRANSCRIPTS} == {"sdk", "edge", "parity"}
    for path in TRANSCRIPTS:
        transcript = load_transcript(path)
        assert transcript.header.env == {"MEMORY_FILE_PATH": "{tmp}/memory.jsonl"}, path
        assert transcript.header.description, path
        assert transcript.steps[-1] == ExpectExit(0, transcript.steps[-1].line), path


@pytest.mark.parametrize("name", ["legacy.jsonl", "auto.jsonl", "modern-2026-07-28.jsonl"])
def test_each_sdk_session_uses_all_nine_tools_the_resource_and_live_updates(name: str) -> None:
    transcript = load_transcript(CORPUS / "sdk" / name)
    sent = client_messages(transcript)
    methods = {message.get("method") for message in sent}
    assert {message["params"]["name"] for message in sent if message.get("method") == "tools/call"} == NINE_TOOLS
    assert {"resources/list", "resources/read"} <= methods
    updates = [message for message in server_messages(transcript)
               if message.get("method") == "notifications/resources/updated"]
    assert len(updates) == 6, "one per write that changed the graph, none after the updates were turned off"
    if transcript.header.era == "legacy":
        assert {"initialize", "resources/subscribe", "resources/unsubscribe"} <= methods
    else:
        [listen] = [message["id"] for message in sent if message.get("method") == "subscriptions/listen"]
        assert all(update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen for update in updates)
        assert any(message.get("method") == "notifications/cancelled" and message["params"]["requestId"] == listen
                   for message in sent)
        assert "initialize" not in methods


def test_the_sigterm_session_ends_its_listen_with_the_graceful_closure() -> None:
    transcript = load_transcript(CORPUS / "sdk" / "modern-listen-sigterm.jsonl")
    [listen] = [message["id"] for message in client_messages(transcript)
                if message.get("method") == "subscriptions/listen"]
    signal_at = next(position for position, step in enumerate(transcript.steps) if isinstance(step, SendSignal))
    assert transcript.steps[signal_at].name == "SIGTERM"
    after = server_messages(Transcript(transcript.source, transcript.header, transcript.steps[signal_at:]))
    assert [message["id"] for message in after] == [listen]
    assert after[0]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen


@pytest.mark.parametrize("name", ["legacy-oversize-line.jsonl", "modern-oversize-line.jsonl"])
def test_the_over_long_lines_are_sent_in_full_but_stored_in_a_few_bytes(name: str) -> None:
    path = CORPUS / "edge" / name
    generated = [step.payload for step in load_transcript(path).steps
                 if isinstance(step, Send) and isinstance(step.payload, RepeatLine)]
    assert [repeat_size(line) > 17 * 1024 * 1024 for line in generated] == [True]
    assert path.stat().st_size < 8 * 1024


def test_the_parity_set_comes_from_the_reference_and_stays_off_our_deliberate_differences() -> None:
    transcripts = corpus("parity")
    assert len(transcripts) == 4
    for transcript in transcripts:
        assert transcript.header.era == "legacy"
        assert transcript.header.recorded["server"] == {"name": "memory-server", "version": "0.6.3"}
        assert "server-memory" in " ".join(transcript.header.recorded["command"])
        assert "Left out on purpose" in transcript.header.description
        sent = client_messages(transcript)
        assert "tools/list" not in {message.get("method") for message in sent}
        answers = server_messages(transcript)
        assert not any(message.get("result", {}).get("isError") for message in answers)
        assert not any("error" in message for message in answers)
        volatile = {pattern.source for pattern in transcript.header.volatile}
        assert {"result.instructions?", "result.content.*.text", "result.contents.*.text"} <= volatile


# --- the optional volatile paths the parity set relies on -------------------------------------------


def test_an_optional_volatile_path_also_accepts_a_field_only_one_side_has() -> None:
    optional = [parse_pattern("result.instructions?")]
    assert optional[0].optional and optional[0].segments == parse_pattern("result.instructions").segments
    ours = {"result": {"protocolVersion": "2025-11-25", "instructions": "Remember things."}}
    theirs = {"result": {"protocolVersion": "2025-11-25"}}
    assert diff(theirs, ours, optional) == []
    assert diff(ours, theirs, optional) == []
    assert diff(ours, {"result": {"protocolVersion": "2025-11-25", "instructions": "Other."}}, optional) == []
    assert diff(theirs, ours, [parse_pattern("result.instructions")]) == [
        Difference(("result", "instructions"), ABSENT, "Remember things.")]
    assert diff(theirs, {"result": {"protocolVersion": "2025-06-18"}}, optional) == [
        Difference(("result", "protocolVersion"), "2025-11-25", "2025-06-18")]


@pytest.mark.parametrize("source", ["?", "a??", "a?.b", "a[?]"])
def test_a_misplaced_optional_mark_is_refused(source: str) -> None:
    with pytest.raises(PathSyntaxError):
        parse_pattern(source)


def test_an_optional_path_survives_a_header_round_trip_and_the_command_line(tmp_path: Path) -> None:
    header = b'{"transcript": 1, "era": "legacy", "volatile": ["result.structuredContent.notFound?"]}\n'
    parsed = parse_transcript("t.jsonl", header)
    assert json.loads(render_header(parsed.header))["volatile"] == ["result.structuredContent.notFound?"]
    usage = replay_cli(str(CORPUS / "edge" / "legacy-sigterm.jsonl"), "--volatile", "a??")
    assert usage.returncode == 2 and "a??" in usage.stderr


# --- the recording scripts refuse wrong answers -----------------------------------------------------


@pytest.fixture
def scripted_client() -> Any:
    sys.path.insert(0, str(CORPUS))
    try:
        import scripted_client

        yield scripted_client
    finally:
        sys.path.remove(str(CORPUS))


def test_a_recording_script_refuses_an_answer_the_protocol_does_not_allow(scripted_client: Any, tmp_path: Path) -> None:
    client = scripted_client
    script = client.Script("wrong.jsonl", "a ping expected to fail", (
        client.say(client.request("ping", "ping"), client.error("ping", -32601)),
    ))
    with pytest.raises(client.ScriptFailed) as refused:
        client.play(script, tmp_path / "wrong.jsonl", MEMORY_SERVER)
    message = str(refused.value)
    assert message.startswith("wrong.jsonl: after ") and "expected error -32601 for id 'ping'" in message
    assert "'result': {}" in message


def test_a_recording_script_keeps_notes_and_the_short_form_of_a_long_line(scripted_client: Any, tmp_path: Path) -> None:
    client = scripted_client
    long_query = RepeatLine("y", 5000, '{"jsonrpc":"2.0","id":"q","method":"ping","params":{"q":"', '"}}')
    script = client.Script("fine.jsonl", "a ping, then a long one", (
        client.say(client.request("ping", "ping"), client.result("ping", exactly={}), note="before any era"),
        client.say(long_query, client.result("q", exactly={})),
    ), volatile=("result.instructions?",))
    out = tmp_path / "fine.jsonl"
    client.play(script, out, MEMORY_SERVER)
    client.finish_transcript(script, out)
    header, first, _, second, *_ = [json.loads(text) for text in out.read_text().splitlines()]
    assert header["volatile"] == ["result.instructions?"] and header["description"] == "a ping, then a long one"
    assert first["note"] == "before any era"
    assert second == {"c2s_raw_repeat": {"text": "y", "count": 5000, "prefix": long_query.prefix,
                                         "suffix": long_query.suffix}}
    assert anyio.run(replay, load_transcript(out), ReplaySettings(MEMORY_SERVER, THROWAWAY, timeout=TIMEOUT)).failure is None
