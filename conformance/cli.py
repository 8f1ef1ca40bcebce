"""``mcp-conformance record|replay|check`` (also ``python -m conformance``): the command line over the
recorder, the replayer and the protocol check."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import anyio

from conformance.check import CheckSettings, requirement_ids, run_check
from conformance.check_report import as_json, format_text
from conformance.paths import PathSyntaxError, Pattern, parse_pattern
from conformance.probe import ServerStartError as CheckStartError
from conformance.record import RecordStartError, record
from conformance.replay import ReplaySettings, ServerStartError, Verdict, replay
from conformance.report import format_failure
from conformance.transcript import DEFAULT_VOLATILE, Transcript, TranscriptError, load_transcript

EXIT_PASSED: Final = 0
EXIT_MISMATCH: Final = 1
EXIT_USAGE: Final = 2
PROG: Final = "mcp-conformance"
SPEC_ENV: Final = "MCP_SPEC_DIR"

_DESCRIPTION = """\
Record what an MCP client and a stdio server say to each other, then replay the
client's side against any stdio server and check that it answers the same way;
or check any stdio server against the protocol requirements every server shares.
The server command always comes last, after --."""

_RECORD_HELP = """\
Run as a transparent proxy in place of the server: a client launches this command,
which launches SERVER COMMAND, forwards every byte both ways unchanged, writes the
transcript line by line and exits with the server's status. For example, in a
client's configuration: /path/to/.venv/bin/mcp-conformance record --out /tmp/session.jsonl
-- /path/to/.venv/bin/mcp-server-memory"""

_REPLAY_HELP = f"""\
For each transcript, start a fresh server, send the client's lines and check the
server's. Responses match requests by id in any order; notifications match in order
per stream; values compare exactly except at volatile paths (always:
{", ".join(DEFAULT_VOLATILE)}). Where the server's data goes is yours to say, never the
transcript's: give --env to point the server at throwaway data, or --default-data to run
it on its defaults knowingly; without either nothing runs. Of a header's env only values
inside {{tmp}} are applied; others are reported and left out. Exit status: 0
when every transcript matches, 1 when one does not, 2 on usage errors."""

_CHECK_HELP = """\
Check a stdio server against protocol requirements every MCP server shares,
whatever its tools: the handshake of each era it claims (initialize; server/discover
for 2026-07-28), ping, unknown methods, invalid params, malformed lines, cancellation,
which methods exist in which era, and the shapes of tools/list and resources/list
against the era's official schema.json. Each requirement runs against a fresh server
process; the server is never asked to call a tool or read a resource. What the
server does not claim is reported as not supported. Exit status: 0 when no
requirement fails, 1 when one does, 2 on usage errors."""


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    own, server = _split_at_separator(arguments)
    parser = _parser()
    options = parser.parse_args(own)
    if not server:
        parser.error(f"give the server command after --: {PROG} {options.command} ... -- SERVER ARGS")
    if options.command == "record":
        return _record(options, server)
    if options.command == "check":
        return _check(options, server)
    return _replay(options, server)


def _split_at_separator(arguments: list[str]) -> tuple[list[str], list[str]]:
    if "--" not in arguments:
        return arguments, []
    cut = arguments.index("--")
    return arguments[:cut], arguments[cut + 1 :]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=_DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, metavar="{record,replay,check}")

    recorder = commands.add_parser(
        "record",
        help="proxy a live session and write its transcript",
        description=_RECORD_HELP,
        usage=f"{PROG} record --out FILE [--description TEXT] [--env KEY=VALUE ...] -- SERVER COMMAND...",
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
        usage=f"{PROG} replay FILE... [--env KEY=VALUE ...] [--default-data] [--timeout SECONDS] "
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
        "--default-data",
        action="store_true",
        help="run the server on its default data (and on what this environment names); without this "
        "or --env, no server is started, whatever the transcripts' headers say",
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
        action="extend",
        nargs="+",
        default=[],
        type=_pattern,
        metavar="PATH",
        help='paths whose value may differ, e.g. result.content.*.text or result._meta["x/y"].z; '
        "a final ? also accepts the field missing on one side, e.g. result.instructions?; "
        "--volatile a b and --volatile a --volatile b are the same",
    )

    checker = commands.add_parser(
        "check",
        help="check a server against the protocol requirements every server shares",
        description=_CHECK_HELP,
        usage=f"{PROG} check [--json] [--verbose] [--spec DIR] [--env KEY=VALUE ...] [--timeout SECONDS] "
        "[--only REQUIREMENT ...] -- SERVER COMMAND...",
    )
    checker.add_argument("--json", action="store_true", help="print the report as JSON, every exchange included")
    checker.add_argument(
        "--verbose", "-v", action="store_true", help="show the exchange of every requirement, not only of those that fail"
    )
    checker.add_argument(
        "--spec",
        type=Path,
        metavar="DIR",
        help=f"a directory holding <version>/schema.json, such as the spec repository's schema/ folder "
        f"(default: ${SPEC_ENV}); without it the shape checks are reported as not checked",
    )
    checker.add_argument(
        "--env",
        action="append",
        default=[],
        type=_env_pair,
        metavar="KEY=VALUE",
        help="set for every server process; {tmp} is a fresh temporary directory per process",
    )
    checker.add_argument(
        "--timeout",
        type=_seconds(allow_zero=False),
        default=5.0,
        metavar="SECONDS",
        help="longest wait for any one answer (default 5)",
    )
    checker.add_argument(
        "--only",
        action="extend",
        nargs="+",
        default=[],
        choices=requirement_ids(),
        metavar="REQUIREMENT",
        help="run only these requirements (ids as in the report)",
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
    if not options.env and not options.default_data:
        print(_default_data_refusal([transcript.source for transcript in transcripts]), file=sys.stderr)
        return EXIT_USAGE
    settings = ReplaySettings(
        tuple(server), dict(options.env), tuple(options.volatile), options.timeout, options.quiet_period,
        options.default_data,
    )
    try:
        verdicts = anyio.run(_replay_each, transcripts, settings)
    except ServerStartError as error:
        print(f"conformance replay: {error}", file=sys.stderr)
        return EXIT_USAGE
    failed = sum(verdict.failure is not None for verdict in verdicts)
    _report(f"{len(verdicts) - failed} passed, {failed} failed")
    return EXIT_MISMATCH if failed else EXIT_PASSED


def _default_data_refusal(sources: list[str]) -> str:
    return (
        f"conformance replay: {', '.join(sources)}: nothing was run: the data a server runs on is named on "
        "the command line, never by a transcript (its header may say anything, and its steps may delete "
        "what they find). Point the server at throwaway data with --env, e.g. "
        "--env 'MEMORY_FILE_PATH={tmp}/memory.jsonl' ({tmp} is a fresh directory per transcript), "
        "or pass --default-data if the server keeps no data or its defaults are throwaway."
    )


def _check(options: argparse.Namespace, server: list[str]) -> int:
    spec = options.spec or (Path(os.environ[SPEC_ENV]) if os.environ.get(SPEC_ENV) else None)
    if spec is not None and not spec.is_dir():
        print(f"conformance check: --spec {spec}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    settings = CheckSettings(tuple(server), dict(options.env), spec, options.timeout, tuple(options.only))
    start_errors: list[CheckStartError] = []
    try:
        report = anyio.run(run_check, settings)
    except* CheckStartError as group:
        # Server processes start side by side: each that could not start says so, and one is enough.
        start_errors.extend(error for error in group.exceptions if isinstance(error, CheckStartError))
    if start_errors:
        print(f"conformance check: {start_errors[0]}", file=sys.stderr)
        return EXIT_USAGE
    _report(json.dumps(as_json(report), indent=2, ensure_ascii=False) if options.json else format_text(report, options.verbose))
    return EXIT_MISMATCH if report.count("fail") else EXIT_PASSED


async def _replay_each(transcripts: list[Transcript], settings: ReplaySettings) -> list[Verdict]:
    verdicts = []
    for transcript in transcripts:
        verdict = await replay(transcript, settings)
        if verdict.ignored_env:
            print(f"conformance replay: {transcript.source}: the header's env {', '.join(verdict.ignored_env)} "
                  "not applied (only values inside {tmp} are); give them with --env to apply them",
                  file=sys.stderr)
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
