"""`mcp-server-memory export -o FILE`: written whole through a new temporary file with a name nobody
can guess (O_EXCL|O_NOFOLLOW), private (0600) unless --mode says otherwise, and renamed over FILE:
nothing planted beside it, at its temporary name or at its own name, is ever followed."""

from __future__ import annotations

import argparse
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from memory_helpers import entity, entity_record, record_line, server_environment, write_reference_file

from memory_server.cli import commands

CONSOLE_SCRIPT = Path(sys.executable).with_name("mcp-server-memory")
ALICE = record_line(entity_record(entity("Alice", "person", ["Loves jazz"])))


def run(*arguments: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    command = ["/bin/sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", str(CONSOLE_SCRIPT), *arguments]
    return subprocess.run(command, env=server_environment(None), capture_output=True, text=True, timeout=60)


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    path = tmp_path / "memory.jsonl"
    write_reference_file(path, [ALICE])
    return path


def test_an_export_is_private_like_the_memory_whatever_the_umask(memory: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "out.md"
    out.parent.mkdir()
    done = run("export", "--file", str(memory), "--format", "markdown", "-o", str(out), umask=0)
    assert done.returncode == 0, done
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "Alice" in out.read_text()
    assert sorted(path.name for path in out.parent.iterdir()) == ["out.md"]


def test_the_mode_can_be_asked_for(memory: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.dot"
    done = run("export", "--file", str(memory), "--format", "dot", "-o", str(out), "--mode", "644", umask=0o077)
    assert done.returncode == 0, done
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    bad = run("export", "--file", str(memory), "--format", "dot", "-o", str(out), "--mode", "rw-r--r--")
    assert bad.returncode == 2 and "not a file mode in octal" in bad.stderr


def test_a_symlink_at_the_target_s_name_is_replaced_never_followed(memory: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    out = tmp_path / "out.md"
    out.symlink_to(victim)
    assert run("export", "--file", str(memory), "--format", "markdown", "-o", str(out)).returncode == 0
    assert victim.read_text() == "someone else's file\n"
    assert not out.is_symlink() and "Alice" in out.read_text()


def test_the_old_predictable_temporary_names_are_not_used(memory: Path, tmp_path: Path) -> None:
    # Symlinks planted at the names the previous version used (.out.md.<pid>.tmp) for every pid the
    # export could get next are never followed: the name is unpredictable now.
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    out = tmp_path / "out.md"
    first = os.getpid()
    planted = [tmp_path / f".out.md.{pid}.tmp" for pid in range(first, first + 400)]
    for link in planted:
        link.symlink_to(victim)
    assert run("export", "--file", str(memory), "--format", "markdown", "-o", str(out)).returncode == 0
    assert victim.read_text() == "someone else's file\n"
    assert not out.is_symlink() and "Alice" in out.read_text()
    assert all(link.is_symlink() for link in planted)


def test_a_link_planted_at_the_very_temporary_name_makes_the_export_fail_and_changes_nothing(
        memory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The name is made predictable here (the one thing not real) to plant a link exactly there.
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    out = tmp_path / "out.md"
    monkeypatch.setattr(commands.secrets, "token_hex", lambda size: "ab" * size)
    (tmp_path / f".out.md.{'ab' * 16}.tmp").symlink_to(victim)
    with pytest.raises(commands.CommandError, match=f"cannot write {out}"):
        commands._write_file(iter(["text"]), out)
    assert victim.read_text() == "someone else's file\n"
    assert not out.exists()


def test_a_failed_export_leaves_no_temporary_file(memory: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.md"
    out.mkdir()  # nothing can be renamed over a directory
    done = run("export", "--file", str(memory), "--format", "markdown", "-o", str(out))
    assert done.returncode == 2 and f"cannot write {out}" in done.stderr, done
    assert sorted(path.name for path in tmp_path.iterdir()) == ["memory.jsonl", "out.md"]


def test_the_export_arguments_parse() -> None:
    parser = argparse.ArgumentParser(prog="mcp-server-memory")
    commands.add_commands(parser)
    args = parser.parse_args(["export", "--format", "json", "-o", "x"])
    assert args.mode == 0o600
