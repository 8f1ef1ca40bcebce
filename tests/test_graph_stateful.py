"""Random sequences of the nine operations against a naive model written here, with fresh stores
reading the file from disk in between and a second store writing as another process would."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import msgspec
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memory_server.model.census import summarise
from memory_server.model.items import Entity, ObservationsToAdd, ObservationsToDelete, Relation
from memory_server.retrieval.search import search_nodes
from memory_server.storage.store import GraphError, GraphStore

# Small alphabets, so that names collide, cases differ and searches hit; "\x00" exercises the
# search across field boundaries.
names = st.sampled_from(["Alice", "alice", "Bob", "Ünï", "", "x\x00y"])
types = st.sampled_from(["person", "Person", "thing"])
texts = st.sampled_from(["likes tea", "LIKES TEA", "tea", "", "é", "x", "green\u3000tea", "x\ty"])
# Queries with whitespace in them span words, which the word index must not miss.
queries = st.sampled_from(["", "tea", "ALI", "\x00", "x\x00y", "zz", "É", "ing", "on", "es te", "n\u3000t",
                           " tea", "x\ty", "  "])
entities = st.lists(st.fixed_dictionaries({"name": names, "entityType": types,
                                           "observations": st.lists(texts, max_size=3)}), max_size=3)
observation_items = st.lists(st.fixed_dictionaries({"entityName": names, "contents": st.lists(texts, max_size=3)}),
                             max_size=3)
deletion_items = st.lists(st.fixed_dictionaries({"entityName": names, "observations": st.lists(texts, max_size=3)}),
                          max_size=3)

ITEMS: dict[str, Any] = {"create_entities": list[Entity], "create_relations": list[Relation],
                         "add_observations": list[ObservationsToAdd], "delete_entities": list[str],
                         "delete_observations": list[ObservationsToDelete], "delete_relations": list[Relation]}
"""What each write of the store takes, decoded from the items drawn above."""


def by_name(item: dict[str, Any]) -> str:
    return str(item["name"])


def plural(count: int, singular: str, many: str) -> str:
    return f"{count} {singular if count == 1 else many}"


def missing_message(missing: list[str]) -> str:
    if len(missing) == 1:
        return f"Entity with name {missing[0]} not found"
    return f"Entities with names {', '.join(missing)} not found"


class Model:
    """The graph the obvious way: two lists, scanned for everything."""

    def __init__(self) -> None:
        self.entities: list[dict[str, Any]] = []
        self.relations: list[dict[str, str]] = []

    def names(self) -> list[str]:
        return [e["name"] for e in self.entities]

    def find(self, name: str) -> dict[str, Any]:
        return next(e for e in self.entities if e["name"] == name)

    def missing(self, wanted: list[str]) -> list[str]:
        out: list[str] = []
        for name in wanted:
            if name not in self.names() and name not in out:
                out.append(name)
        return out

    def create_entities(self, items: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        created: list[dict[str, Any]] = []
        skipped: list[str] = []
        for item in items:
            if item["name"] in self.names() or any(c["name"] == item["name"] for c in created):
                if item["name"] not in skipped:
                    skipped.append(item["name"])
                continue
            observations: list[str] = []
            for text in item["observations"]:
                if text not in observations:
                    observations.append(text)
            created.append({"name": item["name"], "entityType": item["entityType"], "observations": observations})
        self.entities += created
        value: dict[str, Any] = {"entities": created}
        if skipped:
            value["skipped"] = skipped
        return value, bool(created)

    def create_relations(self, items: list[dict[str, str]]) -> tuple[dict[str, Any], bool]:
        if missing := self.missing([name for item in items for name in (item["from"], item["to"])]):
            raise GraphError(missing_message(missing))
        created: list[dict[str, str]] = []
        for item in items:
            if item not in self.relations and item not in created:
                created.append(dict(item))
        self.relations += created
        return {"relations": created}, bool(created)

    def add_observations(self, items: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        if missing := self.missing([item["entityName"] for item in items]):
            raise GraphError(missing_message(missing))
        results = []
        for item in items:
            entity = self.find(item["entityName"])
            added = []
            for text in item["contents"]:
                if text not in entity["observations"]:
                    entity["observations"].append(text)
                    added.append(text)
            results.append({"entityName": item["entityName"], "addedObservations": added})
        return {"results": results}, any(r["addedObservations"] for r in results)

    def delete_entities(self, wanted: list[str]) -> tuple[dict[str, Any], bool]:
        requested = list(dict.fromkeys(wanted))
        found = [name for name in requested if name in self.names()]
        not_found = [name for name in requested if name not in self.names()]
        gone = [r for r in self.relations if r["from"] in requested or r["to"] in requested]
        self.entities = [e for e in self.entities if e["name"] not in requested]
        self.relations = [r for r in self.relations if r not in gone]
        message = f"Deleted {plural(len(found), 'entity', 'entities')}"
        if gone:
            message += f" and {plural(len(gone), 'relation', 'relations')} connected to them"
        message += "." + (f" Not found: {', '.join(not_found)}." if not_found else "")
        return {"success": True, "message": message, "notFound": not_found}, bool(found or gone)

    def delete_observations(self, items: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        count = 0
        for item in items:
            if item["entityName"] in self.names():
                entity = self.find(item["entityName"])
                kept = [o for o in entity["observations"] if o not in item["observations"]]
                count += len(entity["observations"]) - len(kept)
                entity["observations"] = kept
        message = f"Deleted {plural(count, 'observation', 'observations')}."
        return {"success": True, "message": message, "deletedCount": count}, count > 0

    def delete_relations(self, items: list[dict[str, str]]) -> tuple[dict[str, Any], bool]:
        gone = [r for r in self.relations if r in items]
        self.relations = [r for r in self.relations if r not in items]
        message = f"Deleted {plural(len(gone), 'relation', 'relations')}."
        return {"success": True, "message": message, "deletedCount": len(gone)}, bool(gone)

    def read_graph(self) -> dict[str, Any]:
        return {"entities": self.entities, "relations": self.relations}

    def search_nodes(self, query: str) -> dict[str, Any]:
        q = query.lower()
        found = [e for e in self.entities
                 if q in e["name"].lower() or q in e["entityType"].lower()
                 or any(q in o.lower() for o in e["observations"])]
        return self._with_relations(found)

    def open_nodes(self, wanted: list[str]) -> dict[str, Any]:
        return self._with_relations([e for e in self.entities if e["name"] in wanted])

    def _with_relations(self, found: list[dict[str, Any]]) -> dict[str, Any]:
        names = [e["name"] for e in found]
        return {"entities": found,
                "relations": [r for r in self.relations if r["from"] in names or r["to"] in names]}


class StoreMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="graph-stateful-"))
        self.path = self.directory / "memory.jsonl"
        self.store = GraphStore(self.path)
        self.other = GraphStore(self.path)
        self.model = Model()

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def check_write(self, operation: str, argument: Any, store: GraphStore | None = None) -> None:
        # The model reads the items as a client sends them; the store takes them decoded.
        items = msgspec.convert(argument, ITEMS[operation])
        try:
            expected, changed = getattr(self.model, operation)(argument)
        except GraphError as error:
            try:
                getattr(store or self.store, operation)(items)
            except GraphError as actual:
                assert str(actual).startswith(str(error)), (str(actual), str(error))
            else:
                raise AssertionError(f"{operation}({argument!r}) should have failed with {error}")
            return
        outcome = getattr(store or self.store, operation)(items)
        assert outcome.value == expected
        assert outcome.changed == changed
        assert outcome.notes == []

    @rule(items=entities)
    def create_entities(self, items: list[dict[str, Any]]) -> None:
        self.check_write("create_entities", items)

    def endpoints(self) -> st.SearchStrategy[str]:
        # Mostly names that exist, so that relations get made; sometimes any name, so that some fail.
        known = self.model.names()
        return st.one_of(st.sampled_from(known), st.sampled_from(known), names) if known else names

    def relation_items(self, data: st.DataObject) -> list[dict[str, str]]:
        return data.draw(st.lists(st.fixed_dictionaries({
            "from": self.endpoints(), "to": self.endpoints(), "relationType": st.sampled_from(["r", "R"])}),
            max_size=3))

    @rule(data=st.data())
    def create_relations(self, data: st.DataObject) -> None:
        self.check_write("create_relations", self.relation_items(data))

    @rule(items=observation_items)
    def add_observations(self, items: list[dict[str, Any]]) -> None:
        self.check_write("add_observations", items)

    @rule(wanted=st.lists(names, max_size=3))
    def delete_entities(self, wanted: list[str]) -> None:
        self.check_write("delete_entities", wanted)

    @rule(items=deletion_items)
    def delete_observations(self, items: list[dict[str, Any]]) -> None:
        self.check_write("delete_observations", items)

    @rule(data=st.data())
    def delete_relations(self, data: st.DataObject) -> None:
        existing = self.model.relations
        items = data.draw(st.lists(st.sampled_from(existing), max_size=2)) if existing else []
        self.check_write("delete_relations", items + self.relation_items(data))

    @rule(query=queries)
    def search_nodes(self, query: str) -> None:
        # The model finds what the reference finds; the store orders those by relevance.
        expected, found = self.model.search_nodes(query), search_nodes(self.store, query)
        if expected["entities"]:
            assert sorted(found["entities"], key=by_name) == sorted(expected["entities"], key=by_name)
            assert found["relations"] == expected["relations"]
        else:
            # A query taken as words: ranked by an index carried through the writes, as one
            # made afresh from the file ranks.
            assert found == search_nodes(GraphStore(self.path), query)

    @rule(wanted=st.lists(names, max_size=3))
    def open_nodes(self, wanted: list[str]) -> None:
        assert self.store.open_nodes(wanted) == self.model.open_nodes(wanted)

    @rule()
    def reload_from_disk(self) -> None:
        self.store = GraphStore(self.path)
        assert self.store.poll_external_change() is False

    @precondition(lambda machine: machine.model.entities)
    @rule(data=st.data())
    def another_process_writes(self, data: st.DataObject) -> None:
        self.store.poll_external_change()
        name = data.draw(st.sampled_from(self.model.names()))
        text = data.draw(texts)
        changed = text not in self.model.find(name)["observations"]
        self.check_write("add_observations", [{"entityName": name, "contents": [text]}], store=self.other)
        assert self.store.poll_external_change() is changed

    @invariant()
    def graphs_are_equal(self) -> None:
        assert self.store.read_graph() == self.model.read_graph()

    @invariant()
    def summaries_are_counted_right(self) -> None:
        # Asked for after every step, so that every write after the first one updates the counts.
        listing = self.store.read_graph_for_pages()["entities"]
        model = self.model.read_graph()
        assert listing.summarise(20_000) == summarise(model["entities"], model["relations"], 20_000)


StoreMatchesModel.TestCase.settings = settings(
    max_examples=50, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestStoreMatchesModel = StoreMatchesModel.TestCase
