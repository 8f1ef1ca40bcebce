"""What a plain start of the server loads: clients start one per chat, so the modules only a
subcommand or a later call needs stay out of the way of the first answer."""

from __future__ import annotations

import json
import subprocess
import sys

from memory_server.cli.commands import EXPORT_FORMATS
from memory_server.cli.export import EXPORTERS

# Imported only by `mcp-server-memory stats | check | export | import`.
COMMAND_MODULES = ("memory_server.cli.export", "memory_server.cli.importer", "memory_server.cli.inspection",
                   "memory_server.cli.html_view")


def test_the_export_formats_offered_on_the_command_line_are_the_exporters() -> None:
    assert EXPORT_FORMATS == tuple(EXPORTERS)


def modules_loaded_by_serving(argv: list[str]) -> set[str]:
    """What `mcp-server-memory ARGV` has imported once it serves: main() runs in a fresh
    interpreter, as the console script starts one, and the modules are listed at the start of the
    stdio runner (which then sees end of input and returns)."""
    program = (
        "import json, sys\n"
        "import protocol.stdio\n"
        "serve = protocol.stdio.run_stdio\n"
        "def listing(*args, **kwargs):\n"
        "    print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
        "protocol.stdio.run_stdio = listing\n"
        "from memory_server.__main__ import main\n"
        f"main({argv!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True,
                          stdin=subprocess.DEVNULL)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_serving_imports_no_subcommand_module() -> None:
    loaded = modules_loaded_by_serving([])
    assert "memory_server.app" in loaded
    assert loaded.isdisjoint(COMMAND_MODULES), sorted(loaded & set(COMMAND_MODULES))


def test_a_plain_start_parses_no_command_line() -> None:
    # Clients start the server without arguments; argparse and the commands' table would only
    # delay the first answer. An argument (here --allow-origin) still goes through the parser.
    assert modules_loaded_by_serving([]).isdisjoint({"argparse", "memory_server.cli.commands"})
    assert {"argparse", "memory_server.cli.commands"} <= modules_loaded_by_serving(["--allow-origin", "http://a.test"])


def test_a_stdio_start_loads_no_http_transport() -> None:
    # The settings' check reads the OAuth variables at every start; with OAuth off it imports
    # nothing of the HTTP transport (a fifth of a stdio start's imports), which --http loads.
    loaded = modules_loaded_by_serving([])
    assert not {module for module in loaded if module.startswith("protocol.http")}, sorted(loaded)
