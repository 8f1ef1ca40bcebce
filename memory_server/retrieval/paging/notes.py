"""The notes a page carries beside its JSON: what it holds, what was left out, and how to get it."""

from __future__ import annotations

from typing import Final

from .pages import Answer, Facts, _FactFill, _Fill

_SHOWN_NAME: Final = 60


def _shown(name: str) -> str:
    text = repr(name)
    return text if len(text) <= _SHOWN_NAME else text[:_SHOWN_NAME] + "...'"


def partial_marker(shown: int, total: int) -> str:
    """What an entity shown with only some of its observations says about itself."""
    return f"{shown:,} of {total:,} observations shown; open_nodes gives all"


def _entity_note(budget: int, answer: Answer, start: int, fill: _Fill, first: bool) -> str:
    """The note of a page of entities and relations (read_graph, open_nodes, search by entities)."""
    split = answer.entities
    relations = len(answer.units) - split
    done_entities = min(fill.unit + (1 if fill.part else 0), split)
    shown_entities = _span("entity", "entities", start + 1, done_entities)
    first_relation, done_relations = max(start - split, 0), max(fill.unit - split, 0)
    shown_relations = _span("relation", "relations", first_relation + 1, done_relations)
    tool = answer.tool
    lines = [f"This {tool} answer is too large for one reply ({split:,} entities and {relations:,} relations; "
             f"the answer budget is {budget:,} characters), so it comes in pages. This page holds "
             f"{shown_entities} and {shown_relations}."]
    if first and answer.summary is not None:
        lines.append("The summary at the top counts the entities by type and names the most connected ones: "
                     "open_nodes or search_nodes them to read just what you need.")
    if fill.unit < len(answer.units):
        same = {"read_graph": "", "search_nodes": " with the same query and limit",
                "open_nodes": " with the same names"}.get(tool, " with the same arguments")
        narrow = {"read_graph": "search_nodes with a query or open_nodes with names",
                  "search_nodes": "a narrower query or a limit",
                  "open_nodes": "fewer names"}.get(tool, "narrower arguments")
        lines.append(f"Left for the next pages: {split - min(fill.unit, split):,} entities and "
                     f"{relations - done_relations:,} relations. To get them, call {tool} again{same} with "
                     f"cursor set to this answer's nextCursor; or narrow it down with {narrow}.")
    else:
        lines.append("This is the last page.")
    if not first:
        lines.append("Pages show the memory as it was when the first page was made; changes since then are "
                     "not in them.")
    return " ".join(lines + fill.events)


def _facts_note(facts: Facts, fill: _FactFill, start: int, more: bool, partial: int) -> str:
    shown = sum(len(observations) for observations in fill.shown.values())
    how = "best first" if facts.words else "entities holding the query, most relevant first"
    lines = [f"search_nodes: {_count(shown, 'observation')} of {_count(len(fill.shown), 'entity')}, {how} "
             f"(facts {start + 1:,}-{fill.end:,} of {len(facts.order):,}, from "
             f"{_count(len(facts.entities) + facts.unlisted, 'matching entity')})."]
    if facts.remark:
        lines.insert(0, facts.remark)
    if partial:
        lines.append('An entity marked "partial" has more observations: open_nodes gives it whole.')
    if fill.more_relations:
        lines.append(f"{_count(fill.more_relations, 'more relation')} touch the entities shown: open_nodes "
                     "gives them.")
    if more:
        lines.append("More: the same arguments with cursor set to nextCursor (or a larger characters).")
    return " ".join(lines + fill.cut)


def _count(number: int, thing: str) -> str:
    if number == 1:
        return f"1 {thing}"
    plural = thing[:-1] + "ies" if thing.endswith("y") else thing + "s"
    return f"{number:,} {plural}"


def _span(one: str, many: str, first: int, last: int) -> str:
    if last < first:
        return f"no {many}"
    return f"{one} {first:,}" if first == last else f"{many} {first:,} to {last:,}"
