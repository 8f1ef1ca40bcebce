"""What a plain start of the server loads: clients start one per chat, so the modules only a
subcommand or a later call needs stay out of the way of the first answer."""

from __future__ import annotations

import json
import subprocess
import sys

from memory_server.commands import EXPORT_FORMATS
from memory_server.export import EXPORTERS

# Imported only by `mcp-server-memory stats | check | export | import`.
COMMAND_MODULES = ("memory_server.export", "memory_server.importer", "memory_server.inspection",
                   "memory_server.html_view")


def test_the_export_formats_offered_on_the_command_line_are_the_exporters() -> None:
    assert EXPORT_FORMATS == tuple(EXPORTERS)


def test_serving_imports_no_subcommand_module() -> None:
    # What `mcp-server-memory` imports before it serves: the argument parsing of __main__, then
    # what serve() imports. Checked in a fresh interpreter, as the console script starts one.
    program = (
        "import json, sys\n"
        "from memory_server import __main__ as main\n"
        "args = main.parse_args([])\n"
        "assert args.command is None\n"
        "import memory_server.app, memory_server.paths, memory_server.store, protocol.stdio\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(json.loads(done.stdout))
    assert "memory_server.app" in loaded
    assert loaded.isdisjoint(COMMAND_MODULES), sorted(loaded & set(COMMAND_MODULES))
