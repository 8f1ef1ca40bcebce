"""protocol/http/guards.py's BodyGuard is an ASGI wrapper of its own, configured by `HttpLimits`
(statement 6): around any app, in-process, without the endpoint."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from protocol.http import HttpLimits
from protocol.http.guards import BODY, Body, BodyGuard
from protocol.http.limits import FREE_BODY_BYTES
from protocol.http.responses import Reject, answer_plain


def post(chunks: list[bytes], headers: dict[str, str] | None = None) -> tuple[dict[str, Any], Any]:
    """A POST's scope, and the receive that hands its body over in `chunks`."""
    scope = {"type": "http", "method": "POST", "headers": [
        (name.encode(), value.encode()) for name, value in (headers or {"content-type": "application/json"}).items()]}
    messages = [{"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
                for index, chunk in enumerate(chunks)]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await anyio.sleep_forever()
        raise AssertionError

    return scope, receive


async def nowhere(message: dict[str, Any]) -> None:
    pass


@pytest.mark.anyio
async def test_the_app_it_guards_finds_the_whole_body_counted_until_answered() -> None:
    seen: list[tuple[bytes, int]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body: Body = scope[BODY]
        seen.append((body.take(), guard.budget.held))
        await answer_plain(send, 200, b"ok")

    guard = BodyGuard(app, HttpLimits(max_body_bytes=1 << 20))
    part = b"x" * FREE_BODY_BYTES
    await guard(*post([b"{", part, b"}"]), nowhere)
    assert seen == [(b"{" + part + b"}", 2)]  # beyond the free bytes of each body
    assert guard.budget.held == 0


@pytest.mark.anyio
@pytest.mark.parametrize(("limits", "chunks", "headers", "status"), [
    (HttpLimits(max_body_bytes=10), [b"01234567890"], None, 413),
    (HttpLimits(max_body_bytes=10), [b"{}"], {"content-type": "application/json", "content-length": "11"}, 413),
    (HttpLimits(), [b"{}"], {"content-type": "application/json", "content-length": "two"}, 400),
    (HttpLimits(), [b"{}"], {"content-type": "text/plain"}, 415),
    (HttpLimits(max_body_bytes_in_flight=1), [b"x" * (FREE_BODY_BYTES + 2)], None, 503),
    (HttpLimits(body_idle_seconds=0.01), [b"{", b""], None, 408),
])
async def test_a_body_out_of_bounds_is_refused_before_the_app_sees_it(
        limits: HttpLimits, chunks: list[bytes], headers: dict[str, str] | None, status: int) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        pytest.fail("the app saw a body out of bounds")

    guard = BodyGuard(app, limits)
    scope, receive = post(chunks, headers)
    if status == 408:
        async def stalling() -> dict[str, Any]:  # the first piece, then nothing more
            if not stalled:
                stalled.append(True)
                return {"type": "http.request", "body": b"{", "more_body": True}
            await anyio.sleep_forever()
            raise AssertionError
        stalled: list[bool] = []
        receive = stalling
    with pytest.raises(Reject) as refused:
        await guard(scope, receive, nowhere)
    assert refused.value.status == status
    assert guard.budget.held == 0
