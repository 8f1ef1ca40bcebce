"""The memory file's bytes on disk (memory_server/storage/files.py): a save writes exactly its pieces, and the
comparison before a save says "the same" only for exactly the same bytes, whatever the pieces' sizes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_server.storage import files

pieces_lists = st.lists(st.binary(max_size=40), max_size=8)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200)
@given(pieces=pieces_lists, chunk=st.integers(1, 50), change=st.sampled_from(["none", "flip", "cut", "grow"]),
       where=st.integers(0, 1000))
def test_the_file_holds_the_pieces_only_when_its_bytes_are_theirs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pieces: list[bytes], chunk: int, change: str,
        where: int) -> None:
    monkeypatch.setattr(files, "_COMPARE_CHUNK", chunk)  # reads end inside pieces and span several
    data = bytearray(b"".join(pieces))
    if change == "flip" and data:
        data[where % len(data)] ^= 0x01
    elif change == "cut" and data:
        del data[where % len(data):]
    elif change == "grow":
        data += b"x"
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(bytes(data))
    assert files.holds(memory, pieces) == (bytes(data) == b"".join(pieces))


def test_a_missing_file_holds_only_nothing(tmp_path: Path) -> None:
    assert files.holds(tmp_path / "none.jsonl", [b"", b""])
    assert not files.holds(tmp_path / "none.jsonl", [b"x"])


@pytest.mark.parametrize("batch", [1, 3, 1024])
def test_pieces_are_written_one_after_the_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    monkeypatch.setattr(files, "_IOV_MAX", batch)  # several system calls, each of a few pieces
    pieces = [bytes([65 + n % 26]) * (n * 37 % 101) for n in range(50)]
    memory = tmp_path / "memory.jsonl"
    with files.staged(memory, iter(pieces)) as temporary:
        assert temporary.content == pieces
        assert temporary.path.read_bytes() == b"".join(pieces)
    assert not any(tmp_path.iterdir()), "the temporary file is gone when it was not renamed into place"


def test_a_short_write_goes_on_where_it_stopped_and_a_failed_one_says_so(tmp_path: Path) -> None:
    # A file size limit makes a write short at the limit and the next one fail (EFBIG), for real.
    script = textwrap.dedent("""
        import os, resource, signal, sys
        from memory_server.storage import files
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        path, limit = sys.argv[1], int(sys.argv[2])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            files.write_pieces(fd, [b"a" * 100, b"b" * 100, b"c" * 100])
        except OSError as error:
            print("failed", error.errno == __import__("errno").EFBIG)
        else:
            print("written")
    """)
    target = tmp_path / "out"
    for limit, expected in ((1 << 20, b"written"), (150, b"failed True")):
        done = subprocess.run([sys.executable, "-c", script, str(target), str(limit)], capture_output=True,
                              timeout=60, cwd=Path(__file__).resolve().parent.parent)
        assert done.stdout.strip() == expected, done.stderr.decode()
        assert target.read_bytes() == (b"a" * 100 + b"b" * 100 + b"c" * 100)[:min(limit, 300)]
    os.unlink(target)
