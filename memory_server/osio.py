"""Opening files so that what is on disk is what it seems: never waiting on a FIFO, never through a
link where none is expected, never anything but a regular file of ours; private from the first
byte. Below every layer that opens files (tests/test_layers.py): storage's files.py (the memory
file and its saves) and lock.py (the lock between processes) build on it, and so does retrieval's
vector file, which must not import storage. It imports nothing of the project."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

PRIVATE: Final = 0o600
PRIVATE_DIRECTORY: Final = 0o700

_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)


class NotARegularFile(OSError):
    """The memory path names something that is not a regular file; nothing was read or written."""


_KINDS: Final = (
    (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"),
)
MEMORY_ADVICE: Final = "point MEMORY_FILE_PATH at a regular file (or a symlink to one)"


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _subject(file: Path, advice: str) -> str:
    # The memory file's errors name it already; a side file's name is the news.
    return "it" if advice == MEMORY_ADVICE else str(file)


def _require_regular(file: Path, st: os.stat_result, advice: str = MEMORY_ADVICE) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    raise NotARegularFile(errno.EINVAL, f"{_subject(file, advice)} is {kind_of(st.st_mode)}, not a regular file; "
                                        f"nothing was read or written; {advice}", str(file))


def refuse_unless_regular(path: Path, advice: str = "remove it") -> None:
    """NotARegularFile unless ``path`` is missing or a regular file itself (not a link to one).

    For files opened by a library that cannot be given O_NONBLOCK (SQLite, for the cache): a FIFO
    there would block the open for ever. A name swapped after this check is the library's to
    meet; what it then reads is checked like any cache content."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _require_regular(path, st, advice)


def open_regular(path: Path, flags: int = os.O_RDONLY, *, follow: bool = False, private: bool = False,
                 advice: str = "remove it") -> int:
    """A descriptor of the regular file ``path``, opened without waiting: NotARegularFile for a FIFO,
    a device, a socket, a directory (and for a symbolic link unless ``follow``), before anything is
    read or written.

    The kind is checked before the open (opening a device can have effects) and again on the open
    descriptor, in case the name changed in between; O_NONBLOCK makes that open return at once even
    on a FIFO with no writer. ``private`` (files this server writes beside the memory): the file must
    have no second name (a planted hard link would make us write into someone else's file) and be
    this user's, and it is narrowed to 0600; a file it creates is 0600 from its first byte."""
    try:
        _require_regular(path, os.stat(path) if follow else os.lstat(path), advice)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    try:
        fd = os.open(path, flags | _CLOEXEC | _NONBLOCK | (0 if follow else _NOFOLLOW), PRIVATE)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENXIO):  # a link planted meanwhile; a FIFO opened for writing
            raise NotARegularFile(errno.EINVAL, f"{_subject(path, advice)} is not a regular file; nothing was read "
                                                f"or written; {advice}", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        _require_regular(path, st, advice)
        if private:
            # A second name means someone linked another file here: writing (or chmod) would change theirs.
            if st.st_nlink > 1:
                raise NotARegularFile(errno.EMLINK, f"{_subject(path, advice)} is a hard link to another file "
                                                    f"({st.st_nlink} names); refusing to write to it; {advice}",
                                      str(path))
            if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
                raise NotARegularFile(errno.EPERM, f"{_subject(path, advice)} belongs to another user (uid "
                                                   f"{st.st_uid}); refusing to write to it; {advice}", str(path))
            # The umask cannot widen a mode, but an existing file may have been widened by hand.
            # (Windows before Python 3.13 has no fchmod, and no POSIX modes to narrow.)
            if hasattr(os, "fchmod") and stat.S_IMODE(st.st_mode) != PRIVATE:
                os.fchmod(fd, PRIVATE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """All of `data`, however few bytes each write takes (a file may take part of it, as when a
    signal interrupts a large write)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 24):
        chunks.append(chunk)
    return b"".join(chunks)


def read_regular(path: Path, *, follow: bool = False, advice: str = "remove it") -> bytes:
    """The bytes of the regular file ``path`` (see open_regular); FileNotFoundError when missing."""
    fd = open_regular(path, follow=follow, advice=advice)
    try:
        return read_all(fd)
    finally:
        os.close(fd)
