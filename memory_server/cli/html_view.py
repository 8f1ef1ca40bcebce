"""`export --format html`: one self-contained page that shows the memory as an interactive graph.

The page carries everything it needs: the graph as JSON, the vendored Cytoscape.js library
(vendor/, MIT) and the page's own script and style (memory_graph.html). A Content-Security-Policy
forbids every network request, so opening the file never reaches anywhere.

The data sits in a ``<script type="application/json">`` element and is read with JSON.parse; no
name or observation is ever put into the page as markup, and ``<``, ``>``, ``&`` and the two
JavaScript line separators are escaped, so no entity name can end the script element.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from importlib.resources import files
from typing import Any, Final

from .view import ExportView, observation_dates

LIBRARY: Final = "vendor/cytoscape.min.js"
TEMPLATE: Final = "memory_graph.html"
_TOKEN: Final = re.compile(r"[^\W_]+")
"""A word, as index/ranking.py finds them."""
_SCRIPT_SAFE: Final = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                     "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _resource(name: str) -> str:
    return files(__package__ or "memory_server").joinpath(name).read_text(encoding="utf-8")


def page_data(view: ExportView) -> dict[str, Any]:
    """The graph in the compact shape the page reads: entities as [name, type number, observations]
    (and, when the entity has dates, a fourth item: each observation's date as answers show it, or
    null), missing entities (named by relations only) as [name, -1, []], relations as [from, to,
    type number]; and `words`, what the page's search needs to take a query as words as the server
    does (see :func:`search_words`)."""
    types = view.types
    type_number = {name: number for number, name in enumerate(types)}
    entities: list[list[Any]] = []
    for entity in view.entities:
        item = [entity["name"], type_number[entity["entityType"]], entity["observations"]]
        if "recordedAt" in entity or "happenedOn" in entity or "recordedBy" in entity:
            item.append(observation_dates(entity))
        entities.append(item)
        view.tick()
    entities.extend([name, -1, []] for name in view.missing)
    relation_types: dict[str, int] = {}
    relations = []
    for relation in view.relations:
        kind = relation_types.setdefault(relation["relationType"], len(relation_types))
        relations.append([view.index[relation["from"]], view.index[relation["to"]], kind])
        view.tick()
    return {"title": view.title, "types": types, "relationTypes": list(relation_types),
            "entities": entities, "relations": relations, "words": search_words(view)}


def search_words(view: ExportView) -> dict[str, Any]:
    """The server's terms for the page's search by words (index/ranking.py): every word of the
    memory whose terms are not the word itself (stemmed, folded, or a stop word: no terms), the
    words a query drops around its topic, and the ranking's constants. A query word the memory
    does not hold is its own term: it can only match a word of the same form."""
    from ..index import ranking

    vocabulary: dict[str, list[str]] = {}
    seen: set[str] = set()
    for entity in view.entities:
        for text in (entity["name"], entity["entityType"], *entity["observations"]):
            for token in _TOKEN.findall(text.lower()):
                if token in seen:
                    continue
                seen.add(token)
                found = ranking.terms(token)
                if found != [token]:
                    vocabulary[token] = found
    return {"vocabulary": vocabulary, "stop": sorted(ranking.STOP_WORDS), "question": sorted(ranking.QUESTION_WORDS),
            "k1": ranking.DEFAULT.k1, "b": ranking.DEFAULT.b}


def script_json(value: Any) -> str:
    """JSON that can stand inside a <script> element whatever its strings hold."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_SCRIPT_SAFE)


def to_html(view: ExportView) -> Iterator[str]:
    library = _resource(LIBRARY)
    if "</script" in library.lower():  # a future version of the library must not end its own element
        raise ValueError(f"{LIBRARY} contains '</script' and cannot be inlined")
    before_data, rest = _resource(TEMPLATE).split("{{DATA}}")
    before_library, after_library = rest.split("{{LIBRARY}}")
    yield before_data.replace("{{TITLE}}", html.escape(view.title))
    yield script_json(page_data(view))
    yield before_library
    yield library
    yield after_library
