"""`mcp-conformance check`: the protocol requirements every stdio server shares, run against real servers.

This project's server and the example server meet every one; a server built on the official
Python SDK meets all but the malformed-line ones (it leaves them unanswered); a fixture server
breaks each requirement in turn and must be flagged for exactly that one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import REPO, SPEC

from conformance.check import REQUIREMENTS, CheckSettings, Report, requirement_ids, run_check
from conformance.check_report import as_json, format_text

FIXTURES = Path(__file__).parent / "conformance_fixtures"
CHECK_SERVER = (sys.executable, str(FIXTURES / "check_server.py"))
SDK_SERVER = (sys.executable, str(FIXTURES / "sdk_server.py"))
MEMORY_SERVER = (sys.executable, "-m", "memory_server")
EXAMPLE_SERVER = (sys.executable, str(REPO / "tests" / "example_server.py"))
THROWAWAY_MEMORY = "MEMORY_FILE_PATH={tmp}/memory.jsonl"
SHAPES = {requirement.id for requirement in REQUIREMENTS if requirement.schema}
MALFORMED = {requirement.id for requirement in REQUIREMENTS if requirement.id.startswith("malformed.")}


# The spec pages the requirements cite and each era's schema.json: the copies in tests/spec/
# (see its README.md), or the directory MCP_SPEC_DIR names.
CARRIED_SPEC = REPO / "tests" / "spec"


def check(*arguments: str, server: tuple[str, ...], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conformance", "check", *arguments, "--", *server],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env,
    )


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {row["id"]: row["status"] for row in report["requirements"]}


def check_json(*arguments: str, server: tuple[str, ...]) -> tuple[int, dict[str, Any]]:
    result = check("--json", "--spec", str(SPEC), *arguments, server=server)
    assert result.stderr == "", result.stderr
    return result.returncode, json.loads(result.stdout)


# --- the spec the tests read ----------------------------------------------------------------------


def carried_digests() -> dict[str, str]:
    lines = (CARRIED_SPEC / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


def test_the_carried_spec_is_the_copy_its_digests_name_and_every_cited_page_is_in_it() -> None:
    digests = carried_digests()
    carried = sorted(str(path.relative_to(CARRIED_SPEC)) for path in CARRIED_SPEC.rglob("*")
                     if path.suffix in (".json", ".mdx"))
    assert carried == sorted(digests), "tests/spec/SHA256SUMS lists exactly the copied files"
    for name, digest in digests.items():
        assert hashlib.sha256((CARRIED_SPEC / name).read_bytes()).hexdigest() == digest, f"tests/spec/{name} was changed"
    cited = {f"{r.section.version}/{r.section.page}.mdx" for r in REQUIREMENTS}
    schemas = {f"{version}/schema.json" for version in ("2025-11-25", "2026-07-28")}
    assert cited | schemas <= set(digests), f"pages to copy into tests/spec: {sorted(cited | schemas - set(digests))}"
    # Where CI lays the spec's pages beside the checkout (../shared/spec), the copies equal them.
    shared = REPO.parent / "shared" / "spec"
    for name in digests:
        if (shared / name).is_file():
            assert (shared / name).read_bytes() == (CARRIED_SPEC / name).read_bytes(), f"{shared / name} differs"


# --- the table itself ---------------------------------------------------------------------------


def test_every_requirement_cites_a_section_that_exists_in_the_spec() -> None:
    assert SPEC.is_dir(), f"the spec pages are expected at {SPEC} (or MCP_SPEC_DIR)"
    for requirement in REQUIREMENTS:
        section = requirement.section
        page = SPEC / section.version / f"{section.page}.mdx"
        assert page.is_file(), f"{requirement.id}: no page {page}"
        headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
        assert section.heading in [heading.replace("`", "") for heading in headings], (requirement.id, headings)
        assert requirement.level in ("MUST", "MUST NOT", "SHOULD")


def test_requirement_ids_are_unique_and_name_their_era() -> None:
    ids = requirement_ids()
    assert len(ids) == len(set(ids))
    for requirement in REQUIREMENTS:
        if requirement.era in ("legacy", "modern"):
            assert requirement.id.startswith(f"{requirement.era}.")


# --- real servers --------------------------------------------------------------------------------


def test_this_projects_server_meets_every_requirement() -> None:
    status, report = check_json("--env", THROWAWAY_MEMORY, server=MEMORY_SERVER)
    assert status == 0, json.dumps(report, indent=1)
    assert set(statuses(report).values()) == {"pass"}, statuses(report)
    assert set(statuses(report)) == set(requirement_ids())
    assert report["eras"] == {
        "legacy": {"claimed": True, "version": "2025-11-25", "capabilities": ["resources", "tools"]},
        "modern": {"claimed": True, "version": "2026-07-28", "capabilities": ["resources", "tools"]},
    }
    assert report["summary"] == {"pass": len(REQUIREMENTS), "fail": 0, "not supported": 0, "not checked": 0}


def test_the_example_server_meets_every_requirement() -> None:
    status, report = check_json(server=EXAMPLE_SERVER)
    assert status == 0 and set(statuses(report).values()) == {"pass"}, statuses(report)


def test_a_server_on_the_official_sdk_leaves_malformed_lines_unanswered() -> None:
    status, report = check_json("--timeout", "3", server=SDK_SERVER)
    assert status == 1
    found = statuses(report)
    assert {name for name, verdict in found.items() if verdict != "pass"} == MALFORMED - {"malformed.empty-line"}
    assert {found[name] for name in MALFORMED - {"malformed.empty-line"}} == {"fail"}
    rows = {row["id"]: row for row in report["requirements"]}
    assert rows["malformed.parse-error"]["reason"] == "no answer in time; expected error -32700"
    assert rows["malformed.invalid-utf8"]["reason"] == "expected error -32700, got the result {}"
    assert rows["malformed.batch"]["exchange"][-1] == {"c2s": [{"jsonrpc": "2.0", "id": "batched", "method": "ping"}]}
    assert report["eras"]["modern"]["claimed"] and report["eras"]["legacy"]["claimed"]


# --- a server that breaks one requirement at a time -----------------------------------------------


def run(server: tuple[str, ...], *, only: tuple[str, ...] = (), spec: Path | None = SPEC, timeout: float = 2.0) -> Report:
    return anyio.run(run_check, CheckSettings(server, {}, spec, timeout, only))


def test_the_fixture_server_meets_every_requirement_when_nothing_is_broken() -> None:
    report = run(CHECK_SERVER)
    assert {verdict.requirement.id: verdict.status for verdict in report.verdicts} == dict.fromkeys(requirement_ids(), "pass")


@pytest.mark.parametrize("requirement", requirement_ids())
def test_a_broken_requirement_is_flagged_with_the_exchange_that_shows_it(requirement: str) -> None:
    report = run((*CHECK_SERVER, "--break", requirement), only=(requirement,), timeout=1.0)
    [verdict] = report.verdicts
    assert verdict.status == "fail", verdict
    assert verdict.reason
    assert any(line.direction == "c2s" for line in verdict.exchange)
    assert f"FAIL          {requirement}  [" in format_text(report)


def test_what_a_server_does_not_claim_is_not_supported_rather_than_failed() -> None:
    report = as_json(run((*CHECK_SERVER, "--legacy-only", "--no-resources")))
    found = statuses(report)
    unsupported = {name for name, verdict in found.items() if verdict == "not supported"}
    modern = {name for name in requirement_ids() if name.startswith("modern.")}
    assert unsupported == modern | {"legacy.resources-list.schema"}
    assert {found[name] for name in set(found) - unsupported} == {"pass"}
    rows = {row["id"]: row for row in report["requirements"]}
    assert rows["modern.discover"]["reason"].startswith(
        "the server does not claim the 2026-07-28 era (server/discover): server/discover was answered with error -32601")
    assert rows["legacy.resources-list.schema"]["reason"] == (
        "the server does not declare the resources capability in the legacy era")


def test_without_a_schema_the_shape_checks_are_not_checked_and_the_rest_still_run() -> None:
    env = {key: value for key, value in os.environ.items() if key != "MCP_SPEC_DIR"}
    result = check("--json", server=CHECK_SERVER, env=env)
    assert result.returncode == 0, result.stdout
    report = json.loads(result.stdout)
    rows = {row["id"]: row for row in report["requirements"]}
    assert {name for name, row in rows.items() if row["status"] == "not checked"} == SHAPES
    assert {row["reason"] for name, row in rows.items() if name in SHAPES} == {"no schema: pass --spec"}
    assert report["spec"] is None
    assert "NOT CHECKED   legacy.tools-list.schema" in check(server=CHECK_SERVER, env=env).stdout


def test_the_spec_directory_also_comes_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "2025-11-25").mkdir()  # an era without its schema.json
    env = {**os.environ, "MCP_SPEC_DIR": str(tmp_path)}
    result = check("--json", "--only", "legacy.tools-list.schema", "modern.tools-list.schema", server=CHECK_SERVER, env=env)
    rows = {row["id"]: row for row in json.loads(result.stdout)["requirements"]}
    assert rows["legacy.tools-list.schema"]["reason"].startswith(f"no schema for 2025-11-25 in {tmp_path}")
    assert rows["modern.tools-list.schema"]["status"] == "not checked"


# --- the report ----------------------------------------------------------------------------------


def test_text_and_json_tell_the_same_verdicts_with_sections_and_exchanges() -> None:
    arguments = ("--only", "legacy.ping", "malformed.batch", "modern.discover", "--timeout", "1")
    text = check("--spec", str(SPEC), *arguments, server=(*CHECK_SERVER, "--break", "malformed.batch"))
    status, report = check_json(*arguments, server=(*CHECK_SERVER, "--break", "malformed.batch"))
    assert text.returncode == status == 1
    for row in report["requirements"]:
        label = {"pass": "PASS", "fail": "FAIL"}[row["status"]]
        assert f"{label:<14}{row['id']}  [{row['level']}, {row['section']}]" in text.stdout
        assert row["url"].startswith("https://modelcontextprotocol.io/specification/")
        assert row["exchange"][0]["c2s"]["method"] in ("initialize", "server/discover")
    assert "              > [{\"jsonrpc\":\"2.0\",\"id\":\"batched\",\"method\":\"ping\"}]" in text.stdout
    assert text.stdout.endswith("2 passed, 1 failed, 0 not supported, 0 not checked\n")


def test_verbose_shows_the_exchange_of_passing_requirements_too() -> None:
    quiet = check("--only", "legacy.ping", server=CHECK_SERVER)
    verbose = check("--verbose", "--only", "legacy.ping", server=CHECK_SERVER)
    ping = '> {"jsonrpc":"2.0","id":"ping","method":"ping"}'
    assert quiet.returncode == verbose.returncode == 0
    assert ping not in quiet.stdout and ping in verbose.stdout


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["--only", "no.such.requirement"], "invalid choice"),
        (["--timeout", "0"], "out of range"),
        (["--spec", "/no/such/dir"], "not a directory"),
    ],
)
def test_check_usage_errors_exit_2(arguments: list[str], fragment: str) -> None:
    result = check(*arguments, server=CHECK_SERVER)
    assert result.returncode == 2 and fragment in result.stderr


def test_a_server_that_cannot_start_is_a_usage_error(tmp_path: Path) -> None:
    result = check(server=(str(tmp_path / "no-such-server"),))
    assert result.returncode == 2 and "cannot start" in result.stderr


def test_a_server_that_exits_at_once_fails_the_handshake_and_the_report_says_how_it_ended() -> None:
    status, report = check_json(server=(sys.executable, "-c", "import sys; sys.exit(3)"))
    assert status == 1
    rows = {row["id"]: row for row in report["requirements"]}
    assert rows["handshake"]["status"] == "fail"
    assert {"note": "the server closed its output and exited with status 3"} in rows["handshake"]["exchange"]
    assert {row["status"] for name, row in rows.items() if name != "handshake"} == {"not supported"}
