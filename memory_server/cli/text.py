"""Words for people in the command line's reports."""

from __future__ import annotations


def counted(count: int, singular: str, many: str) -> str:
    """"1 entity", "1,234 entities"."""
    return f"{count:,} {singular if count == 1 else many}"
