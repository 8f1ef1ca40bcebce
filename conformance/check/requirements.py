"""The requirements: one small check per row, and the table of rows with their spec sections."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from conformance.probe import Probe, is_response, value_of

from .messages import (
    _answer_text,
    alive_request,
    call,
    expect_error,
    expect_result,
    expect_shape,
    initialize,
    message_problem,
    notification,
    open_session,
    still_serving,
)
from .model import (
    CLIENT_CAPABILITIES,
    LEGACY,
    LEGACY_VERSION,
    MODERN,
    MODERN_VERSION,
    PROTOCOL_VERSION,
    QUIET,
    SUBSCRIPTION_ID,
    Check,
    Context,
    Failed,
    Requirement,
    Section,
    Unsupported,
    _error_text,
)

# --- the checks -----------------------------------------------------------------------------


async def check_initialize(probe: Probe, context: Context) -> None:
    result = expect_result(await probe.request(initialize()))
    if not isinstance(result.get("protocolVersion"), str):
        raise Failed("the result has no protocolVersion string")
    if not isinstance(result.get("capabilities"), dict):
        raise Failed("the result has no capabilities object")
    info = result.get("serverInfo")
    if not (isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)):
        raise Failed("the result has no serverInfo with a name and a version")


async def check_initialize_shape(probe: Probe, context: Context) -> None:
    expect_shape(context, "InitializeResult", expect_result(await probe.request(initialize())))


async def check_version_negotiation(probe: Probe, context: Context) -> None:
    result = expect_result(await probe.request(initialize(version="1900-01-01")))
    version = result.get("protocolVersion")
    if not isinstance(version, str) or version == "1900-01-01":
        raise Failed(f"asked for 1900-01-01, the server must answer with a version it supports, not {json.dumps(version)}")


async def check_ping(probe: Probe, context: Context) -> None:
    await open_session(probe, LEGACY)
    result = expect_result(await probe.request(call(LEGACY, "ping", "ping")))
    if set(result) - {"_meta"}:
        raise Failed(f"ping must be answered with an empty result, got {json.dumps(result)}")


async def check_discover(probe: Probe, context: Context) -> None:
    result = expect_result(await probe.request(call(MODERN, "discover", "server/discover")))
    versions = result.get("supportedVersions")
    if not (isinstance(versions, list) and MODERN_VERSION in versions):
        raise Failed(f"supportedVersions must list {MODERN_VERSION}, got {json.dumps(versions)}")
    if not isinstance(result.get("capabilities"), dict):
        raise Failed("the result has no capabilities object")
    if result.get("resultType") != "complete":
        raise Failed(f'a 2026-07-28 result carries resultType "complete", got {json.dumps(result.get("resultType"))}')


async def check_discover_shape(probe: Probe, context: Context) -> None:
    expect_shape(context, "DiscoverResult", expect_result(await probe.request(call(MODERN, "discover", "server/discover"))))


async def check_unsupported_version(probe: Probe, context: Context) -> None:
    message = call(MODERN, "old", "server/discover")
    message["params"]["_meta"][PROTOCOL_VERSION] = "1900-01-01"
    answer = await probe.request(message)
    expect_error(answer, (-32022,), "old")
    assert answer is not None
    supported = (answer["error"].get("data") or {}).get("supported")
    if not (isinstance(supported, list) and supported and all(isinstance(version, str) for version in supported)):
        raise Failed(f"the error's data.supported must list the versions the server supports, got {json.dumps(supported)}")


async def check_missing_meta(probe: Probe, context: Context) -> None:
    message = call(MODERN, "no-capabilities", "server/discover")
    del message["params"]["_meta"][CLIENT_CAPABILITIES]
    expect_error(await probe.request(message), (-32602,), "no-capabilities")


async def check_unknown_method(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    expect_error(await probe.request(call(context.era, "unknown", "conformance/no-such-method")), (-32601,), "unknown")


async def check_invalid_params(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    message = call(context.era, "no-name", "tools/call")
    message.setdefault("params", {})
    expect_error(await probe.request(message), (-32602,), "no-name")


async def check_notification_unanswered(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    await probe.send(notification("notifications/conformance-check", {"note": "no one answers a notification"}))
    await _no_response_but_alive(probe, context.era, "a notification")


async def check_cancel_unknown(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    await probe.send(notification("notifications/cancelled", {"requestId": "never-sent", "reason": "conformance check"}))
    await _no_response_but_alive(probe, context.era, "a cancellation of a request never sent")


async def _no_response_but_alive(probe: Probe, era: str, what: str) -> None:
    await probe.send(alive_request(era))
    answer = await probe.response()
    if answer is None:
        raise Failed(f"no answer to {alive_request(era)['method']} after {what}")
    if not is_response(answer, "alive"):
        raise Failed(f"{what} was answered: {json.dumps(answer)[:200]}")
    extra = [line for line in await probe.quiet(QUIET) if is_response(value_of(line))]
    if extra:
        raise Failed(f"an answer nobody asked for: {json.dumps(value_of(extra[0]))[:200]}")


async def check_tools_shape(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    expect_shape(context, "ListToolsResult", expect_result(await probe.request(call(context.era, "tools", "tools/list"))))


async def check_resources_shape(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    result = expect_result(await probe.request(call(context.era, "resources", "resources/list")))
    expect_shape(context, "ListResourcesResult", result)


def era_rule(methods: Sequence[tuple[str, dict[str, Any]]], other: str) -> Check:
    async def check(probe: Probe, context: Context) -> None:
        await open_session(probe, context.era)
        for number, (method, params) in enumerate(methods):
            request_id = f"{other}-{number}"
            answer = await probe.request(call(context.era, request_id, method, params))
            if answer is None or "error" not in answer:
                raise Failed(f"{method} belongs to the {other} era only; expected an error, got {_answer_text(answer)}")

    return check


async def check_listen_acknowledged(probe: Probe, context: Context) -> None:
    await open_session(probe, MODERN)
    await _open_listen(probe)


async def _open_listen(probe: Probe) -> None:
    await probe.send(call(MODERN, "listen", "subscriptions/listen", {"notifications": {}}))
    while (line := await probe.line()) is not None:
        message = value_of(line)
        if is_response(message, "listen"):
            if "error" in message:
                raise Unsupported(f"subscriptions/listen was answered with error {_error_text(message)}")
            raise Failed("the listen was answered before it was acknowledged")
        if _subscription_of(message) == "listen":
            if message.get("method") != "notifications/subscriptions/acknowledged":
                raise Failed(f"the first message of the subscription is {message.get('method')}, not the acknowledgement")
            if not isinstance(message.get("params", {}).get("notifications"), dict):
                raise Failed("the acknowledgement has no notifications object")
            return
    raise Failed("no notifications/subscriptions/acknowledged for the listen in time")


def _subscription_of(message: Any) -> Any:
    if not isinstance(message, dict) or not isinstance(message.get("params"), dict):
        return None
    meta = message["params"].get("_meta")
    return meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None


async def check_listen_cancelled(probe: Probe, context: Context) -> None:
    await open_session(probe, MODERN)
    await _open_listen(probe)
    cancelled_at = len(probe.exchange)
    await probe.send(notification("notifications/cancelled", {"requestId": "listen", "reason": "conformance check"}))
    await probe.request(alive_request(MODERN))
    await probe.quiet(QUIET)
    for line in probe.exchange[cancelled_at:]:
        message = value_of(line)
        if line.direction == "s2c" and (is_response(message, "listen") or _subscription_of(message) == "listen"):
            raise Failed(f"a message for the cancelled listen: {json.dumps(message)[:200]}")


def bad_line(data: bytes, codes: tuple[int, ...], request_id: Any = ...) -> Check:
    """A malformed line gets the error with the id it can read (null when it cannot), and the server serves on."""

    async def check(probe: Probe, context: Context) -> None:
        await open_session(probe, context.era)
        await probe.send(data)
        expect_error(await probe.response(), codes, request_id)
        await still_serving(probe, context.era, "the malformed line")

    return check


def bad_lines(*lines: bytes) -> Check:
    async def check(probe: Probe, context: Context) -> None:
        await open_session(probe, context.era)
        for data in lines:
            await probe.send(data)
            expect_error(await probe.response(), (-32600,), None)
        await still_serving(probe, context.era, "the malformed lines")

    return check


async def check_empty_line(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    await probe.send(b"")
    await probe.send(alive_request(context.era))
    while (answer := await probe.response()) is not None and not is_response(answer, "alive"):
        if answer.get("id") is not None or "error" not in answer:
            raise Failed(f"an empty line is not a request, but got {json.dumps(answer)[:200]}")
    if answer is None:
        raise Failed("the server stopped serving after an empty line")


async def check_stdout_messages(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    capabilities = context.claims.capabilities(context.era)
    for method, capability in (("tools/list", "tools"), ("resources/list", "resources")):
        if capability in capabilities:
            await probe.request(call(context.era, method, method))
    await probe.request(call(context.era, "unknown", "conformance/no-such-method"))
    await probe.send(b'{"jsonrpc": "2.0", "id": ')
    await probe.quiet(QUIET)
    for line in probe.exchange:
        if line.direction == "s2c" and (problem := message_problem(line, context.era)):
            raise Failed(f"stdout carried {problem}")


async def check_exit_on_eof(probe: Probe, context: Context) -> None:
    await open_session(probe, context.era)
    await probe.close_stdin()
    probe.note("stdin closed")
    status = await probe.exit_status(probe.timeout)
    if status is None:
        raise Failed(f"the server still ran {probe.timeout:g} s after its stdin was closed")
    probe.note(f"exited with status {status}")


# --- the table ------------------------------------------------------------------------------


def _legacy(page: str, heading: str) -> Section:
    return Section(LEGACY_VERSION, page, heading)


def _modern(page: str, heading: str) -> Section:
    return Section(MODERN_VERSION, page, heading)


def _each_era(
    name: str, level: str, sections: tuple[Section, Section], text: str, check: Check, **extra: Any
) -> list[Requirement]:
    return [
        Requirement(f"{era}.{name}", era, level, section, text, check, **extra)
        for era, section in zip((LEGACY, MODERN), sections)
    ]


_MESSAGES = (_legacy("basic/index", "Messages"), _modern("basic/index", "Messages"))
_ERROR_RESPONSES = (_legacy("basic/index", "Error Responses"), _modern("basic/index", "Error Responses"))
_LEGACY_TRANSPORT = _legacy("basic/transports", "stdio")

REQUIREMENTS: Final[tuple[Requirement, ...]] = (
    Requirement("handshake", "first", "MUST", _legacy("basic/lifecycle", "Initialization"),
                "the server completes the handshake of at least one era (initialize, or server/discover for 2026-07-28)",
                None),
    Requirement("legacy.initialize", LEGACY, "MUST", _legacy("basic/lifecycle", "Initialization"),
                "initialize is answered with protocolVersion, capabilities and serverInfo (name, version)",
                check_initialize),
    Requirement("legacy.initialize.schema", LEGACY, "MUST", _legacy("basic/lifecycle", "Initialization"),
                "the initialize result is a valid InitializeResult of the negotiated version's schema.json",
                check_initialize_shape, schema="InitializeResult"),
    Requirement("legacy.version-negotiation", LEGACY, "MUST", _legacy("basic/lifecycle", "Version Negotiation"),
                "initialize with a version the server does not support is answered with a version it does",
                check_version_negotiation),
    Requirement("legacy.ping", LEGACY, "MUST", _legacy("basic/utilities/ping", "Behavior Requirements"),
                "ping is answered promptly with an empty result", check_ping),
    Requirement("modern.discover", MODERN, "MUST", _modern("server/discover", "Response"),
                'server/discover lists 2026-07-28 in supportedVersions, with capabilities and resultType "complete"',
                check_discover),
    Requirement("modern.discover.schema", MODERN, "MUST", _modern("server/discover", "Response"),
                "the server/discover result is a valid DiscoverResult of the 2026-07-28 schema.json",
                check_discover_shape, schema="DiscoverResult"),
    Requirement("modern.unsupported-version", MODERN, "MUST", _modern("basic/versioning", "Protocol Version Negotiation"),
                "a request for an unsupported version gets UnsupportedProtocolVersionError -32022 with data.supported",
                check_unsupported_version),
    Requirement("modern.missing-meta", MODERN, "MUST", _modern("basic/index", "_meta"),
                "a request without the required io.modelcontextprotocol/clientCapabilities gets -32602",
                check_missing_meta),
    *_each_era("unknown-method", "MUST", _MESSAGES,
               "an unknown method gets -32601 (JSON-RPC 2.0 §5.1 Method not found) with the request's id",
               check_unknown_method),
    *_each_era("invalid-params", "MUST", _MESSAGES,
               "tools/call without a tool name gets -32602 (JSON-RPC 2.0 §5.1 Invalid params)",
               check_invalid_params, needs="tools"),
    *_each_era("notification-unanswered", "MUST NOT",
               (_legacy("basic/index", "Notifications"), _modern("basic/index", "Notifications")),
               "a notification is never answered, even one the server does not know", check_notification_unanswered),
    *_each_era("cancel-unknown", "SHOULD",
               (_legacy("basic/utilities/cancellation", "Error Handling"),
                _modern("basic/patterns/cancellation", "Error Handling")),
               "a cancellation of a request never sent is ignored: no answer, and the server serves on",
               check_cancel_unknown),
    *_each_era("tools-list.schema", "MUST", (_legacy("server/tools", "Listing Tools"), _modern("server/tools", "Listing Tools")),
               "tools/list is a valid ListToolsResult of the era's schema.json", check_tools_shape,
               needs="tools", schema="ListToolsResult"),
    *_each_era("resources-list.schema", "MUST",
               (_legacy("server/resources", "Listing Resources"), _modern("server/resources", "Listing Resources")),
               "resources/list is a valid ListResourcesResult of the era's schema.json", check_resources_shape,
               needs="resources", schema="ListResourcesResult"),
    Requirement("legacy.era-rules", LEGACY, "MUST",
                _modern("basic/versioning", "Backward Compatibility with Initialization-Based Versions"),
                "in a legacy session the 2026-07-28 methods (server/discover, subscriptions/listen) are errors, "
                "not served", era_rule((("server/discover", {}), ("subscriptions/listen", {"notifications": {}})), MODERN)),
    Requirement("modern.era-rules", MODERN, "MUST", _modern("changelog", "Major changes"),
                "the methods 2026-07-28 removed (ping, logging/setLevel, resources/subscribe, resources/unsubscribe) "
                "are errors on a modern request",
                era_rule((("ping", {}), ("logging/setLevel", {"level": "info"}),
                          ("resources/subscribe", {"uri": "conformance://check"}),
                          ("resources/unsubscribe", {"uri": "conformance://check"})), LEGACY)),
    Requirement("modern.listen-acknowledged", MODERN, "MUST", _modern("basic/patterns/subscriptions", "Acknowledgment"),
                "subscriptions/listen is first acknowledged by notifications/subscriptions/acknowledged carrying its id",
                check_listen_acknowledged),
    Requirement("modern.listen-cancelled", MODERN, "MUST NOT", _modern("basic/transports/stdio", "Cancellation"),
                "after notifications/cancelled for a listen, nothing more comes for it", check_listen_cancelled),
    Requirement("malformed.parse-error", "first", "MUST", _ERROR_RESPONSES[0],
                "a line that is not JSON gets -32700 Parse error with id null, and the server serves on",
                bad_line(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', (-32700,), None)),
    Requirement("malformed.invalid-utf8", "first", "MUST", _LEGACY_TRANSPORT,
                "a line that is not UTF-8 gets -32700 Parse error with id null, and the server serves on",
                bad_line(b'{"jsonrpc": "2.0", "id": "\xff\xfe", "method": "ping"}', (-32700,), None)),
    Requirement("malformed.not-an-object", "first", "MUST", _MESSAGES[0],
                "a JSON value that is not an object gets -32600 Invalid Request with id null", bad_line(b"42", (-32600,), None)),
    Requirement("malformed.batch", "first", "MUST", _MESSAGES[0],
                "a JSON-RPC batch (an array; MCP has none since 2025-06-18) gets -32600 Invalid Request",
                bad_line(b'[{"jsonrpc": "2.0", "id": "batched", "method": "ping"}]', (-32600,), None)),
    Requirement("malformed.missing-jsonrpc", "first", "MUST", _MESSAGES[0],
                'a request without "jsonrpc": "2.0" gets -32600 Invalid Request',
                bad_line(b'{"id": "no-version", "method": "ping"}', (-32600,))),
    Requirement("malformed.wrong-jsonrpc", "first", "MUST", _MESSAGES[0],
                'a request with "jsonrpc": "1.0" gets -32600 Invalid Request',
                bad_line(b'{"jsonrpc": "1.0", "id": "old", "method": "ping"}', (-32600,))),
    Requirement("malformed.method-not-string", "first", "MUST", _MESSAGES[0],
                "a request whose method is not a string gets -32600 Invalid Request",
                bad_line(b'{"jsonrpc": "2.0", "id": "numbered", "method": 5}', (-32600,))),
    Requirement("malformed.params-not-object", "first", "MUST", _MESSAGES[0],
                "a request whose params is a string gets -32600 Invalid Request or -32602 Invalid params",
                bad_line(b'{"jsonrpc": "2.0", "id": "stringly", "method": "ping", "params": "x"}', (-32600, -32602))),
    Requirement("malformed.bad-ids", "first", "MUST", _legacy("basic/index", "Requests"),
                "requests with id null, an object, a fraction or a boolean get -32600 Invalid Request with id null",
                bad_lines(b'{"jsonrpc": "2.0", "id": null, "method": "ping"}',
                          b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',
                          b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
                          b'{"jsonrpc": "2.0", "id": true, "method": "ping"}')),
    Requirement("malformed.empty-line", "first", "SHOULD", _LEGACY_TRANSPORT,
                "an empty line is no request: at most a parse error with id null, and the server serves on",
                check_empty_line),
    Requirement("stdio.stdout-messages-only", "first", "MUST", _LEGACY_TRANSPORT,
                "everything the server writes to stdout is a JSON-RPC message, one per line", check_stdout_messages),
    Requirement("stdio.exit-on-eof", "first", "SHOULD", _modern("basic/transports/stdio", "Shutdown"),
                "the server exits once its stdin is closed", check_exit_on_eof),
)


def requirement_ids() -> list[str]:
    return [requirement.id for requirement in REQUIREMENTS]


