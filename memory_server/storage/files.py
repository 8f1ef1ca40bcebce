"""The files next to the memory file, opened so that what is on disk is what it seems.

The memory file must be a regular file (or a symlink to one): a FIFO would block every open, and
renaming a new file over a device node would replace the device. Side files are opened without
following links, and a side file with a second name (a planted hard link) is refused, so that the
server never writes into a file someone else pointed it at. Saves go through a temporary file,
named after the writing process so that only debris of dead writers is ever removed.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Final, NamedTuple, TypeAlias

from ..model.records import Rejected
from ..osio import (
    MEMORY_ADVICE,
    PRIVATE_DIRECTORY,
    open_regular,
    read_all,
    write_all,
)

log = logging.getLogger("memory_server")
_COMPARE_CHUNK: Final = 1 << 20

Signature: TypeAlias = tuple[int, int, int, int] | None
"""(st_mtime_ns, st_size, st_ino, st_dev) of the memory file; None while it does not exist."""


def signature_of(st: os.stat_result) -> Signature:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)


def stat_signature(file: Path) -> Signature:
    try:
        return signature_of(os.stat(file))
    except FileNotFoundError:
        return None


def open_memory_file(file: Path) -> int | None:
    """A read-only descriptor of the memory file (a symlink to one is followed), or None when it
    does not exist."""
    try:
        return open_regular(file, follow=True, advice=MEMORY_ADVICE)
    except FileNotFoundError:
        return None


def read_file(file: Path) -> tuple[bytes, Signature]:
    """The file's bytes and the signature of exactly what was read; (b"", None) when missing."""
    fd = open_memory_file(file)
    if fd is None:
        return b"", None
    try:
        signature = signature_of(os.fstat(fd))
        return read_all(fd), signature
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
    return open_regular(path, flags, private=True)


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

    Called only while holding the lock. The spare of an earlier version goes too (see
    remove_old_spare), and the takeover guard of a breaker that was killed (see
    lock.remove_dead_guard). A name whose writer is still alive is left alone (it may be a writer
    that took over the lock from this one); one that cannot be removed (a directory planted under
    that name, a file we may not delete) is reported once and skipped."""
    from .lock import process_gone, remove_dead_guard  # (lock.py builds on this module)

    _unlink_spare(file)
    remove_dead_guard(file)
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
        """Renames the staged file over ``file``: the version it replaces is gone with its name (a
        reader that has it open keeps reading it whole until it closes it).

        Returns a descriptor of that version when one could be had, or None. The rename then only
        unlinks it; closing the descriptor frees its pages and blocks, work the rename would
        otherwise do while the writer waits, which the caller does once the answer has gone. Until
        then it is in no file: it has no name, and a crash frees it at the next mount."""
        replaced = _open_replaced(file)
        try:
            os.replace(self.path, file)
        except BaseException:
            if replaced is not None:
                os.close(replaced)
            raise
        return replaced


def _open_replaced(file: Path) -> int | None:
    try:
        return open_regular(file)
    except OSError:
        return None


def _write_durably(fd: int, content: list[bytes]) -> Signature:
    """Writes `content` into the new file `fd`, flushes it to disk, and closes `fd`: the signature of
    what was written."""
    try:
        write_pieces(fd, content)
        os.fsync(fd)
        return signature_of(os.fstat(fd))
    finally:
        os.close(fd)


@contextmanager
def staged(file: Path, pieces: Iterable[bytes]) -> Iterator[Staged]:
    """The ``pieces`` durably in a new temporary file next to ``file``, ready to be put in its place.

    The file is created for this save alone (O_EXCL, never through a link) and private (0600) from
    its first byte; it is gone afterwards whatever happens: renamed over ``file``, or removed."""
    content = list(pieces)  # kept for the next write to compare the file with
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


def spare_path_for(file: Path) -> Path:
    """``<file>.spare``: where earlier versions kept the memory file as it was before the last
    save. It holds what later writes removed, so this version deletes it (see remove_old_spare)."""
    return file.with_name(f"{file.name}.spare")


def remove_old_spare(file: Path, held: Callable[[], AbstractContextManager[object]]) -> None:
    """Removes the spare an older version left, under the lock ``held()`` takes (an older server
    sharing the file writes its spare only while it holds the lock). Costs one lstat when there is
    none. When the lock is busy or the spare cannot go, the next save removes it (remove_debris)."""
    try:
        st = os.lstat(spare_path_for(file))
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return  # not a file an older version made: nothing of ours
    with suppress(Exception), held():
        _unlink_spare(file)


def _unlink_spare(file: Path) -> None:
    spare = spare_path_for(file)
    try:
        st = os.lstat(spare)
        if stat.S_ISREG(st.st_mode):
            spare.unlink()
    except FileNotFoundError:
        pass
    except OSError as error:
        if _unremovable.first_time(spare):
            log.warning("%s holds an older version of the memory file (left by an earlier version, which kept one) but "
                        "cannot be removed (%s). Remove it by hand: it may hold deleted facts.", spare,
                        error.strerror)


def let_go_of_cached(file: Path) -> None:
    """Hands the kernel back the cached pages of the memory file's current version, just before a
    save writes the version that replaces it (best effort: a platform or file that cannot is left
    as it is).

    The new file needs as many fresh pages as the old one holds, and the old one's go when the
    rename makes it nameless anyway. Freed here, by the saving thread, they are the pages the
    kernel gives its write straight back: memory in use. Otherwise the write took whatever was
    free, and on a virtual machine that hands memory it has not used for a while back to its host
    (free page reporting, as cloud and desktop hypervisors do), a page touched again costs a fault
    in the host, several times the write itself (figures: docs/benchmarks.md, "Figures behind the
    code"). Clean pages only: what another program wrote and the disk has not got yet
    stays. Called once the comparison of G3 has read the file, which would otherwise read it
    from the disk again."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    with suppress(OSError):
        fd = open_memory_file(file)
        if fd is not None:
            try:
                advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def fsync_directory(directory: Path) -> None:
    """Makes a rename in ``directory`` durable; best effort where a filesystem cannot."""
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def create_private_directories(directory: Path) -> list[Path]:
    """``directory`` and its missing parents, each created mode 0700 whatever the umask; the ones
    made, outermost first. Directories that already exist are left as they are. When one cannot be
    made, the ones this call made are removed again (when still empty) and the OSError raised."""
    missing = []
    for candidate in (directory, *directory.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    made: list[Path] = []
    try:
        for candidate in reversed(missing):
            try:
                os.mkdir(candidate, PRIVATE_DIRECTORY)
            except FileExistsError:
                if not candidate.is_dir():
                    raise
                continue  # made by another process meanwhile: theirs, as they made it
            made.append(candidate)
            # mkdir's mode passes through the umask, which can only narrow it; a umask of 0o700 would lock us out.
            os.chmod(candidate, PRIVATE_DIRECTORY)
    except OSError:
        remove_empty_directories(made)
        raise
    return made


def remove_empty_directories(made: Sequence[Path]) -> None:
    """The directories of `made` (outermost first) that are still empty, removed innermost first;
    one another process has put something in stays, and so do the ones outside it."""
    for directory in reversed(made):
        try:
            os.rmdir(directory)
        except OSError:
            return


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
