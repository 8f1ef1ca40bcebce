"""One request answered, on any transport: the response line it is owed, from the one dispatch table.

- `answer(peer, request, context)`: the response line a request is owed.
- `respond(...)`: the same, with the error code when it is an error (HTTP picks a status from it).

A transport is a thin adapter: it serves a server inside `running(server)` (runtime.py), turns its
bytes into requests for a `Peer` (peer.py), owns the tasks and cancel scopes they run in, and
writes the lines it is handed.
"""

from __future__ import annotations

import logging

from .context import RequestContext
from .dispatch import METHODS, Call
from .eras import stamp
from .errors import INTERNAL_ERROR, ProtocolError, method_not_found
from .messages import Request, encode_error, encode_result
from .peer import Peer

log = logging.getLogger("protocol")


async def answer(peer: Peer, request: Request, context: RequestContext | None = None) -> bytearray:
    """The response line `request` is owed: a result stamped for its era, or its error."""
    return (await respond(peer, request, context))[0]


async def respond(peer: Peer, request: Request,
                  context: RequestContext | None = None) -> tuple[bytearray, int | None]:
    """The response line and, when it is an error, its code (HTTP picks a status from it)."""
    try:
        method = METHODS.get(request.method)
        if method is None:
            raise method_not_found(request.method)
        era = peer.eras.route(request)
        if era is not None and era not in method.eras:
            raise method_not_found(request.method)
        if context is None:
            context = peer.context(request, era)
        else:
            # A context made before the era was known (to be cancellable early) learns what the peer knows.
            context.era = era
            context.protocol_version, context.client_info, context.client_capabilities = peer.identity(request, era)
        reply = await method.handler(peer, Call(request.id, request.method, request.params, era, context))
        peer.eras.served(era)
        return encode_result(request.id, stamp(era, reply.result, reply.cache, peer.server.info)), None
    except ProtocolError as error:
        return encode_error(request.id, error), error.code
    except Exception:
        log.exception("internal error while serving %s", request.method)
        return encode_error(request.id, ProtocolError(INTERNAL_ERROR, "Internal error")), INTERNAL_ERROR
