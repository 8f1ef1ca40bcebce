"""The write rules: the tools' writes (and an import's merge) as pure functions from a graph to a
:class:`~.graph.Change`, which holds the new graph, the tool's answer and whether anything changed.

A write replaces only the containers it changes and keeps the Node of every entity it leaves
alone; it brings the graph's indexes (:mod:`.indexes`) and census (:mod:`.census`) up to date
with it. :func:`row_changes` tells a database store what a write changed, row by row.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from operator import attrgetter
from typing import Any, Final, NamedTuple, TypeAlias

import msgspec
from msgspec import UnsetType

from . import authors, dates
from .census import census_after_entities, census_after_links, known_census
from .graph import Change, Edge, Graph, GraphError, Node, Triple, make_edge, make_node, plural
from .indexes import text_changes
from .items import Entity, ObservationsToAdd, ObservationsToDelete, Relation
from .records import EntityRecord, RelationRecord


def unique(items: Iterable[str]) -> list[str]:
    """The items without repeats, first occurrence first."""
    return list(dict.fromkeys(items))


def _with_record(node: Node, record: EntityRecord) -> Node:
    return make_node(record, node.seq, node.extra)


def _undated_view(node: Node) -> dict[str, Any]:
    view = node.view
    return {"name": view["name"], "entityType": view["entityType"], "observations": view["observations"]}


def _grown(record: EntityRecord, added: Sequence[tuple[str, str | None, str | None]], now: str | None,
           written_by: Sequence[str | None]) -> EntityRecord:
    """The record with observations appended (see dates.with_added), each with its author."""
    return authors.grown(record, dates.with_added(record, added, now), written_by)


def _happened(item: Entity | ObservationsToAdd) -> str | None:
    """The stored form of an item's optional happenedOn; GraphError, saying what is accepted, when malformed."""
    given = item.happened_on
    if isinstance(given, UnsetType):
        return None
    if not isinstance(given, str):  # an item made in Python is not checked as a decoded one is
        raise GraphError(f"happenedOn must be a string: {dates.ACCEPTED}. Nothing was changed.")
    try:
        return dates.parse_when(given)[1]
    except ValueError as error:
        raise GraphError(f"happenedOn {error}. Nothing was changed.") from None


_seq: Final[Callable[[Node | Edge], int]] = attrgetter("seq")


class _LinkEdits:
    """Copy-on-write edits of the endpoint index: each touched name's set is copied once."""

    def __init__(self, links: Mapping[str, AbstractSet[Triple]]) -> None:
        self._links: dict[str, AbstractSet[Triple]] = dict(links)
        self._owned: dict[str, set[Triple]] = {}
        self.touched: set[str] = set()

    def _own(self, name: str) -> set[Triple]:
        if (owned := self._owned.get(name)) is None:
            owned = self._owned[name] = set(self._links.get(name, ()))
            self._links[name] = owned
            self.touched.add(name)
        return owned

    def add(self, triple: Triple) -> None:
        self._own(triple[0]).add(triple)
        self._own(triple[1]).add(triple)

    def discard(self, triple: Triple) -> None:
        for name in (triple[0], triple[1]):
            if name in self._links:
                links = self._own(name)
                links.discard(triple)
                if not links:
                    del self._links[name]
                    del self._owned[name]

    def result(self) -> dict[str, AbstractSet[Triple]]:
        return self._links


def _with_entities(graph: Graph, entities: Mapping[str, Node], changed: Iterable[str], **fields: Any) -> Graph:
    """The graph with new entities, its indexes and census told about the `changed` names."""
    words, terms = graph.words, graph.terms
    changed = list(changed)
    if words is not None:
        words = words.updated(text_changes(graph.entities, entities, changed))
    if terms is not None:
        terms = terms.updated(text_changes(graph.entities, entities, changed))
    census = census_after_entities(graph, entities, changed)
    return replace(graph, entities=entities, words=words, terms=terms, census=census, **fields)


def triple_of(relation: Relation) -> Triple:
    """A relation item's key in the graph: (from, to, relationType)."""
    return relation.source, relation.to, relation.relation_type


def _missing_message(missing: Sequence[str]) -> str:
    if len(missing) == 1:
        return f"Entity with name {missing[0]} not found"
    return f"Entities with names {', '.join(missing)} not found"


def create_entities(graph: Graph, entities: Sequence[Entity], now: str | None = None,
                    author: str | None = None) -> Change:
    """New entities; names that exist, or repeat an earlier name of the call, are skipped whole.

    Each is created `now` (a UTC stamp; None: no dates), its observations recorded now, by
    `author` (see :mod:`.authors`) and, with the item's `happenedOn`, told to have happened then
    (see :mod:`.dates`)."""
    author = authors.recorded_author(author, now)
    happened = [_happened(item) for item in entities]  # every date checked before anything is made
    fresh: dict[str, Node] = {}
    skipped: dict[str, None] = {}
    seq = graph.next_seq
    for item, when in zip(entities, happened, strict=True):
        name = item.name
        if name in graph.entities or name in fresh:
            skipped[name] = None
            continue
        record = dates.created(name, item.entity_type, unique(item.observations), now, when)
        if author is not None:
            record = authors.with_authors(record, [author] * len(record.observations))
        fresh[name] = make_node(record, seq)
        seq += 1
    # The entities as given (as the reference answers): their dates show in reads.
    value: dict[str, Any] = {"entities": [_undated_view(node) for node in fresh.values()]}
    if skipped:
        value["skipped"] = list(skipped)
    if not fresh:
        return Change(graph, value, False)
    return Change(_with_entities(graph, {**graph.entities, **fresh}, fresh, next_seq=seq), value, True)


def create_relations(graph: Graph, relations: Sequence[Relation]) -> Change:
    """New relations between existing entities; relations that exist already are skipped."""
    missing = unique(name for item in relations for name in (item.source, item.to)
                     if name not in graph.entities)
    if missing:
        raise GraphError(f"{_missing_message(missing)}; create the missing entities first "
                         "(create_entities). No relations were created.")
    fresh: dict[Triple, Edge] = {}
    seq = graph.next_seq
    for item in relations:
        triple = triple_of(item)
        if triple in graph.relations or triple in fresh:
            continue
        fresh[triple] = make_edge(RelationRecord(*triple), seq)
        seq += 1
    value = {"relations": [edge.view for edge in fresh.values()]}
    if not fresh:
        return Change(graph, value, False)
    edits = _LinkEdits(graph.links)
    for triple in fresh:
        edits.add(triple)
    links = edits.result()
    new = replace(graph, relations={**graph.relations, **fresh}, links=links, next_seq=seq,
                  census=census_after_links(known_census(graph), links, edits.touched))
    return Change(new, value, True)


def add_observations(graph: Graph, observations: Sequence[ObservationsToAdd], now: str | None = None,
                     author: str | None = None) -> Change:
    """Observations the entities do not have yet; fails whole when any entity is missing (or a
    happenedOn is not a date). Each is recorded `now` (None: undated) by `author`, with its item's
    happenedOn."""
    missing = unique(item.entity_name for item in observations if item.entity_name not in graph.entities)
    if missing:
        raise GraphError(f"{_missing_message(missing)}. No observations were added.")
    happened = [_happened(item) for item in observations]
    lists: dict[str, tuple[list[tuple[str, str | None, str | None]], set[str]]] = {}
    written_by: dict[str, list[str | None]] = {}
    results = []
    author = authors.recorded_author(author, now)
    for item, when in zip(observations, happened, strict=True):
        name = item.entity_name
        if name not in lists:
            lists[name] = ([], set(graph.entities[name].record.observations))
        current, present = lists[name]
        added = []
        for content in item.contents:
            if content not in present:  # one already there keeps its first author
                present.add(content)
                current.append((content, now, when))
                written_by.setdefault(name, []).append(author)
                added.append(content)
        results.append({"entityName": name, "addedObservations": added})
    grown = {name: _with_record(graph.entities[name], _grown(graph.entities[name].record, current, now, written_by[name]))
             for name, (current, _) in lists.items() if current}
    value = {"results": results}
    if not grown:
        return Change(graph, value, False)
    return Change(_with_entities(graph, {**graph.entities, **grown}, grown), value, True)


def delete_entities(graph: Graph, entity_names: Sequence[str]) -> Change:
    """Removes the entities and every relation touching one of the names; never fails."""
    requested = unique(entity_names)
    found = [name for name in requested if name in graph.entities]
    not_found = [name for name in requested if name not in graph.entities]
    doomed: set[Triple] = set()
    for name in requested:
        doomed.update(graph.links.get(name, ()))
    message = _deleted_entities_message(len(found), len(doomed), not_found)
    value = {"success": True, "message": message, "notFound": not_found}
    if not found and not doomed:
        return Change(graph, value, False)
    gone = set(found)
    new = _without_relations(_with_entities(graph, _without_keys(graph.entities, gone), gone), doomed, gone)
    return Change(new, value, True)


def _deleted_entities_message(entities: int, relations: int, not_found: Sequence[str]) -> str:
    message = f"Deleted {plural(entities, 'entity', 'entities')}"
    if relations:
        message += f" and {plural(relations, 'relation', 'relations')} connected to them"
    message += "."
    if not_found:
        message += f" Not found: {', '.join(not_found)}."
    return message


def _without_keys(mapping: Mapping[Any, Any], keys: set[Any]) -> Mapping[Any, Any]:
    if not keys:
        return mapping
    # Copying a dict whole is much cheaper than rebuilding it item by item.
    copy = dict(mapping)
    for key in keys:
        del copy[key]
    return copy


def _without_relations(graph: Graph, doomed: set[Triple], gone_entities: Collection[str] = ()) -> Graph:
    """The graph without the given relations and without the repeats of anything removed."""
    relations: Mapping[Triple, Edge] = graph.relations
    links: Mapping[str, AbstractSet[Triple]] = graph.links
    census = known_census(graph)
    if doomed:
        relations = _without_keys(graph.relations, doomed)
        edits = _LinkEdits(graph.links)
        for triple in doomed:
            edits.discard(triple)
        links = edits.result()
        census = census_after_links(census, links, edits.touched)
    kept = tuple(line for line in graph.kept
                 if line.entity not in gone_entities and line.relation not in doomed)
    return replace(graph, relations=relations, links=links, kept=kept, census=census)


def delete_observations(graph: Graph, deletions: Sequence[ObservationsToDelete], now: str | None = None) -> Change:
    """Removes the given observations (every copy of each, with their dates); unknown entities and
    observations are ignored. An entity that lost one was changed `now` (None: its dates kept as they are)."""
    unwanted: dict[str, set[str]] = {}
    for item in deletions:
        name = item.entity_name
        if name in graph.entities:
            unwanted.setdefault(name, set()).update(item.observations)
    shrunk: dict[str, Node] = {}
    for name, doomed in unwanted.items():
        record = graph.entities[name].record
        keep = [observation not in doomed for observation in record.observations]
        if not all(keep):
            shrunk[name] = _with_record(graph.entities[name], authors.kept(record, dates.with_kept(record, keep, now), keep))
    count = sum(len(graph.entities[name].record.observations) - len(node.record.observations)
                for name, node in shrunk.items())
    value = {"success": True, "message": f"Deleted {plural(count, 'observation', 'observations')}.",
             "deletedCount": count}
    if not shrunk:
        return Change(graph, value, False)
    return Change(_with_entities(graph, {**graph.entities, **shrunk}, shrunk), value, True)


def delete_relations(graph: Graph, relations: Sequence[Relation]) -> Change:
    """Removes the given relations; relations that do not exist are ignored."""
    doomed = {triple for triple in map(triple_of, relations) if triple in graph.relations}
    value = {"success": True, "message": f"Deleted {plural(len(doomed), 'relation', 'relations')}.",
             "deletedCount": len(doomed)}
    if not doomed:
        return Change(graph, value, False)
    return Change(_without_relations(graph, doomed), value, True)


# --------------------------------------------------------------------------------------------
# Merging another memory into this one (mcp-server-memory import)
# --------------------------------------------------------------------------------------------

IncomingEntity: TypeAlias = tuple[EntityRecord, "dict[str, msgspec.Raw] | None"]
"""An entity to merge, with the extra fields its line carried (kept on what it creates)."""
IncomingRelation: TypeAlias = tuple[RelationRecord, "dict[str, msgspec.Raw] | None"]


def merge_graph(graph: Graph, entities: Sequence[IncomingEntity], relations: Sequence[IncomingRelation],
                now: str | None = None) -> Change:
    """Another graph merged in by the tools' rules, in order, as one change.

    An entity whose name is new is created (create_entities); an entity that exists gains the
    observations it lacks (add_observations), and keeps its type even when the incoming one
    differs; a relation is created when both ends exist after the entities are merged and it
    is not there yet (create_relations). The value reports all of it, and what was left out.

    Dates come along: an observation keeps the recordedAt and happenedOn it carries (one without
    stays undated: when it was recorded is not known, the import is not that time); a created
    entity keeps its createdAt and updatedAt and gets none it does not bring (so that an export
    imported into an empty memory is the same memory); an entity that gained observations was
    changed `now` (None: no new dates).
    """
    # name -> (the first incoming record, its observations with their dates, their contents, extra fields)
    Dated = list[tuple[str, str | None, str | None]]
    created: dict[str, tuple[EntityRecord, Dated, set[str], dict[str, msgspec.Raw] | None]] = {}
    grown: dict[str, tuple[Dated, set[str]]] = {}
    added: dict[str, list[str]] = {}
    conflicts: list[dict[str, str]] = []
    for record, extra in entities:
        name = record.name
        if name in created:
            kept_type, current, present = created[name][0].entityType, created[name][1], created[name][2]
        elif name in graph.entities:
            kept_type = graph.entities[name].record.entityType
            if name not in grown:
                grown[name] = ([], set(graph.entities[name].record.observations))
            current, present = grown[name]
        else:
            current, present = [], set()
            created[name] = (record, current, present, extra or None)
            kept_type = record.entityType
        if record.entityType != kept_type:
            conflicts.append({"name": name, "entityType": kept_type, "incomingType": record.entityType})
        for content, recorded, happened in dates.incoming(record):
            if content not in present:
                present.add(content)
                current.append((content, recorded, happened))
                if name in grown:
                    added.setdefault(name, []).append(content)
    seq = graph.next_seq
    fresh: dict[str, Node] = {}
    written_by = authors.by_content(record for record, _ in entities)

    def authors_for(name: str, observations: Dated) -> list[str | None]:
        return [written_by.get(name, {}).get(content) for content, _, _ in observations]
    for name, (first, observations, _, extra) in created.items():
        made = _grown(EntityRecord(name, first.entityType, []), observations, first.updatedAt,
                      authors_for(name, observations))
        made = msgspec.structs.replace(made, createdAt=first.createdAt)
        fresh[name] = make_node(made, seq, extra)
        seq += 1
    extended = {name: _with_record(graph.entities[name], _grown(graph.entities[name].record, grown[name][0], now,
                                                                authors_for(name, grown[name][0])))
                for name in added}
    everyone = {**graph.entities, **extended, **fresh}

    new_relations: dict[Triple, Edge] = {}
    present_relations = 0
    left_out: list[dict[str, Any]] = []
    for link, extra in relations:
        triple = (link.source, link.target, link.relationType)
        if triple in graph.relations or triple in new_relations:
            present_relations += 1
        elif missing := unique(name for name in triple[:2] if name not in everyone):
            left_out.append({"from": triple[0], "to": triple[1], "relationType": triple[2], "missing": missing})
        else:
            new_relations[triple] = make_edge(link, seq, extra or None)
            seq += 1

    value: dict[str, Any] = {
        "createdEntities": list(fresh),
        "addedObservations": [{"entityName": name, "addedObservations": contents} for name, contents in added.items()],
        "createdRelations": [edge.view for edge in new_relations.values()],
        "unchangedEntities": len({record.name for record, _ in entities} - fresh.keys() - added.keys()),
        "presentRelations": present_relations,
        "typeConflicts": conflicts,
        "relationsWithoutEntities": left_out,
    }
    if not (fresh or extended or new_relations):
        return Change(graph, value, False)
    merged = _with_entities(graph, everyone, [*extended, *fresh], next_seq=seq)
    if new_relations:
        edits = _LinkEdits(merged.links)
        for triple in new_relations:
            edits.add(triple)
        links = edits.result()
        merged = replace(merged, relations={**graph.relations, **new_relations}, links=links,
                         census=census_after_links(known_census(merged), links, edits.touched))
    return Change(merged, value, True)


# --------------------------------------------------------------------------------------------
# A memory shared through a database: what a write changed, row by row
# --------------------------------------------------------------------------------------------


class RowChanges(NamedTuple):
    """What a write changed, row by row: what a database store writes in its transaction."""

    entities: list[Node]
    """Entities made or replaced (new observations, fewer observations)."""
    gone_entities: list[str]
    relations: list[Edge]
    gone_relations: list[Triple]


def row_changes(before: Graph, after: Graph, names: Iterable[str] | None = None,
                triples: Iterable[Triple] | None = None) -> RowChanges:
    """The rows that differ between two versions of a graph.

    `names` and `triples`: where the write may have changed something (the names and relations
    it was given); the relations touching those names are looked at too. None: look everywhere
    (an import), which costs a pass over the whole graph."""
    if names is None or triples is None:
        name_set: set[str] = set(before.entities) | set(after.entities)
        triple_set: set[Triple] = set(before.relations) | set(after.relations)
    else:
        name_set = set(names)
        triple_set = set(triples)
        for name in name_set:
            triple_set.update(before.links.get(name, ()))
            triple_set.update(after.links.get(name, ()))
    entities = [node for name in name_set if (node := after.entities.get(name)) is not None
                and before.entities.get(name) is not node]
    entities.sort(key=_seq)
    gone = [name for name in name_set if name in before.entities and name not in after.entities]
    relations = sorted((edge for triple in triple_set if (edge := after.relations.get(triple)) is not None
                        and triple not in before.relations), key=_seq)
    gone_relations = [triple for triple in triple_set if triple in before.relations and triple not in after.relations]
    return RowChanges(entities, gone, relations, gone_relations)
