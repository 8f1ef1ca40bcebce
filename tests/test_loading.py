"""storage/loading.py: L3 (what a load made goes straight to the collector's oldest generation) and
L4 (decode then graph_of is parse)."""

from __future__ import annotations

import gc
import json

from memory_server.storage.collector import paused as collector_paused
from memory_server.storage.loading import decode, graph_of, parse


def memory_bytes(count: int) -> bytes:
    lines = [json.dumps({"type": "entity", "name": f"e{n}", "entityType": "t", "observations": [f"o{n}"]})
             for n in range(count)]
    lines += [json.dumps({"type": "relation", "from": f"e{n}", "to": f"e{n + 1}", "relationType": "r"})
              for n in range(count - 1)]
    return "\n".join([*lines, "not json", '{"type":"note"}']).encode()


def test_l3_what_a_load_made_is_in_the_oldest_generation() -> None:
    enabled = gc.isenabled()
    gc.enable()
    try:
        graph = parse(memory_bytes(3000))
        view = graph.entities["e7"].view
        young = {id(item) for generation in (0, 1) for item in gc.get_objects(generation=generation)}
        assert id(view) not in young and id(graph.entities) not in young
        assert any(item is view for item in gc.get_objects(generation=2))
        assert gc.isenabled()  # resumed once the last pause ended
        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # counted: the outer pause still holds
        assert gc.isenabled()
    finally:
        if not enabled:
            gc.disable()


def test_l4_decode_then_graph_of_is_parse() -> None:
    data = memory_bytes(50)
    assert graph_of(decode(data)) == parse(data)
    assert graph_of(decode(data, pieces=True)) == parse(data, pieces=True)
    assert len(parse(data).rejected) == 1 and len(parse(data).kept) == 1
