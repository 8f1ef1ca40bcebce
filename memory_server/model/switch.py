"""An on/off setting, and the error of a setting that cannot be used: the leaf that the model's own
settings (MEMORY_DATES) and the server's check of every setting (memory_server/settings.py) share,
so that the model imports nothing above it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

ON: Final = frozenset({"on", "1", "true", "yes"})
OFF: Final = frozenset({"off", "0", "false", "no"})
SWITCH_ACCEPTS: Final = "on or off (also 1 or 0, true or false, yes or no; unset or empty: on)"


class SettingError(ValueError):
    """A setting that cannot be used; the message names it, says what it accepts and what it got."""


def switch(environ: Mapping[str, str], variable: str) -> bool:
    """An on/off setting, on when unset or empty; SettingError for anything else than SWITCH_ACCEPTS."""
    raw = environ.get(variable, "")
    text = raw.strip().lower()
    if not text or text in ON:
        return True
    if text in OFF:
        return False
    raise SettingError(f"{variable} must be {SWITCH_ACCEPTS}; got {raw!r}")
