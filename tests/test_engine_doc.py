"""docs/engine.md's complete server, exactly as the page shows it, run as a real process: over stdio
in each era and over Streamable HTTP in each era, by the official SDK client."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import REPO, WAIT_SECONDS
from http_helpers import HttpServerProcess, free_port
from mcp import types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.subscriptions import ResourceUpdated

PAGE = REPO / "docs" / "engine.md"
NOTES = "notes://all"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"


def example_code() -> str:
    """The one Python block of the page's "A complete server" section."""
    section = PAGE.read_text(encoding="utf-8").split("\n## A complete server\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, "the section shows one complete server"
    return str(blocks[0])


@pytest.fixture
def notes_py(tmp_path: Path) -> Path:
    path = tmp_path / "notes.py"
    path.write_text(example_code(), encoding="utf-8")
    return path


def test_the_example_is_about_forty_lines() -> None:
    assert len(example_code().splitlines()) <= 50


async def exercise(target: Any, mode: str) -> None:
    """Everything the example offers, through one client in one era."""
    updates_in, updates = anyio.create_memory_object_stream[str](10)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates_in.send_nowait(message.params.uri)

    with anyio.fail_after(WAIT_SECONDS * 2):
        async with Client(target, mode=mode, message_handler=on_message) as client:
            assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
            listed = (await client.list_tools()).tools
            assert [(tool.name, tool.title) for tool in listed] == [("add_note", "Add Note")]
            assert listed[0].input_schema == {"type": "object", "properties": {"text": {
                "type": "string", "minLength": 1, "description": "What to write down"}}, "required": ["text"]}

            if mode == "legacy":
                await client.subscribe_resource(NOTES)
                added = await client.call_tool("add_note", {"text": "buy tea"})
                assert await updates.receive() == NOTES
            else:
                async with client.listen(resource_subscriptions=[NOTES]) as subscription:
                    assert subscription.honored.resource_subscriptions == [NOTES]
                    added = await client.call_tool("add_note", {"text": "buy tea"})
                    assert await anext(subscription) == ResourceUpdated(uri=NOTES)
            assert added.structured_content == {"count": 1} and not added.is_error

            again = await client.call_tool("add_note", {"text": "buy tea"})
            assert again.is_error and again.content[0].text == "Already noted: buy tea"
            wrong = await client.call_tool("add_note", {"text": 3})
            assert wrong.is_error
            assert wrong.content[0].text == "Invalid arguments for tool add_note: at /text: 3 is not of type 'string'"
            empty = await client.call_tool("add_note", {"text": ""})
            assert empty.is_error and "at /text:" in empty.content[0].text

            read = await client.read_resource(NOTES)
            assert [(content.uri, content.text) for content in read.contents] == [(NOTES, "buy tea")]


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_example_serves_stdio_in_each_era(notes_py: Path, mode: str) -> None:
    parameters = StdioServerParameters(command=sys.executable, args=[str(notes_py)],
                                       env={"PYTHONPATH": str(REPO)}, cwd=notes_py.parent)
    await exercise(parameters, mode)


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_example_serves_streamable_http_in_each_era(notes_py: Path, mode: str) -> None:
    port = free_port()
    server = HttpServerProcess([sys.executable, str(notes_py), "--http", str(port)], cwd=notes_py.parent,
                               env={"PYTHONPATH": str(REPO)}, port=port)
    try:
        server.wait_ready()
        await exercise(server.url, mode)
    finally:
        server.kill()
