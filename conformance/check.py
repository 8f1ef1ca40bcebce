"""``mcp-conformance check``: protocol requirements every MCP stdio server must meet, whatever its tools.

The requirements are a table. Each row names its spec section and level (MUST, SHOULD), the
era it applies to and what the server must have declared for it to apply; its check is a
small function over one exchange with a fresh server process: it sends lines and judges the
answers, raising :class:`Failed` with the reason. Before the rows run, two fresh processes
find out which eras the server claims: ``initialize`` (2025 versions) and ``server/discover``
(2026-07-28). A row whose era or capability the server does not claim is *not supported*,
never a failure; a shape check without the era's ``schema.json`` is *not checked*.

Nothing here calls a tool or reads a resource: a check lists, pings and sends bad lines.
Server-specific values (names, versions, instructions, the tools themselves) are never
compared, only their shapes.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal

import anyio
from jsonschema import Draft202012Validator

from conformance.probe import STARTUP, Line, Probe, fresh_server, is_response, value_of

LEGACY: Final = "legacy"
MODERN: Final = "modern"
LEGACY_VERSION: Final = "2025-11-25"
MODERN_VERSION: Final = "2026-07-28"
PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
CLIENT: Final = {"name": "mcp-conformance-check", "version": "1"}
SPEC_URL: Final = "https://modelcontextprotocol.io/specification"
# How long a server gets to say something it must not, once the check expects silence.
QUIET: Final = 0.3
# Fresh server processes running at once.
CONCURRENCY: Final = 4

Status = Literal["pass", "fail", "not supported", "not checked"]


class Failed(Exception):
    """The server broke the requirement; the message says how."""


class Unsupported(Exception):
    """The server does not offer what the requirement is about."""


@dataclass(frozen=True)
class Section:
    version: str
    page: str
    heading: str

    @property
    def url(self) -> str:
        anchor = self.heading.lower().replace(" ", "-").replace("`", "")
        return f"{SPEC_URL}/{self.version}/{self.page}#{anchor}"

    def __str__(self) -> str:
        return f"{self.version} {self.page} §{self.heading}"


@dataclass(frozen=True)
class Context:
    era: str
    claims: Claims
    schemas: Schemas | None


Check = Callable[[Probe, Context], Awaitable[None]]


@dataclass(frozen=True)
class Requirement:
    id: str
    era: str  # legacy, modern, or "first": the first era the server claims (legacy if both)
    level: str
    section: Section
    text: str
    check: Check | None  # None: judged from what discovery found
    needs: str | None = None  # a capability the server must declare in that era
    schema: str | None = None  # a definition of the era's schema.json the check validates against


@dataclass(frozen=True)
class Verdict:
    requirement: Requirement
    status: Status
    reason: str = ""
    era: str | None = None
    exchange: tuple[Line, ...] = ()


# --- what the server claims -----------------------------------------------------------------


@dataclass(frozen=True)
class Claims:
    """What discovery found: the answers to ``initialize`` and ``server/discover``, with the exchanges."""

    initialize: dict[str, Any] | None = None
    discover: dict[str, Any] | None = None
    exchanges: Mapping[str, tuple[Line, ...]] = field(default_factory=dict)

    def result(self, era: str) -> dict[str, Any] | None:
        answer = self.initialize if era == LEGACY else self.discover
        return answer.get("result") if isinstance(answer, dict) and isinstance(answer.get("result"), dict) else None

    def claimed(self, era: str) -> bool:
        result = self.result(era)
        if era == MODERN:
            return result is not None and MODERN_VERSION in (result.get("supportedVersions") or [])
        return result is not None

    def eras(self) -> list[str]:
        return [era for era in (LEGACY, MODERN) if self.claimed(era)]

    def version(self, era: str) -> str:
        if era == MODERN:
            return MODERN_VERSION
        version = (self.result(LEGACY) or {}).get("protocolVersion")
        return version if isinstance(version, str) else LEGACY_VERSION

    def capabilities(self, era: str) -> dict[str, Any]:
        capabilities = (self.result(era) or {}).get("capabilities")
        return capabilities if isinstance(capabilities, dict) else {}

    def why_not(self, era: str) -> str:
        answer = self.initialize if era == LEGACY else self.discover
        method = "initialize" if era == LEGACY else "server/discover"
        era_name = "a 2025 era (initialize)" if era == LEGACY else f"the {MODERN_VERSION} era (server/discover)"
        if answer is None:
            return f"the server does not claim {era_name}: {method} got no answer"
        if "error" in answer:
            return f"the server does not claim {era_name}: {method} was answered with error {_error_text(answer)}"
        return f"the server does not claim {era_name}: its answer to {method} does not list {MODERN_VERSION}"


def _error_text(answer: dict[str, Any]) -> str:
    error = answer.get("error")
    if isinstance(error, dict):
        # Some servers put a pretty-printed validation report in the message: one line, and not all of it.
        message = " ".join(str(error.get("message")).split())
        return f"{error.get('code')} ({message[:160] + '...' if len(message) > 160 else message})"
    return repr(error)


# --- the era's schema.json ------------------------------------------------------------------


class Schemas:
    """The official schema.json of each era, from a directory holding ``<version>/schema.json``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def has(self, version: str) -> bool:
        return (self.root / version / "schema.json").is_file()

    def problems(self, version: str, definition: str, instance: Any) -> list[str]:
        validator = _validator(self.root / version / "schema.json", definition)
        errors = sorted(validator.iter_errors(instance), key=lambda error: list(error.absolute_path))
        return [f"{_json_path(error.absolute_path)}: {error.message}" for error in errors]


@cache
def _validator(path: Path, definition: str) -> Draft202012Validator:
    schema = json.loads(path.read_text(encoding="utf-8"))
    if definition not in schema.get("$defs", {}):
        raise Failed(f"{definition} is not defined in {path}")
    return Draft202012Validator({**schema, "$ref": f"#/$defs/{definition}"})


def _json_path(path: Sequence[Any]) -> str:
    return "result" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


# --- the client's lines ---------------------------------------------------------------------


def modern_meta(version: str = MODERN_VERSION, capabilities: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {PROTOCOL_VERSION: version, CLIENT_INFO: CLIENT}
    if capabilities:
        meta[CLIENT_CAPABILITIES] = {}
    return meta


def call(era: str, request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A request as a client of that era writes it: a modern one carries the per-request _meta."""
    params = dict(params or {})
    if era == MODERN:
        params["_meta"] = modern_meta()
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        message["params"] = params
    return message


def initialize(request_id: Any = "initialize", version: str = LEGACY_VERSION) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT}
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}


async def open_session(probe: Probe, era: str) -> None:
    """The handshake of the era: initialize and initialized (legacy), or server/discover (modern)."""
    if era == LEGACY:
        answer = await probe.request(initialize())
        if not _is_result(answer):
            raise Failed(f"the initialize that worked during discovery failed now: {_answer_text(answer)}")
        await probe.send(notification("notifications/initialized"))
    else:
        answer = await probe.request(call(MODERN, "discover", "server/discover"))
        if not _is_result(answer):
            raise Failed(f"the server/discover that worked during discovery failed now: {_answer_text(answer)}")


def alive_request(era: str, request_id: Any = "alive") -> dict[str, Any]:
    """A request every server of the era must answer with a result."""
    return call(LEGACY, request_id, "ping") if era == LEGACY else call(MODERN, request_id, "server/discover")


async def still_serving(probe: Probe, era: str, after: str) -> None:
    answer = await probe.request(alive_request(era))
    if not _is_result(answer):
        raise Failed(f"the server stopped serving after {after}: {alive_request(era)['method']} got {_answer_text(answer)}")


# --- judging answers ------------------------------------------------------------------------


def _is_result(answer: Any) -> bool:
    return isinstance(answer, dict) and isinstance(answer.get("result"), dict)


def _answer_text(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return "no answer in time"
    if "error" in answer:
        return f"error {_error_text(answer)}"
    return f"the result {json.dumps(answer.get('result'))[:200]}"


def expect_error(answer: dict[str, Any] | None, codes: tuple[int, ...], request_id: Any = ...) -> None:
    wanted = " or ".join(map(str, codes))
    if answer is None:
        raise Failed(f"no answer in time; expected error {wanted}")
    error = answer.get("error")
    if "result" in answer or error is None:
        raise Failed(f"expected error {wanted}, got {_answer_text(answer)}")
    if not (isinstance(error, dict) and _is_int(error.get("code")) and isinstance(error.get("message"), str)):
        raise Failed(f"the error object needs an integer code and a string message: {json.dumps(error)}")
    if error["code"] not in codes:
        raise Failed(f"expected error {wanted}, got {_error_text(answer)}")
    if request_id is not ... and not is_response(answer, request_id):
        raise Failed(f"the error carries id {json.dumps(answer.get('id'))}, expected {json.dumps(request_id)}")


def expect_result(answer: dict[str, Any] | None) -> dict[str, Any]:
    if not _is_result(answer):
        raise Failed(f"expected a result, got {_answer_text(answer)}")
    assert answer is not None
    result: dict[str, Any] = answer["result"]
    return result


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def expect_shape(context: Context, definition: str, result: dict[str, Any]) -> None:
    assert context.schemas is not None
    problems = context.schemas.problems(context.claims.version(context.era), definition, result)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise Failed(f"not a valid {definition} of {context.claims.version(context.era)}: {shown}")


def message_problem(line: Line, era: str) -> str | None:
    """Why a stdout line is not an MCP message a server may write, or None."""
    message = value_of(line)
    if not isinstance(message, dict):
        return "not a JSON-RPC message (not a JSON object)"
    if message.get("jsonrpc") != "2.0":
        return 'no "jsonrpc": "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return "a method that is not a string"
        if "id" in message and era == MODERN:
            return "a request to the client, which a 2026-07-28 server never writes to stdout"
        return None
    if "id" not in message or ("result" in message) == ("error" in message):
        return "neither a request, a notification, nor a response with exactly one of result and error"
    return None


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


# --- running the table ----------------------------------------------------------------------


@dataclass(frozen=True)
class CheckSettings:
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    spec: Path | None = None
    timeout: float = 5.0
    only: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    command: tuple[str, ...]
    claims: Claims
    spec: Path | None
    verdicts: tuple[Verdict, ...]

    def count(self, status: Status) -> int:
        return sum(verdict.status == status for verdict in self.verdicts)


async def discover(settings: CheckSettings) -> Claims:
    """Which eras the server claims: initialize and server/discover, each in a fresh process."""
    answers: dict[str, dict[str, Any] | None] = {}
    exchanges: dict[str, tuple[Line, ...]] = {}

    async def ask(era: str, message: dict[str, Any]) -> None:
        async with fresh_server(settings.command, settings.env, settings.timeout) as probe:
            answers[era] = await probe.request(message)
            if answers[era] is None and probe.output_ended:
                status = await probe.exit_status(min(settings.timeout, 2.0))
                probe.note("the server closed its output" + (f" and exited with status {status}" if status is not None else ""))
            exchanges[era] = tuple(probe.exchange)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask, LEGACY, initialize())
        tasks.start_soon(ask, MODERN, call(MODERN, "discover", "server/discover"))
    return Claims(answers[LEGACY], answers[MODERN], exchanges)


def applicability(requirement: Requirement, claims: Claims, schemas: Schemas | None) -> Verdict | str:
    """The era a requirement runs in, or the verdict it gets without running."""
    eras = claims.eras()
    if requirement.check is None:
        evidence = claims.exchanges.get(eras[0] if eras else LEGACY, ())
        if eras:
            return Verdict(requirement, "pass", f"claims: {', '.join(eras)}", eras[0], evidence)
        exchange = (*claims.exchanges.get(LEGACY, ()), *claims.exchanges.get(MODERN, ()))
        return Verdict(requirement, "fail", f"{claims.why_not(LEGACY)}; {claims.why_not(MODERN)}", None, exchange)
    era = (eras[0] if eras else None) if requirement.era == "first" else requirement.era
    if era is None:
        return Verdict(requirement, "not supported", "the server claims no era")
    if not claims.claimed(era):
        return Verdict(requirement, "not supported", claims.why_not(era), era, claims.exchanges.get(era, ()))
    if requirement.needs and requirement.needs not in claims.capabilities(era):
        reason = f"the server does not declare the {requirement.needs} capability in the {era} era"
        return Verdict(requirement, "not supported", reason, era)
    if requirement.schema:
        if schemas is None:
            return Verdict(requirement, "not checked", "no schema: pass --spec", era)
        if not schemas.has(claims.version(era)):
            reason = f"no schema for {claims.version(era)} in {schemas.root}: pass --spec with <version>/schema.json"
            return Verdict(requirement, "not checked", reason, era)
    return era


async def run_requirement(requirement: Requirement, era: str, context: Context, settings: CheckSettings) -> Verdict:
    async with fresh_server(settings.command, settings.env, settings.timeout) as probe:
        try:
            # One bound for the whole exchange, so a server that trickles out answers cannot stall the check.
            with anyio.fail_after(_exchange_bound(settings)):
                assert requirement.check is not None
                await requirement.check(probe, context)
        except Failed as failure:
            return Verdict(requirement, "fail", str(failure), era, tuple(probe.exchange))
        except Unsupported as unsupported:
            return Verdict(requirement, "not supported", str(unsupported), era, tuple(probe.exchange))
        except TimeoutError:
            reason = f"the exchange did not finish within {_exchange_bound(settings):g} s"
            return Verdict(requirement, "fail", reason, era, tuple(probe.exchange))
        return Verdict(requirement, "pass", "", era, tuple(probe.exchange))


def _exchange_bound(settings: CheckSettings) -> float:
    return STARTUP + settings.timeout * 4


async def run_check(settings: CheckSettings) -> Report:
    schemas = Schemas(settings.spec) if settings.spec is not None else None
    claims = await discover(settings)
    rows = [requirement for requirement in REQUIREMENTS if not settings.only or requirement.id in settings.only]
    verdicts: list[Verdict | None] = [None] * len(rows)
    limiter = anyio.CapacityLimiter(CONCURRENCY)

    async def judge(index: int, requirement: Requirement) -> None:
        decided = applicability(requirement, claims, schemas)
        if isinstance(decided, Verdict):
            verdicts[index] = decided
            return
        async with limiter:
            verdicts[index] = await run_requirement(requirement, decided, Context(decided, claims, schemas), settings)

    async with anyio.create_task_group() as tasks:
        for index, requirement in enumerate(rows):
            tasks.start_soon(judge, index, requirement)
    return Report(settings.command, claims, settings.spec, tuple(verdict for verdict in verdicts if verdict is not None))
