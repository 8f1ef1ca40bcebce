"""Memory names in a database (MEMORY_NAME): checked without the driver, so that a bad name is
reported even where the postgres extra is not installed."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

MEMORY_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
DEFAULT_MEMORY: Final = "default"


def memory_name_from(value: str | None) -> str:
    """MEMORY_NAME, checked: 1 to 64 letters, digits, - and _ (default: "default"); ValueError says
    what is accepted."""
    if not value:
        return DEFAULT_MEMORY
    if MEMORY_NAME.fullmatch(value) is None:
        raise ValueError(f"MEMORY_NAME={value!r} is not a memory name: use 1 to 64 letters, digits, '-' or '_'")
    return value


# Every form in which libpq takes a password (its documentation, "Connection Strings"): the URI's
# userinfo (up to the last "@": libpq stops at the first "@" or "/", a mistyped one may hold more),
# a URI query parameter (its name may be percent-encoded), and a key=value pair, its value quoted
# (backslash escapes inside) or bare (up to white space).
_USERINFO: Final = re.compile(r"(://[^:/@\s]*):\S*@")
_QUERY_PARAMETER: Final = re.compile(r"([?&])([^=&#\s]*)=([^&#\s]*)")
_KEY_VALUE: Final = re.compile(r"(?<![?&\w])(password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)+)",
                               re.IGNORECASE | re.DOTALL)
_QUOTED: Final = re.compile(r'"[^"]*"')
MASK: Final = "***"


def without_password(text: str) -> str:
    """`text` (a connection URL or key=value string, or a message that may quote one) with every
    password in it masked: a password never leaves the process, in a tool error, a log line or
    a message at start. The one function every place that shows a connection string goes through."""
    text = _USERINFO.sub(rf"\1:{MASK}@", text)
    text = _QUERY_PARAMETER.sub(_masked_parameter, text)
    return _KEY_VALUE.sub(rf"\1{MASK}", text)


def _masked_parameter(match: re.Match[str]) -> str:
    if unquote(match[2]).strip().lower() != "password":
        return match[0]
    return f"{match[1]}{match[2]}={MASK}"


def without_fragments(reason: str) -> str:
    """A message of libpq about a connection string it could not read, without the pieces of it
    the message quotes (a percent-encoded token, the word after a missing "="), which may be a
    password's."""
    return _QUOTED.sub('"..."', without_password(reason))
