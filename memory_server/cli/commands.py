"""The subcommands of `mcp-server-memory`: stats, check, export, import.

Each command is a table row: its arguments and a runner. Runners do the I/O (read the memory
file, write the output, print for people on stdout, progress on stderr) around the pure modules
(inspection, export, importer, graph). Every failure a person can cause (a missing or unreadable
file, a file that is no memory, a locked memory) is a :class:`CommandError`: one line on stderr
and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from ..storage.paths import (
    fragile_location_warning,
    memory_path_for_reading,
    resolve_memory_path,
)
from .text import counted

if TYPE_CHECKING:
    from ..model.graph import Graph
    from .importer import Incoming

# The modules that do a command's work are imported by its runner: serving (no command) is the
# common case, and a client waits for the server's start-up.

# The package directory (memory_server/), where the default memory file lives, as the reference keeps it beside its script.
SERVER_DIR: Final = Path(__file__).resolve().parent.parent
PROGRESS_ABOVE: Final = 10_000
"""Items (entities plus relations) beyond which a command reports its progress on stderr."""
NEWLINE: Final = b"\n"
EXPORT_FORMATS: Final = ("jsonl", "json", "graphml", "dot", "markdown", "html")
"""The keys of export.EXPORTERS, spelled out so that parsing the command line need not import it."""
PRIVATE_EXPORT: Final = 0o600
"""An export's mode unless --mode says otherwise: it holds what the memory holds."""
TROUBLE: Final = 2
"""Exit status when a command could not do its work (as diff and grep use it)."""


class CommandError(Exception):
    """What went wrong, for a person; nothing was changed."""


# --------------------------------------------------------------------------------------------
# Shared edges: which file, reading it, progress
# --------------------------------------------------------------------------------------------


def memory_file(args: argparse.Namespace, *, for_writing: bool = False) -> Path:
    """--file (against the working directory, ~ expanded), else MEMORY_FILE_PATH as the server resolves it."""
    if args.file is not None:
        return Path(os.path.abspath(os.path.expanduser(args.file)))
    if for_writing:
        return resolve_memory_path(os.environ, SERVER_DIR, lambda line: print(line, file=sys.stderr, flush=True))
    return memory_path_for_reading(os.environ, SERVER_DIR)


def _where(args: argparse.Namespace) -> str:
    if args.file is not None:
        return "given with --file"
    if os.environ.get("MEMORY_FILE_PATH"):
        return f"from MEMORY_FILE_PATH={os.environ['MEMORY_FILE_PATH']}"
    return "the default, as MEMORY_FILE_PATH is not set"


def read_bytes(path: Path, what: str) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file (or a symlink to one), opened without waiting: a FIFO or a device
    named on the command line is refused, as the server refuses it, rather than hanging."""
    from ..osio import NotARegularFile, kind_of, open_regular, read_all

    try:
        fd = open_regular(path, follow=True, advice=f"give the path of a {what}")
        try:
            return read_all(fd), os.fstat(fd)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise CommandError(f"there is no {what} at {path}") from None
    except NotARegularFile as error:
        try:
            kind = kind_of(os.stat(path).st_mode)
        except OSError:
            raise CommandError(f"cannot read the {what}: {error.strerror}") from None
        raise CommandError(f"{path} is {kind}, not a {what}") from None
    except OSError as error:
        raise CommandError(f"cannot read the {what} {path}: {error.strerror}") from None


def read_memory(args: argparse.Namespace) -> tuple[Path, bytes, os.stat_result]:
    path = memory_file(args)
    try:
        data, status = read_bytes(path, "memory file")
    except CommandError as error:
        hint = " A server creates it on its first write." if not path.exists() else ""
        raise CommandError(f"{error} ({_where(args)}).{hint} Pass --file PATH to look at another file.") from None
    return path, data, status


class Progress:
    """Progress lines on stderr, for large jobs or when a person watches the terminal."""

    def __init__(self, label: str, total: int, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.label = label
        self.total = total
        self.done = 0
        self.enabled = total > PROGRESS_ABOVE or _is_terminal(self.stream)
        self._tenths = 1  # the next tenth of the work to report

    def say(self, message: str) -> None:
        if self.enabled:
            print(f"{self.label}: {message}", file=self.stream, flush=True)

    def tick(self) -> None:
        self.done += 1
        if self.enabled and self.total > 0 and self.done * 10 >= self._tenths * self.total:
            self.say(f"{self.done:,} of {self.total:,} items ({100 * self.done // max(self.total, 1)}%)")
            while self.done * 10 >= self._tenths * self.total:
                self._tenths += 1


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False



def human_size(size: int) -> str:
    if size < 1024:
        return counted(size, "byte", "bytes")
    value = float(size)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            return f"{value:.1f} {unit} ({size:,} bytes)"
    return f"{size:,} bytes"


def _local_time(timestamp: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


# --------------------------------------------------------------------------------------------
# stats
# --------------------------------------------------------------------------------------------


def run_stats(args: argparse.Namespace) -> int:
    from ..model.graph import graph_from_lines
    from .inspection import FilePlace, count_extended, describe_stats, numbered_lines, stats

    path, data, status = read_memory(args)
    lines = numbered_lines(data)
    figures = stats(graph_from_lines(line for _, line in lines), extended_records=count_extended(lines), top=args.top)
    from ..osio import read_regular
    from ..storage.files import rejected_path_for

    side_file = rejected_path_for(path)
    try:
        set_aside: int | None = read_regular(side_file).count(NEWLINE)
    except FileNotFoundError:
        set_aside = 0
    except OSError as error:
        set_aside = None
        print(f"mcp-server-memory stats: cannot read {side_file}: {error.strerror}", file=sys.stderr)
    place = FilePlace(path, human_size(status.st_size), _local_time(status.st_mtime), side_file, set_aside,
                      fragile_location_warning(path, SERVER_DIR))
    print("\n".join(describe_stats(figures, place, top=args.top, check_command=f"mcp-server-memory check{_file_option(args)}")))
    return 0


def _file_option(args: argparse.Namespace) -> str:
    return "" if args.file is None else f" --file {args.file}"


# --------------------------------------------------------------------------------------------
# check
# --------------------------------------------------------------------------------------------


def run_check(args: argparse.Namespace) -> int:
    from ..model.graph import graph_from_lines
    from .inspection import check, numbered_lines

    path, data, _ = read_memory(args)
    lines = numbered_lines(data)
    findings = check(lines)
    graph = graph_from_lines(line for _, line in lines)
    contents = (f"{counted(len(lines), 'line', 'lines')}: {counted(len(graph.entities), 'entity', 'entities')}, "
                f"{counted(len(graph.relations), 'relation', 'relations')}")
    if not findings:
        print(f"{path}: {contents}; every line is usable. Nothing to do.")
        return 0
    print(f"{path}: {contents}; {counted(len(findings), 'line needs', 'lines need')} attention:")
    for finding in findings:
        print(f"  line {finding.line}: {finding.kind}: {finding.message}")
    return 1


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------


def run_export(args: argparse.Namespace) -> int:
    from ..model.graph import graph_from_lines
    from ..model.records import decode_file

    path, data, _ = read_memory(args)
    return export_graph(args, graph_from_lines(decode_file(data)), str(path), path.name, path)


def export_graph(args: argparse.Namespace, graph: Graph, where: str, name: str, memory_path: Path | None) -> int:
    """The export of `graph` (from `where`, titled after `name`) to stdout or --output, which must
    not be `memory_path` itself: the part of export a file and a database share."""
    from .export import EXPORTERS, ExportView

    progress = Progress(f"export {args.format}", len(graph.entities) + len(graph.relations))
    progress.say(f"{counted(len(graph.entities), 'entity', 'entities')} and "
                 f"{counted(len(graph.relations), 'relation', 'relations')} from {where}")
    view = ExportView.of(graph, title=f"Memory: {name}", tick=progress.tick)
    pieces = EXPORTERS[args.format](view)
    if args.output is None:
        _write_stream(pieces, sys.stdout.buffer)
        return 0
    target = Path(os.path.abspath(os.path.expanduser(args.output)))
    with suppress(OSError):
        if memory_path is not None and os.path.samefile(target, memory_path):
            raise CommandError(f"{target} is the memory file itself; export to another file")
    _write_file(pieces, target, args.mode)
    print(f"Wrote {target} ({args.format}): {counted(len(graph.entities), 'entity', 'entities')}, "
          f"{counted(len(graph.relations), 'relation', 'relations')}.")
    return 0


def _write_stream(pieces: Iterable[str], stream: IO[bytes]) -> None:
    for piece in pieces:
        stream.write(piece.encode())
    stream.flush()


def _write_file(pieces: Iterable[str], target: Path, mode: int = PRIVATE_EXPORT) -> None:
    """Whole or not at all: a new temporary file next to the target, with a name nobody can guess
    (created O_EXCL|O_NOFOLLOW, so nothing planted under it is followed or written into), private
    (0600) from its first byte like the memory it comes from, fsynced, then renamed over the
    target (a symlink at the target's name is replaced, never followed). ``mode``, when the user
    asked for another, is set before the rename, so the target never has any other."""
    from ..osio import NotARegularFile, open_regular
    from ..storage.files import fsync_directory

    temporary = target.with_name(f".{target.name}.{secrets.token_hex(16)}.tmp")
    try:
        fd = open_regular(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, private=True)
    except (NotARegularFile, OSError) as error:
        raise CommandError(f"cannot write {target}: {error.strerror}") from None
    try:
        with open(fd, "wb", closefd=True) as stream:
            _write_stream(pieces, stream)
            if mode != PRIVATE_EXPORT and hasattr(os, "fchmod"):
                os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except OSError as error:
        with suppress(OSError):
            temporary.unlink()
        raise CommandError(f"cannot write {target}: {error.strerror}") from None
    fsync_directory(target.parent)


# --------------------------------------------------------------------------------------------
# import
# --------------------------------------------------------------------------------------------


def read_import(args: argparse.Namespace) -> tuple[Path, Incoming, Progress]:
    """The file to import, read and parsed, with the progress of its import: the part of import a
    file and a database share."""
    from .importer import ImportFormatError, parse_import, summary, total_items

    source = Path(os.path.expanduser(args.source))
    data, _ = read_bytes(source, "file to import")
    try:
        incoming = parse_import(data)
    except ImportFormatError as error:
        raise CommandError(f"{source} is not a memory to import: {error}") from None
    progress = Progress("import", total_items(incoming))
    progress.say(f"read {summary(incoming)} from {source}")
    return source, incoming, progress


def run_import(args: argparse.Namespace) -> int:
    from ..model.graph import GraphError
    from .importer import describe_merge, summary

    source, incoming, progress = read_import(args)
    target = memory_file(args, for_writing=not args.dry_run)
    try:
        if args.dry_run:
            value, notes = _merge_preview(target, incoming), []
        else:
            progress.say(f"merging into {target} under its lock")
            from ..model.dates import clock_from
            from ..storage.store import GraphStore  # the lock machinery is needed by this command only

            outcome = GraphStore(target, clock=clock_from(os.environ)).merge(incoming.entities, incoming.relations)
            value, notes = outcome.value, outcome.notes
    except GraphError as error:
        raise CommandError(f"{error}") from None
    heading = "Dry run, nothing was changed. Importing" if args.dry_run else "Imported"
    print(f"{heading} {source} ({summary(incoming)}) into {target}:")
    for line in describe_merge(value, incoming, dry_run=args.dry_run):
        print(f"  {line}")
    for note in notes:
        print(f"  {note}")
    progress.say("done")
    return 0


def _merge_preview(target: Path, incoming: Incoming) -> dict[str, Any]:
    from ..model.graph import graph_from_lines
    from ..model.records import decode_file
    from ..model.writes import merge_graph

    try:
        data, _ = read_bytes(target, "memory file")
    except CommandError:
        if target.exists():
            raise
        data = b""  # a memory not written yet: everything would be new
    graph: Graph = graph_from_lines(decode_file(data))
    return merge_graph(graph, incoming.entities, incoming.relations).value


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


class Command:
    """One row of the table (a plain class: a dataclass costs start-up time to create)."""

    __slots__ = ("name", "summary", "description", "arguments", "run")

    def __init__(self, name: str, summary: str, description: str,
                 arguments: Callable[[argparse.ArgumentParser], None],
                 run: Callable[[argparse.Namespace], int]) -> None:
        self.name = name
        self.summary = summary
        self.description = description
        self.arguments = arguments
        self.run = run


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a count of at least 1")
    return value


def _stats_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--top", type=_at_least_one, default=10, metavar="N", help="how many of the most connected entities "
                        "to list (default: 10)")


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def _file_mode(text: str) -> int:
    try:
        value = int(text, 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o777:
        raise argparse.ArgumentTypeError(f"{text} is not a file mode in octal, such as 600 or 644")
    return value


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", required=True, choices=EXPORT_FORMATS, help="the output format")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE (replaced whole once complete) "
                        "instead of stdout")
    parser.add_argument("--mode", type=_file_mode, default=PRIVATE_EXPORT, metavar="OCTAL",
                        help="the mode of FILE (default: 600, private like the memory it comes from)")


def _import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="FILE", help="a memory.jsonl or memory.json of this server or of the "
                        "reference server, or an export in jsonl or json")
    parser.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")


COMMANDS: Final = (
    Command("stats", "what the memory holds, in figures",
            "Where the memory file is, its size and last change, its entities, relations and observations, "
            "entity and relation types with counts, the most connected entities, and what is kept aside.",
            _stats_arguments, run_stats),
    Command("check", "report every line the server cannot use; exit 1 if any",
            "Reads the memory file as the server does and reports, with line numbers, every line it cannot "
            "use (not JSON, not a record), repeated entities and relations, repeated observations, and "
            "relations whose entities are missing. Exit status 0 when all is well, 1 when something needs "
            "attention, 2 when the file cannot be read. Never changes the file.",
            _no_arguments, run_check),
    Command("export", "the graph as jsonl, json, graphml, dot, markdown or html",
            "jsonl: the memory file as the reference server writes it; json: the reference's read_graph "
            "answer; graphml and dot: for Gephi, yEd, Cytoscape, Graphviz; markdown: one section per entity, "
            "to read; html: one self-contained page with an interactive picture of the graph.",
            _export_arguments, run_export),
    Command("import", "merge a memory file or an export into the memory",
            "Merges FILE into the memory by the tools' rules: new entities are created, existing ones gain "
            "the observations they lack (their type stays), relations are created where both entities exist; "
            "everything left out is reported. One write under the memory file's lock, so running servers "
            "see one change.",
            _import_arguments, run_import),
)


def add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     title="commands (without one, the server runs on stdio)")
    for command in COMMANDS:
        sub = commands.add_parser(command.name, help=command.summary, description=command.description,
                                  prog=f"{parser.prog} {command.name}")
        sub.add_argument("--file", metavar="PATH", help="the memory file (default: MEMORY_FILE_PATH, resolved as "
                         "the server resolves it; a relative PATH is against the working directory)")
        command.arguments(sub)
        sub.set_defaults(run=command.run)


def run(args: argparse.Namespace) -> int:
    """Runs the chosen command; its exit status."""
    try:
        return int(args.run(args))
    except CommandError as error:
        print(f"mcp-server-memory {args.command}: error: {error}", file=sys.stderr, flush=True)
        return TROUBLE
    except BrokenPipeError:
        # The reader (`| head`) has gone: what is left to write has nowhere to go.
        with suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return TROUBLE
    except KeyboardInterrupt:
        return 130
