"""The lines the check writes as a client of each era, and how it judges the answers it gets back
(`expect_error`, `expect_result`, `expect_shape`, `message_problem`: where answers are compared)."""

from __future__ import annotations

import json
from typing import Any

from conformance.probe import Line, Probe, is_response, value_of

from .model import (
    CLIENT,
    CLIENT_CAPABILITIES,
    CLIENT_INFO,
    LEGACY,
    LEGACY_VERSION,
    MODERN,
    MODERN_VERSION,
    PROTOCOL_VERSION,
    Context,
    Failed,
    _error_text,
)

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


