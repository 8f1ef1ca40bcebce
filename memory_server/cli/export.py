"""The graph in other formats, for `mcp-server-memory export`: one pure function per format.

Each exporter takes an :class:`ExportView` and yields the output in text pieces; it calls
``view.tick()`` once per entity and per relation written, so that the caller can show progress.
Relations whose entity is missing (a hand-edited file) are kept: formats that need a node for
each end get a placeholder node marked as missing.

Dates (see model/dates.py) come along where an entity has them: jsonl and json carry them whole,
as the memory file stores them; GraphML as node data, DOT in the tooltip, Markdown after each
observation, the HTML page beside each observation. A graph without dates exports exactly as before.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from ..model import dates
from ..model.records import RelationRecord, encode_line
from .text import counted
from .view import ExportView, entity_record, observation_dates

Exporter = Callable[[ExportView], Iterator[str]]


def entity_dates(entity: Mapping[str, Any]) -> str:
    """When the entity was created and last changed, as a short line ('' when unknown)."""
    created, updated = dates.compact_day(entity.get("createdAt")), dates.compact_day(entity.get("updatedAt"))
    parts = ([f"created {created}"] if created else []) + ([f"changed {updated}"] if updated else [])
    return ", ".join(parts)


def has_dates(view: ExportView) -> bool:
    return any(key in entity for entity in view.entities for key in ("createdAt", "updatedAt", "recordedAt",
                                                                     "happenedOn", "recordedBy"))


def dated_text(text: str, date: str | None) -> str:
    return text if date is None else f"{text} [{date}]"


# --------------------------------------------------------------------------------------------
# jsonl and json: the reference server's own formats
# --------------------------------------------------------------------------------------------


def to_jsonl(view: ExportView) -> Iterator[str]:
    """The memory file exactly as the reference server saves this graph: its records, joined by
    newlines, with none after the last line (extra fields and unknown records are not the graph),
    the dates of an entity that has them after the reference's keys, as the memory file holds them."""
    separator = ""
    for entity in view.entities:
        yield separator + encode_line(entity_record(entity)).decode()
        separator = "\n"
        view.tick()
    for relation in view.relations:
        yield separator + encode_line(RelationRecord(relation["from"], relation["to"], relation["relationType"])).decode()
        separator = "\n"
        view.tick()


def to_json(view: ExportView) -> Iterator[str]:
    """The reference's read_graph text: the graph as JSON, indented by two spaces (the dates of an
    entity that has them as extra keys, as the memory file stores them)."""
    graph = {"entities": list(view.entities), "relations": list(view.relations)}
    for _ in range(len(view.entities) + len(view.relations)):
        view.tick()
    yield json.dumps(graph, indent=2, ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# GraphML (Gephi, yEd, Cytoscape, NetworkX) and DOT (Graphviz, Gephi)
# --------------------------------------------------------------------------------------------

# XML 1.0 has no way to write these characters, not even as references.
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_XML_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;"})

GRAPHML_KEYS: Final = (
    ("label", "node", "label", "string"),
    ("entityType", "node", "entityType", "string"),
    ("observations", "node", "observations", "string"),
    ("missing", "node", "missing", "boolean"),
    ("relationType", "edge", "relationType", "string"),
    ("edgeLabel", "edge", "label", "string"),
)


def xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text).translate(_XML_ESCAPES)


def to_graphml(view: ExportView) -> Iterator[str]:
    """GraphML: one node per entity (label, type, observations one per line), one directed edge per relation."""
    yield ('<?xml version="1.0" encoding="UTF-8"?>\n'
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
           'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
           'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
           'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n')
    dated = has_dates(view)
    for key, domain, name, kind in GRAPHML_KEYS + (GRAPHML_DATE_KEYS if dated else ()):
        yield f'  <key id="{key}" for="{domain}" attr.name="{name}" attr.type="{kind}"/>\n'
    # (a graph's id is an NMTOKEN, without spaces: the title goes into its description)
    yield f'  <graph id="memory" edgedefault="directed">\n    <desc>{xml_text(view.title)}</desc>\n'
    for number, entity in enumerate(view.entities):
        yield (f'    <node id="n{number}"><data key="label">{xml_text(entity["name"])}</data>'
               f'<data key="entityType">{xml_text(entity["entityType"])}</data>'
               f'<data key="observations">{xml_text(chr(10).join(entity["observations"]))}</data>'
               f'{_graphml_dates(entity) if dated else ""}</node>\n')
        view.tick()
    for offset, name in enumerate(view.missing):
        yield (f'    <node id="n{len(view.entities) + offset}"><data key="label">{xml_text(name)}</data>'
               '<data key="missing">true</data></node>\n')
    for number, relation in enumerate(view.relations):
        kind = xml_text(relation["relationType"])
        yield (f'    <edge id="e{number}" source="n{view.index[relation["from"]]}" '
               f'target="n{view.index[relation["to"]]}"><data key="relationType">{kind}</data>'
               f'<data key="edgeLabel">{kind}</data></edge>\n')
        view.tick()
    yield "  </graph>\n</graphml>\n"


GRAPHML_DATE_KEYS: Final = (
    ("createdAt", "node", "createdAt", "string"),
    ("updatedAt", "node", "updatedAt", "string"),
    ("observationDates", "node", "observationDates", "string"),
)
"""Declared when the graph has dates: observationDates holds one line per observation (empty: unknown)."""


def _graphml_dates(entity: Mapping[str, Any]) -> str:
    pieces = [f'<data key="{key}">{xml_text(entity[key])}</data>' for key in ("createdAt", "updatedAt") if key in entity]
    if "recordedAt" in entity or "happenedOn" in entity or "recordedBy" in entity:
        lines = "\n".join(date or "" for date in observation_dates(entity))
        pieces.append(f'<data key="observationDates">{xml_text(lines)}</data>')
    return "".join(pieces)


PALETTE: Final = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                  "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d37295")
OTHER_COLOUR: Final = "#c7c7c7"
"""Entity types beyond the palette (the least common ones) share this colour."""


def type_colours(view: ExportView) -> dict[str, str]:
    return {name: PALETTE[number] if number < len(PALETTE) else OTHER_COLOUR for number, name in enumerate(view.types)}


# C0 controls (but the line breaks and tab, which have their own treatment) and DEL, as the Unicode
# "control pictures" (U+2400 + code: NUL shows as ␀): Graphviz reads its input as C strings, so a NUL
# ends the file for it, and other controls make labels it cannot lay out.
_CONTROL: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def visible_controls(text: str) -> str:
    return _CONTROL.sub(lambda match: chr(0x2421 if match.group() == "\x7f" else 0x2400 + ord(match.group())), text)


def dot_string(text: str) -> str:
    """A DOT quoted string whose label shows `text` as it is: in a label a backslash starts an
    escape (\\n, \\N...), so it is doubled; a line break becomes the label's \\n; control
    characters are shown as their pictures (see _CONTROL)."""
    text = visible_controls(text)
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\r\n", "\n").replace("\r", "\n")
    return '"' + text.replace("\n", "\\n") + '"'


def to_dot(view: ExportView) -> Iterator[str]:
    """Graphviz DOT: nodes labelled with name and type, filled by type; edges labelled with the relation type."""
    colours = type_colours(view)
    yield (f"digraph {dot_string(view.title)} {{\n"
           '  graph [overlap=false, splines=true];\n'
           '  node [shape=box, style="rounded,filled", fontname="Helvetica"];\n'
           '  edge [fontname="Helvetica", fontsize=10];\n')
    for number, entity in enumerate(view.entities):
        label = dot_string(f"{entity['name']}\n({entity['entityType']})")
        tooltip = dot_string("\n".join(map(dated_text, entity["observations"], observation_dates(entity))))
        yield f'  n{number} [label={label}, fillcolor="{colours[entity["entityType"]]}", tooltip={tooltip}];\n'
        view.tick()
    for offset, name in enumerate(view.missing):
        yield f'  n{len(view.entities) + offset} [label={dot_string(name)}, style="dashed", tooltip="missing entity"];\n'
    for relation in view.relations:
        yield (f'  n{view.index[relation["from"]]} -> n{view.index[relation["to"]]} '
               f'[label={dot_string(relation["relationType"])}];\n')
        view.tick()
    yield "}\n"


# --------------------------------------------------------------------------------------------
# Markdown, for people
# --------------------------------------------------------------------------------------------

# Characters that can start markup anywhere: every one is ASCII punctuation, which CommonMark lets a
# backslash make literal. & starts an entity (AT&amp;T would show as AT&T). An underscore inside a
# word (works_at) is no emphasis and stays as it is, for plain-text readers.
_MARKDOWN_SPECIAL: Final = re.compile(r"([\\`*\[\]<>|~&]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")
_HEADING_SPECIAL: Final = re.compile(r"([\\`*\[\]<>|~&#]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")
"""In a heading every # too: "#" after a space at its end would be taken for its closing sequence."""
# What starts a block only at the start of a line: a heading, a list item, a quote, a setext
# underline; an ordered item is its digits followed by . or ), so the escape goes before the
# punctuation (a backslash before a digit is no escape: "\1. Buy milk" would show the backslash).
_LINE_START: Final = re.compile(r"^([ \t]*)(?:([#+\-=>])|([0-9]+)([.)]))", re.MULTILINE)


def _escape_line_start(match: re.Match[str]) -> str:
    if match.group(2) is not None:
        return match.group(1) + "\\" + match.group(2)
    return match.group(1) + match.group(3) + "\\" + match.group(4)


def markdown_text(text: str, indent: str = "", special: re.Pattern[str] = _MARKDOWN_SPECIAL) -> str:
    """Text that Markdown shows as written; its further lines indented to stay in the same block.
    Control characters show as their pictures (see _CONTROL; CommonMark would turn NUL into U+FFFD)."""
    text = visible_controls(text.replace("\r\n", "\n").replace("\r", "\n"))
    text = special.sub(r"\\\1", text)
    text = _LINE_START.sub(_escape_line_start, text)
    return text.replace("\n", "\n" + indent)


def to_markdown(view: ExportView) -> Iterator[str]:
    """One section per entity: its type, its observations, and its relations in both directions."""
    touching: defaultdict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for relation in view.relations:
        touching[relation["from"]].append(relation)
        if relation["to"] != relation["from"]:
            touching[relation["to"]].append(relation)
    observations = sum(len(entity["observations"]) for entity in view.entities)
    yield (f"# {markdown_text(view.title)}\n\n"
           f"{counted(len(view.entities), 'entity', 'entities')}, {counted(len(view.relations), 'relation', 'relations')}, "
           f"{counted(observations, 'observation', 'observations')}.\n")
    for entity in view.entities:
        yield f"\n## {_one_line(entity['name'])}\n\nType: {_one_line(entity['entityType'])}\n"
        if when := entity_dates(entity):
            yield f"\n{when[0].upper()}{when[1:]}.\n"
        if entity["observations"]:
            yield "\n" + "".join(f"- {markdown_text(item, '  ')}{'' if date is None else f' *({date})*'}\n"
                                  for item, date in zip(entity["observations"], observation_dates(entity), strict=True))
        if relations := touching.get(entity["name"]):
            yield "\nRelations:\n\n" + "".join(f"- {_sentence(relation)}\n" for relation in relations)
        view.tick()
    for _ in view.relations:
        view.tick()
    if view.missing:
        missing = set(view.missing)
        yield ("\n## Relations whose entities are missing\n\n"
               + "".join(f"- {_sentence(relation)}\n" for relation in view.relations
                         if relation["from"] in missing or relation["to"] in missing))


def _one_line(text: str) -> str:
    """A heading or label line: its line breaks become spaces, so that it stays one line."""
    return markdown_text(" ".join(text.splitlines()) if "\n" in text or "\r" in text else text, special=_HEADING_SPECIAL)


def _sentence(relation: Mapping[str, Any]) -> str:
    return (f"{markdown_text(relation['from'], '  ')} *{markdown_text(relation['relationType'], '  ')}* "
            f"{markdown_text(relation['to'], '  ')}")



# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


def _html(view: ExportView) -> Iterator[str]:
    # Imported on use: the page's template and the vendored library are read only for html.
    from .html_view import to_html
    return to_html(view)


EXPORTERS: Final[dict[str, Exporter]] = {
    "jsonl": to_jsonl,
    "json": to_json,
    "graphml": to_graphml,
    "dot": to_dot,
    "markdown": to_markdown,
    "html": _html,
}
