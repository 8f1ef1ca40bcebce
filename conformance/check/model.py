"""What the check is made of: the era names, a requirement and its verdict, what the server claims,
the era's schema.json, the settings and the report."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal

from jsonschema import Draft202012Validator

# The protocol's names, each written once in conformance (re-exported for the check's modules).
from conformance.matcher import SUBSCRIPTION_ID as SUBSCRIPTION_ID
from conformance.probe import Line, Probe
from conformance.session import CLIENT_INFO as CLIENT_INFO
from conformance.session import PROTOCOL_VERSION as PROTOCOL_VERSION

LEGACY: Final = "legacy"
MODERN: Final = "modern"
LEGACY_VERSION: Final = "2025-11-25"
MODERN_VERSION: Final = "2026-07-28"
CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
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


