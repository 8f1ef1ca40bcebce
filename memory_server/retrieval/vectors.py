"""``<memory file>.vectors``: the meaning of each observation text, kept beside the memory so that
a new server process answers by meaning at once instead of embedding the whole memory again.

It holds one int8 vector per distinct observation text (with its scale), keyed by the first 16
bytes of the text's sha256, never the text itself. It is never the source of truth: a search
looks a vector up only by the key of a text the memory holds now. Numbered, as
tests/test_vectors.py checks them:

V1. It is private: written to a new temporary file created exclusively, never through a link,
    mode 0600 from its first byte, flushed, then renamed over the old one, never changed in place:
    a reader sees a whole file or none. A temporary file left by a killed process is removed by
    the next write.
V2. It is used only for the model that made it and the memory it sits beside: its header names
    the model file's sha256 and the memory file's name. Another model's or another memory's file
    is not used, and the next save replaces it (the memory is embedded again).
V3. A file that is damaged (cut short, a changed byte, a wrong length) fails its BLAKE2 digest
    over every byte before it, and is not used (and is replaced by the next save). A missing
    file is made by the first save. Deleting it loses nothing.
V4. What is deleted is gone: each save writes the vectors of the live graph's texts only (the
    graph last searched, or at the end of the process the store's graph as it is then). A text
    deleted from the memory leaves the file at the next save after the engine sees a graph
    without it: a search, the end of the background's embedding, or the process's close. A
    vector read from the file whose text is not in the first graph searched is dropped, and the
    file rewritten without it.
V5. Something at its name that is not a regular file of this user's (a FIFO, a directory, a
    symbolic link, a hard link to another file) is neither read nor replaced: vectors are then
    kept in memory only, and stderr says so once.
V6. Its vectors are the ones the model gives for those texts: a process that finds a text's key
    there answers for that text without running the model on it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

MAGIC: Final = b"kg-memory vectors 1\n"
KEY_BYTES: Final = 16
DIGEST_BYTES: Final = 32
DIMENSIONS: Final = 384
_PERSON: Final = b"memory.vectors"


def vectors_path(memory_file: Path) -> Path:
    return memory_file.with_name(memory_file.name + ".vectors")


def _digest(data: bytes | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES, person=_PERSON).digest()


class VectorFile:
    """The side file of one memory: read once at the model's load, written whole at each save."""

    def __init__(self, path: Path, memory_name: str) -> None:
        self.path = Path(path)
        self.memory_name = memory_name
        self.refused = False
        """Set when something not ours is at the name (V5): nothing is read or written then."""

    def _refuse(self, why: str) -> None:
        if not self.refused:
            self.refused = True
            print(f"mcp-server-memory: the vectors are kept in memory only: {self.path} {why}; remove it",
                  file=sys.stderr, flush=True)

    def read(self, model: str) -> tuple[Any, Any, Any] | None:
        """The keys (numpy "S16"), int8 vectors and scales the file holds for `model` (V2, V3), the
        first two views of one buffer read whole; None when there is no usable file."""
        import numpy as np

        from ..osio import NotARegularFile, open_regular

        try:
            fd = open_regular(self.path, private=True)
        except FileNotFoundError:
            return None
        except NotARegularFile as error:
            self._refuse(f"is not a file this server may use ({error.strerror})")
            return None
        except OSError:
            return None
        try:
            data = _read_whole(fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        return None if data is None else _parse(data, model, self.memory_name, np)

    def write(self, model: str, keys: Sequence[bytes], quantized: Any, scales: Any) -> bool:
        """Replace the file by one holding these vectors (V1); False when it could not be written."""
        import numpy as np

        from ..osio import NotARegularFile, open_regular, refuse_unless_regular

        if self.refused:
            return False
        try:
            refuse_unless_regular(self.path)
        except NotARegularFile as error:
            self._refuse(f"is not a file this server may use ({error.strerror})")
            return False
        header = json.dumps({"model": model, "memory": self.memory_name, "dimensions": DIMENSIONS,
                             "count": len(keys)}, sort_keys=True).encode() + b"\n"
        body = [MAGIC, header, b"".join(keys), np.ascontiguousarray(scales, dtype="<f4").tobytes(),
                np.ascontiguousarray(quantized, dtype=np.int8).tobytes()]
        hasher = hashlib.blake2b(digest_size=DIGEST_BYTES, person=_PERSON)
        for piece in body:
            hasher.update(piece)
        body.append(hasher.digest())
        self._remove_debris()
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
        try:
            fd = open_regular(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, private=True)
        except OSError:
            return False
        try:
            try:
                for piece in body:
                    view = memoryview(piece)
                    while view:
                        view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
            return False
        return True

    def _remove_debris(self) -> None:
        pattern = re.compile(re.escape(self.path.name) + r"\.(\d+)\.[0-9a-f]{16}\.tmp")
        try:
            names = os.listdir(self.path.parent)
        except OSError:
            return
        for name in names:
            if (match := pattern.fullmatch(name)) is not None and not _alive(int(match.group(1))):
                with contextlib.suppress(OSError):
                    (self.path.parent / name).unlink()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError as error:
        return error.errno == errno.EPERM
    return True


def _read_whole(fd: int) -> bytearray | None:
    """The file's bytes in one buffer of its size (the vectors become a view of it, not a copy);
    None when it changed size while read."""
    size = os.fstat(fd).st_size
    data = bytearray(size)
    view = memoryview(data)
    done = 0
    while done < size and (got := os.readv(fd, [view[done:]])):
        done += got
    return data if done == size and not os.read(fd, 1) else None


def _parse(data: bytearray, model: str, memory_name: str, np: Any) -> tuple[Any, Any, Any] | None:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + DIGEST_BYTES:
        return None
    view = memoryview(data)
    if _digest(view[:-DIGEST_BYTES]) != data[-DIGEST_BYTES:]:
        return None  # V3
    end = data.find(b"\n", len(MAGIC))
    try:
        header = json.loads(data[len(MAGIC):end])
        count = int(header["count"])
    except (ValueError, KeyError, TypeError):
        return None
    if header.get("model") != model or header.get("memory") != memory_name or header.get("dimensions") != DIMENSIONS:
        return None  # V2
    start = end + 1
    keys_end = start + count * KEY_BYTES
    scales_end = keys_end + count * 4
    vectors_end = scales_end + count * DIMENSIONS
    if count < 0 or vectors_end != len(data) - DIGEST_BYTES:
        return None
    keys = np.frombuffer(data, dtype=f"S{KEY_BYTES}", count=count, offset=start)
    scales = np.frombuffer(data, dtype="<f4", count=count, offset=keys_end).astype(np.float32)
    quantized = np.frombuffer(data, dtype=np.int8, count=count * DIMENSIONS, offset=scales_end)
    return keys, quantized.reshape(count, DIMENSIONS), scales
