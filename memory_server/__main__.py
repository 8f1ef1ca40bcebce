"""`mcp-server-memory` / `python -m memory_server`: serve the memory over stdio, or run one of the
commands that look after the memory file (stats, check, export, import: see commands.py)."""

from __future__ import annotations

import gc
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__

if TYPE_CHECKING:
    import argparse

    from .storage.interface import MemoryStore

DESCRIPTION = """\
Knowledge-graph memory for MCP clients, served over stdio to both protocol eras
(2025-11-25 and older with initialize; 2026-07-28 with per-request _meta).

The memory is one JSONL file. Set MEMORY_FILE_PATH to choose it: an absolute path
is used as is, a leading ~ is your home directory, a relative path is resolved
against the package directory ({server_dir}).
Unset, it is {server_dir}/memory.jsonl,
which a reinstall deletes: keep your memory outside the installation.
Several clients may share one file: writes take turns through <file>.lock.

A team's memory can live in PostgreSQL instead (needs the postgres extra: from
the clone, pip install '.[postgres]'): set MEMORY_DATABASE_URL to a libpq URI,
postgresql://user:password@host:port/dbname, and MEMORY_NAME to pick one memory
in that database (default "default"; letters, digits, - and _). Many servers may
serve one memory, and many memories live side by side in one database.
MEMORY_FILE_PATH and MEMORY_DATABASE_URL cannot both be set.

MEMORY_ANSWER_BUDGET caps what one answer of read_graph, search_nodes or open_nodes
gives the model, in characters (default 80000, at least 5000); a larger answer comes
in pages, each with a nextCursor to pass back as cursor.

Every MEMORY_* and MCP_MEMORY_* setting is checked at start: a bad one ends the server
(or command) with one line naming it and what it accepts, and exit status 2.
"""


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from .cli.commands import add_commands

    server_dir = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(
        prog="mcp-server-memory",
        description=DESCRIPTION.format(server_dir=server_dir),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Point your MCP client (Claude Desktop, VS Code, ...) at this command; it speaks on stdin/stdout.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_http_options(parser)
    add_commands(parser)
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def add_http_options(parser: argparse.ArgumentParser) -> None:
    http = parser.add_argument_group("Streamable HTTP (needs the http extra: from the clone, pip install '.[http]')")
    http.add_argument("--http", metavar="[HOST:]PORT",
                      help="serve one memory to many clients at http://HOST:PORT/mcp instead of stdio "
                           "(HOST defaults to 127.0.0.1); a bearer token is read from MCP_MEMORY_HTTP_TOKEN")
    http.add_argument("--allow-unauthenticated", action="store_true",
                      help="serve on a non-loopback address without MCP_MEMORY_HTTP_TOKEN")
    http.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                      help="a browser origin allowed besides loopback ones (repeatable)")


def main(argv: list[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else argv
    if not arguments:
        # How clients start the server: nothing to parse, so argparse and the commands stay
        # unimported while a client waits for the first answer.
        serve()
        return
    args = parse_args(arguments)
    if args.command is not None:
        from .settings import check_or_exit

        check_or_exit(os.environ)
        from .cli.commands import run as run_command
        from .cli.database import where_the_memory_is

        args.run = where_the_memory_is(args.run)
        sys.exit(run_command(args))
    serve(http=args.http, allow_unauthenticated=args.allow_unauthenticated, allowed_origins=args.allow_origin)


def serve(*, http: str | None = None, allow_unauthenticated: bool = False, allowed_origins: list[str] | None = None) -> None:
    # Imports make many objects and no garbage worth a collection: the collector waits until they
    # are all done (a client waits for the first answer), and then leaves what they made alone.
    gc.disable()
    from .settings import check_or_exit

    # Every setting is checked before the memory is opened or a protocol message is read (settings.py 3.).
    check_or_exit(os.environ)
    # Imported after argument parsing so that --help and --version touch nothing.
    from .model.dates import clock_from
    from .storage.choice import StoreChoiceError, database_from, open_database

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    # The one logging set-up of the process: every module logs to its own logger (__name__), to stderr.
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")

    store: MemoryStore
    try:
        database = database_from(os.environ)
        if database is not None:
            from .retrieval.meaning import MEANING

            store = open_database(database, clock=clock_from(os.environ), meaning=MEANING)
            log(f"Knowledge Graph MCP Server: {store.where}")
    except StoreChoiceError as error:
        raise SystemExit(f"mcp-server-memory: {error}") from None
    if database is None:
        from .storage.paths import fragile_location_warning, resolve_memory_path
        from .storage.store import GraphStore

        server_dir = Path(__file__).resolve().parent
        path = resolve_memory_path(os.environ, server_dir, log)
        log(f"Knowledge Graph MCP Server: memory file {path}")
        if warning := fragile_location_warning(path, server_dir):
            log(warning)
        from .retrieval.semantic import after_first_search, keep_vectors_at
        from .retrieval.vectors import vectors_path

        # The first start's word index comes after the first answer by meaning (store G7).
        store = GraphStore(path, clock=clock_from(os.environ), index_after=after_first_search)

        real = Path(os.path.realpath(path))
        keep_vectors_at(vectors_path(real), real.name)
    try:
        _serve_store(store, http, allow_unauthenticated, allowed_origins,
                     database_url=database.url if database is not None else None)
    finally:
        _close_background(store)


def _serve_store(store: MemoryStore, http: str | None, allow_unauthenticated: bool,
                 allowed_origins: list[str] | None, *, database_url: str | None) -> None:
    # The file is read and hashed (and its cache opened) while the protocol engine is imported,
    # and the model loads meanwhile.
    store.look_ahead()
    _prepare_meaning()
    from .app import build_server

    # The server's lifespan closes the store when serving ends (end of input, SIGTERM: app.py 1).
    server = build_server(store)
    gc.freeze()
    gc.enable()
    if http is not None:
        from .http import serve_http

        serve_http(server, http, allow_unauthenticated=allow_unauthenticated,
                   allowed_origins=allowed_origins or [],
                   database_url=database_url)
        return
    from protocol import run_stdio

    run_stdio(server)


def _prepare_meaning() -> None:
    """Start loading the semantic model (and its side file of vectors) in the background now, while
    the protocol engine is imported and the memory file read, so that the first search by meaning
    finds it loaded (retrieval/semantic 1). The file's reading and hashing, and part of
    onnxruntime's work, let go of the interpreter and overlap the imports; started 0.1 s after
    serving, as it was, the load came last (spawn to the first answer by meaning: docs/semantic.md)."""
    from .retrieval import semantic

    semantic.prepare()


def _close_background(store: MemoryStore) -> None:
    """After serving: every thread of the process's Background is stopped and joined (no thread may
    be inside onnxruntime when the interpreter ends), then the vectors' side file is written from
    the memory as the store holds it now (retrieval/vectors.py V4)."""
    from .background import close_process

    close_process()
    if (semantic := sys.modules.get(f"{__package__}.retrieval.semantic")) is not None:
        semantic.close(getattr(store, "graph_in_memory", None))


if __name__ == "__main__":
    main()
