"""Writing to a file descriptor, for the stdio transport and the memory file's lock alike."""

from __future__ import annotations

import os


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """All of `data`, however few bytes each write takes (a pipe or a file may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
