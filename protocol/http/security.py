"""Who may talk to the endpoint: the Host header, the Origin header, CORS for allowed origins, the token.

1. Host (the DNS rebinding guard): when the app has allowed hosts (a server bound to a loopback
   address has `localhost`, `127.0.0.1` and `[::1]`, on any port), a request naming any other
   host, or none, is answered 421. A web page whose name was rebound to 127.0.0.1 sends its own
   name as Host, even on a same-origin request that carries no Origin.
2. Origin: a request with an `Origin` is served only when the origin is one of the allowed
   origins, or a well-formed `http(s)://` origin of a loopback host; anything else (a malformed
   origin such as `http://evil.com\\@127.0.0.1`, which no browser sends, or `null`) is 403.
3. CORS: only the allowed origins (`--allow-origin`) get `Access-Control-Allow-Origin`, on every
   answer including errors, with `Mcp-Session-Id`, `MCP-Protocol-Version` and `WWW-Authenticate`
   exposed. Their preflight `OPTIONS` is answered 204 without the token (a browser never sends
   `Authorization` on a preflight), naming the methods and the headers the page asked for.
4. Token: with a token set, every request but a preflight must carry `Authorization: Bearer
   <token>`; the comparison takes the same time whatever the token given.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
ALLOWED_METHODS = b"GET, POST, DELETE"
EXPOSED_HEADERS = b"Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"
PREFLIGHT_MAX_AGE = b"600"
_ORIGIN = re.compile(r"(https?)://(\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::([0-9]{1,5}))?", re.ASCII)
_HEADER_LIST = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*", re.ASCII)


def normal_origin(origin: str) -> str:
    """How an allowed origin is compared: without a trailing slash, in lower case."""
    return origin.strip().rstrip("/").lower()


def origin_host(origin: str) -> str | None:
    """The host of a well-formed origin (`scheme://host[:port]`, nothing else), else None."""
    found = _ORIGIN.fullmatch(origin.lower())
    if found is None or (found.group(3) is not None and int(found.group(3)) > 65535):
        return None
    return found.group(2).strip("[]")


def origin_allowed(origin: str, allowed: frozenset[str]) -> bool:
    """Statement 2."""
    if normal_origin(origin) in allowed:
        return True
    return origin_host(origin) in LOOPBACK_HOSTS


def host_name(host: str) -> str:
    """The name in a Host header, without its port, in lower case (`[::1]:8000` -> `::1`)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def host_allowed(host: str | None, allowed: frozenset[str] | None) -> bool:
    """Statement 1 (None: every host)."""
    return allowed is None or (host is not None and host_name(host) in allowed)


def cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    """What every answer to an allowed origin carries (statement 3)."""
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin"),
            (b"access-control-expose-headers", EXPOSED_HEADERS)]


def preflight_headers(requested_headers: str | None) -> list[tuple[bytes, bytes]]:
    """What a preflight of an allowed origin carries besides `cors_headers`."""
    headers = [(b"access-control-allow-methods", ALLOWED_METHODS), (b"access-control-max-age", PREFLIGHT_MAX_AGE)]
    if requested_headers and _HEADER_LIST.fullmatch(requested_headers.strip()):
        headers.append((b"access-control-allow-headers", requested_headers.strip().encode("latin-1")))
    return headers


def token_matches(authorization: str | None, token: bytes) -> bool:
    """Statement 4."""
    scheme, _, given = (authorization or "").partition(" ")
    # compare_digest on equal-typed bytes: the time taken says nothing about the token
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode("latin-1"), token)


def origin_set(origins: Iterable[str]) -> frozenset[str]:
    return frozenset(normal_origin(origin) for origin in origins)
