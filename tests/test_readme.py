"""The README and docs/: short, linked, and true.

1. The README has at most 400 lines; the detail lives in docs/.
2. Every relative link in README.md, CHANGELOG.md and docs/*.md names a file of the repository, and
   every `#fragment` a heading of the page it points to.
3. The README's test command is the one CI (.ci/run) runs.
4. Commands are runnable as written: no `<owner>/<repo>` placeholders, and the Docker image is
   `kg-memory-mcp`, never the reference server's image name.
5. The sample outputs of `check`, `stats`, `export` and `import` are what those commands print on
   the example memory described beside them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from example_memory import lines as example_lines

README = REPO / "README.md"
PAGES = [README, REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
MAX_README_LINES = 400
LINK = re.compile(r"!?\[(?:[^\]`]|`[^`]*`)*\]\(([^()\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.DOTALL | re.MULTILINE)


def prose(page: Path) -> str:
    """The page without its code blocks (a link inside one is an example, not a link)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(prose(page)) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def anchors(page: Path) -> set[str]:
    """The fragments GitHub gives the page's headings: lower case, punctuation dropped, spaces as hyphens."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", prose(page), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        candidate, number = slug, 0
        while candidate in found:
            number += 1
            candidate = f"{slug}-{number}"
        found.add(candidate)
    return found


def test_the_readme_is_at_most_400_lines() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_README_LINES, f"README.md has {count} lines; move detail into docs/"


def test_every_relative_link_names_a_file_of_the_repository() -> None:
    broken = []
    for page in PAGES:
        for target in relative_links(page):
            path = target.split("#", 1)[0]
            if path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, broken
    assert len(relative_links(README)) >= 10, "the README links into docs/"


def test_the_links_find_the_page_and_the_heading_they_name() -> None:
    checked, broken = 0, []
    for page in PAGES:
        for target in relative_links(page):
            path, _, fragment = target.partition("#")
            linked = (page.parent / path) if path else page
            if fragment and linked.suffix == ".md":
                checked += 1
                if fragment not in anchors(linked):
                    broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, broken
    assert checked >= 10


def test_headings_become_the_fragments_github_gives_them() -> None:
    page = Path(__file__).parent / "spec" / "README.md"  # any page: only the rule is tested here
    assert anchors(page) == {"the-parts-of-the-mcp-specification-the-tests-read"}
    assert "checking-any-server-mcp-conformance-check" in anchors(REPO / "docs" / "conformance.md")
    assert "answers-that-fit-the-models-context" in anchors(REPO / "docs" / "search.md")


def readme_test_command() -> str:
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## Run the tests\n"):]
    start = section.index("```sh\n") + len("```sh\n")
    return section[start:section.index("\n```", start)]


def test_ci_runs_the_readmes_test_command() -> None:
    command = readme_test_command()
    assert "\n" not in command and command.endswith(".venv/bin/python -m pytest")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in ci, "the line of .ci/run that installs and runs the tests is the README's command"


def test_commands_name_no_placeholders_and_the_image_is_ours() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "<owner>" not in text and "<repo>" not in text, page
        for line in text.splitlines():
            if re.search(r"docker (run|build)\b|\"--rm\"", line):
                assert "kg-memory-mcp" in line and "mcp/memory" not in line, f"{page.relative_to(REPO)}: {line}"


# --- the sample outputs ------------------------------------------------------------------------

# The example memory of docs/cli.md: the memory of docs/memory-graph.png, then a repeated entity, a
# relation to an entity that does not exist and a half-written line.
DAMAGED_LINES = [
    '{"type":"entity","name":"Kyoto","entityType":"city","observations":["Old capital"]}',
    '{"type":"relation","from":"Atlas","to":"Zeus","relationType":"uses"}',
    '{"type":"entity","name":"Half_typed',
]
BACKUP = {
    "entities": [
        {"type": "entity", "name": "default_user", "entityType": "person",
         "observations": ["Lives in Lyon", "Drinks tea, not coffee"]},
        {"type": "entity", "name": "Hugo_Bernard", "entityType": "person", "observations": ["Cellist in the quartet"]},
        {"type": "entity", "name": "Opéra_de_Lyon", "entityType": "organization", "observations": ["Season tickets since 2025"]},
        {"type": "entity", "name": "Kyoto", "entityType": "city", "observations": ["Trip planned for April 2027"]},
    ],
    "relations": [
        {"type": "relation", "from": "default_user", "to": "Hugo_Bernard", "relationType": "plays_with"},
        {"type": "relation", "from": "default_user", "to": "Lyon", "relationType": "lives_in"},
        {"type": "relation", "from": "Hugo_Bernard", "to": "Ghost", "relationType": "fears"},
    ],
}
SHOWN_PATH = "/home/you/.local/share/mcp-memory/memory.jsonl"
LAST_CHANGE = 1796034086  # 2026-11-30 10:21:26 UTC, as the sample shows it


def sample_session(tmp_path: Path) -> str:
    """The commands of docs/cli.md's sample, run on its example memory, as a terminal shows them."""
    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_text("\n".join([*example_lines(), *DAMAGED_LINES]) + "\n", encoding="utf-8")
    os.utime(memory_file, (LAST_CHANGE, LAST_CHANGE))
    (tmp_path / "backup.json").write_text(json.dumps(BACKUP, ensure_ascii=False), encoding="utf-8")
    env = {**os.environ, "MEMORY_FILE_PATH": str(memory_file), "TZ": "UTC", "PYTHONPATH": str(REPO)}
    session = []
    for shown, arguments, pipe in [
        ("mcp-server-memory stats --top 3", ["stats", "--top", "3"], None),
        ("mcp-server-memory check", ["check"], None),
        ("mcp-server-memory export --format markdown | head -12", ["export", "--format", "markdown"], 12),
        ("mcp-server-memory import backup.json --dry-run", ["import", "backup.json", "--dry-run"], None),
    ]:
        done = subprocess.run([sys.executable, "-m", "memory_server", *arguments], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode in (0, 1), done.stderr
        output = done.stdout if pipe is None else "".join(done.stdout.splitlines(keepends=True)[:pipe])
        session.append(f"$ {shown}\n{output}")
    assert memory_file.stat().st_mtime == LAST_CHANGE, "the dry run and the reports changed nothing"
    return "".join(session).replace(str(memory_file), SHOWN_PATH)


def test_the_sample_outputs_are_what_the_commands_print(tmp_path: Path) -> None:
    session = sample_session(tmp_path)
    cli = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"```\n{session}```\n" in cli, f"docs/cli.md should show, verbatim:\n{session}"
    check = session[session.index("$ mcp-server-memory check\n"):session.index("$ mcp-server-memory export")]
    assert f"```\n{check}```\n" in README.read_text(encoding="utf-8"), f"the README's check sample should be:\n{check}"
