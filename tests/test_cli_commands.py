"""`mcp-server-memory stats | check | export`: the installed console script, run as a person would, on real files.

The formats are checked by their own consumers where one runs here: JSON.stringify in node for
jsonl and json (the reference server's own serialisation), xml.etree for GraphML, Graphviz's `dot`
for DOT (installed with apt-get when missing and allowed).
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from conftest import WAIT_SECONDS, apt_installed
from memory_helpers import (
    entity,
    entity_record,
    record_line,
    reference_lines,
    relation,
    relation_record,
    server_environment,
)

CONSOLE_SCRIPT = Path(sys.executable).with_name("mcp-server-memory")
COMMANDS = ("stats", "check", "export", "import")
GRAPHML = "{http://graphml.graphdrawing.org/xmlns}"

ALICE = entity("Alice", "person", ["Loves jazz", "Works remotely"])
ACME = entity("Acme", "organization", ["Makes anvils"])
BOB = entity("Bob", "person", [])
NASTY = entity('Q "quoted" \\ back\\', "odd\ntype", ["tab\there", "\x01control", "<xml> & </script>", "é😀\u2028"])
GRAPH = {
    "entities": [ALICE, ACME, BOB, NASTY],
    "relations": [relation("Alice", "Acme", "works_at"), relation("Bob", "Alice", "knows"),
                  relation(NASTY["name"], "Alice", "line\nbreak"), relation("Alice", "Alice", "is")],
}


def cli(*arguments: str, memory: Path | str | None = None, cwd: Path | None = None,
        env: dict[str, str] | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """The console script of this environment; stdout and stderr as bytes."""
    return subprocess.run([str(CONSOLE_SCRIPT), *arguments], env=server_environment(memory, env), cwd=cwd,
                          input=stdin, capture_output=True, timeout=WAIT_SECONDS * 4)


def write_memory(path: Path, graph: dict[str, Any], extra_lines: tuple[str, ...] = ()) -> None:
    """A memory file as this server writes it: every line ends with a newline."""
    path.write_text("".join(line + "\n" for line in [*reference_lines(graph), *extra_lines]), encoding="utf-8")


def export(memory_file: Path, form: str) -> bytes:
    done = cli("export", "--format", form, "--file", str(memory_file))
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    return done.stdout


def node_stringify(value: Any, script: str) -> bytes:
    """What node's JSON.stringify makes of `value` through `script` (reading `value` as `input`)."""
    node = shutil.which("node")
    assert node is not None, "node is needed to hold the formats to the reference's own JSON.stringify"
    program = f"const input = JSON.parse(require('fs').readFileSync(0, 'utf8')); process.stdout.write({script});"
    done = subprocess.run([node, "-e", program], input=json.dumps(value).encode(), capture_output=True,
                          timeout=WAIT_SECONDS, check=True)
    return done.stdout


# --- help and errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_explains_itself_and_touches_nothing(command: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    done = cli(command, "--help", memory=memory_file, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(f"usage: mcp-server-memory {command}")
    assert b"--file" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_the_top_level_help_lists_the_commands(tmp_path: Path) -> None:
    done = cli("--help", memory=tmp_path / "memory.jsonl")
    assert done.returncode == 0
    for command in COMMANDS:
        assert f"    {command} ".encode() in done.stdout


@pytest.mark.parametrize("arguments", [("stats",), ("check",), ("export", "--format", "json")])
def test_a_missing_memory_file_is_a_clear_error(arguments: tuple[str, ...], tmp_path: Path) -> None:
    memory_file = tmp_path / "nowhere" / "memory.jsonl"
    done = cli(*arguments, memory=memory_file)
    assert done.returncode == 2
    assert done.stdout == b""
    stderr = done.stderr.decode()
    assert f"mcp-server-memory {arguments[0]}: error: there is no memory file at {memory_file}" in stderr
    assert "MEMORY_FILE_PATH" in stderr and "Traceback" not in stderr
    assert not memory_file.parent.exists()


@pytest.mark.parametrize("arguments", [("stats",), ("check",), ("export", "--format", "dot")])
def test_an_unreadable_memory_file_is_a_clear_error(arguments: tuple[str, ...], tmp_path: Path) -> None:
    # (a directory: root reads any file whatever its mode, so this is the unreadable file every user can make)
    done = cli(*arguments, "--file", str(tmp_path))
    assert done.returncode == 2
    assert done.stdout == b""
    assert f"error: {tmp_path} is a directory, not a memory file (given with --file)".encode() in done.stderr
    assert b"Traceback" not in done.stderr


def test_an_unknown_format_is_refused_by_name(tmp_path: Path) -> None:
    done = cli("export", "--format", "pdf", memory=tmp_path / "memory.jsonl")
    assert done.returncode == 2
    assert b"invalid choice: 'pdf'" in done.stderr


# --- stats ---------------------------------------------------------------------------------------------------

def test_stats_counts_what_the_memory_holds(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    write_memory(memory_file, GRAPH, (
        '{"type":"widget","id":1}',
        record_line(entity_record(entity("Alice", "robot", []))),
        "not json",
        record_line(relation_record(relation("Alice", "Ghost", "fears"))),
    ))
    (tmp_path / "memory.jsonl.rejected").write_bytes(b"old junk 1\nold junk 2\n")
    before = memory_file.read_bytes(), memory_file.stat().st_mtime_ns

    done = cli("stats", memory=memory_file)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert f"Memory file {memory_file}" in lines
    assert f"Size {memory_file.stat().st_size:,} bytes" in lines
    assert "Entities 4" in lines and "Relations 5" in lines and "Observations 7" in lines
    assert "Entity types (3)" in lines and "2 person" in lines and "1 organization" in lines
    assert "Relation types (5)" in lines and "1 works_at" in lines
    most = lines[lines.index("Most connected (top 10)") + 1:]
    assert most[0] == "5 Alice (person)", "Alice touches five relations (the one to herself counts once)"
    assert "1 unknown records (JSON, but no entity or relation this server can use; kept in the file)" in lines
    assert "1 repeated entities or relations (the first one is used; kept in the file)" in lines
    assert "1 unreadable lines (the next write moves them to memory.jsonl.rejected)" in lines
    assert f"2 rejected lines kept in {memory_file}.rejected" in lines
    assert "1 relations naming a missing entity" in lines
    assert any(line.startswith("Last change 20") for line in lines)
    assert "WARNING" not in out, "a file outside the installation is safe"
    assert (memory_file.read_bytes(), memory_file.stat().st_mtime_ns) == before


def test_stats_of_an_empty_memory(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_bytes(b"")
    done = cli("stats", "--file", str(memory_file))
    assert done.returncode == 0, done.stderr
    assert b"Entities        0" in done.stdout and b"none" in done.stdout


# --- check ---------------------------------------------------------------------------------------------------

def test_check_passes_a_clean_file(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    # as the reference writes it: no final newline; and with CRLF endings and a byte order mark, as editors do
    memory_file.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(reference_lines(GRAPH)).encode())
    done = cli("check", memory=memory_file)
    assert done.returncode == 0, done.stdout
    assert done.stdout.decode() == (f"{memory_file}: 8 lines: 4 entities, 4 relations; every line is usable. "
                                    "Nothing to do.\n")


def test_check_reports_every_line_it_cannot_use_and_changes_nothing(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    lines = [
        record_line(entity_record(ALICE)),                                    # 1
        "{not json",                                                          # 2
        "",                                                                   # 3 (blank: nothing to say)
        '{"type":"widget"}',                                                  # 4
        '{"type":"entity","name":"Zed","entityType":7,"observations":[]}',    # 5
        record_line(entity_record(entity("Alice", "person", []))),            # 6
        record_line(relation_record(relation("Alice", "Ghost", "fears"))),    # 7
        record_line(relation_record(relation("Alice", "Ghost", "fears"))),    # 8
        record_line(entity_record(entity("Echo", "thing", ["again", "again"]))),  # 9
        "[1, 2]",                                                             # 10
    ]
    memory_file.write_bytes("\n".join(lines).encode() + b"\n\xff\xfe\n")      # 11: not UTF-8
    before = memory_file.read_bytes(), memory_file.stat().st_mtime_ns

    done = cli("check", "--file", str(memory_file))
    assert done.returncode == 1
    out = done.stdout.decode().splitlines()
    assert out[0] == f"{memory_file}: 10 lines: 2 entities, 1 relation; 9 lines need attention:"
    reported = [line.split(":", 2)[:2] for line in out[1:]]
    assert reported == [["  line 2", " unreadable"], ["  line 4", " unusable"], ["  line 5", " unusable"],
                        ["  line 6", " repeat"], ["  line 7", " missing entity"], ["  line 8", " repeat"],
                        ["  line 9", " repeat"], ["  line 10", " unusable"], ["  line 11", " unreadable"]]
    text = "\n".join(out)
    assert "not valid JSON" in text and "not valid UTF-8" in text
    assert 'a record of unknown type "widget"' in text
    assert 'an entity record whose "entityType" is not a string' in text
    assert "repeats the entity 'Alice' of line 1" in text
    assert "repeats the relation 'Alice' -fears-> 'Ghost' of line 7" in text
    assert "names an entity that does not exist: 'Ghost'" in text
    assert "holds the observation 'again' 2 times" in text
    assert "a JSON array, not an object" in text
    assert (memory_file.read_bytes(), memory_file.stat().st_mtime_ns) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl"], "no lock, no side file"


# --- export --------------------------------------------------------------------------------------------------

def test_export_jsonl_is_the_file_the_reference_would_write(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    # what the reference does not keep: extra fields, unknown records; and our final newline
    lines = reference_lines(GRAPH)
    lines[0] = lines[0][:-1] + ',"colour":"red"}'
    memory_file.write_text("\n".join([*lines, '{"type":"widget"}']) + "\n", encoding="utf-8")
    exported = export(memory_file, "jsonl")
    saved_by_reference = node_stringify(GRAPH, """[
        ...input.entities.map(e => JSON.stringify({type: "entity", name: e.name, entityType: e.entityType,
                                                   observations: e.observations})),
        ...input.relations.map(r => JSON.stringify({type: "relation", from: r.from, to: r.to,
                                                    relationType: r.relationType})),
    ].join("\\n")""")
    assert exported == saved_by_reference
    assert not exported.endswith(b"\n")


def test_export_json_is_the_reference_read_graph_text(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    write_memory(memory_file, GRAPH)
    assert export(memory_file, "json") == node_stringify(GRAPH, "JSON.stringify(input, null, 2)")
    assert json.loads(export(memory_file, "json")) == GRAPH
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert export(empty, "json") == node_stringify({"entities": [], "relations": []}, "JSON.stringify(input, null, 2)")


def test_export_graphml_is_well_formed_graphml(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    write_memory(memory_file, GRAPH, (record_line(relation_record(relation("Bob", "Ghost", "fears"))),))
    root = ElementTree.fromstring(export(memory_file, "graphml"))
    assert root.tag == f"{GRAPHML}graphml"
    keys = {key.get("id"): (key.get("for"), key.get("attr.name"), key.get("attr.type"))
            for key in root.iter(f"{GRAPHML}key")}
    assert keys["label"] == ("node", "label", "string") and keys["relationType"] == ("edge", "relationType", "string")
    (graph,) = root.iter(f"{GRAPHML}graph")
    assert graph.get("edgedefault") == "directed" and graph.get("id") == "memory"
    assert graph.findtext(f"{GRAPHML}desc") == "Memory: memory.jsonl"

    def data(element: ElementTree.Element) -> dict[str, str]:
        return {item.get("key"): item.text or "" for item in element.iter(f"{GRAPHML}data")}

    nodes = {node.get("id"): data(node) for node in graph.iter(f"{GRAPHML}node")}
    labels = {values["label"]: node_id for node_id, values in nodes.items()}
    assert set(labels) == {"Alice", "Acme", "Bob", NASTY["name"], "Ghost"}
    assert nodes[labels["Ghost"]]["missing"] == "true", "a relation's missing end is a placeholder node"
    assert nodes[labels["Alice"]]["observations"] == "Loves jazz\nWorks remotely"
    assert nodes[labels[NASTY["name"]]]["observations"] == "tab\there\n\ufffdcontrol\n<xml> & </script>\né😀\u2028", \
        "a character XML cannot hold becomes U+FFFD, everything else stays"
    assert nodes[labels[NASTY["name"]]]["entityType"] == "odd\ntype"
    edges = [(edge.get("source"), edge.get("target"), data(edge)["relationType"]) for edge in graph.iter(f"{GRAPHML}edge")]
    assert len(edges) == 5
    assert (labels["Alice"], labels["Acme"], "works_at") in edges
    assert (labels[NASTY["name"]], labels["Alice"], "line\nbreak") in edges
    assert (labels["Bob"], labels["Ghost"], "fears") in edges


def graphviz() -> str:
    found = apt_installed("graphviz", "dot")
    if found is None:
        pytest.fail("this test needs the real Graphviz dot: none is here, and apt-get cannot install it (not root, or no apt)")
    return found


def test_export_dot_is_read_by_graphviz(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    write_memory(memory_file, GRAPH, (record_line(relation_record(relation("Bob", "Ghost", "fears"))),))
    dot = export(memory_file, "dot")
    assert dot.startswith(b'digraph "Memory: memory.jsonl" {')
    done = subprocess.run([graphviz(), "-Tjson"], input=dot, capture_output=True, timeout=WAIT_SECONDS * 4)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"", "no warning from Graphviz"
    laid_out = json.loads(done.stdout, strict=False)  # Graphviz writes control characters as they are
    labels = {item["name"]: item["label"] for item in laid_out["objects"]}
    assert sorted(labels.values()) == sorted(["Alice\\n(person)", "Acme\\n(organization)", "Bob\\n(person)",
                                              'Q "quoted" \\\\ back\\\\\\n(odd\\ntype)', "Ghost"])
    edges = {(laid_out["objects"][edge["tail"]]["label"].split("\\n")[0], edge["label"]) for edge in laid_out["edges"]}
    assert ("Alice", "works_at") in edges and ("Bob", "fears") in edges and ("Alice", "is") in edges
    svg = subprocess.run([graphviz(), "-Tsvg"], input=dot, capture_output=True, timeout=WAIT_SECONDS * 4, check=True)
    assert b"Q &quot;quoted&quot; \\ back\\</text>" in svg.stdout, "the name is shown as written"


def test_export_markdown_has_a_section_per_entity(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    write_memory(memory_file, GRAPH)
    text = export(memory_file, "markdown").decode()
    assert text.startswith("# Memory: memory.jsonl\n\n4 entities, 4 relations, 7 observations.\n")
    alice = text[text.index("\n## Alice\n"):text.index("\n## Acme\n")]
    assert alice == ("\n## Alice\n\nType: person\n\n- Loves jazz\n- Works remotely\n\nRelations:\n\n"
                     "- Alice *works_at* Acme\n- Bob *knows* Alice\n"
                     "- Q \"quoted\" \\\\ back\\\\ *line\n  break* Alice\n- Alice *is* Alice\n")
    assert "\n## Bob\n\nType: person\n\nRelations:\n\n- Bob *knows* Alice\n" in text
    assert "- \\<xml\\> \\& \\</script\\>" in text, "markup in names and observations is shown, not rendered"
    assert '\n## Q "quoted" \\\\ back\\\\\n\nType: odd type\n' in text, "a heading stays one line"


def test_export_to_a_file_and_not_over_the_memory(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    write_memory(memory_file, GRAPH)
    before = memory_file.read_bytes()
    target = tmp_path / "out" / "graph.json"
    target.parent.mkdir()
    done = cli("export", "--format", "json", "-o", str(target), memory=memory_file)
    assert done.returncode == 0, done.stderr
    assert json.loads(target.read_bytes()) == GRAPH
    assert done.stdout.decode() == f"Wrote {target} (json): 4 entities, 4 relations.\n"
    assert sorted(path.name for path in target.parent.iterdir()) == ["graph.json"], "no temporary file left"

    refused = cli("export", "--format", "jsonl", "-o", str(memory_file), memory=memory_file)
    assert refused.returncode == 2
    assert b"is the memory file itself" in refused.stderr
    assert memory_file.read_bytes() == before

    nowhere = cli("export", "--format", "json", "-o", str(tmp_path / "missing" / "x.json"), memory=memory_file)
    assert nowhere.returncode == 2 and b"cannot write" in nowhere.stderr and b"Traceback" not in nowhere.stderr


@pytest.mark.parametrize("form", ["jsonl", "graphml"])
def test_a_long_export_reports_progress_on_stderr_only(form: str, tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    count = 6_000
    graph = {"entities": [entity(f"e{number}") for number in range(count)],
             "relations": [relation(f"e{number}", f"e{number + 1}", "next") for number in range(count - 1)]}
    write_memory(memory_file, graph)
    done = cli("export", "--format", form, "--file", str(memory_file))
    assert done.returncode == 0, done.stderr
    progress = done.stderr.decode().splitlines()
    assert progress[0] == f"export {form}: 6,000 entities and 5,999 relations from {memory_file}"
    assert progress[-1] == f"export {form}: 11,999 of 11,999 items (100%)"
    assert len(progress) == 11
    if form == "jsonl":
        assert done.stdout.decode().split("\n") == reference_lines(graph), "stdout holds the data only"
    small = cli("export", "--format", form, "--file", str(tmp_path / "small.jsonl"))
    assert small.returncode == 2  # (missing) -- and a small export of a real file says nothing:
    write_memory(tmp_path / "small.jsonl", GRAPH)
    assert cli("export", "--format", form, "--file", str(tmp_path / "small.jsonl")).stderr == b""


def test_progress_shows_on_a_terminal_even_for_a_small_export(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    write_memory(memory_file, GRAPH)
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run([str(CONSOLE_SCRIPT), "export", "--format", "dot", "--file", str(memory_file)],
                              env=server_environment(None), stdout=subprocess.PIPE, stderr=terminal,
                              timeout=WAIT_SECONDS * 4)
        os.close(terminal)
        seen = b""
        with suppress(OSError):  # the end of a pty whose other side closed reads as an error on Linux
            while chunk := os.read(controller, 4096):
                seen += chunk
    finally:
        os.close(controller)
    assert done.returncode == 0
    assert done.stdout.startswith(b"digraph")
    lines = seen.decode().splitlines()
    assert lines[0] == f"export dot: 4 entities and 4 relations from {memory_file}"
    assert lines[-1] == "export dot: 8 of 8 items (100%)"


def test_stats_wants_a_positive_top(tmp_path: Path) -> None:
    done = cli("stats", "--top", "0", memory=tmp_path / "memory.jsonl")
    assert done.returncode == 2
    assert b"argument --top: 0 is not a count of at least 1" in done.stderr
