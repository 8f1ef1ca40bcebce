"""Where the memory file lives: MEMORY_FILE_PATH, or memory.jsonl next to the server (with the
one-time move of a legacy memory.json), and whether that place survives a reinstall."""

from __future__ import annotations

import json
import os
import sys
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

    ``MEMORY_FILE_PATH`` absolute: as is. A leading ``~``: the home directory. Relative: against ``server_dir``. Unset or empty:
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
    # Clients start the server without a shell, so nobody else expands the ~ of "~/mcp/memory.jsonl".
    if _starts_at_home(configured):
        configured = os.path.expanduser(configured)
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


def _starts_at_home(configured: str) -> bool:
    separators = tuple(filter(None, (os.sep, os.altsep)))
    return configured == "~" or configured.startswith(tuple("~" + separator for separator in separators))


# --------------------------------------------------------------------------------------------
# A memory file inside the installed package goes with the package
# --------------------------------------------------------------------------------------------


def installation_holding(path: Path, server_dir: Path, prefix: str = sys.prefix) -> Path | None:
    """The installed package directory or Python environment that ``path`` lives in, or None.

    Whatever is under the package directory (site-packages, or the source tree of an editable
    install) or under the environment (a virtual environment, pipx's or uv's) is deleted by a
    reinstall, an upgrade or a fresh environment, and the memory file with it."""
    resolved = Path(os.path.abspath(path))
    candidates = [server_dir]
    # A prefix at the root of a drive would hold every file; it says nothing then.
    if Path(prefix).parent != Path(prefix):
        candidates.append(Path(prefix))
    for place in candidates:
        if resolved.is_relative_to(Path(os.path.abspath(place))):
            return place
    return None


def lasting_location(platform: str = sys.platform, env: Mapping[str, str] = os.environ,
                     home: str | None = None) -> str:
    """Where a memory file outlives any installation, by the platform's convention for user data."""
    home = home if home is not None else os.path.expanduser("~")
    if platform == "win32":
        appdata = env.get("APPDATA") or os.path.join(home, "AppData", "Roaming")
        return f"{appdata}\\mcp-memory\\memory.jsonl"
    if platform == "darwin":
        return f"{home}/Library/Application Support/mcp-memory/memory.jsonl"
    data = env.get("XDG_DATA_HOME") or f"{home}/.local/share"
    return f"{data}/mcp-memory/memory.jsonl"


def fragile_location_warning(path: Path, server_dir: Path, prefix: str = sys.prefix,
                             lasting: str | None = None) -> str | None:
    """What to tell a person whose memory file would be deleted with the package; None when it is safe."""
    holder = installation_holding(path, server_dir, prefix)
    if holder is None:
        return None
    lasting = lasting if lasting is not None else lasting_location()
    return (f"WARNING: the memory file {path} lives inside the installation at {holder}, so reinstalling or "
            "upgrading the package or re-creating its environment (pip, pipx reinstall, uv tool upgrade, a new "
            "virtual environment) deletes your memory with it. Keep it outside: set, in your client's "
            "configuration (after moving the file there, if it exists), "
            f"\"env\": {{\"MEMORY_FILE_PATH\": {json.dumps(lasting)}}}")


def memory_path_for_reading(env: Mapping[str, str], server_dir: Path) -> Path:
    """The memory file a read-only command looks at: the server's, without the legacy move (which
    renames a file); unset, a lone legacy memory.json is read where it is."""
    if configured := env.get("MEMORY_FILE_PATH"):
        return configured_path(configured, server_dir)
    legacy, current = server_dir / LEGACY_NAME, server_dir / DEFAULT_NAME
    return legacy if legacy.exists() and not current.exists() else current
