"""What the corpus recording scripts share: where things are, how `record` is started, and the
check that a fresh recording replays, several times over, against the server it came from.

Not part of the `conformance` package: the scripts beside it import it by file location.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import anyio

REPO: Final = Path(__file__).resolve().parents[2]
CORPUS: Final = Path(__file__).resolve().parent
MEMORY_ENV: Final = "MEMORY_FILE_PATH={tmp}/memory.jsonl"
# Written into transcript headers as the command, so they name no path of this machine.
MEMORY_SERVER: Final = ("python", "-m", "memory_server")
# A recording is kept only if it replays this many times in a row: a flaky line shows up here.
REPLAYS: Final = 3

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conformance.replay import ReplaySettings, replay  # noqa: E402
from conformance.report import format_failure  # noqa: E402
from conformance.transcript import Transcript, load_transcript  # noqa: E402


def interpreter_env() -> dict[str, str]:
    """PATH with this interpreter's directory first, so a bare `python` is the one running now."""
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def record_command(out: Path, description: str, server: Sequence[str]) -> list[str]:
    return [
        sys.executable, "-m", "conformance", "record", "--out", str(out), "--description", description,
        "--env", MEMORY_ENV, "--", *server,
    ]


def check_replays(path: Path, server: Sequence[str], times: int = REPLAYS) -> Transcript:
    """Replay a fresh recording against its server; any failure stops the maintainer with the report."""
    transcript = load_transcript(path)
    settings = ReplaySettings(tuple(server), interpreter_env())
    for _ in range(times):
        verdict = anyio.run(replay, transcript, settings)
        if verdict.failure is not None:
            report = format_failure(str(path), verdict.failure, verdict.stderr_tail)
            raise SystemExit(f"{path} does not replay against {' '.join(server)}:\n{report}")
    return transcript


def relative(path: Path) -> str:
    return str(path.relative_to(REPO))


# The cast of the recorded memory sessions, shared so that every session tells one story.
ADA = {"name": "Ada_Lovelace", "entityType": "person", "observations": ["Wrote the first published program"]}
BABBAGE = {"name": "Charles_Babbage", "entityType": "person", "observations": ["Designed the Difference Engine"]}
ENGINE = {"name": "Analytical_Engine", "entityType": "machine", "observations": ["Never completed"]}
WROTE = {"from": "Ada_Lovelace", "to": "Analytical_Engine", "relationType": "wrote_notes_on"}
DESIGNED = {"from": "Charles_Babbage", "to": "Analytical_Engine", "relationType": "designed"}
CORRESPONDED = {"from": "Ada_Lovelace", "to": "Charles_Babbage", "relationType": "corresponded_with"}
