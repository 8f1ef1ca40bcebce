"""The files next to the memory file, opened so that what is on disk is what it seems.

The memory file must be a regular file (or a symlink to one): a FIFO would block every open, and
renaming a new file over a device node would replace the device. Side files are opened without
following links, and a side file with a second name (a planted hard link) is refused, so that the
server never writes into a file someone else pointed it at. Saves go through a temporary file,
named after the writing process so that only debris of dead writers is ever removed.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final, NamedTuple, TypeAlias

from ..model.records import Rejected
from .lock import process_gone, write_all

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("memory_server")

PRIVATE: Final = 0o600
PRIVATE_DIRECTORY: Final = 0o700

_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_COMPARE_CHUNK: Final = 1 << 20

Signature: TypeAlias = tuple[int, int, int, int] | None
"""(st_mtime_ns, st_size, st_ino, st_dev) of the memory file; None while it does not exist."""


class NotARegularFile(OSError):
    """The memory path names something that is not a regular file; nothing was read or written."""


def signature_of(st: os.stat_result) -> Signature:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)


def stat_signature(file: Path) -> Signature:
    try:
        return signature_of(os.stat(file))
    except FileNotFoundError:
        return None


_KINDS: Final = (
    (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
)


def _require_regular(file: Path, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    raise NotARegularFile(errno.EINVAL, f"it is {kind}, not a regular file; point MEMORY_FILE_PATH at a regular "
                                        "file (or a symlink to one)", str(file))


def open_memory_file(file: Path) -> int | None:
    """A read-only descriptor of the memory file, or None when it does not exist.

    Refuses anything but a regular file before opening it (opening a device can have effects),
    and again after, in case the name changed in between: then the open itself must not block."""
    try:
        _require_regular(file, os.stat(file))
        fd = os.open(file, os.O_RDONLY | _CLOEXEC | _NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        _require_regular(file, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(file: Path) -> tuple[bytes, Signature]:
    """The file's bytes and the signature of exactly what was read; (b"", None) when missing."""
    fd = open_memory_file(file)
    if fd is None:
        return b"", None
    try:
        signature = signature_of(os.fstat(fd))
        chunks = []
        while chunk := os.read(fd, 1 << 24):
            chunks.append(chunk)
        return b"".join(chunks), signature
    finally:
        os.close(fd)


def holds(file: Path, content: Sequence[bytes]) -> bool:
    """True when the file's bytes are exactly the pieces of ``content`` one after the other (a
    missing file holds nothing).

    Read through one small buffer, so no copy of the file is made. (A mapping of the file would
    save a copy, but a file truncated meanwhile by another program would kill the process.) Each
    read fills the buffer whatever the pieces' sizes: a read lets go of the interpreter and has to
    take it back, which costs when another thread is busy."""
    fd = open_memory_file(file)
    if fd is None:
        return not any(content)
    try:
        if os.fstat(fd).st_size != sum(map(len, content)):
            return False
        view = memoryview(bytearray(_COMPARE_CHUNK))
        filled = start = 0  # bytes in the buffer, and where the part not compared yet starts
        for piece in content:
            offset = 0
            while offset < len(piece):
                if start == filled:
                    filled, start = os.readv(fd, [view]), 0
                    if filled == 0:
                        return False
                count = min(filled - start, len(piece) - offset)
                # startswith compares with memcmp; a memoryview comparison goes item by item.
                if not piece.startswith(view[start:start + count], offset):
                    return False
                offset += count
                start += count
        return start == filled and os.readv(fd, [view[:1]]) == 0
    finally:
        os.close(fd)


def _open_private(path: Path, flags: int) -> int:
    fd = os.open(path, flags | _CLOEXEC | _NOFOLLOW, PRIVATE)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file; remove it")
        # A second name means someone linked another file here: writing (or chmod) would change theirs.
        if st.st_nlink > 1:
            raise OSError(errno.EMLINK, f"{path} is a hard link to another file ({st.st_nlink} names); "
                                        "refusing to write to it, remove it")
        # The umask cannot widen a mode, but an existing file may have been widened by hand.
        # (Windows before Python 3.13 has no fchmod, and no POSIX modes to narrow.)
        if hasattr(os, "fchmod"):
            os.fchmod(fd, PRIVATE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _iov_max() -> int:
    """How many buffers one writev takes here (16 at least, as POSIX promises)."""
    try:
        return max(16, os.sysconf("SC_IOV_MAX"))
    except (AttributeError, ValueError, OSError):
        return 16


_IOV_MAX: Final = _iov_max()


def write_pieces(fd: int, pieces: Sequence[bytes]) -> None:
    """All the pieces, in one system call where the platform has writev. Each call lets go of the
    interpreter lock and must win it back, which in a busy server can take longer than the write."""
    if not hasattr(os, "writev"):
        for piece in pieces:
            write_all(fd, piece)
        return
    views = [memoryview(piece) for piece in pieces if piece]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first:first + _IOV_MAX])
        while first < len(views) and written >= len(views[first]):
            written -= len(views[first])
            first += 1
        if written:
            views[first] = views[first][written:]


# -- temporary files -------------------------------------------------------------------------------


def temporary_name(file: Path) -> Path:
    """``<file>.<32 hex>.<pid>.tmp``: the pid says whose it is, so a live writer's is never removed."""
    return file.with_name(f"{file.name}.{secrets.token_hex(16)}.{os.getpid()}.tmp")


def _debris_pattern(file: Path) -> re.Pattern[str]:
    name = re.escape(file.name)
    # Temporary files, without a pid when written by a version before the pid was part of the name;
    # and records of lock files (and of their break guard) not yet linked into place.
    return re.compile(rf"{name}\.[0-9a-f]{{32}}(?:\.(?P<pid>[0-9]{{1,10}}))?\.tmp"
                      rf"|{name}\.lock(?:\.break)?\.(?P<creator>[0-9]{{1,10}})\.[0-9a-f]{{32}}\.new")


class _Reported:
    """Debris that could not be removed, said once per name rather than at every write."""

    def __init__(self) -> None:
        self._names: set[Path] = set()
        self._lock = threading.Lock()

    def first_time(self, path: Path) -> bool:
        with self._lock:
            if path in self._names:
                return False
            self._names.add(path)
            return True


_unremovable: Final = _Reported()


def remove_debris(file: Path) -> None:
    """Removes the temporary files that writers killed mid-save left next to the memory file, and the
    lock records that writers killed while taking the lock left.

    Called only while holding the lock. A name whose writer is still alive is left alone (it may
    be a writer that took over the lock from this one); one that cannot be removed (a directory
    planted under that name, a file we may not delete) is reported once and skipped."""
    pattern = _debris_pattern(file)
    try:
        with os.scandir(file.parent) as entries:
            names = [(entry.name, match) for entry in entries if (match := pattern.fullmatch(entry.name))]
    except OSError:
        return
    for name, match in names:
        if match["creator"] is not None and not process_gone(int(match["creator"]), None):
            continue
        if match["pid"] is not None and int(match["pid"]) == os.getpid():
            if name in _saving:
                continue  # this process's own save, in another thread
        elif match["pid"] is not None and not process_gone(int(match["pid"]), None):
            continue
        stray = file.parent / name
        try:
            stray.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:
            if _unremovable.first_time(stray):
                log.warning("%s looks like a temporary file left by a killed writer but cannot be removed (%s); "
                            "skipping it. Remove it by hand.", stray, error.strerror)


_saving: Final[set[str]] = set()
"""Names of the temporary files this process is writing right now."""


class Staged(NamedTuple):
    path: Path
    signature: Signature
    content: list[bytes]
    """What was written, piece by piece, for the next write to compare the file with."""

    def put_in_place(self, file: Path) -> int | None:
        """Renames the staged file over ``file``, whose version becomes the spare of the next save
        (see staged). Returns a descriptor of the spare this replaced, when there was one: closing
        it frees the spare's blocks (about 1 ms per 6 MB), which can wait until the answer has gone."""
        spare = spare_path_for(file)
        keep = temporary_name(file)
        _saving.add(keep.name)
        try:
            # A second name for the memory file first, so that once the rename has replaced it,
            # the replaced version is there to become the spare. Where hard links are not to be
            # had, saves simply go through new temporary files.
            keep_made = _keeps_spare(file)
            if keep_made:
                try:
                    os.link(file, keep, follow_symlinks=False)
                except OSError:
                    keep_made = False
            try:
                os.replace(self.path, file)
            except BaseException:
                if keep_made:
                    with suppress(OSError):
                        os.unlink(keep)
                raise
            if not keep_made:
                return None
            replaced = _open_old_spare(spare)
            try:
                os.replace(keep, spare)
            except OSError:
                # The name is taken by what no rename may replace (a directory): no spare then.
                with suppress(OSError):
                    os.unlink(keep)
            return replaced
        finally:
            _saving.discard(keep.name)


def spare_path_for(file: Path) -> Path:
    """``<file>.spare``: the version of the memory file before the last save, kept so that the next
    save can write into its blocks rather than into new ones (see staged)."""
    return file.with_name(f"{file.name}.spare")


_SETLEASE: Final = getattr(fcntl, "F_SETLEASE", None) if fcntl is not None else None
_BUSY: Final = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EBUSY})

_without_leases: Final[set[Path]] = set()
"""Memory files whose filesystem grants no leases: they keep no spare (it could never be used)."""


def _keeps_spare(file: Path) -> bool:
    return _SETLEASE is not None and file not in _without_leases


def _spare_to_overwrite(file: Path) -> int | None:
    """A descriptor for writing over the spare, or None when it must not be written over.

    The spare must be a regular file of this user with no other name (a hard link planted to it
    elsewhere would be written into), and no process may have it open: it is the memory file of
    one save before, which a reader that opened it then may still be reading, and such a reader
    must keep seeing that version whole. Linux proves the second by granting a write lease, which
    it does only while nobody else has the file open (and mapped); the lease is given back at once,
    because a later open of the spare by its name (a backup tool) only reads a file being written,
    which it is. Elsewhere, and on a filesystem that grants no leases, every save goes through a
    new temporary file and no spare is kept."""
    lease = _SETLEASE
    if lease is None or not _keeps_spare(file):
        return None
    try:
        fd = os.open(spare_path_for(file), os.O_WRONLY | _CLOEXEC | _NOFOLLOW | _NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
            raise OSError(errno.EPERM, "not a spare this process may write over")
        try:
            fcntl.fcntl(fd, lease, fcntl.F_WRLCK)
        except OSError as error:
            if error.errno not in _BUSY:
                # Not "open elsewhere" but "no leases here" (a network filesystem): saves go through
                # temporary files from now on, and the spare, of no use, goes.
                _without_leases.add(file)
                with suppress(OSError):
                    os.unlink(spare_path_for(file))
            raise
        fcntl.fcntl(fd, lease, fcntl.F_UNLCK)
        if stat.S_IMODE(st.st_mode) != PRIVATE:
            os.fchmod(fd, PRIVATE)  # it was the memory file: maybe made by another program, readable by others
    except OSError:
        os.close(fd)
        return None
    return fd


def _write_durably(fd: int, content: list[bytes]) -> Signature:
    """Writes `content` from the start of the file `fd` and nothing after it (a spare may have been
    longer), flushes it to disk, and closes `fd`: the signature of what was written."""
    try:
        write_pieces(fd, content)
        os.ftruncate(fd, sum(map(len, content)))
        os.fsync(fd)
        return signature_of(os.fstat(fd))
    finally:
        os.close(fd)


def _open_old_spare(spare: Path) -> int | None:
    try:
        return os.open(spare, os.O_RDONLY | _CLOEXEC | _NOFOLLOW | _NONBLOCK)
    except OSError:
        return None


@contextmanager
def staged(file: Path, pieces: Iterable[bytes]) -> Iterator[Staged]:
    """The ``pieces`` durably in a file next to ``file``, ready to be put in its place.

    That file is the spare when it may be written over (the blocks and cached pages of the file
    it replaced are reused: a new file costs fresh pages, which on a virtual machine can take ten
    times as long as the copy itself), else a new temporary file, which is gone afterwards
    whatever happens (renamed, or removed). A spare written but not put in place is still only
    the spare."""
    content = list(pieces)  # kept for the next write to compare the file with
    if (fd := _spare_to_overwrite(file)) is not None:
        yield Staged(spare_path_for(file), _write_durably(fd, content), content)
        return
    path = temporary_name(file)
    _saving.add(path.name)
    try:
        fd = _open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except BaseException:
        _saving.discard(path.name)
        raise
    try:
        yield Staged(path, _write_durably(fd, content), content)
    finally:
        _saving.discard(path.name)
        with suppress(FileNotFoundError):
            os.unlink(path)


def fsync_directory(directory: Path) -> None:
    """Makes a rename in ``directory`` durable; best effort where a filesystem cannot."""
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def create_private_directories(directory: Path) -> None:
    """``directory`` and its missing parents, each created mode 0700 whatever the umask.
    Directories that already exist are left as they are."""
    missing = []
    for candidate in (directory, *directory.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        try:
            os.mkdir(candidate, PRIVATE_DIRECTORY)
        except FileExistsError:
            if not candidate.is_dir():
                raise
            continue  # made by another process meanwhile: theirs, as they made it
        # mkdir's mode passes through the umask, which can only narrow it; a umask of 0o700 would lock us out.
        os.chmod(candidate, PRIVATE_DIRECTORY)


# -- side files ----------------------------------------------------------------------------------------


def rejected_path_for(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.name + ".rejected")


def append_rejected(side_file: Path, lines: Sequence[Rejected]) -> None:
    fd = _open_private(side_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        write_all(fd, b"".join(line.line + b"\n" for line in lines))
        os.fsync(fd)
    finally:
        os.close(fd)
