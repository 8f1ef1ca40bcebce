"""Interop: the official `mcp` SDK client, an independent implementation, talks to the example server over stdio."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from conftest import EXAMPLE_SERVER, REPO, WAIT_SECONDS
from mcp import types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

COUNTER = "example://counter"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"


def example_parameters() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(EXAMPLE_SERVER)],
                                 env={"PYTHONPATH": str(REPO)}, cwd=REPO)


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "version"), [("legacy", LEGACY), ("auto", MODERN), (MODERN, MODERN)])
async def test_the_sdk_client_negotiates_lists_calls_and_reads(mode: str, version: str) -> None:
    with anyio.fail_after(WAIT_SECONDS):
        async with Client(example_parameters(), mode=mode) as client:
            assert client.protocol_version == version
            if mode != MODERN:  # a pinned client skips discovery, so it never learns who the server is
                assert client.server_info is not None and client.server_info.name == "example-server"

            tools = await client.list_tools()
            assert [tool.name for tool in tools.tools] == ["add", "sleep", "fail", "crash", "bump"]

            added = await client.call_tool("add", {"a": 2, "b": 3})
            assert added.structured_content == {"sum": 5} and not added.is_error

            failed = await client.call_tool("fail", {})
            assert failed.is_error and failed.content[0].text == "this tool always fails"

            invalid = await client.call_tool("add", {"a": "two", "b": 3})
            assert invalid.is_error and "/a" in invalid.content[0].text

            with pytest.raises(MCPError) as refused:
                await client.call_tool("no-such-tool", {})
            assert refused.value.code == -32602

            read = await client.read_resource(COUNTER)
            assert [(content.uri, content.text) for content in read.contents] == [(COUNTER, "0")]


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
async def test_a_legacy_sdk_client_receives_a_resource_update_after_subscribing() -> None:
    updates_in, updates = anyio.create_memory_object_stream[types.ResourceUpdatedNotification](10)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates_in.send_nowait(message)

    with anyio.fail_after(WAIT_SECONDS):
        async with Client(example_parameters(), mode="legacy", message_handler=on_message) as client:
            await client.subscribe_resource(COUNTER)
            bumped = await client.call_tool("bump", {})
            assert bumped.structured_content == {"value": 1}
            update = await updates.receive()
            assert update.params.uri == COUNTER
            read = await client.read_resource(COUNTER)
            assert read.contents[0].text == "1"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", MODERN])
async def test_a_modern_sdk_client_receives_a_resource_update_on_a_listen(mode: str) -> None:
    with anyio.fail_after(WAIT_SECONDS):
        async with Client(example_parameters(), mode=mode) as client:
            async with client.listen(resource_subscriptions=[COUNTER, "example://missing"]) as subscription:
                assert subscription.honored.resource_subscriptions == [COUNTER]
                await client.call_tool("bump", {})
                event = await anext(subscription)
                assert event == ResourceUpdated(uri=COUNTER)
