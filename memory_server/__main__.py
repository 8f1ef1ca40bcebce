"""`mcp-server-memory` / `python -m memory_server`: serve the memory over stdio."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import __version__

DESCRIPTION = """\
Knowledge-graph memory for MCP clients, served over stdio to both protocol eras
(2025-11-25 and older with initialize; 2026-07-28 with per-request _meta).

The memory is one JSONL file. Set MEMORY_FILE_PATH to choose it: an absolute path
is used as is, a relative one is resolved against the package directory
({server_dir}). Unset, it is {server_dir}/memory.jsonl.
Several clients may share one file: writes take turns through <file>.lock.
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    server_dir = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(
        prog="mcp-server-memory",
        description=DESCRIPTION.format(server_dir=server_dir),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Point your MCP client (Claude Desktop, VS Code, ...) at this command; it speaks on stdin/stdout.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_http_options(parser)
    return parser.parse_args(argv)


def add_http_options(parser: argparse.ArgumentParser) -> None:
    http = parser.add_argument_group("Streamable HTTP (needs the http extra: pip install 'kg-memory-mcp[http]')")
    http.add_argument("--http", metavar="[HOST:]PORT",
                      help="serve one memory to many clients at http://HOST:PORT/mcp instead of stdio "
                           "(HOST defaults to 127.0.0.1); a bearer token is read from MCP_MEMORY_HTTP_TOKEN")
    http.add_argument("--allow-unauthenticated", action="store_true",
                      help="serve on a non-loopback address without MCP_MEMORY_HTTP_TOKEN")
    http.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                      help="a browser origin allowed besides loopback ones (repeatable)")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # Imported after argument parsing so that --help and --version touch nothing.
    from .app import build_server
    from .paths import resolve_memory_path
    from .store import GraphStore

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    path = resolve_memory_path(os.environ, Path(__file__).resolve().parent, log)
    log(f"Knowledge Graph MCP Server: memory file {path}")
    server = build_server(GraphStore(path))
    if args.http is not None:
        from .http import serve_http

        serve_http(server, args.http, allow_unauthenticated=args.allow_unauthenticated,
                   allowed_origins=args.allow_origin)
        return
    server.run_stdio()


if __name__ == "__main__":
    main()
