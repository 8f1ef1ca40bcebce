"""No import circles among the modules of protocol/, memory_server/ and conformance/, read statically.

Every `import` and `from ... import` counts, at module level or inside a function (a lazy import
is still a dependency); only those under `if TYPE_CHECKING:` do not, since they never run. A name
imported from a package counts as its submodule when there is one (`from . import http`).
conformance/corpus/ is left out: the recording scripts and their data, not part of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "memory_server", "conformance")
LEFT_OUT = ("conformance/corpus",)


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            if any(relative.as_posix().startswith(prefix + "/") for prefix in LEFT_OUT):
                continue
            parts = list(relative.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _runs(node: ast.AST) -> list[ast.AST]:
    """The nodes below `node` that can run: the bodies of `if TYPE_CHECKING:` are skipped."""
    kept: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            kept.extend(_runs(ast.Module(body=child.orelse, type_ignores=[])))
            continue
        kept.append(child)
        kept.extend(_runs(child))
    return kept


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, modules: dict[str, Path], *, type_checking: bool = False) -> set[str]:
    """The project modules that module `name` (at `path`) imports; with `type_checking`, those
    imported for type checking only as well (a layer that names another's types knows it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: list[str] = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree) if type_checking else _runs(tree):
        if isinstance(node, ast.Import):
            wanted.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            wanted.append(source)
            wanted.extend(f"{source}.{alias.name}" for alias in node.names)
    found: set[str] = set()
    for target in wanted:
        while target and target not in modules:  # a name in a module, or a module of a package
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def circles(root: Path, packages: tuple[str, ...]) -> list[list[str]]:
    """Each set of modules that import one another in a circle (strongly connected, more than one)."""
    modules = module_files(root, packages)
    graph = {name: sorted(imports_of(name, path, modules)) for name, path in modules.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in graph:
        if module not in order:
            visit(module)
    return found


def test_the_three_packages_have_no_import_circles() -> None:
    modules = module_files(REPO, PACKAGES)
    assert {"protocol.server", "protocol.stdio", "memory_server.tools", "conformance.cli"} <= modules.keys()
    assert circles(REPO, PACKAGES) == []


def write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_circle_closed_by_a_function_level_import_is_found(tmp_path: Path) -> None:
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/server.py": "def run():\n    from .stdio import serve\n    serve()\n",
        "pkg/stdio.py": "from pkg.server import run\n",
        "pkg/alone.py": "import os\n",
    })
    assert circles(tmp_path, ("pkg",)) == [["pkg.server", "pkg.stdio"]]


def test_a_longer_circle_through_a_package_import_is_found(tmp_path: Path) -> None:
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/a.py": "from .. import b\n",
        "pkg/b.py": "from pkg import c\n",
        "pkg/c.py": "import pkg.sub.a as a\n",
    })
    assert circles(tmp_path, ("pkg",)) == [["pkg.b", "pkg.c", "pkg.sub.a"]]


def test_imports_for_type_checking_only_close_no_circle(tmp_path: Path) -> None:
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/peer.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .server import Server\n"
                       "else:\n    import json\n",
        "pkg/server.py": "from .peer import Peer\n",
    })
    assert circles(tmp_path, ("pkg",)) == []
    write(tmp_path, {"pkg/peer.py": "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    from . import server\n"})
    assert circles(tmp_path, ("pkg",)) == [["pkg.peer", "pkg.server"]]
