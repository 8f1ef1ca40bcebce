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

MEMORY_ANSWER_BUDGET caps what one answer of read_graph, search_nodes or open_nodes
gives the model, in characters (default 80000, at least 5000); a larger answer comes
in pages, each with a nextCursor to pass back as cursor.
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    parse_args(argv)
    # Imported after argument parsing so that --help and --version touch nothing.
    from .app import build_server
    from .paths import resolve_memory_path
    from .store import GraphStore

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    path = resolve_memory_path(os.environ, Path(__file__).resolve().parent, log)
    log(f"Knowledge Graph MCP Server: memory file {path}")
    build_server(GraphStore(path)).run_stdio()


if __name__ == "__main__":
    main()
