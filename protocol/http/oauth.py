"""The endpoint as an OAuth 2.1 resource server (MCP authorization): metadata, bearer tokens, scopes.

1. Metadata (RFC 9728): `GET /.well-known/oauth-protected-resource{resource path}` and
   `GET /.well-known/oauth-protected-resource` answer without a token, naming the resource, its
   one authorization server (the issuer), the scopes and `bearer_methods_supported: ["header"]`.
2. Tokens are JWT access tokens (RFC 9068): `typ` absent, `JWT` or `at+jwt`, signed with RS256 or
   ES256 by a key of the issuer's JWKS. Every other algorithm (`none`, HMAC, RSA-PSS, ...) is
   refused before any key is looked at, so a public key can never be used as an HMAC secret.
3. Claims: `iss` equal to the issuer, `aud` naming this resource (RFC 8707: a token for another
   resource, even of the same server, is refused), `exp` and `sub` required (RFC 9068: `sub`
   names who the token acts for, and the memory records it as the author of what it writes);
   `exp`, `nbf` and `iat` are judged with `LEEWAY_SECONDS` of clock skew.
4. A refused token gets 401 with `WWW-Authenticate: Bearer error="invalid_token"`, a description
   of the reason, the metadata URL and the scope hint; a request with no token gets the same
   challenge without an error (RFC 6750 section 3.1). A token too narrow for its call gets 403
   with `error="insufficient_scope"` naming the scope needed (see `Grant.covers`).
5. Keys are fetched once and kept. A `kid` not among them makes one refetch, at most once per
   `REFETCH_SECONDS` whatever the number of requests; keys older than `MAX_KEY_AGE_SECONDS` are
   refetched on the next request. A fetch that fails keeps the keys already known: while the
   authorization server is down, tokens signed by them keep working.
6. Without `jwks_url`, the keys' address is found in the issuer's metadata: first
   `<issuer>/.well-known/oauth-authorization-server` (RFC 8414), then
   `<issuer>/.well-known/openid-configuration`, whose `issuer` must be the issuer itself.
7. No token, nor any part of one, is written to a log, an error or an answer.
8. A token that passed is remembered by its SHA-256 (at most `REMEMBERED_TOKENS`), so that a
   client sending it again costs a lookup, not a signature check: it is served while its `exp`
   and `nbf` allow (with the leeway), and checked again in full once the keys have been fetched
   again, so a key the issuer withdrew stops its tokens then.

`OAuthGuard` is the ASGI middleware that does 1 and authenticates every other request: it leaves
its outcome (a `Grant` or a `Refusal`) in the ASGI scope under `AUTHORIZATION`, and the endpoint
refuses at its token step (after the Host and Origin checks, with CORS headers). The endpoint
also asks, for each JSON-RPC request, which scope it needs: the server declares that (a
`ScopeRule`), this layer knows no tool by name.

PyJWT with `cryptography` (the `oauth` extra) is imported only when OAuth is configured.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from .security import LOOPBACK_HOSTS

log = logging.getLogger("protocol.http.oauth")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Needed = str | tuple[str, ...] | None
"""The scope a request needs: one, or any of several (the first is the one a challenge names), or None."""
ScopeRule = Callable[[str, dict[str, Any]], Needed]
"""(JSON-RPC method, params) -> the scope the request needs, or None when any valid token will do."""

AUTHORIZATION = "mcp.authorization"
"""The key of the ASGI scope where `OAuthGuard` leaves a request's `Grant` or `Refusal`."""
METADATA_PREFIX = "/.well-known/oauth-protected-resource"
ALGORITHMS = ("RS256", "ES256")
TOKEN_TYPES = frozenset({"jwt", "at+jwt", "application/at+jwt"})
LEEWAY_SECONDS = 60
REFETCH_SECONDS = 10.0
MAX_KEY_AGE_SECONDS = 3600.0
FETCH_TIMEOUT_SECONDS = 5.0
REMEMBERED_TOKENS = 4096
MAX_DOCUMENT_BYTES = 1 << 20
_COMPACT_JWS = re.compile(r"([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
"""A JWS in compact form: three base64url segments (RFC 7515 section 7.1), none empty for a signed token."""
"""The most a JWKS or metadata document may weigh: a larger one is a fault, not something to keep."""


class OAuthConfigError(ValueError):
    """A setting that cannot make a resource server (the message says which and why)."""


class KeysUnavailable(Exception):
    """No key of the issuer could be had, and none was known before."""


def is_loopback_url(url: str) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def check_url(name: str, url: str) -> str:
    """`url` if it is an absolute https URL (http on a loopback host) with no fragment, else OAuthConfigError."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.fragment:
        raise OAuthConfigError(f"{name} must be an absolute http(s) URL without a fragment, got {url!r}")
    if parts.scheme == "http" and not is_loopback_url(url):
        raise OAuthConfigError(f"{name} must use https (plain http only on a loopback host such as 127.0.0.1), "
                               f"got {url!r}")
    return url


def _fetch_json(url: str) -> dict[str, Any]:
    """The JSON object at `url` (in a worker thread: this blocks)."""
    request = urllib.request.Request(url, headers={"accept": "application/json"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as answer:
        data = answer.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
    document = json.loads(data)
    if not isinstance(document, dict):
        raise ValueError(f"{url} did not answer a JSON object")
    return document


@dataclass
class KeySet:
    """The issuer's signing keys, fetched and kept as statements 5 and 6 say."""

    issuer: str
    jwks_url: str | None = None
    refetch_seconds: float = REFETCH_SECONDS
    max_age_seconds: float = MAX_KEY_AGE_SECONDS
    fetch: Callable[[str], dict[str, Any]] = _fetch_json
    clock: Callable[[], float] = time.monotonic
    keys: dict[str | None, list[Any]] = field(default_factory=dict)  # kid -> PyJWK (None: keys without a kid)
    fetched_at: float | None = None  # when the keys were last had
    tried_at: float | None = None  # when a fetch was last tried, successful or not
    generation: int = 0  # how many times keys were had: a token remembered under an older one is checked again
    _lock: anyio.Lock | None = None

    def discover(self) -> str:
        """The JWKS address from the issuer's metadata (statement 6; blocking)."""
        base = self.issuer.rstrip("/")
        failures = []
        for well_known in ("oauth-authorization-server", "openid-configuration"):
            url = f"{base}/.well-known/{well_known}"
            try:
                document = self.fetch(url)
            except (OSError, ValueError) as error:
                failures.append(f"{url}: {error}")
                continue
            if document.get("issuer") != self.issuer:
                failures.append(f"{url} names the issuer {document.get('issuer')!r}")
                continue
            jwks_uri = document.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                failures.append(f"{url} has no jwks_uri")
                continue
            return check_url("the issuer's jwks_uri", jwks_uri)
        raise KeysUnavailable("no usable metadata of the issuer: " + "; ".join(failures))

    def load(self) -> None:
        """Fetch the keys now (blocking); on failure the keys known stay."""
        from jwt import PyJWK, PyJWKError

        self.tried_at = self.clock()
        try:
            if self.jwks_url is None:
                self.jwks_url = self.discover()
            document = self.fetch(self.jwks_url)
        except (OSError, ValueError, OAuthConfigError) as error:
            raise KeysUnavailable(f"the issuer's keys could not be fetched: {error}") from None
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise KeysUnavailable(f"{self.jwks_url} holds no \"keys\" list")
        keys: dict[str | None, list[Any]] = {}
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = PyJWK(entry)
            except (PyJWKError, ValueError, TypeError, KeyError):
                continue  # a kind of key this server does not verify with: not one of its tokens' keys
            if key.algorithm_name in ALGORITHMS:
                kid = entry.get("kid")
                keys.setdefault(kid if isinstance(kid, str) else None, []).append(key)
        self.keys = keys
        self.fetched_at = self.clock()
        self.generation += 1

    async def candidates(self, kid: str | None, algorithm: str) -> list[Any]:
        """The keys that may have signed a token of `kid` and `algorithm`, refetched as statement 5 says."""
        now = self.clock()
        stale = self.fetched_at is None or now - self.fetched_at >= self.max_age_seconds
        found = self._matching(kid, algorithm)
        if (stale or not found) and (self.tried_at is None or now - self.tried_at >= self.refetch_seconds):
            if self._lock is None:
                self._lock = anyio.Lock()
            async with self._lock:
                # One fetch at a time: the requests that waited for it use what it brought.
                if self.tried_at is None or self.clock() - self.tried_at >= self.refetch_seconds:
                    try:
                        await anyio.to_thread.run_sync(self.load)
                    except KeysUnavailable as error:
                        log.warning("%s; %s", error, "keeping the keys known" if self.fetched_at else "no key known")
            found = self._matching(kid, algorithm)
        if not found and self.fetched_at is None:
            raise KeysUnavailable("the issuer's keys could not be fetched")
        return found

    def _matching(self, kid: str | None, algorithm: str) -> list[Any]:
        pool = self.keys.get(kid, []) if kid is not None else [k for keys in self.keys.values() for k in keys]
        return [key for key in pool if key.algorithm_name == algorithm]


@dataclass(frozen=True)
class Grant:
    """What a valid token allows: who it was issued to, and its scopes."""

    subject: str | None
    scopes: frozenset[str]
    claims: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def covers(self, needed: Needed) -> bool:
        if needed is None:
            return True
        return needed in self.scopes if isinstance(needed, str) else any(scope in self.scopes for scope in needed)


@dataclass(frozen=True)
class Refusal:
    """Why a request is not served: its HTTP status, the challenge, and words for the JSON-RPC error."""

    status: int
    message: str
    headers: list[tuple[bytes, bytes]]


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _scopes_of(claims: dict[str, Any]) -> frozenset[str]:
    """The scopes of a token: `scope` (RFC 9068, space-separated) or `scp` (a list, or a string)."""
    found: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found.update(value.split())
        elif isinstance(value, list):
            found.update(item for item in value if isinstance(item, str))
    return frozenset(found)


class ProtectedResource:
    """One resource (an MCP endpoint) guarded by tokens of one issuer."""

    def __init__(self, *, issuer: str, resource: str, scopes_supported: Iterable[str], keys: KeySet | None = None,
                 jwks_url: str | None = None, leeway_seconds: float = LEEWAY_SECONDS) -> None:
        self.issuer = check_url("the issuer", issuer)
        self.resource = check_url("the resource", resource)
        if jwks_url is not None:
            check_url("the JWKS URL", jwks_url)
        self.scopes_supported = list(dict.fromkeys(scopes_supported))
        self.keys = keys or KeySet(issuer, jwks_url)
        self.leeway_seconds = leeway_seconds
        self.clock: Callable[[], float] = time.time  # what exp and nbf are judged by
        # statement 8: SHA-256 of a token -> (its grant, exp, nbf, the key generation it was checked under)
        self._passed: dict[bytes, tuple[Grant, Any, Any, int]] = {}
        parts = urllib.parse.urlsplit(resource)
        self.resource_path = parts.path.rstrip("/")
        self.metadata_url = urllib.parse.urlunsplit(
            (parts.scheme, parts.netloc, METADATA_PREFIX + self.resource_path, "", ""))
        self.metadata = json.dumps({
            "resource": self.resource, "authorization_servers": [self.issuer],
            "scopes_supported": self.scopes_supported, "bearer_methods_supported": ["header"],
        }).encode()

    # -- challenges (statement 4) -----------------------------------------------------------------------

    def challenge(self, error: str | None = None, description: str | None = None,
                  scope: str | None = None) -> list[tuple[bytes, bytes]]:
        parts = []
        if error is not None:
            parts.append(f"error={_quoted(error)}")
        if description is not None:
            parts.append(f"error_description={_quoted(description)}")
        parts.append(f"scope={_quoted(scope or ' '.join(self.scopes_supported))}")
        parts.append(f"resource_metadata={_quoted(self.metadata_url)}")
        return [(b"www-authenticate", ("Bearer " + ", ".join(parts)).encode("latin-1", "replace"))]

    def unauthorized(self, description: str | None) -> Refusal:
        if description is None:
            return Refusal(401, "Unauthorized: a bearer token is required", self.challenge())
        return Refusal(401, f"Unauthorized: {description}", self.challenge("invalid_token", description))

    def insufficient(self, needed: Needed) -> Refusal:
        if needed is None or not isinstance(needed, str):
            needed = (needed or ("",))[0]
        return Refusal(403, f"Forbidden: this call needs the scope {needed}, which the token does not grant",
                       self.challenge("insufficient_scope", f"the scope {needed} is required", needed))

    # -- tokens (statements 2, 3 and 8) ---------------------------------------------------------------

    def _untimely(self, expires: Any, begins: Any) -> str | None:
        """Why `exp` and `nbf` (None: absent) do not allow the token now, or None when they do."""
        number = (int, float)
        if not isinstance(expires, number) or isinstance(expires, bool):
            return "the token's exp is not a time"
        if begins is not None and (not isinstance(begins, number) or isinstance(begins, bool)):
            return "the token's nbf is not a time"
        now = self.clock()
        if now >= expires + self.leeway_seconds:
            return "the token has expired"
        if begins is not None and now < begins - self.leeway_seconds:
            return "the token is not valid yet"
        return None

    async def authenticate(self, authorization: str | None) -> Grant | Refusal:
        if authorization is None:
            return self.unauthorized(None)
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return self.unauthorized("send the access token as Authorization: Bearer <token>")
        digest = hashlib.sha256(token.encode("latin-1", "replace")).digest()
        remembered = self._passed.get(digest)
        if remembered is not None:
            grant, expires, begins, generation = remembered
            if generation == self.keys.generation:
                late = self._untimely(expires, begins)
                return grant if late is None else self.unauthorized(late)
            del self._passed[digest]
        try:
            outcome = await self._validate(token)
        except KeysUnavailable:
            return Refusal(503, "Service Unavailable: the authorization server's keys cannot be fetched; retry later",
                           [(b"retry-after", b"10")])
        if isinstance(outcome, Grant):
            claims = outcome.claims
            if len(self._passed) >= REMEMBERED_TOKENS:
                del self._passed[next(iter(self._passed))]  # the one remembered longest
            self._passed[digest] = (outcome, claims["exp"], claims.get("nbf"), self.keys.generation)
        return outcome

    async def _validate(self, token: str) -> Grant | Refusal:
        import jwt

        header = _header_of(token)
        if header is None:
            return self.unauthorized("the token is not a well-formed JWT")
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            return self.unauthorized(f"tokens must be signed with {' or '.join(ALGORITHMS)}")
        kind = header.get("typ")
        if kind is not None and (not isinstance(kind, str) or kind.lower() not in TOKEN_TYPES):
            return self.unauthorized("the token is not an access token (typ must be at+jwt or JWT)")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            return self.unauthorized("the token's kid is not a string")
        keys = await self.keys.candidates(kid, algorithm)
        if not keys:
            return self.unauthorized("the token is signed by a key the authorization server does not publish")
        claims: dict[str, Any] | None = None
        for key in keys:
            try:
                claims = jwt.decode(token, key.key, algorithms=[algorithm], audience=self.resource,
                                    issuer=self.issuer, leeway=self.leeway_seconds,
                                    options={"require": ["exp", "iss", "aud", "sub"],
                                             # judged below, on this resource's clock, as a remembered token is
                                             "verify_exp": False, "verify_nbf": False})
                break
            except jwt.InvalidSignatureError:
                continue  # another key without a kid may have signed it
            except jwt.ExpiredSignatureError:
                return self.unauthorized("the token has expired")
            except jwt.ImmatureSignatureError:
                return self.unauthorized("the token is not valid yet")
            except jwt.InvalidAudienceError:
                return self.unauthorized(f"the token's audience is not this resource ({self.resource})")
            except jwt.InvalidIssuerError:
                return self.unauthorized("the token was issued by another authorization server")
            except jwt.MissingRequiredClaimError as error:
                return self.unauthorized(f"the token has no {error.claim} claim")
            except jwt.InvalidTokenError:
                return self.unauthorized("the token is malformed")
        if claims is None:
            return self.unauthorized("the token's signature does not verify")
        if (late := self._untimely(claims.get("exp"), claims.get("nbf"))) is not None:
            return self.unauthorized(late)
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            return self.unauthorized("the token's sub is not a name")
        return Grant(subject, _scopes_of(claims), claims)


def _header_of(token: str) -> dict[str, Any] | None:
    """The JOSE header of a compact JWS, or None when the token is not one. The key is chosen by it
    before PyJWT checks the whole token; reading it here rather than by `jwt.get_unverified_header`
    spares a second pass of PyJWT's character-by-character check over every token first seen."""
    shape = _COMPACT_JWS.fullmatch(token)
    if shape is None:
        return None
    segment = shape.group(1)
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError):
        return None
    return header if isinstance(header, dict) else None


class OAuthGuard:
    """ASGI middleware: answers the metadata (statement 1), authenticates the rest into the scope."""

    def __init__(self, app: ASGIApp, resource: ProtectedResource, *, path: str) -> None:
        self.app = app
        self.resource = resource
        self.metadata_paths = frozenset({METADATA_PREFIX, METADATA_PREFIX + resource.resource_path,
                                         METADATA_PREFIX + path})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        path = path.rstrip("/") or "/"
        if path in self.metadata_paths:
            await self._metadata(scope, send)
            return
        if scope["method"] != "OPTIONS":  # a CORS preflight never carries a token
            authorization = None
            for name, value in scope.get("headers", ()):
                if name.lower() == b"authorization":
                    authorization = value.decode("latin-1")
            scope[AUTHORIZATION] = await self.resource.authenticate(authorization)
        await self.app(scope, receive, send)

    async def _metadata(self, scope: Scope, send: Send) -> None:
        # Public by definition, so any page may read it (a browser client discovers the issuer here).
        cors = [(b"access-control-allow-origin", b"*")]
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            await send({"type": "http.response.start", "status": 405,
                        "headers": [(b"allow", b"GET, HEAD, OPTIONS"), (b"content-length", b"0"), *cors]})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["method"] == "OPTIONS":
            await send({"type": "http.response.start", "status": 204, "headers": [
                *cors, (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"), (b"allow", b"GET, HEAD, OPTIONS")]})
            await send({"type": "http.response.body", "body": b""})
            return
        body = self.resource.metadata
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"max-age=300"), *cors]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
