"""Small ones of issue 21: `search_nodes` with `"limit": 1.0` (an integer to JSON Schema) over a real
server; names with NUL and other control characters in a DOT export that the real Graphviz `dot`
reads; a Markdown export that a real CommonMark renderer (markdown-it-py) shows exactly as written."""

from __future__ import annotations

import json
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from memory_helpers import MemoryServers, memory_servers  # noqa: F401  (a fixture)
from test_cli_commands import export, graphviz, write_memory

from memory_server.cli.export import visible_controls

WAIT = 120


def test_search_nodes_takes_a_limit_written_as_1_point_0(memory_servers: MemoryServers, tmp_path: Path) -> None:
    client = memory_servers.client("legacy", tmp_path / "memory.jsonl")
    client.ok("create_entities", {"entities": [{"name": name, "entityType": "t", "observations": ["milk"]}
                                               for name in ("A", "B", "C")]})
    found = client.ok("search_nodes", {"query": "milk", "limit": 1.0})
    assert len(found["entities"]) == 1
    assert len(client.ok("search_nodes", {"query": "milk", "limit": 2.0})["entities"]) == 2
    # Not an integer at all: refused as bad input the model can fix, never an internal error.
    response = client.response(client.send_request("tools/call", {"name": "search_nodes",
                                                                  "arguments": {"query": "milk", "limit": 1.5}}))
    if "error" in response:
        assert response["error"]["code"] == -32602, response
    else:
        assert response["result"]["isError"] is True, response
    assert len(client.ok("search_nodes", {"query": "milk"})["entities"]) == 3


CONTROLS = "".join(chr(code) for code in [*range(0, 9), 11, 12, *range(14, 32), 127])
ENTITIES: list[dict[str, Any]] = [
    {"name": "nul\x00name", "entityType": "bell\x07type", "observations": ["esc \x1b[31m red", "del\x7f"]},
    {"name": "all " + CONTROLS, "entityType": "t", "observations": []},
    {"name": "plain", "entityType": "t", "observations": ["tab\there"]},
]
GRAPH = {
    "entities": ENTITIES,
    "relations": [
        {"from": "nul\x00name", "to": "plain", "relationType": "knows\x00\x01"},
        {"from": "all " + CONTROLS, "to": "nul\x00name", "relationType": "x"},
    ],
}


def test_control_characters_in_names_give_a_dot_file_graphviz_reads(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    write_memory(memory, GRAPH)
    dot = export(memory, "dot")
    assert b"\x00" not in dot
    done = subprocess.run([graphviz(), "-Tjson"], input=dot, capture_output=True, timeout=WAIT)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    laid_out = json.loads(done.stdout, strict=False)
    labels = sorted(item["label"] for item in laid_out["objects"])
    assert labels == sorted([f"{visible_controls(entity['name'])}\\n({visible_controls(entity['entityType'])})"
                             for entity in ENTITIES])
    assert "nul\u2400name\\n(bell\u2407type)" in labels
    assert sorted(edge["label"] for edge in laid_out["edges"]) == sorted(["knows\u2400\u2401", "x"])


TEXTS = [
    "1. Buy milk", "2) Call mum", "AT&amp;T", "&copy; 2026", "# not a heading", "- not a list", "+ nor this",
    "> not a quote", "<b>not bold</b>", "<!-- not a comment -->", "*stars* and _under_ and __dunder__",
    "works_at stays", "`not code`", "[not a link](http://example.com)", "![not an image](x.png)",
    "a \\ backslash \\* and \\\\ two", "===", "---", "| not | a table |", "~~not struck~~", "C# and # and ##",
    "nul \x00 bell \x07", "tab\tinside", "http://example.com/<x>", "&#65; is A", "1986\\. a year",
    "first line\n2. second line\n# third line\n> fourth", "trailing hash #",
]


class _Text(HTMLParser):
    """The text of each h2 and li of the rendered page, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, str]] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("h1", "h2", "li", "p"):
            self._open.append(tag)
            self.blocks.append((tag, ""))
        elif tag in ("img", "a", "code", "em", "strong", "del", "blockquote", "pre", "table", "ol", "hr", "h3"):
            self.blocks.append(("markup", tag))

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._open and self.blocks and self.blocks[-1][0] != "markup":
            tag, text = self.blocks[-1]
            self.blocks[-1] = (tag, text + data)


@pytest.mark.parametrize("renderer", ["commonmark", "gfm-like"])
def test_the_markdown_export_renders_every_text_as_written(tmp_path: Path, renderer: str) -> None:
    memory = tmp_path / "memory.jsonl"
    graph = {"entities": [{"name": f"Entity {text}", "entityType": "note", "observations": [text]} for text in TEXTS],
             "relations": []}
    write_memory(memory, graph)
    page = export(memory, "markdown").decode()
    assert "\\1. Buy milk" not in page
    parser = MarkdownIt("commonmark") if renderer == "commonmark" else MarkdownIt("gfm-like", {"linkify": False})
    reader = _Text()
    reader.feed(parser.render(page))
    markup = [block for block in reader.blocks if block[0] == "markup"]
    assert markup == [], f"markup made from plain text: {markup}"
    headings = [text for tag, text in reader.blocks if tag == "h2"]
    items = [text for tag, text in reader.blocks if tag == "li"]
    shown = [visible_controls(text) for text in TEXTS]
    assert headings == [visible_controls(f"Entity {' '.join(text.splitlines())}") for text in TEXTS]
    assert items == shown
