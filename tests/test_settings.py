"""Every MEMORY_* and MCP_MEMORY_* setting is checked at start, in one place (memory_server/settings.py):
a bad one ends the server, or a command, with one line naming the variable and what it accepts, exit
status 2, before any protocol message and before the memory file is touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from memory_helpers import (
    WAIT_SECONDS,
    MemoryServers,
    entity,
    initialize,
    memory_servers,  # noqa: F401  (a fixture)
    server_environment,
)

from memory_server import settings
from memory_server.model import dates

BAD_SETTINGS = [
    # (variable, value, what the line must say it accepts)
    ("MEMORY_SEMANTIC", "maybe", "on or off"),
    ("MEMORY_DATES", "perhaps", "on or off"),
    ("MEMORY_DATES", "offf", "on or off"),
    ("MEMORY_SEMANTIC_MAX", "-5", "whole number of vectors, at least 1"),
    ("MEMORY_SEMANTIC_MAX", "0", "whole number of vectors, at least 1"),
    ("MEMORY_SEMANTIC_MAX", "lots", "whole number of vectors, at least 1"),
    ("MEMORY_SEMANTIC_MAX", "1e5", "whole number of vectors, at least 1"),
    ("MEMORY_LOCK_TIMINGS", "x", "'<stale>,<refresh>[,<timeout>]' in seconds"),
    ("MEMORY_LOCK_TIMINGS", "0.2,1", "'<stale>,<refresh>[,<timeout>]' in seconds"),
    ("MEMORY_ANSWER_BUDGET", "lots", "whole number of characters, at least 5000"),
    ("MEMORY_SEARCH_CHARACTERS", "-1", "whole number of characters, at least"),
    ("MCP_MEMORY_HTTP_SESSION_IDLE", "soon", "number of seconds above 0"),
    ("MCP_MEMORY_HTTP_LIMITS", "streams=0", "above 0"),
    ("MCP_MEMORY_HTTP_LIMITS", "sockets=4", "name=value pairs"),
    ("MEMORY_NAME", "bad name!", "letters, digits"),
    ("MEMORY_HEMISPHERE", "east", "north or south"),
]


def refused(tmp_path: Path, variable: str, value: str, argv: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    memory = tmp_path / "memory.jsonl"
    env = server_environment(memory, {variable: value})
    if variable == "MEMORY_NAME":  # a memory name is a setting of a database
        env = {key: item for key, item in env.items() if key != "MEMORY_FILE_PATH"}
        env["MEMORY_DATABASE_URL"] = "postgresql://nobody@127.0.0.1:1/none"
    return subprocess.run([sys.executable, "-m", "memory_server", *(argv or [])], env=env, cwd=tmp_path,
                          input=json.dumps(initialize()) + "\n", capture_output=True, text=True,
                          timeout=WAIT_SECONDS)


@pytest.mark.parametrize(("variable", "value", "accepts"), BAD_SETTINGS)
def test_a_bad_setting_stops_the_server_with_one_line_naming_it(tmp_path: Path, variable: str, value: str,
                                                                accepts: str) -> None:
    done = refused(tmp_path, variable, value)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "", "no protocol message"
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mcp-server-memory: ") and variable in lines[0] and accepts in lines[0]
    assert repr(value) in lines[0] or repr(value.rpartition("=")[2]) in lines[0], "the line shows what it got"
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == [], "nothing made on disk"


@pytest.mark.parametrize(("variable", "value"), [("MEMORY_SEMANTIC", "maybe"), ("MEMORY_LOCK_TIMINGS", "x"),
                                                 ("MEMORY_DATES", "perhaps")])
def test_a_bad_setting_stops_a_command_the_same_way(tmp_path: Path, variable: str, value: str) -> None:
    done = refused(tmp_path, variable, value, ["stats"])
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and variable in done.stderr, done.stderr


def test_a_bad_http_setting_stops_the_http_server_before_it_says_it_serves(tmp_path: Path) -> None:
    done = refused(tmp_path, "MCP_MEMORY_HTTP_LIMITS", "requests=many", ["--http", "127.0.0.1:0"])
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "mcp-server-memory: MCP_MEMORY_HTTP_LIMITS: requests must be an integer above 0; got 'many'"]


@pytest.mark.parametrize("good", [{"MEMORY_SEMANTIC": "OFF", "MEMORY_DATES": " yes ", "MEMORY_SEMANTIC_MAX": "7"},
                                  {"MEMORY_SEMANTIC": "", "MEMORY_DATES": "1", "MEMORY_SEMANTIC_MAX": ""},
                                  {"MEMORY_LOCK_TIMINGS": "2,0.5", "MCP_MEMORY_HTTP_LIMITS": "streams=4"}])
def test_good_settings_serve(memory_servers: MemoryServers, tmp_path: Path, good: dict[str, str]) -> None:
    client = memory_servers.client("legacy", tmp_path / "memory.jsonl", env=good)
    client.ok("create_entities", {"entities": [entity("Ann", "person", ["likes tea"])]})
    assert [e["name"] for e in client.graph()["entities"]] == ["Ann"]


def test_the_switches_accept_on_and_off_words_and_nothing_else() -> None:
    for on in ("", " ", "on", "ON", "1", "true", "Yes"):
        assert settings.switch({"MEMORY_DATES": on}, "MEMORY_DATES") is True
        assert dates.clock_from({"MEMORY_DATES": on}) is dates.now_stamp
    assert settings.switch({}, "MEMORY_SEMANTIC") is True
    for off in ("off", "0", "FALSE", " no "):
        assert settings.switch({"MEMORY_SEMANTIC": off}, "MEMORY_SEMANTIC") is False
    for bad in ("maybe", "2", "of", "onn", "enabled"):
        with pytest.raises(settings.SettingError, match="MEMORY_DATES must be on or off"):
            dates.clock_from({"MEMORY_DATES": bad})


def test_check_gives_the_parsed_settings() -> None:
    checked = settings.check({"MEMORY_SEMANTIC_MAX": "12", "MEMORY_DATES": "off", "MEMORY_ANSWER_BUDGET": "6000",
                              "MCP_MEMORY_HTTP_SESSION_IDLE": "2.5", "MCP_MEMORY_HTTP_LIMITS": "writes=3, streams=9"})
    assert checked.semantic_max == 12 and checked.dates is False and checked.semantic is True
    assert checked.answer_budget == 6000 and checked.http_session_idle == 2.5
    assert checked.http_limits == {"writes": 3, "streams": 9}
    defaults = settings.check({})
    assert defaults.semantic_max is None and defaults.http_session_idle is None and defaults.http_limits == {}
