"""The HTML picture finds facts (issue 19 §2b), in a real headless Chromium: its search takes the whole
query first and then the query's words, as the server does, shows the observations that match first
and marked, shows dates, and spreads the labels around a large hub so that none overlap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cdp_browser import Browser
from memory_helpers import entity, entity_record, record_line, relation, relation_record
from test_html_view import assert_clean, browser, chromium, export_html, open_page, text_of  # noqa: F401

FACTS = [f"Fact number {number} about daily life" for number in range(300)]
FACTS[217] = "Allergic to shellfish"
FACTS[140] = "Plays the cello on Sundays"
FACTS[12] = "Has a cello teacher called Ana"


def profile_memory(path: Path, friends: int = 60) -> None:
    """default_user with 300 observations (two dated) and `friends` people related to it."""
    people = [entity(f"friend_{number:02}_with_a_longish_name", "person", [f"Met at event {number}"])
              for number in range(friends)]
    lines: list[dict[str, Any]] = [
        {**entity_record(entity("default_user", "person", FACTS)),
         "recordedAt": [None] * 217 + ["2026-11-30T09:00:00Z"] + [None] * 82,
         "happenedOn": [None] * 140 + ["2024-03"] + [None] * 159},
        *(entity_record(item) for item in people),
        *(relation_record(relation("default_user", item["name"], "knows")) for item in people),
    ]
    path.write_text("\n".join(record_line(line) for line in lines), encoding="utf-8")


@pytest.fixture
def page(browser: Browser, tmp_path: Path) -> Iterator[Path]:
    memory_file, page = tmp_path / "memory.jsonl", tmp_path / "memory.html"
    profile_memory(memory_file)
    export_html(memory_file, page)
    open_page(browser, page)
    yield page


def search_for(browser: Browser, text: str) -> None:
    browser.evaluate("document.getElementById('search').value = ''; document.getElementById('search').focus()")
    browser.type_text(text)
    browser.wait_for(f"document.getElementById('panel').textContent.includes({json.dumps(text)})")


def observations(browser: Browser) -> list[list[str]]:
    """The panel's observations as [text, class, date] in order."""
    return browser.evaluate("""[...document.querySelectorAll('#observations li')].map((li) => [
        li.firstChild ? li.firstChild.textContent : '', li.className,
        (li.querySelector('.date') || {textContent: ''}).textContent])""")


def test_a_search_opens_the_matching_observation_first_and_marked(browser: Browser, page: Path) -> None:
    search_for(browser, "allergic")
    browser.wait_for("(document.getElementById('observations') || {innerText: ''}).innerText.includes('shellfish')")
    shown = observations(browser)
    assert shown[0] == ["Allergic to shellfish", "hit", "2026-11-30"]
    assert [item for item in shown if item[1] == "hit"] == [shown[0]]
    assert len(shown) == 300 and shown[1] == ["Fact number 0 about daily life", "", ""]
    assert "1 matching “allergic”, first" in browser.evaluate("document.getElementById('panel').textContent")
    assert_clean(browser, page)


def test_a_search_by_words_ranks_each_fact(browser: Browser, page: Path) -> None:
    # no observation holds the whole query: its words are taken, as the server does ("cellos" is
    # stemmed as the memory's "cello"), and the facts holding them come first, best first
    search_for(browser, "who teaches me cellos")
    browser.wait_for("(document.getElementById('observations') || {innerText: ''}).innerText.includes('cello')")
    shown = observations(browser)
    hits = [item[0] for item in shown if item[1] == "hit"]
    assert set(hits) == {"Plays the cello on Sundays", "Has a cello teacher called Ana"}
    assert [item[0] for item in shown[:2]] == hits
    assert shown[hits.index("Plays the cello on Sundays")][2] == "happened 2024-03"


def test_a_query_the_memory_holds_whole_matches_as_the_reference(browser: Browser, page: Path) -> None:
    search_for(browser, "event 1")  # "Met at event 1", "... 10" to "... 19": 11 entities, as the reference finds them
    browser.wait_for("document.getElementById('results') !== null")
    assert "11 matches" in text_of(browser, "panel")
    # each result lists the facts that match under it, marked; the whole word first, as the server orders
    facts = browser.evaluate("[...document.querySelectorAll('#results > li')].map((li) => "
                             "[li.querySelector('.link').textContent, "
                             "[...li.querySelectorAll('li.hit')].map((f) => f.textContent)])")
    assert facts[0] == ["friend_01_with_a_longish_name", ["Met at event 1"]]
    assert [name for name, _ in facts[1:]] == [f"friend_{number}_with_a_longish_name" for number in range(10, 20)]
    search_for(browser, "zebra")
    assert "0 matches" in text_of(browser, "panel")


def overlapping_labels(browser: Browser) -> list[list[str]]:
    return browser.evaluate("""(() => {
        const boxes = memoryGraph.cy.nodes().map((node) => [node.data('label'),
            node.boundingBox({ includeNodes: false, includeLabels: true, includeOverlays: false })]);
        const found = [];
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i][1], b = boxes[j][1];
            if (a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2) found.push([boxes[i][0], boxes[j][0]]);
        }
        return found;
    })()""")


def test_labels_around_a_large_hub_do_not_overlap(browser: Browser, page: Path) -> None:
    browser.evaluate("memoryGraph.focusOn(memoryGraph.indexOf('default_user')); null")
    browser.wait_for("memoryGraph.cy.nodes().length === 61")
    assert overlapping_labels(browser) == []
    # the overview (cose, labels counted in each node's size) keeps them apart too
    browser.evaluate("document.getElementById('overview').click(); null")
    browser.wait_for("memoryGraph.cy.nodes().length === 61")
    assert overlapping_labels(browser) == []
