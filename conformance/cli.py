"""``python -m conformance record|replay``: the command line over the recorder and the replayer."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import anyio

from conformance.paths import PathSyntaxError, Pattern, parse_pattern
from conformance.record import RecordStartError, record
from conformance.replay import ReplaySettings, ServerStartError, Verdict, replay
from conformance.report import format_failure
from conformance.transcript import DEFAULT_VOLATILE, Transcript, TranscriptError, load_transcript

EXIT_PASSED: Final = 0
EXIT_MISMATCH: Final = 1
EXIT_USAGE: Final = 2

_DESCRIPTION = """\
Record what an MCP client and a stdio server say to each other, then replay the
client's side against any stdio server and check that it answers the same way.
The server command always comes last, after --."""

_RECORD_HELP = """\
Run as a transparent proxy in place of the server: a client launches this command,
which launches SERVER COMMAND, forwards every byte both ways unchanged, writes the
transcript line by line and exits with the server's status. For example, in a
client's configuration: python -m conformance record --out session.jsonl -- mcp-server-memory"""

_REPLAY_HELP = f"""\
For each transcript, start a fresh server, send the client's lines and check the
server's. Responses match requests by id in any order; notifications match in order
per stream; values compare exactly except at volatile paths (always:
{", ".join(DEFAULT_VOLATILE)}). Exit status: 0 when every transcript matches, 1 when one
does not, 2 on usage errors."""


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    own, server = _split_at_separator(arguments)
    parser = _parser()
    options = parser.parse_args(own)
    if not server:
        parser.error(f"give the server command after --: python -m conformance {options.command} ... -- SERVER ARGS")
    if options.command == "record":
        return _record(options, server)
    return _replay(options, server)


def _split_at_separator(arguments: list[str]) -> tuple[list[str], list[str]]:
    if "--" not in arguments:
        return arguments, []
    cut = arguments.index("--")
    return arguments[:cut], arguments[cut + 1 :]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=_DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, metavar="{record,replay}")

    recorder = commands.add_parser(
        "record",
        help="proxy a live session and write its transcript",
        description=_RECORD_HELP,
        usage="python -m conformance record --out FILE [--description TEXT] [--env KEY=VALUE ...] "
        "-- SERVER COMMAND...",
    )
    recorder.add_argument(
        "--out", required=True, type=Path, metavar="FILE", help="transcript file to write (replaced if it exists)"
    )
    recorder.add_argument(
        "--description", default="", metavar="TEXT", help="what the session shows (default: who talked to whom)"
    )
    recorder.add_argument(
        "--env",
        action="append",
        default=[],
        type=_env_pair,
        metavar="KEY=VALUE",
        help="set for the server and kept in the header for replay; {tmp} is a fresh temporary directory",
    )

    replayer = commands.add_parser(
        "replay",
        help="play transcripts against a server and compare",
        description=_REPLAY_HELP,
        usage="python -m conformance replay FILE... [--env KEY=VALUE ...] [--timeout SECONDS] "
        "[--quiet-period SECONDS] [--volatile PATH ...] -- SERVER COMMAND...",
    )
    replayer.add_argument("files", nargs="+", type=Path, metavar="FILE", help="transcript files")
    replayer.add_argument(
        "--env",
        action="append",
        default=[],
        type=_env_pair,
        metavar="KEY=VALUE",
        help="server environment, over the transcript header's; {tmp} is a fresh temporary directory "
        "per transcript",
    )
    replayer.add_argument(
        "--timeout",
        type=_seconds(allow_zero=False),
        default=10.0,
        metavar="SECONDS",
        help="longest wait for any one thing (default 10)",
    )
    replayer.add_argument(
        "--quiet-period",
        type=_seconds(allow_zero=True),
        default=0.3,
        metavar="SECONDS",
        help="how long to watch for extra messages after the last line (default 0.3)",
    )
    replayer.add_argument(
        "--volatile",
        action="append",
        default=[],
        type=_pattern,
        metavar="PATH",
        help='a path whose value may differ, e.g. result.content.*.text or result._meta["x/y"].z; '
        "a final ? also accepts the field missing on one side, e.g. result.instructions?",
    )
    return parser


def _env_pair(text: str) -> tuple[str, str]:
    name, separator, value = text.partition("=")
    if not separator or not name:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return name, value


def _seconds(allow_zero: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not (value > 0 or (allow_zero and value == 0)) or value == float("inf"):
            raise argparse.ArgumentTypeError(f"out of range: {text!r}")
        return value

    return parse


def _pattern(text: str) -> Pattern:
    try:
        return parse_pattern(text)
    except PathSyntaxError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _record(options: argparse.Namespace, server: list[str]) -> int:
    try:
        return anyio.run(record, options.out, options.description, server, dict(options.env))
    except (RecordStartError, OSError) as error:
        print(f"conformance record: {error}", file=sys.stderr)
        return EXIT_USAGE


def _replay(options: argparse.Namespace, server: list[str]) -> int:
    try:
        transcripts = [load_transcript(path) for path in options.files]
    except TranscriptError as error:
        print(f"conformance replay: {error}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:
        print(f"conformance replay: cannot read {error.filename}: {error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    settings = ReplaySettings(
        tuple(server), dict(options.env), tuple(options.volatile), options.timeout, options.quiet_period
    )
    try:
        verdicts = anyio.run(_replay_each, transcripts, settings)
    except ServerStartError as error:
        print(f"conformance replay: {error}", file=sys.stderr)
        return EXIT_USAGE
    failed = sum(verdict.failure is not None for verdict in verdicts)
    _report(f"{len(verdicts) - failed} passed, {failed} failed")
    return EXIT_MISMATCH if failed else EXIT_PASSED


async def _replay_each(transcripts: list[Transcript], settings: ReplaySettings) -> list[Verdict]:
    verdicts = []
    for transcript in transcripts:
        verdict = await replay(transcript, settings)
        _report(_verdict_text(verdict))
        verdicts.append(verdict)
    return verdicts


def _report(text: str) -> None:
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # The reader went away (`| head`): the run goes on and the exit status still tells the verdict.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _verdict_text(verdict: Verdict) -> str:
    source = verdict.transcript.source
    if verdict.failure is None:
        return f"PASS {source}"
    return f"FAIL {source}\n{format_failure(source, verdict.failure, verdict.stderr_tail)}"
