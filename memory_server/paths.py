"""Where the memory file lives: MEMORY_FILE_PATH, or memory.jsonl next to the server (with the
one-time move of a legacy memory.json)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

DEFAULT_NAME: Final = "memory.jsonl"
LEGACY_NAME: Final = "memory.json"
# The reference server's words, so that logs read the same whichever server migrated.
MIGRATION_STARTED: Final = (
    "DETECTED: Found legacy memory.json file, migrating to memory.jsonl for JSONL format compatibility"
)
MIGRATION_DONE: Final = "COMPLETED: Successfully migrated memory.json to memory.jsonl"


def resolve_memory_path(env: Mapping[str, str], server_dir: Path, log: Callable[[str], None]) -> Path:
    """The memory file to use.

    ``MEMORY_FILE_PATH`` absolute: as is. Relative: against ``server_dir``. Unset or empty:
    ``server_dir/memory.jsonl``, first renaming a legacy ``memory.json`` to it when only the
    legacy file exists. Absolute or relative is decided by the running OS's path rules.
    Nothing is created here: the store creates missing directories on its first write.
    """
    if configured := env.get("MEMORY_FILE_PATH"):
        return configured_path(configured, server_dir)
    legacy, current = server_dir / LEGACY_NAME, server_dir / DEFAULT_NAME
    if legacy.exists() and not current.exists():
        log(MIGRATION_STARTED)
        try:
            moved = _move_without_overwriting(legacy, current)
        except OSError as error:
            # Starting on an empty memory.jsonl would hide the user's memory; keep using theirs.
            log(f"Could not rename {legacy} to {current} ({error.strerror}); using {legacy} as it is")
            return legacy
        if moved:
            log(MIGRATION_DONE)
    return current


def configured_path(configured: str, server_dir: Path) -> Path:
    if os.path.isabs(configured):
        return Path(configured)
    return Path(os.path.normpath(os.path.join(server_dir, configured)))


def _move_without_overwriting(source: Path, target: Path) -> bool:
    """Renames source to target unless target appeared meanwhile; False when another process
    (a second server starting at the same moment) did the move first."""
    try:
        # A hard link fails when the target exists, where a rename would silently replace it.
        os.link(source, target)
    except (FileExistsError, FileNotFoundError):
        return False
    except OSError:
        # No hard links on this filesystem: a plain rename, racing only against a simultaneous start.
        try:
            os.rename(source, target)
        except FileNotFoundError:
            return False
        return True
    source.unlink(missing_ok=True)
    return True
