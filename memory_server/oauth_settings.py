"""OAuth for `mcp-server-memory --http`: the settings that turn it on, and which call needs which scope.

1. `MCP_MEMORY_OAUTH_ISSUER` turns OAuth on: the endpoint is then a resource server of that
   issuer (see protocol/http/oauth.py), and the shared token is not used.
2. `MCP_MEMORY_OAUTH_JWKS_URL` is where the issuer's keys are; unset, the issuer's metadata says.
3. `MCP_MEMORY_PUBLIC_URL` is the base URL as clients reach the server; the resource (the
   audience tokens must name) is `<PUBLIC_URL>/mcp`. OAuth needs it.
4. OAuth and `MCP_MEMORY_HTTP_TOKEN` together are a start error naming both.
5. Every URL is https, but for a loopback host, which may use plain http.
6. `memory:read` covers the read tools, resources/read, subscriptions and listens;
   `memory:write` the six write tools. Any valid token may initialize, ping and list; any other
   request needs `memory:read`, so that a method added later is refused until it is classified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .tools import TOOLS

if TYPE_CHECKING:
    from protocol.http.oauth import ProtectedResource

ISSUER_VARIABLE = "MCP_MEMORY_OAUTH_ISSUER"
JWKS_URL_VARIABLE = "MCP_MEMORY_OAUTH_JWKS_URL"
PUBLIC_URL_VARIABLE = "MCP_MEMORY_PUBLIC_URL"
TOKEN_VARIABLE = "MCP_MEMORY_HTTP_TOKEN"  # (settings.HTTP_TOKEN_VARIABLE: settings imports this module)
READ_SCOPE = "memory:read"
WRITE_SCOPE = "memory:write"
SCOPES = (READ_SCOPE, WRITE_SCOPE)
WRITE_TOOLS = frozenset(row.name for row in TOOLS if not row.annotations["readOnlyHint"])
OPEN_METHODS = frozenset({"initialize", "ping", "server/discover", "tools/list", "resources/list",
                          "resources/templates/list", "prompts/list"})
"""What any valid token may ask (statement 6): what the server is and offers, not what it holds."""


def required_scope(method: str, params: dict[str, Any]) -> str | None:
    """Statement 6, as the HTTP endpoint asks it of each request."""
    if method == "tools/call":
        return WRITE_SCOPE if params.get("name") in WRITE_TOOLS else READ_SCOPE
    return None if method in OPEN_METHODS else READ_SCOPE


def oauth_from(environment: Mapping[str, str], path: str) -> ProtectedResource | None:
    """The resource server statements 1-5 make of `environment` for the endpoint at `path`, or None
    when OAuth is off; a ValueError says which setting is wrong."""
    issuer = environment.get(ISSUER_VARIABLE, "").strip()
    if not issuer:
        for name in (JWKS_URL_VARIABLE,):
            if environment.get(name, "").strip():
                raise ValueError(f"{name} is set but {ISSUER_VARIABLE} is not: set the issuer to turn OAuth on")
        return None
    if environment.get(TOKEN_VARIABLE):
        raise ValueError(f"{ISSUER_VARIABLE} (OAuth) and {TOKEN_VARIABLE} (a shared token) are both set: "
                         "unset one of them")
    public_url = environment.get(PUBLIC_URL_VARIABLE, "").strip().rstrip("/")
    if not public_url:
        raise ValueError(f"{ISSUER_VARIABLE} needs {PUBLIC_URL_VARIABLE}, the base URL as clients reach this server "
                         "(e.g. https://memory.example.com): tokens must name <that URL>/mcp as their audience")
    jwks_url = environment.get(JWKS_URL_VARIABLE, "").strip() or None
    # Only now: importing it imports the whole HTTP transport, which a stdio server never needs
    # (its start checks these settings, and most have OAuth off).
    from protocol.http.oauth import OAuthConfigError, ProtectedResource, check_url

    try:
        check_url(ISSUER_VARIABLE, issuer)
        check_url(PUBLIC_URL_VARIABLE, public_url)
        if "?" in public_url:
            raise OAuthConfigError(f"{PUBLIC_URL_VARIABLE} must not have a query, got {public_url!r}")
        if jwks_url is not None:
            check_url(JWKS_URL_VARIABLE, jwks_url)
        return ProtectedResource(issuer=issuer, resource=public_url + path, scopes_supported=SCOPES,
                                 jwks_url=jwks_url)
    except OAuthConfigError as error:
        raise ValueError(str(error)) from None


def check_oauth_installed() -> None:
    """A SystemExit naming the extra when PyJWT or cryptography is missing."""
    try:
        import cryptography  # noqa: F401
        import jwt  # noqa: F401
    except ImportError:
        raise SystemExit("mcp-server-memory: OAuth needs the oauth extra (PyJWT and cryptography): "
                         "pip install 'kg-memory-mcp[http,oauth]'") from None
