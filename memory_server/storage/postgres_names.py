"""Memory names in a database (MEMORY_NAME): checked without the driver, so that a bad name is
reported even where the postgres extra is not installed."""

from __future__ import annotations

import re
from typing import Final

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


def without_password(url: str) -> str:
    """The URL for messages and logs: a password never leaves the process."""
    return re.sub(r"(//[^:/@]*):[^@/]*@", r"\1:***@", url)
