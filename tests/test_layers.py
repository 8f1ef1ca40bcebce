"""The layers of the code hold: every import between the parts of protocol/, conformance/ and
memory_server/ is an arrow of the table below, read statically from the source.

Every `import` and `from ... import` counts: at module level, inside a function, and under
`if TYPE_CHECKING:` (a layer that names another layer's types knows that layer). The rules
(issue 31):

1. `model/` and `index/` import none of retrieval, storage, tools, cli or protocol.
2. `retrieval/` and `storage/` do not import each other.
3. storage does not import the protocol engine.
4. Only the adapter (app, tools, http, __main__, memories, settings, oauth_settings) knows the
   protocol; conformance checks any server from outside and imports neither.
5. `background.py` owns the memory's threads: every part of the memory may use it, and it
   imports nothing of the project.
6. `osio.py` opens files safely (no FIFO waited on, no planted link followed): storage,
   retrieval (the vector file), cli and the adapter may use it, and it imports nothing of the
   project. The model and the index do no I/O.

`KNOWN_EXCEPTIONS` names, module by module, the arrows that break a rule today and that other
work removes. It may only shrink: an arrow listed there that no longer exists fails the test
until it is taken off the list.
"""

from __future__ import annotations

from pathlib import Path

from test_import_cycles import PACKAGES, REPO, imports_of, module_files, write

MEMORY_PARTS = ("model", "index", "retrieval", "storage", "cli")
"""The subpackages of memory_server that are layers of their own; its other modules are the adapter."""

ALLOWED: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "conformance": frozenset(),
    "background": frozenset(),
    "osio": frozenset(),
    "index": frozenset(),
    "model": frozenset({"index"}),
    "retrieval": frozenset({"model", "index", "background", "osio"}),
    "storage": frozenset({"model", "index", "background", "osio"}),
    "cli": frozenset({"model", "index", "retrieval", "storage", "background", "osio"}),
    "adapter": frozenset({"protocol", "model", "index", "retrieval", "storage", "cli", "background", "osio"}),
}
"""Which layers each layer may import (its own modules always)."""

KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()
"""Arrows outside `ALLOWED` that exist today, as (importer, imported) modules: a shrinking allowance."""


def layer_of(module: str) -> str | None:
    """The layer a module belongs to (None: a package the table does not know)."""
    parts = module.split(".")
    if parts[0] in ("protocol", "conformance"):
        return parts[0]
    if parts[0] != "memory_server":
        return None
    if len(parts) > 1 and parts[1] in MEMORY_PARTS:
        return parts[1]
    if parts[1:] in (["background"], ["osio"]):
        return parts[1]
    return "adapter"


def arrows(root: Path, packages: tuple[str, ...]) -> set[tuple[str, str]]:
    """Every (importer, imported) pair of modules in different layers (an import of a name from a
    module counts as one of the module, and of the package it is in as in `imports_of`)."""
    modules = module_files(root, packages)
    found: set[tuple[str, str]] = set()
    for name, path in modules.items():
        for target in imports_of(name, path, modules, type_checking=True):
            # A package that holds the importer is loaded before it anyway: that is no arrow.
            if layer_of(name) != layer_of(target) and not name.startswith(target + "."):
                found.add((name, target))
    return found


def forbidden(found: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The arrows the table does not allow."""
    return {(source, target) for source, target in found
            if layer_of(target) not in ALLOWED.get(layer_of(source) or "", frozenset())}


def test_every_module_belongs_to_a_layer_of_the_table() -> None:
    modules = module_files(REPO, PACKAGES)
    assert {"memory_server.storage.lock", "memory_server.tools", "protocol.stdio", "conformance.cli"} <= modules.keys()
    assert {name for name in modules if layer_of(name) not in ALLOWED} == set()


def test_no_import_crosses_the_layers_outside_the_table() -> None:
    new = forbidden(arrows(REPO, PACKAGES)) - KNOWN_EXCEPTIONS
    assert new == set(), "imports the layer table forbids (see the rules in this module's docstring)"


def test_the_known_exceptions_only_shrink() -> None:
    found = arrows(REPO, PACKAGES)
    gone = KNOWN_EXCEPTIONS - found
    assert gone == set(), "these arrows are gone: take them off KNOWN_EXCEPTIONS"
    allowed_anyway = KNOWN_EXCEPTIONS - forbidden(found)
    assert allowed_anyway == set(), "these exceptions break no rule: take them off KNOWN_EXCEPTIONS"


def test_storage_and_the_model_know_nothing_of_the_protocol() -> None:
    found = arrows(REPO, PACKAGES)
    assert {(source, target) for source, target in found
            if layer_of(target) == "protocol" and layer_of(source) != "adapter"} == set()


def test_a_forbidden_arrow_is_found_wherever_the_import_is_written(tmp_path: Path) -> None:
    write(tmp_path, {
        "protocol/__init__.py": "",
        "protocol/fdio.py": "import os\n",
        "memory_server/__init__.py": "",
        "memory_server/tools.py": "from protocol import fdio\n",
        "memory_server/storage/__init__.py": "",
        "memory_server/storage/lock.py": "def write():\n    from protocol.fdio import write_all\n",
        "memory_server/storage/store.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from ..retrieval import paging\n",
        "memory_server/retrieval/__init__.py": "",
        "memory_server/retrieval/paging.py": "from ..background import Background\n",
        "memory_server/background.py": "",
    })
    found = arrows(tmp_path, ("protocol", "memory_server"))
    assert found == {
        ("memory_server.tools", "protocol"),  # `from protocol import fdio` names the package too
        ("memory_server.tools", "protocol.fdio"),
        ("memory_server.storage.lock", "protocol.fdio"),
        ("memory_server.storage.store", "memory_server.retrieval"),
        ("memory_server.storage.store", "memory_server.retrieval.paging"),
        ("memory_server.retrieval.paging", "memory_server.background"),
    }
    assert forbidden(found) == {
        ("memory_server.storage.lock", "protocol.fdio"),
        ("memory_server.storage.store", "memory_server.retrieval"),
        ("memory_server.storage.store", "memory_server.retrieval.paging"),
    }
