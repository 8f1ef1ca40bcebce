"""`mcp-server-memory export --format html` in a real headless Chromium, driven over the DevTools protocol:
the page renders without errors and without any network request, the search finds an entity, a real
mouse click on its node shows its observations, hostile names stay text, and 10,000 entities stay usable.

Chromium is Debian's; the fixture installs it with apt-get when it is missing and this process may.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import example_memory
import pytest
from cdp_browser import Browser, browser_in, chromium  # noqa: F401  (a fixture)
from conftest import WAIT_SECONDS
from memory_helpers import entity, entity_record, record_line, relation, relation_record, server_environment

CONSOLE_SCRIPT = Path(sys.executable).with_name("mcp-server-memory")

HOSTILE = "</script><script>alert(1)</script>"
HOSTILE_OBSERVATION = "<img src=x onerror=alert(2)> & </SCRIPT > <!-- \u2028 end"


@pytest.fixture
def browser(chromium: str, tmp_path: Path) -> Iterator[Browser]:
    with browser_in(chromium, tmp_path, viewport=(1400, 860)) as opened:
        yield opened


def export_html(memory_file: Path, page: Path) -> None:
    done = subprocess.run([str(CONSOLE_SCRIPT), "export", "--format", "html", "-o", str(page)],
                          env=server_environment(memory_file), capture_output=True, text=True, timeout=WAIT_SECONDS * 4)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def open_page(browser: Browser, page: Path) -> None:
    browser.navigate(page.as_uri())
    browser.wait_for("window.memoryGraph && window.memoryGraph.ready === true")


def node_position(browser: Browser, name: str) -> tuple[float, float]:
    """Where the entity's node is on the screen (viewport coordinates)."""
    found = browser.evaluate(f"""(() => {{
        const node = memoryGraph.cy.nodes().filter((n) => n.data('label') === {json.dumps(name)});
        if (node.empty()) return null;
        const box = document.getElementById('graph').getBoundingClientRect();
        const at = node.renderedPosition();
        return [at.x + box.left, at.y + box.top];
    }})()""")
    assert found is not None, f"{name} is not drawn"
    return found[0], found[1]


def text_of(browser: Browser, element_id: str) -> str:
    return browser.evaluate(f"(document.getElementById({json.dumps(element_id)}) || {{}}).innerText || ''")


def assert_clean(browser: Browser, page: Path) -> None:
    assert browser.problems() == []
    assert browser.requested_urls() == [page.as_uri()], "the page reaches nothing beyond itself"


def test_the_page_renders_searches_and_shows_a_clicked_entity(browser: Browser, tmp_path: Path) -> None:
    memory_file, page = tmp_path / "memory.jsonl", tmp_path / "memory.html"
    example_memory.write(memory_file)
    export_html(memory_file, page)
    source = page.read_text(encoding="utf-8")
    assert "Content-Security-Policy" in source and "default-src 'none'" in source
    open_page(browser, page)
    drawn = browser.evaluate("memoryGraph.cy.nodes().length")
    assert drawn == len(example_memory.ENTITIES)
    assert browser.evaluate("memoryGraph.cy.edges().length") == len(example_memory.RELATIONS)

    browser.evaluate("document.getElementById('search').focus()")
    browser.type_text("lyon")
    browser.wait_for("(document.getElementById('results') || {innerText: ''}).innerText.includes('Lyon_Jazz_Club')")
    results = text_of(browser, "results")
    assert "5 matches" in text_of(browser, "panel")
    for name in ("default_user", "Léa_Martin", "Lyon", "Lyon_Jazz_Club", "Lycée_du_Parc"):
        assert name in results
    # the graph now holds the matches and their neighbours only
    drawn_names = set(browser.evaluate("memoryGraph.cy.nodes().map((n) => n.data('label'))"))
    assert {"Japanese", "Marie_Dupont"} <= drawn_names and "Kyoto" not in drawn_names

    browser.evaluate("document.getElementById('search').select()")
    browser.type_text("jazz")  # the list follows what is typed
    browser.wait_for("(document.getElementById('panel').innerText || '').includes('3 matches')")
    assert "Jazz_night" in text_of(browser, "results") and "default_user" not in text_of(browser, "results")
    browser.evaluate("document.getElementById('overview').click()")

    browser.evaluate("memoryGraph.cy.elements().unselect(); null")
    browser.click(*node_position(browser, "Japanese"))
    browser.wait_for("(document.getElementById('observations') || {}).innerText !== undefined && "
                     "document.getElementById('observations').innerText.includes('JLPT N4 passed')")
    relations = text_of(browser, "relations")
    assert "Kenji_Watanabe teaches Japanese" in relations.replace("\n", " ")
    assert browser.evaluate("memoryGraph.cy.$(':selected').map((n) => n.data('label'))") == ["Japanese"]
    assert_clean(browser, page)


def test_the_graph_pans_zooms_and_its_entities_drag(browser: Browser, tmp_path: Path) -> None:
    memory_file, page = tmp_path / "memory.jsonl", tmp_path / "memory.html"
    example_memory.write(memory_file)
    export_html(memory_file, page)
    open_page(browser, page)
    position = "(() => { const p = memoryGraph.cy.nodes().filter((n) => n.data('label') === 'Kyoto').position(); " \
               "return [p.x, p.y]; })()"
    before = browser.evaluate(position)
    start = node_position(browser, "Kyoto")
    browser.drag(start, (start[0] + 60, start[1] + 40))
    after = browser.evaluate(position)
    assert after != before, "the entity moved with the mouse"
    assert node_position(browser, "Kyoto") == pytest.approx((start[0] + 60, start[1] + 40), abs=3)

    zoom = browser.evaluate("memoryGraph.cy.zoom()")
    browser.wheel(500, 400, -300)
    browser.wait_for(f"memoryGraph.cy.zoom() > {zoom}")
    pan = browser.evaluate("[memoryGraph.cy.pan().x, memoryGraph.cy.pan().y]")
    empty_spot = browser.evaluate("""(() => {
        const box = document.getElementById('graph').getBoundingClientRect();
        const taken = memoryGraph.cy.elements().map((element) => element.renderedBoundingBox());
        const free = (x, y) => taken.every((b) => x < b.x1 - 20 || x > b.x2 + 20 || y < b.y1 - 20 || y > b.y2 + 20);
        for (let x = 20; x < box.width - 100; x += 15) for (let y = 20; y < box.height - 250; y += 15) {
            if (free(x, y)) return [x + box.left, y + box.top];
        }
        return null; })()""")
    assert empty_spot is not None
    browser.drag(tuple(empty_spot), (empty_spot[0] + 80, empty_spot[1] + 50))
    assert browser.evaluate("[memoryGraph.cy.pan().x, memoryGraph.cy.pan().y]") == pytest.approx(
        [pan[0] + 80, pan[1] + 50], abs=3), "dragging the background pans"
    assert_clean(browser, page)


def test_an_empty_memory_renders(browser: Browser, tmp_path: Path) -> None:
    memory_file, page = tmp_path / "memory.jsonl", tmp_path / "memory.html"
    memory_file.write_bytes(b"")
    export_html(memory_file, page)
    open_page(browser, page)
    assert browser.evaluate("memoryGraph.cy.elements().length") == 0
    assert text_of(browser, "status") == "0 entities, 0 relations."
    browser.evaluate("document.getElementById('search').focus()")
    browser.type_text("anything")
    browser.wait_for("document.getElementById('status').innerText === 'No entity matches.'")
    assert_clean(browser, page)


def test_hostile_names_stay_text(browser: Browser, tmp_path: Path) -> None:
    memory_file, page = tmp_path / "memory.jsonl", tmp_path / "memory.html"
    hostile = entity(HOSTILE, "<b>type</b>", [HOSTILE_OBSERVATION, HOSTILE])
    friend = entity("friend", "person", ["plain"])
    lines = [entity_record(hostile), entity_record(friend), relation_record(relation("friend", HOSTILE, "</script>"))]
    memory_file.write_text("\n".join(record_line(line) for line in lines), encoding="utf-8")
    export_html(memory_file, page)
    source = page.read_text(encoding="utf-8")
    assert HOSTILE not in source and "<img src=x" not in source
    assert source.lower().count("</script") == 3, "only the page's own three scripts end: data, library, page"

    open_page(browser, page)
    assert browser.evaluate("JSON.parse(document.getElementById('memory-data').textContent).entities[0]") == [
        HOSTILE, 0, [HOSTILE_OBSERVATION, HOSTILE]]
    browser.click(*node_position(browser, HOSTILE))
    browser.wait_for("document.getElementById('observations') !== null")
    assert browser.evaluate("[...document.querySelectorAll('#observations li')].map((li) => li.textContent)") == [
        HOSTILE_OBSERVATION, HOSTILE]
    assert browser.evaluate("document.querySelectorAll('#panel img, #panel script').length") == 0
    assert browser.evaluate("document.querySelector('#panel h2').textContent") == HOSTILE
    assert browser.evaluate("document.scripts.length") == 3, "the data, the library, the page: no injected script"
    assert_clean(browser, page)


def big_memory(path: Path, count: int) -> list[dict[str, Any]]:
    """`count` entities in a ring with hubs: entity 0 holds many relations, every entity has two."""
    entities = [entity(f"entity_{number:05}", ("person", "project", "place", "topic")[number % 4],
                       [f"observation {number}"]) for number in range(count)]
    relations = [relation(f"entity_{number:05}", f"entity_{(number + 1) % count:05}", "next") for number in range(count)]
    relations += [relation("entity_00000", f"entity_{number:05}", "hub_of") for number in range(2, count, 7)]
    lines = [entity_record(item) for item in entities] + [relation_record(item) for item in relations]
    path.write_text("\n".join(record_line(line) for line in lines), encoding="utf-8")
    return entities


def test_ten_thousand_entities_draw_a_few_hundred_and_search_finds_any(browser: Browser, tmp_path: Path) -> None:
    memory_file, page = tmp_path / "memory.jsonl", tmp_path / "memory.html"
    big_memory(memory_file, 10_000)
    export_html(memory_file, page)
    open_page(browser, page)
    drawn = browser.evaluate("memoryGraph.cy.nodes().length")
    assert 0 < drawn <= 300
    assert "showing the 300 most connected" in text_of(browser, "status")
    assert browser.evaluate("memoryGraph.cy.nodes().some((n) => n.data('label') === 'entity_00000')"), \
        "the most connected entity is in the overview"

    browser.evaluate("document.getElementById('search').focus()")
    browser.type_text("entity_0999")
    browser.wait_for("(document.getElementById('results') || {innerText: ''}).innerText.includes('entity_09998')")
    assert "10 matches" in text_of(browser, "panel")
    assert 0 < browser.evaluate("memoryGraph.cy.nodes().length") <= 300
    browser.click(*node_position(browser, "entity_09998"))
    browser.wait_for("(document.getElementById('observations') || {innerText: ''}).innerText.includes('observation 9998')")
    assert_clean(browser, page)
