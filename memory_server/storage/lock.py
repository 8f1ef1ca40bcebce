"""``<memory file>.lock``: one writer at a time across processes, on any local filesystem.

The protocol (every process sharing a memory file follows it, this version and the previous one):

- A writer holds the lock while ``<file>.lock`` exists with its record. The record is written to a
  private file first and linked to the lock name in one step (a link fails if the name exists), so
  the lock file is never seen empty or half-written.
- The record is filelock's lease marker format, which the previous version (filelock 4.3 leases)
  writes and reads, so old and new servers sharing a file during an upgrade exclude each other::

      filelock/2
      pid=<pid>
      host=<host name>[?pidns-<namespace>]
      mode=lease
      token=<32 hex>
      duration=<stale time in seconds>
      start=<the process's start time, in clock ticks after boot>

- The holder refreshes the file's modification time every ``refresh_every`` seconds: quick work
  of the process's Background (memory_server/background.py B5), which its close joins. A lock
  held once that Background is closed (the process is ending) is not refreshed: a write that then
  outlasts ``stale_after`` finds its lock taken over and fails, changing nothing (below).
- A waiter takes over a lock whose process is gone on this host (a recycled pid is told apart by
  its start time) at once, and any other lock once it has gone ``stale_after`` seconds without a
  refresh, whoever wrote it and whatever its record says (another host or container, an older
  version's record, an empty or unreadable file): its age is now minus its modification time,
  so a lock two minutes old is taken at the first look, however long the waiter has watched it.
- Clocks: the holder's refresh sets the modification time from the clock of the host that owns a
  local filesystem, and the waiter reads the same clock. A lock whose time lies ahead of now (the
  clock was set back, or the file was touched by hand) counts from when the waiter first saw it
  unchanged, on its monotonic clock, so it is taken ``stale_after`` seconds later at most. A clock
  set forward by more than ``stale_after`` makes a live holder's lock look stale: it is taken, and
  the holder, finding its lock replaced, fails its write changing nothing (below). On a network
  filesystem the file server's clock sets the time; hosts whose clocks differ from it by more than
  ``stale_after`` see the same two cases.
- A lock file's name holding something else (a FIFO, a directory, a symbolic link) is never
  opened in a way that waits, and never taken over: writes fail at once, saying what to remove.
- Takeovers happen one at a time, under ``<file>.lock.break``, itself such a lock file: a waiter
  that finds it taken skips that round. The taker renames its own record over the stale one, so the
  lock name never goes missing and no third process can slip in between.
- A holder checks, just before it renames the new memory file into place, that the lock file is
  still the one it created; a holder that was paused past the stale time finds it replaced and
  fails its write, changing nothing.
"""

from __future__ import annotations

import errno
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final, NamedTuple

import msgspec

from .. import background
from ..model.graph import GraphError
from ..osio import NotARegularFile, open_regular, write_all

__all__ = [
    "LOCK_REFRESH_EVERY",
    "LOCK_STALE_AFTER",
    "LOCK_TIMEOUT",
    "TIMINGS_VARIABLE",
    "LockTimeout",
    "LockTimings",
    "MemoryFileLock",
    "WriteAbandoned",
    "lock_path_for",
    "process_gone",
    "remove_dead_guard",
]

LOCK_TIMEOUT: Final = 60.0
"""Seconds a write waits for the lock before giving up."""
LOCK_STALE_AFTER: Final = 30.0
"""Seconds without a refresh after which a lock counts as abandoned. Every sharer must agree."""
LOCK_REFRESH_EVERY: Final = 15.0
"""Seconds between refreshes of a held lock."""

TIMINGS_VARIABLE: Final = "MEMORY_LOCK_TIMINGS"
"""For tests only: ``<stale>,<refresh>[,<timeout>]`` seconds instead of 30, 15 and 60. Every
process sharing the memory file must be started with the same value."""

POLL_INTERVAL: Final = 0.05
_PRIVATE: Final = 0o600
_RECORD_LIMIT: Final = 4096
_PROTOCOL: Final = "filelock/2"
_INITIAL_PID_NAMESPACE: Final = 0xEFFFFFFC  # the inode Linux gives the first PID namespace


class LockTimeout(GraphError):
    """The memory file stayed locked by another process for the whole wait; nothing was changed."""


class WriteAbandoned(GraphError):
    """The caller gave up (it was cancelled, the server is shutting down) while the write waited for
    the lock; nothing was changed."""


class LockTimings(msgspec.Struct, frozen=True):
    timeout: float = LOCK_TIMEOUT
    stale_after: float = LOCK_STALE_AFTER
    refresh_every: float = LOCK_REFRESH_EVERY

    @classmethod
    def from_environment(cls, environment: Mapping[str, str]) -> LockTimings:
        """The timings of ``MEMORY_LOCK_TIMINGS`` (see TIMINGS_VARIABLE), or the defaults."""
        text = environment.get(TIMINGS_VARIABLE, "").strip()
        if not text:
            return cls()
        try:
            values = [float(part) for part in text.split(",")]
        except ValueError:
            values = []
        if len(values) not in (2, 3) or not 0 < values[1] < values[0] or any(value <= 0 for value in values):
            raise ValueError(f"{TIMINGS_VARIABLE} must be '<stale>,<refresh>[,<timeout>]' in seconds with "
                             f"0 < refresh < stale, got {text!r}")
        return cls(values[2] if len(values) == 3 else LOCK_TIMEOUT, values[0], values[1])


def lock_path_for(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.name + ".lock")


# --------------------------------------------------------------------------------------------
# Records, hosts and processes
# --------------------------------------------------------------------------------------------


class Record(NamedTuple):
    pid: int
    host: str
    token: str | None
    duration: float | None
    start: int | None


def encode_record(record: Record) -> bytes:
    lines = [_PROTOCOL, f"pid={record.pid}", f"host={record.host}", "mode=lease", f"token={record.token}",
             f"duration={record.duration!r}"]
    if record.start is not None:
        lines.append(f"start={record.start}")
    return "".join(line + "\n" for line in lines).encode()


def parse_record(content: bytes) -> Record | None:
    """The record of a lock file, or None for an empty, partial or foreign one."""
    try:
        text = content.decode()
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if len(lines) < 3 or lines[0] != _PROTOCOL or lines[-1] != "":
        return None
    fields = dict(line.partition("=")[::2] for line in lines[1:-1])
    try:
        pid = int(fields["pid"])
        host = fields["host"]
        duration = float(fields["duration"]) if "duration" in fields else None
        start = int(fields["start"]) if "start" in fields else None
    except (KeyError, ValueError):
        return None
    if not 1 <= pid < 2**31 or not host:
        return None
    return Record(pid, host, fields.get("token"), duration, start)


def _escaped(name: str) -> str:
    # Printable ASCII as is, every other byte (and '?') as ?xx: one token on one line.
    return "".join(chr(byte) if 0x21 <= byte <= 0x7E and byte != ord("?") else f"?{byte:02x}"
                   for byte in name.encode("utf-8", "surrogateescape"))


def this_host() -> str:
    """The host name as lock records spell it, with the PID namespace when it is not the first one:
    containers that share a host name number their processes apart, and cannot judge each other's."""
    name = _escaped(socket.gethostname()) or "?"
    with suppress(OSError):
        namespace = os.stat("/proc/self/ns/pid").st_ino
        if namespace != _INITIAL_PID_NAMESPACE:
            name += f"?pidns-{namespace:x}"
    return name


def process_start(pid: int) -> int | None:
    """When the process started, in clock ticks after boot (Linux); None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: count fields after the last ')'.
    fields = data[data.rfind(b")") + 1:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


_identities: dict[int, tuple[int, str, int | None]] = {}


def _identity() -> tuple[int, str, int | None]:
    """This process's pid, host and start time, read once per process (a fork gets its own):
    reading /proc/self/stat of a busy process can take a millisecond."""
    pid = os.getpid()
    if (known := _identities.get(pid)) is None:
        known = _identities[pid] = (pid, this_host(), process_start(pid))
    return known


def process_gone(pid: int, start: int | None) -> bool:
    """True when process ``pid`` of this host has exited (or its number now belongs to a process
    that started at another time than ``start``)."""
    if sys.platform == "win32":  # no kill(pid, 0) there: judged by age alone
        return False
    if pid == os.getpid():
        # This very process, or one that had its number before (a container restarted as pid 1).
        return start is not None and start % 2**64 != _identity()[2]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    except OSError:
        return False
    if start is None or (current := process_start(pid)) is None:
        return False
    # The previous version records the boot in the bits above the start time.
    return current != start % 2**64


# --------------------------------------------------------------------------------------------
# Lock files
# --------------------------------------------------------------------------------------------


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class _Marker:
    """One lock file (``.lock`` or its ``.break`` guard) as this process sees and judges it."""

    def __init__(self, path: Path, stale_after: float) -> None:
        self.path = path
        self.stale_after = stale_after
        self._seen: tuple[tuple[int, int, int, int], float] | None = None

    def record(self, token: str) -> bytes:
        pid, host, start = _identity()
        return encode_record(Record(pid, host, token, self.stale_after, start))

    def create(self, token: str) -> int | None:
        """Creates the lock file with its record in one step: its descriptor, or None when it exists."""
        candidate, fd = self._candidate(token)
        try:
            try:
                os.link(candidate, self.path)
            except FileExistsError:
                os.close(fd)
                return None
            except OSError as error:
                if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    os.close(fd)
                    raise
                # A filesystem without hard links: exclusive creation, then the record (a reader may
                # see it empty for a moment, and an empty lock file expires by age only).
                os.close(fd)
                return self._create_without_link(token)
        finally:
            with suppress(OSError):
                os.unlink(candidate)
        return fd

    def _candidate(self, token: str) -> tuple[Path, int]:
        candidate = self.path.with_name(f"{self.path.name}.{os.getpid()}.{token}.new")
        fd = os.open(candidate, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), _PRIVATE)
        try:
            # New, so its mode is 0600 narrowed by the umask: nobody else's to read or write.
            write_all(fd, self.record(token))
        except BaseException:
            os.close(fd)
            with suppress(OSError):
                os.unlink(candidate)
            raise
        return candidate, fd

    def _create_without_link(self, token: str) -> int | None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_CLOEXEC", 0), _PRIVATE)
        except FileExistsError:
            return None
        try:
            write_all(fd, self.record(token))
        except BaseException:
            self.remove_own(fd)
            raise
        return fd

    def replace_stale(self, token: str, stale: os.stat_result) -> int | None:
        """Renames a new record over the lock file if it is still ``stale``: the new descriptor, or None."""
        candidate, fd = self._candidate(token)
        try:
            try:
                current: os.stat_result | None = os.lstat(self.path)
            except FileNotFoundError:  # released meanwhile: the next attempt creates it afresh
                current = None
            if current is None or not _same_file(current, stale) or current.st_mtime_ns != stale.st_mtime_ns:
                # Someone else got there first: the candidate is left unused, so it goes (the next
                # attempt names its candidate the same way).
                os.close(fd)
                os.unlink(candidate)
                return None
            os.replace(candidate, self.path)
        except BaseException:
            os.close(fd)
            with suppress(OSError):
                os.unlink(candidate)
            raise
        return fd

    def is_own(self, fd: int) -> bool:
        try:
            return _same_file(os.lstat(self.path), os.fstat(fd))
        except OSError:
            return False

    def remove_own(self, fd: int) -> None:
        """Removes the lock file if it is still the one ``fd`` holds, and closes ``fd``."""
        try:
            if self.is_own(fd):
                with suppress(OSError):
                    os.unlink(self.path)
        finally:
            os.close(fd)

    def stale(self) -> os.stat_result | None:
        """The lock file's stat when it may be taken over now, else None. NotARegularFile when the
        name holds something else than a lock file (a FIFO, a directory): it is not ours to take."""
        try:
            # Read-only and without waiting: the name may not even be a regular file any more.
            fd = open_regular(self.path)
        except NotARegularFile:
            raise
        except OSError:
            return None
        try:
            # The open descriptor keeps the inode from being reused while it is judged.
            st = os.fstat(fd)
            content = os.read(fd, _RECORD_LIMIT)
        except OSError:
            return None
        finally:
            os.close(fd)
        record = parse_record(content)
        if record is not None and record.host == _identity()[1] and process_gone(record.pid, record.start):
            return st
        return st if self._unrefreshed_for(st) >= self.stale_after else None

    def _unrefreshed_for(self, st: os.stat_result) -> float:
        """How long the lock file has gone without a refresh: its age by its modification time
        (set by the holder with the clock this host reads too), or, when that time lies ahead of
        now (a clock set back, a file touched by hand), how long this waiter has seen it unchanged,
        on its monotonic clock."""
        key = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
        now = time.monotonic()
        if self._seen is None or self._seen[0] != key:
            self._seen = (key, now)
        watched = now - self._seen[1]
        return max(watched, time.time() - st.st_mtime_ns / 1e9)

    def holder(self) -> Record | None:
        try:
            fd = open_regular(self.path)
        except OSError:
            return None
        try:
            return parse_record(os.read(fd, _RECORD_LIMIT))
        except OSError:
            return None
        finally:
            os.close(fd)


class _Refresher:
    """Touches the held lock file every ``every`` seconds, and notices when it was taken over: each
    touch is quick work of the process's Background, which schedules the next."""

    def __init__(self, marker: _Marker, fd: int, every: float) -> None:
        self._marker, self._fd, self._every = marker, fd, every
        self._guard = threading.Lock()
        """Held by a touch and by stop: once stop returns, no touch uses the descriptor (which the
        hold then closes, and the system may give to another file)."""
        self._stopped = False
        self.lost = False
        self._next = background.process().later(every, self._touch, quick=True)

    def _touch(self) -> None:
        with self._guard:
            if self._stopped:
                return
            if not self._marker.is_own(self._fd):
                self.lost = True
                return
            with suppress(OSError):
                # Through the descriptor where the platform can: the name may have been taken over.
                os.utime(self._fd if os.utime in os.supports_fd else self._marker.path)
            self._next = background.process().later(self._every, self._touch, quick=True)

    def stop(self) -> None:
        with self._guard:
            self._stopped = True
            if self._next is not None:
                self._next.cancel()


class MemoryFileLock:
    """``<memory file>.lock``: held by one writer at a time, across processes."""

    def __init__(self, memory_file: Path, *, timeout: float = LOCK_TIMEOUT, stale_after: float = LOCK_STALE_AFTER,
                 refresh_every: float = LOCK_REFRESH_EVERY) -> None:
        self.memory_file = memory_file
        self.timeout = timeout
        self.path = lock_path_for(memory_file)
        self.break_path = self.path.with_name(self.path.name + ".break")
        self.stale_after = stale_after
        self.refresh_every = refresh_every
        self._lock = _Marker(self.path, stale_after)
        self._guard = _Marker(self.break_path, stale_after)
        self._held: tuple[int, _Refresher] | None = None

    @contextmanager
    def held(self, deadline: float | None = None, abandon: threading.Event | None = None) -> Iterator[None]:
        """Holds the lock for the body. LockTimeout when it cannot be had by ``deadline``
        (time.monotonic), by default ``timeout`` seconds from now; WriteAbandoned as soon as
        ``abandon`` is set while waiting."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        fd = self._acquire(deadline, abandon)
        refresher = _Refresher(self._lock, fd, self.refresh_every)
        self._held = (fd, refresher)
        try:
            yield
        finally:
            self._held = None
            refresher.stop()
            # The write is done (or failed cleanly); a failing unlink of the lock file must not hide that.
            with suppress(OSError):
                self._lock.remove_own(fd)

    def _acquire(self, deadline: float, abandon: threading.Event | None) -> int:
        token = secrets.token_hex(16)
        while True:
            try:
                fd = self._lock.create(token)
                if fd is None and (stale := self._lock.stale()) is not None:
                    fd = self._take_over(token, stale)
            except NotARegularFile as error:
                raise GraphError(f"Cannot take the lock: {error.strerror}. Nothing was "
                                 "changed.") from error
            except OSError as error:
                raise GraphError(f"Cannot create the lock file {self.path} ({error.strerror}); the directory "
                                 "holding the memory file must be writable. Nothing was changed.") from error
            if fd is not None:
                if abandon is not None and abandon.is_set():
                    self._lock.remove_own(fd)
                    raise self.abandoned_error()
                return fd
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self.timeout_error()
            pause = min(POLL_INTERVAL, remaining)
            if abandon is None:
                time.sleep(pause)
            elif abandon.wait(pause):
                raise self.abandoned_error()

    def _take_over(self, token: str, stale: os.stat_result) -> int | None:
        """Replaces a stale lock file by ours under the guard; None when the guard is taken (or
        the lock changed meanwhile): the caller looks again at its next poll."""
        guard = self._guard.create(token)
        if guard is None:
            if (abandoned := self._guard.stale()) is not None:
                # A breaker that died or froze mid-break; its guard goes, the next round takes it.
                with suppress(OSError), _pinned(self.break_path) as pinned:
                    if pinned is not None and _same_file(pinned, abandoned):
                        os.unlink(self.break_path)
            return None
        try:
            return self._lock.replace_stale(token, stale)
        finally:
            self._guard.remove_own(guard)

    def raise_if_lost(self) -> None:
        """GraphError when another process broke this lock (this one stalled past the stale time)."""
        held = self._held
        if held is None or held[1].lost or not self._lock.is_own(held[0]):
            raise GraphError(
                f"Another process took over the lock on {self.memory_file} while this write was stalled "
                f"for more than {self.stale_after:g} seconds. Nothing was changed; try again.")

    def timeout_error(self) -> LockTimeout:
        holder = ""
        if (record := self._lock.holder()) is not None:
            holder = f", held by process {record.pid} on {record.host}"
        return LockTimeout(f"The memory file {self.memory_file} is locked by another process (lock file "
                           f"{self.path}{holder}); gave up after {self.timeout:g} seconds. Nothing was changed; "
                           "try again later.")

    def abandoned_error(self) -> WriteAbandoned:
        return WriteAbandoned(f"The write to {self.memory_file} was abandoned while it waited for the lock "
                              "(the request was cancelled or the server is shutting down). Nothing was changed.")


@contextmanager
def _pinned(path: Path) -> Iterator[os.stat_result | None]:
    """The stat of ``path`` while a descriptor keeps its inode from being reused."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        yield None
        return
    try:
        yield os.fstat(fd)
    finally:
        os.close(fd)


def remove_dead_guard(memory_file: Path) -> None:
    """Removes ``<file>.lock.break`` when the breaker that made it has exited on this host (killed
    mid-takeover), so that nothing of ours stays beside the memory after writes. Called with the
    lock held; a guard of a live or unknown breaker is left to expire by age (see _take_over)."""
    guard = lock_path_for(memory_file).with_name(lock_path_for(memory_file).name + ".break")
    try:
        fd = open_regular(guard)
    except OSError:
        return
    try:
        record = parse_record(os.read(fd, _RECORD_LIMIT))
        if record is None or record.host != _identity()[1] or not process_gone(record.pid, record.start):
            return
        with suppress(OSError):
            if _same_file(os.lstat(guard), os.fstat(fd)):
                os.unlink(guard)
    except OSError:
        return
    finally:
        os.close(fd)
