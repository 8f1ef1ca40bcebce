"""The requests of one connection in flight, by id: what stdio sessions and HTTP sessions share.

1. An id names at most one request in flight: a second request with it is refused with
   INVALID_REQUEST (`in_use`), and the first goes on. 1 and "1" are different ids.
2. `notifications/cancelled` stops the request its `requestId` names, if it is in flight: its
   context learns it first (handlers in worker threads read `cancelled`), then its cancel scope
   is cancelled. An id that names nothing in flight, or cannot be an id at all, changes nothing.
3. Once a request is finished its id is free again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio

from .context import RequestContext
from .errors import INVALID_REQUEST, ProtocolError
from .messages import Notification, RequestId, id_key

CANCELLED = "notifications/cancelled"


class InflightRequests:
    def __init__(self) -> None:
        self._requests: dict[tuple[type, RequestId], tuple[anyio.CancelScope, RequestContext]] = {}

    def __len__(self) -> int:
        return len(self._requests)

    def in_use(self, request_id: RequestId) -> ProtocolError | None:
        """The refusal of a request whose id is already in flight (statement 1), else None."""
        if id_key(request_id) not in self._requests:
            return None
        return ProtocolError(INVALID_REQUEST, f"Invalid Request: id {request_id!r} is already in use by a request in flight")

    def start(self, request_id: RequestId, scope: anyio.CancelScope, context: RequestContext) -> None:
        """`request_id` is in flight, stopped by cancelling `scope` (the caller checked `in_use`)."""
        self._requests[id_key(request_id)] = (scope, context)

    def finish(self, request_id: RequestId) -> None:
        """Statement 3."""
        self._requests.pop(id_key(request_id), None)

    def notice(self, notification: Notification) -> None:
        """Statement 2 for a `notifications/cancelled`; every other notification is not this table's."""
        if notification.method != CANCELLED:
            return
        request_id: Any = notification.params.get("requestId")
        try:
            entry = self._requests.get(id_key(request_id))
        except TypeError:  # an unhashable requestId names nothing in flight
            entry = None
        if entry is not None:
            scope, context = entry
            context.cancel()
            scope.cancel()

    def contexts(self) -> Iterator[RequestContext]:
        """The contexts of the requests in flight (a copy: finishing one while iterating is safe)."""
        return iter([context for _, context in self._requests.values()])

    def cancel_all(self) -> None:
        """Every request in flight stops, as if each had been cancelled by its client."""
        for scope, context in list(self._requests.values()):
            context.cancel()
            scope.cancel()
