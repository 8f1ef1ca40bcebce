"""Every setting the server reads from its environment, checked in one place before anything starts.

1. `check(environ)` reads every MEMORY_* and MCP_MEMORY_* setting (SETTINGS lists them) and gives
   them back parsed, or raises SettingError for the first one that is not usable.
2. A SettingError's message is one line: the variable, what it accepts, and what it got.
3. `check_or_exit` is how the server and the commands start: a bad setting ends the process with
   that line on stderr and exit status 2, before the memory is opened and before any protocol
   message, so a client shows the line and nothing half-started is left behind.
4. Each rule is written once: where a module already parses its own setting (the answer budget,
   the lock timings, where the memory lives), `check` calls that parser; the rules that had no
   parser of their own (the on/off switches, the HTTP settings, MEMORY_SEMANTIC_MAX) live here
   and the modules that use them call these.

This module imports nothing beyond the standard library at import time: the parsers it calls are
imported by `check`, when the server is about to import them anyway.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any, Final, NamedTuple, NoReturn

from .model.switch import SettingError, switch

PROGRAM: Final = "mcp-server-memory"
EXIT_STATUS: Final = 2
"""The exit status of a bad setting (as argparse uses for a bad command line)."""


DATES_VARIABLE: Final = "MEMORY_DATES"
SEMANTIC_VARIABLE: Final = "MEMORY_SEMANTIC"
SEMANTIC_MAX_VARIABLE: Final = "MEMORY_SEMANTIC_MAX"
HTTP_TOKEN_VARIABLE: Final = "MCP_MEMORY_HTTP_TOKEN"
HTTP_SESSION_IDLE_VARIABLE: Final = "MCP_MEMORY_HTTP_SESSION_IDLE"
HTTP_LIMITS_VARIABLE: Final = "MCP_MEMORY_HTTP_LIMITS"

HTTP_LIMIT_KINDS: Final[dict[str, type]] = {
    # name in MCP_MEMORY_HTTP_LIMITS: int for a count, float for seconds (defaults: memory_server/http.py)
    "connections": int, "header_seconds": float, "body_idle_seconds": float, "bodies_bytes": int,
    "requests": int, "writes": int, "streams": int,
}

SETTINGS: Final = (
    # What check() reads; each is described in docs (README, docs/*.md) and in --help.
    "MEMORY_FILE_PATH", "MEMORY_DATABASE_URL", "MEMORY_NAME", DATES_VARIABLE, SEMANTIC_VARIABLE,
    "MEMORY_SEMANTIC_MODEL", SEMANTIC_MAX_VARIABLE, "MEMORY_ANSWER_BUDGET", "MEMORY_SEARCH_CHARACTERS",
    "MEMORY_LOCK_TIMINGS", "MEMORY_HEMISPHERE", HTTP_TOKEN_VARIABLE, HTTP_SESSION_IDLE_VARIABLE, HTTP_LIMITS_VARIABLE,
    # OAuth (oauth_settings.py parses them, with the shared token they exclude)
    "MCP_MEMORY_OAUTH_ISSUER", "MCP_MEMORY_OAUTH_JWKS_URL", "MCP_MEMORY_PUBLIC_URL",
)



class Settings(NamedTuple):
    dates: bool
    semantic: bool
    semantic_max: int | None
    """None: the engine's default."""
    answer_budget: int
    search_characters: int
    http_session_idle: float | None
    """None: the default (protocol.http.SESSION_IDLE_SECONDS)."""
    http_limits: dict[str, Any]
    """Only the limits MCP_MEMORY_HTTP_LIMITS changes."""


def semantic_max_from(environ: Mapping[str, str]) -> int | None:
    """MEMORY_SEMANTIC_MAX: how many vectors the semantic engine keeps, a whole number above 0
    (None when unset or empty: the engine's default)."""
    raw = environ.get(SEMANTIC_MAX_VARIABLE, "")
    text = raw.strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise SettingError(f"{SEMANTIC_MAX_VARIABLE} must be a whole number of vectors, at least 1 "
                           f"(unset or empty for the default); got {raw!r}")
    return int(text)


def session_idle_from(environ: Mapping[str, str]) -> float | None:
    """Seconds a legacy HTTP session may stay idle, above 0 (None when unset or empty: the default)."""
    raw = environ.get(HTTP_SESSION_IDLE_VARIABLE, "")
    text = raw.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise SettingError(f"{HTTP_SESSION_IDLE_VARIABLE} must be a number of seconds above 0 "
                           f"(unset or empty for an hour); got {raw!r}")
    return seconds


def http_limits_from(environ: Mapping[str, str]) -> dict[str, Any]:
    """The HTTP limits MCP_MEMORY_HTTP_LIMITS changes: `name=value,...` with the names of HTTP_LIMIT_KINDS,
    each value above 0 (an integer for counts). Only the named ones are in the answer."""
    limits: dict[str, Any] = {}
    text = environ.get(HTTP_LIMITS_VARIABLE, "").strip()
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, value = (piece.strip() for piece in item.partition("="))
        if name not in HTTP_LIMIT_KINDS or not equals:
            raise SettingError(f"{HTTP_LIMITS_VARIABLE} takes name=value pairs with the names "
                               f"{', '.join(HTTP_LIMIT_KINDS)}; got {item!r}")
        kind = HTTP_LIMIT_KINDS[name]
        try:
            number = kind(value)
        except ValueError:
            number = math.nan
        if not (number > 0 and math.isfinite(number)):
            raise SettingError(f"{HTTP_LIMITS_VARIABLE}: {name} must be a{'n integer' if kind is int else ' number'} "
                               f"above 0; got {value!r}")
        limits[name] = number
    return limits


def check(environ: Mapping[str, str]) -> Settings:
    """Every setting, parsed; SettingError (one line) for the first that is not usable."""
    from .oauth_settings import oauth_from
    from .retrieval.answer import characters_from
    from .retrieval.paging.budget import budget_from
    from .retrieval.when import hemisphere_from
    from .storage.choice import StoreChoiceError, database_from
    from .storage.lock import LockTimings

    try:
        database_from(environ)  # MEMORY_FILE_PATH, MEMORY_DATABASE_URL and MEMORY_NAME together
    except StoreChoiceError as error:
        raise SettingError(str(error)) from None
    dates = switch(environ, DATES_VARIABLE)
    semantic = switch(environ, SEMANTIC_VARIABLE)
    semantic_max = semantic_max_from(environ)
    try:
        answer_budget = budget_from(environ)
        search_characters = characters_from(environ)
        hemisphere_from(environ)  # read again by each search (retrieval/when.py): the seasons it names
        LockTimings.from_environment(environ)
        oauth_from(environ, "/mcp")
    except ValueError as error:
        raise SettingError(str(error)) from None
    return Settings(dates, semantic, semantic_max, answer_budget, search_characters,
                    session_idle_from(environ), http_limits_from(environ))


def refuse(message: str) -> NoReturn:
    """End the process as a bad setting does (see 3.): the line on stderr, exit status 2."""
    print(f"{PROGRAM}: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_STATUS)


def check_or_exit(environ: Mapping[str, str]) -> Settings:
    try:
        return check(environ)
    except SettingError as error:
        refuse(str(error))
