"""The example memory shown in docs/memory-graph.png (a person's assistant remembering their life).

`python tests/example_memory.py docs/memory-graph.png` exports it as html and takes the screenshot
with the tests' headless Chromium.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ENTITIES = {
    "default_user": ("person", ["Prefers short answers", "Lives in Lyon", "Plays the cello on weekends",
                                "Learning Japanese since 2025"]),
    "Marie_Dupont": ("person", ["Sister of default_user", "Teaches physics at Lycée du Parc"]),
    "Tomás_Rivera": ("person", ["Colleague on the Atlas project", "Based in Madrid"]),
    "Priya_Nair": ("person", ["Manager of default_user since March 2026", "Former data scientist"]),
    "Kenji_Watanabe": ("person", ["Japanese tutor", "Lessons on Tuesday evenings"]),
    "Léa_Martin": ("person", ["Friend from university", "Runs the Lyon jazz club"]),
    "Northwind_Labs": ("organization", ["Employer of default_user", "Builds weather forecasting software"]),
    "Lycée_du_Parc": ("organization", ["School in Lyon"]),
    "Lyon_Jazz_Club": ("organization", ["Concerts every Friday"]),
    "Atlas": ("project", ["Forecast engine rewrite", "Due in Q3 2026", "Written in Rust"]),
    "Beacon": ("project", ["Internal dashboard", "Paused since January 2026"]),
    "Cello_quartet": ("project", ["Rehearses on Sundays", "Playing Dvořák's American quartet"]),
    "Lyon": ("place", ["Home city"]),
    "Madrid": ("place", []),
    "Kyoto": ("place", ["Trip planned for April 2027"]),
    "Trip_to_Kyoto": ("event", ["Two weeks in April 2027", "Wants to visit the Philosopher's Path"]),
    "Atlas_launch": ("event", ["Planned for 30 September 2026"]),
    "Jazz_night": ("event", ["Played with Léa's band in October 2026"]),
    "Rust": ("skill", ["Uses it daily at work"]),
    "Japanese": ("skill", ["JLPT N4 passed", "Aiming for N3 in 2027"]),
    "Cello": ("skill", ["Plays since childhood"]),
    "Physics": ("topic", []),
    "Weather_forecasting": ("topic", ["Main field at work"]),
}
RELATIONS = [
    ("default_user", "Northwind_Labs", "works_at"), ("default_user", "Lyon", "lives_in"),
    ("default_user", "Marie_Dupont", "sibling_of"), ("default_user", "Atlas", "works_on"),
    ("default_user", "Beacon", "maintained"), ("default_user", "Cello_quartet", "plays_in"),
    ("default_user", "Trip_to_Kyoto", "plans"), ("default_user", "Rust", "knows"),
    ("default_user", "Japanese", "is_learning"), ("default_user", "Cello", "plays"),
    ("default_user", "Kenji_Watanabe", "takes_lessons_from"), ("default_user", "Léa_Martin", "friend_of"),
    ("Priya_Nair", "default_user", "manages"), ("Priya_Nair", "Northwind_Labs", "works_at"),
    ("Tomás_Rivera", "Northwind_Labs", "works_at"), ("Tomás_Rivera", "Atlas", "works_on"),
    ("Tomás_Rivera", "Madrid", "lives_in"), ("Marie_Dupont", "Lycée_du_Parc", "teaches_at"),
    ("Marie_Dupont", "Physics", "teaches"), ("Lycée_du_Parc", "Lyon", "located_in"),
    ("Léa_Martin", "Lyon_Jazz_Club", "runs"), ("Lyon_Jazz_Club", "Lyon", "located_in"),
    ("default_user", "Jazz_night", "played_at"), ("Jazz_night", "Lyon_Jazz_Club", "held_at"),
    ("Northwind_Labs", "Atlas", "owns"), ("Northwind_Labs", "Beacon", "owns"),
    ("Atlas", "Rust", "written_in"), ("Atlas", "Weather_forecasting", "is_about"),
    ("Atlas_launch", "Atlas", "releases"), ("Trip_to_Kyoto", "Kyoto", "goes_to"),
    ("Kenji_Watanabe", "Japanese", "teaches"), ("Cello_quartet", "Cello", "needs"),
    ("Northwind_Labs", "Weather_forecasting", "works_in"),
]


def lines() -> list[str]:
    records = [{"type": "entity", "name": name, "entityType": kind, "observations": observations}
               for name, (kind, observations) in ENTITIES.items()]
    records += [{"type": "relation", "from": source, "to": target, "relationType": kind}
                for source, target, kind in RELATIONS]
    return [json.dumps(record, ensure_ascii=False, separators=(",", ":")) for record in records]


def write(path: Path) -> None:
    path.write_text("\n".join(lines()) + "\n", encoding="utf-8")


def screenshot(target: Path) -> None:
    import subprocess
    import tempfile

    from cdp_browser import Browser, install_chromium

    chromium = install_chromium()
    assert chromium is not None, "no Chromium to take the screenshot with"
    with tempfile.TemporaryDirectory() as scratch:
        memory_file, page, profile = Path(scratch, "memory.jsonl"), Path(scratch, "memory.html"), Path(scratch, "p")
        write(memory_file)
        subprocess.run([sys.executable, "-m", "memory_server", "export", "--format", "html", "--file", str(memory_file),
                        "-o", str(page)], check=True)
        profile.mkdir()
        browser = Browser(chromium, profile)
        try:
            browser.open_page()
            browser.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 860, "deviceScaleFactor": 1,
                                                               "mobile": False})
            browser.navigate(page.as_uri())
            browser.wait_for("window.memoryGraph && window.memoryGraph.ready === true")
            browser.evaluate("memoryGraph.select(memoryGraph.indexOf('default_user'))")
            target.write_bytes(browser.screenshot())
            assert browser.problems() == [], browser.problems()
        finally:
            browser.close()


if __name__ == "__main__":
    screenshot(Path(sys.argv[1]).resolve())
