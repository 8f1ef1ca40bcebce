"""A test identity provider made in the test: its own keys (generated here with cryptography), its metadata
and JWKS served on loopback by a small real HTTP server thread, and access tokens minted per case."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

RESOURCE_PATH = "/mcp"


class SigningKey:
    def __init__(self, algorithm: str, kid: str | None) -> None:
        self.algorithm = algorithm
        self.kid = kid
        self.private: Any = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if algorithm == "RS256"
                             else ec.generate_private_key(ec.SECP256R1()))

    def jwk(self) -> dict[str, Any]:
        tool = RSAAlgorithm if self.algorithm == "RS256" else ECAlgorithm
        public: dict[str, Any] = json.loads(tool.to_jwk(self.private.public_key()))
        public.update({"use": "sig", "alg": self.algorithm})
        if self.kid is not None:
            public["kid"] = self.kid
        return public


class TestIdP:
    """An authorization server as far as a resource server sees one: metadata, keys, and the tokens it signs."""

    __test__ = False

    def __init__(self, *, oauth_metadata: bool = True, openid_metadata: bool = True) -> None:
        self.rsa = SigningKey("RS256", "rsa-1")
        self.ec = SigningKey("ES256", "ec-1")
        self.published = [self.rsa, self.ec]
        self.oauth_metadata = oauth_metadata
        self.openid_metadata = openid_metadata
        self.jwks_fetches = 0
        self.requests: list[str] = []
        self._lock = threading.Lock()
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with idp._lock:
                    idp.requests.append(self.path)
                body = idp.document(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}/realms/test"
        self.jwks_url = f"{self.issuer}/protocol/keys"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.running = True

    def document(self, path: str) -> dict[str, Any] | None:
        prefix = "/realms/test"
        metadata = {"issuer": self.issuer, "jwks_uri": self.jwks_url, "token_endpoint": f"{self.issuer}/token",
                    "authorization_endpoint": f"{self.issuer}/auth"}
        if path == prefix + "/protocol/keys":
            with self._lock:
                self.jwks_fetches += 1
                published = list(self.published)
            return {"keys": [key.jwk() for key in published]}
        if path == prefix + "/.well-known/oauth-authorization-server" and self.oauth_metadata:
            return metadata
        if path == prefix + "/.well-known/openid-configuration" and self.openid_metadata:
            return metadata
        return None

    def publish(self, *keys: SigningKey) -> None:
        with self._lock:
            self.published = list(keys)

    def stop(self) -> None:
        if self.running:
            self.server.shutdown()
            self.server.server_close()
            self.running = False

    def mint(self, resource: str, *, key: SigningKey | None = None, headers: dict[str, Any] | None = None,
             **claims: Any) -> str:
        """A token of this issuer for `resource`, signed by `key` (default the RSA key); `claims` override the
        defaults (None removes one)."""
        key = key or self.rsa
        now = int(time.time())
        body: dict[str, Any] = {"iss": self.issuer, "aud": resource, "sub": "alice", "client_id": "test-client",
                                "scope": "memory:read memory:write", "iat": now, "exp": now + 300,
                                "jti": uuid.uuid4().hex}
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}
        header: dict[str, Any] = {"typ": "at+jwt"}
        if key.kid is not None:
            header["kid"] = key.kid
        header.update(headers or {})
        return jwt.encode(body, key.private, algorithm=key.algorithm, headers=header)


@pytest.fixture
def idp() -> Iterator[TestIdP]:
    provider = TestIdP()
    yield provider
    provider.stop()
